//! Checks every vector in `contracts/values/vectors.json`.

mod common;

use base64::Engine as _;
use lab_values::{decode, encode};

#[test]
fn every_vector_holds() {
    let vectors = common::vectors();
    assert!(vectors.len() >= 100, "vector file looks incomplete");
    let mut names = std::collections::BTreeSet::new();
    for vector in &vectors {
        let name = &vector.name;
        assert!(names.insert(name.clone()), "duplicate vector name {name}");
        let bytes = hex::decode(&vector.hex).unwrap_or_else(|e| panic!("{name}: hex: {e}"));
        assert_eq!(
            vector.hex,
            vector.hex.to_lowercase(),
            "{name}: lowercase hex"
        );
        let from_base64 = base64::engine::general_purpose::STANDARD
            .decode(&vector.base64)
            .unwrap_or_else(|e| panic!("{name}: base64: {e}"));
        assert_eq!(bytes, from_base64, "{name}: hex and base64 disagree");
        assert_eq!(
            base64::engine::general_purpose::STANDARD.encode(&bytes),
            vector.base64,
            "{name}: base64 is not canonical padded standard base64"
        );

        let decoded = decode(&bytes);
        if vector.valid {
            assert!(
                vector.error.is_none(),
                "{name}: a valid vector has no error"
            );
            let value = decoded.unwrap_or_else(|e| panic!("{name}: refused: {e}"));
            assert_eq!(encode(&value), bytes, "{name}: re-encoding differs");
            let note = vector
                .value
                .as_ref()
                .unwrap_or_else(|| panic!("{name}: no value"));
            let described = common::from_notation(note);
            assert_eq!(
                value, described,
                "{name}: value differs from its description"
            );
            assert_eq!(
                encode(&described),
                bytes,
                "{name}: description encodes differently"
            );
        } else {
            assert!(
                vector.value.is_none(),
                "{name}: an invalid vector has no value"
            );
            let error = decoded.expect_err(name);
            let class = if error.is_limit() { "limit" } else { "invalid" };
            assert_eq!(
                Some(class),
                vector.error.as_deref(),
                "{name}: refused as {error}"
            );
        }
    }
}
