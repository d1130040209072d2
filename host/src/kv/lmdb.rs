//! The key-value store on LMDB through heed, with group commit.
//!
//! Layout: one LMDB environment; one database per service (its namespace);
//! inside it, a table's keys are `table ‖ 0x00 ‖ key`, so a table is a
//! contiguous key range and a scan is a cursor walk.
//!
//! Invariants:
//! 1. One thread, the writer, owns every write transaction, except a lone
//!    batch's group (9). A request's write transaction is a nested
//!    transaction of the writer's current group transaction; its
//!    operations are sent to the writer and answered in order.
//! 2. The writer serves one request's transaction at a time, start to finish;
//!    requests queued meanwhile join the same group, and when the queue
//!    runs dry the writer may pause for more ([`super::grouping`]). A
//!    group is one record of the write-ahead log, flushed, then one LMDB
//!    commit without a sync (8). No request hears "committed" before that
//!    commit returned.
//! 3. A transaction dropped, idle past [`IDLE_LIMIT`], or failed is aborted
//!    alone; the rest of its group is unaffected.
//! 5. A detached commit is answered as soon as its nested transaction is in
//!    the group; its writes are durable only once the group commits (the
//!    group commits whenever it holds one).
//! 4. Read transactions are LMDB snapshots: they see only durable commits and
//!    never block the writer, except while it remaps (6).
//! 6. The map starts at its initial size and grows, doubling, up to its
//!    ceiling. The writer grows it between groups, when a group left it
//!    [`GROW_AT`] full or a transaction found it full, and only while the
//!    [`MapGate`] holds every read transaction out (LMDB's condition for a
//!    remap). A transaction that finds the map full is aborted alone and
//!    answered [`KvError::Unavailable`], like one that finds the disk full;
//!    nothing of it was written.
//! 7. A sequenced batch ([`Namespace::apply_ready`]) is one group member
//!    decided and applied in one step; it is answered, whatever it met,
//!    once its group commits ("Key-value store" 10 in `docs/design.md`).
//!    Batches that follow one another in the queue share one nested
//!    transaction, a run; should one of them fail, the run is aborted and
//!    each of its batches applied again in a nested transaction of its
//!    own, so the failed one is refused alone (3, 6).
//! 8. LMDB runs without its syncs; the write-ahead log ([`super::log`]) and
//!    its checkpoints keep it whole. The writer begins a checkpoint, which
//!    a thread of its own finishes, when a log file is half full or the
//!    map's high-water mark climbed by the log's size; it finishes one
//!    before going on when a log file is full, when a transaction found
//!    the map full, before the map grows, and when asked
//!    ([`KvStore::checkpoint`]). Until a checkpoint is finished it holds a
//!    read transaction on the one before. Opening recovers: the
//!    checkpoint's meta pages written back, the log's writes applied, and
//!    a checkpoint of the result.
//! 9. The writer's state is behind one lock, which its thread holds for a
//!    group from its first member to its answers. A sequenced batch
//!    applied while no other is, and while fewer requests are being served
//!    than there are cores ([`Namespace::apply_ready`]), is committed
//!    as a group of its own on the request's thread when it takes that
//!    lock at once: the same steps as the writer's (1, 2, 7, 8), with no
//!    thread to wake on the way in or out, and a core left for each other
//!    request while that thread waits for the log's flush. Whatever may wait
//!    on others is left to the writer's thread: a map due to grow or found
//!    full, a log file without room for the record, a checkpoint to
//!    finish, and any batch that fails.

use super::batch::{BatchOutcome, ReadyBatch};
use super::grouping::{Cores, Grouping};
use super::log::{self, Log, Record};
use super::{
    full_writes, scan_bounds, table_key, table_prefix, Durability, Entries, KvError, Range,
    ScanBounds, Stats, TableWrites, IDLE_LIMIT,
};
use crate::map_gate::{MapGate, ReadPass};
use crate::storage::{is_no_space, NO_SPACE};
use heed::types::Bytes;
use heed::{Database, Env, EnvFlags, EnvOpenOptions, MdbError, RoTxn, RwTxn, WithoutTls};
use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::ops::Bound;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc as sync_mpsc;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};
use tokio::sync::oneshot;

/// Transactions committed together at most.
const MAX_GROUP: usize = 256;
/// Databases the environment may hold: more than labd's namespaces, so
/// that a log naming one this start does not open is still replayed.
const MAX_NAMESPACES: u32 = 16;
/// The share of the map in use past which the writer grows it.
const GROW_AT: (usize, usize) = (3, 4);
/// Longest the writer waits for the read transactions out to end before a
/// remap (readers arriving meanwhile wait as long); past it, it gives up and
/// tries again after [`GROW_RETRY`].
const QUIESCE_LIMIT: Duration = Duration::from_secs(1);
const GROW_RETRY: Duration = Duration::from_secs(1);
/// The setting that bounds the map, as refusals name it.
pub const CEILING_SETTING: &str = "--lmdb-map-ceiling";

fn storage(e: heed::Error) -> KvError {
    KvError::Storage(e.to_string())
}

/// A file error of the log or a checkpoint; a full disk is
/// [`KvError::Unavailable`], as LMDB's own.
fn io_error(e: std::io::Error) -> KvError {
    if is_no_space(&e) {
        KvError::Unavailable(NO_SPACE.into())
    } else {
        KvError::Storage(e.to_string())
    }
}

/// Whether `e` is LMDB's map full.
fn is_map_full(e: &heed::Error) -> bool {
    matches!(e, heed::Error::Mdb(MdbError::MapFull))
}

type Reply<T> = oneshot::Sender<Result<T, KvError>>;

enum Op {
    Get(Vec<u8>, Reply<Option<Vec<u8>>>),
    GetAll(Vec<Vec<u8>>, Reply<Vec<Option<Vec<u8>>>>),
    Scan(Vec<u8>, Range, Reply<Entries>),
    Put(Vec<u8>, Vec<u8>, Reply<()>),
    PutAll(Entries, Reply<()>),
    Delete(Vec<u8>, Reply<bool>),
    /// Writes, then the commit.
    Commit(Entries, Durability, Reply<()>),
}

/// What serving one transaction left for the group.
enum Served {
    /// Aborted or failed: nothing of it is in the group.
    Nothing,
    /// In the group; the reply waits for the group's commit.
    Waiting(Waiter),
    /// In the group and already answered.
    Detached,
}

/// What the writer serves, one at a time, into its group.
enum Job {
    /// One request's write transaction, its operations arriving one by one.
    Txn {
        db: Database<Bytes, Bytes>,
        namespace: Arc<str>,
        ops: sync_mpsc::Receiver<Op>,
    },
    /// A sequenced batch, decided and applied in one step (invariant 7).
    Batch(Batched),
    /// A checkpoint now: LMDB synced, the log's epoch ended.
    Checkpoint(Reply<()>),
}

/// A sequenced batch and where its answer goes.
struct Batched {
    db: Database<Bytes, Bytes>,
    namespace: Arc<str>,
    batch: ReadyBatch,
    reply: Reply<BatchOutcome>,
}

impl Batched {
    /// The batch, applied into the group, as a member waiting for the
    /// group's commit; its writes added to the group's `record`.
    fn applied(self, outcome: BatchOutcome, record: &mut Record) -> Served {
        for (key, value) in self.batch.written() {
            record.put(&self.namespace, key, value);
        }
        Served::Waiting(Waiter::Batch(self.reply, outcome))
    }
}

/// A group as it forms: its members so far and their writes.
#[derive(Default)]
struct Forming {
    members: usize,
    committed: Vec<Waiter>,
    record: Record,
    paused: Duration,
}

impl Forming {
    fn add(&mut self, served: Served) {
        match served {
            Served::Nothing => {}
            Served::Waiting(waiter) => {
                self.committed.push(waiter);
                self.members += 1;
            }
            Served::Detached => self.members += 1,
        }
    }
}

/// A member of a group waiting for its commit.
enum Waiter {
    Txn(Reply<()>),
    /// Answered `outcome` once the group is durable.
    Batch(Reply<BatchOutcome>, BatchOutcome),
}

impl Waiter {
    fn answer(self, committed: Result<(), KvError>) {
        match self {
            Waiter::Txn(reply) => drop(reply.send(committed)),
            Waiter::Batch(reply, outcome) => drop(reply.send(committed.map(|()| outcome))),
        }
    }
}

/// The store. Shared by every request of every service.
pub struct KvStore {
    env: Env<WithoutTls>,
    jobs: sync_mpsc::Sender<Job>,
    /// The writer's state, shared with its thread (invariant 9).
    writer: Arc<Mutex<Writer>>,
    /// Sequenced batches being applied now, the writer's or alone.
    applying: AtomicUsize,
    stats: Arc<Stats>,
    grouping: Arc<Grouping>,
    gate: Arc<MapGate>,
    ceiling: usize,
}

/// How large the map is at open and may grow to, in bytes (address space;
/// the file holds what is used).
#[derive(Debug, Clone, Copy)]
pub struct MapLimits {
    /// At open: at least what the data already uses.
    pub initial: usize,
    /// Past it, writes that need room are refused.
    pub ceiling: usize,
    /// The write-ahead log's two files together, in bytes; also how far
    /// the map's high-water mark may climb between checkpoints.
    pub log: u64,
}

/// The map's size and use at one instant.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MapUse {
    pub size: u64,
    pub used: u64,
    pub ceiling: u64,
}

/// A namespace: one service's database.
#[derive(Clone)]
pub struct Namespace {
    store: Arc<KvStore>,
    db: Database<Bytes, Bytes>,
    /// The database's name, as the log records its writes.
    name: Arc<str>,
}

impl KvStore {
    /// Opens (creating) the environment in `dir` with a database per
    /// namespace, and starts the writer.
    pub fn open(
        dir: &Path,
        limits: MapLimits,
        namespaces: &[&str],
    ) -> Result<(Arc<KvStore>, Vec<Namespace>), KvError> {
        let io = |e: std::io::Error| KvError::Storage(e.to_string());
        crate::durable::create_dir_all(dir).map_err(io)?;
        // LMDB maps whole OS pages: the ceiling rounds down to one, the
        // initial size up (and never past the ceiling).
        let page = page_size();
        let ceiling = (limits.ceiling / page * page).max(page);
        let initial = limits
            .initial
            .div_ceil(page)
            .saturating_mul(page)
            .min(ceiling);
        // Invariant 8: the last checkpoint's state, then the log's writes.
        let mut recovered = log::recover(dir).map_err(io)?;
        if let Some(checkpoint) = &recovered.checkpoint {
            let page = checkpoint.metas.len() / 2;
            let file = log::read_metas(dir, page).map_err(io)?;
            if log::meta_txnid(&file) > recovered.last_txnid {
                // A commit the log does not hold, made after its last record
                // by another program with LMDB's own syncs: the file is
                // whole as it stands, and the log is past.
                tracing::warn!(
                    "the key-value store's data file holds commits its log does not; \
                     the log is set aside"
                );
                recovered.writes.clear();
            } else if !log::store_in_use(dir).map_err(io)? {
                // (Another process with the store open, a backup, opened
                // it after this host's last start, and no power cut came
                // since: the file is whole as it stands.)
                log::restore_metas(dir, &checkpoint.metas).map_err(io)?;
            }
        }
        let mut options = EnvOpenOptions::new().read_txn_without_tls();
        options
            .map_size(initial)
            .max_dbs(MAX_NAMESPACES)
            .max_readers(1024);
        // SAFETY: the environment is opened once per process (the host owns
        // the data directory) and never with conflicting flags; without
        // LMDB's syncs, the log and the checkpoints keep it whole
        // (invariant 8).
        let env = unsafe {
            options.flags(EnvFlags::NO_SYNC);
            options.open(dir)
        }
        .map_err(storage)?;
        // LMDB syncs its files, never the directory naming them.
        crate::durable::sync_dir(dir).map_err(io)?;
        let mut txn = env.write_txn().map_err(storage)?;
        let mut dbs = Vec::new();
        for name in namespaces {
            dbs.push(
                env.create_database::<Bytes, Bytes>(&mut txn, Some(name))
                    .map_err(storage)?,
            );
        }
        replay(&env, &mut txn, recovered.writes)?;
        txn.commit().map_err(storage)?;
        if recovered.records > 0 {
            tracing::info!(
                groups = recovered.records,
                "the key-value store recovered the groups its log held past its checkpoint"
            );
        }
        env.force_sync().map_err(storage)?;
        let pin = env.clone().static_read_txn().map_err(storage)?;
        let page = env.stat().page_size as usize;
        let metas = log::read_metas(dir, page).map_err(io)?;
        let log = Log::open(dir, limits.log, recovered.checkpoint.as_ref(), metas).map_err(io)?;

        let (jobs, queue) = sync_mpsc::channel();
        let gate = Arc::new(MapGate::default());
        let mut writer = Writer {
            env: env.clone(),
            stats: Arc::new(Stats::default()),
            gate: Arc::clone(&gate),
            ceiling,
            dir: dir.to_path_buf(),
            grouping: Arc::default(),
            ahead: RefCell::new(Ahead {
                log,
                pin: Some(pin),
                // Set from the map's use, just below.
                checkpointed_at: 0,
                pending: None,
                checkpointer: Checkpointer::start(dir).map_err(io)?,
            }),
            found_full: Cell::new(false),
        };
        let (_, used) = writer.record_use();
        writer.ahead.get_mut().checkpointed_at = used;
        let stats = Arc::clone(&writer.stats);
        let grouping = Arc::clone(&writer.grouping);
        let writer = Arc::new(Mutex::new(writer));
        let served = Arc::clone(&writer);
        std::thread::Builder::new()
            .name("kv-writer".into())
            .spawn(move || Writer::run(&served, &queue))
            .map_err(|e| KvError::Storage(e.to_string()))?;
        let store = Arc::new(KvStore {
            env,
            jobs,
            writer,
            applying: AtomicUsize::new(0),
            stats,
            grouping,
            gate,
            ceiling,
        });
        let namespaces = dbs
            .into_iter()
            .zip(namespaces)
            .map(|(db, name)| Namespace {
                store: Arc::clone(&store),
                db,
                name: Arc::from(*name),
            })
            .collect();
        Ok((store, namespaces))
    }

    /// Syncs the store and ends its log's epoch, so that the next start
    /// has nothing to apply and other processes may read the files alone.
    pub async fn checkpoint(&self) -> Result<(), KvError> {
        let (reply, answer) = oneshot::channel();
        self.jobs
            .send(Job::Checkpoint(reply))
            .map_err(|_| KvError::Storage("the writer stopped".into()))?;
        answer
            .await
            .map_err(|_| KvError::Storage("the writer stopped".into()))?
    }

    /// Commit counts so far.
    pub fn stats(&self) -> &Stats {
        &self.stats
    }

    /// The requests being served and the writer's wait for late members.
    pub fn grouping(&self) -> &Grouping {
        &self.grouping
    }

    /// The map's size, high-water mark and ceiling, as of the last commit.
    pub fn map_use(&self) -> MapUse {
        MapUse {
            size: self.stats.map_size.load(Ordering::Relaxed),
            used: self.stats.map_used.load(Ordering::Relaxed),
            ceiling: self.ceiling as u64,
        }
    }
}

/// The OS page size, which LMDB's map sizes are multiples of.
fn page_size() -> usize {
    rustix::param::page_size()
}

impl Namespace {
    /// The store this namespace lives in.
    pub fn store(&self) -> &KvStore {
        &self.store
    }

    /// A snapshot of the last durable commit; it waits while the writer
    /// remaps (invariant 6).
    pub async fn read(&self) -> Result<ReadTxn, KvError> {
        let pass = self.store.gate.enter().await;
        let txn = self.store.env.clone().static_read_txn().map_err(storage)?;
        Ok(ReadTxn {
            txn,
            db: self.db,
            _pass: pass,
        })
    }

    /// A write transaction; it waits for the writer at its first operation.
    pub fn write(&self) -> Result<WriteTxn, KvError> {
        let (ops, rx) = sync_mpsc::channel();
        self.store
            .jobs
            .send(Job::Txn {
                db: self.db,
                namespace: Arc::clone(&self.name),
                ops: rx,
            })
            .map_err(|_| KvError::Storage("the writer stopped".into()))?;
        Ok(WriteTxn { ops: Some(ops) })
    }

    /// [`Namespace::apply_ready`], of a batch as the request names it.
    #[cfg(test)]
    pub async fn apply_sequenced(
        &self,
        batch: super::SequencedBatch,
    ) -> Result<BatchOutcome, KvError> {
        self.apply_ready(batch.ready()?).await
    }

    /// Applies a sequenced batch, checked already, in one exchange with the
    /// writer; answers once what it read, and what it wrote, is durable
    /// (invariant 7).
    pub async fn apply_ready(&self, mut batch: ReadyBatch) -> Result<BatchOutcome, KvError> {
        let applying = Applying::enter(&self.store.applying);
        if applying.alone() && self.store.grouping.cores_to_spare() {
            if let Some(writer) = self.store.idle_writer() {
                if let Some(outcome) = writer.commit_alone(self.db, &self.name, &mut batch) {
                    return outcome;
                }
            }
        }
        let (reply, answer) = oneshot::channel();
        self.store
            .jobs
            .send(Job::Batch(Batched {
                db: self.db,
                namespace: Arc::clone(&self.name),
                batch,
                reply,
            }))
            .map_err(|_| KvError::Storage("the writer stopped".into()))?;
        answer
            .await
            .map_err(|_| KvError::Storage("the writer stopped".into()))?
    }
}

/// One sequenced batch being applied ([`KvStore::applying`]).
struct Applying<'a>(&'a AtomicUsize, usize);

impl<'a> Applying<'a> {
    fn enter(applying: &'a AtomicUsize) -> Applying<'a> {
        let before = applying.fetch_add(1, Ordering::Relaxed);
        Applying(applying, before)
    }

    /// Whether no other batch was being applied when this one began.
    fn alone(&self) -> bool {
        self.1 == 0
    }
}

impl Drop for Applying<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::Relaxed);
    }
}

impl KvStore {
    /// The writer's state, if no group holds it now (invariant 9).
    fn idle_writer(&self) -> Option<MutexGuard<'_, Writer>> {
        match self.writer.try_lock() {
            Ok(writer) => Some(writer),
            Err(std::sync::TryLockError::Poisoned(poisoned)) => Some(poisoned.into_inner()),
            Err(std::sync::TryLockError::WouldBlock) => None,
        }
    }
}

fn get(
    txn: &RoTxn<'_, WithoutTls>,
    db: Database<Bytes, Bytes>,
    key: &[u8],
) -> Result<Option<Vec<u8>>, KvError> {
    Ok(db.get(txn, key).map_err(storage)?.map(<[u8]>::to_vec))
}

fn scan(
    txn: &RoTxn<'_, WithoutTls>,
    db: Database<Bytes, Bytes>,
    table: &str,
    range: &Range,
) -> Result<Entries, KvError> {
    let Some(ScanBounds { prefix, start, end }) = scan_bounds(table, range)? else {
        return Ok(Vec::new());
    };
    let bounds = (
        Bound::Included(start.as_slice()),
        Bound::Excluded(end.as_slice()),
    );
    let limit = range.limit as usize;
    let strip = |(k, v): (&[u8], &[u8])| (k[prefix..].to_vec(), v.to_vec());
    let entries: Result<Entries, heed::Error> = if range.reverse {
        db.rev_range(txn, &bounds)
            .map_err(storage)?
            .take(limit)
            .map(|r| r.map(strip))
            .collect()
    } else {
        db.range(txn, &bounds)
            .map_err(storage)?
            .take(limit)
            .map(|r| r.map(strip))
            .collect()
    };
    entries.map_err(storage)
}

/// A read-only snapshot.
pub struct ReadTxn {
    txn: RoTxn<'static, WithoutTls>,
    db: Database<Bytes, Bytes>,
    /// Dropped after `txn` (fields drop in order): the map stays put while
    /// the transaction lives.
    _pass: ReadPass,
}

impl ReadTxn {
    pub fn get(&self, table: &str, key: &[u8]) -> Result<Option<Vec<u8>>, KvError> {
        get(&self.txn, self.db, &table_key(table, key)?)
    }

    /// The values of full keys, in order.
    pub fn get_all(&self, keys: &[Vec<u8>]) -> Result<Vec<Option<Vec<u8>>>, KvError> {
        keys.iter()
            .map(|key| get(&self.txn, self.db, key))
            .collect()
    }

    pub fn scan(&self, table: &str, range: &Range) -> Result<Entries, KvError> {
        scan(&self.txn, self.db, table, range)
    }
}

/// A request's handle on its write transaction. Dropping it unfinished
/// aborts the transaction.
pub struct WriteTxn {
    ops: Option<sync_mpsc::Sender<Op>>,
}

impl WriteTxn {
    async fn call<T>(&self, op: impl FnOnce(Reply<T>) -> Op) -> Result<T, KvError> {
        let ops = self.ops.as_ref().ok_or(KvError::Finished)?;
        let (reply, answer) = oneshot::channel();
        ops.send(op(reply)).map_err(|_| KvError::Finished)?;
        answer.await.map_err(|_| KvError::Finished)?
    }

    pub async fn get(&self, table: &str, key: &[u8]) -> Result<Option<Vec<u8>>, KvError> {
        let key = table_key(table, key)?;
        self.call(|r| Op::Get(key, r)).await
    }

    pub async fn scan(&self, table: &str, range: Range) -> Result<Entries, KvError> {
        table_prefix(table)?;
        let table = table.as_bytes().to_vec();
        self.call(|r| Op::Scan(table, range, r)).await
    }

    pub async fn put(&self, table: &str, key: &[u8], value: Vec<u8>) -> Result<(), KvError> {
        let key = table_key(table, key)?;
        self.call(|r| Op::Put(key, value, r)).await
    }

    /// The values of `(table, key)` pairs, in order, in one exchange.
    pub async fn get_all(
        &self,
        keys: Vec<(String, Vec<u8>)>,
    ) -> Result<Vec<Option<Vec<u8>>>, KvError> {
        let keys = keys
            .into_iter()
            .map(|(table, key)| table_key(&table, &key))
            .collect::<Result<Vec<_>, KvError>>()?;
        self.call(|r| Op::GetAll(keys, r)).await
    }

    /// `(table, key, value)` writes in order, in one exchange with the writer.
    pub async fn put_all(&self, writes: TableWrites) -> Result<(), KvError> {
        let writes = full_writes(writes)?;
        self.call(|r| Op::PutAll(writes, r)).await
    }

    pub async fn delete(&self, table: &str, key: &[u8]) -> Result<bool, KvError> {
        let key = table_key(table, key)?;
        self.call(|r| Op::Delete(key, r)).await
    }

    /// Commits; returns once the group holding this transaction is durable.
    #[cfg(test)]
    pub async fn commit(&mut self) -> Result<(), KvError> {
        self.commit_with(Vec::new()).await
    }

    /// Writes, then commits, in one exchange with the writer.
    #[cfg(test)]
    pub async fn commit_with(&mut self, writes: TableWrites) -> Result<(), KvError> {
        self.finish(writes, Durability::Wait).await
    }

    /// Writes, then commits, answered as `durability` says.
    pub async fn finish(
        &mut self,
        writes: TableWrites,
        durability: Durability,
    ) -> Result<(), KvError> {
        let outcome = match full_writes(writes) {
            Ok(writes) => self.call(|r| Op::Commit(writes, durability, r)).await,
            Err(e) => Err(e),
        };
        self.ops = None;
        outcome
    }

    /// Whether the transaction can still take operations.
    pub fn is_open(&self) -> bool {
        self.ops.is_some()
    }

    /// Discards every write of this transaction.
    pub fn abort(&mut self) {
        self.ops = None;
    }
}

/// The writer thread: forms groups from queued transactions, one LMDB commit
/// each, and grows the map between groups (invariant 6).
struct Writer {
    env: Env<WithoutTls>,
    stats: Arc<Stats>,
    gate: Arc<MapGate>,
    ceiling: usize,
    dir: PathBuf,
    ahead: RefCell<Ahead>,
    grouping: Arc<Grouping>,
    /// A batch committed alone found the map full: the writer's thread
    /// checkpoints and grows it after its next group (invariant 9).
    found_full: Cell<bool>,
}

/// The write-ahead log and what keeps its checkpoint whole (invariant 8).
struct Ahead {
    log: Log,
    /// A read transaction on the checkpoint's state, so LMDB reuses none
    /// of its pages; `None` only while the map is remapped.
    pin: Option<RoTxn<'static, WithoutTls>>,
    /// The map's high-water mark at the checkpoint, in bytes.
    checkpointed_at: usize,
    /// The checkpoint under way: a read transaction on its state, and the
    /// map's high-water mark then.
    pending: Option<(RoTxn<'static, WithoutTls>, usize)>,
    checkpointer: Checkpointer,
}

/// The thread that finishes checkpoints (`log` 2): it syncs the data file,
/// then writes the checkpoint, while the writer goes on.
struct Checkpointer {
    begun: sync_mpsc::Sender<log::Begun>,
    finished: sync_mpsc::Receiver<std::io::Result<u64>>,
}

impl Checkpointer {
    fn start(dir: &Path) -> std::io::Result<Checkpointer> {
        let data = std::fs::File::open(dir.join("data.mdb"))?;
        let dir = dir.to_path_buf();
        let (begun, queue) = sync_mpsc::channel::<log::Begun>();
        let (answers, finished) = sync_mpsc::channel();
        std::thread::Builder::new()
            .name("kv-checkpoint".into())
            .spawn(move || {
                for checkpoint in queue {
                    let outcome = data.sync_data().and_then(|()| checkpoint.finish(&dir));
                    if answers.send(outcome).is_err() {
                        return;
                    }
                }
            })?;
        Ok(Checkpointer { begun, finished })
    }
}

fn checkpointer_stopped() -> KvError {
    KvError::Storage("the key-value store's checkpoint thread stopped".into())
}

/// Whether a map of `size` bytes, `used` up to its high-water mark, is
/// to grow (invariant 6).
fn grow_due(size: usize, used: usize) -> bool {
    used.saturating_mul(GROW_AT.1) >= size.saturating_mul(GROW_AT.0)
}

/// Whether a checkpoint is due: the log's file half full, or the map's
/// high-water mark, `used` bytes, climbed by the log's size since the
/// checkpoint (the pages it pins).
fn checkpoint_due(ahead: &Ahead, used: usize) -> bool {
    let capacity = ahead.log.capacity();
    let climbed = used.saturating_sub(ahead.checkpointed_at) as u64;
    ahead.log.used().saturating_mul(2) >= capacity || climbed >= capacity.saturating_mul(2)
}

/// Applies a log's writes in `txn` (invariant 8).
fn replay(
    env: &Env<WithoutTls>,
    txn: &mut RwTxn<'_>,
    writes: Vec<log::Write>,
) -> Result<(), KvError> {
    let mut dbs = HashMap::new();
    let mut db = |txn: &mut RwTxn<'_>, name: String| -> Result<Database<Bytes, Bytes>, KvError> {
        if let Some(db) = dbs.get(&name) {
            return Ok(*db);
        }
        let db = env
            .create_database::<Bytes, Bytes>(txn, Some(&name))
            .map_err(storage)?;
        dbs.insert(name, db);
        Ok(db)
    };
    for write in writes {
        match write {
            log::Write::Put {
                namespace,
                key,
                value,
            } => db(txn, namespace)?
                .put(txn, &key, &value)
                .map_err(storage)?,
            log::Write::Delete { namespace, key } => {
                db(txn, namespace)?.delete(txn, &key).map_err(storage)?;
            }
        }
    }
    Ok(())
}

impl Writer {
    /// The writer's thread: a group for each job it finds queued, each
    /// under the writer's lock (invariant 9).
    fn run(writer: &Mutex<Writer>, queue: &sync_mpsc::Receiver<Job>) {
        let mut retry_growth_at = None;
        let mut cores = Cores::of_this_thread();
        while let Ok(first) = queue.recv() {
            let writer = writer.lock().unwrap_or_else(PoisonError::into_inner);
            let mut found_full = writer.found_full.take();
            writer.group(first, queue, &mut found_full, &mut cores);
            let (size, used) = writer.after_group(found_full);
            if found_full || grow_due(size, used) {
                writer.grow(&mut retry_growth_at);
            }
        }
    }

    /// Settles and begins checkpoints after a group; `found_full` waits
    /// for one, since a full map may be full of pages the checkpoint pins.
    /// Answers the map's size and use.
    fn after_group(&self, found_full: bool) -> (usize, usize) {
        let (size, used) = self.record_use();
        let mut ahead = self.ahead.borrow_mut();
        let settled = self.settle_checkpoint(&mut ahead, false);
        let checkpointed = if found_full {
            self.checkpoint(&mut ahead)
        } else if checkpoint_due(&ahead, used) {
            self.begin_checkpoint(&mut ahead)
        } else {
            Ok(())
        };
        if let Err(e) = settled.and(checkpointed) {
            tracing::warn!(error = %e, "the key-value store could not checkpoint");
        }
        (size, used)
    }

    /// Commits `batch` as a group of its own, on the caller's thread
    /// (invariant 9); `None` leaves it, unapplied, to the writer's thread.
    fn commit_alone(
        &self,
        db: Database<Bytes, Bytes>,
        namespace: &str,
        batch: &mut ReadyBatch,
    ) -> Option<Result<BatchOutcome, KvError>> {
        let size = self.stats.map_size.load(Ordering::Relaxed) as usize;
        let used = self.stats.map_used.load(Ordering::Relaxed) as usize;
        if self.found_full.get() || grow_due(size, used) {
            return None;
        }
        // Dropped unless committed, the group aborts: nothing of it stays.
        let mut group = self.env.write_txn().ok()?;
        let outcome = batch.apply(&mut group, db).ok()?;
        let mut record = Record::default();
        for (key, value) in batch.written() {
            record.put(namespace, key, value);
        }
        if record.is_empty() {
            // Decided on the last commit, which is durable (invariant 7).
            group.abort();
            return Some(Ok(outcome));
        }
        if !self.ahead.borrow().log.fits(&record) {
            return None;
        }
        let mut found_full = false;
        let committed = self.commit(group, &record, &mut found_full);
        if committed.is_ok() {
            self.stats.groups.fetch_add(1, Ordering::Relaxed);
            self.stats.transactions.fetch_add(1, Ordering::Relaxed);
            self.stats.lone.fetch_add(1, Ordering::Relaxed);
        }
        self.found_full.set(found_full);
        self.after_group(false);
        Some(committed.map(|()| outcome))
    }

    /// One group: `first` and the transactions queued while it is served
    /// or while the group pauses for them (`grouping` 2).
    fn group(
        &self,
        first: Job,
        queue: &sync_mpsc::Receiver<Job>,
        found_full: &mut bool,
        cores: &mut Cores,
    ) {
        let mut group = match self.env.write_txn() {
            Ok(txn) => txn,
            Err(e) => {
                refuse(first, &self.write_error(e, found_full));
                return;
            }
        };
        let mut forming = Forming::default();
        let mut next = Some(first);
        while let Some(job) = next.take() {
            let served = match job {
                Job::Batch(batched) => {
                    next =
                        self.serve_run(&mut group, batched, queue, &mut forming, cores, found_full);
                    continue;
                }
                Job::Checkpoint(reply) => {
                    // Mid-group too: the group's record follows, in the new epoch.
                    let _ = reply.send(self.checkpoint(&mut self.ahead.borrow_mut()));
                    Served::Nothing
                }
                Job::Txn { db, namespace, ops } => self.serve_txn(
                    &mut group,
                    db,
                    namespace,
                    ops,
                    found_full,
                    &mut forming.record,
                ),
            };
            forming.add(served);
            next = self.next_member(queue, &mut forming, 0, cores);
        }
        let Forming {
            members,
            committed,
            record,
            ..
        } = forming;
        let outcome = if members == 0 {
            group.abort();
            Ok(())
        } else {
            let outcome = self.commit(group, &record, found_full);
            if outcome.is_ok() {
                self.stats.groups.fetch_add(1, Ordering::Relaxed);
                self.stats
                    .transactions
                    .fetch_add(members as u64, Ordering::Relaxed);
            }
            outcome
        };
        for waiter in committed {
            waiter.answer(outcome.clone());
        }
    }

    /// The next transaction queued for the group `forming`, with `pending`
    /// members beyond it (a run's batches, waiting for its commit),
    /// pausing for one while the group may (`grouping` 2 and 3); `None`
    /// when the group commits now.
    fn next_member(
        &self,
        queue: &sync_mpsc::Receiver<Job>,
        forming: &mut Forming,
        pending: usize,
        cores: &mut Cores,
    ) -> Option<Job> {
        let members = forming.members + pending;
        if members >= MAX_GROUP {
            return None;
        }
        let waiting = forming.committed.len() + pending;
        loop {
            if let Ok(job) = queue.try_recv() {
                return Some(job);
            }
            let pause = self
                .grouping
                .pause(members, waiting, forming.paused, || cores.sample())?;
            // Timed as slept: a sleep may end late.
            let slept = Instant::now();
            std::thread::sleep(pause);
            forming.paused += slept.elapsed();
        }
    }

    /// A run: `first` and every batch queued right after it, applied in
    /// one transaction nested in `group`, which spares each batch the copy
    /// of the pages the ones before it dirtied. Should one of them fail,
    /// the run's transaction is aborted and each of its batches applied
    /// again in a nested transaction of its own, so that one is refused
    /// alone (invariant 7). Answers the member that ended the run, if any.
    fn serve_run(
        &self,
        group: &mut RwTxn<'_>,
        first: Batched,
        queue: &sync_mpsc::Receiver<Job>,
        forming: &mut Forming,
        cores: &mut Cores,
        found_full: &mut bool,
    ) -> Option<Job> {
        let mut run: Vec<(Batched, BatchOutcome)> = Vec::new();
        let mut failed = None;
        let mut next = None;
        let committed = match self.env.nested_write_txn(group) {
            Err(_) => {
                failed = Some(first);
                false
            }
            Ok(mut txn) => {
                let mut batched = first;
                loop {
                    match batched.batch.apply(&mut txn, batched.db) {
                        Ok(outcome) => run.push((batched, outcome)),
                        Err(_) => {
                            failed = Some(batched);
                            break;
                        }
                    }
                    match self.next_member(queue, forming, run.len(), cores) {
                        Some(Job::Batch(more)) => batched = more,
                        other => {
                            next = other;
                            break;
                        }
                    }
                }
                // With a batch failed, the run's transaction aborts on drop.
                failed.is_none() && txn.commit().is_ok()
            }
        };
        if committed {
            for (batched, outcome) in run {
                let served = batched.applied(outcome, &mut forming.record);
                forming.add(served);
            }
            return next;
        }
        for batched in run.into_iter().map(|(batched, _)| batched).chain(failed) {
            let served = self.serve_batch(group, batched, found_full, &mut forming.record);
            forming.add(served);
        }
        next.or_else(|| self.next_member(queue, forming, 0, cores))
    }

    /// Logs the group's writes, then commits it without a sync (`log`
    /// invariants 1 and 5).
    fn commit(
        &self,
        group: RwTxn<'_>,
        record: &Record,
        found_full: &mut bool,
    ) -> Result<(), KvError> {
        if record.is_empty() {
            // Nothing written: every LMDB commit has its record (`log` 4).
            group.abort();
            return Ok(());
        }
        let mut ahead = self.ahead.borrow_mut();
        if !ahead.log.fits(record) {
            // The file is full: records go on in the other once the
            // checkpoint naming this one's epoch is finished (`log` 3).
            self.settle_checkpoint(&mut ahead, true)?;
            if !ahead.log.settled() {
                self.checkpoint(&mut ahead)?;
            }
            self.begin_checkpoint(&mut ahead)?;
        }
        let flushing = Instant::now();
        ahead
            .log
            .append(record, group.id() as u64)
            .map_err(io_error)?;
        self.stats.log_flush.observe(flushing.elapsed());
        group.commit().map_err(|e| {
            if let Err(void) = ahead.log.void_last() {
                tracing::error!(
                    error = %void,
                    "a group LMDB did not commit stays in the log, and a restart would apply it"
                );
            }
            self.write_error(e, found_full)
        })
    }

    /// Begins a checkpoint of the state LMDB holds now, unless one is
    /// under way (`log` 2).
    fn begin_checkpoint(&self, ahead: &mut Ahead) -> Result<(), KvError> {
        if ahead.pending.is_some() {
            return Ok(());
        }
        let pin = self.env.clone().static_read_txn().map_err(storage)?;
        let page = self.env.stat().page_size as usize;
        let metas = log::read_metas(&self.dir, page).map_err(io_error)?;
        let begun = ahead.log.begin(metas);
        ahead
            .checkpointer
            .begun
            .send(begun)
            .map_err(|_| checkpointer_stopped())?;
        // The writer's gauge, kept after every group: the state just read.
        let used = self.stats.map_used.load(Ordering::Relaxed) as usize;
        ahead.pending = Some((pin, used));
        Ok(())
    }

    /// Takes the outcome of the checkpoint under way, if any, waiting for
    /// it when `wait`. Finished, its state is the checkpoint; failed, the
    /// last one stands.
    fn settle_checkpoint(&self, ahead: &mut Ahead, wait: bool) -> Result<(), KvError> {
        if ahead.pending.is_none() {
            return Ok(());
        }
        let outcome = if wait {
            ahead.checkpointer.finished.recv().ok()
        } else {
            match ahead.checkpointer.finished.try_recv() {
                Err(sync_mpsc::TryRecvError::Empty) => return Ok(()),
                answer => answer.ok(),
            }
        };
        let (pin, used) = ahead.pending.take().expect("a checkpoint under way");
        let epoch = outcome
            .ok_or_else(checkpointer_stopped)?
            .map_err(io_error)?;
        ahead.log.finished(epoch);
        ahead.pin = Some(pin);
        ahead.checkpointed_at = used;
        self.stats.checkpoints.fetch_add(1, Ordering::Relaxed);
        Ok(())
    }

    /// A checkpoint of the state LMDB holds now, finished when it returns.
    fn checkpoint(&self, ahead: &mut Ahead) -> Result<(), KvError> {
        // One under way is of an earlier state, and this one replaces it
        // whatever its outcome.
        if let Err(e) = self.settle_checkpoint(ahead, true) {
            tracing::warn!(error = %e, "the key-value store could not checkpoint");
        }
        self.begin_checkpoint(ahead)?;
        self.settle_checkpoint(ahead, true)
    }

    /// Applies one batch in a transaction of its own nested in `group`,
    /// adding its writes to `record`; refuses it alone when it fails.
    fn serve_batch(
        &self,
        group: &mut RwTxn<'_>,
        mut batched: Batched,
        found_full: &mut bool,
        record: &mut Record,
    ) -> Served {
        // The nested transaction aborts on drop unless committed.
        let applied = self.env.nested_write_txn(group).and_then(|mut txn| {
            let outcome = batched.batch.apply(&mut txn, batched.db)?;
            txn.commit().map(|()| outcome)
        });
        match applied {
            Ok(outcome) => batched.applied(outcome, record),
            Err(e) => {
                let _ = batched.reply.send(Err(self.write_error(e, found_full)));
                Served::Nothing
            }
        }
    }

    /// Runs one request's transaction nested in `group`, adding its writes
    /// to `record`; returns its commit reply when it committed into the
    /// group.
    fn serve_txn(
        &self,
        group: &mut RwTxn<'_>,
        db: Database<Bytes, Bytes>,
        namespace: Arc<str>,
        ops: sync_mpsc::Receiver<Op>,
        found_full: &mut bool,
        record: &mut Record,
    ) -> Served {
        let mut txn = match self.env.nested_write_txn(group) {
            Ok(txn) => txn,
            Err(e) => {
                refuse_ops(ops, &self.write_error(e, found_full));
                return Served::Nothing;
            }
        };
        let mut member = Record::default();
        loop {
            let Ok(op) = ops.recv_timeout(IDLE_LIMIT) else {
                // Dropped, aborted or idle: the nested transaction aborts.
                return Served::Nothing;
            };
            // A write that found no room ends the transaction: it aborts on
            // return, and its later operations find it finished.
            let went_on = match op {
                Op::Get(key, reply) => {
                    let _ = reply.send(get(&txn, db, &key));
                    true
                }
                Op::GetAll(keys, reply) => {
                    let values = keys.iter().map(|key| get(&txn, db, key)).collect();
                    let _ = reply.send(values);
                    true
                }
                Op::Scan(table, range, reply) => {
                    let table = String::from_utf8(table).expect("validated on the request side");
                    let _ = reply.send(scan(&txn, db, &table, &range));
                    true
                }
                Op::Put(key, value, reply) => {
                    let outcome = db.put(&mut txn, &key, &value);
                    if outcome.is_ok() {
                        member.put(&namespace, &key, &value);
                    }
                    self.answer_write(outcome, reply, found_full)
                }
                Op::PutAll(writes, reply) => {
                    let outcome = writes.iter().try_for_each(|(key, value)| {
                        db.put(&mut txn, key, value)?;
                        member.put(&namespace, key, value);
                        Ok(())
                    });
                    self.answer_write(outcome, reply, found_full)
                }
                Op::Delete(key, reply) => {
                    let outcome = db.delete(&mut txn, &key);
                    if outcome.is_ok() {
                        member.delete(&namespace, &key);
                    }
                    self.answer_write(outcome, reply, found_full)
                }
                Op::Commit(writes, durability, reply) => {
                    let written = writes.iter().try_for_each(|(key, value)| {
                        db.put(&mut txn, key, value)?;
                        member.put(&namespace, key, value);
                        Ok(())
                    });
                    if let Err(e) = written {
                        // The nested transaction aborts on drop.
                        let _ = reply.send(Err(self.write_error(e, found_full)));
                        return Served::Nothing;
                    }
                    let committed = txn.commit();
                    if committed.is_ok() {
                        record.extend(member);
                    }
                    return match (committed, durability) {
                        (Ok(()), Durability::Wait) => Served::Waiting(Waiter::Txn(reply)),
                        (Ok(()), Durability::Detached) => {
                            let _ = reply.send(Ok(()));
                            Served::Detached
                        }
                        (Err(e), _) => {
                            let _ = reply.send(Err(self.write_error(e, found_full)));
                            Served::Nothing
                        }
                    };
                }
            };
            if !went_on {
                return Served::Nothing;
            }
        }
    }

    /// Answers a write; false when it found no room, which ends its
    /// transaction.
    fn answer_write<T>(
        &self,
        outcome: heed::Result<T>,
        reply: Reply<T>,
        found_full: &mut bool,
    ) -> bool {
        let outcome = outcome.map_err(|e| self.write_error(e, found_full));
        let went_on = !matches!(outcome, Err(KvError::Unavailable(_)));
        let _ = reply.send(outcome);
        went_on
    }

    /// What a transaction is told of `e`; notes a full map in `found_full`.
    /// A full map or disk is [`KvError::Unavailable`] with a message of our
    /// own, naming the setting or the resource, never the engine's text.
    fn write_error(&self, e: heed::Error, found_full: &mut bool) -> KvError {
        if is_map_full(&e) {
            *found_full = true;
            let ceiling = self.ceiling;
            return KvError::Unavailable(if self.env.info().map_size < ceiling {
                format!(
                    "the key-value store's map is full and is growing toward its ceiling \
                     ({CEILING_SETTING}, {ceiling} bytes); nothing was written; retry"
                )
            } else {
                format!(
                    "the key-value store is full: its map reached its ceiling \
                     ({CEILING_SETTING}, {ceiling} bytes); nothing was written"
                )
            });
        }
        match e {
            heed::Error::Io(io) if is_no_space(&io) => KvError::Unavailable(NO_SPACE.into()),
            e => storage(e),
        }
    }

    /// Publishes the map's size and high-water mark; returns them.
    fn record_use(&self) -> (usize, usize) {
        let info = self.env.info();
        let page = self.env.stat().page_size as usize;
        let used = (info.last_page_number + 1).saturating_mul(page);
        self.stats
            .map_size
            .store(info.map_size as u64, Ordering::Relaxed);
        self.stats.map_used.store(used as u64, Ordering::Relaxed);
        (info.map_size, used)
    }

    /// Doubles the map, up to the ceiling, once no read transaction is
    /// open; after a failed attempt, not again before `retry_at`.
    fn grow(&self, retry_at: &mut Option<Instant>) {
        if retry_at.is_some_and(|at| Instant::now() < at) {
            return;
        }
        let size = self.env.info().map_size;
        if size >= self.ceiling {
            return;
        }
        let target = size.saturating_mul(2).min(self.ceiling);
        let Some(closed) = self.gate.close(QUIESCE_LIMIT) else {
            *retry_at = Some(Instant::now() + GROW_RETRY);
            tracing::warn!(
                size,
                "the key-value map is to grow, but read transactions stayed open"
            );
            return;
        };
        // The checkpoint's pin is a read transaction too: it is let go for
        // the remap and taken again on the same state, the checkpoint's,
        // since nothing commits meanwhile.
        let mut ahead = self.ahead.borrow_mut();
        if let Err(e) = self.checkpoint(&mut ahead) {
            *retry_at = Some(Instant::now() + GROW_RETRY);
            tracing::warn!(error = %e, "the key-value map is to grow, but could not checkpoint");
            return;
        }
        ahead.pin = None;
        // SAFETY: no transaction is open in this process: the writer, the
        // only one that writes, is between groups, the closed gate holds
        // every read transaction out (invariant 6; `map_gate` 1), and the
        // checkpoint's pin was let go.
        let grown = unsafe { self.env.resize(target) };
        match self.env.clone().static_read_txn() {
            Ok(pin) => ahead.pin = Some(pin),
            Err(e) => tracing::error!(
                error = %e,
                "the key-value store lost its checkpoint's pin; it takes it again at the next"
            ),
        }
        drop(ahead);
        drop(closed);
        match grown {
            Ok(()) => {
                *retry_at = None;
                tracing::info!(from = size, to = target, "the key-value map grew");
            }
            Err(e) => {
                *retry_at = Some(Instant::now() + GROW_RETRY);
                tracing::warn!(error = %e, "the key-value map could not grow");
            }
        }
        self.record_use();
    }
}

/// Answers `job` when its transaction cannot start.
fn refuse(job: Job, error: &KvError) {
    match job {
        Job::Txn { ops, .. } => refuse_ops(ops, error),
        Job::Batch(batched) => drop(batched.reply.send(Err(error.clone()))),
        Job::Checkpoint(reply) => drop(reply.send(Err(error.clone()))),
    }
}

/// Answers every operation of a transaction the writer cannot serve.
fn refuse_ops(ops: sync_mpsc::Receiver<Op>, error: &KvError) {
    while let Ok(op) = ops.recv_timeout(IDLE_LIMIT) {
        let failed = matches!(op, Op::Commit(..));
        answer(op, error);
        if failed {
            return;
        }
    }
}

fn answer(op: Op, error: &KvError) {
    match op {
        Op::Get(_, r) => drop(r.send(Err(error.clone()))),
        Op::GetAll(_, r) => drop(r.send(Err(error.clone()))),
        Op::Scan(_, _, r) => drop(r.send(Err(error.clone()))),
        Op::Put(_, _, r) => drop(r.send(Err(error.clone()))),
        Op::PutAll(_, r) => drop(r.send(Err(error.clone()))),
        Op::Delete(_, r) => drop(r.send(Err(error.clone()))),
        Op::Commit(_, _, r) => drop(r.send(Err(error.clone()))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kv::{CounterSlot, SequencedBatch, SequencedWrite};

    fn open(name: &str) -> (std::path::PathBuf, Namespace) {
        open_with(
            name,
            MapLimits {
                initial: 64 << 20,
                ceiling: 64 << 20,
                log: 1 << 20,
            },
        )
    }

    fn open_with(name: &str, limits: MapLimits) -> (std::path::PathBuf, Namespace) {
        let dir = std::env::temp_dir().join(format!("kv-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let (_, mut namespaces) = KvStore::open(&dir, limits, &["test"]).unwrap();
        (dir, namespaces.remove(0))
    }

    /// Removes a test's store once its writer is idle: a checkpoint queued
    /// last is answered after any the writer began on its own.
    async fn remove(ns: &Namespace, dir: PathBuf) {
        ns.store().checkpoint().await.unwrap();
        std::fs::remove_dir_all(dir).unwrap();
    }

    fn counts(ns: &Namespace) -> (u64, u64) {
        let stats = ns.store.stats();
        (
            stats.groups.load(Ordering::Relaxed),
            stats.transactions.load(Ordering::Relaxed),
        )
    }

    fn all(limit: u32) -> Range {
        Range {
            start: Vec::new(),
            end: None,
            reverse: false,
            limit,
        }
    }

    #[tokio::test(flavor = "multi_thread")]
    async fn commit_is_visible_to_later_snapshots_only() {
        let (dir, ns) = open("visible");
        let before = ns.read().await.unwrap();
        let mut txn = ns.write().unwrap();
        txn.put("t", b"a", b"1".to_vec()).await.unwrap();
        assert_eq!(txn.get("t", b"a").await.unwrap(), Some(b"1".to_vec()));
        assert_eq!(ns.read().await.unwrap().get("t", b"a").unwrap(), None);
        txn.commit().await.unwrap();
        assert_eq!(
            ns.read().await.unwrap().get("t", b"a").unwrap(),
            Some(b"1".to_vec())
        );
        assert_eq!(before.get("t", b"a").unwrap(), None);
        assert_eq!(txn.get("t", b"a").await, Err(KvError::Finished));
        remove(&ns, dir).await;
    }

    #[tokio::test(flavor = "multi_thread")]
    async fn a_detached_commit_is_seen_at_once_and_becomes_durable() {
        let (dir, ns) = open("detached");
        let mut txn = ns.write().unwrap();
        txn.finish(
            vec![("t".to_string(), b"a".to_vec(), b"1".to_vec())],
            Durability::Detached,
        )
        .await
        .unwrap();
        // A later transaction sees it, in the same group or after it.
        let mut later = ns.write().unwrap();
        assert_eq!(later.get("t", b"a").await.unwrap(), Some(b"1".to_vec()));
        later.commit().await.unwrap();
        // Its group commits although nobody waits for it.
        assert_eq!(
            ns.read().await.unwrap().get("t", b"a").unwrap(),
            Some(b"1".to_vec())
        );
        assert_eq!(txn.get("t", b"a").await, Err(KvError::Finished));
        remove(&ns, dir).await;
    }

    /// A batch on counter `c` of table `t`, guarded by `receipt/<op>`,
    /// writing `e/<base + 1>` = `<base + 1>` and a receipt holding `base + 1`.
    fn sequenced(op: &str, expected: Option<u64>, ceiling: u64) -> SequencedBatch {
        SequencedBatch {
            guard: ("receipt".into(), op.as_bytes().to_vec()),
            counter: ("t".into(), b"c".to_vec()),
            expected,
            count: 1,
            ceiling,
            writes: vec![
                SequencedWrite {
                    table: "e".into(),
                    key: vec![0; 8],
                    value: vec![0; 8],
                    slots: vec![
                        CounterSlot {
                            in_key: true,
                            offset: 0,
                            addend: 1,
                        },
                        CounterSlot {
                            in_key: false,
                            offset: 0,
                            addend: 1,
                        },
                    ],
                },
                SequencedWrite {
                    table: "receipt".into(),
                    key: op.as_bytes().to_vec(),
                    value: [&b"r"[..], &[0; 8]].concat(),
                    slots: vec![CounterSlot {
                        in_key: false,
                        offset: 1,
                        addend: 1,
                    }],
                },
            ],
        }
    }

    async fn counter(ns: &Namespace) -> Option<Vec<u8>> {
        ns.read().await.unwrap().get("t", b"c").unwrap()
    }

    #[tokio::test(flavor = "multi_thread")]
    async fn a_sequenced_batch_is_decided_and_filled_by_the_writer() {
        let (dir, ns) = open("sequenced");
        // No counter yet: refused, nothing written.
        assert_eq!(
            ns.apply_sequenced(sequenced("a", None, 100)).await,
            Ok(BatchOutcome::NoCounter)
        );
        assert_eq!(ns.read().await.unwrap().get("receipt", b"a").unwrap(), None);
        set_counter(&ns, 5).await;
        let (groups, _) = counts(&ns);

        assert_eq!(
            ns.apply_sequenced(sequenced("a", Some(5), 100)).await,
            Ok(BatchOutcome::Applied(5))
        );
        // Answered durable: its group committed before the answer.
        assert_eq!(counts(&ns).0, groups + 1);
        let read = ns.read().await.unwrap();
        let six = 6u64.to_be_bytes().to_vec();
        assert_eq!(read.get("e", &six).unwrap(), Some(six.clone()));
        let receipt = [&b"r"[..], &six].concat();
        assert_eq!(read.get("receipt", b"a").unwrap(), Some(receipt.clone()));
        assert_eq!(read.get("t", b"c").unwrap(), Some(six.clone()));
        drop(read);

        // A replay finds its guard and writes nothing, whatever else differs.
        assert_eq!(
            ns.apply_sequenced(sequenced("a", Some(0), 0)).await,
            Ok(BatchOutcome::Guarded(receipt))
        );
        // The precondition and the ceiling are checked on the live counter.
        assert_eq!(
            ns.apply_sequenced(sequenced("b", Some(5), 100)).await,
            Ok(BatchOutcome::Mismatch(6))
        );
        assert_eq!(
            ns.apply_sequenced(sequenced("b", None, 6)).await,
            Ok(BatchOutcome::PastCeiling(6))
        );
        let read = ns.read().await.unwrap();
        assert_eq!(read.get("receipt", b"b").unwrap(), None);
        assert_eq!(read.get("e", &7u64.to_be_bytes()).unwrap(), None);
        assert_eq!(read.get("t", b"c").unwrap(), Some(six));
        drop(read);

        // A slot past its write is refused before it reaches the writer.
        let mut bad = sequenced("b", None, 100);
        bad.writes[0].slots[1].offset = 1;
        assert!(matches!(
            ns.apply_sequenced(bad).await,
            Err(KvError::BadBatch(_))
        ));
        assert_eq!(counter(&ns).await, Some(6u64.to_be_bytes().to_vec()));
        remove(&ns, dir).await;
    }

    fn lone(ns: &Namespace) -> u64 {
        ns.store.stats().lone.load(Ordering::Relaxed)
    }

    /// `sequenced`, with a write of `size` octets more.
    fn sequenced_with(op: &str, size: usize) -> SequencedBatch {
        let mut batch = sequenced(op, None, 100);
        batch.writes.push(SequencedWrite {
            table: "big".into(),
            key: op.as_bytes().to_vec(),
            value: vec![1; size],
            slots: Vec::new(),
        });
        batch
    }

    /// A batch applied while no other is commits as a group of its own on
    /// the caller's thread (invariant 9); a refusal decided alone commits
    /// nothing.
    #[tokio::test(flavor = "multi_thread")]
    async fn a_lone_batch_commits_a_group_of_its_own() {
        let (dir, ns) = open("lone");
        set_counter(&ns, 5).await;
        // The writer answers its group's members before it lets go of its
        // lock (invariant 9): a batch applied in between finds it held.
        while ns.store.idle_writer().is_none() {
            tokio::task::yield_now().await;
        }
        let (groups, transactions) = counts(&ns);
        let lone_before = lone(&ns);
        assert_eq!(
            ns.apply_sequenced(sequenced("a", None, 100)).await,
            Ok(BatchOutcome::Applied(5))
        );
        assert_eq!(counts(&ns), (groups + 1, transactions + 1));
        assert_eq!(lone(&ns), lone_before + 1);
        assert_eq!(counter(&ns).await, Some(6u64.to_be_bytes().to_vec()));
        let receipt = [&b"r"[..], &6u64.to_be_bytes()].concat();
        assert_eq!(
            ns.read().await.unwrap().get("receipt", b"a").unwrap(),
            Some(receipt.clone())
        );
        assert_eq!(
            ns.apply_sequenced(sequenced("a", None, 100)).await,
            Ok(BatchOutcome::Guarded(receipt))
        );
        assert_eq!(
            ns.apply_sequenced(sequenced("b", Some(4), 100)).await,
            Ok(BatchOutcome::Mismatch(6))
        );
        assert_eq!(counts(&ns), (groups + 1, transactions + 1));
        assert_eq!(lone(&ns), lone_before + 1);
        remove(&ns, dir).await;
    }

    /// A batch that finds the writer serving a group joins that group, after
    /// the transaction holding it, instead of committing alone.
    #[tokio::test(flavor = "multi_thread")]
    async fn a_batch_while_the_writer_serves_a_group_joins_it() {
        let (dir, ns) = open("joins");
        set_counter(&ns, 5).await;
        let (groups, transactions) = counts(&ns);
        let lone_before = lone(&ns);
        let mut first = ns.write().unwrap();
        // Answered by the writer: it is serving `first` now.
        first.get("t", b"none").await.unwrap();
        let batch = {
            let ns = ns.clone();
            tokio::spawn(async move { ns.apply_sequenced(sequenced("a", None, 100)).await })
        };
        let writes = vec![("t".into(), b"c".to_vec(), 7u64.to_be_bytes().to_vec())];
        first.commit_with(writes).await.unwrap();
        assert_eq!(batch.await.unwrap(), Ok(BatchOutcome::Applied(7)));
        assert_eq!(lone(&ns), lone_before);
        assert_eq!(counts(&ns).1, transactions + 2);
        assert!(counts(&ns).0 <= groups + 2);
        assert_eq!(counter(&ns).await, Some(8u64.to_be_bytes().to_vec()));
        remove(&ns, dir).await;
    }

    /// A lone batch whose record the log's file has no room for is left to
    /// the writer, which begins a new epoch for it (`log` 3).
    #[tokio::test(flavor = "multi_thread")]
    async fn a_lone_batch_the_log_has_no_room_for_is_the_writers() {
        let (dir, ns) = open("lone-log");
        set_counter(&ns, 0).await;
        let lone_before = lone(&ns);
        // Larger than a log file (half of the log's 1 MiB).
        assert_eq!(
            ns.apply_sequenced(sequenced_with("a", 600 << 10)).await,
            Ok(BatchOutcome::Applied(0))
        );
        assert_eq!(lone(&ns), lone_before);
        assert_eq!(
            ns.read().await.unwrap().get("big", b"a").unwrap(),
            Some(vec![1; 600 << 10])
        );
        remove(&ns, dir).await;
    }

    /// A lone batch that finds the map full is left to the writer, which
    /// refuses it and grows the map; the batch is taken once it has grown,
    /// and once the map is far from full again, batches commit alone.
    #[tokio::test(flavor = "multi_thread")]
    async fn a_lone_batch_that_finds_the_map_full_is_the_writers() {
        let (dir, ns) = open_with(
            "lone-full",
            MapLimits {
                initial: 256 << 10,
                ceiling: 16 << 20,
                log: 4 << 20,
            },
        );
        set_counter(&ns, 0).await;
        let lone_before = lone(&ns);
        let mut refusals = 0;
        let outcome = loop {
            match ns.apply_sequenced(sequenced_with("a", 300 << 10)).await {
                Err(KvError::Unavailable(message)) if refusals < 8 => {
                    assert!(message.contains("is growing"), "{message}");
                    refusals += 1;
                }
                outcome => break outcome,
            }
        };
        assert_eq!(outcome, Ok(BatchOutcome::Applied(0)));
        assert!(refusals > 0, "the first batch fit");
        // Each of the writer's groups grows the map while it is due to:
        // within a few more batches, one finds it far from full.
        let mut position = 1;
        while lone(&ns) == lone_before && position < 5 {
            let op = format!("b{position}");
            assert_eq!(
                ns.apply_sequenced(sequenced(&op, None, 100)).await,
                Ok(BatchOutcome::Applied(position))
            );
            position += 1;
        }
        assert_eq!(lone(&ns), lone_before + 1);
        remove(&ns, dir).await;
    }

    /// Commits `value` as the counter the batches of these tests draw from.
    async fn set_counter(ns: &Namespace, value: u64) {
        let mut txn = ns.write().unwrap();
        txn.commit_with(vec![(
            "t".into(),
            b"c".to_vec(),
            value.to_be_bytes().to_vec(),
        )])
        .await
        .unwrap();
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
    async fn concurrent_batches_on_one_counter_each_draw_their_own_number() {
        let (dir, ns) = open("sequenced-hot");
        set_counter(&ns, 0).await;
        let (groups, _) = counts(&ns);
        let tasks: Vec<_> = (0..64)
            .map(|i| {
                let ns = ns.clone();
                tokio::spawn(async move {
                    ns.apply_sequenced(sequenced(&format!("op{i}"), None, 1000))
                        .await
                        .unwrap()
                })
            })
            .collect();
        let mut bases = Vec::new();
        for task in tasks {
            match task.await.unwrap() {
                BatchOutcome::Applied(base) => bases.push(base),
                other => panic!("a batch was not applied: {other:?}"),
            }
        }
        bases.sort_unstable();
        assert_eq!(bases, (0..64).collect::<Vec<u64>>());
        assert_eq!(counter(&ns).await, Some(64u64.to_be_bytes().to_vec()));
        let read = ns.read().await.unwrap();
        for i in 0..64u64 {
            let position = (i + 1).to_be_bytes().to_vec();
            assert_eq!(read.get("e", &position).unwrap(), Some(position.clone()));
        }
        let (after, _) = counts(&ns);
        assert!(after > groups && after - groups <= 64);
        remove(&ns, dir).await;
    }

    #[tokio::test(flavor = "multi_thread")]
    async fn batched_reads_and_a_commit_with_writes() {
        let (dir, ns) = open("batched");
        let mut txn = ns.write().unwrap();
        txn.put("t", b"a", b"1".to_vec()).await.unwrap();
        let keys = vec![
            ("t".to_string(), b"a".to_vec()),
            ("t".to_string(), b"b".to_vec()),
        ];
        assert_eq!(
            txn.get_all(keys).await.unwrap(),
            vec![Some(b"1".to_vec()), None]
        );
        txn.commit_with(vec![("t".to_string(), b"b".to_vec(), b"2".to_vec())])
            .await
            .unwrap();
        let read = ns.read().await.unwrap();
        assert_eq!(read.get("t", b"b").unwrap(), Some(b"2".to_vec()));
        // A refused write aborts the whole transaction.
        let mut txn = ns.write().unwrap();
        txn.put("t", b"c", b"3".to_vec()).await.unwrap();
        let too_long = vec![("t".to_string(), vec![0u8; 600], Vec::new())];
        assert_eq!(txn.commit_with(too_long).await, Err(KvError::TooLarge));
        assert_eq!(ns.read().await.unwrap().get("t", b"c").unwrap(), None);
        remove(&ns, dir).await;
    }

    #[tokio::test(flavor = "multi_thread")]
    async fn dropped_and_aborted_transactions_leave_nothing() {
        let (dir, ns) = open("abort");
        let txn = ns.write().unwrap();
        txn.put("t", b"dropped", b"x".to_vec()).await.unwrap();
        drop(txn);
        let mut txn = ns.write().unwrap();
        txn.put("t", b"aborted", b"x".to_vec()).await.unwrap();
        txn.abort();
        let mut txn = ns.write().unwrap();
        txn.put("t", b"kept", b"x".to_vec()).await.unwrap();
        txn.commit().await.unwrap();
        let read = ns.read().await.unwrap();
        let keys: Vec<Vec<u8>> = read
            .scan("t", &all(10))
            .unwrap()
            .into_iter()
            .map(|(k, _)| k)
            .collect();
        assert_eq!(keys, vec![b"kept".to_vec()]);
        remove(&ns, dir).await;
    }

    #[tokio::test(flavor = "multi_thread")]
    async fn scans_stay_inside_their_table() {
        let (dir, ns) = open("scan");
        let mut txn = ns.write().unwrap();
        for (table, key) in [
            ("a", &b"1"[..]),
            ("a", b"2"),
            ("a", b"3"),
            ("ab", b"0"),
            ("b", b""),
        ] {
            txn.put(table, key, key.to_vec()).await.unwrap();
        }
        let in_txn = txn.scan("a", all(10)).await.unwrap();
        assert_eq!(in_txn.len(), 3);
        txn.commit().await.unwrap();
        let read = ns.read().await.unwrap();
        let keys = |range: Range| -> Vec<Vec<u8>> {
            read.scan("a", &range)
                .unwrap()
                .into_iter()
                .map(|(k, _)| k)
                .collect()
        };
        assert_eq!(
            keys(all(10)),
            vec![b"1".to_vec(), b"2".to_vec(), b"3".to_vec()]
        );
        assert_eq!(keys(all(2)), vec![b"1".to_vec(), b"2".to_vec()]);
        let reverse = Range {
            reverse: true,
            ..all(2)
        };
        assert_eq!(keys(reverse), vec![b"3".to_vec(), b"2".to_vec()]);
        let bounded = Range {
            start: b"2".to_vec(),
            end: Some(b"3".to_vec()),
            ..all(10)
        };
        assert_eq!(keys(bounded), vec![b"2".to_vec()]);
        assert_eq!(read.get("b", b"").unwrap(), Some(Vec::new()));
        assert!(matches!(read.get("", b"x"), Err(KvError::BadTable(_))));
        assert_eq!(read.get("t", &[0u8; 600]), Err(KvError::TooLarge));
        remove(&ns, dir).await;
    }

    /// Concurrent read-modify-write transactions on one counter: each sees
    /// the others' committed increments (they are serialized by the writer),
    /// so none is lost.
    #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
    async fn concurrent_transactions_are_serialized_and_grouped() {
        let (dir, ns) = open("group");
        let tasks: Vec<_> = (0..64)
            .map(|_| {
                let ns = ns.clone();
                tokio::spawn(async move {
                    let mut txn = ns.write().unwrap();
                    let current = txn.get("t", b"counter").await.unwrap();
                    let n = current.map_or(0, |v| u64::from_be_bytes(v.try_into().unwrap()));
                    txn.put("t", b"counter", (n + 1).to_be_bytes().to_vec())
                        .await
                        .unwrap();
                    txn.commit().await.unwrap();
                })
            })
            .collect();
        for task in tasks {
            task.await.unwrap();
        }
        let value = ns
            .read()
            .await
            .unwrap()
            .get("t", b"counter")
            .unwrap()
            .unwrap();
        assert_eq!(u64::from_be_bytes(value.try_into().unwrap()), 64);
        let (groups, transactions) = counts(&ns);
        assert_eq!(transactions, 64);
        assert!(
            groups < transactions,
            "no two transactions shared a commit ({groups} commits)"
        );
        remove(&ns, dir).await;
    }

    /// Commits `key` in a transaction queued now, answered in the background.
    fn queued_commit(ns: &Namespace, key: &str) -> tokio::task::JoinHandle<()> {
        let mut txn = ns.write().unwrap();
        let writes = vec![("t".into(), key.as_bytes().to_vec(), b"v".to_vec())];
        tokio::spawn(async move { txn.commit_with(writes).await.unwrap() })
    }

    /// Three transactions queued behind one the writer is serving, then a
    /// fourth 100 ms after they commit; the commits it took for all four.
    async fn groups_for_a_late_fourth(ns: &Namespace, round: u32) -> u64 {
        let (groups, transactions) = counts(ns);
        let mut first = ns.write().unwrap();
        // Answered by the writer: it is serving `first` now.
        first.get("t", b"none").await.unwrap();
        let queued = [1, 2].map(|i| queued_commit(ns, &format!("{round}-{i}")));
        let writes = vec![("t".into(), format!("{round}-0").into_bytes(), b"v".to_vec())];
        let first = tokio::spawn(async move { first.commit_with(writes).await.unwrap() });
        tokio::time::sleep(Duration::from_millis(100)).await;
        let late = queued_commit(ns, &format!("{round}-3"));
        for task in queued.into_iter().chain([first, late]) {
            task.await.unwrap();
        }
        let (groups_after, transactions_after) = counts(ns);
        assert_eq!(transactions_after - transactions, 4);
        groups_after - groups
    }

    #[tokio::test]
    async fn a_group_pauses_for_requests_still_being_served() {
        let (dir, ns) = open("wait");
        let grouping = ns.store().grouping();
        grouping.set_wait(Duration::from_secs(1));
        grouping.assume_saturated();
        // Three members wait in the group, and more requests are served
        // outside it than keep the cores busy: the writer pauses, and the
        // fourth joins.
        let cores = std::thread::available_parallelism().unwrap().get();
        let busy = cores * crate::kv::grouping::BUSY_PER_CORE;
        let mut served: Vec<_> = (0..3 + busy + 1).map(|_| grouping.serve()).collect();
        assert_eq!(groups_for_a_late_fourth(&ns, 0).await, 1);
        // No more than that: it commits at once, and the fourth makes a
        // group of its own.
        served.pop();
        assert_eq!(groups_for_a_late_fourth(&ns, 1).await, 2);
        // No wait set: the same.
        served.push(grouping.serve());
        grouping.set_wait(Duration::ZERO);
        assert_eq!(groups_for_a_late_fourth(&ns, 2).await, 2);
        remove(&ns, dir).await;
    }

    /// Writes `count` values of `size` bytes, one transaction each.
    async fn fill(ns: &Namespace, from: u32, count: u32, size: usize) -> Result<(), KvError> {
        for i in from..from + count {
            let mut txn = ns.write().unwrap();
            txn.commit_with(vec![("t".into(), i.to_be_bytes().to_vec(), vec![7; size])])
                .await?;
        }
        Ok(())
    }

    #[tokio::test(flavor = "multi_thread")]
    async fn the_map_grows_past_its_initial_size_up_to_its_ceiling() {
        let (dir, ns) = open_with(
            "grow",
            MapLimits {
                initial: 256 << 10,
                ceiling: 4 << 20,
                log: 1 << 20,
            },
        );
        let store = ns.store();
        assert_eq!(store.map_use().size, 256 << 10);
        fill(&ns, 0, 128, 16 << 10).await.unwrap();
        let grown = store.map_use();
        assert!(grown.used > 1 << 20, "{grown:?}");
        assert!(grown.size > 1 << 20 && grown.size <= 4 << 20, "{grown:?}");
        let read = ns.read().await.unwrap();
        for i in 0..128u32 {
            assert_eq!(
                read.get("t", &i.to_be_bytes()).unwrap(),
                Some(vec![7; 16 << 10])
            );
        }
        remove(&ns, dir).await;
    }

    /// A map of 512 KiB that may not grow.
    const AT_CEILING: MapLimits = MapLimits {
        initial: 512 << 10,
        ceiling: 512 << 10,
        log: 1 << 20,
    };

    /// A transaction that finds the map full at its ceiling is refused
    /// alone, naming the setting: the next one in its group commits, and
    /// what was there stays readable.
    #[tokio::test(flavor = "multi_thread")]
    async fn a_full_map_refuses_the_transaction_alone_and_names_its_ceiling() {
        let (dir, ns) = open_with("ceiling", AT_CEILING);
        fill(&ns, 0, 4, 1 << 10).await.unwrap();
        let too_big = ns.write().unwrap();
        too_big.put("t", b"first", b"x".to_vec()).await.unwrap();
        // Queued while `too_big` is served: the same group.
        let mut queued = ns.write().unwrap();
        let neighbour = tokio::spawn(async move {
            queued
                .commit_with(vec![("t".into(), b"small".to_vec(), b"y".to_vec())])
                .await
        });
        let refused = too_big.put("t", b"big", vec![1; 1 << 20]).await;
        let Err(KvError::Unavailable(message)) = refused else {
            panic!("a write past the ceiling was answered {refused:?}");
        };
        assert!(message.contains(CEILING_SETTING), "{message}");
        assert!(message.contains("524288 bytes"), "{message}");
        assert!(!message.contains("MDB"), "{message}");
        assert_eq!(too_big.get("t", b"first").await, Err(KvError::Finished));
        neighbour.await.unwrap().unwrap();
        let read = ns.read().await.unwrap();
        assert_eq!(read.get("t", b"small").unwrap(), Some(b"y".to_vec()));
        assert_eq!(read.get("t", b"first").unwrap(), None);
        assert_eq!(
            read.get("t", &0u32.to_be_bytes()).unwrap(),
            Some(vec![7; 1 << 10])
        );
        assert_eq!(ns.store().map_use().size, 512 << 10);
        remove(&ns, dir).await;
    }

    /// Batches queued behind one transaction join its group as one run; the
    /// last finds the map full at its ceiling. It is refused alone: the
    /// batches before it in the run are applied again, each on its own,
    /// and commit in the group with the transaction.
    #[tokio::test(flavor = "multi_thread")]
    async fn a_batch_that_finds_the_map_full_is_refused_alone_from_its_run() {
        let (dir, ns) = open_with("run", AT_CEILING);
        set_counter(&ns, 0).await;
        let too_big = sequenced_with("c", 1 << 20);
        let (groups, transactions) = counts(&ns);
        let mut first = ns.write().unwrap();
        // Answered by the writer: it is serving `first` now.
        first.get("t", b"none").await.unwrap();
        let batches = {
            let ns = ns.clone();
            // Polled in order: queued as "a", "b", then the one too big.
            tokio::spawn(async move {
                tokio::join!(
                    ns.apply_sequenced(sequenced("a", None, 100)),
                    ns.apply_sequenced(sequenced("b", None, 100)),
                    ns.apply_sequenced(too_big),
                )
            })
        };
        tokio::time::sleep(Duration::from_millis(100)).await;
        let writes = vec![("t".into(), b"first".to_vec(), b"v".to_vec())];
        first.commit_with(writes).await.unwrap();
        let (a, b, refused) = batches.await.unwrap();
        assert_eq!(a, Ok(BatchOutcome::Applied(0)));
        assert_eq!(b, Ok(BatchOutcome::Applied(1)));
        let Err(KvError::Unavailable(message)) = refused else {
            panic!("a batch past the ceiling was answered {refused:?}");
        };
        assert!(message.contains(CEILING_SETTING), "{message}");
        assert_eq!(
            counts(&ns),
            (groups + 1, transactions + 3),
            "the transaction and two batches, in one group"
        );
        assert_eq!(counter(&ns).await, Some(2u64.to_be_bytes().to_vec()));
        let read = ns.read().await.unwrap();
        for (op, position) in [(b"a", 1u64), (b"b", 2)] {
            let position = position.to_be_bytes().to_vec();
            assert_eq!(read.get("e", &position).unwrap(), Some(position.clone()));
            let receipt = [&b"r"[..], &position].concat();
            assert_eq!(read.get("receipt", op).unwrap(), Some(receipt));
        }
        assert_eq!(read.get("e", &3u64.to_be_bytes()).unwrap(), None);
        assert_eq!(read.get("receipt", b"c").unwrap(), None);
        assert_eq!(read.get("big", b"c").unwrap(), None);
        assert_eq!(read.get("t", b"first").unwrap(), Some(b"v".to_vec()));
        drop(read);
        remove(&ns, dir).await;
    }

    /// One write larger than the room left below the ceiling: refused as
    /// the map grows, then taken once it has grown enough.
    #[tokio::test(flavor = "multi_thread")]
    async fn a_write_that_finds_the_map_full_below_its_ceiling_succeeds_once_it_grew() {
        let (dir, ns) = open_with(
            "regrow",
            MapLimits {
                initial: 256 << 10,
                ceiling: 4 << 20,
                log: 1 << 20,
            },
        );
        let mut refusals = Vec::new();
        for _ in 0..8 {
            match fill(&ns, 0, 1, 768 << 10).await {
                Ok(()) => break,
                Err(KvError::Unavailable(message)) => refusals.push(message),
                Err(e) => panic!("{e:?}"),
            }
        }
        assert!(!refusals.is_empty(), "the first write fit");
        for message in &refusals {
            assert!(message.contains("is growing"), "{message}");
            assert!(message.contains(CEILING_SETTING), "{message}");
        }
        let read = ns.read().await.unwrap();
        assert_eq!(
            read.get("t", &0u32.to_be_bytes()).unwrap(),
            Some(vec![7; 768 << 10])
        );
        assert!(ns.store().map_use().size >= 1 << 20);
        remove(&ns, dir).await;
    }

    /// A read transaction open when the map must grow holds the growth
    /// back (writes that need it are refused meanwhile), never the writer
    /// for long; once it ends, the map grows and the write is taken.
    #[tokio::test(flavor = "multi_thread")]
    async fn an_open_reader_delays_growth_without_stalling_writes() {
        let (dir, ns) = open_with(
            "reader",
            MapLimits {
                initial: 256 << 10,
                ceiling: 4 << 20,
                log: 1 << 20,
            },
        );
        let reader = ns.read().await.unwrap();
        let refused = fill(&ns, 0, 1, 512 << 10).await;
        assert!(
            matches!(refused, Err(KvError::Unavailable(_))),
            "{refused:?}"
        );
        // Refused again while the reader stays: the writer gave up
        // waiting for it, and does not wait again at once.
        let again = fill(&ns, 0, 1, 512 << 10).await;
        assert!(matches!(again, Err(KvError::Unavailable(_))), "{again:?}");
        assert_eq!(ns.store().map_use().size, 256 << 10);
        // A small write that fits is not held up by the pending growth.
        fill(&ns, 1, 1, 1 << 10).await.unwrap();
        drop(reader);
        let started = Instant::now();
        loop {
            match fill(&ns, 0, 1, 512 << 10).await {
                Ok(()) => break,
                Err(KvError::Unavailable(_)) if started.elapsed() < Duration::from_secs(30) => {
                    tokio::time::sleep(Duration::from_millis(50)).await
                }
                Err(e) => panic!("{e:?}"),
            }
        }
        assert!(ns.store().map_use().size > 256 << 10);
        remove(&ns, dir).await;
    }

    /// What one round of the crash tests writes: overwrites, deletes and
    /// fresh keys across many groups, so later commits free and reuse
    /// pages; the model is the state they leave.
    async fn churn(
        ns: &Namespace,
        round: u32,
        model: &mut std::collections::BTreeMap<Vec<u8>, Vec<u8>>,
    ) {
        for group in 0..40u32 {
            let mut txn = ns.write().unwrap();
            for i in 0..25u32 {
                let key = ((group * 25 + i) % 600).to_be_bytes().to_vec();
                if (i + round).is_multiple_of(7) {
                    txn.delete("t", &key).await.unwrap();
                    model.remove(&key);
                } else {
                    let value = vec![(round * 31 + group + i) as u8; 300];
                    txn.put("t", &key, value.clone()).await.unwrap();
                    model.insert(key, value);
                }
            }
            txn.commit().await.unwrap();
        }
    }

    /// A copy of the store's files as a crash leaves them: the data file's
    /// pages from `data`, the log and checkpoint as they stand.
    fn crashed_copy(dir: &Path, name: &str, data: &[u8]) -> PathBuf {
        let copy = dir.with_file_name(format!("{}-{name}", dir.file_name().unwrap().display()));
        let _ = std::fs::remove_dir_all(&copy);
        std::fs::create_dir_all(&copy).unwrap();
        for file in ["log.0", "log.1", "checkpoint"] {
            std::fs::copy(dir.join(file), copy.join(file)).unwrap();
        }
        std::fs::write(copy.join("data.mdb"), data).unwrap();
        copy
    }

    async fn assert_holds(dir: &Path, model: &std::collections::BTreeMap<Vec<u8>, Vec<u8>>) {
        let limits = MapLimits {
            initial: 64 << 20,
            ceiling: 64 << 20,
            log: 1 << 20,
        };
        let (_, mut namespaces) = KvStore::open(dir, limits, &["test"]).unwrap();
        let ns = namespaces.remove(0);
        let entries = ns.read().await.unwrap().scan("t", &all(100_000)).unwrap();
        let held: std::collections::BTreeMap<_, _> = entries.into_iter().collect();
        assert_eq!(held.len(), model.len(), "{}", dir.display());
        assert!(
            held == *model,
            "{}: the recovered state differs",
            dir.display()
        );
        // Its store stays open (a test's writer is never stopped).
        let _ = std::fs::remove_dir_all(dir);
    }

    #[tokio::test(flavor = "multi_thread")]
    async fn a_crash_after_any_unsynced_writes_recovers_every_commit() {
        // A log large enough that only the test checkpoints.
        let limits = MapLimits {
            initial: 64 << 20,
            ceiling: 64 << 20,
            log: 64 << 20,
        };
        let (dir, ns) = open_with("crash", limits);
        let mut model = std::collections::BTreeMap::new();
        // Keys only the checkpoint holds: nothing after it writes them.
        for group in 0..20u32 {
            let mut txn = ns.write().unwrap();
            for i in 0..30u32 {
                let key = (10_000 + group * 30 + i).to_be_bytes().to_vec();
                let value = vec![(group + i) as u8; 200];
                txn.put("t", &key, value.clone()).await.unwrap();
                model.insert(key, value);
            }
            txn.commit().await.unwrap();
        }
        churn(&ns, 0, &mut model).await;
        // A checkpoint: the state the data file holds for certain.
        ns.store().checkpoint().await.unwrap();
        let checkpoints = ns.store().stats().checkpoints.load(Ordering::Relaxed);
        let synced = std::fs::read(dir.join("data.mdb")).unwrap();
        for round in 1..4 {
            churn(&ns, round, &mut model).await;
        }
        assert_eq!(
            ns.store().stats().checkpoints.load(Ordering::Relaxed),
            checkpoints
        );
        // Every commit since the checkpoint is unsynced: a power cut may
        // leave any of their pages, meta pages included, or none.
        let now = std::fs::read(dir.join("data.mdb")).unwrap();
        let page = ns.store().env.stat().page_size as usize;
        let changed: Vec<usize> = (0..now.len() / page)
            .filter(|p| {
                synced.get(p * page..(p + 1) * page) != Some(&now[p * page..(p + 1) * page])
            })
            .collect();
        assert!(
            changed.len() > 10,
            "the rounds rewrote pages: {}",
            changed.len()
        );

        assert_holds(&crashed_copy(&dir, "all", &now), &model).await;
        assert_holds(&crashed_copy(&dir, "none", &synced), &model).await;
        // Every other changed page, the newest meta page among them.
        let mut partial = synced.clone();
        partial.resize(now.len(), 0);
        for (n, p) in changed.iter().enumerate() {
            if n % 2 == 0 || *p < 2 {
                partial[p * page..(p + 1) * page].copy_from_slice(&now[p * page..(p + 1) * page]);
            }
        }
        assert_holds(&crashed_copy(&dir, "half", &partial), &model).await;
        remove(&ns, dir).await;
    }

    #[tokio::test(flavor = "multi_thread")]
    async fn a_crash_amid_checkpoints_in_the_background_recovers_every_commit() {
        // A log so small that checkpoints begin every few groups and its
        // files fill while one is under way.
        let limits = MapLimits {
            initial: 64 << 20,
            ceiling: 64 << 20,
            log: 64 << 10,
        };
        let (dir, ns) = open_with("crash-background", limits);
        let mut model = std::collections::BTreeMap::new();
        for round in 0..6 {
            churn(&ns, round, &mut model).await;
            // The writer is idle between groups; a checkpoint may be
            // under way, which changes no page a commit made.
            let now = std::fs::read(dir.join("data.mdb")).unwrap();
            assert_holds(&crashed_copy(&dir, &format!("bg{round}"), &now), &model).await;
        }
        assert!(ns.store().stats().checkpoints.load(Ordering::Relaxed) > 6);
        remove(&ns, dir).await;
    }
}
