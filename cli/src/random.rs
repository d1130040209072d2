//! Randomness from the operating system (`/dev/urandom`): key seeds and
//! proof nonces.

use std::fs::File;
use std::io::{self, Read as _};

use base64::Engine as _;

/// Fills `buf` from `/dev/urandom`.
pub fn fill(buf: &mut [u8]) -> io::Result<()> {
    File::open("/dev/urandom")?.read_exact(buf)
}

/// A fresh proof nonce: 16 random bytes (128 bits) in base64url without
/// padding, 22 characters.
pub fn nonce() -> io::Result<String> {
    let mut bytes = [0u8; 16];
    fill(&mut bytes)?;
    Ok(base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nonces_are_22_characters_and_differ() {
        let a = nonce().unwrap();
        let b = nonce().unwrap();
        assert_eq!(a.len(), 22);
        assert!(lab_coord_auth::is_valid_nonce(&a), "{a}");
        assert_ne!(a, b);
    }
}
