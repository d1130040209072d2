//! DSSE (Dead Simple Signing Envelope, v1) with Ed25519: the envelope the
//! service signs an application's attestation in, so that verifiers of the
//! supply-chain ecosystem can check it.
//!
//! The signature covers the pre-authentication encoding
//! `"DSSEv1" SP LEN(type) SP type SP LEN(body) SP body`, lengths in ASCII
//! decimal, never the JSON envelope itself. The envelope is
//! `{payload, payloadType, signatures: [{keyid, sig}]}` with `payload` and
//! `sig` in standard base64; `keyid` is the signer's principal text.

use crate::keys::{check_strict, sign, Principal, SignatureOutcome};
use base64::Engine as _;
use ed25519_dalek::SigningKey;
use serde_json::{json, Value};

/// The payload type of an in-toto Statement.
pub const IN_TOTO_PAYLOAD_TYPE: &str = "application/vnd.in-toto+json";

/// The bytes a DSSE v1 signature covers.
pub fn pae(payload_type: &str, payload: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(payload_type.len() + payload.len() + 32);
    out.extend_from_slice(b"DSSEv1 ");
    out.extend_from_slice(payload_type.len().to_string().as_bytes());
    out.push(b' ');
    out.extend_from_slice(payload_type.as_bytes());
    out.push(b' ');
    out.extend_from_slice(payload.len().to_string().as_bytes());
    out.push(b' ');
    out.extend_from_slice(payload);
    out
}

/// An envelope over `payload` with one signature by `key`.
pub fn sign_envelope(key: &SigningKey, payload_type: &str, payload: &[u8]) -> Value {
    let b64 = base64::engine::general_purpose::STANDARD;
    let signature = sign(key, &pae(payload_type, payload));
    json!({
        "payload": b64.encode(payload),
        "payloadType": payload_type,
        "signatures": [{
            "keyid": Principal::of(key).to_string(),
            "sig": b64.encode(signature),
        }],
    })
}

/// Why an envelope does not verify.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum EnvelopeError {
    /// Not an object with string `payload`, `payloadType` and an array of
    /// `signatures`, or a member not in base64.
    Malformed(&'static str),
    /// The payload type is not the one expected.
    PayloadType(String),
    /// No signature of the envelope verifies strictly by the signer.
    NotSigned,
}

impl std::fmt::Display for EnvelopeError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            EnvelopeError::Malformed(what) => write!(f, "malformed envelope: {what}"),
            EnvelopeError::PayloadType(t) => write!(f, "unexpected payload type `{t}`"),
            EnvelopeError::NotSigned => write!(f, "no signature by the expected signer verifies"),
        }
    }
}

impl std::error::Error for EnvelopeError {}

/// The payload of `envelope` once a signature by `signer` verifies over
/// its PAE and its type is `payload_type`. Signatures by other keys are
/// ignored, as DSSE allows.
pub fn open_envelope(
    envelope: &Value,
    payload_type: &str,
    signer: &Principal,
) -> Result<Vec<u8>, EnvelopeError> {
    let b64 = base64::engine::general_purpose::STANDARD;
    let declared = envelope["payloadType"]
        .as_str()
        .ok_or(EnvelopeError::Malformed("payloadType"))?;
    let payload = envelope["payload"]
        .as_str()
        .and_then(|p| b64.decode(p).ok())
        .ok_or(EnvelopeError::Malformed("payload"))?;
    let signatures = envelope["signatures"]
        .as_array()
        .ok_or(EnvelopeError::Malformed("signatures"))?;
    if declared != payload_type {
        return Err(EnvelopeError::PayloadType(declared.to_string()));
    }
    let message = pae(declared, &payload);
    let verifies = signatures.iter().any(|s| {
        s["sig"]
            .as_str()
            .and_then(|sig| b64.decode(sig).ok())
            .and_then(|sig| <[u8; 64]>::try_from(sig).ok())
            .is_some_and(|sig| check_strict(signer, &message, &sig) == SignatureOutcome::Valid)
    });
    if verifies {
        Ok(payload)
    } else {
        Err(EnvelopeError::NotSigned)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The worked example of the DSSE v1 protocol description.
    #[test]
    fn pae_of_the_protocol_example() {
        assert_eq!(
            pae("http://example.com/HelloWorld", b"hello world"),
            b"DSSEv1 29 http://example.com/HelloWorld 11 hello world".to_vec()
        );
        assert_eq!(pae("", b""), b"DSSEv1 0  0 ".to_vec());
    }

    #[test]
    fn an_envelope_opens_only_for_its_signer_type_and_payload() {
        let key = SigningKey::from_bytes(&[7; 32]);
        let other = SigningKey::from_bytes(&[8; 32]);
        let signer = Principal::of(&key);
        let envelope = sign_envelope(&key, IN_TOTO_PAYLOAD_TYPE, b"{\"a\":1}");
        assert_eq!(
            open_envelope(&envelope, IN_TOTO_PAYLOAD_TYPE, &signer).unwrap(),
            b"{\"a\":1}"
        );
        assert_eq!(
            open_envelope(&envelope, IN_TOTO_PAYLOAD_TYPE, &Principal::of(&other)),
            Err(EnvelopeError::NotSigned)
        );
        assert_eq!(
            open_envelope(&envelope, "text/plain", &signer),
            Err(EnvelopeError::PayloadType(IN_TOTO_PAYLOAD_TYPE.into()))
        );
        let mut tampered = envelope.clone();
        tampered["payload"] = json!(base64::engine::general_purpose::STANDARD.encode("{\"a\":2}"));
        assert_eq!(
            open_envelope(&tampered, IN_TOTO_PAYLOAD_TYPE, &signer),
            Err(EnvelopeError::NotSigned)
        );
        // Relabelling the type changes the signed bytes too.
        let mut relabelled = envelope;
        relabelled["payloadType"] = json!("text/plain");
        assert_eq!(
            open_envelope(&relabelled, "text/plain", &signer),
            Err(EnvelopeError::NotSigned)
        );
        assert_eq!(
            open_envelope(&json!({}), IN_TOTO_PAYLOAD_TYPE, &signer),
            Err(EnvelopeError::Malformed("payloadType"))
        );
    }
}
