//! The documents of an application (HTTP.md decisions 32 to 37), pure:
//! the retained normalized ApplicationRequest, the OutputManifest, the
//! resolution and the attestation's in-toto Statement. Each is retained as
//! RFC 8785 JSON and named by its hash in the application's facts.

use crate::facts::{Artifact, EntryRef};
use serde_json::{json, Value};

/// The `normalization` of a retained ApplicationRequest: RFC 8785 JSON of
/// exactly `{tool, release, inputs, recipe, normalization}`, `release` the
/// occurrence that ran (never null), `inputs` keyed by role.
pub const NORMALIZATION: &str = "coord.application-request.v1";

/// The in-toto predicate type of an application's attestation.
pub const PREDICATE_TYPE: &str = "urn:coord:application-run:v1";

/// The in-toto Statement type.
pub const STATEMENT_TYPE: &str = "https://in-toto.io/Statement/v1";

/// One input as it was resolved: the occurrence and the content it names.
#[derive(Debug, Clone, PartialEq)]
pub struct Input {
    pub role: String,
    pub entry: EntryRef,
    pub artifact: Artifact,
}

/// One output as it was stored: its artifact space's content occurrence.
#[derive(Debug, Clone, PartialEq)]
pub struct Output {
    pub role: String,
    pub ordinal: u32,
    pub artifact: Artifact,
    pub size: u64,
    pub entry: EntryRef,
}

/// The release that ran.
#[derive(Debug, Clone, PartialEq)]
pub struct Ran<'a> {
    pub entry: &'a EntryRef,
    /// The release description (its `executable` included).
    pub description: &'a Value,
}

/// How a run ended, as the attestation and the resolution record it.
#[derive(Debug, Clone, PartialEq)]
pub struct Ending {
    /// `completed`, `failed` or `interrupted`.
    pub outcome: &'static str,
    pub reason: Option<String>,
    /// The limits in force; null when the run never reported them
    /// (interrupted).
    pub limits: Value,
    /// The resources used; null when unknown (interrupted) or when
    /// nothing ran (reused).
    pub used: Value,
    /// The earlier application answered instead of a run, if any.
    pub reused: Option<Reused>,
}

/// An earlier completed application of the same deterministic release,
/// inputs and recipe, whose outputs a new application answers with.
#[derive(Debug, Clone, PartialEq)]
pub struct Reused {
    /// Its attempt (the application) and its `result` occurrence.
    pub application: EntryRef,
    pub result: EntryRef,
}

impl Reused {
    pub fn to_json(&self) -> Value {
        json!({ "application": self.application.to_json(), "result": self.result.to_json() })
    }
}

fn reused_json(ending: &Ending) -> Value {
    ending.reused.as_ref().map_or(Value::Null, Reused::to_json)
}

pub fn request(tool: &str, release: &EntryRef, inputs: &[Input], recipe: &Value) -> Value {
    json!({
        "tool": tool,
        "release": release.to_json(),
        "inputs": inputs_by_role(inputs),
        "recipe": recipe,
        "normalization": NORMALIZATION,
    })
}

fn inputs_by_role(inputs: &[Input]) -> Value {
    let map: serde_json::Map<String, Value> = inputs
        .iter()
        .map(|i| (i.role.clone(), i.entry.to_json()))
        .collect();
    Value::Object(map)
}

/// The label of an output's artifact space under the project's
/// `artifacts`: `<application>:<role index>.<ordinal>`, the role's index
/// in the release's `outputs`. A user label never holds `:`, so it cannot
/// collide; it is at most 128 + 1 + 3 + 1 + 10 bytes.
pub fn output_label(application: &str, role_index: usize, ordinal: u32) -> String {
    format!("{application}:{role_index}.{ordinal}")
}

/// The OutputManifest: outputs in the release's role order, then ordinal.
/// `counts` holds the number of outputs and their total size; `coverage`
/// the declared roles that produced nothing.
pub fn manifest(application: &EntryRef, outputs: &[Output], declared: &[String]) -> Value {
    let listed: Vec<Value> = outputs
        .iter()
        .map(|o| {
            json!({
                "role": o.role,
                "ordinal": o.ordinal,
                "artifact": artifact_json(&o.artifact),
                "entry": o.entry.to_json(),
            })
        })
        .collect();
    let empty: Vec<&String> = declared
        .iter()
        .filter(|role| !outputs.iter().any(|o| &o.role == *role))
        .collect();
    json!({
        "application": application.to_json(),
        "outputs": listed,
        "counts": {
            "outputs": outputs.len(),
            "bytes": outputs.iter().map(|o| o.size).sum::<u64>(),
        },
        "coverage": { "declared": declared, "without_output": empty },
    })
}

fn artifact_json(artifact: &Artifact) -> Value {
    json!({ "bytes": artifact.bytes.to_string(), "type": artifact.kind.to_string() })
}

/// The resolution: what the application's references resolved to and how
/// its run ended.
pub fn resolution(
    application: &EntryRef,
    ran: &Ran<'_>,
    inputs: &[Input],
    ending: &Ending,
) -> Value {
    let inputs: Vec<Value> = inputs
        .iter()
        .map(|i| json!({ "role": i.role, "entry": i.entry.to_json(), "artifact": artifact_json(&i.artifact) }))
        .collect();
    json!({
        "application": application.to_json(),
        "release": { "entry": ran.entry.to_json(), "description": ran.description },
        "inputs": inputs,
        "outcome": ending.outcome,
        "reason": ending.reason,
        "limits": ending.limits,
        "used": ending.used,
        "reused": reused_json(ending),
    })
}

/// What the attestation binds beyond the resolution.
pub struct Attested<'a> {
    pub leaf: &'a [String],
    pub application: &'a EntryRef,
    pub ran: Ran<'a>,
    /// The hash of the retained ApplicationRequest and the attempt's
    /// request digest.
    pub request: &'a str,
    pub request_digest: &'a str,
    pub publisher: &'a str,
    pub accepted_at: &'a str,
    pub inputs: &'a [Input],
    pub outputs: &'a [Output],
    pub ending: &'a Ending,
}

/// The in-toto Statement v1: the outputs are its subjects by SHA-256
/// (named `<role>/<ordinal>`); a run without outputs names the retained
/// ApplicationRequest instead (`request`), since a statement has at least
/// one subject.
pub fn statement(a: &Attested<'_>) -> Value {
    let sha256 = |hash: &crate::facts::Hash| lab_kit::hex::encode_lower(&hash.0);
    let mut subjects: Vec<Value> = a
        .outputs
        .iter()
        .map(|o| {
            json!({
                "name": format!("{}/{}", o.role, o.ordinal),
                "digest": { "sha256": sha256(&o.artifact.bytes) },
            })
        })
        .collect();
    if subjects.is_empty() {
        let hex = a.request.strip_prefix("sha256:").unwrap_or(a.request);
        subjects.push(json!({ "name": "request", "digest": { "sha256": hex } }));
    }
    let inputs: Vec<Value> = a
        .inputs
        .iter()
        .map(|i| json!({ "role": i.role, "entry": i.entry.to_json(), "artifact": artifact_json(&i.artifact) }))
        .collect();
    let outputs: Vec<Value> = a
        .outputs
        .iter()
        .map(|o| {
            json!({
                "role": o.role,
                "ordinal": o.ordinal,
                "artifact": artifact_json(&o.artifact),
                "size": o.size,
                "entry": o.entry.to_json(),
            })
        })
        .collect();
    json!({
        "_type": STATEMENT_TYPE,
        "subject": subjects,
        "predicateType": PREDICATE_TYPE,
        "predicate": {
            "application": { "path": a.leaf, "attempt": a.application.to_json() },
            "release": { "entry": a.ran.entry.to_json(), "description": a.ran.description },
            "request": a.request,
            "request_digest": a.request_digest,
            "publisher": a.publisher,
            "accepted_at": a.accepted_at,
            "inputs": inputs,
            "outputs": outputs,
            "outcome": a.ending.outcome,
            "reason": a.ending.reason,
            "limits": a.ending.limits,
            "used": a.ending.used,
            "reused": reused_json(a.ending),
        },
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::facts::Hash;

    fn entry(position: u64) -> EntryRef {
        EntryRef {
            root_id: format!("rt_{}", "1".repeat(32)),
            space_id: format!("spc_{}", "2".repeat(32)),
            position,
        }
    }

    fn output(role: &str, ordinal: u32, byte: u8) -> Output {
        Output {
            role: role.into(),
            ordinal,
            artifact: Artifact {
                bytes: Hash([byte; 32]),
                kind: Hash([9; 32]),
            },
            size: 10,
            entry: entry(2),
        }
    }

    #[test]
    fn an_output_label_is_never_a_user_label() {
        let label = output_label("run-1", 0, 3);
        assert_eq!(label, "run-1:0.3");
        assert!(crate::layout::check_user_label("x", &label).is_err());
        assert!(crate::params::check_label(&output_label(&"a".repeat(128), 127, u32::MAX)).is_ok());
    }

    #[test]
    fn the_manifest_counts_and_covers() {
        let outputs = [output("report", 0, 1), output("report", 1, 2)];
        let declared = ["report".to_string(), "log".to_string()];
        let m = manifest(&entry(1), &outputs, &declared);
        assert_eq!(m["counts"], json!({ "outputs": 2, "bytes": 20 }));
        assert_eq!(m["coverage"]["without_output"], json!(["log"]));
        assert_eq!(m["outputs"][1]["ordinal"], 1);
    }

    #[test]
    fn the_statement_names_outputs_or_else_the_request() {
        let description = json!({ "name": "t" });
        let ending = Ending {
            outcome: "completed",
            reason: None,
            limits: json!({}),
            used: json!({}),
            reused: None,
        };
        let request = format!("sha256:{}", "ab".repeat(32));
        let release = entry(1);
        let outputs = [output("report", 0, 1)];
        let mut attested = Attested {
            leaf: &[],
            application: &release,
            ran: Ran {
                entry: &release,
                description: &description,
            },
            request: &request,
            request_digest: &request,
            publisher: "p",
            accepted_at: "t",
            inputs: &[],
            outputs: &outputs,
            ending: &ending,
        };
        let s = statement(&attested);
        assert_eq!(s["_type"], STATEMENT_TYPE);
        assert_eq!(s["subject"][0]["digest"]["sha256"], "01".repeat(32));
        attested.outputs = &[];
        let s = statement(&attested);
        assert_eq!(
            s["subject"],
            json!([{ "name": "request", "digest": { "sha256": "ab".repeat(32) } }])
        );
    }
}
