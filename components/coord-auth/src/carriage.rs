//! The carriage `{"proof": Proof, "grants": [Grant...]}`: how it travels
//! and how it is decoded.
//!
//! Over HTTP it is the `Svc-Auth` header: canonical padded standard base64
//! of the UTF-8 JSON text. On the socket it is the envelope's `auth` member
//! as a JSON object. Decoding is strict on both: one JSON value, no
//! duplicate members, exactly the documented members, every value in its
//! grammar. The encoder writes the RFC 8785 form, so an encoded carriage is
//! deterministic.

use lab_strict_json::{Json, Object};
use serde_json::{json, Value};

use crate::error::Unverified;
use crate::grants::{base64_encode, take_principal, take_signature, Grant};
use crate::keys::Principal;
use crate::record::{canonical_json, MAX_SAFE_INTEGER};

/// The HTTP header that carries the carriage.
pub const HEADER: &str = "Svc-Auth";

/// The most grants one carriage may hold; more is `unverified`.
pub const MAX_GRANTS: usize = 16;

/// Nonce length bounds, in characters of the base64url alphabet: at least
/// 128 random bits.
pub const NONCE_MIN: usize = 22;
pub const NONCE_MAX: usize = 64;

/// The proof: who signs this request, once, for which audience, when.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Proof {
    pub principal: Principal,
    /// 22..=64 characters of `[A-Za-z0-9_-]`.
    pub nonce: String,
    /// Unix seconds.
    pub timestamp: u64,
    /// The operations endpoint's external base URL.
    pub audience: String,
    /// Ed25519 over the signing record.
    pub signature: [u8; 64],
}

/// A proof and the grants it relies on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Carriage {
    pub proof: Proof,
    pub grants: Vec<Grant>,
}

/// Whether `nonce` is 22..=64 characters of the base64url alphabet.
pub fn is_valid_nonce(nonce: &str) -> bool {
    (NONCE_MIN..=NONCE_MAX).contains(&nonce.len())
        && nonce
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
}

impl Proof {
    pub fn to_json(&self) -> Value {
        json!({
            "principal": self.principal.to_string(),
            "nonce": self.nonce,
            "timestamp": self.timestamp,
            "audience": self.audience,
            "signature": base64_encode(&self.signature),
        })
    }

    fn from_json(value: Json) -> Result<Proof, Unverified> {
        let parent = "proof";
        let within = |err: lab_strict_json::ShapeError| Unverified::Shape(err.within(parent));
        let mut object: Object = value.into_object(parent).map_err(Unverified::Shape)?;
        let principal = take_principal(&mut object, "principal", parent)?;
        let nonce = object.take_required_str("nonce").map_err(within)?;
        if !is_valid_nonce(&nonce) {
            return Err(Unverified::Malformed {
                field: "proof.nonce".into(),
                why: "is not 22..=64 characters of [A-Za-z0-9_-]",
            });
        }
        let timestamp = object.take_required_u64("timestamp").map_err(within)?;
        if timestamp > MAX_SAFE_INTEGER {
            return Err(Unverified::Malformed {
                field: "proof.timestamp".into(),
                why: "is above 2^53-1",
            });
        }
        let audience = object.take_required_str("audience").map_err(within)?;
        let signature = take_signature(&mut object, "signature", parent)?;
        object.finish().map_err(within)?;
        Ok(Proof {
            principal,
            nonce,
            timestamp,
            audience,
            signature,
        })
    }
}

impl Carriage {
    /// A carriage of `proof` and `grants`.
    pub fn new(proof: Proof, grants: Vec<Grant>) -> Carriage {
        Carriage { proof, grants }
    }

    /// The carriage as a JSON value (the socket's `auth` member).
    pub fn to_json(&self) -> Value {
        json!({
            "proof": self.proof.to_json(),
            "grants": self.grants.iter().map(Grant::to_json).collect::<Vec<_>>(),
        })
    }

    /// The RFC 8785 JSON text of the carriage.
    pub fn to_json_bytes(&self) -> Vec<u8> {
        canonical_json(&self.to_json())
    }

    /// The `Svc-Auth` header value: canonical padded standard base64 of
    /// [`Carriage::to_json_bytes`].
    pub fn to_header(&self) -> String {
        base64_encode(&self.to_json_bytes())
    }

    /// Decodes the `Svc-Auth` header value; `None` is an absent header.
    pub fn from_header(value: Option<&[u8]>) -> Result<Carriage, Unverified> {
        let value = value.ok_or(Unverified::Missing)?;
        let text = std::str::from_utf8(value).map_err(|_| Unverified::NotBase64)?;
        let json = lab_strict_json::decode_canonical_base64(text).ok_or(Unverified::NotBase64)?;
        Carriage::from_json_bytes(&json)
    }

    /// Decodes a carriage's JSON text strictly.
    pub fn from_json_bytes(bytes: &[u8]) -> Result<Carriage, Unverified> {
        let json = lab_strict_json::parse(bytes).map_err(Unverified::NotJson)?;
        Carriage::from_json(json)
    }

    /// Decodes an already parsed carriage (the socket's `auth` member).
    pub fn from_json(json: Json) -> Result<Carriage, Unverified> {
        let mut object = lab_strict_json::expect_object(json)?;
        let proof = Proof::from_json(object.take_required("proof")?)?;
        let grants = object.take_required_array("grants")?;
        object.finish()?;
        if grants.len() > MAX_GRANTS {
            return Err(Unverified::TooManyGrants {
                count: grants.len(),
            });
        }
        let grants = grants
            .into_iter()
            .enumerate()
            .map(|(index, grant)| Grant::from_json(grant, index))
            .collect::<Result<_, _>>()?;
        Ok(Carriage { proof, grants })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use lab_strict_json::ShapeError;

    fn proof_json() -> Value {
        json!({
            "principal": format!("ed25519:{}", "ab".repeat(32)),
            "nonce": "A".repeat(22),
            "timestamp": 1,
            "audience": "http://x",
            "signature": base64_encode(&[7; 64]),
        })
    }

    fn grant_json() -> Value {
        json!({
            "principal": format!("ed25519:{}", "cd".repeat(32)),
            "kind": "read",
            "path": ["a"],
            "valid_until": 9,
            "issuer": format!("ed25519:{}", "ef".repeat(32)),
            "signature": base64_encode(&[8; 64]),
        })
    }

    fn header_of(value: &Value) -> Vec<u8> {
        base64_encode(serde_json::to_string(value).unwrap().as_bytes()).into_bytes()
    }

    fn decode(value: &Value) -> Result<Carriage, Unverified> {
        Carriage::from_header(Some(&header_of(value)))
    }

    #[test]
    fn round_trip() {
        let carriage = decode(&json!({"proof": proof_json(), "grants": [grant_json()]})).unwrap();
        assert_eq!(carriage.grants.len(), 1);
        let again = Carriage::from_header(Some(carriage.to_header().as_bytes())).unwrap();
        assert_eq!(again, carriage);
    }

    #[test]
    fn missing_and_bad_base64() {
        assert_eq!(Carriage::from_header(None), Err(Unverified::Missing));
        for bad in [&b""[..], b"e30", b"e30=\n", b"{}", b"\xff\xfe", b"-_-_"] {
            let result = Carriage::from_header(Some(bad));
            assert!(
                matches!(
                    result,
                    Err(Unverified::NotBase64 | Unverified::NotJson(lab_strict_json::Error::Empty))
                ),
                "{bad:?}: {result:?}"
            );
        }
        // Base64 of something that is not JSON.
        let text = base64_encode(b"{\"proof\":");
        assert!(matches!(
            Carriage::from_header(Some(text.as_bytes())),
            Err(Unverified::NotJson(_))
        ));
        let text = base64_encode(br#"{"proof":1,"proof":2}"#);
        assert!(matches!(
            Carriage::from_header(Some(text.as_bytes())),
            Err(Unverified::NotJson(
                lab_strict_json::Error::DuplicateMember { .. }
            ))
        ));
    }

    #[test]
    fn unknown_members_refused_at_every_level() {
        let mut top = json!({"proof": proof_json(), "grants": [], "extra": 1});
        assert_eq!(
            decode(&top),
            Err(Unverified::Shape(ShapeError::UnknownMember {
                name: "extra".into()
            }))
        );
        top = json!({"proof": proof_json(), "grants": []});
        top["proof"]["Nonce"] = json!("x");
        assert_eq!(
            decode(&top),
            Err(Unverified::Shape(ShapeError::UnknownMember {
                name: "proof.Nonce".into()
            }))
        );
        let mut grant = grant_json();
        grant["derives_from"] = Value::Null;
        let top = json!({"proof": proof_json(), "grants": [grant_json(), grant]});
        assert_eq!(
            decode(&top),
            Err(Unverified::Shape(ShapeError::UnknownMember {
                name: "grants.1.derives_from".into()
            }))
        );
    }

    #[test]
    fn members_outside_their_grammar() {
        let cases: Vec<(&str, Value, &str)> = vec![
            ("principal", json!("ed25519:AB"), "proof.principal"),
            ("nonce", json!("A".repeat(21)), "proof.nonce"),
            ("nonce", json!("A".repeat(65)), "proof.nonce"),
            (
                "nonce",
                json!(format!("{}+", "A".repeat(21))),
                "proof.nonce",
            ),
            ("timestamp", json!(1u64 << 53), "proof.timestamp"),
            (
                "signature",
                json!(base64_encode(&[7; 63])),
                "proof.signature",
            ),
            ("signature", json!("AAAA"), "proof.signature"),
        ];
        for (member, value, field) in cases {
            let mut proof = proof_json();
            proof[member] = value;
            let result = decode(&json!({"proof": proof, "grants": []}));
            assert!(
                matches!(&result, Err(Unverified::Malformed { field: f, .. }) if f == field),
                "{member}: {result:?}"
            );
        }
        for (member, value) in [
            ("timestamp", json!(-1)),
            ("timestamp", json!(1.5)),
            ("timestamp", json!("1")),
            ("audience", Value::Null),
        ] {
            let mut proof = proof_json();
            proof[member] = value;
            let result = decode(&json!({"proof": proof, "grants": []}));
            assert!(
                matches!(result, Err(Unverified::Shape(_))),
                "{member}: {result:?}"
            );
        }
        for (member, value, field) in [
            ("kind", json!("write"), "grants.0.kind"),
            ("issuer", json!("root"), "grants.0.issuer"),
            ("valid_until", json!(1u64 << 53), "grants.0.valid_until"),
        ] {
            let mut grant = grant_json();
            grant[member] = value;
            let result = decode(&json!({"proof": proof_json(), "grants": [grant]}));
            assert!(
                matches!(&result, Err(Unverified::Malformed { field: f, .. }) if f == field),
                "{member}: {result:?}"
            );
        }
        let mut grant = grant_json();
        grant["path"] = json!("a/b");
        let result = decode(&json!({"proof": proof_json(), "grants": [grant]}));
        assert!(matches!(result, Err(Unverified::Shape(_))), "{result:?}");
    }

    #[test]
    fn too_many_grants() {
        let grants: Vec<Value> = (0..=MAX_GRANTS).map(|_| grant_json()).collect();
        assert_eq!(
            decode(&json!({"proof": proof_json(), "grants": grants})),
            Err(Unverified::TooManyGrants {
                count: MAX_GRANTS + 1
            })
        );
        let grants: Vec<Value> = (0..MAX_GRANTS).map(|_| grant_json()).collect();
        assert!(decode(&json!({"proof": proof_json(), "grants": grants})).is_ok());
    }

    #[test]
    fn nonce_grammar() {
        assert!(is_valid_nonce(&"a-_Z9".repeat(5)));
        assert!(is_valid_nonce(&"x".repeat(64)));
        assert!(!is_valid_nonce(&"x".repeat(21)));
        assert!(!is_valid_nonce(&"x".repeat(65)));
        assert!(!is_valid_nonce(&format!("{}=", "x".repeat(22))));
        assert!(!is_valid_nonce(&format!("{}é", "x".repeat(22))));
    }
}
