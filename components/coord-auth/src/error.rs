//! Why a request is not authenticated or not authorized, and why something
//! could not be signed.
//!
//! The reasons inside [`Unverified`] are for logs. The wire answer for any of
//! them is the bare `unverified` refusal (401), and for [`AuthError::Denied`]
//! the bare `denied` refusal (403); neither says anything about the path.

use std::fmt;

use lab_strict_json::{Error as JsonError, ShapeError};

/// Why a carriage or its proof failed verification (401 `unverified`).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Unverified {
    /// The `Svc-Auth` header (or the socket's `auth` member) is absent.
    Missing,
    /// The header value is not canonical padded standard base64.
    NotBase64,
    /// The decoded header is not strict JSON.
    NotJson(JsonError),
    /// The carriage, proof or a grant lacks a member, has one of the wrong
    /// type, or has one that is not documented.
    Shape(ShapeError),
    /// A member is present with the right JSON type but outside its grammar;
    /// `field` is the dotted member name, e.g. `proof.nonce` or
    /// `grants.2.kind`.
    Malformed { field: String, why: &'static str },
    /// The carriage holds more grants than [`MAX_GRANTS`](crate::MAX_GRANTS).
    TooManyGrants { count: usize },
    /// The proof's principal is not a valid Ed25519 public key: not a curve
    /// point, a non-canonical encoding, or a point of small order.
    KeyNotAdmissible,
    /// The signature does not verify strictly over the signing record
    /// rebuilt from what arrived (a changed op, parameter or body lands
    /// here, as does a non-canonical `S` or a small-order `R`).
    BadSignature,
    /// The request's parameters cannot form a signing record (an integer
    /// outside the interoperable range).
    Record(RecordError),
    /// The timestamp is more than the freshness window before `now`.
    Stale { timestamp: u64, now: u64 },
    /// The timestamp is more than the freshness window after `now`.
    FromTheFuture { timestamp: u64, now: u64 },
    /// The (principal, nonce) pair was seen before.
    Replayed,
    /// The proof's audience is not this service's external operations base
    /// URL.
    WrongAudience,
}

/// The outcome of checking a request that did not pass.
///
/// `E` is the error type of the [`ReplayCache`](crate::ReplayCache) the
/// service plugged in: a cache that cannot answer is neither a bad proof nor
/// a missing grant, so it is reported apart (the service answers it as
/// `unavailable`).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum AuthError<E = std::convert::Infallible> {
    /// 401 `unverified`: nothing may be evaluated.
    Unverified(Unverified),
    /// 403 `denied`: no grant chain from the world's root gives the
    /// principal this kind on this path.
    Denied,
    /// The replay cache failed; nothing was decided.
    ReplayCache(E),
}

/// Why a signing record (or a grant's signing bytes) cannot be built.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum RecordError {
    /// An integer lies outside `-(2^53 - 1) ..= 2^53 - 1`, so RFC 8785 would
    /// not write it as the exact integer.
    IntegerOutOfRange { field: String },
}

/// Why the signing side refused to produce a proof or a grant.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum SignError {
    /// The nonce is not 22..=64 characters of the base64url alphabet.
    BadNonce,
    /// The signing record or grant cannot be built.
    Record(RecordError),
    /// A parent grant was given whose principal is not the signing key, or
    /// whose kind, path or expiry the new grant would widen.
    NotAnAttenuation(&'static str),
}

impl fmt::Display for Unverified {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Unverified::Missing => f.write_str("no auth carriage"),
            Unverified::NotBase64 => f.write_str("carriage is not canonical padded base64"),
            Unverified::NotJson(err) => write!(f, "carriage is not strict JSON: {err}"),
            Unverified::Shape(err) => write!(f, "carriage shape: {err}"),
            Unverified::Malformed { field, why } => write!(f, "member {field:?} {why}"),
            Unverified::TooManyGrants { count } => {
                write!(
                    f,
                    "carriage holds {count} grants, more than {}",
                    crate::MAX_GRANTS
                )
            }
            Unverified::KeyNotAdmissible => {
                f.write_str("principal is not an admissible Ed25519 public key")
            }
            Unverified::BadSignature => {
                f.write_str("signature does not verify over the rebuilt signing record")
            }
            Unverified::Record(err) => write!(f, "signing record: {err}"),
            Unverified::Stale { timestamp, now } => {
                write!(f, "proof timestamp {timestamp} is stale at {now}")
            }
            Unverified::FromTheFuture { timestamp, now } => {
                write!(f, "proof timestamp {timestamp} is in the future at {now}")
            }
            Unverified::Replayed => f.write_str("nonce already used by this principal"),
            Unverified::WrongAudience => f.write_str("proof audience is not this service"),
        }
    }
}

impl<E: fmt::Display> fmt::Display for AuthError<E> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            AuthError::Unverified(reason) => write!(f, "unverified: {reason}"),
            AuthError::Denied => f.write_str("denied: no grant chain for this kind and path"),
            AuthError::ReplayCache(err) => write!(f, "replay cache failed: {err}"),
        }
    }
}

impl fmt::Display for RecordError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RecordError::IntegerOutOfRange { field } => {
                write!(f, "integer {field:?} is outside -(2^53-1)..=2^53-1")
            }
        }
    }
}

impl fmt::Display for SignError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SignError::BadNonce => f.write_str("nonce must be 22..=64 characters of [A-Za-z0-9_-]"),
            SignError::Record(err) => write!(f, "{err}"),
            SignError::NotAnAttenuation(why) => {
                write!(f, "not an attenuation of the parent: {why}")
            }
        }
    }
}

impl std::error::Error for Unverified {}
impl<E: fmt::Debug + fmt::Display> std::error::Error for AuthError<E> {}
impl std::error::Error for RecordError {}
impl std::error::Error for SignError {}

impl<E> From<Unverified> for AuthError<E> {
    fn from(reason: Unverified) -> Self {
        AuthError::Unverified(reason)
    }
}

impl From<RecordError> for SignError {
    fn from(err: RecordError) -> Self {
        SignError::Record(err)
    }
}

impl From<ShapeError> for Unverified {
    fn from(err: ShapeError) -> Self {
        Unverified::Shape(err)
    }
}

impl<E> AuthError<E> {
    /// The refusal code the service answers with, when there is one:
    /// `unverified` or `denied`. A replay-cache failure has none here.
    pub fn code(&self) -> Option<&'static str> {
        match self {
            AuthError::Unverified(_) => Some("unverified"),
            AuthError::Denied => Some("denied"),
            AuthError::ReplayCache(_) => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_and_messages() {
        let e: AuthError = Unverified::Replayed.into();
        assert_eq!(e.code(), Some("unverified"));
        assert!(e.to_string().contains("nonce"));
        assert_eq!(
            AuthError::<std::convert::Infallible>::Denied.code(),
            Some("denied")
        );
        let e: AuthError<&str> = AuthError::ReplayCache("disk");
        assert_eq!(e.code(), None);
        assert!(e.to_string().contains("disk"));
        assert!(Unverified::TooManyGrants { count: 17 }
            .to_string()
            .contains("17 grants"));
    }
}
