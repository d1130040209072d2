//! Signatures one connection's requests have had verified, so that the
//! grants a client presents on every request are checked once per
//! connection, not once per request (design.md, "Sockets" 9). An HTTP
//! connection's requests and the calls of a socket it was upgraded to
//! share one.
//!
//! Invariants:
//! - only a `Valid` outcome of `check_strict` is remembered, keyed by the
//!   exact public key, signature and SHA-256 of the message: a lookup
//!   answers `Valid` only for bytes that verified before, and verification
//!   is a pure function of them, so a hit is the answer a check would give;
//! - at most [`REMEMBERED`] signatures per connection, the least recently
//!   used one forgotten first (each call's proof is new, its grants are
//!   the same as the call before's);
//! - beside them, at most [`ADMITTED`] keys found admissible, decoded
//!   once: admission too is a pure function of a key's bytes, and each
//!   call's proof is signed by the key of the call before's.
//!
//! Only the signature is remembered: the component still checks each
//! grant's validity, revocation and chain on every call.

use lab_coord_auth::{AdmittedKey, Principal, SignatureOutcome};
use sha2::{Digest, Sha256};
use std::sync::Mutex;

/// Signatures remembered per connection: one carriage's grants (at most
/// 16, `MAX_GRANTS`) and the proofs beside them.
pub const REMEMBERED: usize = 32;
/// Admissible keys remembered per connection.
pub const ADMITTED: usize = 8;

/// A connection's verified signatures and admitted keys.
#[derive(Default)]
pub struct Verified {
    /// Least recently used first.
    seen: Mutex<Vec<Signed>>,
    /// Least recently used first.
    admitted: Mutex<Vec<([u8; 32], AdmittedKey)>>,
}

#[derive(PartialEq, Eq)]
struct Signed {
    key: [u8; 32],
    signature: [u8; 64],
    message: [u8; 32],
}

impl Signed {
    fn new(key: &[u8; 32], message: &[u8], signature: &[u8; 64]) -> Signed {
        Signed {
            key: *key,
            signature: *signature,
            message: Sha256::digest(message).into(),
        }
    }
}

impl Verified {
    /// The strict check of `signature` by `key` over `message`, answered
    /// from what this connection verified before where it can; a `Valid`
    /// answer is remembered.
    pub fn check(&self, key: &[u8; 32], message: &[u8], signature: &[u8; 64]) -> SignatureOutcome {
        let signed = Signed::new(key, message, signature);
        if self.holds_signed(&signed) {
            return SignatureOutcome::Valid;
        }
        let outcome = match self.admitted(key) {
            Some(admitted) => admitted.check(message, signature),
            None => SignatureOutcome::KeyNotAdmissible,
        };
        if outcome == SignatureOutcome::Valid {
            self.remember_signed(signed);
        }
        outcome
    }

    /// Whether `signed` verified before on this connection.
    fn holds_signed(&self, signed: &Signed) -> bool {
        let mut seen = self.seen.lock().unwrap_or_else(|p| p.into_inner());
        touch(&mut seen, |s| s == signed).is_some()
    }

    /// The key of `key`'s bytes if it is admissible, decoded once per
    /// connection while it is used.
    fn admitted(&self, key: &[u8; 32]) -> Option<AdmittedKey> {
        let mut admitted = self.admitted.lock().unwrap_or_else(|p| p.into_inner());
        if let Some((_, hit)) = touch(&mut admitted, |(bytes, _)| bytes == key) {
            return Some(*hit);
        }
        let decoded = AdmittedKey::of(&Principal::from_bytes(*key))?;
        push_bounded(&mut admitted, (*key, decoded), ADMITTED);
        Some(decoded)
    }

    /// Remembers a signature `check_strict` found valid.
    fn remember_signed(&self, signed: Signed) {
        let mut seen = self.seen.lock().unwrap_or_else(|p| p.into_inner());
        if !seen.contains(&signed) {
            push_bounded(&mut seen, signed, REMEMBERED);
        }
    }
}

/// The first item of `recent` (least recently used first) that is
/// `found`, moved to the end as the most recently used.
fn touch<T>(recent: &mut Vec<T>, found: impl Fn(&T) -> bool) -> Option<&T> {
    let at = recent.iter().position(found)?;
    let hit = recent.remove(at);
    recent.push(hit);
    recent.last()
}

/// Adds `item` as the most recently used, forgetting the least recently
/// used one when `recent` holds `bound` already.
fn push_bounded<T>(recent: &mut Vec<T>, item: T, bound: usize) {
    if recent.len() >= bound {
        recent.remove(0);
    }
    recent.push(item);
}

#[cfg(test)]
mod tests {
    use super::*;

    impl Verified {
        fn holds(&self, key: &[u8; 32], message: &[u8], signature: &[u8; 64]) -> bool {
            self.holds_signed(&Signed::new(key, message, signature))
        }

        fn remember(&self, key: &[u8; 32], message: &[u8], signature: &[u8; 64]) {
            self.remember_signed(Signed::new(key, message, signature));
        }
    }

    #[test]
    fn only_the_exact_bytes_remembered_hold() {
        let verified = Verified::default();
        let (key, signature) = ([1u8; 32], [2u8; 64]);
        assert!(!verified.holds(&key, b"grant", &signature));
        verified.remember(&key, b"grant", &signature);
        assert!(verified.holds(&key, b"grant", &signature));
        let mut other = signature;
        other[63] ^= 1;
        assert!(!verified.holds(&key, b"grant", &other));
        assert!(!verified.holds(&key, b"grant!", &signature));
        assert!(!verified.holds(&[3u8; 32], b"grant", &signature));
    }

    #[test]
    fn the_least_recently_used_is_forgotten() {
        let verified = Verified::default();
        let key = [1u8; 32];
        let grant = [9u8; 64];
        verified.remember(&key, b"grant", &grant);
        for n in 0..(REMEMBERED * 2) as u64 {
            let mut proof = [0u8; 64];
            proof[..8].copy_from_slice(&n.to_le_bytes());
            verified.remember(&key, b"proof", &proof);
            // Used on every call, the grant stays.
            assert!(verified.holds(&key, b"grant", &grant));
        }
        assert!(!verified.holds(&key, b"proof", &[0u8; 64]));
        assert!(verified.seen.lock().unwrap().len() <= REMEMBERED);
    }

    #[test]
    fn a_check_answers_as_the_strict_check_and_remembers_only_what_verified() {
        let verified = Verified::default();
        let signer = lab_coord_auth::SigningKey::from_bytes(&[7; 32]);
        let principal = Principal::of(&signer);
        let key = *principal.as_bytes();
        let signature = lab_coord_auth::sign(&signer, b"grant");
        let strict = |message: &[u8]| lab_coord_auth::check_strict(&principal, message, &signature);
        assert_eq!(verified.check(&key, b"grant", &signature), strict(b"grant"));
        assert!(verified.holds(&key, b"grant", &signature));
        assert_eq!(
            verified.check(&key, b"grant", &signature),
            SignatureOutcome::Valid
        );
        assert_eq!(
            verified.check(&key, b"grant!", &signature),
            strict(b"grant!")
        );
        assert!(!verified.holds(&key, b"grant!", &signature));
    }

    #[test]
    fn an_admitted_key_checks_as_the_strict_check_does() {
        let verified = Verified::default();
        let signer = lab_coord_auth::SigningKey::from_bytes(&[7; 32]);
        let key = *Principal::of(&signer).as_bytes();
        let signature = lab_coord_auth::sign(&signer, b"proof");
        for _ in 0..2 {
            let admitted = verified.admitted(&key).expect("an admissible key");
            assert_eq!(
                admitted.check(b"proof", &signature),
                SignatureOutcome::Valid
            );
            assert_eq!(
                admitted.check(b"proof!", &signature),
                SignatureOutcome::BadSignature
            );
        }
        // The identity point is of small order: never admitted, never kept.
        let mut identity = [0u8; 32];
        identity[0] = 1;
        assert!(verified.admitted(&identity).is_none());
        for n in 0..(ADMITTED * 2) as u8 {
            let other = lab_coord_auth::SigningKey::from_bytes(&[n; 32]);
            assert!(verified
                .admitted(Principal::of(&other).as_bytes())
                .is_some());
        }
        assert!(verified.admitted.lock().unwrap().len() <= ADMITTED);
    }
}
