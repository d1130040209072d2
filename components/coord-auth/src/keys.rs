//! Principals (`ed25519:` + 64 lowercase hex digits) and the strict Ed25519
//! checks every signature in this crate goes through.

use std::fmt;

use ed25519_dalek::{Signature, Signer as _, SigningKey, VerifyingKey};

/// The text that starts every principal.
pub const PRINCIPAL_PREFIX: &str = "ed25519:";

/// The name of an Ed25519 public key: `ed25519:` followed by the 32 key bytes
/// as 64 lowercase hex digits.
///
/// Parsing checks only the text; whether the bytes are an admissible key is
/// [`Principal::verifying_key`]'s question, asked where a signature is
/// checked.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Principal([u8; 32]);

impl Principal {
    /// Parses exactly `ed25519:` + 64 lowercase hex digits.
    pub fn parse(text: &str) -> Option<Principal> {
        let hex_part = text.strip_prefix(PRINCIPAL_PREFIX)?;
        if hex_part.len() != 64
            || !hex_part
                .bytes()
                .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
        {
            return None;
        }
        let mut key = [0u8; 32];
        hex::decode_to_slice(hex_part, &mut key).ok()?;
        Some(Principal(key))
    }

    pub fn from_bytes(key: [u8; 32]) -> Principal {
        Principal(key)
    }

    /// The principal of a signing key.
    pub fn of(key: &SigningKey) -> Principal {
        Principal(key.verifying_key().to_bytes())
    }

    pub fn as_bytes(&self) -> &[u8; 32] {
        &self.0
    }

    /// The key, if the bytes are the canonical encoding of a curve point
    /// that is not of small order; `None` otherwise.
    pub fn verifying_key(&self) -> Option<VerifyingKey> {
        let key = VerifyingKey::from_bytes(&self.0).ok()?;
        // Decompression accepts a few non-canonical encodings (y >= p); they
        // would give one key two names.
        if key.is_weak() || key.to_edwards().compress().to_bytes() != self.0 {
            return None;
        }
        Some(key)
    }
}

impl fmt::Display for Principal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write_hex32(f, PRINCIPAL_PREFIX, &self.0)
    }
}

/// `prefix`, then `octets` in lowercase hex, written without a string
/// of their own.
pub(crate) fn write_hex32(
    f: &mut fmt::Formatter<'_>,
    prefix: &str,
    octets: &[u8; 32],
) -> fmt::Result {
    let mut digits = [0u8; 64];
    hex::encode_to_slice(octets, &mut digits).expect("64 digits hold 32 octets");
    f.write_str(prefix)?;
    f.write_str(std::str::from_utf8(&digits).expect("hex digits are ASCII"))
}

/// Signs `message` with `key`: the 64 signature bytes.
pub fn sign(key: &SigningKey, message: &[u8]) -> [u8; 64] {
    key.sign(message).to_bytes()
}

/// What a strict Ed25519 check found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SignatureOutcome {
    Valid,
    /// The principal's bytes are not an admissible key
    /// ([`Principal::verifying_key`]).
    KeyNotAdmissible,
    /// The signature does not verify strictly over the message.
    BadSignature,
}

/// A strict Ed25519 check of `signature` over `message` by `principal`.
/// [`check_strict`] is the library's own; a caller may supply another one
/// with exactly its rules (a host's native code, say) through
/// [`Verifier::with_signature_check`](crate::Verifier::with_signature_check).
pub type SignatureCheck = fn(&Principal, &[u8], &[u8; 64]) -> SignatureOutcome;

/// The strict rules: an admissible key (canonical encoding, not of small
/// order), then `verify_strict` (canonical `S`, `R` not of small order).
pub fn check_strict(
    principal: &Principal,
    message: &[u8],
    signature: &[u8; 64],
) -> SignatureOutcome {
    match AdmittedKey::of(principal) {
        None => SignatureOutcome::KeyNotAdmissible,
        Some(key) => key.check(message, signature),
    }
}

/// A key that passed [`check_strict`]'s first rule. Admission is a pure
/// function of the key's bytes, so an admitted key may be kept and its
/// signatures checked without decoding it again.
#[derive(Debug, Clone, Copy)]
pub struct AdmittedKey(VerifyingKey);

impl AdmittedKey {
    /// The key of `principal`, if it is admissible.
    pub fn of(principal: &Principal) -> Option<AdmittedKey> {
        principal.verifying_key().map(AdmittedKey)
    }

    /// [`check_strict`]'s second rule: `Valid` or `BadSignature`.
    pub fn check(&self, message: &[u8], signature: &[u8; 64]) -> SignatureOutcome {
        match self
            .0
            .verify_strict(message, &Signature::from_bytes(signature))
        {
            Ok(()) => SignatureOutcome::Valid,
            Err(_) => SignatureOutcome::BadSignature,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn principal_text_round_trips() {
        let key = SigningKey::from_bytes(&[1; 32]);
        let principal = Principal::of(&key);
        let text = principal.to_string();
        assert!(text.starts_with("ed25519:"));
        assert_eq!(text.len(), 8 + 64);
        assert_eq!(Principal::parse(&text), Some(principal));
        assert!(principal.verifying_key().is_some());
    }

    #[test]
    fn principal_grammar_is_exact() {
        let good = format!("ed25519:{}", "ab".repeat(32));
        assert!(Principal::parse(&good).is_some());
        for bad in [
            format!("ed25519:{}", "AB".repeat(32)),
            format!("Ed25519:{}", "ab".repeat(32)),
            format!("ed25519:{}", "ab".repeat(31)),
            format!("ed25519:{}0", "ab".repeat(32)),
            format!("ed25519:{}g", "ab".repeat(31) + "a"),
            format!("ed25519: {}", "ab".repeat(32)),
            "ab".repeat(32),
        ] {
            assert_eq!(Principal::parse(&bad), None, "{bad}");
        }
    }

    #[test]
    fn small_order_and_non_canonical_keys_are_not_admissible() {
        // The identity point (0, 1).
        let mut identity = [0u8; 32];
        identity[0] = 1;
        assert!(Principal(identity).verifying_key().is_none());
        // y = p encodes the same point as y = 0 (of order 4) non-canonically;
        // y = p + 1 is the identity written non-canonically.
        let mut p = [0xffu8; 32];
        p[0] = 0xed;
        p[31] = 0x7f;
        assert!(Principal(p).verifying_key().is_none());
        let mut p1 = p;
        p1[0] = 0xee;
        assert!(Principal(p1).verifying_key().is_none());
    }
}
