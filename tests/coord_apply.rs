//! `apply` over the wire: the attempt batch, the run in the sandbox, the
//! output artifact spaces, the completion batch and its attestation
//! (verified offline, and tampered), replay and mismatch, every refusal
//! of its order, concurrency, `kill -9` mid-run, and the authority a
//! narrower grant does not carry.

use crate::support;
use crate::support::coord::{labels, nonce, now, try_send, Coord, Holder, Req};
use crate::support::{Labd, Response};
use lab_coord_auth::{GrantKind, Principal};
use serde_json::{json, Value};

const UPPER: &str = r#"{"name": "upper", "version": "1.0.0", "class": "transform",
  "inputs": [{"role": "text", "required": true}, {"role": "notes", "required": false}],
  "outputs": [{"role": "text"}], "effects": [], "deterministic": true, "egress": []}"#;

const HOSTILE: &str = r#"{"name": "hostile", "version": "1.0.0", "class": "test",
  "inputs": [{"role": "text", "required": false}], "outputs": [{"role": "out"}],
  "effects": [], "deterministic": true, "egress": []}"#;

const APP: &str = "projects/alpha/applications/run-1";
const A1: &str = "projects/alpha/artifacts/a1";

/// `labd` with the `upper` and `hostile` releases and `extra` settings.
fn start_with_tools(name: &str, extra: &[&str]) -> (Labd, Coord) {
    start_tools(
        name,
        &[
            ("upper", UPPER, "tool_upper"),
            ("hostile", HOSTILE, "tool_hostile"),
        ],
        extra,
    )
}

/// `labd` with `tools` (name, description, component) and `extra` settings.
fn start_tools(name: &str, tools: &[(&str, &str, &str)], extra: &[&str]) -> (Labd, Coord) {
    let dir = support::temp_dir(&format!("{name}-tools"));
    let mut args: Vec<String> = Vec::new();
    for &(tool, description, component) in tools {
        let file = dir.join(format!("{tool}.json"));
        std::fs::write(&file, description).unwrap();
        let component = support::built_component(component);
        args.push("--coord-tool".into());
        args.push(format!("{}={}", file.display(), component.display()));
    }
    args.extend(extra.iter().map(|a| a.to_string()));
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let labd = Labd::start(name, &args);
    let coord = Coord::new(&labd);
    (labd, coord)
}

impl Coord {
    /// A project `alpha` with the artifact `a1` holding `hello, world`;
    /// answers a1's content occurrence.
    fn alpha(&self) -> Value {
        self.project("alpha");
        self.artifact(A1, b"hello, world\n")
    }

    /// A publisher on project `alpha` that may read it too.
    fn publisher(&self) -> Holder {
        self.holder(20, &[GrantKind::Publish, GrantKind::Read], "projects/alpha")
    }
}

fn application(op: &str, path: &str, tool: &str, inputs: Value, recipe: Value) -> Value {
    json!({ "operation_id": op, "path": labels(path), "tool": tool, "inputs": inputs, "recipe": recipe })
}

fn created(response: &Response) -> Value {
    assert_eq!(
        response.status,
        201,
        "{}",
        String::from_utf8_lossy(&response.body)
    );
    response.json()
}

/// The facts of the application leaf, by member name.
fn members<'a>(entries: &'a [Value], member: &str) -> Vec<&'a Value> {
    entries
        .iter()
        .filter(|e| e[member].is_object())
        .map(|e| &e[member])
        .collect()
}

fn verify(coord: &Coord, entries: &[Value], tamper: Option<&str>) -> Vec<lab_coord_client::Check> {
    let root = Principal::of(&coord.root);
    let mut fetch = |hash: &str| -> Option<Vec<u8>> {
        let response = coord.fetch(APP, hash);
        (response.status == 200).then(|| {
            let mut body = response.body;
            if tamper == Some(hash) {
                let text = String::from_utf8(body).unwrap();
                body = text
                    .replacen("\"payload\":\"", "\"payload\":\"e30", 1)
                    .into_bytes();
            }
            body
        })
    };
    lab_coord_client::verify_application(entries, &mut fetch, &root)
}

#[test]
fn apply_runs_the_release_stores_outputs_attests_and_replays() {
    let (_labd, coord) = start_with_tools("coord-apply", &[]);
    let input = coord.alpha();
    let publisher = coord.publisher();
    let body = application(
        "run-1",
        APP,
        "upper",
        json!({ "text": input }),
        json!({ "mode": "all" }),
    );
    let first = created(&coord.apply(&publisher, &body));
    assert_eq!(first["replayed"], false);
    assert_eq!(first["outcome"], "completed");
    assert_eq!(first["reused"], Value::Null);
    assert!(first.get("reason").is_none(), "{first}");
    let output_bytes = support::name_of(b"HELLO, WORLD\n");
    assert_eq!(first["outputs"]["text"]["bytes"], output_bytes);

    // The leaf: the attempt batch (attempt, one bound per role), then the
    // completion batch (produced, result).
    let entries = coord.entries(APP);
    assert_eq!(entries.len(), 4, "{entries:#?}");
    let attempt = &entries[0];
    assert_eq!(first["attempt"], attempt["ref"]);
    assert_eq!(attempt["batch"], json!({ "first": 1, "last": 2 }));
    assert_eq!(attempt["attempt"]["publisher"], publisher.principal());
    assert_eq!(attempt["attempt"]["release"], first["release"]);
    let bound = &entries[1]["bound"];
    assert_eq!(bound["application"], attempt["ref"]);
    assert_eq!(bound["role"], "text");
    assert_eq!(bound["bound"], input);
    let produced = &entries[2]["produced"];
    assert_eq!(produced["application"], attempt["ref"]);
    assert_eq!(entries[2]["batch"], json!({ "first": 3, "last": 4 }));
    let result = &entries[3]["result"];
    assert_eq!(result["outcome"], "completed");
    assert_eq!(first["result"], entries[3]["ref"]);

    // The output's artifact space: staged, then content at position 2.
    let output_path = "projects/alpha/artifacts/run-1:0.0";
    let output = coord.entries(output_path);
    assert_eq!(output[0]["staged"]["application"], attempt["ref"]);
    assert_eq!(output[1]["ref"]["position"], 2);
    assert_eq!(output[1]["content"]["artifact"]["bytes"], output_bytes);
    assert_eq!(produced["produced"], output[1]["ref"]);
    assert_eq!(output[2]["child"]["key"], "declarations");
    let content = coord.fetch(output_path, &output_bytes);
    assert_eq!(content.body, b"HELLO, WORLD\n");

    // The documents the facts name are served at the leaf.
    let request = coord.fetch(APP, attempt["attempt"]["request"].as_str().unwrap());
    assert_eq!(request.status, 200);
    let request: Value = serde_json::from_slice(&request.body).unwrap();
    assert_eq!(request["normalization"], "coord.application-request.v1");
    assert_eq!(request["inputs"], json!({ "text": input }));
    assert_eq!(request["recipe"], json!({ "mode": "all" }));
    let manifest: Value =
        serde_json::from_slice(&coord.fetch(APP, result["manifest"].as_str().unwrap()).body)
            .unwrap();
    assert_eq!(manifest["outputs"][0]["entry"], output[1]["ref"]);
    assert_eq!(manifest["counts"]["outputs"], 1);
    coord
        .fetch(APP, &support::name_of(b"not named here"))
        .assert_error(409, "unresolved");

    // Verified offline: every check holds.
    let checks = verify(&coord, &entries, None);
    assert!(checks.len() >= 8, "{checks:?}");
    assert!(checks.iter().all(|c| c.passed), "{checks:#?}");

    // A retry with a fresh proof replays; another request under the same
    // operation ID is a mismatch; another identity at the leaf is `exists`.
    let again = coord.apply(&publisher, &body);
    assert_eq!(again.status, 200);
    let again = again.json();
    assert_eq!(again["replayed"], true);
    for member in ["attempt", "release", "outcome", "result", "outputs"] {
        assert_eq!(again[member], first[member], "{member}");
    }
    // `wait` is not part of the request: a retry saying it replays too.
    let mut waiting = body.clone();
    waiting["wait"] = json!(true);
    let again = coord.apply(&publisher, &waiting);
    assert_eq!(again.status, 200);
    assert_eq!(again.json()["result"], first["result"]);
    let other_recipe = application("run-1", APP, "upper", json!({ "text": input }), json!(1));
    coord
        .apply(&publisher, &other_recipe)
        .assert_error(409, "idempotency_mismatch");
    let other_identity = application(
        "run-2",
        APP,
        "upper",
        json!({ "text": input }),
        json!({ "mode": "all" }),
    );
    coord
        .apply(&publisher, &other_identity)
        .assert_error(409, "exists");
    assert_eq!(coord.entries(APP).len(), 4);
}

#[test]
fn a_tampered_attestation_or_leaf_is_refused_offline() {
    let (_labd, coord) = start_with_tools("coord-apply-tamper", &[]);
    let input = coord.alpha();
    let publisher = coord.publisher();
    let body = application("run-1", APP, "upper", json!({ "text": input }), Value::Null);
    created(&coord.apply(&publisher, &body));
    let entries = coord.entries(APP);
    assert!(verify(&coord, &entries, None).iter().all(|c| c.passed));
    let failing = |checks: Vec<lab_coord_client::Check>| -> Vec<String> {
        checks
            .iter()
            .filter(|c| !c.passed)
            .map(|c| c.name.to_string())
            .collect()
    };
    // A changed envelope no longer hashes to the result's attestation.
    let attestation = entries[3]["result"]["attestation"].as_str().unwrap();
    assert_eq!(
        failing(verify(&coord, &entries, Some(attestation))),
        ["signature"]
    );
    // A produced fact pointing elsewhere disagrees with the statement.
    let mut forged = entries.clone();
    forged[2]["produced"]["produced"]["position"] = json!(1);
    assert_eq!(failing(verify(&coord, &forged, None)), ["outputs"]);
    // Another root's key signed nothing here.
    let stranger = Principal::of(&support::coord::key(99));
    let mut fetch = |hash: &str| Some(coord.fetch(APP, hash).body);
    let checks = lab_coord_client::verify_application(&entries, &mut fetch, &stranger);
    assert_eq!(failing(checks), ["signature"]);
}

/// A documented verifier that is not ours: `scripts/verify-attestation.py`
/// with `securesystemslib` checks the DSSE envelope and prints the
/// statement's subjects. Runs when that package is importable by
/// `$LAB_PYTHON` (else `python3`); skipped with the reason otherwise.
#[test]
fn an_independent_verifier_checks_the_attestation() {
    let python = std::env::var("LAB_PYTHON").unwrap_or_else(|_| "python3".into());
    let probe = std::process::Command::new(&python)
        .args(["-c", "import securesystemslib.signer"])
        .output();
    if !probe.is_ok_and(|o| o.status.success()) {
        println!("skipped: {python} cannot import securesystemslib (set LAB_PYTHON)");
        return;
    }
    let (_labd, coord) = start_with_tools("coord-apply-python", &[]);
    let input = coord.alpha();
    let publisher = coord.publisher();
    let body = application("run-1", APP, "upper", json!({ "text": input }), Value::Null);
    let answer = created(&coord.apply(&publisher, &body));
    let entries = coord.entries(APP);
    let attestation = entries[3]["result"]["attestation"].as_str().unwrap();
    let dir = support::temp_dir("coord-apply-python-files");
    let file = dir.join("attestation.json");
    std::fs::write(&file, coord.fetch(APP, attestation).body).unwrap();
    let script =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../scripts/verify-attestation.py");
    let root = hex(Principal::of(&coord.root).as_bytes());
    let run = |file: &std::path::Path| {
        std::process::Command::new(&python)
            .arg(&script)
            .arg(file)
            .arg(&root)
            .output()
            .unwrap()
    };
    let verified = run(&file);
    let stdout = String::from_utf8_lossy(&verified.stdout);
    assert!(
        verified.status.success(),
        "{stdout} {}",
        String::from_utf8_lossy(&verified.stderr)
    );
    let subject = answer["outputs"]["text"]["bytes"].as_str().unwrap();
    assert!(stdout.contains(&subject["sha256:".len()..]), "{stdout}");
    // The same envelope with its payload changed is refused.
    let text = std::fs::read_to_string(&file).unwrap();
    let tampered = dir.join("tampered.json");
    std::fs::write(
        &tampered,
        text.replacen("\"payload\":\"", "\"payload\":\"e30", 1),
    )
    .unwrap();
    assert!(!run(&tampered).status.success());
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

#[test]
fn a_failing_run_is_an_outcome_with_its_reason() {
    let (_labd, coord) = start_with_tools("coord-apply-fail", &[]);
    coord.alpha();
    let publisher = coord.publisher();
    let body = application("run-1", APP, "hostile", json!({}), json!("fail"));
    let answer = created(&coord.apply(&publisher, &body));
    assert_eq!(answer["outcome"], "failed");
    assert!(
        answer["reason"].as_str().unwrap().contains("asked to fail"),
        "{answer}"
    );
    assert_eq!(answer["outputs"], json!({}));
    let entries = coord.entries(APP);
    assert_eq!(entries.len(), 2, "the attempt, then the result alone");
    assert_eq!(entries[1]["result"]["outcome"], "failed");
    assert!(verify(&coord, &entries, None).iter().all(|c| c.passed));
    // A run past a limit is failed naming the limit, and the host serves on.
    // `wait: false` changes nothing: the run has ended when apply answers.
    let mut body = application(
        "run-2",
        "projects/alpha/applications/run-2",
        "hostile",
        json!({}),
        json!("outputs"),
    );
    body["wait"] = json!(false);
    let answer = created(&coord.apply(&publisher, &body));
    assert_eq!(answer["outcome"], "failed");
    assert!(
        answer["reason"].as_str().unwrap().contains("outputs"),
        "{answer}"
    );
    assert!(!coord.exists("projects/alpha/artifacts/run-2:0.0"));
    // Naming the configured release's occurrence is the same as leaving it
    // out, for a caller who may read it (rule 10).
    let third = "projects/alpha/applications/run-3";
    let mut body = application("run-3", third, "hostile", json!({}), json!("fail"));
    body["release"] = answer["release"].clone();
    coord.apply(&publisher, &body).assert_error(403, "denied");
    let mut reader = coord.holder(22, &[GrantKind::Read], "");
    let publish = coord.grant(
        &reader.key,
        GrantKind::Publish,
        "projects/alpha",
        now() + 3600,
    );
    reader.grants.push(publish);
    let named = created(&coord.apply(&reader, &body));
    assert_eq!(named["release"], answer["release"]);
    assert_eq!(named["outcome"], "failed");
}

#[test]
fn apply_refuses_what_it_cannot_admit_and_changes_nothing() {
    let (_labd, coord) = start_with_tools("coord-apply-refusals", &[]);
    let input = coord.alpha();
    coord.project("beta");
    let publisher = coord.publisher();
    let refused = |body: Value, status: u16, code: &str| {
        let response = coord.apply(&publisher, &body);
        response.assert_error(status, code);
        response.json()
    };
    let with = |f: &dyn Fn(&mut Value)| {
        let mut body = application("run-1", APP, "upper", json!({ "text": input }), Value::Null);
        f(&mut body);
        body
    };
    // Strict decoding.
    let details = refused(with(&|b| b["extra"] = json!(1)), 400, "invalid");
    assert_eq!(details["details"]["field"], "extra");
    let details = refused(
        with(&|b| {
            b.as_object_mut().unwrap().remove("recipe");
        }),
        400,
        "invalid",
    );
    assert_eq!(details["details"]["field"], "recipe");
    let details = refused(
        with(&|b| b["inputs"]["text"] = json!({ "root_id": "x" })),
        400,
        "invalid",
    );
    assert_eq!(details["details"]["field"], "inputs");
    refused(
        with(&|b| b["path"] = json!(["projects", "alpha", "applications", "views"])),
        400,
        "structural",
    );
    // Layout positions.
    let details = refused(
        with(&|b| b["path"] = json!(labels(&format!("{APP}/x")))),
        400,
        "invalid",
    );
    assert_eq!(details["details"]["field"], "path");
    refused(
        with(&|b| b["path"] = json!(["projects", "alpha", "applications"])),
        400,
        "structural",
    );
    refused(with(&|b| b["path"] = json!(labels(A1))), 400, "structural");
    // The tool, its release and the roles.
    refused(with(&|b| b["tool"] = json!("absent")), 409, "unresolved");
    let details = refused(
        with(&|b| b["inputs"]["other"] = input.clone()),
        400,
        "invalid",
    );
    assert_eq!(details["details"]["field"], "inputs");
    let details = refused(
        with(&|b| b["inputs"] = json!({ "notes": input })),
        400,
        "invalid",
    );
    assert_eq!(details["details"]["field"], "inputs");
    refused(with(&|b| b["release"] = input.clone()), 409, "unresolved");
    // Inputs under rule 10, and what an input may be.
    let mut beyond = input.clone();
    beyond["position"] = json!(9);
    refused(
        with(&|b| b["inputs"]["text"] = beyond.clone()),
        409,
        "unresolved",
    );
    // A fact inside a batch (a declaration heading its `justifies`) is
    // read like any other, and is neither content nor a record.
    let declarer = coord.holder(22, &[GrantKind::Declare, GrantKind::Read], "projects/alpha");
    let statement = json!({
        "property": "p", "value": 1,
        "justifications": [{ "group": "g", "premises": [input.clone()], "method": "m" }],
    });
    let declared = coord.ok(
        &declarer,
        &Req::json(
            "declare",
            &json!({ "operation_id": "d-1", "artifact": labels(A1), "statement": statement }),
        ),
        201,
    );
    let inside = declared["declaration"].clone();
    assert_eq!(
        inside["position"], 1,
        "the declaration heads a batch of two"
    );
    let details = refused(
        with(&|b| b["inputs"]["text"] = inside.clone()),
        409,
        "unresolved",
    );
    assert_eq!(details["details"]["reference"], inside);
    let mut foreign = input.clone();
    foreign["space_id"] = json!(format!("spc_{}", "0".repeat(32)));
    refused(
        with(&|b| b["inputs"]["text"] = foreign.clone()),
        403,
        "denied",
    );
    let reader = coord.holder(21, &[GrantKind::Publish, GrantKind::Read], "");
    coord
        .apply(&reader, &with(&|b| b["inputs"]["text"] = foreign.clone()))
        .assert_error(404, "not_found");
    // A project that does not exist.
    let elsewhere = "projects/gamma/applications/run-1";
    coord
        .apply(&reader, &with(&|b| b["path"] = json!(labels(elsewhere))))
        .assert_error(404, "not_found");
    assert!(!coord.exists(APP));
}

#[test]
fn a_narrower_grant_cannot_apply() {
    let (_labd, coord) = start_with_tools("coord-apply-authority", &[]);
    let input = coord.alpha();
    coord.project("beta");
    let hidden = coord.artifact("projects/beta/artifacts/secret", b"secret\n");
    let body = application("run-1", APP, "upper", json!({ "text": input }), Value::Null);
    for kinds in [
        &[GrantKind::Read][..],
        &[GrantKind::Declare, GrantKind::Read],
    ] {
        let narrow = coord.holder(30, kinds, "projects/alpha");
        coord.apply(&narrow, &body).assert_error(403, "denied");
    }
    // Publishing at another project's applications grants nothing here.
    let beside = coord.holder(31, &[GrantKind::Publish, GrantKind::Read], "projects/beta");
    coord.apply(&beside, &body).assert_error(403, "denied");
    // A publisher on alpha may not feed it beta's content.
    let publisher = coord.publisher();
    let stolen = application(
        "run-1",
        APP,
        "upper",
        json!({ "text": hidden }),
        Value::Null,
    );
    coord.apply(&publisher, &stolen).assert_error(403, "denied");
    assert!(!coord.exists(APP));
}

#[test]
fn concurrent_identical_applies_admit_one_attempt() {
    let (_labd, coord) = start_with_tools("coord-apply-concurrent", &[]);
    let input = coord.alpha();
    let publisher = coord.publisher();
    let body = application("run-1", APP, "upper", json!({ "text": input }), Value::Null);
    let answers: Vec<Response> = std::thread::scope(|s| {
        let calls: Vec<_> = (0..4)
            .map(|_| s.spawn(|| coord.apply(&publisher, &body)))
            .collect();
        calls.into_iter().map(|c| c.join().unwrap()).collect()
    });
    let statuses: Vec<u16> = answers.iter().map(|a| a.status).collect();
    assert_eq!(
        statuses.iter().filter(|s| **s == 201).count(),
        1,
        "{statuses:?}"
    );
    for answer in &answers {
        match answer.status {
            201 | 200 => assert_eq!(answer.json()["outcome"], "completed"),
            _ => answer.assert_error(503, "unavailable"),
        }
    }
    let entries = coord.entries(APP);
    assert_eq!(members(&entries, "attempt").len(), 1);
    assert_eq!(members(&entries, "result").len(), 1);
}

#[test]
fn a_run_cut_by_kill_9_ends_interrupted_once() {
    let (labd, coord) = start_with_tools("coord-apply-kill", &["--tool-wall-ms", "600000"]);
    coord.alpha();
    let publisher = coord.publisher();
    let body = application("run-1", APP, "hostile", json!({}), json!("loop"));
    let req = Req::json("apply", &body);
    let header = coord.header(&publisher, &req, now(), &nonce());
    let address = coord.client.address;
    let call = std::thread::spawn(move || try_send(address, &req, &header));
    support::eventually("the attempt is admitted", || {
        coord.exists(APP) && !coord.entries(APP).is_empty()
    });
    assert!(
        members(&coord.entries(APP), "result").is_empty(),
        "the run is in flight"
    );
    let labd = labd.kill_and_restart();
    // The cut call was never answered.
    assert!(call.join().unwrap().is_err());
    let coord = Coord::new(&labd);
    // The restart closed the cut run before serving: interrupted.
    let entries = coord.entries(APP);
    let results = members(&entries, "result");
    assert_eq!(results.len(), 1, "{entries:#?}");
    assert_eq!(results[0]["outcome"], "interrupted");
    // A retry answers that application.
    let answer = coord.apply(&publisher, &body);
    assert_eq!(
        answer.status,
        200,
        "{}",
        String::from_utf8_lossy(&answer.body)
    );
    let answer = answer.json();
    assert_eq!(answer["replayed"], true);
    assert_eq!(answer["outcome"], "interrupted");
    let again = coord.apply(&publisher, &body).json();
    assert_eq!(again["result"], answer["result"]);
    let entries = coord.entries(APP);
    assert_eq!(members(&entries, "attempt").len(), 1);
    assert_eq!(members(&entries, "result").len(), 1);
    assert!(verify(&coord, &entries, None).iter().all(|c| c.passed));
}

#[test]
fn without_the_root_signing_key_apply_is_unavailable() {
    let root = support::coord::key(77);
    let principal = Principal::of(&root).to_string();
    let labd = start_with_root("coord-apply-no-key", &principal);
    let client = labd.coord();
    let coord = Coord {
        audience: format!("http://{}", client.address),
        client,
        root,
    };
    let input = coord.alpha();
    let body = application("run-1", APP, "upper", json!({ "text": input }), Value::Null);
    let response = coord.apply(&coord.publisher(), &body);
    response.assert_error(503, "unavailable");
    assert!(!coord.exists(APP));
}

/// `labd` with the `upper` release, a configured root key and no issuer
/// key.
fn start_with_root(name: &str, root: &str) -> Labd {
    let dir = support::temp_dir(&format!("{name}-tools"));
    let file = dir.join("upper.json");
    std::fs::write(&file, UPPER).unwrap();
    let tool = format!(
        "{}={}",
        file.display(),
        support::built_component("tool_upper").display()
    );
    Labd::start(name, &["--coord-tool", &tool, "--coord-root-key", root])
}

/// Every run slot busy past the wait is an outcome naming the limit, not
/// a stall: the admitted attempt ends `failed`, and the busy run goes on.
#[test]
fn a_run_beyond_the_concurrent_runs_fails_naming_the_limit() {
    let (_labd, coord) = start_with_tools(
        "coord-apply-slots",
        &[
            "--tool-concurrent-runs",
            "1",
            "--tool-run-wait-ms",
            "1",
            "--tool-wall-ms",
            "3000",
        ],
    );
    // The run slots are one host's: both applications go to it.
    let coord = Coord {
        client: support::Client::of(coord.client.address),
        ..coord
    };
    let input = coord.alpha();
    let publisher = coord.publisher();
    let looping = application("run-1", APP, "hostile", json!({}), json!("loop"));
    let busy = std::thread::scope(|s| {
        let busy = s.spawn(|| coord.apply(&publisher, &looping));
        support::eventually("the looping run is admitted", || {
            coord.exists(APP) && !coord.entries(APP).is_empty()
        });
        let second = "projects/alpha/applications/run-2";
        let body = application(
            "run-2",
            second,
            "upper",
            json!({ "text": input }),
            Value::Null,
        );
        let answer = created(&coord.apply(&publisher, &body));
        assert_eq!(answer["outcome"], "failed");
        let reason = answer["reason"].as_str().unwrap();
        assert!(reason.starts_with("limit: concurrent-runs"), "{reason}");
        busy.join().unwrap()
    });
    let busy = created(&busy);
    assert_eq!(busy["outcome"], "failed");
    // Its own bound ended it (fuel or wall-clock time, whichever came first).
    assert!(
        busy["reason"].as_str().unwrap().starts_with("limit: "),
        "{busy}"
    );
}

/// `application` at `projects/alpha/applications/<name>`, answered 201.
fn apply_at(
    coord: &Coord,
    who: &Holder,
    name: &str,
    tool: &str,
    inputs: Value,
    recipe: Value,
) -> Value {
    let path = format!("projects/alpha/applications/{name}");
    created(&coord.apply(who, &application(name, &path, tool, inputs, recipe)))
}

/// The statement inside a retained DSSE envelope.
fn statement_of(envelope: &[u8]) -> Value {
    use base64::Engine as _;
    let envelope: Value = serde_json::from_slice(envelope).unwrap();
    let payload = base64::engine::general_purpose::STANDARD
        .decode(envelope["payload"].as_str().unwrap())
        .unwrap();
    serde_json::from_slice(&payload).unwrap()
}

#[test]
fn a_deterministic_release_reuses_a_completed_application() {
    let (labd, coord) = start_with_tools("coord-apply-reuse", &[]);
    let input = coord.alpha();
    let publisher = coord.publisher();
    assert_eq!(labd.tool_runs(), 0);
    let recipe = json!({ "mode": "all" });
    let text = |input: &Value| json!({ "text": input });
    let first = apply_at(
        &coord,
        &publisher,
        "first",
        "upper",
        text(&input),
        recipe.clone(),
    );
    assert_eq!(first["outcome"], "completed");
    assert_eq!(first["reused"], Value::Null);
    assert_eq!(labd.tool_runs(), 1);

    // Same release, occurrence and recipe: the earlier application answers.
    let second = apply_at(
        &coord,
        &publisher,
        "second",
        "upper",
        text(&input),
        recipe.clone(),
    );
    assert_eq!(second["outcome"], "completed");
    assert_eq!(second["reused"], first["attempt"]);
    assert_ne!(second["attempt"], first["attempt"]);
    assert_eq!(second["outputs"], first["outputs"]);
    assert_eq!(labd.tool_runs(), 1, "the reusing application ran nothing");

    // Its leaf: its own attempt batch, then `produced` naming the earlier
    // output and the result; no output space of its own.
    let leaf = "projects/alpha/applications/second";
    let entries = coord.entries(leaf);
    assert_eq!(entries.len(), 4, "{entries:#?}");
    assert_eq!(entries[0]["ref"], second["attempt"]);
    assert_eq!(entries[1]["bound"]["bound"], input);
    let earlier = coord.entries("projects/alpha/applications/first");
    assert_eq!(
        entries[2]["produced"]["produced"],
        earlier[2]["produced"]["produced"]
    );
    assert!(!coord.exists("projects/alpha/artifacts/second:0.0"));
    let result = &entries[3]["result"];
    assert_eq!(result["outcome"], "completed");
    let document = |hash: &Value| coord.fetch(leaf, hash.as_str().unwrap()).body;
    let resolution: Value = serde_json::from_slice(&document(&result["resolution"])).unwrap();
    let reused = json!({ "application": first["attempt"], "result": first["result"] });
    assert_eq!(resolution["reused"], reused);
    assert_eq!(resolution["used"], Value::Null);
    // The attestation says so, and verifies offline.
    let statement = statement_of(&document(&result["attestation"]));
    assert_eq!(statement["predicate"]["reused"], reused);
    assert_eq!(
        statement["subject"][0]["digest"]["sha256"],
        first["outputs"]["text"]["bytes"].as_str().unwrap()["sha256:".len()..]
    );
    let root = Principal::of(&coord.root);
    let mut fetch = |hash: &str| Some(coord.fetch(leaf, hash).body);
    let checks = lab_coord_client::verify_application(&entries, &mut fetch, &root);
    assert!(checks.iter().all(|c| c.passed), "{checks:#?}");
    // The earlier application's own documents name no reuse.
    let first_result = &earlier[3]["result"];
    let first_resolution: Value = serde_json::from_slice(
        &coord
            .fetch(
                "projects/alpha/applications/first",
                first_result["resolution"].as_str().unwrap(),
            )
            .body,
    )
    .unwrap();
    assert_eq!(first_resolution["reused"], Value::Null);
    assert!(first_resolution["used"].is_object());

    // A replay of the reusing application answers it again, reuse included.
    let body = application("second", leaf, "upper", text(&input), recipe.clone());
    let again = coord.apply(&publisher, &body);
    assert_eq!(again.status, 200);
    let again = again.json();
    assert_eq!(again["replayed"], true);
    assert_eq!(again["reused"], first["attempt"]);
    assert_eq!(again["result"], second["result"]);

    // Another recipe, or another occurrence of the same bytes, runs.
    let other = json!({ "mode": "other" });
    let recipe_run = apply_at(
        &coord,
        &publisher,
        "recipe",
        "upper",
        text(&input),
        other.clone(),
    );
    assert_eq!(recipe_run["reused"], Value::Null);
    assert_eq!(labd.tool_runs(), 2);
    let copy = coord.artifact("projects/alpha/artifacts/a2", b"hello, world\n");
    assert_ne!(copy, input);
    let copy_run = apply_at(
        &coord,
        &publisher,
        "copy",
        "upper",
        text(&copy),
        recipe.clone(),
    );
    assert_eq!(copy_run["reused"], Value::Null);
    assert_eq!(copy_run["outputs"], first["outputs"]);
    assert_eq!(labd.tool_runs(), 3);
    // Each of those is reused in its turn.
    let recipe_again = apply_at(
        &coord,
        &publisher,
        "recipe-again",
        "upper",
        text(&input),
        other,
    );
    assert_eq!(recipe_again["reused"], recipe_run["attempt"]);
    assert_eq!(labd.tool_runs(), 3);
}

#[test]
fn a_non_deterministic_release_or_a_failed_run_is_never_reused() {
    let undetermined = UPPER.replace("\"deterministic\": true", "\"deterministic\": false");
    assert_ne!(undetermined, UPPER);
    let (labd, coord) = start_tools(
        "coord-apply-no-reuse",
        &[
            ("upper", &undetermined, "tool_upper"),
            ("hostile", HOSTILE, "tool_hostile"),
        ],
        &[],
    );
    let input = coord.alpha();
    let publisher = coord.publisher();
    for (i, name) in ["nd-1", "nd-2"].into_iter().enumerate() {
        let answer = apply_at(
            &coord,
            &publisher,
            name,
            "upper",
            json!({ "text": input }),
            Value::Null,
        );
        assert_eq!(answer["outcome"], "completed");
        assert_eq!(answer["reused"], Value::Null);
        assert_eq!(labd.tool_runs(), i as u64 + 1);
    }
    // `hostile` is deterministic, but a failed application is never reused.
    for (i, name) in ["fail-1", "fail-2"].into_iter().enumerate() {
        let answer = apply_at(
            &coord,
            &publisher,
            name,
            "hostile",
            json!({}),
            json!("fail"),
        );
        assert_eq!(answer["outcome"], "failed");
        assert_eq!(answer["reused"], Value::Null);
        assert_eq!(labd.tool_runs(), i as u64 + 3);
    }
}

/// An application leaf that already holds a fact the service did not
/// write (appended straight in the journal, of a predicate it does not
/// know): the admission looks for an attempt at the leaf's head, finds
/// none among its facts, appends the attempt after them, and a replay of
/// the request finds that attempt and its result.
#[test]
fn an_attempt_is_admitted_after_facts_the_leaf_already_holds() {
    use base64::Engine as _;
    use lab_values::Value as V;
    let (labd, coord) = start_with_tools("coord-apply-foreign", &[]);
    let input = coord.alpha();
    let publisher = coord.publisher();
    let journal = labd.journal();
    let applications = coord.ok(
        &coord.admin(),
        &Req::read("resolve").path("projects/alpha/applications"),
        200,
    )["space"]
        .clone();
    assert!(applications["space_id"].is_string(), "{applications}");
    let made = journal.post_json(
        "/v1/create",
        &json!({
            "parent": { "root_id": applications["root_id"], "space_id": applications["space_id"] },
            "key": "run-1", "operation_id": "foreign-leaf",
        })
        .to_string(),
    );
    assert!(
        made.status == 200 || made.status == 201,
        "{}",
        String::from_utf8_lossy(&made.body)
    );
    let leaf = made.json()["child"].clone();
    let foreign = lab_values::encode(&V::Tuple(vec![V::label("note"), V::text("elsewhere")]));
    let appended = journal.post_json(
        "/v1/append",
        &json!({
            "space": { "root_id": leaf["root_id"], "space_id": leaf["space_id"] },
            "facts": [base64::engine::general_purpose::STANDARD.encode(foreign)],
            "operation_id": "foreign-fact",
        })
        .to_string(),
    );
    assert!(
        appended.status == 200 || appended.status == 201,
        "{}",
        String::from_utf8_lossy(&appended.body)
    );
    assert_eq!(appended.json()["last"], 1);

    let body = application("run-1", APP, "upper", json!({ "text": input }), Value::Null);
    let first = created(&coord.apply(&publisher, &body));
    assert_eq!(first["outcome"], "completed");
    assert_eq!(first["attempt"]["space_id"], leaf["space_id"]);
    assert_eq!(first["attempt"]["position"], 2);
    let again = coord.apply(&publisher, &body);
    assert_eq!(
        again.status,
        200,
        "{}",
        String::from_utf8_lossy(&again.body)
    );
    let again = again.json();
    assert_eq!(again["replayed"], true);
    assert_eq!(again["attempt"], first["attempt"]);
    assert_eq!(again["result"], first["result"]);
    let entries = coord.entries(APP);
    assert_eq!(members(&entries, "attempt").len(), 1);
    assert_eq!(members(&entries, "result").len(), 1);
}
