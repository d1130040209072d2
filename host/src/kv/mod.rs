//! The transactional key-value store the components import (`kv` in
//! `wit/platform.wit`), on one of two backends: LMDB in the data directory
//! (the default, [`lmdb`]) or a PostgreSQL database several hosts share
//! ([`postgres`]). Both keep a namespace per service and, inside it, a
//! table's keys as `table ‖ 0x00 ‖ key`, so a table is one contiguous
//! range of keys ordered bytewise; both serve the same operations with the
//! same answers, and their invariants are numbered alike.

pub mod batch;
pub mod grouping;
pub mod lmdb;
pub mod log;
pub mod postgres;

pub use batch::{BatchOutcome, CounterSlot, ReadyBatch, SequencedBatch, SequencedWrite};
pub use grouping::Serving;
pub use lmdb::{KvStore, MapLimits, CEILING_SETTING};
use std::sync::atomic::AtomicU64;
use std::time::Duration;

/// A transaction that sends no operation for this long is aborted, so one
/// stalled request cannot hold the writer.
pub const IDLE_LIMIT: Duration = Duration::from_secs(10);
/// LMDB's bound on a key, which holds the table name and its separator.
pub const MAX_KEY_BYTES: usize = 511;
/// Table names are short: they are repeated in every key.
const MAX_TABLE_BYTES: usize = 64;

/// Errors of the store.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum KvError {
    /// A table name that is empty, too long or holds a 0x00 byte.
    BadTable(String),
    /// A key over [`MAX_KEY_BYTES`] with its table prefix.
    TooLarge,
    /// The transaction was committed, aborted or abandoned.
    Finished,
    /// The store failed; for a commit, nothing of the group was written.
    Storage(String),
    /// Not now: the map is full (at its ceiling, or until it has grown),
    /// the disk is, or the database server cannot be reached. Nothing of
    /// the transaction was written.
    Unavailable(String),
    /// A sequenced batch whose counter slots do not fit its writes.
    BadBatch(String),
}

impl std::fmt::Display for KvError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            KvError::BadTable(t) => write!(f, "bad table name {t:?}"),
            KvError::TooLarge => write!(f, "key too large"),
            KvError::Finished => write!(f, "the transaction is finished"),
            KvError::Storage(e) => write!(f, "storage: {e}"),
            KvError::Unavailable(e) => write!(f, "{e}"),
            KvError::BadBatch(e) => write!(f, "malformed batch: {e}"),
        }
    }
}

/// A bounded range scan within one table.
#[derive(Debug, Clone)]
pub struct Range {
    pub start: Vec<u8>,
    pub end: Option<Vec<u8>>,
    pub reverse: bool,
    pub limit: u32,
}

/// (key, value) pairs.
pub type Entries = Vec<(Vec<u8>, Vec<u8>)>;
/// (table, key, value) writes as a request names them.
pub type TableWrites = Vec<(String, Vec<u8>, Vec<u8>)>;

/// When a commit is answered.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Durability {
    /// Once the group holding it is durable.
    Wait,
    /// As soon as it joined the group.
    Detached,
}

/// Counts of durable commits and the map's use, for metrics.
#[derive(Default)]
pub struct Stats {
    /// Durable commits (under LMDB, one flush of the log each).
    pub groups: AtomicU64,
    /// LMDB syncs that started a new epoch of its log.
    pub checkpoints: AtomicU64,
    /// Transactions made durable by those commits.
    pub transactions: AtomicU64,
    /// Of those commits, the ones a lone batch made on its request's
    /// thread, without the writer's (under LMDB; "Key-value store" 12 in
    /// `docs/design.md`).
    pub lone: AtomicU64,
    /// The map's size now. Kept by the holder of the writer's lock, the
    /// only one that may ask LMDB (a remap moves what the answer is read
    /// from).
    pub map_size: AtomicU64,
    /// The map's high-water mark: pages up to the last one used, in bytes.
    pub map_used: AtomicU64,
    /// Time to write and flush each commit's log record (under LMDB; none
    /// under PostgreSQL, whose commit is its own).
    pub log_flush: crate::metrics::SharedHistogram,
}

/// Writes with their keys prefixed by their tables.
pub(crate) fn full_writes(writes: TableWrites) -> Result<Entries, KvError> {
    writes
        .into_iter()
        .map(|(table, key, value)| Ok((table_key(&table, &key)?, value)))
        .collect()
}

/// `table ‖ 0x00 ‖ key`.
pub(crate) fn table_key(table: &str, key: &[u8]) -> Result<Vec<u8>, KvError> {
    let prefix = table_prefix(table)?;
    if prefix.len() + key.len() > MAX_KEY_BYTES {
        return Err(KvError::TooLarge);
    }
    let mut full = prefix;
    full.extend_from_slice(key);
    Ok(full)
}

pub(crate) fn table_prefix(table: &str) -> Result<Vec<u8>, KvError> {
    if table.is_empty() || table.len() > MAX_TABLE_BYTES || table.as_bytes().contains(&0) {
        return Err(KvError::BadTable(table.to_string()));
    }
    let mut prefix = table.as_bytes().to_vec();
    prefix.push(0);
    Ok(prefix)
}

/// A scan's key range in full keys, `[start, end)`, and the length of the
/// table's prefix to strip from the keys found.
pub(crate) struct ScanBounds {
    pub prefix: usize,
    pub start: Vec<u8>,
    pub end: Vec<u8>,
}

/// The full keys `range` covers in `table`; `None` when it is empty.
pub(crate) fn scan_bounds(table: &str, range: &Range) -> Result<Option<ScanBounds>, KvError> {
    let prefix = table_prefix(table)?;
    let mut start = prefix.clone();
    start.extend_from_slice(&range.start);
    let end = match &range.end {
        Some(end) => {
            let mut full = prefix.clone();
            full.extend_from_slice(end);
            full
        }
        // The first key past the table: the separator 0x00 raised to 0x01.
        None => {
            let mut past = prefix.clone();
            *past.last_mut().expect("a prefix ends in its separator") = 1;
            past
        }
    };
    Ok((start < end).then_some(ScanBounds {
        prefix: prefix.len(),
        start,
        end,
    }))
}

/// `(table, key)` pairs as full keys.
pub(crate) fn full_keys(keys: Vec<(String, Vec<u8>)>) -> Result<Vec<Vec<u8>>, KvError> {
    keys.into_iter()
        .map(|(table, key)| table_key(&table, &key))
        .collect()
}

/// A namespace: one service's keys, on the deployment's backend.
#[derive(Clone)]
pub enum Namespace {
    Lmdb(lmdb::Namespace),
    Postgres(postgres::PgNamespace),
}

/// A read-only snapshot of what is committed.
pub enum ReadTxn {
    Lmdb(lmdb::ReadTxn),
    Postgres(postgres::PgReadTxn),
}

/// A request's write transaction; dropping it unfinished aborts it.
pub enum WriteTxn {
    Lmdb(lmdb::WriteTxn),
    Postgres(postgres::PgWriteTxn),
}

impl Namespace {
    /// The store's commit counts (shared by its namespaces).
    pub fn stats(&self) -> &Stats {
        match self {
            Namespace::Lmdb(ns) => ns.store().stats(),
            Namespace::Postgres(ns) => ns.store().stats(),
        }
    }

    /// Counts a request as being served until the answer drops, so the
    /// writer knows who may still join its group (`grouping`); `None`
    /// under PostgreSQL, whose groups do not wait.
    pub fn serve(&self) -> Option<Serving<'_>> {
        match self {
            Namespace::Lmdb(ns) => Some(ns.store().grouping().serve()),
            Namespace::Postgres(_) => None,
        }
    }

    pub async fn read(&self) -> Result<ReadTxn, KvError> {
        Ok(match self {
            Namespace::Lmdb(ns) => ReadTxn::Lmdb(ns.read().await?),
            Namespace::Postgres(ns) => ReadTxn::Postgres(ns.read().await?),
        })
    }

    /// The values of full keys, in order, from one snapshot.
    pub async fn read_all(&self, keys: &[Vec<u8>]) -> Result<Vec<Option<Vec<u8>>>, KvError> {
        match self {
            Namespace::Lmdb(ns) => ns.read().await?.get_all(keys),
            Namespace::Postgres(ns) => ns.read_all(keys).await,
        }
    }

    pub async fn write(&self) -> Result<WriteTxn, KvError> {
        Ok(match self {
            Namespace::Lmdb(ns) => WriteTxn::Lmdb(ns.write()?),
            Namespace::Postgres(ns) => WriteTxn::Postgres(ns.write().await?),
        })
    }

    /// Applies a sequenced batch; answers once its group is durable
    /// (invariant 7 of either backend).
    pub async fn apply_sequenced(&self, batch: SequencedBatch) -> Result<BatchOutcome, KvError> {
        self.apply_ready(batch.ready()?).await
    }

    /// [`Namespace::apply_sequenced`], of a batch checked already.
    pub async fn apply_ready(&self, batch: ReadyBatch) -> Result<BatchOutcome, KvError> {
        match self {
            Namespace::Lmdb(ns) => ns.apply_ready(batch).await,
            Namespace::Postgres(ns) => ns.apply_ready(batch).await,
        }
    }
}

/// `&mut self` throughout: an LMDB transaction may move between threads
/// but not be shared, and these futures hold it across their awaits.
impl ReadTxn {
    pub async fn get(&mut self, table: &str, key: &[u8]) -> Result<Option<Vec<u8>>, KvError> {
        match self {
            ReadTxn::Lmdb(txn) => txn.get(table, key),
            ReadTxn::Postgres(txn) => txn.get(&table_key(table, key)?).await,
        }
    }

    /// The values of full keys, in order.
    pub async fn get_all(&mut self, keys: &[Vec<u8>]) -> Result<Vec<Option<Vec<u8>>>, KvError> {
        match self {
            ReadTxn::Lmdb(txn) => txn.get_all(keys),
            ReadTxn::Postgres(txn) => txn.get_all(keys).await,
        }
    }

    pub async fn scan(&mut self, table: &str, range: &Range) -> Result<Entries, KvError> {
        match self {
            ReadTxn::Lmdb(txn) => txn.scan(table, range),
            ReadTxn::Postgres(txn) => txn.scan(table, range).await,
        }
    }
}

impl WriteTxn {
    pub async fn get(&self, table: &str, key: &[u8]) -> Result<Option<Vec<u8>>, KvError> {
        match self {
            WriteTxn::Lmdb(txn) => txn.get(table, key).await,
            WriteTxn::Postgres(txn) => txn.get(&table_key(table, key)?).await,
        }
    }

    pub async fn scan(&self, table: &str, range: Range) -> Result<Entries, KvError> {
        match self {
            WriteTxn::Lmdb(txn) => txn.scan(table, range).await,
            WriteTxn::Postgres(txn) => txn.scan(table, &range).await,
        }
    }

    pub async fn put(&self, table: &str, key: &[u8], value: Vec<u8>) -> Result<(), KvError> {
        match self {
            WriteTxn::Lmdb(txn) => txn.put(table, key, value).await,
            WriteTxn::Postgres(txn) => txn.put_all(vec![(table_key(table, key)?, value)]).await,
        }
    }

    /// The values of `(table, key)` pairs, in order, in one exchange.
    pub async fn get_all(
        &self,
        keys: Vec<(String, Vec<u8>)>,
    ) -> Result<Vec<Option<Vec<u8>>>, KvError> {
        match self {
            WriteTxn::Lmdb(txn) => txn.get_all(keys).await,
            WriteTxn::Postgres(txn) => txn.get_all(&full_keys(keys)?).await,
        }
    }

    /// `(table, key, value)` writes in order, in one exchange.
    pub async fn put_all(&self, writes: TableWrites) -> Result<(), KvError> {
        match self {
            WriteTxn::Lmdb(txn) => txn.put_all(writes).await,
            WriteTxn::Postgres(txn) => txn.put_all(full_writes(writes)?).await,
        }
    }

    pub async fn delete(&self, table: &str, key: &[u8]) -> Result<bool, KvError> {
        match self {
            WriteTxn::Lmdb(txn) => txn.delete(table, key).await,
            WriteTxn::Postgres(txn) => txn.delete(&table_key(table, key)?).await,
        }
    }

    /// Commits; returns once the transaction is durable.
    pub async fn commit(&mut self) -> Result<(), KvError> {
        self.finish(Vec::new(), Durability::Wait).await
    }

    /// Writes, then commits, answered as `durability` says. The transaction
    /// is finished whatever the outcome.
    pub async fn finish(
        &mut self,
        writes: TableWrites,
        durability: Durability,
    ) -> Result<(), KvError> {
        match self {
            WriteTxn::Lmdb(txn) => txn.finish(writes, durability).await,
            WriteTxn::Postgres(txn) => match full_writes(writes) {
                Ok(writes) => txn.finish(writes, durability == Durability::Detached).await,
                Err(e) => {
                    txn.abort();
                    Err(e)
                }
            },
        }
    }

    /// Whether the transaction can still take operations.
    pub fn is_open(&self) -> bool {
        match self {
            WriteTxn::Lmdb(txn) => txn.is_open(),
            WriteTxn::Postgres(txn) => txn.is_open(),
        }
    }

    /// Discards every write of this transaction.
    pub fn abort(&mut self) {
        match self {
            WriteTxn::Lmdb(txn) => txn.abort(),
            WriteTxn::Postgres(txn) => txn.abort(),
        }
    }
}
