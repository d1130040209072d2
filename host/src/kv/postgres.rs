//! The transactional key-value store on PostgreSQL: the same operations
//! as the LMDB store ([`super::lmdb`]), on a database several hosts may share.
//!
//! Layout: one table, `lab_kv (namespace, key, value)` with the primary
//! key `(namespace, key)`, a namespace per service and each key
//! `table ‖ 0x00 ‖ key` as in LMDB, so a table is a contiguous key range
//! (`bytea` orders bytewise, as LMDB's keys do) and a scan is an index
//! range; and `lab_kv_writer (namespace)`, one row per namespace, which
//! write transactions lock.
//!
//! Invariants (those of the LMDB store, on a shared server):
//! 1. Every write of a namespace, from any host, happens in a transaction
//!    that first locks the namespace's `lab_kv_writer` row (`FOR UPDATE`)
//!    and holds it to its end: writes are serial, as under LMDB's one
//!    writer. Their statements run at READ COMMITTED, so each sees every
//!    commit made before the lock was granted.
//! 2. A commit is answered once the server's `COMMIT` returned with
//!    `synchronous_commit` on: durable as the server's configuration makes
//!    a commit durable. A detached commit turns it off for its own
//!    transaction: visible at once, durable with the server's next flush.
//! 3. A transaction idle for [`IDLE_LIMIT`] is ended by the server
//!    (`idle_in_transaction_session_timeout`), which releases the lock;
//!    its connection is closed and not reused.
//! 4. A read transaction is a `REPEATABLE READ READ ONLY` snapshot; a
//!    `read-all` is one statement, hence one snapshot.
//! 7. Sequenced batches of one host are applied by that host's batch
//!    writer in groups: one transaction, one lock and one commit per
//!    group, each batch decided on the state its group left so far; every
//!    member is answered once the group's commit returned.
//! 8. The replay table of each service is the store's `lab_replay`, one row
//!    per pair with its expiry, inserted by one atomic statement: a pair
//!    used through one host is refused through every other.
//! 9. A server that cannot be reached, or a connection lost, is
//!    [`KvError::Unavailable`]: worth retrying. A commit whose answer was
//!    lost may have committed; the services' idempotency receipts settle a
//!    retry either way.

use super::batch::{BatchOutcome, ReadyBatch};
use super::{scan_bounds, Entries, KvError, Range, ScanBounds, Stats, IDLE_LIMIT};
use std::collections::HashMap;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::{mpsc, oneshot, OwnedSemaphorePermit, Semaphore};
use tokio_postgres::error::SqlState;
use tokio_postgres::types::{ToSql, Type};
use tokio_postgres::{Client, Config, NoTls};

/// Longest a request waits for a connection (one free in the pool, or a
/// new one made) before it is refused as unavailable.
const CONNECT_WAIT: Duration = Duration::from_secs(5);
/// Sequenced batches applied in one group at most.
const MAX_GROUP: usize = 256;
/// Batches waiting for a host's batch writer at most; past it a batch
/// waits for room.
const BATCH_QUEUE: usize = 1024;

const SCHEMA: &str = "
    CREATE TABLE IF NOT EXISTS lab_kv (
        namespace text NOT NULL,
        key bytea NOT NULL,
        value bytea NOT NULL,
        PRIMARY KEY (namespace, key));
    CREATE TABLE IF NOT EXISTS lab_kv_writer (namespace text PRIMARY KEY);
    CREATE TABLE IF NOT EXISTS lab_replay (
        service text NOT NULL,
        pair bytea NOT NULL,
        expires_at bigint NOT NULL,
        PRIMARY KEY (service, pair));
    CREATE TABLE IF NOT EXISTS lab_revoked (grant_digest text PRIMARY KEY);
";
const LOCK: &str = "SELECT 1 FROM lab_kv_writer WHERE namespace = $1 FOR UPDATE";
const GET: &str = "SELECT value FROM lab_kv WHERE namespace = $1 AND key = $2";
const GET_ALL: &str = "SELECT key, value FROM lab_kv WHERE namespace = $1 AND key = ANY($2)";
const SCAN: &str = "SELECT key, value FROM lab_kv \
     WHERE namespace = $1 AND key >= $2 AND key < $3 ORDER BY key LIMIT $4";
const SCAN_REVERSE: &str = "SELECT key, value FROM lab_kv \
     WHERE namespace = $1 AND key >= $2 AND key < $3 ORDER BY key DESC LIMIT $4";
const PUT_ALL: &str = "INSERT INTO lab_kv (namespace, key, value) \
     SELECT $1, w.key, w.value FROM unnest($2::bytea[], $3::bytea[]) AS w(key, value) \
     ON CONFLICT (namespace, key) DO UPDATE SET value = EXCLUDED.value";
/// Keeps a pair absent or expired at `$4`: a row answered means inserted.
const REPLAY_INSERT: &str =
    "INSERT INTO lab_replay (service, pair, expires_at) VALUES ($1, $2, $3) \
     ON CONFLICT (service, pair) DO UPDATE SET expires_at = EXCLUDED.expires_at \
     WHERE lab_replay.expires_at <= $4 RETURNING 1";
const REPLAY_CONTAINS: &str =
    "SELECT 1 FROM lab_replay WHERE service = $1 AND pair = $2 AND expires_at > $3";
const REPLAY_EXPIRED: &str = "DELETE FROM lab_replay WHERE expires_at <= $1";
/// Records the grants `$1` as revoked and notifies the payloads `$3` on
/// the channel `$2`: one statement, so one transaction
/// (`events::shared`, invariant 7).
const REVOKE: &str = "WITH recorded AS (\
     INSERT INTO lab_revoked (grant_digest) SELECT unnest($1::text[]) \
     ON CONFLICT DO NOTHING) \
     SELECT pg_notify($2, p) FROM unnest($3::text[]) AS p";
/// How often a host deletes the expired pairs of every host.
const REPLAY_SWEEP: Duration = Duration::from_secs(60);
const DELETE: &str = "DELETE FROM lab_kv WHERE namespace = $1 AND key = $2 RETURNING 1";

/// `e` and its sources, one after another (a server's refusal says what
/// it refused only in its source).
pub(crate) fn describe(e: &dyn std::error::Error) -> String {
    let mut text = e.to_string();
    let mut source = e.source();
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    text
}

/// `e` as the store's error: the server, or the way to it, out of service
/// now (as against a statement it refused) is unavailable. The server's
/// own text goes to the log, never to a caller.
fn failure(e: tokio_postgres::Error) -> KvError {
    let transient = match e.code() {
        None => true,
        Some(code) => [
            SqlState::ADMIN_SHUTDOWN,
            SqlState::CRASH_SHUTDOWN,
            SqlState::CANNOT_CONNECT_NOW,
            SqlState::TOO_MANY_CONNECTIONS,
            SqlState::IDLE_IN_TRANSACTION_SESSION_TIMEOUT,
            SqlState::READ_ONLY_SQL_TRANSACTION,
            // Rolled back whole: retrying is safe (an engine running the
            // writes `SERIALIZABLE` may abort one).
            SqlState::T_R_SERIALIZATION_FAILURE,
            SqlState::T_R_DEADLOCK_DETECTED,
        ]
        .contains(code),
    };
    tracing::warn!(error = describe(&e), "the PostgreSQL store failed");
    if transient || e.is_closed() {
        KvError::Unavailable(
            "the PostgreSQL store cannot be reached now; nothing uncommitted was written; retry later"
                .into(),
        )
    } else {
        KvError::Storage("the PostgreSQL store refused a statement (see the host's log)".into())
    }
}

/// The connections of one host: made on demand, at most `size` at once,
/// kept while they stay open.
struct Pool {
    config: Config,
    idle: Mutex<Vec<Client>>,
    permits: Arc<Semaphore>,
    size: usize,
}

/// A connection out of the pool; back in it when dropped, unless closed or
/// [`Conn::discard`]ed.
struct Conn {
    client: Option<Client>,
    pool: Arc<Pool>,
    _permit: OwnedSemaphorePermit,
}

impl Pool {
    async fn get(self: &Arc<Self>) -> Result<Conn, KvError> {
        let permit = tokio::time::timeout(CONNECT_WAIT, Arc::clone(&self.permits).acquire_owned())
            .await
            .map_err(|_| {
                KvError::Unavailable(format!(
                    "all {} connections to the PostgreSQL store are busy (--store-connections); retry later",
                    self.size
                ))
            })?
            .expect("the pool's semaphore is never closed");
        loop {
            let idle = self.idle.lock().expect("pool lock").pop();
            match idle {
                Some(client) if client.is_closed() => continue,
                Some(client) => {
                    return Ok(Conn {
                        client: Some(client),
                        pool: Arc::clone(self),
                        _permit: permit,
                    })
                }
                None => break,
            }
        }
        let (client, connection) = tokio::time::timeout(CONNECT_WAIT, self.config.connect(NoTls))
            .await
            .map_err(|_| {
                KvError::Unavailable(
                    "the PostgreSQL store did not answer a connection in time; retry later".into(),
                )
            })?
            .map_err(failure)?;
        tokio::spawn(async move {
            if let Err(e) = connection.await {
                tracing::debug!(error = %e, "a PostgreSQL connection ended");
            }
        });
        Ok(Conn {
            client: Some(client),
            pool: Arc::clone(self),
            _permit: permit,
        })
    }
}

impl Conn {
    fn client(&self) -> &Client {
        self.client
            .as_ref()
            .expect("a connection's client lives until it is dropped")
    }

    /// Closes the connection instead of returning it to the pool.
    fn discard(mut self) {
        self.client = None;
    }
}

impl Drop for Conn {
    fn drop(&mut self) {
        if let Some(client) = self.client.take() {
            if !client.is_closed() {
                self.pool.idle.lock().expect("pool lock").push(client);
            }
        }
    }
}

/// Ends `conn`'s open transaction without its writes, then returns it to
/// the pool; from a destructor, so on a task of its own (or, outside a
/// runtime, by closing the connection, which ends the transaction too).
fn roll_back(conn: Conn) {
    match tokio::runtime::Handle::try_current() {
        Ok(runtime) => {
            runtime.spawn(async move {
                if conn.client().batch_execute("ROLLBACK").await.is_err() {
                    conn.discard();
                }
            });
        }
        Err(_) => conn.discard(),
    }
}

/// The store: a pool of connections to one database.
pub struct PgStore {
    pool: Arc<Pool>,
    stats: Arc<Stats>,
}

/// A namespace: one service's keys, and this host's batch writer for them.
#[derive(Clone)]
pub struct PgNamespace {
    store: Arc<PgStore>,
    name: Arc<str>,
    batches: mpsc::Sender<Queued>,
}

/// A batch waiting for the batch writer, and where its answer goes.
type Queued = (ReadyBatch, oneshot::Sender<Result<BatchOutcome, KvError>>);

impl PgStore {
    /// Connects to the database `url` names (a PostgreSQL connection string,
    /// URL or key-value form), makes the tables where they are missing and
    /// a writer row for each namespace, and starts a batch writer for each.
    pub async fn open(
        url: &str,
        connections: usize,
        namespaces: &[&str],
    ) -> Result<(Arc<PgStore>, Vec<PgNamespace>), KvError> {
        Self::open_with_idle_limit(url, connections, namespaces, IDLE_LIMIT).await
    }

    /// [`PgStore::open`] with transactions ended after `idle_limit` idle
    /// (invariant 3) instead of [`IDLE_LIMIT`].
    async fn open_with_idle_limit(
        url: &str,
        connections: usize,
        namespaces: &[&str],
        idle_limit: Duration,
    ) -> Result<(Arc<PgStore>, Vec<PgNamespace>), KvError> {
        let mut config: Config = url
            .parse()
            .map_err(|e| KvError::Storage(format!("the store's connection string: {e}")))?;
        // Invariant 3: the server ends a transaction its request left idle.
        let idle = format!(
            "-c idle_in_transaction_session_timeout={}",
            idle_limit.as_millis()
        );
        let options = match config.get_options() {
            Some(given) => format!("{given} {idle}"),
            None => idle,
        };
        config.options(&options);
        config.application_name("labd");
        let size = connections.max(1);
        let store = Arc::new(PgStore {
            pool: Arc::new(Pool {
                config,
                idle: Mutex::new(Vec::new()),
                permits: Arc::new(Semaphore::new(size)),
                size,
            }),
            stats: Arc::new(Stats::default()),
        });
        store.provision(namespaces).await?;
        tokio::spawn(PgStore::sweep_replay(Arc::downgrade(&store)));
        let namespaces = namespaces
            .iter()
            .map(|name| {
                let (batches, queue) = mpsc::channel(BATCH_QUEUE);
                let name: Arc<str> = Arc::from(*name);
                tokio::spawn(batch_writer(Arc::clone(&store), Arc::clone(&name), queue));
                PgNamespace {
                    store: Arc::clone(&store),
                    name,
                    batches,
                }
            })
            .collect();
        Ok((store, namespaces))
    }

    /// The tables and writer rows, made where missing. Hosts starting
    /// together may race to make them; the loser's statement fails and is
    /// run again, finding them made.
    async fn provision(&self, namespaces: &[&str]) -> Result<(), KvError> {
        let conn = self.pool.get().await?;
        let mut attempts = 0;
        loop {
            let made = async {
                conn.client().batch_execute(SCHEMA).await?;
                for name in namespaces {
                    conn.client()
                        .execute(
                            "INSERT INTO lab_kv_writer (namespace) VALUES ($1) ON CONFLICT DO NOTHING",
                            &[name],
                        )
                        .await?;
                }
                Ok::<_, tokio_postgres::Error>(())
            }
            .await;
            match made {
                Ok(()) => return Ok(()),
                Err(e) if attempts < 3 && e.as_db_error().is_some() => attempts += 1,
                Err(e) => return Err(failure(e)),
            }
        }
    }

    /// How to open a connection of one's own to the database (the
    /// events' channel, `events::shared`), as the pool opens its own.
    pub fn config(&self) -> &Config {
        &self.pool.config
    }

    /// Commit counts so far.
    pub fn stats(&self) -> &Stats {
        &self.stats
    }

    /// The replay table of `service`, shared by every host of the store
    /// (design.md, "Replay table"): keeps `pair` until `expires_at` unless
    /// it is kept, unexpired at `now`; whether it was inserted. One
    /// statement, atomic under the table's key, durable when answered.
    pub async fn replay_insert(
        &self,
        service: &str,
        pair: &[u8],
        expires_at: u64,
        now: u64,
    ) -> Result<bool, KvError> {
        let conn = self.pool.get().await?;
        let (expires_at, now) = (seconds(expires_at), seconds(now));
        let inserted = conn
            .client()
            .query_typed(
                REPLAY_INSERT,
                &[
                    text(&service),
                    bytea(&pair),
                    (&expires_at, Type::INT8),
                    (&now, Type::INT8),
                ],
            )
            .await
            .map_err(failure)?;
        Ok(!inserted.is_empty())
    }

    /// Whether `pair` is kept in `service`'s replay table, unexpired at
    /// `now`.
    pub async fn replay_contains(
        &self,
        service: &str,
        pair: &[u8],
        now: u64,
    ) -> Result<bool, KvError> {
        let conn = self.pool.get().await?;
        let now = seconds(now);
        let found = conn
            .client()
            .query_typed(
                REPLAY_CONTAINS,
                &[text(&service), bytea(&pair), (&now, Type::INT8)],
            )
            .await
            .map_err(failure)?;
        Ok(!found.is_empty())
    }

    /// Records `grants` in `lab_revoked` and notifies `payloads` on
    /// `channel`, both or neither, on a connection of the pool.
    pub async fn revoke(
        &self,
        grants: &[String],
        channel: &str,
        payloads: &[String],
    ) -> Result<(), KvError> {
        let conn = self.pool.get().await?;
        conn.client()
            .query_typed(
                REVOKE,
                &[
                    (&grants, Type::TEXT_ARRAY),
                    text(&channel),
                    (&payloads, Type::TEXT_ARRAY),
                ],
            )
            .await
            .map_err(failure)?;
        Ok(())
    }

    /// Deletes the expired pairs, every [`REPLAY_SWEEP`], for as long as
    /// the store lives.
    async fn sweep_replay(store: std::sync::Weak<PgStore>) {
        loop {
            tokio::time::sleep(REPLAY_SWEEP).await;
            let Some(store) = store.upgrade() else {
                return;
            };
            let now = seconds(crate::clock::unix_now());
            if let Ok(conn) = store.pool.get().await {
                // A failure is logged; the next sweep tries again.
                let _ = conn
                    .client()
                    .query_typed(REPLAY_EXPIRED, &[(&now, Type::INT8)])
                    .await
                    .map_err(failure);
            }
        }
    }
}

/// Unix seconds as PostgreSQL's `bigint` (saturating: a time past 2^63
/// seconds is the end of time either way).
fn seconds(unix: u64) -> i64 {
    i64::try_from(unix).unwrap_or(i64::MAX)
}

fn bytea(value: &(dyn ToSql + Sync)) -> (&(dyn ToSql + Sync), Type) {
    (value, Type::BYTEA)
}

fn text(value: &(dyn ToSql + Sync)) -> (&(dyn ToSql + Sync), Type) {
    (value, Type::TEXT)
}

async fn get(conn: &Conn, namespace: &str, key: &[u8]) -> Result<Option<Vec<u8>>, KvError> {
    let row = conn
        .client()
        .query_typed(GET, &[text(&namespace), bytea(&key)])
        .await
        .map_err(failure)?;
    Ok(row.first().map(|r| r.get(0)))
}

/// The values of full keys, in their order.
async fn get_all(
    conn: &Conn,
    namespace: &str,
    keys: &[Vec<u8>],
) -> Result<Vec<Option<Vec<u8>>>, KvError> {
    if keys.is_empty() {
        return Ok(Vec::new());
    }
    let rows = conn
        .client()
        .query_typed(GET_ALL, &[text(&namespace), (&keys, Type::BYTEA_ARRAY)])
        .await
        .map_err(failure)?;
    let found: HashMap<Vec<u8>, Vec<u8>> = rows.into_iter().map(|r| (r.get(0), r.get(1))).collect();
    Ok(keys.iter().map(|k| found.get(k).cloned()).collect())
}

async fn scan(
    conn: &Conn,
    namespace: &str,
    table: &str,
    range: &Range,
) -> Result<Entries, KvError> {
    let Some(ScanBounds { prefix, start, end }) = scan_bounds(table, range)? else {
        return Ok(Vec::new());
    };
    let limit = i64::from(range.limit);
    let statement = if range.reverse { SCAN_REVERSE } else { SCAN };
    let rows = conn
        .client()
        .query_typed(
            statement,
            &[
                text(&namespace),
                bytea(&start),
                bytea(&end),
                (&limit, Type::INT8),
            ],
        )
        .await
        .map_err(failure)?;
    Ok(rows
        .into_iter()
        .map(|r| {
            let key: Vec<u8> = r.get(0);
            (key[prefix..].to_vec(), r.get(1))
        })
        .collect())
}

/// Writes full keys; of a key written twice, the last value stays.
async fn put_all(conn: &Conn, namespace: &str, writes: Entries) -> Result<(), KvError> {
    if writes.is_empty() {
        return Ok(());
    }
    let mut last: HashMap<Vec<u8>, usize> = HashMap::with_capacity(writes.len());
    for (at, (key, _)) in writes.iter().enumerate() {
        last.insert(key.clone(), at);
    }
    let (keys, values): (Vec<Vec<u8>>, Vec<Vec<u8>>) = writes
        .into_iter()
        .enumerate()
        .filter(|(at, (key, _))| last.get(key) == Some(at))
        .map(|(_, write)| write)
        .unzip();
    conn.client()
        .query_typed(
            PUT_ALL,
            &[
                text(&namespace),
                (&keys, Type::BYTEA_ARRAY),
                (&values, Type::BYTEA_ARRAY),
            ],
        )
        .await
        .map_err(failure)?;
    Ok(())
}

/// A connection in a write transaction holding its namespace's lock.
async fn begin_write(store: &PgStore, namespace: &str) -> Result<Conn, KvError> {
    let conn = store.pool.get().await?;
    conn.client()
        .batch_execute("BEGIN ISOLATION LEVEL READ COMMITTED")
        .await
        .map_err(failure)?;
    let locked = conn
        .client()
        .query_typed(LOCK, &[text(&namespace)])
        .await
        .map_err(failure);
    match locked {
        Ok(rows) if rows.len() == 1 => Ok(conn),
        Ok(_) => {
            roll_back(conn);
            Err(KvError::Storage(format!(
                "the store has no writer row for namespace {namespace:?}"
            )))
        }
        Err(e) => {
            roll_back(conn);
            Err(e)
        }
    }
}

impl PgNamespace {
    /// A snapshot of what is committed.
    pub async fn read(&self) -> Result<PgReadTxn, KvError> {
        let conn = self.store.pool.get().await?;
        conn.client()
            .batch_execute("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY")
            .await
            .map_err(failure)?;
        Ok(PgReadTxn {
            conn: Some(conn),
            namespace: Arc::clone(&self.name),
        })
    }

    /// The values of full keys, in order, in one statement.
    pub async fn read_all(&self, keys: &[Vec<u8>]) -> Result<Vec<Option<Vec<u8>>>, KvError> {
        let conn = self.store.pool.get().await?;
        get_all(&conn, &self.name, keys).await
    }

    /// A write transaction, once it holds the namespace's lock.
    pub async fn write(&self) -> Result<PgWriteTxn, KvError> {
        Ok(PgWriteTxn {
            conn: Some(begin_write(&self.store, &self.name).await?),
            namespace: Arc::clone(&self.name),
            store: Arc::clone(&self.store),
        })
    }

    /// Applies a sequenced batch through this host's batch writer; answers
    /// once its group committed (invariant 7).
    pub async fn apply_ready(&self, batch: ReadyBatch) -> Result<BatchOutcome, KvError> {
        let (reply, answer) = oneshot::channel();
        let stopped = || KvError::Storage("the batch writer stopped".into());
        self.batches
            .send((batch, reply))
            .await
            .map_err(|_| stopped())?;
        answer.await.map_err(|_| stopped())?
    }

    pub fn store(&self) -> &PgStore {
        &self.store
    }
}

/// A read-only snapshot; its transaction ends when it is dropped.
pub struct PgReadTxn {
    conn: Option<Conn>,
    namespace: Arc<str>,
}

impl PgReadTxn {
    fn conn(&self) -> &Conn {
        self.conn.as_ref().expect("held until dropped")
    }

    pub async fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>, KvError> {
        get(self.conn(), &self.namespace, key).await
    }

    pub async fn get_all(&self, keys: &[Vec<u8>]) -> Result<Vec<Option<Vec<u8>>>, KvError> {
        get_all(self.conn(), &self.namespace, keys).await
    }

    pub async fn scan(&self, table: &str, range: &Range) -> Result<Entries, KvError> {
        scan(self.conn(), &self.namespace, table, range).await
    }
}

impl Drop for PgReadTxn {
    fn drop(&mut self) {
        if let Some(conn) = self.conn.take() {
            roll_back(conn);
        }
    }
}

/// A request's write transaction; dropping it unfinished rolls it back.
pub struct PgWriteTxn {
    conn: Option<Conn>,
    namespace: Arc<str>,
    store: Arc<PgStore>,
}

impl PgWriteTxn {
    fn conn(&self) -> Result<&Conn, KvError> {
        self.conn.as_ref().ok_or(KvError::Finished)
    }

    pub async fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>, KvError> {
        get(self.conn()?, &self.namespace, key).await
    }

    pub async fn get_all(&self, keys: &[Vec<u8>]) -> Result<Vec<Option<Vec<u8>>>, KvError> {
        get_all(self.conn()?, &self.namespace, keys).await
    }

    pub async fn scan(&self, table: &str, range: &Range) -> Result<Entries, KvError> {
        scan(self.conn()?, &self.namespace, table, range).await
    }

    pub async fn put_all(&self, writes: Entries) -> Result<(), KvError> {
        put_all(self.conn()?, &self.namespace, writes).await
    }

    pub async fn delete(&self, key: &[u8]) -> Result<bool, KvError> {
        let deleted = self
            .conn()?
            .client()
            .query_typed(DELETE, &[text(&&*self.namespace), bytea(&key)])
            .await
            .map_err(failure)?;
        Ok(!deleted.is_empty())
    }

    /// Writes, then commits; durable when answered unless `detached`
    /// (invariant 2). The transaction is finished whatever the outcome.
    pub async fn finish(&mut self, writes: Entries, detached: bool) -> Result<(), KvError> {
        let conn = self.conn.take().ok_or(KvError::Finished)?;
        if let Err(e) = put_all(&conn, &self.namespace, writes).await {
            roll_back(conn);
            return Err(e);
        }
        let commit = if detached {
            "SET LOCAL synchronous_commit TO OFF; COMMIT"
        } else {
            "COMMIT"
        };
        match conn.client().batch_execute(commit).await {
            Ok(()) => {
                self.store.stats.groups.fetch_add(1, Ordering::Relaxed);
                self.store
                    .stats
                    .transactions
                    .fetch_add(1, Ordering::Relaxed);
                Ok(())
            }
            Err(e) => {
                conn.discard();
                Err(failure(e))
            }
        }
    }

    pub fn is_open(&self) -> bool {
        self.conn.is_some()
    }

    pub fn abort(&mut self) {
        if let Some(conn) = self.conn.take() {
            roll_back(conn);
        }
    }
}

impl Drop for PgWriteTxn {
    fn drop(&mut self) {
        self.abort();
    }
}

/// This host's batch writer for one namespace: takes the batches queued,
/// up to [`MAX_GROUP`], and applies them as one group (invariant 7).
async fn batch_writer(store: Arc<PgStore>, namespace: Arc<str>, mut queue: mpsc::Receiver<Queued>) {
    while let Some(first) = queue.recv().await {
        let mut group = vec![first];
        while group.len() < MAX_GROUP {
            match queue.try_recv() {
                Ok(next) => group.push(next),
                Err(_) => break,
            }
        }
        let (batches, replies): (Vec<_>, Vec<_>) = group.into_iter().unzip();
        let members = batches.len() as u64;
        match apply_group(&store, &namespace, batches).await {
            Ok(outcomes) => {
                store.stats.groups.fetch_add(1, Ordering::Relaxed);
                store
                    .stats
                    .transactions
                    .fetch_add(members, Ordering::Relaxed);
                for (reply, outcome) in replies.into_iter().zip(outcomes) {
                    let _ = reply.send(Ok(outcome));
                }
            }
            Err(e) => {
                for reply in replies {
                    let _ = reply.send(Err(e.clone()));
                }
            }
        }
    }
}

/// Decides and writes `batches` in one transaction, in order, each on the
/// state the ones before it left; the outcomes once it committed.
async fn apply_group(
    store: &PgStore,
    namespace: &str,
    batches: Vec<ReadyBatch>,
) -> Result<Vec<BatchOutcome>, KvError> {
    let conn = begin_write(store, namespace).await?;
    let decided = async {
        let mut keys: Vec<Vec<u8>> = batches
            .iter()
            .flat_map(|b| b.decided_on().map(<[u8]>::to_vec))
            .collect();
        keys.sort_unstable();
        keys.dedup();
        let found = get_all(&conn, namespace, &keys).await?;
        // Every key a member is decided on, as the group has left it.
        let mut state: HashMap<Vec<u8>, Option<Vec<u8>>> = keys.into_iter().zip(found).collect();
        let mut outcomes = Vec::with_capacity(batches.len());
        let mut writes = Vec::new();
        for batch in batches {
            let [guard, counter] = batch.decided_on();
            let guard = state.get(guard).cloned().flatten();
            let counter = state.get(counter).cloned().flatten();
            let (outcome, written) = batch.decide(guard.as_deref(), counter.as_deref());
            for (key, value) in &written {
                if let Some(held) = state.get_mut(key) {
                    *held = Some(value.clone());
                }
            }
            writes.extend(written);
            outcomes.push(outcome);
        }
        put_all(&conn, namespace, writes).await?;
        Ok(outcomes)
    }
    .await;
    let outcomes = match decided {
        Ok(outcomes) => outcomes,
        Err(e) => {
            roll_back(conn);
            return Err(e);
        }
    };
    match conn.client().batch_execute("COMMIT").await {
        Ok(()) => Ok(outcomes),
        Err(e) => {
            conn.discard();
            Err(failure(e))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Runs `test` with the URL of a throw-away cluster (in a directory
    /// named after `name`) on a runtime of its own; skipped, saying so,
    /// where PostgreSQL is not installed.
    fn on_cluster<F: std::future::Future<Output = ()>>(name: &str, test: impl FnOnce(String) -> F) {
        let dir = std::env::temp_dir().join(format!("lab-kv-pg-{name}-{}", std::process::id()));
        let Some(cluster) = lab_pgcluster::Cluster::start(&dir).unwrap() else {
            eprintln!("skipped: PostgreSQL is not installed");
            return;
        };
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap()
            .block_on(test(cluster.url()));
        drop(cluster);
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// A transaction the server rolled back for a conflict is unavailable
    /// (retrying is safe); a statement it refuses is a storage fault.
    #[test]
    fn a_conflict_rolled_back_is_unavailable_and_a_refused_statement_is_not() {
        on_cluster("failure", |url| async move {
            let connect = || async {
                let config: Config = url.parse().unwrap();
                let (client, connection) = config.connect(NoTls).await.unwrap();
                tokio::spawn(connection);
                client
            };
            let (first, second) = (connect().await, connect().await);
            first
                .batch_execute(
                    "CREATE TABLE t (k int PRIMARY KEY, v int); INSERT INTO t VALUES (1, 1)",
                )
                .await
                .unwrap();
            first
                .batch_execute("BEGIN ISOLATION LEVEL REPEATABLE READ; SELECT v FROM t")
                .await
                .unwrap();
            second.batch_execute("UPDATE t SET v = 2").await.unwrap();
            let conflict = first.batch_execute("UPDATE t SET v = 3").await.unwrap_err();
            assert_eq!(conflict.code(), Some(&SqlState::T_R_SERIALIZATION_FAILURE));
            assert!(matches!(failure(conflict), KvError::Unavailable(_)));

            let refused = second
                .batch_execute("SELECT nothing FROM t")
                .await
                .unwrap_err();
            assert!(matches!(failure(refused), KvError::Storage(_)));
        });
    }

    /// Invariant 3: a read or write transaction left idle past the limit
    /// is ended by the server. Its next operation is unavailable, the
    /// writer's lock is free for the next writer, what the idle writer
    /// wrote is gone, and the pool serves on with fresh connections.
    #[test]
    fn a_transaction_left_idle_is_ended_by_the_server_and_frees_the_writer() {
        const LIMIT: Duration = Duration::from_millis(300);
        on_cluster("idle", |url| async move {
            let (_store, namespaces) = PgStore::open_with_idle_limit(&url, 3, &["idle"], LIMIT)
                .await
                .unwrap();
            let ns = &namespaces[0];
            let mut first = ns.write().await.unwrap();
            first
                .finish(vec![(b"t\0k".to_vec(), b"committed".to_vec())], false)
                .await
                .unwrap();

            let read = ns.read().await.unwrap();
            assert_eq!(
                read.get(b"t\0k").await.unwrap().as_deref(),
                Some(&b"committed"[..])
            );
            let idle_writer = ns.write().await.unwrap();
            idle_writer
                .put_all(vec![(b"t\0k".to_vec(), b"uncommitted".to_vec())])
                .await
                .unwrap();
            tokio::time::sleep(LIMIT * 4).await;

            // The lock is free while the idle writer is still held: the
            // server ended its transaction, not this side.
            let mut next = tokio::time::timeout(Duration::from_secs(5), ns.write())
                .await
                .expect("the idle writer's lock was released")
                .unwrap();
            assert!(matches!(
                read.get(b"t\0k").await,
                Err(KvError::Unavailable(_))
            ));
            assert!(matches!(
                idle_writer.get(b"t\0k").await,
                Err(KvError::Unavailable(_))
            ));
            drop((read, idle_writer));
            assert_eq!(
                next.get(b"t\0k").await.unwrap().as_deref(),
                Some(&b"committed"[..])
            );
            next.finish(Vec::new(), false).await.unwrap();
            // The ended connections are not handed out again.
            let fresh = ns.read().await.unwrap();
            assert_eq!(
                fresh.get(b"t\0k").await.unwrap().as_deref(),
                Some(&b"committed"[..])
            );
        });
    }
}
