//! The signing record: the exact bytes a proof signs.
//!
//! The record is the RFC 8785 canonical JSON of
//! `{"op", "params", "body_digest", "principal", "nonce", "timestamp",
//! "audience"}`. It is rebuilt by the verifier from what arrived, never taken
//! from the client, so a changed operation, parameter or body cannot verify.

use std::collections::BTreeMap;
use std::fmt;

use serde_json::{json, Map, Value};
use sha2::{Digest as _, Sha256};

use crate::error::RecordError;
use crate::keys::Principal;

/// The largest integer magnitude carried in signed JSON: `2^53 - 1`. RFC 8785
/// writes numbers as IEEE 754 doubles, so beyond it an integer would not be
/// written as itself.
pub const MAX_SAFE_INTEGER: u64 = (1 << 53) - 1;

/// RFC 8785 canonical JSON of `value`.
///
/// Callers keep every integer within [`MAX_SAFE_INTEGER`] and put no floats
/// in `value`, so the output is exact.
pub fn canonical_json(value: &Value) -> Vec<u8> {
    // A `Value` holds only string keys and finite numbers, the only inputs
    // the canonicalizer refuses.
    serde_json_canonicalizer::to_vec(value).expect("a serde_json::Value always canonicalizes")
}

/// `sha256:` + 64 lowercase hex digits.
pub fn sha256_text(bytes: &[u8]) -> String {
    BodyDigest::of(bytes).to_string()
}

/// One table parameter as a socket envelope carries it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ParamValue {
    /// A `string` parameter.
    String(String),
    /// An `int` parameter.
    Int(i64),
    /// A `strings` parameter; a path is one of these.
    Strings(Vec<String>),
}

/// The operation's table parameters by name. Absent parameters are simply
/// not in the map; there is no null.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Params(BTreeMap<String, ParamValue>);

impl Params {
    pub fn new() -> Params {
        Params::default()
    }

    /// Adds or replaces `name` as a string parameter.
    pub fn string(mut self, name: &str, value: impl Into<String>) -> Params {
        self.0
            .insert(name.to_owned(), ParamValue::String(value.into()));
        self
    }

    /// Adds or replaces `name` as an integer parameter.
    pub fn int(mut self, name: &str, value: i64) -> Params {
        self.0.insert(name.to_owned(), ParamValue::Int(value));
        self
    }

    /// Adds or replaces `name` as a strings parameter (a path).
    pub fn strings<S: Into<String>>(
        mut self,
        name: &str,
        values: impl IntoIterator<Item = S>,
    ) -> Params {
        let values = values.into_iter().map(Into::into).collect();
        self.0.insert(name.to_owned(), ParamValue::Strings(values));
        self
    }

    pub fn insert(&mut self, name: impl Into<String>, value: ParamValue) {
        self.0.insert(name.into(), value);
    }

    pub fn get(&self, name: &str) -> Option<&ParamValue> {
        self.0.get(name)
    }

    pub fn iter(&self) -> impl Iterator<Item = (&str, &ParamValue)> {
        self.0.iter().map(|(name, value)| (name.as_str(), value))
    }

    /// Reads a socket envelope's `params` object: each member a string, an
    /// integer or an array of strings. Anything else is `None`; checking
    /// names and kinds against the operation table is the service's job.
    pub fn from_json_object(object: &lab_strict_json::Object) -> Option<Params> {
        use lab_strict_json::{Json, Number};
        let mut params = Params::new();
        for (name, value) in object.iter() {
            let value = match value {
                Json::String(s) => ParamValue::String(s.clone()),
                Json::Number(Number::Unsigned(n)) => ParamValue::Int(i64::try_from(*n).ok()?),
                Json::Number(Number::Negative(n)) => ParamValue::Int(*n),
                Json::Array(items) => ParamValue::Strings(
                    items
                        .iter()
                        .map(|item| item.as_str().map(str::to_owned))
                        .collect::<Option<_>>()?,
                ),
                _ => return None,
            };
            params.insert(name, value);
        }
        Some(params)
    }

    /// The `params` object of the signing record.
    pub fn to_json(&self) -> Result<Value, RecordError> {
        let mut map = Map::new();
        for (name, value) in &self.0 {
            let value = match value {
                ParamValue::String(s) => Value::from(s.as_str()),
                ParamValue::Int(n) => {
                    if n.unsigned_abs() > MAX_SAFE_INTEGER {
                        return Err(RecordError::IntegerOutOfRange {
                            field: format!("params.{name}"),
                        });
                    }
                    Value::from(*n)
                }
                ParamValue::Strings(items) => Value::from(items.clone()),
            };
            map.insert(name.clone(), value);
        }
        Ok(Value::Object(map))
    }
}

/// The SHA-256 of a request body's exact bytes. A request without a body
/// has the digest of the empty string.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BodyDigest([u8; 32]);

impl BodyDigest {
    /// The digest of `body`, all of it, exactly as it arrived.
    pub fn of(body: &[u8]) -> BodyDigest {
        BodyDigest(Sha256::digest(body).into())
    }

    /// A digest computed elsewhere, e.g. while streaming a `retain` body.
    pub fn from_sha256(hash: [u8; 32]) -> BodyDigest {
        BodyDigest(hash)
    }

    /// The digest of no body (the empty string).
    pub fn empty() -> BodyDigest {
        BodyDigest::of(b"")
    }
}

impl fmt::Display for BodyDigest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        crate::keys::write_hex32(f, "sha256:", &self.0)
    }
}

/// The purpose of the bytes the world's root signs to admit a declaration.
pub const ADMISSION_PURPOSE: &str = "coord.declaration-admission.v1";

/// The bytes the world's root signs to admit a declaration: RFC 8785 JSON
/// of `{"purpose": "coord.declaration-admission.v1", "admission": <the
/// DeclarationAdmission without its `signature`>}`.
pub fn admission_signing_bytes(admission: &Value) -> Vec<u8> {
    let mut unsigned = admission.clone();
    if let Some(object) = unsigned.as_object_mut() {
        object.remove("signature");
    }
    canonical_json(&json!({
        "purpose": ADMISSION_PURPOSE,
        "admission": unsigned,
    }))
}

/// What arrived with a request, apart from the proof: everything the
/// verifier needs to rebuild the signing record.
#[derive(Debug, Clone, Copy)]
pub struct RequestFacts<'a> {
    /// The table name of the operation (`entries`, `publish`, ...).
    pub op: &'a str,
    pub params: &'a Params,
    pub body_digest: BodyDigest,
}

/// The signing record's exact bytes: the RFC 8785 JSON of the request's
/// `op`, `params` and `body_digest` with the proof's `principal`, `nonce`,
/// `timestamp` and `audience`.
pub fn signing_record(
    request: &RequestFacts<'_>,
    principal: &Principal,
    nonce: &str,
    timestamp: u64,
    audience: &str,
) -> Result<Vec<u8>, RecordError> {
    if timestamp > MAX_SAFE_INTEGER {
        return Err(RecordError::IntegerOutOfRange {
            field: "timestamp".into(),
        });
    }
    let record = json!({
        "op": request.op,
        "params": request.params.to_json()?,
        "body_digest": request.body_digest.to_string(),
        "principal": principal.to_string(),
        "nonce": nonce,
        "timestamp": timestamp,
        "audience": audience,
    });
    Ok(canonical_json(&record))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn jcs(text: &str) -> String {
        let value: Value = serde_json::from_str(text).unwrap();
        String::from_utf8(canonical_json(&value)).unwrap()
    }

    /// RFC 8785 section 3.2.3: keys sort by their UTF-16 code units.
    #[test]
    fn rfc8785_sorting_example() {
        let input = r#"{
            "\u20ac": "Euro Sign",
            "\r": "Carriage Return",
            "\ufb33": "Hebrew Letter Dalet With Dagesh",
            "1": "One",
            "\ud83d\ude00": "Emoji: Grinning Face",
            "\u0080": "Control",
            "\u00f6": "Latin Small Letter O With Diaeresis"
        }"#;
        let expected = "{\"\\r\":\"Carriage Return\",\"1\":\"One\",\"\u{80}\":\"Control\",\
                        \"\u{f6}\":\"Latin Small Letter O With Diaeresis\",\
                        \"\u{20ac}\":\"Euro Sign\",\"\u{1f600}\":\"Emoji: Grinning Face\",\
                        \"\u{fb33}\":\"Hebrew Letter Dalet With Dagesh\"}";
        assert_eq!(jcs(input), expected);
    }

    /// RFC 8785 section 3.2.2 example: whitespace removed, numbers in their
    /// shortest ECMAScript form, strings with minimal escapes.
    #[test]
    fn rfc8785_serialization_example() {
        let input = r#"{
            "numbers": [333333333.33333329, 1E30, 4.50, 2e-3, 0.000000000000000000000000001],
            "string": "\u20ac$\u000F\u000aA'\u0042\u0022\u005c\\\"\/",
            "literals": [null, true, false]
        }"#;
        let expected = "{\"literals\":[null,true,false],\
                        \"numbers\":[333333333.3333333,1e+30,4.5,0.002,1e-27],\
                        \"string\":\"\u{20ac}$\\u000f\\nA'B\\\"\\\\\\\\\\\"/\"}";
        assert_eq!(jcs(input), expected);
    }

    /// RFC 8785 appendix B: IEEE 754 values and their canonical text.
    #[test]
    fn rfc8785_number_examples() {
        for (bits, text) in [
            (0x0000000000000000u64, "0"),
            (0x8000000000000000, "0"),
            (0x0000000000000001, "5e-324"),
            (0x8000000000000001, "-5e-324"),
            (0x7fefffffffffffff, "1.7976931348623157e+308"),
            (0xffefffffffffffff, "-1.7976931348623157e+308"),
            (0x4340000000000000, "9007199254740992"),
            (0xc340000000000000, "-9007199254740992"),
            (0x4430000000000000, "295147905179352830000"),
            (0x44b52d02c7e14af5, "9.999999999999997e+22"),
            (0x44b52d02c7e14af6, "1e+23"),
            (0x44b52d02c7e14af7, "1.0000000000000001e+23"),
            (0x444b1ae4d6e2ef4e, "999999999999999700000"),
            (0x444b1ae4d6e2ef4f, "999999999999999900000"),
            (0x444b1ae4d6e2ef50, "1e+21"),
            (0x3eb0c6f7a0b5ed8c, "9.999999999999997e-7"),
            (0x3eb0c6f7a0b5ed8d, "0.000001"),
            (0x41b3de4355555553, "333333333.3333332"),
            (0x41b3de4355555554, "333333333.33333325"),
            (0x41b3de4355555555, "333333333.3333333"),
            (0x41b3de4355555556, "333333333.3333334"),
            (0x41b3de4355555557, "333333333.33333343"),
            (0xbecbf647612f3696, "-0.0000033333333333333333"),
            (0x43143ff3c1cb0959, "1424953923781206.2"),
        ] {
            let value = Value::from(f64::from_bits(bits));
            assert_eq!(
                String::from_utf8(canonical_json(&value)).unwrap(),
                text,
                "{bits:016x}"
            );
        }
    }

    #[test]
    fn integers_are_exact_up_to_the_safe_bound() {
        assert_eq!(
            canonical_json(&json!(MAX_SAFE_INTEGER)),
            b"9007199254740991".to_vec()
        );
        assert_eq!(
            canonical_json(&json!(1767225600u64)),
            b"1767225600".to_vec()
        );
        let too_big = Params::new().int("through", 1 << 53);
        assert!(matches!(
            too_big.to_json(),
            Err(RecordError::IntegerOutOfRange { field }) if field == "params.through"
        ));
        assert!(Params::new().int("n", -(1 << 53) + 1).to_json().is_ok());
    }

    #[test]
    fn record_has_the_seven_members_in_canonical_order() {
        let params = Params::new()
            .strings("path", ["projects", "alpha"])
            .int("limit", 5)
            .string("cursor", "c1");
        let request = RequestFacts {
            op: "children",
            params: &params,
            body_digest: BodyDigest::empty(),
        };
        let principal = Principal::from_bytes([0; 32]);
        let bytes = signing_record(&request, &principal, "n", 7, "http://a").unwrap();
        let expected = format!(
            "{{\"audience\":\"http://a\",\"body_digest\":\"sha256:\
             e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855\",\
             \"nonce\":\"n\",\"op\":\"children\",\
             \"params\":{{\"cursor\":\"c1\",\"limit\":5,\"path\":[\"projects\",\"alpha\"]}},\
             \"principal\":\"ed25519:{}\",\"timestamp\":7}}",
            "0".repeat(64)
        );
        assert_eq!(String::from_utf8(bytes).unwrap(), expected);
    }

    #[test]
    fn params_from_envelope_json() {
        let json =
            lab_strict_json::parse(br#"{"path":["a","b"],"limit":3,"after":-1,"s":"x"}"#).unwrap();
        let params = Params::from_json_object(json.as_object().unwrap()).unwrap();
        assert_eq!(
            params,
            Params::new()
                .strings("path", ["a", "b"])
                .int("limit", 3)
                .int("after", -1)
                .string("s", "x")
        );
        for bad in [
            r#"{"a":null}"#,
            r#"{"a":1.5}"#,
            r#"{"a":[1]}"#,
            r#"{"a":{}}"#,
            r#"{"a":true}"#,
        ] {
            let json = lab_strict_json::parse(bad.as_bytes()).unwrap();
            assert_eq!(
                Params::from_json_object(json.as_object().unwrap()),
                None,
                "{bad}"
            );
        }
    }
}
