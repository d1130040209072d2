//! Authentication and authorization core of the coordination service.
//!
//! A request carries a [`Carriage`]: a [`Proof`] (an Ed25519 signature by
//! the requesting principal over the request's signing record) and the
//! [`Grant`]s it relies on. [`Verifier::authenticate`] checks the proof in
//! the specification's order; [`Verifier::authorize`] looks for a grant
//! chain from the world's root. The signing side ([`sign_request`],
//! [`issue_grant`]) is here too, for the client tool and the tests.
//!
//! The crate is pure: no clock, no storage, no network. The caller passes
//! `now` and a [`ReplayCache`]. It builds natively and for `wasm32-wasip2`.
//!
//! Map of the modules (the byte recipes are in
//! `contracts/coordination/AUTH.md`):
//!
//! - [`carriage`]: [`Carriage`], [`Proof`], the `Svc-Auth` header and strict
//!   decoding.
//! - [`record`]: the signing record, [`Params`], [`BodyDigest`], and the
//!   RFC 8785 helper.
//! - [`grants`]: [`Grant`], [`GrantKind`], grant signing bytes, digests,
//!   [`issue_grant`] and chain validity.
//! - [`verify`]: [`Verifier`], [`ReplayCache`], [`sign_request`].
//! - [`keys`]: [`Principal`] and strict Ed25519.
//! - [`dsse`]: DSSE v1 envelopes signed with Ed25519 (attestations).
//! - [`error`]: [`AuthError`], [`Unverified`], [`SignError`],
//!   [`RecordError`].

pub mod carriage;
pub mod dsse;
pub mod error;
pub mod grants;
pub mod keys;
pub mod record;
pub mod verify;

pub use crate::carriage::{is_valid_nonce, Carriage, Proof, HEADER, MAX_GRANTS};
pub use crate::error::{AuthError, RecordError, SignError, Unverified};
pub use crate::grants::{
    grant_signing_bytes, issue_grant, issue_grant_unchecked, valid_grants, valid_grants_with,
    Grant, GrantFields, GrantKind, KnownGrants, GRANT_PURPOSE, MAX_CHAIN_DEPTH,
};
pub use crate::keys::{
    check_strict, sign, AdmittedKey, Principal, SignatureCheck, SignatureOutcome,
};
pub use crate::record::{
    admission_signing_bytes, canonical_json, signing_record, BodyDigest, ParamValue, Params,
    RequestFacts, ADMISSION_PURPOSE,
};
pub use crate::verify::{
    sign_request, sign_request_facts, Authorization, MemoryReplayCache, ReplayCache, Verifier,
    FRESHNESS_SECONDS, REPLAY_RETENTION_SECONDS,
};

/// The signing key type callers pass to [`sign_request`] and
/// [`issue_grant`].
pub use ed25519_dalek::SigningKey;
