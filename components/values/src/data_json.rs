//! The data-json profile: JSON documents projected into values, and the
//! digests built on them.
//!
//! Documents arrive as `serde_json::Value` built without the
//! `arbitrary_precision` feature, so each number is a `u64`, an `i64` or an
//! `f64` and its source text is gone. That limits the projection:
//! - integers in -2^64 ..= -2^63-1 and above 2^64-1 arrive as `f64`; they
//!   cannot be told apart from numbers written with a fraction or exponent
//!   and are refused, although -2^64 ..= -2^63-1 is in the int range;
//! - JSON `-0` arrives as the `f64` -0.0 and projects to the int 0; so do
//!   `-0.0` and `-0e0`, which the same `f64` stands for;
//! - every other `f64` is refused.
//!
//! Objects arrive with members already unique; a document with a repeated
//! member must be refused by the strict JSON reader before projection.

use std::fmt;

use sha2::{Digest, Sha256};

use crate::encode::encode_into;
use crate::int::Int;
use crate::value::{Map, Value};
use crate::MAX_DEPTH;

/// Why a JSON document has no data-json projection.
#[non_exhaustive]
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DataJsonError {
    /// A number with a fraction or exponent, or outside what the projection
    /// reads as an integer; holds the number as serde_json prints it.
    NotAnInteger(String),
    /// The document nests deeper than [`MAX_DEPTH`].
    TooDeep,
}

impl fmt::Display for DataJsonError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DataJsonError::NotAnInteger(n) => write!(f, "number {n} is not an integer"),
            DataJsonError::TooDeep => write!(f, "document deeper than {MAX_DEPTH}"),
        }
    }
}

impl std::error::Error for DataJsonError {}

/// Projects a JSON document into data: null, bool, integers, text, arrays
/// as tuples and objects as maps keyed by text.
///
/// Depth is bounded like decoding (root at 0, at most [`MAX_DEPTH`]); arity
/// and payload are not, since a projected document is hashed, not decoded.
pub fn from_data_json(doc: &serde_json::Value) -> Result<Value, DataJsonError> {
    project(doc, 0)
}

fn project(doc: &serde_json::Value, depth: usize) -> Result<Value, DataJsonError> {
    if depth > MAX_DEPTH {
        return Err(DataJsonError::TooDeep);
    }
    Ok(match doc {
        serde_json::Value::Null => Value::Null,
        serde_json::Value::Bool(b) => Value::Bool(*b),
        serde_json::Value::Number(n) => Value::Int(project_number(n)?),
        serde_json::Value::String(s) => Value::Text(s.clone()),
        serde_json::Value::Array(items) => Value::Tuple(
            items
                .iter()
                .map(|item| project(item, depth + 1))
                .collect::<Result<_, _>>()?,
        ),
        serde_json::Value::Object(members) => Value::Map(
            members
                .iter()
                .map(|(k, v)| Ok((Value::Text(k.clone()), project(v, depth + 1)?)))
                .collect::<Result<Map, _>>()?,
        ),
    })
}

fn project_number(n: &serde_json::Number) -> Result<Int, DataJsonError> {
    if let Some(u) = n.as_u64() {
        return Ok(Int::from(u));
    }
    if let Some(i) = n.as_i64() {
        return Ok(Int::from(i));
    }
    match n.as_f64() {
        Some(f) if f == 0.0 && f.is_sign_negative() => Ok(Int::ZERO),
        _ => Err(DataJsonError::NotAnInteger(n.to_string())),
    }
}

/// SHA-256 over the canonical encoding of the 2-tuple
/// `[label(tag), data-json(doc)]`: the filter and snapshot manifest digests.
pub fn data_json_digest(tag: &[u8], doc: &serde_json::Value) -> Result<[u8; 32], DataJsonError> {
    let pair = Value::Tuple(vec![Value::Label(tag.to_vec()), from_data_json(doc)?]);
    Ok(sha256_canonical(&pair))
}

/// SHA-256 over the canonical encoding of `value`.
pub fn sha256_canonical(value: &Value) -> [u8; 32] {
    let mut bytes = Vec::new();
    encode_into(value, &mut bytes);
    Sha256::digest(&bytes).into()
}

/// A digest as text: `sha256:` and 64 lowercase hex digits.
pub fn digest_text(digest: &[u8; 32]) -> String {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    let mut text = String::with_capacity(7 + 64);
    text.push_str("sha256:");
    for byte in digest {
        text.push(char::from(HEX[usize::from(byte >> 4)]));
        text.push(char::from(HEX[usize::from(byte & 0x0f)]));
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::encode::encode;
    use serde_json::json;

    fn project_text(json: &str) -> Result<Value, DataJsonError> {
        from_data_json(&serde_json::from_str(json).unwrap())
    }

    #[test]
    fn projects_each_kind() {
        let doc = json!({"b": [1, -2, true, null], "a": "x", "": {}});
        let value = from_data_json(&doc).unwrap();
        let expected: Map = vec![
            (Value::text(""), Value::Map(Map::new())),
            (Value::text("a"), Value::text("x")),
            (
                Value::text("b"),
                Value::Tuple(vec![
                    Value::int(1u64),
                    Value::int(-2i64),
                    Value::Bool(true),
                    Value::Null,
                ]),
            ),
        ]
        .into_iter()
        .collect();
        assert_eq!(value, Value::Map(expected));
        // Keys in encoded order: "" (60), "a" (61 61), "b" (61 62).
        assert_eq!(
            encode(&value),
            [0xa3, 0x60, 0xa0, 0x61, 0x61, 0x61, 0x78, 0x61, 0x62, 0x84, 0x01, 0x21, 0xf5, 0xf6]
        );
    }

    #[test]
    fn text_keys_sort_shorter_first() {
        let value = project_text(r#"{"aa": 1, "b": 2}"#).unwrap();
        let Value::Map(map) = value else {
            panic!("not a map")
        };
        let keys: Vec<&Value> = map.iter().map(|(k, _)| k).collect();
        assert_eq!(keys, [&Value::text("b"), &Value::text("aa")]);
    }

    #[test]
    fn numbers() {
        assert_eq!(project_text("0"), Ok(Value::int(0u64)));
        assert_eq!(project_text("-0"), Ok(Value::int(0u64)));
        assert_eq!(
            project_text("18446744073709551615"),
            Ok(Value::Int(Int::MAX))
        );
        assert_eq!(
            project_text("-9223372036854775808"),
            Ok(Value::int(i64::MIN))
        );
        for refused in [
            "1.0",
            "1e2",
            "0.0",
            "0.5",
            "-1.5",
            "18446744073709551616",
            "-9223372036854775809",
        ] {
            assert!(
                matches!(project_text(refused), Err(DataJsonError::NotAnInteger(_))),
                "{refused}"
            );
        }
    }

    #[test]
    fn depth_bound() {
        let mut doc = serde_json::Value::Null;
        for _ in 0..MAX_DEPTH {
            doc = serde_json::Value::Array(vec![doc]);
        }
        assert!(from_data_json(&doc).is_ok());
        let doc = serde_json::Value::Array(vec![doc]);
        assert_eq!(from_data_json(&doc), Err(DataJsonError::TooDeep));
    }

    #[test]
    fn digest_construction() {
        let doc = json!({"predicate": null});
        let digest = data_json_digest(b"lab.journal.filter.v1", &doc).unwrap();
        let mut expected = vec![0x82, 0xd8, 0x27, 0x55];
        expected.extend_from_slice(b"lab.journal.filter.v1");
        expected.extend_from_slice(&[0xa1, 0x69]);
        expected.extend_from_slice(b"predicate");
        expected.push(0xf6);
        let direct: [u8; 32] = Sha256::digest(&expected).into();
        assert_eq!(digest, direct);
        assert_eq!(
            data_json_digest(b"t", &json!(1.5)),
            Err(DataJsonError::NotAnInteger("1.5".into()))
        );
    }

    /// The worked digest example of `contracts/values/VALUES.md`.
    #[test]
    fn documented_digest_example() {
        let doc = json!({
            "predicate": "2CdBcA==",
            "arguments": [{"index": 0, "equals": "YQ=="}],
            "origin": null,
            "positions": {"after": 0, "through": 9_007_199_254_740_991u64},
        });
        let pair = Value::Tuple(vec![
            Value::label(crate::FILTER_DIGEST_TAG),
            from_data_json(&doc).unwrap(),
        ]);
        assert_eq!(
            hex::encode(encode(&pair)),
            concat!(
                "82d827556c61622e6a6f75726e616c2e66696c7465722e7631",
                "a4666f726967696ef669617267756d656e747381a265696e646578006665",
                "7175616c736459513d3d69706f736974696f6e73a265616674657200677468",
                "726f7567681b001fffffffffffff69707265646963617465683243644263413d3d",
            )
        );
        assert_eq!(
            digest_text(&data_json_digest(crate::FILTER_DIGEST_TAG, &doc).unwrap()),
            "sha256:52647b93236ab9350ae345de3db393fc1b27afcac3cb634b48d092f73375eedc"
        );
    }

    #[test]
    fn digest_text_form() {
        let mut digest = [0u8; 32];
        digest[0] = 0xab;
        digest[31] = 0x0f;
        let text = digest_text(&digest);
        assert_eq!(text.len(), 71);
        assert!(text.starts_with("sha256:ab00"));
        assert!(text.ends_with("000f"));
        let empty: [u8; 32] = Sha256::digest(b"").into();
        assert_eq!(
            digest_text(&empty),
            "sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
        );
    }
}
