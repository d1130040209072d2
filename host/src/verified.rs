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
//!   the same as the call before's).
//!
//! Only the signature is remembered: the component still checks each
//! grant's validity, revocation and chain on every call.

use sha2::{Digest, Sha256};
use std::sync::Mutex;

/// Signatures remembered per connection: one carriage's grants (at most
/// 16, `MAX_GRANTS`) and the proofs beside them.
pub const REMEMBERED: usize = 32;

/// A connection's verified signatures.
#[derive(Default)]
pub struct Verified {
    /// Least recently used first.
    seen: Mutex<Vec<Signed>>,
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
    /// Whether `signature` by `key` over `message` verified before on this
    /// connection.
    pub fn holds(&self, key: &[u8; 32], message: &[u8], signature: &[u8; 64]) -> bool {
        let signed = Signed::new(key, message, signature);
        let mut seen = self.seen.lock().unwrap_or_else(|p| p.into_inner());
        let Some(at) = seen.iter().position(|s| *s == signed) else {
            return false;
        };
        let hit = seen.remove(at);
        seen.push(hit);
        true
    }

    /// Remembers a signature `check_strict` found valid.
    pub fn remember(&self, key: &[u8; 32], message: &[u8], signature: &[u8; 64]) {
        let signed = Signed::new(key, message, signature);
        let mut seen = self.seen.lock().unwrap_or_else(|p| p.into_inner());
        if seen.contains(&signed) {
            return;
        }
        if seen.len() >= REMEMBERED {
            seen.remove(0);
        }
        seen.push(signed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
}
