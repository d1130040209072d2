//! A peer's body relayed to a client, verified as it passes.
//!
//! Invariant: the client never receives the relay's last bytes before the
//! whole peer body was seen, counted and hashed, and found to be exactly
//! the announced length with the announced SHA-256. The [`Verifier`] holds
//! back the latest chunk; only the clean end of a matching body releases
//! it. Any mismatch (or a peer body that breaks off) ends the response body
//! with an error, so hyper closes the connection short of the
//! `content-length` the component announced: a client that received a
//! complete body received the right one.

use bytes::Bytes;
use sha2::{Digest, Sha256};

/// Why a relayed body was refused.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum RelayError {
    /// More bytes arrived than announced.
    TooLong { announced: u64 },
    /// The body ended after `seen` bytes, short of the announced length.
    TooShort { announced: u64, seen: u64 },
    /// The right length, the wrong bytes.
    Digest,
    /// The peer's body broke off.
    Broken(String),
}

impl std::fmt::Display for RelayError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            RelayError::TooLong { announced } => {
                write!(
                    f,
                    "the relayed body is longer than the announced {announced} bytes"
                )
            }
            RelayError::TooShort { announced, seen } => write!(
                f,
                "the relayed body ended after {seen} of the announced {announced} bytes"
            ),
            RelayError::Digest => write!(f, "the relayed body's SHA-256 is not the announced one"),
            RelayError::Broken(reason) => write!(f, "the relayed body broke off: {reason}"),
        }
    }
}

impl std::error::Error for RelayError {}

/// Counts and hashes a relayed body, holding back its latest chunk.
pub struct Verifier {
    announced: u64,
    /// The announced digest; a digest of another length never matches.
    sha256: Vec<u8>,
    hasher: Sha256,
    seen: u64,
    /// The latest chunk, not yet released to the client.
    held: Option<Bytes>,
}

impl Verifier {
    pub fn new(announced: u64, sha256: Vec<u8>) -> Self {
        Verifier {
            announced,
            sha256,
            hasher: Sha256::new(),
            seen: 0,
            held: None,
        }
    }

    /// Takes the peer's next chunk; returns the bytes that may go to the
    /// client now (the chunk before this one).
    pub fn push(&mut self, chunk: Bytes) -> Result<Option<Bytes>, RelayError> {
        if chunk.is_empty() {
            return Ok(None);
        }
        self.seen += chunk.len() as u64;
        if self.seen > self.announced {
            return Err(RelayError::TooLong {
                announced: self.announced,
            });
        }
        self.hasher.update(&chunk);
        Ok(self.held.replace(chunk))
    }

    /// At the peer body's clean end: the held bytes, when the body was
    /// exactly the announced one.
    pub fn finish(self) -> Result<Option<Bytes>, RelayError> {
        if self.seen != self.announced {
            return Err(RelayError::TooShort {
                announced: self.announced,
                seen: self.seen,
            });
        }
        if self.hasher.finalize().as_slice() != self.sha256.as_slice() {
            return Err(RelayError::Digest);
        }
        Ok(self.held)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sha(bytes: &[u8]) -> Vec<u8> {
        Sha256::digest(bytes).to_vec()
    }

    /// Feeds `chunks`; returns what was released before the end and the
    /// outcome of the end.
    fn run(
        announced: u64,
        digest: Vec<u8>,
        chunks: &[&'static [u8]],
    ) -> (Vec<u8>, Result<Option<Bytes>, RelayError>) {
        let mut verifier = Verifier::new(announced, digest);
        let mut released = Vec::new();
        for chunk in chunks {
            match verifier.push(Bytes::from_static(chunk)) {
                Ok(Some(out)) => released.extend_from_slice(&out),
                Ok(None) => {}
                Err(e) => return (released, Err(e)),
            }
        }
        (released, verifier.finish())
    }

    #[test]
    fn the_right_body_is_released_whole_and_its_end_only_at_the_end() {
        let (released, end) = run(9, sha(b"abcdefghi"), &[b"abc", b"", b"def", b"ghi"]);
        assert_eq!(released, b"abcdef");
        assert_eq!(end, Ok(Some(Bytes::from_static(b"ghi"))));
    }

    #[test]
    fn a_wrong_digest_withholds_the_last_chunk() {
        let (released, end) = run(6, sha(b"abcdeX"), &[b"abc", b"def"]);
        assert_eq!(released, b"abc");
        assert_eq!(end, Err(RelayError::Digest));
    }

    #[test]
    fn a_short_body_withholds_its_last_chunk() {
        let (released, end) = run(7, sha(b"abcdef"), &[b"abc", b"def"]);
        assert_eq!(released, b"abc");
        assert_eq!(
            end,
            Err(RelayError::TooShort {
                announced: 7,
                seen: 6
            })
        );
    }

    #[test]
    fn a_long_body_is_refused_as_soon_as_it_passes_the_length() {
        let (released, end) = run(4, sha(b"abcd"), &[b"abc", b"def", b"ghi"]);
        assert_eq!(released, b"");
        assert_eq!(end, Err(RelayError::TooLong { announced: 4 }));
    }

    #[test]
    fn an_empty_body_is_verified_too() {
        assert_eq!(run(0, sha(b""), &[]).1, Ok(None));
        assert_eq!(run(0, sha(b"x"), &[]).1, Err(RelayError::Digest));
        assert_eq!(
            run(0, sha(b""), &[b"x"]).1,
            Err(RelayError::TooLong { announced: 0 })
        );
        assert_eq!(run(0, vec![1, 2], &[]).1, Err(RelayError::Digest));
    }
}
