//! `create` and `append`, each deciding its receipt check, precondition,
//! writes and receipt against the store's live state in one step: `create`
//! in one write transaction, `append` as one sequenced batch, prepared
//! whole before it reaches the store, which fills in its positions from the
//! space's head ("Key-value store" 10 in `docs/design.md`).
//!
//! Receipts: the scope is (space, kind, operation ID); the root is implied,
//! a store has one. The normalized request is hashed: for `create` the
//! parent, key and effective precondition; for `append` the space, the facts
//! in order and the effective precondition (absent and null are one value,
//! an explicit integer another). A replay answers the stored result with
//! `replayed: true`, before any precondition is evaluated.
//!
//! A commit that advanced a journal is announced to the host (`advances`)
//! once it is durable, and only when something listens; a replay or a
//! refusal advanced nothing and announces nothing.

use super::{entry_ref_json, existing_space, space_json, space_ref_json, Answer, Encoded};
use crate::ids::SpaceId;
use crate::page_json;
use crate::refusal::Refusal;
use crate::requests::{AppendRequest, CreateRequest, MAX_POSITION};
use crate::store::{
    self, ArgumentIndex, FactIndex, Origin, Receipt, ReceiptKind, SpaceRecord, Writes,
};
use lab_guest::lab::platform::kv::BatchOutcome;
use lab_guest::lab::platform::{advances, ids};
use serde_json::{json, Value};
use sha2::{Digest, Sha256};

fn request_digest(normalized: &Value) -> [u8; 32] {
    // serde_json's map keeps members sorted, so the bytes are canonical.
    Sha256::digest(serde_json::to_vec(normalized).expect("JSON serializes")).into()
}

/// The stored result again, or a mismatch.
fn replay(receipt: Receipt, digest: &[u8; 32]) -> Answer {
    if receipt.request_digest != *digest {
        return Err(Refusal::IdempotencyMismatch(
            "this operation ID already committed a different request".into(),
        ));
    }
    let mut result: Value = serde_json::from_slice(&receipt.result)
        .map_err(|_| Refusal::Internal("a stored receipt is malformed".into()))?;
    result["replayed"] = Value::Bool(true);
    Ok((200, result))
}

fn check_expected(expected: Option<u64>, actual: u64) -> Result<(), Refusal> {
    match expected {
        Some(expected) if expected != actual => Err(Refusal::Conflict { expected, actual }),
        _ => Ok(()),
    }
}

fn fresh_space_id() -> SpaceId {
    let bytes = ids::random_bytes(16);
    SpaceId(bytes.try_into().expect("16 random octets"))
}

pub fn create(request: CreateRequest) -> Answer {
    let normalized = json!({
        "parent": space_ref_json(request.parent.root, request.parent.space),
        "key": request.key,
        "expected_cutoff": request.expected_cutoff,
    });
    let digest = request_digest(&normalized);
    // Identity, argument index and space records never change once
    // written: a snapshot answers them without holding the store's writer.
    let (identity, declared, parent) = {
        let snapshot = store::read_create(request.parent.space)?;
        let (identity, declared) = provisioned(&snapshot)?;
        let parent = existing_space(&snapshot, &identity, &request.parent)?;
        (identity, declared, parent)
    };
    let txn = store::write()?;
    let decided = decide_create(&txn, &request, (&identity, &declared), parent, digest);
    finish(&txn, &identity, decided)
}

/// The journal a commit advanced: the space, its path and its new cutoff.
struct Advanced {
    space: SpaceId,
    path: Vec<String>,
    cutoff: u64,
}

/// What a mutation's transaction decided.
enum Decided {
    /// Write these, answer this result (201) and announce the advance.
    Commit(Writes, Value, Advanced),
    /// Answer without writing (a replay).
    Settled(Answer),
}

/// Commits the decision. A transaction that wrote nothing still commits
/// before its answer leaves: what it read may be another request's writes
/// in the same group, not yet durable, and a replay, a refusal or a
/// mismatch must never be answered from state a crash could still undo.
fn finish(
    txn: &store::WriteTxn,
    identity: &store::Identity,
    decided: Result<Decided, Refusal>,
) -> Answer {
    match decided {
        Ok(Decided::Commit(writes, result, advanced)) => {
            writes.commit(txn)?;
            announce(identity, advanced);
            Ok((201, result))
        }
        Ok(Decided::Settled(answer)) => {
            store::settle(txn)?;
            answer
        }
        Err(refusal) => {
            store::settle(txn)?;
            Err(refusal)
        }
    }
}

/// Tells the host a durable commit advanced a journal, when anything
/// listens (a subscription of this process, a follower of the advance
/// stream); the host never makes the commit wait for a listener.
fn announce(identity: &store::Identity, advanced: Advanced) {
    if !advances::listening() {
        return;
    }
    advances::announce(&[advances::Advance {
        root_id: identity.root.to_string(),
        space_id: advanced.space.to_string(),
        path: advanced.path,
        cutoff: advanced.cutoff,
    }]);
}

/// The store's identity and declared argument index, read together.
fn provisioned(snapshot: &impl store::Reads) -> Result<(store::Identity, ArgumentIndex), Refusal> {
    match store::identity_and_argument_index(snapshot)? {
        (Some(identity), declared) => Ok((identity, declared)),
        (None, _) => Err(Refusal::Unavailable(
            "the hierarchy is not provisioned".into(),
        )),
    }
}

fn decide_create(
    txn: &store::WriteTxn,
    request: &CreateRequest,
    (identity, declared): (&store::Identity, &ArgumentIndex),
    parent: SpaceRecord,
    digest: [u8; 32],
) -> Result<Decided, Refusal> {
    let parent_id = request.parent.space;
    let state = store::mutation_state(
        txn,
        parent_id,
        ReceiptKind::Create,
        &request.operation_id,
        Some(&request.key),
    )?;
    if let Some(receipt) = state.receipt {
        return Ok(Decided::Settled(replay(receipt, &digest)));
    }
    let parent_cutoff = state
        .head
        .ok_or_else(|| Refusal::Internal("a space without a head".into()))?;
    check_expected(request.expected_cutoff, parent_cutoff)?;
    if state.child.is_some() {
        return Err(Refusal::Exists(format!(
            "the key {:?} is taken under this parent",
            request.key
        )));
    }
    let position = parent_cutoff + 1;
    if position > MAX_POSITION {
        return Err(Refusal::LimitExceeded(
            "the parent's journal is full".into(),
        ));
    }
    let child = fresh_space_id();
    let advanced = Advanced {
        space: parent_id,
        path: parent.path.clone(),
        cutoff: position,
    };
    let mut path = parent.path;
    path.push(request.key.clone());
    let fact = lab_values::creation_fact(&request.key, &child.to_string());

    let mut writes = Writes::default();
    writes.entry(
        parent_id,
        position,
        (Origin::Create, position, position),
        &fact,
        &FactIndex::of(&fact, declared)?,
    );
    writes.head(parent_id, position);
    writes.space(
        child,
        &SpaceRecord {
            parent: Some(parent_id),
            created_at: position,
            path: path.clone(),
        },
    );
    writes.head(child, 0);
    writes.child(parent_id, &request.key, position, child);
    let result = json!({
        "child": space_json(identity.root, child, &path),
        "parent_entry": entry_ref_json(identity.root, parent_id, position),
        "parent_cutoff": position,
        "replayed": false,
    });
    let receipt = Receipt {
        request_digest: digest,
        result: serde_json::to_vec(&result).expect("JSON serializes"),
    };
    writes.receipt(
        parent_id,
        ReceiptKind::Create,
        &request.operation_id,
        &receipt,
    );
    Ok(Decided::Commit(writes, result, advanced))
}

pub fn append(request: AppendRequest) -> Encoded {
    let digest: [u8; 32] = Sha256::digest(page_json::append_request(
        request.space.root,
        request.space.space,
        &request.facts,
        request.expected_cutoff,
    ))
    .into();
    let space = request.space.space;
    let (identity, declared, record, durable_receipt) = {
        let snapshot = store::read_append(space, &request.operation_id)?;
        let (identity, declared) = provisioned(&snapshot)?;
        let record = existing_space(&snapshot, &identity, &request.space)?;
        let receipt = store::receipt(&snapshot, space, ReceiptKind::Append, &request.operation_id)?;
        (identity, declared, record, receipt)
    };
    let result = |first: u64, last: u64, replayed: bool| {
        page_json::appended(identity.root, space, first, last, replayed)
    };
    // A snapshot sees durable commits only: a receipt found there is
    // answered without the store's writer.
    if let Some(receipt) = durable_receipt {
        return replay_append(receipt, &digest, result);
    }
    let count = request.facts.len() as u64;
    let indexes = request
        .facts
        .iter()
        .map(|fact| FactIndex::of(fact, &declared))
        .collect::<Result<Vec<_>, _>>()?;
    let outcome = store::AppendBatch {
        space,
        operation_id: &request.operation_id,
        facts: &request.facts,
        indexes: &indexes,
        digest,
        expected_cutoff: request.expected_cutoff,
        max_position: MAX_POSITION,
    }
    .apply()?;
    match outcome {
        BatchOutcome::Applied(before) => {
            let (first, last) = (before + 1, before + count);
            announce(
                &identity,
                Advanced {
                    space,
                    path: record.path,
                    cutoff: last,
                },
            );
            Ok((201, result(first, last, false)))
        }
        BatchOutcome::Guarded(bytes) => {
            replay_append(store::decode_receipt(&bytes)?, &digest, result)
        }
        BatchOutcome::Mismatch(actual) => match request.expected_cutoff {
            Some(expected) => Err(Refusal::Conflict { expected, actual }),
            None => Err(Refusal::Internal(
                "the store answered a mismatch where no cutoff was expected".into(),
            )),
        },
        BatchOutcome::PastCeiling(_) => Err(Refusal::LimitExceeded(
            "the batch would pass the last position".into(),
        )),
        BatchOutcome::NoCounter => Err(Refusal::Internal("a space without a head".into())),
    }
}

/// An append's stored result again, or a mismatch. Receipts hold the
/// batch's positions (the store filled them in), or, written before
/// batches were sequenced by the store, the JSON result itself.
fn replay_append(
    receipt: Receipt,
    digest: &[u8; 32],
    result: impl FnOnce(u64, u64, bool) -> Vec<u8>,
) -> Encoded {
    let stored = |receipt: Receipt| replay(receipt, digest).map(crate::encode);
    match store::receipt_positions(&receipt) {
        None => stored(receipt),
        Some(_) if receipt.request_digest != *digest => stored(receipt),
        Some(positions) => {
            let (first, last) = positions?;
            Ok((200, result(first, last, true)))
        }
    }
}

/// Provisions the hierarchy on the first start: root, root space, instance,
/// the cursor secret and the declared argument index, in one commit. Later
/// starts change nothing: a store keeps the argument index it was
/// provisioned with (none, for a store provisioned before it existed), so
/// every declared pair's rows are complete from its first entry.
pub fn provision(declared: &ArgumentIndex) -> Result<(), Refusal> {
    let txn = store::write()?;
    if store::identity(&txn)?.is_some() {
        txn.abort();
        return Ok(());
    }
    let random16 = || -> [u8; 16] { ids::random_bytes(16).try_into().expect("16 random octets") };
    let identity = store::Identity {
        root: crate::ids::RootId(random16()),
        root_space: SpaceId(random16()),
        instance: crate::ids::InstanceId(random16()),
        cursor_key: ids::random_bytes(32).try_into().expect("32 random octets"),
    };
    let mut writes = Writes::default();
    writes.identity(&identity);
    writes.space(
        identity.root_space,
        &SpaceRecord {
            parent: None,
            created_at: 0,
            path: Vec::new(),
        },
    );
    writes.head(identity.root_space, 0);
    writes.argument_index(declared);
    writes.commit(&txn)
}
