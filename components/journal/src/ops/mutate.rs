//! `create` and `append`, each deciding its receipt check, precondition,
//! writes and receipt against the store's live state in one step: `create`
//! in one write transaction, `append` as one sequenced batch, prepared
//! whole before it reaches the store, which fills in its positions from the
//! space's head ("Key-value store" 10 in `docs/design.md`). An `append`
//! hands the host the batch with its answer to each outcome and returns;
//! the host answers once the outcome is durable ("Request lifecycle" 8).
//!
//! Receipts: the scope is (space, kind, operation ID); the root is implied,
//! a store has one. The normalized request is hashed: for `create` the
//! parent, key and effective precondition; for `append` the space, the facts
//! in order and the effective precondition (absent and null are one value,
//! an explicit integer another). A replay answers the stored result with
//! `replayed: true`, before any precondition is evaluated.
//!
//! A commit that advanced a journal is announced to the host (`advances`;
//! for an `append`, by the host itself) once it is durable, and only when
//! something listens; a replay or a refusal advanced nothing and announces
//! nothing.

use super::{entry_ref_json, existing_space, space_json, space_ref_json, Answer, Encoded};
use crate::ids::SpaceId;
use crate::page_json;
use crate::refusal::Refusal;
use crate::requests::{AppendRequest, CreateRequest, MAX_POSITION};
use crate::store::{
    self, ArgumentIndex, FactIndex, Origin, Receipt, ReceiptKind, SpaceRecord, Writes,
};
use lab_guest::lab::platform::kv::{AnswerNumber, BatchAnswers, GuardedAnswer, OutcomeAnswer};
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
        return Err(different_request());
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
    store::AppendBatch {
        space,
        operation_id: &request.operation_id,
        facts: &request.facts,
        indexes: &indexes,
        digest,
        expected_cutoff: request.expected_cutoff,
        max_position: MAX_POSITION,
    }
    .submit(
        &append_answers(&identity, space, count, &digest, request.expected_cutoff),
        &advances::Advance {
            root_id: identity.root.to_string(),
            space_id: space.to_string(),
            path: record.path,
            cutoff: 0,
        },
    )?;
    Ok(super::LEFT_TO_THE_BATCH)
}

/// The answer to each outcome an append's batch may meet, as the host
/// fills them in: what the instance would answer itself, from its page
/// and refusal renderers, had it waited for the outcome.
fn append_answers(
    identity: &store::Identity,
    space: SpaceId,
    count: u64,
    digest: &[u8; 32],
    expected_cutoff: Option<u64>,
) -> BatchAnswers {
    let fixed = |(status, body): (u16, &str)| OutcomeAnswer {
        status,
        body: body.as_bytes().to_vec(),
        numbers: Vec::new(),
    };
    let number = |at: usize, read_at: Option<u32>, addend: u64| AnswerNumber {
        at: at as u32,
        read_at,
        addend,
    };
    let (body, at) = page_json::appended_template(identity.root, space, false);
    let applied = OutcomeAnswer {
        status: 201,
        body,
        numbers: vec![
            number(at.cutoff, None, count),
            number(at.first, None, 1),
            number(at.last, None, count),
        ],
    };
    let (prefix, first_at, last_at) = store::positions_receipt(digest);
    let (body, at) = page_json::appended_template(identity.root, space, true);
    let replayed = OutcomeAnswer {
        status: 200,
        body,
        numbers: vec![
            number(at.cutoff, Some(last_at), 0),
            number(at.first, Some(first_at), 0),
            number(at.last, Some(last_at), 0),
        ],
    };
    let mismatch = match expected_cutoff {
        Some(expected) => {
            let conflict = |actual| Refusal::Conflict { expected, actual };
            let (body, at) = numbered(|actual| crate::refusal_body(&conflict(actual)));
            OutcomeAnswer {
                status: conflict(0).status(),
                body,
                numbers: at.into_iter().map(|at| number(at, None, 0)).collect(),
            }
        }
        None => fixed(NO_EXPECTED_MISMATCH),
    };
    BatchAnswers {
        applied,
        guarded: vec![
            GuardedAnswer {
                prefix,
                answer: replayed,
            },
            // A receipt with this digest and a JSON result was written
            // before batches were sequenced by the store, so it was
            // durable before any snapshot of this process: `append`
            // answered it from its snapshot.
            GuardedAnswer {
                prefix: digest.to_vec(),
                answer: fixed(SNAPSHOT_RECEIPT),
            },
            GuardedAnswer {
                prefix: Vec::new(),
                answer: fixed(DIFFERENT_REQUEST),
            },
        ],
        mismatch,
        past_ceiling: fixed(PAST_CEILING),
        no_counter: fixed(NO_HEAD),
    }
}

// The answers to the outcomes that carry no number, as `refusal_body`
// renders their refusals, written out so that an append builds none of
// them (each checked against its refusal by a test).
const NO_EXPECTED_MISMATCH: (u16, &str) = (
    500,
    r#"{"error":"internal","message":"the store answered a mismatch where no cutoff was expected"}"#,
);
const SNAPSHOT_RECEIPT: (u16, &str) = (
    500,
    r#"{"error":"internal","message":"a receipt of this request is in a form only its snapshot replays"}"#,
);
const DIFFERENT_REQUEST: (u16, &str) = (
    409,
    r#"{"error":"idempotency_mismatch","message":"this operation ID already committed a different request"}"#,
);
const PAST_CEILING: (u16, &str) = (
    413,
    r#"{"error":"limit_exceeded","message":"the batch would pass the last position"}"#,
);
const NO_HEAD: (u16, &str) = (
    500,
    r#"{"error":"internal","message":"a space without a head"}"#,
);

/// A body `render` writes with one number, and where that number goes, in
/// order: the places where a rendering with one number holds its digits
/// and a rendering with another, of as many digits, holds the other's, so
/// no other text of the body, whatever it holds, is taken for the number.
fn numbered(render: impl Fn(u64) -> Vec<u8>) -> (Vec<u8>, Vec<usize>) {
    const ONE: u64 = u64::MAX;
    const OTHER: u64 = u64::MAX - 1;
    let (one, other) = (render(ONE), render(OTHER));
    let (one_digits, other_digits) = (ONE.to_string(), OTHER.to_string());
    let width = one_digits.len();
    let mut body = Vec::with_capacity(one.len());
    let mut at = Vec::new();
    let mut from = 0;
    let mut i = 0;
    while i < one.len() {
        if one.get(i..i + width) == Some(one_digits.as_bytes())
            && other.get(i..i + width) == Some(other_digits.as_bytes())
        {
            body.extend_from_slice(&one[from..i]);
            at.push(body.len());
            i += width;
            from = i;
        } else {
            i += 1;
        }
    }
    body.extend_from_slice(&one[from..]);
    (body, at)
}

fn different_request() -> Refusal {
    Refusal::IdempotencyMismatch("this operation ID already committed a different request".into())
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ids::{InstanceId, RootId};
    use lab_guest::lab::platform::kv::BatchOutcome;

    /// The answer the instance gives itself once it knows the outcome.
    fn immediate(
        identity: &store::Identity,
        space: SpaceId,
        count: u64,
        digest: &[u8; 32],
        expected_cutoff: Option<u64>,
        outcome: &BatchOutcome,
    ) -> (u16, Vec<u8>) {
        let result = |first: u64, last: u64, replayed: bool| {
            page_json::appended(identity.root, space, first, last, replayed)
        };
        let answer = match outcome {
            BatchOutcome::Applied(before) => Ok((201, result(before + 1, before + count, false))),
            BatchOutcome::Guarded(bytes) => store::decode_receipt(bytes)
                .and_then(|receipt| replay_append(receipt, digest, result)),
            BatchOutcome::Mismatch(actual) => match expected_cutoff {
                Some(expected) => Err(Refusal::Conflict {
                    expected,
                    actual: *actual,
                }),
                None => Err(no_expected_mismatch()),
            },
            BatchOutcome::PastCeiling(_) => Err(past_ceiling()),
            BatchOutcome::NoCounter => Err(no_head()),
        };
        answer.unwrap_or_else(|refusal| (refusal.status(), crate::refusal_body(&refusal)))
    }

    /// The answer the host fills in for `outcome` (`host/src/deferred.rs`).
    fn filled(answers: &BatchAnswers, outcome: &BatchOutcome) -> (u16, Vec<u8>) {
        let (answer, base, guard) = match outcome {
            BatchOutcome::Applied(base) => (&answers.applied, Some(*base), None),
            BatchOutcome::Mismatch(base) => (&answers.mismatch, Some(*base), None),
            BatchOutcome::PastCeiling(base) => (&answers.past_ceiling, Some(*base), None),
            BatchOutcome::NoCounter => (&answers.no_counter, None, None),
            BatchOutcome::Guarded(value) => {
                let guarded = answers
                    .guarded
                    .iter()
                    .find(|g| value.starts_with(&g.prefix));
                (&guarded.expect("an answer").answer, None, Some(value))
            }
        };
        let mut body = Vec::new();
        let mut from = 0;
        for number in &answer.numbers {
            let at = number.at as usize;
            body.extend_from_slice(&answer.body[from..at]);
            from = at;
            let base = match number.read_at {
                None => base.unwrap(),
                Some(at) => {
                    let at = at as usize;
                    u64::from_be_bytes(guard.unwrap()[at..at + 8].try_into().unwrap())
                }
            };
            body.extend_from_slice((base + number.addend).to_string().as_bytes());
        }
        body.extend_from_slice(&answer.body[from..]);
        (answer.status, body)
    }

    fn receipt(digest: &[u8; 32], first: u64, last: u64) -> Vec<u8> {
        let (mut value, _, _) = store::positions_receipt(digest);
        value.extend_from_slice(&first.to_be_bytes());
        value.extend_from_slice(&last.to_be_bytes());
        value
    }

    #[test]
    fn the_host_fills_in_what_the_instance_would_answer_for_every_outcome() {
        let identity = store::Identity {
            root: RootId([0xab; 16]),
            root_space: SpaceId([1; 16]),
            instance: InstanceId([2; 16]),
            cursor_key: [3; 32],
        };
        let space = SpaceId([4; 16]);
        let digest = [7u8; 32];
        let other = [8u8; 32];
        let mut legacy = other.to_vec();
        legacy.extend_from_slice(b"{\"cutoff\":3}");
        let outcomes = [
            BatchOutcome::Applied(0),
            BatchOutcome::Applied(41),
            BatchOutcome::Applied(MAX_POSITION - 3),
            BatchOutcome::Guarded(receipt(&digest, 5, 7)),
            BatchOutcome::Guarded(receipt(&other, 5, 7)),
            BatchOutcome::Guarded(legacy),
            BatchOutcome::Mismatch(0),
            BatchOutcome::Mismatch(12_345),
            BatchOutcome::Mismatch(u64::MAX),
            BatchOutcome::PastCeiling(MAX_POSITION),
            BatchOutcome::NoCounter,
        ];
        for expected in [None, Some(0), Some(9), Some(u64::MAX), Some(u64::MAX - 1)] {
            for count in [1, 3] {
                let answers = append_answers(&identity, space, count, &digest, expected);
                for outcome in &outcomes {
                    let (status, body) = filled(&answers, outcome);
                    let (want_status, want_body) =
                        immediate(&identity, space, count, &digest, expected, outcome);
                    assert_eq!(
                        (status, String::from_utf8(body).unwrap()),
                        (want_status, String::from_utf8(want_body).unwrap()),
                        "{outcome:?}, expected {expected:?}, count {count}"
                    );
                }
            }
        }
    }

    fn no_expected_mismatch() -> Refusal {
        Refusal::Internal("the store answered a mismatch where no cutoff was expected".into())
    }

    fn past_ceiling() -> Refusal {
        Refusal::LimitExceeded("the batch would pass the last position".into())
    }

    fn no_head() -> Refusal {
        Refusal::Internal("a space without a head".into())
    }

    #[test]
    fn the_written_out_answers_are_what_their_refusals_render() {
        let snapshot_receipt = Refusal::Internal(
            "a receipt of this request is in a form only its snapshot replays".into(),
        );
        for ((status, body), refusal) in [
            (NO_EXPECTED_MISMATCH, no_expected_mismatch()),
            (SNAPSHOT_RECEIPT, snapshot_receipt),
            (DIFFERENT_REQUEST, different_request()),
            (PAST_CEILING, past_ceiling()),
            (NO_HEAD, no_head()),
        ] {
            assert_eq!(
                (status, body),
                (
                    refusal.status(),
                    std::str::from_utf8(&crate::refusal_body(&refusal)).unwrap()
                )
            );
        }
    }

    #[test]
    fn a_numbered_body_finds_its_number_and_nothing_else() {
        let render = |n: u64| format!("[{},{n},{n}]", u64::MAX).into_bytes();
        let (body, at) = numbered(render);
        assert_eq!(body, format!("[{},,]", u64::MAX).into_bytes());
        assert_eq!(at, vec![22, 23]);
    }
}
