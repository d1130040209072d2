//! Offline verification of a declaration's admission: given the envelope
//! (DeclarationRecord) fetched from the service, the world's root principal
//! and the service's audience, each check the service's contract promises
//! (HTTP.md decision 26), with no call to the service.

use base64::Engine as _;
use lab_coord_auth::{
    admission_signing_bytes, canonical_json, check_strict, record::sha256_text, signing_record,
    BodyDigest, Carriage, Params, Principal, RequestFacts, SignatureOutcome,
};
use serde_json::Value;
use std::borrow::Cow;

/// One check of an admission and whether it held.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Check {
    pub name: Cow<'static, str>,
    pub passed: bool,
    /// Why it failed; what it found when a check says more than that it
    /// held; else empty.
    pub detail: String,
}

impl Check {
    /// The check `name`, held when `outcome` is `Ok`.
    pub fn of(name: impl Into<Cow<'static, str>>, outcome: Result<(), String>) -> Check {
        Check {
            name: name.into(),
            passed: outcome.is_ok(),
            detail: outcome.err().unwrap_or_default(),
        }
    }
}

/// The checks of an admission, in order. They all hold for an envelope
/// the service admitted in the world of `root` at `audience`.
pub fn verify_admission(envelope: &[u8], root: &Principal, audience: &str) -> Vec<Check> {
    let mut checks = Vec::new();
    let mut check =
        |name: &'static str, outcome: Result<(), String>| checks.push(Check::of(name, outcome));
    let record: Value = match serde_json::from_slice(envelope) {
        Ok(record) => record,
        Err(e) => {
            check("envelope", Err(format!("not JSON: {e}")));
            return checks;
        }
    };
    let admission = &record["admission"];
    check("root signature", root_signature(admission, root));
    check("frame digest", frame_digest(&record));
    let carriage = carriage(admission);
    check(
        "proof",
        carriage
            .as_ref()
            .map_err(Clone::clone)
            .and_then(|c| proof(admission, c, audience)),
    );
    check(
        "publisher",
        carriage.and_then(|c| {
            let publisher = record["publisher"].as_str().unwrap_or_default();
            if c.proof.principal.to_string() == publisher {
                Ok(())
            } else {
                Err(format!(
                    "the proof's principal is not the publisher {publisher}"
                ))
            }
        }),
    );
    checks
}

fn decode_base64(text: Option<&str>, what: &str) -> Result<Vec<u8>, String> {
    text.and_then(|t| base64::engine::general_purpose::STANDARD.decode(t).ok())
        .ok_or_else(|| format!("`{what}` is not base64"))
}

fn signature(text: Option<&str>, what: &str) -> Result<[u8; 64], String> {
    decode_base64(text, what)?
        .try_into()
        .map_err(|_| format!("`{what}` is not 64 bytes"))
}

fn strict(principal: &Principal, message: &[u8], sig: &[u8; 64]) -> Result<(), String> {
    match check_strict(principal, message, sig) {
        SignatureOutcome::Valid => Ok(()),
        other => Err(format!("{other:?}")),
    }
}

fn root_signature(admission: &Value, root: &Principal) -> Result<(), String> {
    if admission["root"].as_str() != Some(root.to_string().as_str()) {
        return Err("the admission names another root".into());
    }
    let sig = signature(admission["signature"].as_str(), "signature")?;
    strict(root, &admission_signing_bytes(admission), &sig)
}

fn frame_digest(record: &Value) -> Result<(), String> {
    let digest = sha256_text(&canonical_json(&record["frame"]));
    match record["admission"]["frame"].as_str() {
        Some(named) if named == digest => Ok(()),
        _ => Err(format!(
            "the frame hashes to {digest}, not to the admission's"
        )),
    }
}

fn carriage(admission: &Value) -> Result<Carriage, String> {
    Carriage::from_json_bytes(admission["auth"].to_string().as_bytes())
        .map_err(|e| format!("the admission's carriage: {e}"))
}

/// The signing record rebuilt from `op: declare`, `params: {}` and the
/// SHA-256 of the decoded request body, and the proof's signature over it.
fn proof(admission: &Value, carriage: &Carriage, audience: &str) -> Result<(), String> {
    let body = decode_base64(admission["request_body"].as_str(), "request_body")?;
    let params = Params::new();
    let facts = RequestFacts {
        op: "declare",
        params: &params,
        body_digest: BodyDigest::of(&body),
    };
    let proof = &carriage.proof;
    let record = signing_record(
        &facts,
        &proof.principal,
        &proof.nonce,
        proof.timestamp,
        audience,
    )
    .map_err(|e| e.to_string())?;
    strict(&proof.principal, &record, &proof.signature)
}
