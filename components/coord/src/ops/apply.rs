//! `apply`: admits an attempt (the `attempt` fact heading a batch of one
//! `bound` fact per input role), runs the release in the host's sandbox,
//! stores each output as an artifact space (`staged`, then `content`) and
//! closes the application with the completion batch (`produced` facts,
//! then one `result`), attested with the root's key. A deterministic
//! release applied again to the same occurrences and recipe in the same
//! project answers with the earlier completed application instead of a
//! run (`crate::reuse`): the new leaf's completion batch names the earlier
//! outputs and its resolution and attestation name the earlier application.
//!
//! Invariants: a leaf holds at most one attempt (any other identity is
//! `exists`); the completion batch is appended with the attempt batch's
//! last position as expected cutoff and one journal operation ID per
//! request identity, so an attempt never gets two results; a run in
//! flight is recorded in the store before its attempt is appended, so an
//! attempt without a result and without a live run was interrupted.

use crate::application::{self, Attested, Ending, Input, Output, Ran, Reused};
use crate::auth;
use crate::backend::CallError;
use crate::blobs;
use crate::facts::{self, Artifact, AttemptFact, EntryRef, Fact, Hash, Outcome};
use crate::journal::{self, Space};
use crate::layout::{self, Position};
use crate::ops::publish::{self, request_digest, request_id, retain_descriptor};
use crate::ops::read::body_reference;
use crate::refusal::Refusal;
use crate::request::ApplyRequest;
use crate::reuse;
use crate::tools::{self, Release};
use crate::world::{create_child, ensure_child, setup_operation_id, Settings, World};
use crate::{Call, Reply};
use base64::Engine as _;
use lab_coord_auth::dsse::{sign_envelope, IN_TOTO_PAYLOAD_TYPE};
use lab_coord_auth::{canonical_json, SigningKey};
use lab_guest::lab::platform::{clock, config, kv, tools as sandbox};
use serde_json::{json, Value};

/// The store's table of runs in flight: request ID → `{boot, leaf,
/// attempt}` (the start second of the process running it, the leaf with
/// its journal path).
const RUNS: &str = "application-runs";

/// Greatest number of outputs of one application: the `produced` facts
/// and the `result` fill one batch.
const MAX_OUTPUTS: usize = crate::request::MAX_BATCH_FACTS - 1;

pub fn apply(call: &mut Call<'_>, request: ApplyRequest) -> Result<Reply, Refusal> {
    let publisher = call.verify(&request.path)?.principal;
    match layout::classify(&request.path) {
        Position::Application => {}
        Position::Outside => {
            return Err(Refusal::invalid(
                "path",
                "an application is projects/<project>/applications/<name>",
            ))
        }
        _ => return Err(Refusal::protected("`apply` writes only applications")),
    }
    let release = configured_release(&request.tool)?;
    let release_entry = release_occurrence(call, &release)?;
    if let Some(asked) = &request.release {
        body_reference(call, asked)?;
        if *asked != release_entry {
            return Err(Refusal::Unresolved {
                reference: asked.to_json(),
                message: "not the content occurrence of this tool's configured release".into(),
            });
        }
    }
    check_roles(&release, &request)?;
    let mut inputs = Vec::with_capacity(request.inputs.len());
    for (role, entry) in &request.inputs {
        inputs.push(Input {
            role: role.clone(),
            entry: entry.clone(),
            artifact: input_artifact(call, entry)?,
        });
    }
    let key = root_key(call)?;
    let project = call
        .world
        .resolve(&request.path[..2])?
        .ok_or_else(|| Refusal::NotFound("no such project".into()))?;
    let create_id =
        publish::scoped_operation_id("leaf", &publisher, &request.operation_id, &request.path);
    let (leaf, _) = publish::ensure_leaf(call, &request.path, &create_id)?;
    let identity = request_id(&publisher, &request.operation_id, &leaf);
    let normalized = json!({
        "operation_id": request.operation_id,
        "path": request.path,
        "tool": request.tool,
        "inputs": request.inputs.iter().map(|(r, e)| (r.clone(), e.to_json())).collect::<serde_json::Map<_, _>>(),
        "recipe": request.recipe,
        "release": request.release.as_ref().map(EntryRef::to_json),
    });
    let digest = request_digest("apply", &leaf, &normalized, None)?;
    let context = Context {
        leaf: &leaf,
        path: &request.path,
        project: &project,
        release_entry: &release_entry,
        description: &release.description,
        identity: &identity,
        key: &key,
    };
    // The head the attempt batch is built at: an earlier attempt is looked
    // for at it (a leaf without facts holds none), so an attempt appended
    // after it makes the admission's append conflict.
    let head = journal::head(&leaf).map_err(|e| e.into_refusal("journal"))?;
    if head > 0 {
        if let Some(found) = find_attempt(&leaf, &identity, Some(head))? {
            return recover(&context, found, &digest);
        }
    }
    let document = canonical_json(&application::request(
        &request.tool,
        &release_entry,
        &inputs,
        &request.recipe,
    ));
    let request_hash = Hash::of(&document);
    let reuse_key = reuse::deterministic(&release.description)
        .then(|| reuse::key(&project, &release_entry, &inputs, &request.recipe));
    let earlier = match &reuse_key {
        Some(key) => earlier(key, &release_entry, &inputs, &request.recipe, &request_hash)?,
        None => None,
    };
    // Admission: the ApplicationRequest retained, then the batch at the head.
    retain(document)?;
    let now = clock::now();
    let attempt = AttemptFact {
        release: release_entry.clone(),
        request: request_hash,
        publisher: publisher.to_string(),
        request_id: identity.clone(),
        request_digest: digest,
        accepted_at: lab_kit::time::rfc3339_micros(now.seconds, now.nanoseconds),
    };
    let application = EntryRef {
        root_id: leaf.root_id.clone(),
        space_id: leaf.space_id.clone(),
        position: head + 1,
    };
    let mut batch = vec![Fact::Attempt(attempt.clone()).encode()];
    for input in &inputs {
        batch.push(
            Fact::Bound {
                application: application.clone(),
                role: input.role.clone(),
                entry: input.entry.clone(),
            }
            .encode(),
        );
    }
    mark_running(&identity, &leaf, &application)?;
    let appended = journal::append(
        &leaf,
        &batch,
        &format!("coord.attempt.{}", &identity[4..]),
        Some(head),
    );
    // A concurrent admission won: its run record is the one kept (an
    // identical request shares it), so it is not cleared here. Its batch
    // may equal this one to the byte (the same head, the same microsecond
    // of acceptance), and the journal then answers a replay: that admits
    // nothing either.
    let admitted_elsewhere = || match find_attempt(&leaf, &identity, None)? {
        Some(found) => recover(&context, found, &digest),
        None => Err(occupied()),
    };
    let attempt_last = match appended {
        Ok(appended) if appended.replayed => return admitted_elsewhere(),
        Ok(appended) if appended.first == application.position => appended.last,
        Ok(_) => {
            return Err(Refusal::Unavailable(
                "the attempt was appended elsewhere than the head it was built at".into(),
            ))
        }
        Err(CallError::Refused(r)) if r.code == "conflict" || r.code == "idempotency_mismatch" => {
            return admitted_elsewhere();
        }
        Err(e) => {
            end_run(&identity, None)?;
            return Err(e.into_refusal("journal"));
        }
    };
    let admitted = Admitted {
        application,
        attempt,
        attempt_last,
        inputs,
    };
    let closed = match earlier {
        Some(Earlier { reused, outputs }) => {
            close(&context, &admitted, &outputs, reused_ending(reused))
        }
        None => run_and_close(&context, &admitted, &request.recipe),
    };
    let reuse_row = match (&closed, &reuse_key) {
        (Ok(closed), Some(key))
            if closed.outcome == Outcome::Completed && closed.reused.is_none() =>
        {
            Some(reuse::row(key, &leaf, &admitted.application))
        }
        _ => None,
    };
    end_run(&identity, reuse_row)?;
    let closed = closed?;
    Ok(Reply::Json(
        201,
        answer(&admitted.application, &release_entry, &closed, false),
    ))
}

/// What an apply call works in.
struct Context<'a> {
    leaf: &'a Space,
    path: &'a [String],
    project: &'a Space,
    /// The configured release's content occurrence and its description
    /// (whose `executable.service_binary` is the component that runs).
    release_entry: &'a EntryRef,
    description: &'a Value,
    identity: &'a str,
    key: &'a SigningKey,
}

/// An admitted attempt.
struct Admitted {
    application: EntryRef,
    attempt: AttemptFact,
    /// Last position of the attempt's batch: the completion batch's
    /// expected cutoff.
    attempt_last: u64,
    inputs: Vec<Input>,
}

/// A closed application: its result and what the answer reports.
struct Closed {
    result: EntryRef,
    outcome: Outcome,
    reason: Option<String>,
    outputs: Vec<(String, Artifact)>,
    /// The earlier application answered instead of a run.
    reused: Option<EntryRef>,
}

fn answer(application: &EntryRef, release: &EntryRef, closed: &Closed, replayed: bool) -> Value {
    let mut outputs = serde_json::Map::new();
    for (role, artifact) in &closed.outputs {
        outputs.entry(role.clone()).or_insert_with(
            || json!({ "bytes": artifact.bytes.to_string(), "type": artifact.kind.to_string() }),
        );
    }
    let mut answer = json!({
        "attempt": application.to_json(),
        "release": release.to_json(),
        "outcome": closed.outcome.name(),
        "replayed": replayed,
        "result": closed.result.to_json(),
        "outputs": outputs,
        "reused": closed.reused.as_ref().map(EntryRef::to_json),
    });
    // `reason` is a string when there is one, else absent (ApplyResult).
    if let Some(reason) = &closed.reason {
        answer["reason"] = json!(reason);
    }
    answer
}

/// The release configured for `tool` (`unresolved` when none is).
fn configured_release(tool: &str) -> Result<Release, Refusal> {
    let configured = config::get("tools").unwrap_or_else(|| "[]".into());
    tools::configured(&configured)?
        .into_iter()
        .find(|r| r.name == tool)
        .ok_or_else(|| Refusal::Unresolved {
            reference: json!({ "tool": tool }),
            message: "no release of this tool is configured".into(),
        })
}

/// The content occurrence of the release's artifact space (position 1).
fn release_occurrence(call: &Call<'_>, release: &Release) -> Result<EntryRef, Refusal> {
    let label = Hash::of(&release.content()).to_string();
    let path = ["tools", &release.name, "releases", &label].map(String::from);
    let space = call
        .world
        .resolve(&path)?
        .ok_or_else(|| Refusal::Unavailable("the configured release is not provisioned".into()))?;
    Ok(EntryRef {
        root_id: space.root_id,
        space_id: space.space_id,
        position: 1,
    })
}

/// Every required input role bound, and no role the release lacks.
fn check_roles(release: &Release, request: &ApplyRequest) -> Result<(), Refusal> {
    let declared = release.description["inputs"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    for role in request.inputs.keys() {
        if !declared.iter().any(|d| d["role"] == role.as_str()) {
            return Err(Refusal::invalid(
                "inputs",
                format!("the release has no input role `{role}`"),
            ));
        }
    }
    for d in &declared {
        let role = d["role"].as_str().unwrap_or_default();
        if d["required"] == true && !request.inputs.contains_key(role) {
            return Err(Refusal::invalid(
                "inputs",
                format!("the required input role `{role}` is not bound"),
            ));
        }
    }
    Ok(())
}

/// The content an input occurrence names, once the caller may read it
/// (rule 10): an artifact's `content` fact, or a `record` (its payload,
/// typed by its profile's descriptor).
fn input_artifact(call: &Call<'_>, entry: &EntryRef) -> Result<Artifact, Refusal> {
    let (space, head) = body_reference(call, entry)?;
    content_at(&space, entry.position, head)?.ok_or_else(|| Refusal::Unresolved {
        reference: entry.to_json(),
        message: "an input is an artifact's content or a record occurrence".into(),
    })
}

/// The content the fact at `position` names, if it is a `content` or a
/// `record` fact.
fn content_at(space: &Space, position: u64, head: u64) -> Result<Option<Artifact>, Refusal> {
    let fact = journal::fact_at(space, position, head).map_err(|e| e.into_refusal("journal"))?;
    Ok(match fact.as_deref().map(facts::decode) {
        Some(Ok(Some(Fact::Content { artifact }))) => Some(artifact),
        Some(Ok(Some(Fact::Record(record)))) => Some(Artifact {
            bytes: record.hash,
            kind: retain_descriptor(&record.profile)?,
        }),
        _ => None,
    })
}

/// The world's root key, which signs attestations.
fn root_key(call: &Call<'_>) -> Result<SigningKey, Refusal> {
    call.settings.root_signer().ok_or_else(|| {
        Refusal::Unavailable(
            "this deployment has no key to sign attestations with (the world's root key)".into(),
        )
    })
}

/// Retains `bytes`; their hash, which the bytes service must name them by.
fn retain(bytes: Vec<u8>) -> Result<Hash, Refusal> {
    let hash = Hash::of(&bytes);
    let retained = blobs::put(bytes).map_err(|e| e.into_refusal("bytes"))?;
    named(&[retained], &[hash])?;
    Ok(hash)
}

/// Retains the completion's documents in one batch put (each committed,
/// so durable, before the completion batch names it); their hashes.
fn retain_documents<const N: usize>(documents: [Vec<u8>; N]) -> Result<[Hash; N], Refusal> {
    let hashes = documents.each_ref().map(|d| Hash::of(d));
    let retained = blobs::put_many(&documents).map_err(|e| e.into_refusal("bytes"))?;
    named(&retained, &hashes)?;
    Ok(hashes)
}

/// Whether the bytes service named each retained document by its hash.
fn named(retained: &[blobs::Retained], hashes: &[Hash]) -> Result<(), Refusal> {
    if retained.len() != hashes.len()
        || retained
            .iter()
            .zip(hashes)
            .any(|(r, h)| r.name != h.to_string())
    {
        return Err(Refusal::Unavailable(
            "the bytes service named a document oddly".into(),
        ));
    }
    Ok(())
}

/// Every appended fact of the application leaf through `through` (its
/// cutoff when none), decoded, with its reference, in one read: a leaf
/// holds its attempt batch and its completion batch, so one read costs
/// less than one filtered read per predicate. Facts of predicates this
/// service does not know are left out.
fn leaf_facts(leaf: &Space, through: Option<u64>) -> Result<Vec<(EntryRef, Fact)>, Refusal> {
    let b64 = base64::engine::general_purpose::STANDARD;
    let (_, entries) = journal::read_all_matching(leaf, through, json!({ "origin": "append" }))
        .map_err(|e| Refusal::Unavailable(format!("the recovery search failed: {e:?}")))?;
    let mut found = Vec::with_capacity(entries.len());
    for entry in &entries {
        let reference = EntryRef::from_json(&entry["ref"]);
        let fact = entry["fact"]
            .as_str()
            .and_then(|f| b64.decode(f).ok())
            .map(|f| facts::decode(&f));
        match (reference, fact) {
            (Ok(reference), Some(Ok(Some(fact)))) => found.push((reference, fact)),
            (Ok(_), Some(Ok(None))) => {}
            _ => return Err(Refusal::Unavailable("unreadable recovery data".into())),
        }
    }
    Ok(found)
}

/// The leaf's attempt (read through `through`, its cutoff when none)
/// when it is of this request identity; `exists` when the leaf holds an
/// attempt of another. One read at one cutoff answers both, so a
/// concurrent admission is seen whole or not at all.
fn find_attempt(
    leaf: &Space,
    identity: &str,
    through: Option<u64>,
) -> Result<Option<(EntryRef, AttemptFact)>, Refusal> {
    let mut attempts = leaf_facts(leaf, through)?
        .into_iter()
        .filter_map(|(reference, fact)| match fact {
            Fact::Attempt(attempt) => Some((reference, attempt)),
            _ => None,
        });
    let Some((reference, attempt)) = attempts.next() else {
        return Ok(None);
    };
    if attempts.next().is_some() {
        return Err(Refusal::Unavailable(
            "two attempts in one application: the leaf violates the fact profile".into(),
        ));
    }
    if attempt.request_id != identity {
        return Err(occupied());
    }
    Ok(Some((reference, attempt)))
}

fn occupied() -> Refusal {
    Refusal::Exists("this application holds an attempt of another request".into())
}

/// An earlier admission of this request: its result, or `interrupted`
/// written now when no live run holds it.
fn recover(
    context: &Context<'_>,
    (application, attempt): (EntryRef, AttemptFact),
    digest: &Hash,
) -> Result<Reply, Refusal> {
    if attempt.request_digest != *digest {
        return Err(Refusal::IdempotencyMismatch(
            "this operation ID was accepted before with a different request".into(),
        ));
    }
    let release = attempt.release.clone();
    let closed = match closed(context.leaf, &application)? {
        Some(closed) => closed,
        None => {
            if running_here(context.identity)? {
                return Err(Refusal::Unavailable(
                    "this application's run is in progress; ask again once it has ended".into(),
                ));
            }
            // The attempt ran the release it names, configured now or not.
            let description = if release == *context.release_entry {
                context.description.clone()
            } else {
                release_description(&release)?
            };
            let context = Context {
                description: &description,
                ..*context
            };
            interrupt(&context, application.clone(), attempt)?
        }
    };
    Ok(Reply::Json(
        200,
        answer(&application, &release, &closed, true),
    ))
}

/// The description of the release at `entry`: its space's content.
fn release_description(entry: &EntryRef) -> Result<Value, Refusal> {
    let artifact = artifact_at(entry)?;
    let bytes = blobs::get_small(&artifact.bytes.to_string(), 1 << 20)
        .map_err(|e| e.into_refusal("bytes"))?
        .ok_or_else(|| Refusal::Unavailable("a release description is not retained".into()))?;
    serde_json::from_slice(&bytes)
        .map_err(|_| Refusal::Unavailable("a release description is unreadable".into()))
}

/// The application's result, read back with its manifest's outputs and
/// its resolution's reason.
fn closed(leaf: &Space, application: &EntryRef) -> Result<Option<Closed>, Refusal> {
    let results = leaf_facts(leaf, None)?;
    let mut mine = results.into_iter().filter_map(|(r, f)| match f {
        Fact::Result {
            application: a,
            outcome,
            manifest,
            resolution,
            ..
        } if a == *application => Some((r, outcome, manifest, resolution)),
        _ => None,
    });
    let Some((result, outcome, manifest, resolution)) = mine.next() else {
        return Ok(None);
    };
    if mine.next().is_some() {
        return Err(Refusal::Unavailable(
            "an attempt with two results: the leaf violates the fact profile".into(),
        ));
    }
    let manifest = document(&manifest)?;
    let resolution = document(&resolution)?;
    let outputs = manifest["outputs"]
        .as_array()
        .cloned()
        .unwrap_or_default()
        .iter()
        .filter_map(|o| {
            let artifact = Artifact {
                bytes: Hash::parse(o["artifact"]["bytes"].as_str()?)?,
                kind: Hash::parse(o["artifact"]["type"].as_str()?)?,
            };
            Some((o["role"].as_str()?.to_string(), artifact))
        })
        .collect();
    Ok(Some(Closed {
        result,
        outcome,
        reason: resolution["reason"].as_str().map(String::from),
        outputs,
        reused: EntryRef::from_json(&resolution["reused"]["application"]).ok(),
    }))
}

/// An earlier completed application to answer with instead of a run.
struct Earlier {
    reused: Reused,
    outputs: Vec<Output>,
}

/// Completed by reusing `reused`: nothing ran, so no limits were in force
/// and nothing was used.
fn reused_ending(reused: Reused) -> Ending {
    Ending {
        outcome: Outcome::Completed.name(),
        reason: None,
        limits: Value::Null,
        used: Value::Null,
        reused: Some(reused),
    }
}

/// The application the reuse index names under `key`, when its own facts
/// show this release, exactly these bound occurrences, this recipe and a
/// `completed` result; its outputs as its attestation lists them.
fn earlier(
    key: &Hash,
    release: &EntryRef,
    inputs: &[Input],
    recipe: &Value,
    request_hash: &Hash,
) -> Result<Option<Earlier>, Refusal> {
    let Some((leaf, application)) = reuse::lookup(key)? else {
        return Ok(None);
    };
    let facts = leaf_facts(&leaf, None)?;
    let attempt = facts.iter().find_map(|(r, f)| match f {
        Fact::Attempt(a) if *r == application => Some(a),
        _ => None,
    });
    let Some(attempt) = attempt.filter(|a| a.release == *release) else {
        return Ok(None);
    };
    let mut bound: Vec<(String, EntryRef)> = facts
        .iter()
        .cloned()
        .filter_map(|(_, f)| match f {
            Fact::Bound {
                application: a,
                role,
                entry,
            } if a == application => Some((role, entry)),
            _ => None,
        })
        .collect();
    bound.sort_by(|a, b| a.0.cmp(&b.0));
    let mut wanted: Vec<(String, EntryRef)> = inputs
        .iter()
        .map(|i| (i.role.clone(), i.entry.clone()))
        .collect();
    wanted.sort_by(|a, b| a.0.cmp(&b.0));
    if bound != wanted {
        return Ok(None);
    }
    // The same request document (release, occurrences and recipe) has the
    // same hash; only a different one needs its recipe compared.
    if attempt.request != *request_hash {
        let request = document(&attempt.request)?;
        if canonical_json(&request["recipe"]) != canonical_json(recipe) {
            return Ok(None);
        }
    }
    let result = facts.into_iter().find_map(|(r, f)| match f {
        Fact::Result {
            application: a,
            outcome: Outcome::Completed,
            attestation,
            ..
        } if a == application => Some((r, attestation)),
        _ => None,
    });
    let Some((result, attestation)) = result else {
        return Ok(None);
    };
    let outputs = attested_outputs(&document(&attestation)?)?;
    Ok(Some(Earlier {
        reused: Reused {
            application,
            result,
        },
        outputs,
    }))
}

/// A retained application document, parsed.
fn document(hash: &Hash) -> Result<Value, Refusal> {
    let bytes = blobs::get_small(&hash.to_string(), 4 << 20)
        .map_err(|e| e.into_refusal("bytes"))?
        .ok_or_else(|| Refusal::Unavailable("an application document is not retained".into()))?;
    serde_json::from_slice(&bytes)
        .map_err(|_| Refusal::Unavailable("an application document is unreadable".into()))
}

/// The outputs an attestation envelope of this service lists.
fn attested_outputs(envelope: &Value) -> Result<Vec<Output>, Refusal> {
    let unreadable = || Refusal::Unavailable("an earlier attestation is unreadable".into());
    let payload = envelope["payload"]
        .as_str()
        .and_then(|p| base64::engine::general_purpose::STANDARD.decode(p).ok())
        .ok_or_else(unreadable)?;
    let statement: Value = serde_json::from_slice(&payload).map_err(|_| unreadable())?;
    statement["predicate"]["outputs"]
        .as_array()
        .ok_or_else(unreadable)?
        .iter()
        .map(|o| {
            Some(Output {
                role: o["role"].as_str()?.to_string(),
                ordinal: u32::try_from(o["ordinal"].as_u64()?).ok()?,
                artifact: Artifact::from_json(&o["artifact"]).ok()?,
                size: o["size"].as_u64()?,
                entry: EntryRef::from_json(&o["entry"]).ok()?,
            })
        })
        .collect::<Option<Vec<_>>>()
        .ok_or_else(unreadable)
}

/// Runs the release and closes the application with what the run gave.
fn run_and_close(
    context: &Context<'_>,
    admitted: &Admitted,
    recipe: &Value,
) -> Result<Closed, Refusal> {
    let run_inputs: Vec<sandbox::RunInput> = admitted
        .inputs
        .iter()
        .map(|i| sandbox::RunInput {
            role: i.role.clone(),
            blob: i.artifact.bytes.0.to_vec(),
            type_: i.artifact.kind.to_string(),
        })
        .collect();
    let recipe_text = String::from_utf8(canonical_json(recipe)).expect("RFC 8785 JSON is UTF-8");
    let component = context.description["executable"]["service_binary"]
        .as_str()
        .ok_or_else(|| Refusal::Internal("a release description without its component".into()))?;
    let report = sandbox::run(component, &run_inputs, &recipe_text);
    let report = match report {
        Ok(report) => report,
        Err(sandbox::RunError::Unavailable) => {
            return close(
                context,
                admitted,
                &[],
                failed(
                    "limit: concurrent-runs (every run slot stayed busy)".into(),
                    Value::Null,
                    Value::Null,
                ),
            )
        }
        Err(sandbox::RunError::UnknownRelease) => {
            return close(
                context,
                admitted,
                &[],
                failed(
                    "unknown release: the sandbox does not hold this release".into(),
                    Value::Null,
                    Value::Null,
                ),
            )
        }
        Err(sandbox::RunError::MissingInput(role)) => {
            return close(
                context,
                admitted,
                &[],
                failed(
                    format!("missing input: `{role}` names no committed blob"),
                    Value::Null,
                    Value::Null,
                ),
            )
        }
        Err(sandbox::RunError::Refused(why)) => {
            return close(
                context,
                admitted,
                &[],
                failed(format!("refused: {why}"), Value::Null, Value::Null),
            )
        }
    };
    let limits = json!({
        "fuel": report.limits.fuel,
        "memory": report.limits.memory,
        "wall_ms": report.limits.wall_ms,
        "outputs": report.limits.outputs,
        "output_bytes": report.limits.output_bytes,
    });
    let used = json!({
        "fuel": report.used.fuel,
        "peak_memory": report.used.peak_memory,
        "wall_us": report.used.wall_us,
    });
    match report.outcome {
        sandbox::RunOutcome::Failed(reason) => {
            close(context, admitted, &[], failed(reason, limits, used))
        }
        sandbox::RunOutcome::Completed(produced) if produced.len() > MAX_OUTPUTS => close(
            context,
            admitted,
            &[],
            failed(
                format!("limit: outputs (an application holds at most {MAX_OUTPUTS})"),
                limits,
                used,
            ),
        ),
        sandbox::RunOutcome::Completed(produced) => {
            let outputs = store_outputs(context, admitted, produced)?;
            close(
                context,
                admitted,
                &outputs,
                Ending {
                    outcome: Outcome::Completed.name(),
                    reason: None,
                    limits,
                    used,
                    reused: None,
                },
            )
        }
    }
}

fn failed(reason: String, limits: Value, used: Value) -> Ending {
    Ending {
        outcome: Outcome::Failed.name(),
        reason: Some(reason),
        limits,
        used,
        reused: None,
    }
}

/// One artifact space per output under the project's `artifacts`, each
/// with `staged` then `content` in one batch and its `declarations`.
fn store_outputs(
    context: &Context<'_>,
    admitted: &Admitted,
    produced: Vec<sandbox::RunOutput>,
) -> Result<Vec<Output>, Refusal> {
    let declared = declared_outputs(context.description);
    let artifacts = ensure_child(
        context.project,
        "artifacts",
        &setup_operation_id("artifacts"),
    )
    .map(|(space, _)| space)
    .map_err(|e| e.into_refusal("journal"))?;
    let mut outputs = Vec::with_capacity(produced.len());
    for output in produced {
        let role_index = declared
            .iter()
            .position(|r| *r == output.role)
            .ok_or_else(|| {
                Refusal::Internal("the sandbox named an undeclared output role".into())
            })?;
        let bytes = Hash(
            output
                .blob
                .as_slice()
                .try_into()
                .map_err(|_| Refusal::Internal("the sandbox named an output oddly".into()))?,
        );
        let artifact = Artifact {
            bytes,
            kind: output_type(&output.type_)?,
        };
        let label = application::output_label(&context.path[3], role_index, output.ordinal);
        // The label is new with its application, and so is the space's
        // `declarations`: created at once (a retry replays its creation).
        let (space, _) = create_child(&artifacts, &label, &setup_operation_id(&label))
            .map_err(|e| e.into_refusal("journal"))?;
        let batch = [
            Fact::Staged {
                application: admitted.application.clone(),
            }
            .encode(),
            Fact::Content {
                artifact: artifact.clone(),
            }
            .encode(),
        ];
        journal::append(&space, &batch, "coord.staged", Some(0))
            .map_err(|e| e.into_refusal("journal"))?;
        create_child(&space, "declarations", &setup_operation_id("declarations"))
            .map_err(|e| e.into_refusal("journal"))?;
        outputs.push(Output {
            role: output.role,
            ordinal: output.ordinal,
            artifact,
            size: output.size,
            entry: EntryRef {
                root_id: space.root_id.clone(),
                space_id: space.space_id.clone(),
                position: 2,
            },
        });
    }
    outputs.sort_by_key(|o| (declared.iter().position(|r| *r == o.role), o.ordinal));
    Ok(outputs)
}

fn declared_outputs(description: &Value) -> Vec<String> {
    description["outputs"]
        .as_array()
        .map(|roles| {
            roles
                .iter()
                .filter_map(|r| r["role"].as_str().map(String::from))
                .collect()
        })
        .unwrap_or_default()
}

/// An output's interpretation: the descriptor its type names when that is
/// a retained hash, else the retained descriptor
/// `{"purpose": "coord.output-type.v1", "type": <type>}`, put once per
/// type.
fn output_type(kind: &str) -> Result<Hash, Refusal> {
    if let Some(hash) = Hash::parse(kind) {
        if blobs::exists(kind).map_err(|e| e.into_refusal("bytes"))? {
            return Ok(hash);
        }
    }
    publish::retain_once(
        "output-types",
        kind,
        canonical_json(&json!({ "purpose": "coord.output-type.v1", "type": kind })),
    )
}

/// The completion batch: manifest, resolution and attestation retained,
/// then `produced` facts and one `result`, after the attempt's batch.
fn close(
    context: &Context<'_>,
    admitted: &Admitted,
    outputs: &[Output],
    ending: Ending,
) -> Result<Closed, Refusal> {
    let application = &admitted.application;
    let ran = Ran {
        entry: &admitted.attempt.release,
        description: context.description,
    };
    let manifest = canonical_json(&application::manifest(
        application,
        outputs,
        &declared_outputs(context.description),
    ));
    let resolution = canonical_json(&application::resolution(
        application,
        &ran,
        &admitted.inputs,
        &ending,
    ));
    let request = admitted.attempt.request.to_string();
    let request_digest = admitted.attempt.request_digest.to_string();
    let statement = application::statement(&Attested {
        leaf: context.path,
        application,
        ran,
        request: &request,
        request_digest: &request_digest,
        publisher: &admitted.attempt.publisher,
        accepted_at: &admitted.attempt.accepted_at,
        inputs: &admitted.inputs,
        outputs,
        ending: &ending,
    });
    let envelope = sign_envelope(
        context.key,
        IN_TOTO_PAYLOAD_TYPE,
        &canonical_json(&statement),
    );
    let [manifest, resolution, attestation] =
        retain_documents([manifest, resolution, canonical_json(&envelope)])?;
    let outcome = Outcome::from_name(ending.outcome).expect("an outcome of the profile");
    let reused = ending.reused.as_ref().map(|r| r.application.clone());
    let mut batch: Vec<Vec<u8>> = outputs
        .iter()
        .map(|o| {
            Fact::Produced {
                application: application.clone(),
                role: o.role.clone(),
                entry: o.entry.clone(),
            }
            .encode()
        })
        .collect();
    batch.push(
        Fact::Result {
            application: application.clone(),
            outcome,
            manifest,
            resolution,
            attestation,
        }
        .encode(),
    );
    let operation_id = format!("coord.result.{}", &context.identity[4..]);
    match journal::append(
        context.leaf,
        &batch,
        &operation_id,
        Some(admitted.attempt_last),
    ) {
        Ok(appended) => Ok(Closed {
            result: EntryRef {
                root_id: context.leaf.root_id.clone(),
                space_id: context.leaf.space_id.clone(),
                position: appended.last,
            },
            outcome,
            reason: ending.reason,
            outputs: outputs
                .iter()
                .map(|o| (o.role.clone(), o.artifact.clone()))
                .collect(),
            reused,
        }),
        // Another writer closed it first: its result stands.
        Err(CallError::Refused(r)) if r.code == "conflict" || r.code == "idempotency_mismatch" => {
            closed(context.leaf, application)?.ok_or_else(|| {
                Refusal::Unavailable("the application's completion could not be recovered".into())
            })
        }
        Err(e) => Err(e.into_refusal("journal")),
    }
}

/// Whether the application's facts name `wanted`: its retained request,
/// or its result's manifest, resolution or attestation.
pub fn names(leaf: &Space, wanted: &Hash) -> Result<bool, Refusal> {
    Ok(leaf_facts(leaf, None)?.iter().any(|(_, fact)| match fact {
        Fact::Attempt(a) => a.request == *wanted,
        Fact::Result {
            manifest,
            resolution,
            attestation,
            ..
        } => [manifest, resolution, attestation].contains(&wanted),
        _ => false,
    }))
}

/// Closes an attempt no live run holds as `interrupted`.
fn interrupt(
    context: &Context<'_>,
    application: EntryRef,
    attempt: AttemptFact,
) -> Result<Closed, Refusal> {
    let bound = leaf_facts(context.leaf, None)?;
    let mut inputs = Vec::new();
    let mut last = application.position;
    for (reference, fact) in bound {
        if let Fact::Bound {
            application: a,
            role,
            entry,
        } = fact
        {
            if a == application {
                last = last.max(reference.position);
                inputs.push(Input {
                    role,
                    artifact: artifact_at(&entry)?,
                    entry,
                });
            }
        }
    }
    let admitted = Admitted {
        application,
        attempt,
        attempt_last: last,
        inputs,
    };
    let ending = Ending {
        outcome: Outcome::Interrupted.name(),
        reason: Some("interrupted: the service stopped before the run ended".into()),
        limits: Value::Null,
        used: Value::Null,
        reused: None,
    };
    let closed = close(context, &admitted, &[], ending);
    end_run(context.identity, None)?;
    closed
}

/// The content an already admitted input named (no authorization: the
/// attempt's admission checked it).
fn artifact_at(entry: &EntryRef) -> Result<Artifact, Refusal> {
    let space = journal::resolve_id(&entry.root_id, &entry.space_id)
        .map_err(|e| e.into_refusal("journal"))?
        .ok_or_else(|| Refusal::Unavailable("a bound input's space is gone".into()))?;
    let head = journal::head(&space).map_err(|e| e.into_refusal("journal"))?;
    content_at(&space, entry.position, head)?
        .ok_or_else(|| Refusal::Unavailable("a bound input is unreadable".into()))
}

/// Runs a `prepare` sweeps at most: the rest are closed when their
/// application is next asked about, or at the next start.
const SWEEP: u32 = 1024;

/// Closes as `interrupted` every attempt whose run an earlier process
/// recorded and never ended (called by `prepare`, before any request);
/// answers how many it closed.
pub fn interrupt_cut_runs(world: &World, settings: &Settings) -> Result<usize, Refusal> {
    let started = auth::started_at()?;
    let records = kv::begin_read().and_then(|txn| {
        txn.scan(
            RUNS,
            &kv::Range {
                start: Vec::new(),
                end: None,
                reverse: false,
                limit: SWEEP,
            },
        )
    })?;
    let mut interrupted = 0;
    for record in records {
        let stored: Value = serde_json::from_slice(&record.value)
            .map_err(|_| Refusal::Unavailable("unreadable run record".into()))?;
        if stored["boot"].as_u64() == Some(started) {
            continue;
        }
        let identity = String::from_utf8(record.key)
            .map_err(|_| Refusal::Unavailable("unreadable run record".into()))?;
        let leaf = Space::from_json(&stored["leaf"]).map_err(|e| e.into_refusal("journal"))?;
        let Some((application, attempt)) = find_attempt(&leaf, &identity, None)? else {
            // Cut before its attempt was appended: nothing to close.
            end_run(&identity, None)?;
            continue;
        };
        if closed(&leaf, &application)?.is_some() {
            end_run(&identity, None)?;
            continue;
        }
        let path = world
            .world_path(&leaf)
            .filter(|p| p.len() == 4)
            .ok_or_else(|| Refusal::Unavailable("a run record names no application".into()))?;
        let project = world
            .resolve(&path[..2])?
            .ok_or_else(|| Refusal::Unavailable("a run record's project is gone".into()))?;
        let key = settings
            .issuer()
            .ok_or_else(|| Refusal::Unavailable("no key to sign attestations with".into()))?;
        let release = attempt.release.clone();
        let description = release_description(&release)?;
        let context = Context {
            leaf: &leaf,
            path: &path,
            project: &project,
            release_entry: &release,
            description: &description,
            identity: &identity,
            key: &key,
        };
        interrupt(&context, application, attempt)?;
        interrupted += 1;
    }
    Ok(interrupted)
}

fn mark_running(identity: &str, leaf: &Space, application: &EntryRef) -> Result<(), Refusal> {
    let value = json!({
        "boot": auth::started_at()?,
        "leaf": leaf.to_json(),
        "attempt": application.to_json(),
    });
    kv::begin_write().and_then(|txn| {
        txn.commit_with(&[kv::TableWrite {
            table: RUNS.into(),
            key: identity.as_bytes().to_vec(),
            value: value.to_string().into_bytes(),
        }])
    })?;
    Ok(())
}

/// Removes the run record of `identity`, with the reuse row of the
/// completed application when there is one, in one commit that does not
/// wait for the disk: losing it loses nothing the service does not find
/// again. A record left by an earlier start is cleared by the next start's
/// sweep, which finds the application's result; a missing reuse row costs
/// one run, which writes it again (`crate::reuse`).
fn end_run(identity: &str, reuse_row: Option<kv::TableWrite>) -> Result<(), Refusal> {
    let txn = kv::begin_write()?;
    txn.delete(RUNS, identity.as_bytes())?;
    txn.commit_detached(&reuse_row.into_iter().collect::<Vec<_>>())?;
    Ok(())
}

/// Whether a run of this process holds the request's attempt.
fn running_here(identity: &str) -> Result<bool, Refusal> {
    let stored = kv::begin_read().and_then(|txn| txn.get(RUNS, identity.as_bytes()))?;
    let Some(stored) = stored else {
        return Ok(false);
    };
    let stored: Value = serde_json::from_slice(&stored)
        .map_err(|_| Refusal::Unavailable("unreadable run record".into()))?;
    Ok(stored["boot"].as_u64() == Some(auth::started_at()?))
}
