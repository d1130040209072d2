//! `labctl reproduce-application`: an application verified offline as
//! `verify-application` does, then its release run again here, in the
//! sandbox `labd` runs it in (`lab-tool-runner`), on its inputs fetched by
//! their attested content, with the retained request's recipe and the
//! attested limits; each output is compared with the attested one
//! (HTTP.md decision 38, TOOLS.md section 7).

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use clap::Args;
use lab_coord_auth::dsse::{open_envelope, IN_TOTO_PAYLOAD_TYPE};
use lab_coord_auth::record::sha256_text;
use lab_coord_auth::{canonical_json, Principal};
use lab_coord_client::{Check, Request as CoordRequest};
use lab_tool_runner::{
    Digest32, Effect, MemoryStore, Outcome, RunInput, RunLimits, RunOutput, Runner, RunnerSettings,
};
use serde_json::{json, Value};

use crate::apply::{fetch, leaf_entries};
use crate::call::{json_answer, signed_exchange};
use crate::checks;
use crate::failure::Failure;
use crate::Common;

#[derive(Debug, Args)]
pub struct ReproduceApplicationArgs {
    /// One label of the application's path; repeat it for each label.
    #[arg(
        long = "path",
        value_name = "LABEL",
        required = true,
        allow_hyphen_values = true
    )]
    pub path: Vec<String>,

    /// The world's root principal (`ed25519:<hex>`).
    #[arg(long, value_name = "PRINCIPAL")]
    pub root: String,

    /// Run this component file instead of fetching the release's executable
    /// at its release space; it must be the attested executable all the
    /// same.
    #[arg(long, value_name = "FILE")]
    pub component: Option<PathBuf>,
}

/// What the reproduction checks are reported as.
const WHAT: &str = "the reproduction";

/// The interpretation descriptor of an output type that names no retained
/// blob (HTTP.md decision 35).
const OUTPUT_TYPE_PURPOSE: &str = "coord.output-type.v1";

pub fn run_reproduce_application(
    args: ReproduceApplicationArgs,
    common: &Common,
) -> Result<(), Failure> {
    let root = Principal::parse(&args.root)
        .ok_or_else(|| Failure::Usage(format!("{:?} is not a principal", args.root)))?;
    let entries = leaf_entries(&args.path, common)?;
    let mut documents = std::collections::HashMap::new();
    let mut fetch_document = |hash: &str| {
        let bytes = fetch(&args.path, hash, common).ok()?;
        documents.insert(hash.to_string(), bytes.clone());
        Some(bytes)
    };
    let verified = lab_coord_client::verify_application(&entries, &mut fetch_document, &root);
    checks::report(&verified, "the application")?;
    let document = |hash: &Value| {
        hash.as_str()
            .and_then(|hash| documents.get(hash))
            .ok_or_else(|| Failure::Unverified("a verified document went missing".into()))
    };
    let attestation = entries
        .iter()
        .find(|e| e["result"].is_object())
        .map(|e| &e["result"]["attestation"])
        .unwrap_or(&Value::Null);
    let mut statement = statement(document(attestation)?, &root)?;
    let predicate = statement["predicate"].take();
    let runnable = Runnable::read(&predicate, document(&predicate["request"])?)?;

    let mut report = Vec::new();
    let description = &predicate["release"]["description"];
    let deterministic = description["deterministic"] == true;
    let wasm = match &args.component {
        Some(file) => std::fs::read(file)
            .map_err(|err| Failure::NoInput(format!("{}: {err}", file.display())))?,
        None => {
            let release = space_path(&predicate["release"]["entry"], common)?;
            fetch(&release, &runnable.executable, common)?
        }
    };
    let digest = sha256_text(&wasm);
    report.push(Check::of(
        "executable",
        if digest == runnable.executable {
            Ok(())
        } else {
            Err(format!(
                "the component is {digest}, not the attested executable {}",
                runnable.executable
            ))
        },
    ));
    if any_failed(&report) {
        return checks::report(&report, WHAT);
    }
    report.push(Check {
        name: "release".into(),
        passed: true,
        detail: if deterministic {
            "deterministic: every output must match".into()
        } else {
            "not deterministic: outputs may differ, and a mismatch is still reported".into()
        },
    });

    let store = MemoryStore::default();
    let mut inputs = Vec::new();
    let mut fetched = Ok(());
    for input in predicate["inputs"].as_array().into_iter().flatten() {
        match fetch_input(input, common)? {
            Ok(bytes) => inputs.push(RunInput {
                role: text(&input["role"]),
                blob: store.put(&bytes),
                type_: text(&input["artifact"]["type"]),
            }),
            Err(why) => fetched = fetched.and(Err(why)),
        }
    }
    report.push(Check::of("inputs", fetched));
    if any_failed(&report) {
        return checks::report(&report, WHAT);
    }

    let outcome = run_locally(description, &wasm, inputs, &runnable, &store)?;
    report.extend(compare(&predicate, &outcome, deterministic));
    checks::report(&report, WHAT)
}

/// Whether a check failed: the reproduction stops there, before running.
fn any_failed(report: &[Check]) -> bool {
    report.iter().any(|c| !c.passed)
}

/// The attested statement in a verified envelope.
fn statement(envelope: &[u8], root: &Principal) -> Result<Value, Failure> {
    let unreadable = |why: String| Failure::Unverified(format!("the attestation: {why}"));
    let envelope: Value =
        serde_json::from_slice(envelope).map_err(|err| unreadable(err.to_string()))?;
    let payload = open_envelope(&envelope, IN_TOTO_PAYLOAD_TYPE, root)
        .map_err(|err| unreadable(err.to_string()))?;
    serde_json::from_slice(&payload).map_err(|err| unreadable(err.to_string()))
}

/// What a local run needs beyond the component and the inputs.
struct Runnable {
    /// The attested component digest (`executable.service_binary`).
    executable: String,
    /// The retained request's recipe, as the service passes it: RFC 8785
    /// JSON text.
    recipe: String,
    limits: RunLimits,
}

impl Runnable {
    /// Refuses an application nothing ran for: a reuse of an earlier one,
    /// an interrupted run, a run refused before it started.
    fn read(predicate: &Value, request: &[u8]) -> Result<Runnable, Failure> {
        if !predicate["reused"].is_null() {
            return Err(Failure::Usage(format!(
                "the application reused the earlier application {} and ran nothing; reproduce that one",
                predicate["reused"]["application"]
            )));
        }
        let limits = &predicate["limits"];
        let limit = |name: &str| {
            limits[name].as_u64().ok_or_else(|| {
                Failure::Usage(format!(
                    "the application has no attested limits (outcome {}, reason {}): its release did not run",
                    predicate["outcome"], predicate["reason"]
                ))
            })
        };
        let limits = RunLimits {
            memory: usize::try_from(limit("memory")?).unwrap_or(usize::MAX),
            fuel: limit("fuel")?,
            wall: Duration::from_millis(limit("wall_ms")?),
            outputs: u32::try_from(limit("outputs")?).unwrap_or(u32::MAX),
            output_bytes: limit("output_bytes")?,
        };
        let request: Value = serde_json::from_slice(request)
            .map_err(|err| Failure::Unverified(format!("the request is not JSON: {err}")))?;
        let recipe =
            String::from_utf8(canonical_json(&request["recipe"])).expect("RFC 8785 JSON is UTF-8");
        let executable = predicate["release"]["description"]["executable"]["service_binary"]
            .as_str()
            .ok_or_else(|| Failure::Unverified("the attested release names no executable".into()))?
            .to_string();
        Ok(Runnable {
            executable,
            recipe,
            limits,
        })
    }
}

fn text(value: &Value) -> String {
    value.as_str().unwrap_or_default().to_string()
}

/// The path of the space an occurrence lies in (`get`).
fn space_path(entry: &Value, common: &Common) -> Result<Vec<String>, Failure> {
    let request = CoordRequest::new("get")
        .expect("the table lists get")
        .string("root_id", entry["root_id"].as_str().unwrap_or_default())
        .string("space_id", entry["space_id"].as_str().unwrap_or_default())
        .int("position", entry["position"].as_i64().unwrap_or_default());
    let op = request.operation();
    let answer = json_answer(&mut signed_exchange(op, request, Vec::new(), common)?)?;
    answer["space"]["path"]
        .as_array()
        .and_then(|labels| {
            labels
                .iter()
                .map(|l| l.as_str().map(String::from))
                .collect::<Option<Vec<_>>>()
        })
        .ok_or_else(|| Failure::Protocol("`get` answered a space without its path".into()))
}

/// An attested input's bytes, fetched at its occurrence's space by its
/// attested content hash; `Err` inside when they do not hash to it.
fn fetch_input(input: &Value, common: &Common) -> Result<Result<Vec<u8>, String>, Failure> {
    let hash = input["artifact"]["bytes"].as_str().unwrap_or_default();
    let bytes = fetch(&space_path(&input["entry"], common)?, hash, common)?;
    let got = sha256_text(&bytes);
    Ok(if got == hash {
        Ok(bytes)
    } else {
        Err(format!(
            "the input `{}` fetched is {got}, not the attested {hash}",
            text(&input["role"])
        ))
    })
}

/// Configures the release on a fresh runner holding `store` and runs it
/// once with the attested limits.
fn run_locally(
    description: &Value,
    wasm: &[u8],
    inputs: Vec<RunInput>,
    runnable: &Runnable,
    store: &MemoryStore,
) -> Result<Outcome, Failure> {
    let settings = RunnerSettings {
        limits: runnable.limits,
        concurrent: 1,
        wait: Duration::from_secs(1),
        // The release's own declaration: the deployment that ran it
        // granted these already.
        allowed_effects: Effect::ALL.to_vec(),
        cache: None,
        // Not attested; the attested output bytes limit bounds every output.
        blob_cap: u64::MAX,
    };
    let shared = Arc::new(store.clone());
    let local = |why: String| Failure::Unverified(format!("the local run: {why}"));
    let mut runner =
        Runner::new(settings, shared.clone(), shared).map_err(|e| local(format!("{e:#}")))?;
    let release = runner
        .configure(&description.to_string(), wasm)
        .map_err(|e| local(format!("the release cannot be configured: {e}")))?;
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .map_err(|e| Failure::Io(format!("start the local runtime: {e}")))?;
    let report = runtime
        .block_on(runner.run(&release, inputs, runnable.recipe.clone()))
        .map_err(|e| local(e.to_string()))?;
    Ok(report.outcome)
}

/// The outcome, then each attested output against the reproduced one of
/// its role and ordinal, then any output reproduced but not attested.
fn compare(predicate: &Value, outcome: &Outcome, deterministic: bool) -> Vec<Check> {
    let expected = if deterministic {
        ""
    } else {
        " (possible: the release is not deterministic)"
    };
    let (name, reason, outputs): (&str, Value, &[RunOutput]) = match outcome {
        Outcome::Completed(outputs) => ("completed", Value::Null, outputs),
        Outcome::Failed(reason) => ("failed", json!(reason), &[]),
    };
    let mut checks = vec![Check::of(
        "outcome",
        if predicate["outcome"] == name && predicate["reason"] == reason {
            Ok(())
        } else {
            Err(format!(
                "mismatch{expected}: attested {} {}, reproduced {name} {reason}",
                predicate["outcome"], predicate["reason"]
            ))
        },
    )];
    let attested = predicate["outputs"].as_array().cloned().unwrap_or_default();
    for output in &attested {
        let (role, ordinal) = (text(&output["role"]), output["ordinal"].as_u64());
        let name = format!("output {role}/{}", output["ordinal"]);
        let hash = text(&output["artifact"]["bytes"]);
        let size = output["size"].as_u64().unwrap_or_default();
        let local = outputs
            .iter()
            .find(|o| o.role == role && Some(u64::from(o.ordinal)) == ordinal);
        let Some(local) = local else {
            checks.push(Check::of(
                name,
                Err(format!(
                    "mismatch{expected}: attested {hash} ({size} bytes), not reproduced"
                )),
            ));
            continue;
        };
        let got = hex_name(&local.blob);
        let same = got == hash
            && local.size == size
            && same_type(&local.type_, &output["artifact"]["type"]);
        checks.push(if same {
            Check {
                name: name.into(),
                passed: true,
                detail: format!("match {hash} ({size} bytes, {})", local.type_),
            }
        } else {
            Check::of(
                name,
                Err(format!(
                    "mismatch{expected}: attested {hash} ({size} bytes, type {}), reproduced {got} ({} bytes, type {})",
                    output["artifact"]["type"], local.size, local.type_
                )),
            )
        });
    }
    for local in outputs {
        let listed = attested
            .iter()
            .any(|o| o["role"] == local.role.as_str() && o["ordinal"] == local.ordinal);
        if !listed {
            checks.push(Check::of(
                format!("output {}/{}", local.role, local.ordinal),
                Err(format!(
                    "mismatch{expected}: reproduced {} ({} bytes), not attested",
                    hex_name(&local.blob),
                    local.size
                )),
            ));
        }
    }
    checks
}

/// The name of committed bytes (the store names them by their SHA-256).
fn hex_name(digest: &Digest32) -> String {
    format!("sha256:{}", hex::encode(digest))
}

/// Whether the attested artifact type is what the service makes of an
/// output's type: the type itself when it names a retained descriptor,
/// else the hash of `{"purpose": "coord.output-type.v1", "type": <type>}`.
fn same_type(local: &str, attested: &Value) -> bool {
    let descriptor = json!({ "purpose": OUTPUT_TYPE_PURPOSE, "type": local });
    attested == local || *attested == sha256_text(&canonical_json(&descriptor))
}
