//! Checks every vector of `contracts/coordination/facts-vectors.json`
//! against `lab_coord::facts`, both ways: bytes decode to the fact whose JSON
//! form is the vector's `json`, and that JSON builds the fact whose
//! canonical bytes are the vector's `hex`.

use std::collections::HashSet;
use std::path::PathBuf;

use base64::Engine as _;
use lab_coord::facts::{decode, Fact, FactError, Predicate, PROFILE};
use serde_json::Value;

fn document() -> Value {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../contracts/coordination/facts-vectors.json");
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path:?}: {e}"));
    serde_json::from_str(&text).unwrap()
}

fn s(value: &Value) -> &str {
    value
        .as_str()
        .unwrap_or_else(|| panic!("not a string: {value}"))
}

fn list<'d>(doc: &'d Value, member: &str) -> &'d [Value] {
    doc[member]
        .as_array()
        .unwrap_or_else(|| panic!("no array {member}"))
}

/// The vector's bytes, after checking that `hex` and `base64` agree.
fn bytes(vector: &Value) -> Vec<u8> {
    let from_hex = hex::decode(s(&vector["hex"])).unwrap();
    assert_eq!(
        hex::encode(&from_hex),
        s(&vector["hex"]),
        "hex is lowercase"
    );
    let from_base64 = base64::engine::general_purpose::STANDARD
        .decode(s(&vector["base64"]))
        .unwrap();
    assert_eq!(from_hex, from_base64, "{}", vector["name"]);
    from_hex
}

#[test]
fn profile_and_unique_names() {
    let doc = document();
    assert_eq!(s(&doc["profile"]), PROFILE);
    let mut names = HashSet::new();
    for part in ["valid", "foreign", "invalid"] {
        for vector in list(&doc, part) {
            assert!(
                names.insert(s(&vector["name"]).to_owned()),
                "duplicate name {}",
                vector["name"]
            );
        }
    }
}

#[test]
fn predicate_labels() {
    let doc = document();
    let rows = list(&doc, "predicates");
    assert_eq!(rows.len(), Predicate::ALL.len());
    for (row, predicate) in rows.iter().zip(Predicate::ALL) {
        assert_eq!(s(&row["predicate"]), predicate.name());
        assert_eq!(bytes(row), predicate.to_value_bytes());
        assert_eq!(s(&row["base64"]), predicate.filter_base64());
        let arguments: Vec<&str> = row["arguments"].as_array().unwrap().iter().map(s).collect();
        assert_eq!(arguments, predicate.arguments().collect::<Vec<_>>());
    }
}

#[test]
fn valid_vectors_both_ways() {
    let doc = document();
    let mut seen = HashSet::new();
    for vector in list(&doc, "valid") {
        let name = s(&vector["name"]);
        let bytes = bytes(vector);

        // Bytes -> fact -> JSON.
        let fact = decode(&bytes)
            .unwrap_or_else(|e| panic!("{name}: {e}"))
            .unwrap_or_else(|| panic!("{name}: not a profile fact"));
        let mut member = vector["json"].clone();
        let predicate = Predicate::from_name(s(&member["predicate"])).unwrap();
        assert_eq!(fact.predicate(), predicate, "{name}");
        member.as_object_mut().unwrap().remove("predicate");
        assert_eq!(fact.to_json(), member, "{name}");

        // JSON -> fact -> bytes.
        let built = Fact::from_json(predicate, &member).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_eq!(built, fact, "{name}");
        assert_eq!(built.encode(), bytes, "{name}");
        seen.insert(predicate);
    }
    for predicate in Predicate::ALL {
        assert!(seen.contains(&predicate), "no valid vector for {predicate}");
    }
}

#[test]
fn foreign_vectors_are_not_profile_facts() {
    let doc = document();
    for vector in list(&doc, "foreign") {
        assert_eq!(decode(&bytes(vector)), Ok(None), "{}", vector["name"]);
    }
}

#[test]
fn invalid_vectors_name_their_field() {
    let doc = document();
    for vector in list(&doc, "invalid") {
        let name = s(&vector["name"]);
        match decode(&bytes(vector)) {
            Err(error @ FactError::Argument { .. }) => {
                assert_eq!(
                    error.predicate().map(Predicate::name),
                    Some(s(&vector["predicate"])),
                    "{name}"
                );
                assert_eq!(error.field(), Some(s(&vector["field"])), "{name}");
            }
            other => panic!("{name}: expected a refusal, got {other:?}"),
        }
    }
}
