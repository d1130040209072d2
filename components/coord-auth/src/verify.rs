//! Verification in the specification's order, and the signing side.
//!
//! 1. possession of the key, 2. the signing record rebuilt from what
//!    arrived, 3. freshness and the replay cache, 4. the audience
//!    ([`Verifier::authenticate`]); 5. a grant chain from the world's root
//!    for the required kind on the request path ([`Verifier::authorize`]).
//!
//! Steps 1-4 fail as [`AuthError::Unverified`], step 5 as
//! [`AuthError::Denied`]. The service validates parameters before step 1 and
//! resolves coordinates between steps 4 and 5.

use std::collections::HashMap;
use std::convert::Infallible;

use ed25519_dalek::SigningKey;

use crate::carriage::{is_valid_nonce, Carriage, Proof};
use crate::error::{AuthError, SignError, Unverified};
use crate::grants::{is_prefix, valid_grants_with, GrantKind, KnownGrants};
use crate::keys::{self, Principal, SignatureCheck, SignatureOutcome};
use crate::record::{signing_record, BodyDigest, Params, RequestFacts};

/// A proof is fresh while `|now - timestamp|` is at most this many seconds.
pub const FRESHNESS_SECONDS: u64 = 300;

/// A (principal, nonce) pair is remembered until `timestamp` plus this many
/// seconds: past the last instant the proof could still be fresh.
pub const REPLAY_RETENTION_SECONDS: u64 = 600;

/// Remembers which (principal, nonce) pairs were used.
///
/// The service persists it, so a restart does not reopen the window in
/// which a captured proof is still fresh.
pub trait ReplayCache {
    type Error;

    /// Records the pair until `expires_at` (Unix seconds) and answers
    /// whether it was fresh: `true` if it was not already remembered. The
    /// check and the insertion are one atomic step.
    fn check_and_remember(
        &mut self,
        principal: &str,
        nonce: &str,
        expires_at: u64,
    ) -> Result<bool, Self::Error>;
}

/// A replay cache in memory, for tests and tools. It does not survive a
/// restart, so it is not what the service uses.
#[derive(Debug, Default)]
pub struct MemoryReplayCache {
    entries: HashMap<(String, String), u64>,
}

impl MemoryReplayCache {
    pub fn new() -> MemoryReplayCache {
        MemoryReplayCache::default()
    }

    /// Forgets the pairs whose expiry has passed.
    pub fn prune(&mut self, now: u64) {
        self.entries.retain(|_, expires_at| *expires_at > now);
    }

    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }
}

impl ReplayCache for MemoryReplayCache {
    type Error = Infallible;

    fn check_and_remember(
        &mut self,
        principal: &str,
        nonce: &str,
        expires_at: u64,
    ) -> Result<bool, Infallible> {
        let key = (principal.to_owned(), nonce.to_owned());
        if self.entries.contains_key(&key) {
            return Ok(false);
        }
        self.entries.insert(key, expires_at);
        Ok(true)
    }
}

/// What a successful authorization established.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Authorization {
    /// The authenticated principal (the publisher the service records).
    pub principal: Principal,
    /// The latest expiry among the valid grants that authorize the request;
    /// a subscription opened by it ends then.
    pub valid_until: u64,
}

/// One world's verification settings.
#[derive(Debug, Clone)]
pub struct Verifier {
    world: String,
    root: Principal,
    audience: String,
    check: SignatureCheck,
}

impl Verifier {
    /// `audience` is the external operations base URL exactly as clients
    /// sign it (http(s), with the external prefix, no trailing slash).
    pub fn new(world: impl Into<String>, root: Principal, audience: impl Into<String>) -> Verifier {
        Verifier {
            world: world.into(),
            root,
            audience: audience.into(),
            check: keys::check_strict,
        }
    }

    /// The same verifier with another strict Ed25519 check: one that
    /// follows [`keys::check_strict`]'s rules exactly (a host's native
    /// implementation, for speed inside a WebAssembly guest).
    pub fn with_signature_check(mut self, check: SignatureCheck) -> Verifier {
        self.check = check;
        self
    }

    pub fn world(&self) -> &str {
        &self.world
    }

    pub fn root(&self) -> &Principal {
        &self.root
    }

    pub fn audience(&self) -> &str {
        &self.audience
    }

    /// Steps 1-4: the proof. On success, the authenticated principal; the
    /// (principal, nonce) pair is then remembered in `cache`.
    pub fn authenticate<C: ReplayCache>(
        &self,
        carriage: &Carriage,
        request: &RequestFacts<'_>,
        now: u64,
        cache: &mut C,
    ) -> Result<Principal, AuthError<C::Error>> {
        let proof = &carriage.proof;
        // 1 and 2. Possession: an admissible key and a strict signature
        // over the record rebuilt from what arrived.
        let record = signing_record(
            request,
            &proof.principal,
            &proof.nonce,
            proof.timestamp,
            &proof.audience,
        )
        .map_err(Unverified::Record)?;
        match (self.check)(&proof.principal, &record, &proof.signature) {
            SignatureOutcome::Valid => {}
            SignatureOutcome::KeyNotAdmissible => return Err(Unverified::KeyNotAdmissible.into()),
            SignatureOutcome::BadSignature => return Err(Unverified::BadSignature.into()),
        }
        // 3. Freshness, then replay.
        if now > proof.timestamp.saturating_add(FRESHNESS_SECONDS) {
            return Err(Unverified::Stale {
                timestamp: proof.timestamp,
                now,
            }
            .into());
        }
        if proof.timestamp > now.saturating_add(FRESHNESS_SECONDS) {
            return Err(Unverified::FromTheFuture {
                timestamp: proof.timestamp,
                now,
            }
            .into());
        }
        let principal_text = proof.principal.to_string();
        let fresh = cache
            .check_and_remember(
                &principal_text,
                &proof.nonce,
                proof.timestamp + REPLAY_RETENTION_SECONDS,
            )
            .map_err(AuthError::ReplayCache)?;
        if !fresh {
            return Err(Unverified::Replayed.into());
        }
        // 4. The audience.
        if proof.audience != self.audience {
            return Err(Unverified::WrongAudience.into());
        }
        Ok(proof.principal)
    }

    /// Step 5: whether the carriage's grants give `principal` the `kind` on
    /// `path` (labels below the world) at `now`.
    pub fn authorize<E>(
        &self,
        carriage: &Carriage,
        principal: &Principal,
        kind: GrantKind,
        path: &[String],
        now: u64,
    ) -> Result<Authorization, AuthError<E>> {
        let known = KnownGrants::unrevoked(&carriage.grants);
        self.authorize_known(carriage, &known, principal, kind, path, now)
    }

    /// [`Verifier::authorize`] given what is `known` of the carriage's
    /// grants: the grants it marks revoked are treated as not valid, and
    /// so every chain through them.
    pub fn authorize_known<E>(
        &self,
        carriage: &Carriage,
        known: &KnownGrants,
        principal: &Principal,
        kind: GrantKind,
        path: &[String],
        now: u64,
    ) -> Result<Authorization, AuthError<E>> {
        let valid = valid_grants_with(
            &carriage.grants,
            known,
            &self.world,
            &self.root,
            now,
            self.check,
        );
        carriage
            .grants
            .iter()
            .zip(valid)
            .filter(|(grant, valid)| {
                *valid
                    && grant.principal == *principal
                    && grant.kind == kind
                    && is_prefix(&grant.path, path)
            })
            .map(|(grant, _)| grant.valid_until)
            .max()
            .map(|valid_until| Authorization {
                principal: *principal,
                valid_until,
            })
            .ok_or(AuthError::Denied)
    }

    /// Steps 1-5 for a request whose path is known before verification.
    pub fn check<C: ReplayCache>(
        &self,
        carriage: &Carriage,
        request: &RequestFacts<'_>,
        kind: GrantKind,
        path: &[String],
        now: u64,
        cache: &mut C,
    ) -> Result<Authorization, AuthError<C::Error>> {
        let principal = self.authenticate(carriage, request, now, cache)?;
        self.authorize(carriage, &principal, kind, path, now)
    }
}

/// Signs a request: the proof over the signing record of `op`, `params`, the
/// exact `body` bytes (empty when there is none), `nonce`, `timestamp` and
/// `audience`, by `key`.
pub fn sign_request(
    key: &SigningKey,
    op: &str,
    params: &Params,
    body: &[u8],
    nonce: &str,
    timestamp: u64,
    audience: &str,
) -> Result<Proof, SignError> {
    let request = RequestFacts {
        op,
        params,
        body_digest: BodyDigest::of(body),
    };
    sign_request_facts(key, &request, nonce, timestamp, audience)
}

/// [`sign_request`] with the body's digest computed by the caller.
pub fn sign_request_facts(
    key: &SigningKey,
    request: &RequestFacts<'_>,
    nonce: &str,
    timestamp: u64,
    audience: &str,
) -> Result<Proof, SignError> {
    if !is_valid_nonce(nonce) {
        return Err(SignError::BadNonce);
    }
    let principal = Principal::of(key);
    let record = signing_record(request, &principal, nonce, timestamp, audience)?;
    Ok(Proof {
        principal,
        nonce: nonce.to_owned(),
        timestamp,
        audience: audience.to_owned(),
        signature: keys::sign(key, &record),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::grants::{issue_grant, issue_grant_unchecked, Grant, GrantFields};
    use crate::MAX_GRANTS;

    const WORLD: &str = "lab";
    const AUDIENCE: &str = "http://127.0.0.1:8094";
    const T: u64 = 1_767_225_600;
    const NONCE: &str = "AAAAAAAAAAAAAAAAAAAAAA";

    fn key(seed: u8) -> SigningKey {
        SigningKey::from_bytes(&[seed; 32])
    }

    fn p(key: &SigningKey) -> Principal {
        Principal::of(key)
    }

    fn path(labels: &[&str]) -> Vec<String> {
        labels.iter().map(|s| s.to_string()).collect()
    }

    fn verifier() -> Verifier {
        Verifier::new(WORLD, p(&key(1)), AUDIENCE)
    }

    fn grant(
        signer: u8,
        to: u8,
        kind: GrantKind,
        labels: &[&str],
        valid_until: u64,
        parent: Option<&Grant>,
    ) -> Grant {
        let fields = GrantFields {
            principal: p(&key(to)),
            kind,
            path: path(labels),
            valid_until,
        };
        issue_grant(&key(signer), WORLD, fields, parent).unwrap()
    }

    /// Worker (seed 3) reads entries of projects/alpha/artifacts/a1 with a
    /// read grant from the root on projects/alpha.
    struct Case {
        op: &'static str,
        params: Params,
        body: Vec<u8>,
        carriage: Carriage,
    }

    fn case() -> Case {
        let params = Params::new().strings("path", ["projects", "alpha", "artifacts", "a1"]);
        let proof = sign_request(&key(3), "entries", &params, b"", NONCE, T, AUDIENCE).unwrap();
        let grants = vec![grant(
            1,
            3,
            GrantKind::Read,
            &["projects", "alpha"],
            T + 3600,
            None,
        )];
        Case {
            op: "entries",
            params,
            body: Vec::new(),
            carriage: Carriage::new(proof, grants),
        }
    }

    fn run(
        case: &Case,
        now: u64,
        cache: &mut MemoryReplayCache,
    ) -> Result<Authorization, AuthError> {
        let request = RequestFacts {
            op: case.op,
            params: &case.params,
            body_digest: BodyDigest::of(&case.body),
        };
        let target = match case.params.get("path") {
            Some(crate::ParamValue::Strings(labels)) => labels.clone(),
            _ => Vec::new(),
        };
        let kind = if case.op == "entries" {
            GrantKind::Read
        } else {
            GrantKind::Publish
        };
        // Every case goes through the header, as the service would.
        let header = case.carriage.to_header();
        let carriage = Carriage::from_header(Some(header.as_bytes()))?;
        verifier().check(&carriage, &request, kind, &target, now, cache)
    }

    fn unverified(result: Result<Authorization, AuthError>) -> Unverified {
        match result {
            Err(AuthError::Unverified(reason)) => reason,
            other => panic!("expected unverified, got {other:?}"),
        }
    }

    #[test]
    fn accepted_and_replay_refused() {
        let case = case();
        let mut cache = MemoryReplayCache::new();
        let auth = run(&case, T + 10, &mut cache).unwrap();
        assert_eq!(auth.principal, p(&key(3)));
        assert_eq!(auth.valid_until, T + 3600);
        assert_eq!(
            unverified(run(&case, T + 11, &mut cache)),
            Unverified::Replayed
        );
        // Remembered until timestamp + 600.
        cache.prune(T + 599);
        assert_eq!(cache.len(), 1);
        cache.prune(T + 600);
        assert!(cache.is_empty());
    }

    #[test]
    fn freshness_window_is_300_seconds_each_way() {
        let case = case();
        assert!(run(&case, T + 300, &mut MemoryReplayCache::new()).is_ok());
        assert!(run(&case, T - 300, &mut MemoryReplayCache::new()).is_ok());
        assert_eq!(
            unverified(run(&case, T + 301, &mut MemoryReplayCache::new())),
            Unverified::Stale {
                timestamp: T,
                now: T + 301
            }
        );
        assert_eq!(
            unverified(run(&case, T - 301, &mut MemoryReplayCache::new())),
            Unverified::FromTheFuture {
                timestamp: T,
                now: T - 301
            }
        );
    }

    #[test]
    fn stale_proof_is_not_remembered() {
        let case = case();
        let mut cache = MemoryReplayCache::new();
        assert!(run(&case, T + 301, &mut cache).is_err());
        assert!(cache.is_empty());
    }

    #[test]
    fn missing_header() {
        assert_eq!(Carriage::from_header(None), Err(Unverified::Missing));
    }

    #[test]
    fn bad_signature() {
        let mut case = case();
        case.carriage.proof.signature[10] ^= 0x40;
        assert_eq!(
            unverified(run(&case, T, &mut MemoryReplayCache::new())),
            Unverified::BadSignature
        );
        // Signed by another key than the principal's.
        let mut case = self::case();
        let other =
            sign_request(&key(2), "entries", &case.params, b"", NONCE, T, AUDIENCE).unwrap();
        case.carriage.proof.signature = other.signature;
        assert_eq!(
            unverified(run(&case, T, &mut MemoryReplayCache::new())),
            Unverified::BadSignature
        );
    }

    /// S + L verifies under a lax verifier but not under `verify_strict`.
    #[test]
    fn non_canonical_s_refused() {
        let mut case = case();
        case.carriage.proof.signature = add_order_to_s(&case.carriage.proof.signature);
        assert_eq!(
            unverified(run(&case, T, &mut MemoryReplayCache::new())),
            Unverified::BadSignature
        );
    }

    /// The group order L, little-endian.
    pub(crate) const ORDER: [u8; 32] = [
        0xed, 0xd3, 0xf5, 0x5c, 0x1a, 0x63, 0x12, 0x58, 0xd6, 0x9c, 0xf7, 0xa2, 0xde, 0xf9, 0xde,
        0x14, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x10,
    ];

    pub(crate) fn add_order_to_s(signature: &[u8; 64]) -> [u8; 64] {
        let mut out = *signature;
        let mut carry = 0u16;
        for i in 0..32 {
            let sum = u16::from(out[32 + i]) + u16::from(ORDER[i]) + carry;
            out[32 + i] = sum as u8;
            carry = sum >> 8;
        }
        assert_eq!(carry, 0);
        out
    }

    #[test]
    fn small_order_public_key_refused() {
        let mut case = case();
        let mut identity = [0u8; 32];
        identity[0] = 1;
        case.carriage.proof.principal = Principal::from_bytes(identity);
        // With A the identity, R = [s]B and k arbitrary, a lax check of
        // [s]B = R + [k]A passes; a signature built that way:
        let s = [0u8; 32];
        let mut signature = [0u8; 64];
        signature[0] = 1; // R = identity, the encoding of [0]B
        signature[32..].copy_from_slice(&s);
        case.carriage.proof.signature = signature;
        assert_eq!(
            unverified(run(&case, T, &mut MemoryReplayCache::new())),
            Unverified::KeyNotAdmissible
        );
    }

    #[test]
    fn changed_params_body_or_op_refused() {
        let mut case = case();
        case.params = Params::new().strings("path", ["projects", "alpha", "artifacts", "a2"]);
        assert_eq!(
            unverified(run(&case, T, &mut MemoryReplayCache::new())),
            Unverified::BadSignature
        );

        let mut case = self::case();
        case.params = case.params.clone().int("limit", 5);
        assert_eq!(
            unverified(run(&case, T, &mut MemoryReplayCache::new())),
            Unverified::BadSignature
        );

        let mut case = self::case();
        case.body = b"{}".to_vec();
        assert_eq!(
            unverified(run(&case, T, &mut MemoryReplayCache::new())),
            Unverified::BadSignature
        );

        let mut case = self::case();
        case.op = "children";
        assert_eq!(
            unverified(run(&case, T, &mut MemoryReplayCache::new())),
            Unverified::BadSignature
        );
    }

    #[test]
    fn wrong_audience_refused() {
        let mut case = case();
        case.carriage.proof = sign_request(
            &key(3),
            "entries",
            &case.params,
            b"",
            NONCE,
            T,
            "http://127.0.0.1:8094/",
        )
        .unwrap();
        assert_eq!(
            unverified(run(&case, T, &mut MemoryReplayCache::new())),
            Unverified::WrongAudience
        );
    }

    #[test]
    fn expired_grant_denied() {
        let mut case = case();
        case.carriage.grants = vec![grant(
            1,
            3,
            GrantKind::Read,
            &["projects", "alpha"],
            T + 5,
            None,
        )];
        assert!(run(&case, T + 4, &mut MemoryReplayCache::new()).is_ok());
        assert_eq!(
            run(&case, T + 5, &mut MemoryReplayCache::new()),
            Err(AuthError::Denied)
        );
    }

    #[test]
    fn sibling_path_and_other_kind_denied() {
        let mut case = case();
        case.carriage.grants = vec![grant(
            1,
            3,
            GrantKind::Read,
            &["projects", "beta"],
            T + 99,
            None,
        )];
        assert_eq!(
            run(&case, T, &mut MemoryReplayCache::new()),
            Err(AuthError::Denied)
        );
        // A deeper grant does not cover its parent.
        case.carriage.grants = vec![grant(
            1,
            3,
            GrantKind::Read,
            &["projects", "alpha", "artifacts", "a1", "declarations"],
            T + 99,
            None,
        )];
        assert_eq!(
            run(&case, T, &mut MemoryReplayCache::new()),
            Err(AuthError::Denied)
        );
        case.carriage.grants = vec![grant(1, 3, GrantKind::Publish, &["projects"], T + 99, None)];
        assert_eq!(
            run(&case, T, &mut MemoryReplayCache::new()),
            Err(AuthError::Denied)
        );
        // A grant held by someone else does not help.
        case.carriage.grants = vec![grant(1, 2, GrantKind::Read, &[], T + 99, None)];
        assert_eq!(
            run(&case, T, &mut MemoryReplayCache::new()),
            Err(AuthError::Denied)
        );
        // The world itself covers everything.
        case.carriage.grants = vec![grant(1, 3, GrantKind::Read, &[], T + 99, None)];
        assert!(run(&case, T, &mut MemoryReplayCache::new()).is_ok());
    }

    #[test]
    fn delegated_chain_accepted() {
        let mut case = case();
        let parent = grant(1, 2, GrantKind::Read, &["projects"], T + 99, None);
        let child = grant(
            2,
            3,
            GrantKind::Read,
            &["projects", "alpha"],
            T + 50,
            Some(&parent),
        );
        case.carriage.grants = vec![child, parent];
        assert_eq!(
            run(&case, T, &mut MemoryReplayCache::new())
                .unwrap()
                .valid_until,
            T + 50
        );
    }

    #[test]
    fn broken_chain_denied() {
        let mut case = case();
        let parent = grant(1, 2, GrantKind::Read, &["projects"], T + 99, None);
        let unrelated = grant(1, 2, GrantKind::Read, &["elsewhere"], T + 99, None);
        let fields = GrantFields {
            principal: p(&key(3)),
            kind: GrantKind::Read,
            path: path(&["projects", "alpha"]),
            valid_until: T + 50,
        };
        for derives_from in [None, Some(unrelated.digest())] {
            let child =
                issue_grant_unchecked(&key(2), WORLD, fields.clone(), derives_from.as_deref())
                    .unwrap();
            case.carriage.grants = vec![child, parent.clone()];
            assert_eq!(
                run(&case, T, &mut MemoryReplayCache::new()),
                Err(AuthError::Denied)
            );
        }
    }

    #[test]
    fn widened_chain_denied() {
        let mut case = case();
        let parent = grant(
            1,
            2,
            GrantKind::Read,
            &["projects", "alpha", "artifacts"],
            T + 99,
            None,
        );
        for (kind, labels, valid_until) in [
            // Broader path than the parent's.
            (GrantKind::Read, &["projects", "alpha"][..], T + 50),
            // Longer expiry.
            (
                GrantKind::Read,
                &["projects", "alpha", "artifacts"][..],
                T + 100,
            ),
        ] {
            let fields = GrantFields {
                principal: p(&key(3)),
                kind,
                path: path(labels),
                valid_until,
            };
            let child =
                issue_grant_unchecked(&key(2), WORLD, fields, Some(&parent.digest())).unwrap();
            case.carriage.grants = vec![child, parent.clone()];
            assert_eq!(
                run(&case, T, &mut MemoryReplayCache::new()),
                Err(AuthError::Denied)
            );
        }
        // Other kind: a read child of a publish parent.
        let publish_parent = grant(1, 2, GrantKind::Publish, &["projects"], T + 99, None);
        let fields = GrantFields {
            principal: p(&key(3)),
            kind: GrantKind::Read,
            path: path(&["projects", "alpha"]),
            valid_until: T + 50,
        };
        let child =
            issue_grant_unchecked(&key(2), WORLD, fields, Some(&publish_parent.digest())).unwrap();
        case.carriage.grants = vec![child, publish_parent];
        assert_eq!(
            run(&case, T, &mut MemoryReplayCache::new()),
            Err(AuthError::Denied)
        );
    }

    #[test]
    fn cycle_denied() {
        let mut case = case();
        let fields = |to: u8| GrantFields {
            principal: p(&key(to)),
            kind: GrantKind::Read,
            path: Vec::new(),
            valid_until: T + 99,
        };
        let a = issue_grant_unchecked(&key(2), WORLD, fields(3), None).unwrap();
        let b = issue_grant_unchecked(&key(3), WORLD, fields(2), Some(&a.digest())).unwrap();
        let a2 = issue_grant_unchecked(&key(2), WORLD, fields(3), Some(&b.digest())).unwrap();
        case.carriage.grants = vec![a, b, a2];
        assert_eq!(
            run(&case, T, &mut MemoryReplayCache::new()),
            Err(AuthError::Denied)
        );
    }

    #[test]
    fn too_many_grants_unverified() {
        let mut case = case();
        let g = case.carriage.grants[0].clone();
        case.carriage.grants = vec![g; MAX_GRANTS + 1];
        assert_eq!(
            unverified(run(&case, T, &mut MemoryReplayCache::new())),
            Unverified::TooManyGrants {
                count: MAX_GRANTS + 1
            }
        );
        case.carriage.grants.pop();
        assert!(run(&case, T, &mut MemoryReplayCache::new()).is_ok());
    }

    #[test]
    fn replay_cache_failure_is_its_own_error() {
        struct Broken;
        impl ReplayCache for Broken {
            type Error = &'static str;
            fn check_and_remember(
                &mut self,
                _: &str,
                _: &str,
                _: u64,
            ) -> Result<bool, &'static str> {
                Err("disk full")
            }
        }
        let case = case();
        let request = RequestFacts {
            op: case.op,
            params: &case.params,
            body_digest: BodyDigest::empty(),
        };
        assert_eq!(
            verifier().authenticate(&case.carriage, &request, T, &mut Broken),
            Err(AuthError::ReplayCache("disk full"))
        );
    }

    #[test]
    fn replay_is_per_principal() {
        let case = case();
        let mut cache = MemoryReplayCache::new();
        assert!(run(&case, T, &mut cache).is_ok());
        // Same nonce, another principal: fresh.
        let mut other = self::case();
        other.carriage.proof =
            sign_request(&key(2), "entries", &other.params, b"", NONCE, T, AUDIENCE).unwrap();
        other.carriage.grants = vec![grant(1, 2, GrantKind::Read, &[], T + 99, None)];
        assert!(run(&other, T, &mut cache).is_ok());
    }

    #[test]
    fn signing_refuses_a_bad_nonce() {
        assert_eq!(
            sign_request(
                &key(3),
                "entries",
                &Params::new(),
                b"",
                "short",
                T,
                AUDIENCE
            ),
            Err(SignError::BadNonce)
        );
    }
}
