//! The transactional key-value store: LMDB through heed, with group commit.
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
//!    never block the writer.

use heed::types::Bytes;
use heed::{Database, Env, EnvOpenOptions, RoTxn, RwTxn, WithoutTls};
use std::ops::Bound;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc as sync_mpsc;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::oneshot;

/// A transaction that sends no operation for this long is aborted, so one
/// stalled request cannot hold the writer.
pub const IDLE_LIMIT: Duration = Duration::from_secs(10);
/// Transactions committed together at most.
const MAX_GROUP: usize = 256;
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
    /// LMDB failed; for a commit, nothing of the group was written.
    Storage(String),
}

impl std::fmt::Display for KvError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            KvError::BadTable(t) => write!(f, "bad table name {t:?}"),
            KvError::TooLarge => write!(f, "key too large"),
            KvError::Finished => write!(f, "the transaction is finished"),
            KvError::Storage(e) => write!(f, "storage: {e}"),
        }
    }
}

fn storage(e: heed::Error) -> KvError {
    KvError::Storage(e.to_string())
}

type Reply<T> = oneshot::Sender<Result<T, KvError>>;

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

/// When a commit is answered.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Durability {
    /// Once the group holding it is durable.
    Wait,
    /// As soon as it joined the group.
    Detached,
}

/// What serving one transaction left for the group.
enum Served {
    /// Aborted or failed: nothing of it is in the group.
    Nothing,
    /// In the group; the reply waits for the group's commit.
    Waiting(Reply<()>),
    /// In the group and already answered.
    Detached,
}

/// One request's write transaction, as the writer receives it.
struct Job {
    db: Database<Bytes, Bytes>,
    ops: sync_mpsc::Receiver<Op>,
}

/// The store. Shared by every request of every service.
pub struct KvStore {
    env: Env<WithoutTls>,
    jobs: sync_mpsc::Sender<Job>,
    stats: Arc<Stats>,
}

/// Counts of durable commits, for metrics.
#[derive(Default)]
pub struct Stats {
    /// LMDB commits (one fsync each).
    pub groups: AtomicU64,
    /// Transactions made durable by those commits.
    pub transactions: AtomicU64,
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
        map_size: usize,
        namespaces: &[&str],
    ) -> Result<(Arc<KvStore>, Vec<Namespace>), KvError> {
        std::fs::create_dir_all(dir).map_err(|e| KvError::Storage(e.to_string()))?;
        let mut options = EnvOpenOptions::new().read_txn_without_tls();
        options
            .map_size(map_size)
            .max_dbs(namespaces.len().max(1) as u32)
            .max_readers(1024);
        // SAFETY: the environment is opened once per process (the host owns
        // the data directory) and never with conflicting flags.
        let env = unsafe { options.open(dir) }.map_err(storage)?;
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
        let writer_env = env.clone();
        let stats = Arc::new(Stats::default());
        let writer_stats = Arc::clone(&stats);
        std::thread::Builder::new()
            .name("kv-writer".into())
            .spawn(move || write_loop(&writer_env, &queue, &writer_stats))
            .map_err(|e| KvError::Storage(e.to_string()))?;
        let store = Arc::new(KvStore { env, jobs, stats });
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
}

impl Namespace {
    /// The store this namespace lives in.
    pub fn store(&self) -> &KvStore {
        &self.store
    }

    /// A snapshot of the last durable commit.
    pub fn read(&self) -> Result<ReadTxn, KvError> {
        let txn = self.store.env.clone().static_read_txn().map_err(storage)?;
        Ok(ReadTxn { txn, db: self.db })
    }

    /// A write transaction; it waits for the writer at its first operation.
    pub fn write(&self) -> Result<WriteTxn, KvError> {
        let (ops, rx) = sync_mpsc::channel();
        self.store
            .jobs
            .send(Job {
                db: self.db,
                ops: rx,
            })
            .map_err(|_| KvError::Storage("the writer stopped".into()))?;
        Ok(WriteTxn { ops: Some(ops) })
    }
}

/// Writes with their keys prefixed by their tables.
fn full_writes(writes: TableWrites) -> Result<Entries, KvError> {
    writes
        .into_iter()
        .map(|(table, key, value)| Ok((table_key(&table, &key)?, value)))
        .collect()
}

/// `table ‖ 0x00 ‖ key`.
fn table_key(table: &str, key: &[u8]) -> Result<Vec<u8>, KvError> {
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
    if start >= end {
        return Ok(Vec::new());
    }
    let bounds = (
        Bound::Included(start.as_slice()),
        Bound::Excluded(end.as_slice()),
    );
    let limit = range.limit as usize;
    let strip = |(k, v): (&[u8], &[u8])| (k[prefix.len()..].to_vec(), v.to_vec());
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
}

impl ReadTxn {
    pub fn get(&self, table: &str, key: &[u8]) -> Result<Option<Vec<u8>>, KvError> {
        get(&self.txn, self.db, &table_key(table, key)?)
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
    pub async fn commit(&mut self) -> Result<(), KvError> {
        self.commit_with(Vec::new()).await
    }

    /// Writes, then commits, in one exchange with the writer.
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

/// The writer: forms groups from queued transactions, one LMDB commit each.
fn write_loop(env: &Env<WithoutTls>, queue: &sync_mpsc::Receiver<Job>, stats: &Stats) {
    while let Ok(first) = queue.recv() {
        let mut group = match env.write_txn() {
            Ok(txn) => txn,
            Err(e) => {
                refuse(first, &storage(e));
                continue;
            }
        };
        let mut committed: Vec<Reply<()>> = Vec::new();
        let mut members = 0;
        let mut next = Some(first);
        while let Some(job) = next.take() {
            match serve(env, &mut group, job) {
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
            let outcome = group.commit().map_err(storage);
            if outcome.is_ok() {
                stats.groups.fetch_add(1, Ordering::Relaxed);
                stats
                    .transactions
                    .fetch_add(members as u64, Ordering::Relaxed);
            }
            outcome
        };
        for reply in committed {
            let _ = reply.send(outcome.clone());
        }
    }
}

/// Answers `job` when its transaction cannot start.
fn refuse(job: Job, error: &KvError) {
    while let Ok(op) = job.ops.recv_timeout(IDLE_LIMIT) {
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

/// Runs one transaction nested in `group`; returns its commit reply when it
/// committed into the group.
fn serve(env: &Env<WithoutTls>, group: &mut RwTxn<'_>, job: Job) -> Served {
    let mut txn = match env.nested_write_txn(group) {
        Ok(txn) => txn,
        Err(e) => {
            refuse(job, &storage(e));
            return Served::Nothing;
        }
    };
    let db = job.db;
    loop {
        let Ok(op) = job.ops.recv_timeout(IDLE_LIMIT) else {
            // Dropped, aborted or idle: the nested transaction aborts.
            return Served::Nothing;
        };
        match op {
            Op::Get(key, reply) => drop(reply.send(get(&txn, db, &key))),
            Op::GetAll(keys, reply) => {
                let values = keys.iter().map(|key| get(&txn, db, key)).collect();
                drop(reply.send(values));
            }
            Op::Scan(table, range, reply) => {
                let table = String::from_utf8(table).expect("validated on the request side");
                drop(reply.send(scan(&txn, db, &table, &range)));
            }
            Op::Put(key, value, reply) => {
                drop(reply.send(db.put(&mut txn, &key, &value).map_err(storage)))
            }
            Op::PutAll(writes, reply) => {
                let outcome = writes
                    .iter()
                    .try_for_each(|(key, value)| db.put(&mut txn, key, value))
                    .map_err(storage);
                drop(reply.send(outcome));
            }
            Op::Delete(key, reply) => drop(reply.send(db.delete(&mut txn, &key).map_err(storage))),
            Op::Commit(writes, durability, reply) => {
                let written = writes
                    .iter()
                    .try_for_each(|(key, value)| db.put(&mut txn, key, value));
                if let Err(e) = written {
                    // The nested transaction aborts on drop.
                    let _ = reply.send(Err(storage(e)));
                    return Served::Nothing;
                }
                return match (txn.commit(), durability) {
                    (Ok(()), Durability::Wait) => Served::Waiting(reply),
                    (Ok(()), Durability::Detached) => {
                        let _ = reply.send(Ok(()));
                        Served::Detached
                    }
                    (Err(e), _) => {
                        let _ = reply.send(Err(storage(e)));
                        Served::Nothing
                    }
                };
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn open(name: &str) -> (std::path::PathBuf, Namespace) {
        let dir = std::env::temp_dir().join(format!("kv-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let (_, mut namespaces) = KvStore::open(&dir, 64 << 20, &["test"]).unwrap();
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
        let before = ns.read().unwrap();
        let mut txn = ns.write().unwrap();
        txn.put("t", b"a", b"1".to_vec()).await.unwrap();
        assert_eq!(txn.get("t", b"a").await.unwrap(), Some(b"1".to_vec()));
        assert_eq!(ns.read().unwrap().get("t", b"a").unwrap(), None);
        txn.commit().await.unwrap();
        assert_eq!(
            ns.read().unwrap().get("t", b"a").unwrap(),
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
            ns.read().unwrap().get("t", b"a").unwrap(),
            Some(b"1".to_vec())
        );
        assert_eq!(txn.get("t", b"a").await, Err(KvError::Finished));
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
        let read = ns.read().unwrap();
        assert_eq!(read.get("t", b"b").unwrap(), Some(b"2".to_vec()));
        // A refused write aborts the whole transaction.
        let mut txn = ns.write().unwrap();
        txn.put("t", b"c", b"3".to_vec()).await.unwrap();
        let too_long = vec![("t".to_string(), vec![0u8; 600], Vec::new())];
        assert_eq!(txn.commit_with(too_long).await, Err(KvError::TooLarge));
        assert_eq!(ns.read().unwrap().get("t", b"c").unwrap(), None);
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
        let read = ns.read().unwrap();
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
        let read = ns.read().unwrap();
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
        let value = ns.read().unwrap().get("t", b"counter").unwrap().unwrap();
        assert_eq!(u64::from_be_bytes(value.try_into().unwrap()), 64);
        let (groups, transactions) = counts(&ns);
        assert_eq!(transactions, 64);
        assert!(
            groups < transactions,
            "no two transactions shared a commit ({groups} commits)"
        );
        std::fs::remove_dir_all(dir).unwrap();
    }
}
