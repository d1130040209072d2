//! Offline verification of an application (HTTP.md decision 36): from the
//! application leaf's entries (as `entries` serves them, decoded members
//! included) and the documents they name, fetched by digest, each check
//! the service's contract promises, with no call to the service.
//!
//! The attestation is a DSSE envelope over an in-toto Statement v1 signed
//! by the world's root key; its predicate must agree with the leaf's facts
//! (attempt, bound, produced, result) and with the retained request,
//! manifest and resolution, and its subjects with the outputs.

use crate::admission::Check;
use lab_coord_auth::dsse::{open_envelope, IN_TOTO_PAYLOAD_TYPE};
use lab_coord_auth::record::sha256_text;
use lab_coord_auth::Principal;
use serde_json::{json, Value};

/// The Statement type and the predicate type the service attests with.
pub const STATEMENT_TYPE: &str = "https://in-toto.io/Statement/v1";
pub const PREDICATE_TYPE: &str = "urn:coord:application-run:v1";

/// The facts of one application, read from its leaf's entries.
struct Leaf {
    attempt_entry: Value,
    attempt: Value,
    /// (role, bound occurrence), in journal order.
    bound: Vec<(Value, Value)>,
    /// (role, produced occurrence), in journal order.
    produced: Vec<(Value, Value)>,
    result: Value,
}

fn leaf(entries: &[Value]) -> Result<Leaf, String> {
    let attempts: Vec<&Value> = entries
        .iter()
        .filter(|e| e["attempt"].is_object())
        .collect();
    let [attempt] = attempts[..] else {
        return Err(format!(
            "the leaf holds {} attempts, not one",
            attempts.len()
        ));
    };
    let application = attempt["ref"].clone();
    let mine = |member: &str| -> Vec<&Value> {
        entries
            .iter()
            .filter(|e| e[member].is_object() && e[member]["application"] == application)
            .map(|e| &e[member])
            .collect()
    };
    let results = mine("result");
    let [result] = results[..] else {
        return Err(format!(
            "the attempt has {} results, not one",
            results.len()
        ));
    };
    let pairs = |member: &str| -> Vec<(Value, Value)> {
        mine(member)
            .into_iter()
            .map(|f| (f["role"].clone(), f[member].clone()))
            .collect()
    };
    Ok(Leaf {
        attempt_entry: application.clone(),
        attempt: attempt["attempt"].clone(),
        bound: pairs("bound"),
        produced: pairs("produced"),
        result: result.clone(),
    })
}

/// A document named by `hash`, fetched and checked against it.
fn document(
    fetch: &mut dyn FnMut(&str) -> Option<Vec<u8>>,
    hash: &Value,
    what: &str,
) -> Result<(Vec<u8>, Value), String> {
    let hash = hash.as_str().ok_or_else(|| format!("no {what} hash"))?;
    let bytes = fetch(hash).ok_or_else(|| format!("the {what} {hash} could not be fetched"))?;
    if sha256_text(&bytes) != hash {
        return Err(format!("the {what} fetched does not hash to {hash}"));
    }
    let value =
        serde_json::from_slice(&bytes).map_err(|e| format!("the {what} is not JSON: {e}"))?;
    Ok((bytes, value))
}

fn same(name: &str, a: &Value, b: &Value) -> Result<(), String> {
    if a == b {
        Ok(())
    } else {
        Err(format!("{name}: {a} against {b}"))
    }
}

/// The checks of one application, in order. They all hold for an
/// application the service closed in the world of `root`. `fetch` gives
/// the bytes of a document by its `sha256:` name (`fetch` at the leaf).
pub fn verify_application(
    entries: &[Value],
    fetch: &mut dyn FnMut(&str) -> Option<Vec<u8>>,
    root: &Principal,
) -> Vec<Check> {
    let mut checks = Vec::new();
    let mut check =
        |name: &'static str, outcome: Result<(), String>| checks.push(Check::of(name, outcome));
    let leaf = match leaf(entries) {
        Ok(leaf) => leaf,
        Err(why) => {
            check("facts", Err(why));
            return checks;
        }
    };
    check("facts", Ok(()));
    let statement =
        document(fetch, &leaf.result["attestation"], "attestation").and_then(|(_, envelope)| {
            let payload =
                open_envelope(&envelope, IN_TOTO_PAYLOAD_TYPE, root).map_err(|e| e.to_string())?;
            serde_json::from_slice::<Value>(&payload)
                .map_err(|e| format!("the statement is not JSON: {e}"))
        });
    check(
        "signature",
        statement.as_ref().map(|_| ()).map_err(Clone::clone),
    );
    let Ok(statement) = statement else {
        return checks;
    };
    let predicate = &statement["predicate"];
    check(
        "statement",
        same("_type", &statement["_type"], &json!(STATEMENT_TYPE)).and(same(
            "predicateType",
            &statement["predicateType"],
            &json!(PREDICATE_TYPE),
        )),
    );
    let a = &leaf.attempt;
    check(
        "attempt",
        same(
            "attempt",
            &predicate["application"]["attempt"],
            &leaf.attempt_entry,
        )
        .and(same(
            "release",
            &predicate["release"]["entry"],
            &a["release"],
        ))
        .and(same("request", &predicate["request"], &a["request"]))
        .and(same(
            "request_digest",
            &predicate["request_digest"],
            &a["request_digest"],
        ))
        .and(same("publisher", &predicate["publisher"], &a["publisher"]))
        .and(same(
            "accepted_at",
            &predicate["accepted_at"],
            &a["accepted_at"],
        ))
        .and(same(
            "outcome",
            &predicate["outcome"],
            &leaf.result["outcome"],
        )),
    );
    let listed = |items: &Value, member: &str| -> Vec<(Value, Value)> {
        items
            .as_array()
            .map(|items| {
                items
                    .iter()
                    .map(|i| (i["role"].clone(), i[member].clone()))
                    .collect()
            })
            .unwrap_or_default()
    };
    let sorted = |mut pairs: Vec<(Value, Value)>| {
        pairs.sort_by_key(|(role, entry)| (role.to_string(), entry.to_string()));
        pairs
    };
    check(
        "inputs",
        same(
            "bound inputs",
            &json!(sorted(listed(&predicate["inputs"], "entry"))),
            &json!(sorted(leaf.bound.clone())),
        ),
    );
    check(
        "outputs",
        same(
            "produced outputs",
            &json!(sorted(listed(&predicate["outputs"], "entry"))),
            &json!(sorted(leaf.produced.clone())),
        )
        .and_then(|()| subjects(&statement, predicate)),
    );
    check(
        "request",
        document(fetch, &a["request"], "request").and_then(|(_, request)| {
            let inputs: Vec<(Value, Value)> = request["inputs"]
                .as_object()
                .map(|m| m.iter().map(|(r, e)| (json!(r), e.clone())).collect())
                .unwrap_or_default();
            same("release", &request["release"], &a["release"]).and(same(
                "inputs",
                &json!(sorted(inputs)),
                &json!(sorted(leaf.bound.clone())),
            ))
        }),
    );
    check(
        "manifest",
        document(fetch, &leaf.result["manifest"], "manifest").and_then(|(_, manifest)| {
            let artifacts = |items: &Value| -> Vec<Value> {
                items
                    .as_array()
                    .map(|v| {
                        v.iter()
                            .map(|o| json!([o["role"], o["ordinal"], o["artifact"], o["entry"]]))
                            .collect()
                    })
                    .unwrap_or_default()
            };
            same("application", &manifest["application"], &leaf.attempt_entry).and(same(
                "outputs",
                &json!(artifacts(&manifest["outputs"])),
                &json!(artifacts(&predicate["outputs"])),
            ))
        }),
    );
    check(
        "resolution",
        document(fetch, &leaf.result["resolution"], "resolution").and_then(|(_, resolution)| {
            same("outcome", &resolution["outcome"], &leaf.result["outcome"])
                .and(same("reason", &resolution["reason"], &predicate["reason"]))
                .and(same("limits", &resolution["limits"], &predicate["limits"]))
                .and(same("used", &resolution["used"], &predicate["used"]))
                .and(same("reused", &resolution["reused"], &predicate["reused"]))
                .and(same("inputs", &resolution["inputs"], &predicate["inputs"]))
                .and(same(
                    "release",
                    &resolution["release"],
                    &predicate["release"],
                ))
        }),
    );
    checks
}

/// The subjects are the outputs by SHA-256 (`<role>/<ordinal>`), or the
/// retained request when there is no output.
fn subjects(statement: &Value, predicate: &Value) -> Result<(), String> {
    let outputs = predicate["outputs"].as_array().cloned().unwrap_or_default();
    let expected: Vec<Value> = if outputs.is_empty() {
        let request = predicate["request"].as_str().unwrap_or_default();
        vec![
            json!({ "name": "request", "digest": { "sha256": request.trim_start_matches("sha256:") } }),
        ]
    } else {
        outputs
            .iter()
            .map(|o| {
                let bytes = o["artifact"]["bytes"].as_str().unwrap_or_default();
                json!({
                    "name": format!("{}/{}", o["role"].as_str().unwrap_or_default(), o["ordinal"]),
                    "digest": { "sha256": bytes.trim_start_matches("sha256:") },
                })
            })
            .collect()
    };
    same("subjects", &statement["subject"], &json!(expected))
}
