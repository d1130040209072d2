//! The key-value store on LMDB through heed, with group commit.
//!
//! Layout: one LMDB environment; one database per service (its namespace);
//! inside it, a table's keys are `table ‖ 0x00 ‖ key`, so a table is a
//! contiguous key range and a scan is a cursor walk.
//!
//! Invariants:
//! 1. One thread, the writer, owns every write transaction. A request's write
//!    transaction is a nested transaction of the writer's current group
//!    transaction; its operations are sent to the writer and answered in order.
//! 2. The writer serves one request's transaction at a time, start to finish;
//!    requests queued meanwhile join the same group. A group is one LMDB
//!    commit, hence one fsync. No request hears "committed" before that
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
//! 7. A sequenced batch ([`Namespace::apply_sequenced`]) is one group member
//!    decided and applied in one step, nested like a transaction; it is
//!    answered, whatever it met, once its group commits ("Key-value store"
//!    10 in `docs/design.md`).

use super::batch::{BatchOutcome, ReadyBatch, SequencedBatch};
use super::{
    full_writes, scan_bounds, table_key, table_prefix, Durability, Entries, KvError, Range,
    ScanBounds, Stats, TableWrites, IDLE_LIMIT,
};
use crate::map_gate::{MapGate, ReadPass};
use crate::storage::{is_no_space, NO_SPACE};
use heed::types::Bytes;
use heed::{Database, Env, EnvOpenOptions, MdbError, RoTxn, RwTxn, WithoutTls};
use std::ops::Bound;
use std::path::Path;
use std::sync::atomic::Ordering;
use std::sync::mpsc as sync_mpsc;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::sync::oneshot;

/// Transactions committed together at most.
const MAX_GROUP: usize = 256;
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
        ops: sync_mpsc::Receiver<Op>,
    },
    /// A sequenced batch, decided and applied in one step (invariant 7).
    Batch {
        db: Database<Bytes, Bytes>,
        batch: ReadyBatch,
        reply: Reply<BatchOutcome>,
    },
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
    stats: Arc<Stats>,
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
        let mut options = EnvOpenOptions::new().read_txn_without_tls();
        options
            .map_size(initial)
            .max_dbs(namespaces.len().max(1) as u32)
            .max_readers(1024);
        // SAFETY: the environment is opened once per process (the host owns
        // the data directory) and never with conflicting flags.
        let env = unsafe { options.open(dir) }.map_err(storage)?;
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
        txn.commit().map_err(storage)?;

        let (jobs, queue) = sync_mpsc::channel();
        let gate = Arc::new(MapGate::default());
        let writer = Writer {
            env: env.clone(),
            stats: Arc::new(Stats::default()),
            gate: Arc::clone(&gate),
            ceiling,
        };
        writer.record_use();
        let stats = Arc::clone(&writer.stats);
        std::thread::Builder::new()
            .name("kv-writer".into())
            .spawn(move || writer.run(&queue))
            .map_err(|e| KvError::Storage(e.to_string()))?;
        let store = Arc::new(KvStore {
            env,
            jobs,
            stats,
            gate,
            ceiling,
        });
        let namespaces = dbs
            .into_iter()
            .map(|db| Namespace {
                store: Arc::clone(&store),
                db,
            })
            .collect();
        Ok((store, namespaces))
    }

    /// Commit counts so far.
    pub fn stats(&self) -> &Stats {
        &self.stats
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
                ops: rx,
            })
            .map_err(|_| KvError::Storage("the writer stopped".into()))?;
        Ok(WriteTxn { ops: Some(ops) })
    }

    /// Applies a sequenced batch in one exchange with the writer; answers
    /// once what it read, and what it wrote, is durable (invariant 7).
    pub async fn apply_sequenced(&self, batch: SequencedBatch) -> Result<BatchOutcome, KvError> {
        let batch = batch.ready()?;
        let (reply, answer) = oneshot::channel();
        self.store
            .jobs
            .send(Job::Batch {
                db: self.db,
                batch,
                reply,
            })
            .map_err(|_| KvError::Storage("the writer stopped".into()))?;
        answer
            .await
            .map_err(|_| KvError::Storage("the writer stopped".into()))?
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
}

impl Writer {
    fn run(&self, queue: &sync_mpsc::Receiver<Job>) {
        let mut retry_growth_at = None;
        while let Ok(first) = queue.recv() {
            let mut found_full = false;
            self.group(first, queue, &mut found_full);
            let (size, used) = self.record_use();
            if found_full || used.saturating_mul(GROW_AT.1) >= size.saturating_mul(GROW_AT.0) {
                self.grow(&mut retry_growth_at);
            }
        }
    }

    /// One group: `first` and the transactions queued while it is served.
    fn group(&self, first: Job, queue: &sync_mpsc::Receiver<Job>, found_full: &mut bool) {
        let mut group = match self.env.write_txn() {
            Ok(txn) => txn,
            Err(e) => {
                refuse(first, &self.write_error(e, found_full));
                return;
            }
        };
        let mut committed: Vec<Waiter> = Vec::new();
        let mut members = 0;
        let mut next = Some(first);
        while let Some(job) = next.take() {
            match self.serve(&mut group, job, found_full) {
                Served::Nothing => {}
                Served::Waiting(reply) => {
                    committed.push(reply);
                    members += 1;
                }
                Served::Detached => members += 1,
            }
            if members < MAX_GROUP {
                next = queue.try_recv().ok();
            }
        }
        let outcome = if members == 0 {
            group.abort();
            Ok(())
        } else {
            let outcome = group.commit().map_err(|e| self.write_error(e, found_full));
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

    /// Runs one transaction nested in `group`; returns its commit reply when
    /// it committed into the group.
    fn serve(&self, group: &mut RwTxn<'_>, job: Job, found_full: &mut bool) -> Served {
        let mut txn = match self.env.nested_write_txn(group) {
            Ok(txn) => txn,
            Err(e) => {
                refuse(job, &self.write_error(e, found_full));
                return Served::Nothing;
            }
        };
        let (db, ops) = match job {
            Job::Txn { db, ops } => (db, ops),
            Job::Batch { db, batch, reply } => {
                // The nested transaction aborts on drop unless committed.
                let applied = batch
                    .apply(&mut txn, db)
                    .and_then(|outcome| txn.commit().map(|()| outcome));
                return match applied {
                    Ok(outcome) => Served::Waiting(Waiter::Batch(reply, outcome)),
                    Err(e) => {
                        let _ = reply.send(Err(self.write_error(e, found_full)));
                        Served::Nothing
                    }
                };
            }
        };
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
                    self.answer_write(outcome, reply, found_full)
                }
                Op::PutAll(writes, reply) => {
                    let outcome = writes
                        .iter()
                        .try_for_each(|(key, value)| db.put(&mut txn, key, value));
                    self.answer_write(outcome, reply, found_full)
                }
                Op::Delete(key, reply) => {
                    let outcome = db.delete(&mut txn, &key);
                    self.answer_write(outcome, reply, found_full)
                }
                Op::Commit(writes, durability, reply) => {
                    let written = writes
                        .iter()
                        .try_for_each(|(key, value)| db.put(&mut txn, key, value));
                    if let Err(e) = written {
                        // The nested transaction aborts on drop.
                        let _ = reply.send(Err(self.write_error(e, found_full)));
                        return Served::Nothing;
                    }
                    return match (txn.commit(), durability) {
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
        // SAFETY: no transaction is open in this process: the writer, the
        // only one that writes, is between groups, and the closed gate holds
        // every read transaction out (invariant 6; `map_gate` 1).
        let grown = unsafe { self.env.resize(target) };
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
    let ops = match job {
        Job::Txn { ops, .. } => ops,
        Job::Batch { reply, .. } => return drop(reply.send(Err(error.clone()))),
    };
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
    use crate::kv::{CounterSlot, SequencedWrite};

    fn open(name: &str) -> (std::path::PathBuf, Namespace) {
        open_with(
            name,
            MapLimits {
                initial: 64 << 20,
                ceiling: 64 << 20,
            },
        )
    }

    fn open_with(name: &str, limits: MapLimits) -> (std::path::PathBuf, Namespace) {
        let dir = std::env::temp_dir().join(format!("kv-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let (_, mut namespaces) = KvStore::open(&dir, limits, &["test"]).unwrap();
        (dir, namespaces.remove(0))
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
        std::fs::remove_dir_all(dir).unwrap();
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
        std::fs::remove_dir_all(dir).unwrap();
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
        std::fs::remove_dir_all(dir).unwrap();
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
        std::fs::remove_dir_all(dir).unwrap();
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
        std::fs::remove_dir_all(dir).unwrap();
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
        std::fs::remove_dir_all(dir).unwrap();
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
        std::fs::remove_dir_all(dir).unwrap();
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
        std::fs::remove_dir_all(dir).unwrap();
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
        std::fs::remove_dir_all(dir).unwrap();
    }

    /// A transaction that finds the map full at its ceiling is refused
    /// alone, naming the setting: the next one in its group commits, and
    /// what was there stays readable.
    #[tokio::test(flavor = "multi_thread")]
    async fn a_full_map_refuses_the_transaction_alone_and_names_its_ceiling() {
        let limits = MapLimits {
            initial: 512 << 10,
            ceiling: 512 << 10,
        };
        let (dir, ns) = open_with("ceiling", limits);
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
        std::fs::remove_dir_all(dir).unwrap();
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
        std::fs::remove_dir_all(dir).unwrap();
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
        std::fs::remove_dir_all(dir).unwrap();
    }
}
