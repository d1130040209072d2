//! The journal's storage layout over the host's key-value store; see
//! `docs/journal.md`. Integers are big-endian so key order is numeric order.

pub use crate::declared::ArgumentIndex;
pub use crate::filter::Origin;
use crate::ids::{InstanceId, RootId, SpaceId};
use crate::refusal::Refusal;
use lab_guest::lab::platform::advances::Advance;
use lab_guest::lab::platform::kv::{
    self, BatchAnswers, CounterSlot, Entry, KvError, Range, SequencedBatch, SequencedWrite,
    TableKey, TableWrite,
};
use sha2::{Digest, Sha256};

const META: &str = "meta";
const SPACE: &str = "space";
const HEAD: &str = "head";
const ENTRY: &str = "entry";
const CHILD: &str = "child";
const CREATED: &str = "created";
const PREDICATE: &str = "predicate";
const ARGUMENT: &str = "argument";
const RECEIPT: &str = "receipt";

/// The `meta` key of the store's declared argument index, written when the
/// store is provisioned and never changed; absent in a store provisioned
/// before it, which declares none (`docs/journal.md`, "Storage layout").
const ARGUMENT_INDEX: &[u8] = b"argument-index";
const IDENTITY: &[u8] = b"identity";

/// Who this store is: provisioned once, kept for ever.
#[derive(Debug, Clone, Copy)]
pub struct Identity {
    pub root: RootId,
    pub root_space: SpaceId,
    pub instance: InstanceId,
    /// The secret cursors are sealed under.
    pub cursor_key: [u8; 32],
}

/// A space's place in the tree.
#[derive(Debug, Clone)]
pub struct SpaceRecord {
    /// None for the root.
    pub parent: Option<SpaceId>,
    /// The position of its creation entry in the parent (0 for the root).
    pub created_at: u64,
    pub path: Vec<String>,
}

/// One committed entry.
#[derive(Debug, Clone)]
pub struct EntryRecord {
    pub origin: Origin,
    pub first: u64,
    pub last: u64,
    pub fact: Vec<u8>,
}

/// A stored receipt: the digest of the normalized request and the result.
#[derive(Debug, Clone)]
pub struct Receipt {
    pub request_digest: [u8; 32],
    pub result: Vec<u8>,
}

/// Receipt scopes: the operation kind inside the space's scope.
#[derive(Debug, Clone, Copy)]
pub enum ReceiptKind {
    Create,
    Append,
}

fn unavailable(e: KvError) -> Refusal {
    no_room(e)
        .unwrap_or_else(|e| Refusal::Unavailable(format!("the store cannot be read now: {e:?}")))
}

/// The store had no room for a write (its map at the ceiling, or the disk
/// full): nothing was written, and the host's message says what is short.
fn no_room(e: KvError) -> Result<Refusal, KvError> {
    match e {
        KvError::Unavailable(why) => Ok(Refusal::Unavailable(why)),
        e => Err(e),
    }
}

fn corrupt(what: &str) -> Refusal {
    Refusal::Internal(format!("a stored {what} record is malformed"))
}

/// Reads, in a read or in a write transaction.
pub trait Reads {
    fn get(&self, table: &str, key: &[u8]) -> Result<Option<Vec<u8>>, Refusal>;
    /// The values of `keys`, in order, in one exchange with the store.
    fn get_all(&self, keys: &[TableKey]) -> Result<Vec<Option<Vec<u8>>>, Refusal>;
    fn scan(&self, table: &str, range: &Range) -> Result<Vec<Entry>, Refusal>;
}

impl Reads for kv::ReadTxn {
    fn get(&self, table: &str, key: &[u8]) -> Result<Option<Vec<u8>>, Refusal> {
        kv::ReadTxn::get(self, table, key).map_err(unavailable)
    }

    fn get_all(&self, keys: &[TableKey]) -> Result<Vec<Option<Vec<u8>>>, Refusal> {
        kv::ReadTxn::get_all(self, keys).map_err(unavailable)
    }

    fn scan(&self, table: &str, range: &Range) -> Result<Vec<Entry>, Refusal> {
        kv::ReadTxn::scan(self, table, range).map_err(unavailable)
    }
}

impl Reads for kv::WriteTxn {
    fn get(&self, table: &str, key: &[u8]) -> Result<Option<Vec<u8>>, Refusal> {
        kv::WriteTxn::get(self, table, key).map_err(unavailable)
    }

    fn get_all(&self, keys: &[TableKey]) -> Result<Vec<Option<Vec<u8>>>, Refusal> {
        kv::WriteTxn::get_all(self, keys).map_err(unavailable)
    }

    fn scan(&self, table: &str, range: &Range) -> Result<Vec<Entry>, Refusal> {
        kv::WriteTxn::scan(self, table, range).map_err(unavailable)
    }
}

/// A snapshot for reading.
pub fn read() -> Result<kv::ReadTxn, Refusal> {
    kv::begin_read().map_err(unavailable)
}

fn table_key(table: &str, key: impl Into<Vec<u8>>) -> TableKey {
    TableKey {
        table: table.into(),
        key: key.into(),
    }
}

/// `keys` read from one snapshot in one exchange with the store.
fn fetch(keys: Vec<TableKey>) -> Result<crate::fetched::Fetched, Refusal> {
    let values = kv::read_all(&keys).map_err(unavailable)?;
    crate::fetched::Fetched::new(keys, values)
}

/// What [`identity`] and [`head`] of `space` read.
pub fn read_head(space: SpaceId) -> Result<crate::fetched::Fetched, Refusal> {
    fetch(vec![table_key(META, IDENTITY), table_key(HEAD, space.0)])
}

/// What a create under `parent` decides against before it writes:
/// [`identity_and_argument_index`] and [`space`] of `parent`.
pub fn read_create(parent: SpaceId) -> Result<crate::fetched::Fetched, Refusal> {
    fetch(mutation_keys(parent).to_vec())
}

/// What an append to `space` decides against before it is sequenced: those
/// of [`read_create`] and the append [`receipt`] for `operation_id`.
pub fn read_append(space: SpaceId, operation_id: &str) -> Result<crate::fetched::Fetched, Refusal> {
    let mut keys = mutation_keys(space).to_vec();
    keys.push(table_key(
        RECEIPT,
        receipt_key(space, ReceiptKind::Append, operation_id),
    ));
    fetch(keys)
}

fn mutation_keys(space: SpaceId) -> [TableKey; 3] {
    [
        table_key(META, IDENTITY),
        table_key(META, ARGUMENT_INDEX),
        table_key(SPACE, space.0),
    ]
}

/// A write transaction; see [`Writes`].
pub fn write() -> Result<kv::WriteTxn, Refusal> {
    kv::begin_write().map_err(unavailable)
}

/// The store's write transaction.
pub type WriteTxn = kv::WriteTxn;

/// Ends a transaction that writes nothing once everything it read is
/// durable: its reads may have seen writes of its commit group that are
/// not committed yet.
pub fn settle(txn: &kv::WriteTxn) -> Result<(), Refusal> {
    txn.commit().map_err(|e| {
        Refusal::Unavailable(format!("the store could not confirm what it read: {e:?}"))
    })
}

fn concat(parts: &[&[u8]]) -> Vec<u8> {
    parts.concat()
}

fn u64_at(bytes: &[u8], at: usize) -> Option<u64> {
    Some(u64::from_be_bytes(bytes.get(at..at + 8)?.try_into().ok()?))
}

fn id_at(bytes: &[u8], at: usize) -> Option<[u8; 16]> {
    bytes.get(at..at + 16)?.try_into().ok()
}

/// The store's declared argument index.
pub fn argument_index(r: &impl Reads) -> Result<ArgumentIndex, Refusal> {
    decode_argument_index(r.get(META, ARGUMENT_INDEX)?)
}

fn decode_argument_index(bytes: Option<Vec<u8>>) -> Result<ArgumentIndex, Refusal> {
    match bytes {
        None => Ok(ArgumentIndex::default()),
        Some(bytes) => ArgumentIndex::decode(&bytes).ok_or_else(|| corrupt("argument index")),
    }
}

pub fn identity(r: &impl Reads) -> Result<Option<Identity>, Refusal> {
    decode_identity(r.get(META, IDENTITY)?)
}

/// The identity and the declared argument index, in one exchange with the
/// store: what a write path reads before it prepares its entries.
pub fn identity_and_argument_index(
    r: &impl Reads,
) -> Result<(Option<Identity>, ArgumentIndex), Refusal> {
    let keys = [IDENTITY, ARGUMENT_INDEX].map(|key| table_key(META, key));
    let [identity, argument_index]: [Option<Vec<u8>>; 2] = r
        .get_all(&keys)?
        .try_into()
        .map_err(|_| Refusal::Internal("the store answered a read of two keys oddly".into()))?;
    Ok((
        decode_identity(identity)?,
        decode_argument_index(argument_index)?,
    ))
}

fn decode_identity(bytes: Option<Vec<u8>>) -> Result<Option<Identity>, Refusal> {
    let Some(bytes) = bytes else {
        return Ok(None);
    };
    let parse = || {
        Some(Identity {
            root: RootId(id_at(&bytes, 0)?),
            root_space: SpaceId(id_at(&bytes, 16)?),
            instance: InstanceId(id_at(&bytes, 32)?),
            cursor_key: bytes.get(48..80)?.try_into().ok()?,
        })
    };
    parse().map(Some).ok_or_else(|| corrupt("identity"))
}

pub fn space(r: &impl Reads, id: SpaceId) -> Result<Option<SpaceRecord>, Refusal> {
    let Some(bytes) = r.get(SPACE, &id.0)? else {
        return Ok(None);
    };
    decode_space(&bytes)
        .map(Some)
        .ok_or_else(|| corrupt("space"))
}

fn decode_space(bytes: &[u8]) -> Option<SpaceRecord> {
    let parent = id_at(bytes, 0)?;
    let created_at = u64_at(bytes, 16)?;
    let mut rest = bytes.get(24..)?;
    let mut path = Vec::new();
    while !rest.is_empty() {
        let len = usize::from(u16::from_be_bytes(rest.get(..2)?.try_into().ok()?));
        path.push(String::from_utf8(rest.get(2..2 + len)?.to_vec()).ok()?);
        rest = &rest[2 + len..];
    }
    Some(SpaceRecord {
        parent: (parent != [0; 16]).then_some(SpaceId(parent)),
        created_at,
        path,
    })
}

fn encode_space(record: &SpaceRecord) -> Vec<u8> {
    let mut bytes = record.parent.map_or([0; 16], |p| p.0).to_vec();
    bytes.extend_from_slice(&record.created_at.to_be_bytes());
    for key in &record.path {
        bytes.extend_from_slice(&(key.len() as u16).to_be_bytes());
        bytes.extend_from_slice(key.as_bytes());
    }
    bytes
}

/// The space's cutoff; none when the space does not exist.
pub fn head(r: &impl Reads, id: SpaceId) -> Result<Option<u64>, Refusal> {
    match r.get(HEAD, &id.0)? {
        None => Ok(None),
        Some(bytes) => u64_at(&bytes, 0).map(Some).ok_or_else(|| corrupt("head")),
    }
}

pub fn entry(
    r: &impl Reads,
    space: SpaceId,
    position: u64,
) -> Result<Option<EntryRecord>, Refusal> {
    match r.get(ENTRY, &concat(&[&space.0, &position.to_be_bytes()]))? {
        None => Ok(None),
        Some(bytes) => decode_entry(bytes)
            .map(Some)
            .ok_or_else(|| corrupt("entry")),
    }
}

/// The stored value `origin ‖ first ‖ last ‖ fact`, its buffer kept as the
/// fact's.
fn decode_entry(mut bytes: Vec<u8>) -> Option<EntryRecord> {
    let origin = match bytes.first()? {
        0 => Origin::Append,
        1 => Origin::Create,
        _ => return None,
    };
    let first = u64_at(&bytes, ENTRY_FIRST_AT)?;
    let last = u64_at(&bytes, ENTRY_LAST_AT)?;
    bytes.drain(..17);
    Some(EntryRecord {
        origin,
        first,
        last,
        fact: bytes,
    })
}

fn encode_entry(origin: Origin, first: u64, last: u64, fact: &[u8]) -> Vec<u8> {
    let mut bytes = Vec::with_capacity(17 + fact.len());
    bytes.push(match origin {
        Origin::Append => 0,
        Origin::Create => 1,
    });
    bytes.extend_from_slice(&first.to_be_bytes());
    bytes.extend_from_slice(&last.to_be_bytes());
    bytes.extend_from_slice(fact);
    bytes
}

/// The entries at `positions`, in order, in one exchange with the store;
/// each must exist (an index names it).
pub fn entries_at(
    r: &impl Reads,
    space: SpaceId,
    positions: &[u64],
) -> Result<Vec<EntryRecord>, Refusal> {
    let keys: Vec<TableKey> = positions
        .iter()
        .map(|p| table_key(ENTRY, concat(&[&space.0, &p.to_be_bytes()])))
        .collect();
    r.get_all(&keys)?
        .into_iter()
        .zip(positions)
        .map(|(bytes, position)| {
            let bytes = bytes.ok_or_else(|| {
                Refusal::Internal(format!("an indexed entry at {position} is missing"))
            })?;
            decode_entry(bytes).ok_or_else(|| corrupt("entry"))
        })
        .collect()
}

/// The range of `table` keys `prefix ‖ position` for positions in
/// (after, through], at most `limit`.
fn positions(prefix: &[u8], after: u64, through: u64, limit: u32) -> Range {
    Range {
        start: concat(&[prefix, &(after + 1).to_be_bytes()]),
        end: Some(concat(&[prefix, &(through + 1).to_be_bytes()])),
        reverse: false,
        limit,
    }
}

/// Entries at positions in (after, through], in order, at most `limit`.
pub fn entries(
    r: &impl Reads,
    space: SpaceId,
    after: u64,
    through: u64,
    limit: u32,
) -> Result<Vec<(u64, EntryRecord)>, Refusal> {
    if after >= through {
        return Ok(Vec::new());
    }
    r.scan(ENTRY, &positions(&space.0, after, through, limit))?
        .into_iter()
        .map(|e| {
            let position = u64_at(&e.key, 16).ok_or_else(|| corrupt("entry key"))?;
            let record = decode_entry(e.value).ok_or_else(|| corrupt("entry"))?;
            Ok((position, record))
        })
        .collect()
}

/// The child occupying `key` under `parent`.
pub fn child(r: &impl Reads, parent: SpaceId, key: &str) -> Result<Option<SpaceId>, Refusal> {
    match r.get(CHILD, &concat(&[&parent.0, key.as_bytes()]))? {
        None => Ok(None),
        Some(bytes) => id_at(&bytes, 0)
            .map(|id| Some(SpaceId(id)))
            .ok_or_else(|| corrupt("child")),
    }
}

/// Children created at positions in (after, through] of `parent`, in
/// creation order, at most `limit`: (creation position, child).
pub fn created(
    r: &impl Reads,
    parent: SpaceId,
    after: u64,
    through: u64,
    limit: u32,
) -> Result<Vec<(u64, SpaceId)>, Refusal> {
    if after >= through {
        return Ok(Vec::new());
    }
    r.scan(CREATED, &positions(&parent.0, after, through, limit))?
        .into_iter()
        .map(|e| {
            let position = u64_at(&e.key, 16).ok_or_else(|| corrupt("creation key"))?;
            let child = id_at(&e.value, 0).ok_or_else(|| corrupt("creation"))?;
            Ok((position, SpaceId(child)))
        })
        .collect()
}

/// Positions in (after, through] whose fact has the predicate with this
/// index key, in order, at most `limit`.
pub fn predicate_positions(
    r: &impl Reads,
    space: SpaceId,
    predicate_key: &[u8; 16],
    after: u64,
    through: u64,
    limit: u32,
) -> Result<Vec<u64>, Refusal> {
    let prefix = concat(&[&space.0, predicate_key]);
    index_positions(r, PREDICATE, &prefix, after, through, limit)
}

/// The positions an index's rows under `prefix` name in (after, through],
/// in order, at most `limit`: each row's key is the prefix and a position.
fn index_positions(
    r: &impl Reads,
    table: &str,
    prefix: &[u8],
    after: u64,
    through: u64,
    limit: u32,
) -> Result<Vec<u64>, Refusal> {
    if after >= through {
        return Ok(Vec::new());
    }
    r.scan(table, &positions(prefix, after, through, limit))?
        .into_iter()
        .map(|e| u64_at(&e.key, prefix.len()).ok_or_else(|| corrupt(&format!("{table} key"))))
        .collect()
}

/// One declared argument's value: the keys an `argument` row is found by.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ArgumentValue {
    pub predicate: [u8; 16],
    pub index: u16,
    pub value: [u8; 16],
}

/// Positions in (after, through] whose fact has this predicate and this
/// value at argument `index`, a declared pair, in order, at most `limit`.
pub fn argument_positions(
    r: &impl Reads,
    space: SpaceId,
    argument: &ArgumentValue,
    after: u64,
    through: u64,
    limit: u32,
) -> Result<Vec<u64>, Refusal> {
    index_positions(
        r,
        ARGUMENT,
        &argument_prefix(space, argument),
        after,
        through,
        limit,
    )
}

/// The index key of a canonical value: the first 16 octets of its SHA-256.
pub fn index_key(canonical: &[u8]) -> [u8; 16] {
    let digest = Sha256::digest(canonical);
    let mut key = [0u8; 16];
    key.copy_from_slice(&digest[..16]);
    key
}

/// The index keys of one fact: its predicate's, and each declared
/// argument's (by the store's argument index) that the fact has, by
/// ascending index.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FactIndex {
    pub predicate: [u8; 16],
    pub arguments: Vec<(u16, [u8; 16])>,
}

impl FactIndex {
    /// The keys of a validated fact, read from its bytes without decoding
    /// it into values; only the declared arguments are hashed.
    pub fn of(fact: &[u8], declared: &ArgumentIndex) -> Result<FactIndex, Refusal> {
        let children = lab_values::tuple_children(fact)
            .map_err(|e| Refusal::Internal(format!("a validated fact does not decode: {e}")))?;
        let (predicate, arguments) = children
            .split_first()
            .ok_or_else(|| Refusal::Internal("a validated fact is not a fact".into()))?;
        let predicate = index_key(predicate);
        let arguments = declared
            .indexes_of(&predicate)
            .filter_map(|i| Some((i, index_key(arguments.get(usize::from(i))?))))
            .collect();
        Ok(FactIndex {
            predicate,
            arguments,
        })
    }
}

/// `space ‖ predicate key ‖ argument index ‖ value key`: an `argument`
/// key without its position.
fn argument_prefix(space: SpaceId, argument: &ArgumentValue) -> Vec<u8> {
    concat(&[
        &space.0,
        &argument.predicate,
        &argument.index.to_be_bytes(),
        &argument.value,
    ])
}

fn receipt_key(space: SpaceId, kind: ReceiptKind, operation_id: &str) -> Vec<u8> {
    let kind = match kind {
        ReceiptKind::Create => b"c",
        ReceiptKind::Append => b"a",
    };
    concat(&[&space.0, kind, operation_id.as_bytes()])
}

/// The first octet of an append receipt's result that holds the batch's
/// positions (`first ‖ last`, 8 octets each) rather than JSON, which
/// starts with `{`: the store fills them in when it applies the batch.
const POSITIONS_RESULT: u8 = 1;

/// The positions an append receipt answered, when it holds them rather
/// than a JSON result.
pub fn receipt_positions(receipt: &Receipt) -> Option<Result<(u64, u64), Refusal>> {
    (receipt.result.first() == Some(&POSITIONS_RESULT)).then(|| {
        u64_at(&receipt.result, RESULT_FIRST_AT)
            .zip(u64_at(&receipt.result, RESULT_LAST_AT))
            .ok_or_else(|| corrupt("receipt"))
    })
}

/// The receipt under a scoped operation ID.
pub fn receipt(
    r: &impl Reads,
    space: SpaceId,
    kind: ReceiptKind,
    operation_id: &str,
) -> Result<Option<Receipt>, Refusal> {
    r.get(RECEIPT, &receipt_key(space, kind, operation_id))?
        .map(|bytes| decode_receipt(&bytes))
        .transpose()
}

pub fn decode_receipt(bytes: &[u8]) -> Result<Receipt, Refusal> {
    let request_digest = bytes
        .get(..DIGEST_BYTES)
        .and_then(|d| d.try_into().ok())
        .ok_or_else(|| corrupt("receipt"))?;
    Ok(Receipt {
        request_digest,
        result: bytes[DIGEST_BYTES..].to_vec(),
    })
}

/// What a mutation decides on, read in one exchange with the writer: the
/// receipt under its scoped operation ID, the space's cutoff and, for a
/// `create`, the occupant of the key.
pub struct MutationState {
    pub receipt: Option<Receipt>,
    pub head: Option<u64>,
    pub child: Option<SpaceId>,
}

pub fn mutation_state(
    txn: &kv::WriteTxn,
    space: SpaceId,
    kind: ReceiptKind,
    operation_id: &str,
    child_key: Option<&str>,
) -> Result<MutationState, Refusal> {
    let mut keys = vec![
        table_key(RECEIPT, receipt_key(space, kind, operation_id)),
        table_key(HEAD, space.0),
    ];
    if let Some(key) = child_key {
        keys.push(table_key(CHILD, concat(&[&space.0, key.as_bytes()])));
    }
    let mut values = txn.get_all(&keys).map_err(unavailable)?.into_iter();
    let mut next = || values.next().flatten();
    let receipt = next().map(|bytes| decode_receipt(&bytes)).transpose()?;
    let head = next()
        .map(|bytes| u64_at(&bytes, 0).ok_or_else(|| corrupt("head")))
        .transpose()?;
    let child = next()
        .map(|bytes| {
            id_at(&bytes, 0)
                .map(SpaceId)
                .ok_or_else(|| corrupt("child"))
        })
        .transpose()?;
    Ok(MutationState {
        receipt,
        head,
        child,
    })
}

/// An append prepared whole before it reaches the store: its entries,
/// predicate rows and receipt hold the positions as counter slots, which
/// the store fills from the space's head when it applies the batch
/// ("Key-value store" 10 in `docs/design.md`; `docs/journal.md`).
pub struct AppendBatch<'a> {
    pub space: SpaceId,
    pub operation_id: &'a str,
    pub facts: &'a [Vec<u8>],
    pub indexes: &'a [FactIndex],
    pub digest: [u8; 32],
    pub expected_cutoff: Option<u64>,
    pub max_position: u64,
}

/// Where `first` and `last` lie in an entry's value (`origin ‖ first ‖
/// last ‖ fact`, [`encode_entry`]).
const ENTRY_FIRST_AT: usize = 1;
const ENTRY_LAST_AT: usize = 9;
/// Where they lie in a positions result (`POSITIONS_RESULT ‖ first ‖
/// last`), and in a receipt's value, which the request digest precedes.
const RESULT_FIRST_AT: usize = 1;
const RESULT_LAST_AT: usize = 9;
const DIGEST_BYTES: usize = 32;

/// The slot at `offset` of a row's key (`in_key`) or value, filled with
/// the head plus `addend`.
fn slot(in_key: bool, offset: usize, addend: u64) -> CounterSlot {
    CounterSlot {
        in_key,
        offset: offset as u32,
        addend,
    }
}

/// Where the position ending an entry or index key starts.
fn position_in(key: &[u8]) -> usize {
    key.len() - 8
}

/// Where a receipt of this layout holds the positions a guarded batch
/// answers with: the prefix such a receipt of a request with `digest`
/// starts with, and the offsets of its first and last positions.
pub fn positions_receipt(digest: &[u8; DIGEST_BYTES]) -> (Vec<u8>, u32, u32) {
    (
        concat(&[digest, &[POSITIONS_RESULT]]),
        (DIGEST_BYTES + RESULT_FIRST_AT) as u32,
        (DIGEST_BYTES + RESULT_LAST_AT) as u32,
    )
}

impl AppendBatch<'_> {
    /// Leaves the request's answer to the batch's outcome: the host
    /// applies it once the handler has returned, announces `advance` if it
    /// applied, and answers as `answers` say for the outcome it met, once
    /// durable.
    pub fn submit(self, answers: &BatchAnswers, advance: &Advance) -> Result<(), Refusal> {
        kv::submit_sequenced(&self.sequenced(), answers, Some(advance)).map_err(|e| {
            no_room(e).unwrap_or_else(|e| {
                Refusal::Internal(format!("the batch failed; its outcome is uncertain: {e:?}"))
            })
        })
    }

    fn sequenced(self) -> SequencedBatch {
        let count = self.facts.len() as u64;
        // The rows as `Writes` lays them out, every position 0: the store
        // fills each slot from the head before it writes. Fact k's rows
        // (its entry, then its index rows) hold position head + k + 1.
        let mut writes = Vec::new();
        for (k, (fact, index)) in self.facts.iter().zip(self.indexes).enumerate() {
            let mut rows = Writes::default();
            rows.entry(self.space, 0, (Origin::Append, 0, 0), fact, index);
            let position = 1 + k as u64;
            writes.extend(rows.0.into_iter().map(|row| {
                let mut slots = vec![slot(true, position_in(&row.key), position)];
                if row.table == ENTRY {
                    slots.push(slot(false, ENTRY_FIRST_AT, 1));
                    slots.push(slot(false, ENTRY_LAST_AT, count));
                }
                sequenced(row, slots)
            }));
        }
        let mut rows = Writes::default();
        let receipt = Receipt {
            request_digest: self.digest,
            result: concat(&[&[POSITIONS_RESULT], &[0; 16]]),
        };
        rows.receipt(self.space, ReceiptKind::Append, self.operation_id, &receipt);
        let receipt_row = rows.0.pop().expect("the receipt");
        let receipt_key = receipt_row.key.clone();
        writes.push(sequenced(
            receipt_row,
            vec![
                slot(false, DIGEST_BYTES + RESULT_FIRST_AT, 1),
                slot(false, DIGEST_BYTES + RESULT_LAST_AT, count),
            ],
        ));
        SequencedBatch {
            guard: table_key(RECEIPT, receipt_key),
            counter: table_key(HEAD, self.space.0),
            expected: self.expected_cutoff,
            count,
            ceiling: self.max_position,
            writes,
        }
    }
}

fn sequenced(row: TableWrite, slots: Vec<CounterSlot>) -> SequencedWrite {
    SequencedWrite {
        table: row.table,
        key: row.key,
        value: row.value,
        slots,
    }
}

/// The writes of one mutation, sent to the store in one exchange.
#[derive(Default)]
pub struct Writes(Vec<TableWrite>);

impl Writes {
    fn put(&mut self, table: &str, key: Vec<u8>, value: Vec<u8>) {
        self.0.push(TableWrite {
            table: table.to_string(),
            key,
            value,
        });
    }

    pub fn identity(&mut self, identity: &Identity) {
        let value = concat(&[
            &identity.root.0,
            &identity.root_space.0,
            &identity.instance.0,
            &identity.cursor_key,
        ]);
        self.put(META, IDENTITY.to_vec(), value);
    }

    pub fn space(&mut self, id: SpaceId, record: &SpaceRecord) {
        self.put(SPACE, id.0.to_vec(), encode_space(record));
    }

    pub fn head(&mut self, id: SpaceId, cutoff: u64) {
        self.put(HEAD, id.0.to_vec(), cutoff.to_be_bytes().to_vec());
    }

    /// The store's declared argument index: written once, at provisioning.
    pub fn argument_index(&mut self, declared: &ArgumentIndex) {
        self.put(META, ARGUMENT_INDEX.to_vec(), declared.encode());
    }

    /// An entry, its predicate index row and one argument index row per
    /// declared argument it has; every key ends in the position.
    pub fn entry(
        &mut self,
        space: SpaceId,
        position: u64,
        record: (Origin, u64, u64),
        fact: &[u8],
        index: &FactIndex,
    ) {
        let (origin, first, last) = record;
        let position_bytes = position.to_be_bytes();
        self.put(
            ENTRY,
            concat(&[&space.0, &position_bytes]),
            encode_entry(origin, first, last, fact),
        );
        self.put(
            PREDICATE,
            concat(&[&space.0, &index.predicate, &position_bytes]),
            Vec::new(),
        );
        for &(argument, value) in &index.arguments {
            let prefix = argument_prefix(
                space,
                &ArgumentValue {
                    predicate: index.predicate,
                    index: argument,
                    value,
                },
            );
            self.put(ARGUMENT, concat(&[&prefix, &position_bytes]), Vec::new());
        }
    }

    /// A child's key claim and its creation index row.
    pub fn child(&mut self, parent: SpaceId, key: &str, position: u64, child: SpaceId) {
        self.put(
            CHILD,
            concat(&[&parent.0, key.as_bytes()]),
            child.0.to_vec(),
        );
        self.put(
            CREATED,
            concat(&[&parent.0, &position.to_be_bytes()]),
            child.0.to_vec(),
        );
    }

    pub fn receipt(
        &mut self,
        space: SpaceId,
        kind: ReceiptKind,
        operation_id: &str,
        receipt: &Receipt,
    ) {
        let value = concat(&[&receipt.request_digest, &receipt.result]);
        self.put(RECEIPT, receipt_key(space, kind, operation_id), value);
    }

    /// Sends the writes and commits; returns once the commit is durable.
    pub fn commit(self, txn: &kv::WriteTxn) -> Result<(), Refusal> {
        txn.put_all(&self.0).map_err(|e| {
            no_room(e).unwrap_or_else(|e| {
                Refusal::Internal(format!("the store refused the writes: {e:?}"))
            })
        })?;
        txn.commit().map_err(|e| {
            no_room(e).unwrap_or_else(|e| {
                Refusal::Internal(format!(
                    "the commit failed; its outcome is uncertain: {e:?}"
                ))
            })
        })
    }
}

/// A store in memory for unit tests: what [`Writes`] commits, read through
/// [`Reads`], with the rows each read returned counted.
#[cfg(test)]
pub(crate) mod memory {
    use super::*;
    use std::cell::Cell;
    use std::collections::BTreeMap;

    #[derive(Default)]
    pub struct Memory {
        rows: BTreeMap<(String, Vec<u8>), Vec<u8>>,
        /// Entries fetched by key (`get`, `get_all`).
        pub fetched: Cell<usize>,
        /// Rows scans returned.
        pub scanned: Cell<usize>,
    }

    impl Memory {
        pub fn commit(&mut self, writes: Writes) {
            for w in writes.0 {
                self.rows.insert((w.table, w.key), w.value);
            }
        }

        /// Removes every row of `table` whose key `drop` selects.
        pub fn remove(&mut self, table: &str, drop: impl Fn(&[u8]) -> bool) {
            self.rows.retain(|(t, k), _| t != table || !drop(k));
        }

        pub fn insert(&mut self, table: &str, key: Vec<u8>, value: Vec<u8>) {
            self.rows.insert((table.to_string(), key), value);
        }

        pub fn count(&self, table: &str) -> usize {
            self.rows.keys().filter(|(t, _)| t == table).count()
        }

        pub fn keys(&self, table: &str) -> Vec<Vec<u8>> {
            self.rows
                .keys()
                .filter(|(t, _)| t == table)
                .map(|(_, k)| k.clone())
                .collect()
        }
    }

    impl Reads for Memory {
        fn get(&self, table: &str, key: &[u8]) -> Result<Option<Vec<u8>>, Refusal> {
            self.fetched.set(self.fetched.get() + 1);
            Ok(self.rows.get(&(table.to_string(), key.to_vec())).cloned())
        }

        fn get_all(&self, keys: &[TableKey]) -> Result<Vec<Option<Vec<u8>>>, Refusal> {
            keys.iter().map(|k| self.get(&k.table, &k.key)).collect()
        }

        fn scan(&self, table: &str, range: &Range) -> Result<Vec<Entry>, Refusal> {
            assert!(!range.reverse, "the journal scans forward only");
            let start = (table.to_string(), range.start.clone());
            let found: Vec<Entry> = self
                .rows
                .range(start..)
                .take_while(|((t, k), _)| {
                    t == table && range.end.as_ref().is_none_or(|end| k < end)
                })
                .take(range.limit as usize)
                .map(|((_, key), value)| Entry {
                    key: key.clone(),
                    value: value.clone(),
                })
                .collect();
            self.scanned.set(self.scanned.get() + found.len());
            Ok(found)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_round_trip() {
        let record = SpaceRecord {
            parent: Some(SpaceId([7; 16])),
            created_at: 42,
            path: vec!["a".into(), "".repeat(0) + "é/x", "..".into()],
        };
        let decoded = decode_space(&encode_space(&record)).unwrap();
        assert_eq!(decoded.parent, record.parent);
        assert_eq!(decoded.created_at, 42);
        assert_eq!(decoded.path, record.path);
        let root = SpaceRecord {
            parent: None,
            created_at: 0,
            path: vec![],
        };
        assert_eq!(decode_space(&encode_space(&root)).unwrap().parent, None);

        let entry = decode_entry(encode_entry(Origin::Create, 3, 5, b"fact")).unwrap();
        assert_eq!(
            (entry.origin, entry.first, entry.last, entry.fact.as_slice()),
            (Origin::Create, 3, 5, &b"fact"[..])
        );
        assert!(decode_entry(vec![2; 17]).is_none());
    }

    #[test]
    fn an_entry_writes_argument_rows_for_its_declared_pairs_only() {
        use base64::Engine as _;
        use lab_values::Value;
        let space = SpaceId([9; 16]);
        let b64 =
            |v: &Value| base64::engine::general_purpose::STANDARD.encode(lab_values::encode(v));
        let digest16 = |v: &Value| index_key(&lab_values::encode(v));
        let fact = |p: &str, arguments: &[Value]| {
            lab_values::encode(&Value::Tuple(
                [Value::label(p)]
                    .into_iter()
                    .chain(arguments.iter().cloned())
                    .collect(),
            ))
        };
        // Declared: `record` arguments 1 and 3 (a record has no argument
        // 3 here), and argument 0 of `other`.
        let declared = ArgumentIndex::parse(&format!(
            "{r}:1,{r}:3,{o}:0",
            r = b64(&Value::label("record")),
            o = b64(&Value::label("other"))
        ))
        .unwrap();
        let arguments = [Value::text("req_1"), Value::int(7u64), Value::int(8u64)];
        let record = fact("record", &arguments);
        let index = FactIndex::of(&record, &declared).unwrap();
        assert_eq!(index.predicate, digest16(&Value::label("record")));
        assert_eq!(index.arguments, [(1, digest16(&arguments[1]))]);
        // An undeclared predicate with the same arguments: no argument rows.
        let unlisted = fact("unlisted", &arguments);
        assert!(FactIndex::of(&unlisted, &declared)
            .unwrap()
            .arguments
            .is_empty());
        assert!(FactIndex::of(&record, &ArgumentIndex::default())
            .unwrap()
            .arguments
            .is_empty());

        let position = 0x0102_0304_0506_0708u64;
        let mut writes = Writes::default();
        writes.entry(space, position, (Origin::Append, 1, 2), &record, &index);
        let unlisted_index = FactIndex::of(&unlisted, &declared).unwrap();
        writes.entry(
            space,
            position + 1,
            (Origin::Append, 3, 3),
            &unlisted,
            &unlisted_index,
        );
        let mut memory = memory::Memory::default();
        memory.commit(writes);
        assert_eq!(memory.count(ENTRY), 2);
        assert_eq!(memory.count(PREDICATE), 2);
        // space (16) ‖ predicate key (16) ‖ argument index (u16 BE) ‖
        // value key (16) ‖ position (u64 BE)
        let expected = [
            &[9; 16][..],
            &digest16(&Value::label("record")),
            &[0, 1],
            &digest16(&arguments[1]),
            &[1, 2, 3, 4, 5, 6, 7, 8],
        ]
        .concat();
        assert_eq!(memory.keys(ARGUMENT), [expected]);
        let found = |index: u16, value: &Value| {
            let argument = ArgumentValue {
                predicate: digest16(&Value::label("record")),
                index,
                value: digest16(value),
            };
            argument_positions(&memory, space, &argument, 0, position + 1, 8).unwrap()
        };
        assert_eq!(found(1, &arguments[1]), [position]);
        assert!(found(0, &arguments[1]).is_empty());
        assert!(
            found(0, &arguments[0]).is_empty(),
            "argument 0 is not declared"
        );
    }

    #[test]
    fn the_identity_and_the_argument_index_are_read_together() {
        let declared = ArgumentIndex::parse("2CdGcmVjb3Jk:4").unwrap();
        let mut memory = memory::Memory::default();
        assert_eq!(
            identity_and_argument_index(&memory).unwrap().1,
            ArgumentIndex::default()
        );
        let mut writes = Writes::default();
        writes.identity(&Identity {
            root: RootId([1; 16]),
            root_space: SpaceId([2; 16]),
            instance: InstanceId([3; 16]),
            cursor_key: [4; 32],
        });
        writes.argument_index(&declared);
        memory.commit(writes);
        let (identity, read) = identity_and_argument_index(&memory).unwrap();
        assert_eq!(identity.unwrap().root_space, SpaceId([2; 16]));
        assert_eq!(read, declared);
        assert_eq!(argument_index(&memory).unwrap(), declared);
    }
}
