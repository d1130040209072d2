//! Grants: signed, expiring authorization facts, and the chains that make
//! them valid.
//!
//! A grant says that `principal` may perform operations of `kind` on the
//! subtree `path` (relative to the world) while `now < valid_until`. It is
//! valid when its signature verifies strictly under `issuer` over its signing
//! bytes and either the issuer is the world's root key (and the grant derives
//! from nothing) or it attenuates another valid grant of the same carriage
//! held by the issuer (and names that grant's digest). See [`valid_grants`].

use std::fmt;

use ed25519_dalek::SigningKey;
use lab_strict_json::{Json, Object};
use serde_json::{json, Value};

use crate::error::{RecordError, SignError, Unverified};
use crate::keys::{self, Principal, SignatureCheck, SignatureOutcome};
use crate::record::{canonical_json, sha256_text, MAX_SAFE_INTEGER};

/// The `purpose` member of every grant's signing bytes.
pub const GRANT_PURPOSE: &str = "coord.grant.v1";

/// The longest chain: a grant issued by the root has depth 1.
pub const MAX_CHAIN_DEPTH: usize = 8;

/// What a grant permits; the operation table's `grant` column names one.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum GrantKind {
    Read,
    Publish,
    Declare,
    Provision,
}

impl GrantKind {
    pub const ALL: [GrantKind; 4] = [
        GrantKind::Read,
        GrantKind::Publish,
        GrantKind::Declare,
        GrantKind::Provision,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            GrantKind::Read => "read",
            GrantKind::Publish => "publish",
            GrantKind::Declare => "declare",
            GrantKind::Provision => "provision",
        }
    }

    pub fn parse(text: &str) -> Option<GrantKind> {
        GrantKind::ALL
            .into_iter()
            .find(|kind| kind.as_str() == text)
    }
}

impl fmt::Display for GrantKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The signed members of a grant, without issuer and signature.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GrantFields {
    pub principal: Principal,
    pub kind: GrantKind,
    /// Labels below the world; empty for the whole world.
    pub path: Vec<String>,
    /// Unix seconds; the grant is valid while `now < valid_until`.
    pub valid_until: u64,
}

/// A grant as carried: `{principal, kind, path, valid_until, issuer,
/// signature}`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Grant {
    pub principal: Principal,
    pub kind: GrantKind,
    pub path: Vec<String>,
    pub valid_until: u64,
    pub issuer: Principal,
    pub signature: [u8; 64],
}

impl Grant {
    /// The wire object, as it appears in a carriage.
    pub fn to_json(&self) -> Value {
        json!({
            "principal": self.principal.to_string(),
            "kind": self.kind.as_str(),
            "path": self.path,
            "valid_until": self.valid_until,
            "issuer": self.issuer.to_string(),
            "signature": base64_encode(&self.signature),
        })
    }

    /// `sha256:` + hex of the SHA-256 of the RFC 8785 JSON of the wire
    /// object (signature included): what a child grant's `derives_from`
    /// names.
    pub fn digest(&self) -> String {
        sha256_text(&canonical_json(&self.to_json()))
    }

    /// The bytes this grant's signature covers in `world`, if it derives
    /// from the grant whose digest is `derives_from` (or from nothing).
    pub fn signing_bytes(
        &self,
        world: &str,
        derives_from: Option<&str>,
    ) -> Result<Vec<u8>, RecordError> {
        grant_signing_bytes(
            world,
            &GrantFields {
                principal: self.principal,
                kind: self.kind,
                path: self.path.clone(),
                valid_until: self.valid_until,
            },
            &self.issuer,
            derives_from,
        )
    }

    /// Whether the signature verifies strictly under the issuer over the
    /// signing bytes for `world` and `derives_from`.
    pub fn signature_verifies(&self, world: &str, derives_from: Option<&str>) -> bool {
        self.signature_verifies_with(world, derives_from, keys::check_strict)
    }

    /// [`Grant::signature_verifies`] with the given strict check.
    pub fn signature_verifies_with(
        &self,
        world: &str,
        derives_from: Option<&str>,
        check: SignatureCheck,
    ) -> bool {
        match self.signing_bytes(world, derives_from) {
            Ok(bytes) => check(&self.issuer, &bytes, &self.signature) == SignatureOutcome::Valid,
            Err(_) => false,
        }
    }

    /// Whether `self` may be derived from `parent`: held by this grant's
    /// issuer, same kind, a path at or below the parent's, and an expiry no
    /// later than the parent's.
    pub fn attenuates(&self, parent: &Grant) -> bool {
        parent.principal == self.issuer
            && parent.kind == self.kind
            && is_prefix(&parent.path, &self.path)
            && parent.valid_until >= self.valid_until
    }

    /// Decodes one grant object; `index` names it in errors.
    /// One grant from its JSON text, decoded as strictly as inside a
    /// carriage (exactly the six members, canonical base64).
    pub fn from_json_bytes(bytes: &[u8]) -> Result<Grant, Unverified> {
        let value = lab_strict_json::parse(bytes).map_err(Unverified::NotJson)?;
        Grant::from_json(value, 0)
    }

    pub(crate) fn from_json(value: Json, index: usize) -> Result<Grant, Unverified> {
        let parent = format!("grants.{index}");
        let within = |err: lab_strict_json::ShapeError| Unverified::Shape(err.within(&parent));
        let mut object: Object = value.into_object(&parent).map_err(Unverified::Shape)?;
        let principal = take_principal(&mut object, "principal", &parent)?;
        let kind_text = object.take_required_str("kind").map_err(within)?;
        let kind = GrantKind::parse(&kind_text).ok_or_else(|| Unverified::Malformed {
            field: format!("{parent}.kind"),
            why: "is not read, publish, declare or provision",
        })?;
        let path = take_path(&mut object, "path").map_err(within)?;
        let valid_until = object.take_required_u64("valid_until").map_err(within)?;
        if valid_until > MAX_SAFE_INTEGER {
            return Err(Unverified::Malformed {
                field: format!("{parent}.valid_until"),
                why: "is above 2^53-1",
            });
        }
        let issuer = take_principal(&mut object, "issuer", &parent)?;
        let signature = take_signature(&mut object, "signature", &parent)?;
        object.finish().map_err(within)?;
        Ok(Grant {
            principal,
            kind,
            path,
            valid_until,
            issuer,
            signature,
        })
    }
}

/// Takes the member `name` of `parent` as a principal.
pub(crate) fn take_principal(
    object: &mut Object,
    name: &str,
    parent: &str,
) -> Result<Principal, Unverified> {
    let text = object
        .take_required_str(name)
        .map_err(|err| Unverified::Shape(err.within(parent)))?;
    Principal::parse(&text).ok_or_else(|| Unverified::Malformed {
        field: format!("{parent}.{name}"),
        why: "is not ed25519: followed by 64 lowercase hex digits",
    })
}

/// Takes the member `name` of `parent` as 64 signature bytes in canonical
/// padded standard base64.
pub(crate) fn take_signature(
    object: &mut Object,
    name: &str,
    parent: &str,
) -> Result<[u8; 64], Unverified> {
    let text = object
        .take_required_str(name)
        .map_err(|err| Unverified::Shape(err.within(parent)))?;
    lab_strict_json::decode_canonical_base64(&text)
        .and_then(|bytes| <[u8; 64]>::try_from(bytes).ok())
        .ok_or_else(|| Unverified::Malformed {
            field: format!("{parent}.{name}"),
            why: "is not canonical padded base64 of 64 bytes",
        })
}

fn take_path(object: &mut Object, name: &str) -> Result<Vec<String>, lab_strict_json::ShapeError> {
    object
        .take_required_array(name)?
        .into_iter()
        .map(|label| label.into_string(name))
        .collect()
}

/// Whether `prefix` is a prefix of (or equal to) `path`, label by label.
pub fn is_prefix(prefix: &[String], path: &[String]) -> bool {
    prefix.len() <= path.len() && prefix.iter().zip(path).all(|(a, b)| a == b)
}

/// The exact bytes a grant's signature covers: the RFC 8785 JSON of
/// `{"purpose": "coord.grant.v1", "world", "grant": {principal, kind, path,
/// valid_until, issuer}, "derives_from": null | "sha256:<hex>"}`.
pub fn grant_signing_bytes(
    world: &str,
    fields: &GrantFields,
    issuer: &Principal,
    derives_from: Option<&str>,
) -> Result<Vec<u8>, RecordError> {
    if fields.valid_until > MAX_SAFE_INTEGER {
        return Err(RecordError::IntegerOutOfRange {
            field: "valid_until".into(),
        });
    }
    let record = json!({
        "purpose": GRANT_PURPOSE,
        "world": world,
        "grant": {
            "principal": fields.principal.to_string(),
            "kind": fields.kind.as_str(),
            "path": fields.path,
            "valid_until": fields.valid_until,
            "issuer": issuer.to_string(),
        },
        "derives_from": derives_from,
    });
    Ok(canonical_json(&record))
}

/// Issues a grant signed by `key` (the root's, or a delegate's holding
/// `parent`). With a parent, the new grant must attenuate it: the signing
/// key must be the parent's principal, the kind the same, the path at or
/// below the parent's, the expiry no later.
pub fn issue_grant(
    key: &SigningKey,
    world: &str,
    fields: GrantFields,
    parent: Option<&Grant>,
) -> Result<Grant, SignError> {
    let issuer = Principal::of(key);
    let derives_from = parent.map(Grant::digest);
    let bytes = grant_signing_bytes(world, &fields, &issuer, derives_from.as_deref())?;
    let grant = Grant {
        principal: fields.principal,
        kind: fields.kind,
        path: fields.path,
        valid_until: fields.valid_until,
        issuer,
        signature: keys::sign(key, &bytes),
    };
    if let Some(parent) = parent {
        if parent.principal != issuer {
            return Err(SignError::NotAnAttenuation(
                "the parent is not held by the signing key",
            ));
        }
        if !grant.attenuates(parent) {
            return Err(SignError::NotAnAttenuation(
                "kind differs, path is broader or expiry is later",
            ));
        }
    }
    Ok(grant)
}

/// Signs grant bytes for exactly the given `derives_from`, with no checks:
/// for building refused chains in tests and vectors.
pub fn issue_grant_unchecked(
    key: &SigningKey,
    world: &str,
    fields: GrantFields,
    derives_from: Option<&str>,
) -> Result<Grant, RecordError> {
    let issuer = Principal::of(key);
    let bytes = grant_signing_bytes(world, &fields, &issuer, derives_from)?;
    Ok(Grant {
        principal: fields.principal,
        kind: fields.kind,
        path: fields.path,
        valid_until: fields.valid_until,
        issuer,
        signature: keys::sign(key, &bytes),
    })
}

/// Which grants of a carriage are valid at `now` in `world` under `root`:
/// `result[i]` is true when `grants[i]` is.
///
/// Computed level by level: level 1 holds the unexpired grants issued by the
/// root with `derives_from` null; level k + 1 adds each unexpired grant that
/// attenuates some grant of levels 1..=k and whose signature names that
/// grant's digest. At most [`MAX_CHAIN_DEPTH`] levels are built, and a grant
/// once valid is never revisited, so cycles and long chains end. Each
/// (child, parent) pair costs at most one signature check.
pub fn valid_grants(grants: &[Grant], world: &str, root: &Principal, now: u64) -> Vec<bool> {
    let known = KnownGrants::unrevoked(grants);
    valid_grants_with(grants, &known, world, root, now, keys::check_strict)
}

/// What is known of a carriage's grants beyond their bytes, in their
/// order: each one's digest (`digests[i]` is `grants[i].digest()`, what a
/// child grant and a revocation name it by), and whether it is revoked
/// (`revoked[i]`; a missing entry is false).
#[derive(Debug, Clone, Default)]
pub struct KnownGrants {
    pub digests: Vec<String>,
    pub revoked: Vec<bool>,
}

impl KnownGrants {
    /// The digests of `grants`, none of them revoked.
    pub fn unrevoked(grants: &[Grant]) -> KnownGrants {
        KnownGrants {
            digests: grants.iter().map(Grant::digest).collect(),
            revoked: Vec::new(),
        }
    }
}

/// [`valid_grants`] given what is `known` of the grants, with the given
/// strict signature check, and with the grants `known` marks revoked never
/// valid: no chain passes through a revoked grant, so every grant derived
/// from it is not valid either.
pub fn valid_grants_with(
    grants: &[Grant],
    known: &KnownGrants,
    world: &str,
    root: &Principal,
    now: u64,
    check: SignatureCheck,
) -> Vec<bool> {
    let KnownGrants { digests, revoked } = known;
    assert_eq!(digests.len(), grants.len(), "a digest for every grant");
    // Usable: unexpired and not revoked; only a usable grant can be valid.
    let unexpired: Vec<bool> = grants
        .iter()
        .enumerate()
        .map(|(i, g)| now < g.valid_until && revoked.get(i) != Some(&true))
        .collect();
    let mut valid = vec![false; grants.len()];
    // Parents whose pairing with a child has been tried (only tried once a
    // parent is valid, so a failed try never needs repeating).
    let mut tried = vec![vec![false; grants.len()]; grants.len()];

    let mut frontier: Vec<usize> = Vec::new();
    for (i, grant) in grants.iter().enumerate() {
        if unexpired[i]
            && grant.issuer == *root
            && grant.signature_verifies_with(world, None, check)
        {
            valid[i] = true;
            frontier.push(i);
        }
    }
    for _level in 2..=MAX_CHAIN_DEPTH {
        if frontier.is_empty() {
            break;
        }
        let mut next = Vec::new();
        for (child, grant) in grants.iter().enumerate() {
            if valid[child] || !unexpired[child] {
                continue;
            }
            for &parent in &frontier {
                if tried[child][parent] || !grant.attenuates(&grants[parent]) {
                    continue;
                }
                tried[child][parent] = true;
                if grant.signature_verifies_with(world, Some(&digests[parent]), check) {
                    valid[child] = true;
                    next.push(child);
                    break;
                }
            }
        }
        frontier = next;
    }
    valid
}

pub(crate) fn base64_encode(bytes: &[u8]) -> String {
    use base64::Engine as _;
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    const WORLD: &str = "lab";

    fn key(seed: u8) -> SigningKey {
        SigningKey::from_bytes(&[seed; 32])
    }

    fn fields(to: u8, kind: GrantKind, path: &[&str], valid_until: u64) -> GrantFields {
        GrantFields {
            principal: Principal::of(&key(to)),
            kind,
            path: path.iter().map(|s| s.to_string()).collect(),
            valid_until,
        }
    }

    fn root() -> Principal {
        Principal::of(&key(1))
    }

    #[test]
    fn kinds_parse_exactly() {
        for kind in GrantKind::ALL {
            assert_eq!(GrantKind::parse(kind.as_str()), Some(kind));
        }
        assert_eq!(GrantKind::parse("Read"), None);
        assert_eq!(GrantKind::parse("write"), None);
    }

    #[test]
    fn prefix_is_label_by_label() {
        let p = |s: &[&str]| s.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        assert!(is_prefix(&p(&[]), &p(&["a"])));
        assert!(is_prefix(&p(&["a"]), &p(&["a"])));
        assert!(is_prefix(&p(&["a"]), &p(&["a", "b"])));
        assert!(!is_prefix(&p(&["a", "b"]), &p(&["a"])));
        assert!(!is_prefix(&p(&["a"]), &p(&["ab"])));
        assert!(!is_prefix(&p(&["a", "b"]), &p(&["a", "c"])));
    }

    #[test]
    fn root_grant_and_attenuated_child_are_valid() {
        let parent = issue_grant(
            &key(1),
            WORLD,
            fields(2, GrantKind::Read, &["p"], 100),
            None,
        )
        .unwrap();
        let child = issue_grant(
            &key(2),
            WORLD,
            fields(3, GrantKind::Read, &["p", "q"], 90),
            Some(&parent),
        )
        .unwrap();
        assert_eq!(
            valid_grants(&[child.clone(), parent.clone()], WORLD, &root(), 50),
            [true, true]
        );
        // The child alone has no chain.
        assert_eq!(
            valid_grants(std::slice::from_ref(&child), WORLD, &root(), 50),
            [false]
        );
        // Another world's root signature does not hold here.
        assert_eq!(
            valid_grants(&[parent.clone(), child], "other", &root(), 50),
            [false, false]
        );
        // Expiry: valid while now < valid_until.
        assert_eq!(
            valid_grants(std::slice::from_ref(&parent), WORLD, &root(), 99),
            [true]
        );
        assert_eq!(valid_grants(&[parent], WORLD, &root(), 100), [false]);
    }

    #[test]
    fn expired_parent_invalidates_child() {
        let parent =
            issue_grant(&key(1), WORLD, fields(2, GrantKind::Read, &[], 100), None).unwrap();
        let child = issue_grant(
            &key(2),
            WORLD,
            fields(3, GrantKind::Read, &[], 100),
            Some(&parent),
        )
        .unwrap();
        assert_eq!(
            valid_grants(&[parent, child], WORLD, &root(), 100),
            [false, false]
        );
    }

    #[test]
    fn revoked_grant_invalidates_every_chain_through_it() {
        let parent = issue_grant(
            &key(1),
            WORLD,
            fields(2, GrantKind::Read, &["p"], 100),
            None,
        )
        .unwrap();
        let child = issue_grant(
            &key(2),
            WORLD,
            fields(3, GrantKind::Read, &["p", "q"], 90),
            Some(&parent),
        )
        .unwrap();
        let grandchild = issue_grant(
            &key(3),
            WORLD,
            fields(4, GrantKind::Read, &["p", "q"], 80),
            Some(&child),
        )
        .unwrap();
        let chain = [parent, child, grandchild];
        let check = keys::check_strict;
        let revoked = |revoked: [bool; 3]| KnownGrants {
            revoked: revoked.to_vec(),
            ..KnownGrants::unrevoked(&chain)
        };
        let known = revoked([false; 3]);
        assert_eq!(
            valid_grants_with(&chain, &known, WORLD, &root(), 50, check),
            [true, true, true]
        );
        let known = revoked([true, false, false]);
        assert_eq!(
            valid_grants_with(&chain, &known, WORLD, &root(), 50, check),
            [false, false, false]
        );
        let known = revoked([false, true, false]);
        assert_eq!(
            valid_grants_with(&chain, &known, WORLD, &root(), 50, check),
            [true, false, false]
        );
    }

    #[test]
    fn issuing_refuses_widening() {
        let parent = issue_grant(
            &key(1),
            WORLD,
            fields(2, GrantKind::Read, &["p"], 100),
            None,
        )
        .unwrap();
        for (signer, f) in [
            (3, fields(3, GrantKind::Read, &["p"], 100)),
            (2, fields(3, GrantKind::Publish, &["p"], 100)),
            (2, fields(3, GrantKind::Read, &[], 100)),
            (2, fields(3, GrantKind::Read, &["q"], 100)),
            (2, fields(3, GrantKind::Read, &["p"], 101)),
        ] {
            assert!(matches!(
                issue_grant(&key(signer), WORLD, f, Some(&parent)),
                Err(SignError::NotAnAttenuation(_))
            ));
        }
    }

    #[test]
    fn widened_children_are_invalid() {
        let parent = issue_grant(
            &key(1),
            WORLD,
            fields(2, GrantKind::Read, &["p"], 100),
            None,
        )
        .unwrap();
        let digest = parent.digest();
        for f in [
            fields(3, GrantKind::Publish, &["p"], 100),
            fields(3, GrantKind::Read, &[], 100),
            fields(3, GrantKind::Read, &["q"], 100),
            fields(3, GrantKind::Read, &["p"], 101),
        ] {
            let child = issue_grant_unchecked(&key(2), WORLD, f, Some(&digest)).unwrap();
            assert_eq!(
                valid_grants(&[parent.clone(), child], WORLD, &root(), 50),
                [true, false]
            );
        }
    }

    #[test]
    fn wrong_derives_from_breaks_the_chain() {
        let parent = issue_grant(
            &key(1),
            WORLD,
            fields(2, GrantKind::Read, &["p"], 100),
            None,
        )
        .unwrap();
        let other =
            issue_grant(&key(1), WORLD, fields(2, GrantKind::Read, &["p"], 99), None).unwrap();
        let f = fields(3, GrantKind::Read, &["p"], 90);
        for derives_from in [None, Some(other.digest()), Some("sha256:00".to_owned())] {
            let child =
                issue_grant_unchecked(&key(2), WORLD, f.clone(), derives_from.as_deref()).unwrap();
            // `other` would qualify as a parent, but the child names neither.
            let valid = valid_grants(&[parent.clone(), child], WORLD, &root(), 50);
            assert_eq!(valid, [true, false], "{derives_from:?}");
        }
        // Naming `other` is fine when `other` is carried.
        let child = issue_grant_unchecked(&key(2), WORLD, f, Some(&other.digest())).unwrap();
        assert_eq!(
            valid_grants(&[parent, other, child], WORLD, &root(), 50),
            [true, true, true]
        );
    }

    #[test]
    fn cycles_end_without_a_chain() {
        // 2 -> 3 and 3 -> 2, neither reaching the root.
        let a = issue_grant_unchecked(&key(2), WORLD, fields(3, GrantKind::Read, &[], 100), None)
            .unwrap();
        let b = issue_grant_unchecked(
            &key(3),
            WORLD,
            fields(2, GrantKind::Read, &[], 100),
            Some(&a.digest()),
        )
        .unwrap();
        let a2 = issue_grant_unchecked(
            &key(2),
            WORLD,
            fields(3, GrantKind::Read, &[], 100),
            Some(&b.digest()),
        )
        .unwrap();
        assert_eq!(
            valid_grants(&[a, b, a2], WORLD, &root(), 50),
            [false, false, false]
        );
    }

    #[test]
    fn depth_is_bounded() {
        // root -> 2, then 2 -> 2 repeatedly.
        let mut chain =
            vec![issue_grant(&key(1), WORLD, fields(2, GrantKind::Read, &[], 100), None).unwrap()];
        while chain.len() < MAX_CHAIN_DEPTH + 1 {
            let parent = chain.last().unwrap().clone();
            chain.push(
                issue_grant(
                    &key(2),
                    WORLD,
                    fields(2, GrantKind::Read, &[], 100),
                    Some(&parent),
                )
                .unwrap(),
            );
        }
        let valid = valid_grants(&chain, WORLD, &root(), 50);
        assert!(valid[..MAX_CHAIN_DEPTH].iter().all(|v| *v));
        assert!(!valid[MAX_CHAIN_DEPTH]);
    }

    #[test]
    fn digest_covers_the_signature() {
        let g = issue_grant(&key(1), WORLD, fields(2, GrantKind::Read, &[], 100), None).unwrap();
        let mut h = g.clone();
        h.signature[0] ^= 1;
        assert_ne!(g.digest(), h.digest());
        assert!(g.digest().starts_with("sha256:") && g.digest().len() == 7 + 64);
    }
}
