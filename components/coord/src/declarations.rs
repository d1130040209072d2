//! The declaration index: per declarations journal, the rows
//! `assertion_id -> (position, envelope)`, `subject -> positions`,
//! `envelope or frame hash -> position` and `indexed_through`, kept in the
//! service's key-value store.
//!
//! Invariants: every row is derived from the journal (a `declaration`
//! fact and the envelope it names), so the index can always be rebuilt;
//! rows are never removed, and two catch-ups of one journal write the same
//! rows. Every lookup catches up first, so it sees every declaration the
//! journal held when it began.

use crate::blobs;
use crate::facts::{self, Fact, Hash, Predicate};
use crate::journal::{self, Space};
use crate::refusal::Refusal;
use base64::Engine as _;
use lab_guest::lab::platform::kv;
use serde_json::{json, Value};
use sha2::{Digest, Sha256};

const TABLE: &str = "declarations";
/// Greatest envelope read while catching up: a 16 MiB body is carried
/// twice over (base64 in the admission, its statement in the request).
pub const MAX_ENVELOPE: usize = 64 << 20;
/// Rows read from the store per scan.
const SCAN_PAGE: u32 = 256;

/// One indexed declaration.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Indexed {
    /// Its position in the declarations journal.
    pub position: u64,
    /// The hash of its envelope (DeclarationRecord).
    pub envelope: Hash,
}

/// The key prefix of one journal's rows.
fn prefix(space: &Space, kind: &str) -> Vec<u8> {
    format!("{kind}/{}/{}/", space.root_id, space.space_id).into_bytes()
}

fn key(space: &Space, kind: &str, rest: &str) -> Vec<u8> {
    let mut key = prefix(space, kind);
    key.extend_from_slice(rest.as_bytes());
    key
}

fn subject_key(space: &Space, subject: &str, position: Option<u64>) -> Vec<u8> {
    let digest = lab_kit::hex::encode_lower(&Sha256::digest(subject.as_bytes()));
    let mut key = key(space, "subject", &digest);
    key.push(b'/');
    if let Some(position) = position {
        key.extend_from_slice(&position.to_be_bytes());
    }
    key
}

fn indexed_through(space: &Space) -> Result<u64, Refusal> {
    let stored = kv::begin_read().and_then(|t| t.get(TABLE, &key(space, "through", "")))?;
    Ok(stored
        .and_then(|v| v.try_into().ok())
        .map_or(0, u64::from_be_bytes))
}

/// Reads the journal's `declaration` facts after `indexed_through` (every
/// page, through the head it finds), reads each new envelope for its frame, and
/// writes their rows and the new `indexed_through` in one commit.
pub fn catch_up(space: &Space) -> Result<(), Refusal> {
    let b64 = base64::engine::general_purpose::STANDARD;
    let from = indexed_through(space)?;
    let head = journal::head(space).map_err(|e| e.into_refusal("journal"))?;
    if head <= from {
        return Ok(());
    }
    let filter = json!({ "predicate": Predicate::Declaration.filter_base64(), "origin": "append" });
    let mut writes = Vec::new();
    let mut row = |key: Vec<u8>, value: Vec<u8>| {
        writes.push(kv::TableWrite {
            table: TABLE.into(),
            key,
            value,
        })
    };
    let mut after = from;
    let through = head;
    loop {
        let page = journal::read(space, after, Some(through), 128, Some(filter.clone()))
            .map_err(|e| e.into_refusal("journal"))?;
        for entry in page["entries"].as_array().into_iter().flatten() {
            let position = entry["ref"]["position"].as_u64();
            let fact = entry["fact"].as_str().and_then(|f| b64.decode(f).ok());
            let (Some(position), Some(Ok(Some(Fact::Declaration(declaration))))) =
                (position, fact.as_deref().map(facts::decode))
            else {
                return Err(Refusal::Unavailable(
                    "a declaration of the journal is unreadable".into(),
                ));
            };
            let frame = summary(&declaration.envelope)?.frame;
            let at = position.to_be_bytes().to_vec();
            let located =
                json!({ "position": position, "envelope": declaration.envelope.to_string() });
            row(
                key(space, "assertion", &declaration.assertion_id),
                located.to_string().into_bytes(),
            );
            if let Some(subject) = &declaration.subject {
                row(subject_key(space, subject, Some(position)), Vec::new());
            }
            row(
                key(space, "named", &declaration.envelope.to_string()),
                at.clone(),
            );
            row(key(space, "named", &frame.to_string()), at);
        }
        match page["next_after"].as_u64() {
            Some(next) if next > after && next < through => after = next,
            Some(next) if next > after => break,
            Some(_) => return Err(Refusal::Unavailable("a read page did not advance".into())),
            None => break,
        }
    }
    let txn = kv::begin_write()?;
    let stored = txn
        .get(TABLE, &key(space, "through", ""))?
        .and_then(|v| v.try_into().ok())
        .map_or(0, u64::from_be_bytes);
    if stored >= through && writes.is_empty() {
        txn.abort();
        return Ok(());
    }
    writes.push(kv::TableWrite {
        table: TABLE.into(),
        key: key(space, "through", ""),
        value: stored.max(through).to_be_bytes().to_vec(),
    });
    txn.commit_with(&writes)?;
    Ok(())
}

fn envelope_bytes(hash: &Hash) -> Result<Vec<u8>, Refusal> {
    blobs::get_small(&hash.to_string(), MAX_ENVELOPE)
        .map_err(|e| e.into_refusal("bytes"))?
        .ok_or_else(|| Refusal::Unavailable("a declaration's envelope is not retained".into()))
}

/// A retained envelope (DeclarationRecord) as JSON.
pub fn envelope(hash: &Hash) -> Result<Value, Refusal> {
    serde_json::from_slice(&envelope_bytes(hash)?)
        .map_err(|_| Refusal::Unavailable("a declaration's envelope is not JSON".into()))
}

/// What replay and the index need of an envelope.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Summary {
    pub request_digest: Hash,
    /// The hash of its frame (`admission.frame`).
    pub frame: Hash,
}

/// The request digest and frame of a retained envelope, read from its
/// bytes without building its tree (it may carry a 16 MiB body twice).
pub fn summary(hash: &Hash) -> Result<Summary, Refusal> {
    let bytes = envelope_bytes(hash)?;
    let unreadable = || Refusal::Unavailable("a declaration's envelope is unreadable".into());
    let member = |object: &[u8], wanted: &str| -> Result<Option<Hash>, Refusal> {
        let mut found = None;
        lab_strict_json::object_members(object, &mut |name, span| {
            if name == wanted {
                found = Some(span);
            }
        })
        .map_err(|_| unreadable())?;
        Ok(found
            .and_then(|span| serde_json::from_slice::<String>(&object[span]).ok())
            .and_then(|t| Hash::parse(&t)))
    };
    let mut admission = None;
    lab_strict_json::object_members(&bytes, &mut |name, span| {
        if name == "admission" {
            admission = Some(span);
        }
    })
    .map_err(|_| unreadable())?;
    let admission = &bytes[admission.ok_or_else(unreadable)?];
    match (
        member(&bytes, "request_digest")?,
        member(admission, "frame")?,
    ) {
        (Some(request_digest), Some(frame)) => Ok(Summary {
            request_digest,
            frame,
        }),
        _ => Err(unreadable()),
    }
}

/// The declaration of `assertion_id` in the declarations journal `space`.
pub fn find(space: &Space, assertion_id: &str) -> Result<Option<Indexed>, Refusal> {
    catch_up(space)?;
    let stored =
        kv::begin_read().and_then(|t| t.get(TABLE, &key(space, "assertion", assertion_id)))?;
    let Some(stored) = stored else {
        return Ok(None);
    };
    let located: Value = serde_json::from_slice(&stored)
        .map_err(|_| Refusal::Unavailable("an index row is unreadable".into()))?;
    match (
        located["position"].as_u64(),
        located["envelope"].as_str().and_then(Hash::parse),
    ) {
        (Some(position), Some(envelope)) => Ok(Some(Indexed { position, envelope })),
        _ => Err(Refusal::Unavailable("an index row is unreadable".into())),
    }
}

/// The positions of the declarations about `subject` in `space`, ascending.
pub fn by_subject(space: &Space, subject: &str) -> Result<Vec<u64>, Refusal> {
    catch_up(space)?;
    let start = subject_key(space, subject, None);
    let mut end = start.clone();
    *end.last_mut().expect("a subject key ends with `/`") += 1;
    let mut positions = Vec::new();
    let mut from = start.clone();
    loop {
        let rows = kv::begin_read().and_then(|t| {
            t.scan(
                TABLE,
                &kv::Range {
                    start: from.clone(),
                    end: Some(end.clone()),
                    reverse: false,
                    limit: SCAN_PAGE,
                },
            )
        })?;
        let full = rows.len() == SCAN_PAGE as usize;
        for row in &rows {
            let tail: [u8; 8] = row.key[start.len()..]
                .try_into()
                .map_err(|_| Refusal::Unavailable("an index row is unreadable".into()))?;
            positions.push(u64::from_be_bytes(tail));
        }
        match rows.last() {
            Some(last) if full => {
                from = last.key.clone();
                from.push(0);
            }
            _ => return Ok(positions),
        }
    }
}

/// Whether a `declaration` fact of `space` names `hash` as its envelope,
/// or names an envelope whose frame it is.
pub fn names(space: &Space, hash: &Hash) -> Result<bool, Refusal> {
    catch_up(space)?;
    let stored =
        kv::begin_read().and_then(|t| t.get(TABLE, &key(space, "named", &hash.to_string())))?;
    Ok(stored.is_some())
}
