//! Writes `contracts/coordination/facts-vectors.json` to standard output:
//!
//! ```text
//! cargo run -p lab-coord --example facts_vectors > contracts/coordination/facts-vectors.json
//! ```
//!
//! Every value is fixed, so the output is the same on every run. The
//! crate's `tests/facts_vectors.rs` checks the file against the library
//! without running this program.

use base64::Engine as _;
use lab_coord::facts::{
    decode, Application, Artifact, AttemptFact, DeclarationFact, EntryRef, Fact, FactError, Hash,
    Outcome, Predicate, RecordFact, RelationKind, ARTIFACT_LABEL, ENTRY_LABEL, HASH_LABEL,
    NONE_LABEL,
};
use lab_values::{Map, Value};
use serde_json::{json, Value as Json};

const ROOT: &str = "rt_5f1c0a7e2b9d4c3a8e6f1b0d2c4a6e8f";
const PUBLISHER: &str = "ed25519:ed4928c628d1c2c6eae90338905995612959273a5c63f93636c14614ac8737d1";
const REQUEST_ID: &str = "req_6a09e667f3bcc908b2fb1366ea957d3e3adec17512775099da2f590b066f4c3e";
const AT: &str = "2026-11-22T14:10:10.123456Z";

fn at(space: &str, position: u64) -> EntryRef {
    EntryRef {
        root_id: ROOT.to_owned(),
        space_id: format!("spc_{space}"),
        position,
    }
}

fn release() -> EntryRef {
    at("0a1b2c3d4e5f60718293a4b5c6d7e8f9", 1)
}

fn application() -> EntryRef {
    at("1f2e3d4c5b6a79880716253443526170", 1)
}

fn artifact() -> Artifact {
    Artifact {
        bytes: Hash::of(b"hello, world\n"),
        kind: Hash::of(b"text/plain; charset=utf-8"),
    }
}

fn valid() -> Vec<(&'static str, Fact)> {
    vec![
        (
            "content",
            Fact::Content {
                artifact: artifact(),
            },
        ),
        (
            "record with metadata",
            Fact::Record(RecordFact {
                profile: "coord/worker-note/1".into(),
                hash: Hash::of(b"{\"note\":\"checked the parser\"}"),
                metadata: [("title", "parser"), ("lang", "en")]
                    .into_iter()
                    .map(|(k, v)| (k.to_owned(), v.to_owned()))
                    .collect(),
                publisher: PUBLISHER.into(),
                request_id: REQUEST_ID.into(),
                request_digest: Hash::of(b"request digest"),
                accepted_at: AT.into(),
            }),
        ),
        (
            "record with empty metadata",
            Fact::Record(RecordFact {
                profile: "coord/worker-state/1".into(),
                hash: Hash::of(b"{}"),
                metadata: Default::default(),
                publisher: PUBLISHER.into(),
                request_id: REQUEST_ID.into(),
                request_digest: Hash::of(b"another request digest"),
                accepted_at: "2026-01-01T00:00:00.000000Z".into(),
            }),
        ),
        (
            "declaration by a principal, no subject",
            Fact::Declaration(DeclarationFact {
                assertion_id: "as_01".into(),
                envelope: Hash::of(b"envelope 1"),
                artifact: artifact(),
                subject: None,
                publisher: PUBLISHER.into(),
                application: Application::None,
            }),
        ),
        (
            "declaration by an application, with subject",
            Fact::Declaration(DeclarationFact {
                assertion_id: "as_02".into(),
                envelope: Hash::of(b"envelope 2"),
                artifact: artifact(),
                subject: Some("spc_0a1b2c3d4e5f60718293a4b5c6d7e8f9#main".into()),
                publisher: PUBLISHER.into(),
                application: Application::Hosted(application()),
            }),
        ),
        (
            "attempt",
            Fact::Attempt(AttemptFact {
                release: release(),
                request: Hash::of(b"normalized application request"),
                publisher: PUBLISHER.into(),
                request_id: REQUEST_ID.into(),
                request_digest: Hash::of(b"apply request digest"),
                accepted_at: AT.into(),
            }),
        ),
        (
            "bound",
            Fact::Bound {
                application: application(),
                role: "source".into(),
                entry: at("2c3d4e5f60718293a4b5c6d7e8f90a1b", 1),
            },
        ),
        (
            "produced",
            Fact::Produced {
                application: application(),
                role: "report".into(),
                entry: at("3d4e5f60718293a4b5c6d7e8f90a1b2c", 2),
            },
        ),
        (
            "result completed",
            Fact::Result {
                application: application(),
                outcome: Outcome::Completed,
                manifest: Hash::of(b"output manifest"),
                resolution: Hash::of(b"resolution"),
                attestation: Hash::of(b"attestation"),
            },
        ),
        (
            "result interrupted",
            Fact::Result {
                application: application(),
                outcome: Outcome::Interrupted,
                manifest: Hash::of(b"empty manifest"),
                resolution: Hash::of(b"resolution"),
                attestation: Hash::of(b"attestation 2"),
            },
        ),
        (
            "staged",
            Fact::Staged {
                application: application(),
            },
        ),
        (
            "justifies at the greatest position",
            Fact::Justifies {
                assertion_id: "as_02".into(),
                group: "g1".into(),
                premise: at("4e5f60718293a4b5c6d7e8f90a1b2c3d", 9_007_199_254_740_991),
                method: "inspection".into(),
            },
        ),
        (
            "relation supersedes",
            Fact::Relation {
                assertion_id: "as_03".into(),
                kind: RelationKind::Supersedes,
                target: at("5f60718293a4b5c6d7e8f90a1b2c3d4e", 2),
            },
        ),
    ]
}

fn foreign() -> Vec<(&'static str, Vec<u8>)> {
    vec![
        (
            "journal creation fact",
            lab_values::creation_fact("artifacts", "spc_0a1b2c3d4e5f60718293a4b5c6d7e8f9"),
        ),
        (
            "text predicate record",
            Value::Tuple(vec![Value::text("record"), Value::text("x")]).to_bytes(),
        ),
        (
            "label records",
            Value::Tuple(vec![Value::label("records")]).to_bytes(),
        ),
        (
            "label Content",
            Value::Tuple(vec![Value::label("Content"), artifact().to_value()]).to_bytes(),
        ),
        (
            "bare none label as a fact",
            Value::Tuple(vec![Value::label(NONE_LABEL)]).to_bytes(),
        ),
    ]
}

/// The valid vector named `name` as a value, with argument `index` (0 is
/// the first after the predicate) replaced by `with`, or removed when
/// `with` is `None`; an `index` one past the end appends.
fn mutated(name: &str, index: usize, with: Option<Value>) -> Vec<u8> {
    let fact = valid()
        .into_iter()
        .find(|(n, _)| *n == name)
        .unwrap_or_else(|| panic!("no valid vector {name}"))
        .1;
    let Value::Tuple(mut children) = fact.to_value() else {
        unreachable!("a fact is a tuple")
    };
    match with {
        Some(value) if 1 + index == children.len() => children.push(value),
        Some(value) => children[1 + index] = value,
        None => {
            children.remove(1 + index);
        }
    }
    Value::Tuple(children).to_bytes()
}

fn entry_with(change: impl FnOnce(&mut Vec<Value>)) -> Value {
    let Value::Tuple(mut parts) = application().to_value() else {
        unreachable!("an entry is a tuple")
    };
    change(&mut parts);
    Value::Tuple(parts)
}

fn invalid() -> Vec<(&'static str, Vec<u8>)> {
    let text = |t: &str| Some(Value::text(t));
    let int = |n: u64| Value::int(n);
    let short_hash = Value::Tuple(vec![Value::label(HASH_LABEL), Value::bytes(vec![7; 31])]);
    let metadata_int: Map = [(Value::text("k"), int(1))].into_iter().collect();
    vec![
        (
            "record accepted_at without fraction",
            mutated("record with metadata", 6, text("2026-11-22T14:10:10Z")),
        ),
        (
            "record accepted_at with milliseconds",
            mutated("record with metadata", 6, text("2026-11-22T14:10:10.123Z")),
        ),
        (
            "record accepted_at with offset",
            mutated(
                "record with metadata",
                6,
                text("2026-11-22T14:10:10.123456+00:00"),
            ),
        ),
        (
            "record accepted_at on a day that does not exist",
            mutated(
                "record with metadata",
                6,
                text("2026-02-29T14:10:10.123456Z"),
            ),
        ),
        (
            "record publisher in uppercase hex",
            mutated("record with metadata", 3, text(&PUBLISHER.to_uppercase())),
        ),
        (
            "record request_id too short",
            mutated("record with metadata", 4, text("req_6a09")),
        ),
        (
            "record hash as text",
            mutated(
                "record with metadata",
                1,
                text(&Hash::of(b"{}").to_string()),
            ),
        ),
        (
            "record hash of 31 bytes",
            mutated("record with metadata", 1, Some(short_hash.clone())),
        ),
        (
            "record hash labelled md5",
            mutated(
                "record with metadata",
                1,
                Some(Value::Tuple(vec![
                    Value::label("md5"),
                    Value::bytes(vec![7; 32]),
                ])),
            ),
        ),
        (
            "record metadata value not text",
            mutated("record with metadata", 2, Some(Value::Map(metadata_int))),
        ),
        (
            "record profile as label",
            mutated("record with metadata", 0, Some(Value::label("coord/x/1"))),
        ),
        (
            "record without accepted_at",
            mutated("record with metadata", 6, None),
        ),
        (
            "record with an extra argument",
            mutated("record with metadata", 7, Some(Value::Null)),
        ),
        (
            "content artifact with wrong label",
            mutated(
                "content",
                0,
                Some(Value::Tuple(vec![
                    Value::label("coord.artifact.v2"),
                    artifact().bytes.to_value(),
                    artifact().kind.to_value(),
                ])),
            ),
        ),
        (
            "content artifact as a bare hash",
            mutated("content", 0, Some(artifact().bytes.to_value())),
        ),
        (
            "declaration assertion_id empty",
            mutated("declaration by a principal, no subject", 0, text("")),
        ),
        (
            "declaration assertion_id of 129 characters",
            mutated(
                "declaration by a principal, no subject",
                0,
                text(&"a".repeat(129)),
            ),
        ),
        (
            "declaration subject as int",
            mutated("declaration by a principal, no subject", 3, Some(int(1))),
        ),
        (
            "declaration application as null",
            mutated(
                "declaration by a principal, no subject",
                5,
                Some(Value::Null),
            ),
        ),
        (
            "declaration application as text coord.none.v1",
            mutated(
                "declaration by a principal, no subject",
                5,
                text("coord.none.v1"),
            ),
        ),
        (
            "attempt release at position 0",
            mutated("attempt", 0, Some(entry_with(|p| p[3] = int(0)))),
        ),
        (
            "attempt release at position 2^53",
            mutated("attempt", 0, Some(entry_with(|p| p[3] = int(1 << 53)))),
        ),
        (
            "attempt release with bad root_id",
            mutated(
                "attempt",
                0,
                Some(entry_with(|p| p[1] = Value::text("rt_5F1C"))),
            ),
        ),
        (
            "attempt release with wrong label",
            mutated(
                "attempt",
                0,
                Some(entry_with(|p| p[0] = Value::label("coord.entry.v2"))),
            ),
        ),
        (
            "attempt release as 3-tuple",
            mutated(
                "attempt",
                0,
                Some(entry_with(|p| {
                    p.pop();
                })),
            ),
        ),
        (
            "bound application none",
            mutated("bound", 0, Some(Value::label(NONE_LABEL))),
        ),
        (
            "bound entry with position as text",
            mutated("bound", 2, Some(entry_with(|p| p[3] = Value::text("1")))),
        ),
        ("bound role null", mutated("bound", 1, Some(Value::Null))),
        (
            "produced entry label as text",
            mutated(
                "produced",
                2,
                Some(entry_with(|p| {
                    p[0] = Value::text(String::from_utf8_lossy(ENTRY_LABEL).into_owned())
                })),
            ),
        ),
        (
            "result outcome succeeded",
            mutated("result completed", 1, text("succeeded")),
        ),
        (
            "result attestation of 31 bytes",
            mutated("result completed", 4, Some(short_hash)),
        ),
        (
            "staged application none",
            mutated("staged", 0, Some(Value::label(NONE_LABEL))),
        ),
        (
            "staged with an extra argument",
            mutated("staged", 1, Some(application().to_value())),
        ),
        (
            "justifies premise at position 0",
            mutated(
                "justifies at the greatest position",
                2,
                Some(entry_with(|p| p[3] = int(0))),
            ),
        ),
        (
            "justifies method as label",
            mutated(
                "justifies at the greatest position",
                3,
                Some(Value::label("inspection")),
            ),
        ),
        (
            "relation kind amends",
            mutated("relation supersedes", 1, text("amends")),
        ),
        (
            "relation target as artifact",
            mutated(
                "relation supersedes",
                2,
                Some(Value::Tuple(vec![
                    Value::label(ARTIFACT_LABEL),
                    artifact().bytes.to_value(),
                    artifact().kind.to_value(),
                ])),
            ),
        ),
    ]
}

fn encodings(bytes: &[u8]) -> (String, String) {
    (
        hex::encode(bytes),
        base64::engine::general_purpose::STANDARD.encode(bytes),
    )
}

fn main() {
    let predicates: Vec<Json> = Predicate::ALL
        .into_iter()
        .map(|p| {
            let (hex, base64) = encodings(&p.to_value_bytes());
            let arguments: Vec<&str> = p.arguments().collect();
            json!({"predicate": p.name(), "arguments": arguments, "hex": hex, "base64": base64})
        })
        .collect();
    let valid: Vec<Json> = valid()
        .into_iter()
        .map(|(name, fact)| {
            let (hex, base64) = encodings(&fact.encode());
            let mut member = fact.to_json();
            member["predicate"] = json!(fact.predicate().name());
            json!({"name": name, "json": member, "hex": hex, "base64": base64})
        })
        .collect();
    let foreign: Vec<Json> = foreign()
        .into_iter()
        .map(|(name, bytes)| {
            assert_eq!(decode(&bytes), Ok(None), "{name}");
            let (hex, base64) = encodings(&bytes);
            json!({"name": name, "hex": hex, "base64": base64})
        })
        .collect();
    let invalid: Vec<Json> = invalid()
        .into_iter()
        .map(|(name, bytes)| {
            let Err(FactError::Argument {
                predicate, field, ..
            }) = decode(&bytes)
            else {
                panic!("{name} is not refused")
            };
            let (hex, base64) = encodings(&bytes);
            json!({
                "name": name,
                "predicate": predicate.name(),
                "field": field,
                "hex": hex,
                "base64": base64,
            })
        })
        .collect();
    let document = json!({
        "about": "coord-facts-v2 vectors; shapes in contracts/coordination/FACTS.md. Generated by components/coord/examples/facts_vectors.rs.",
        "profile": "coord-facts-v2",
        "predicates": predicates,
        "valid": valid,
        "foreign": foreign,
        "invalid": invalid,
    });
    println!("{}", serde_json::to_string_pretty(&document).unwrap());
}
