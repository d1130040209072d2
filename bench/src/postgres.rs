//! The PostgreSQL baseline of the journal's append rows: what a user would
//! build instead. A throw-away cluster from the system's PostgreSQL
//! binaries, in the bench's scratch directory, reached on a Unix socket
//! there, with its default durability (`fsync=on`, `synchronous_commit=on`,
//! stated on the command line so that no local configuration weakens it).
//!
//! One append is one transaction of the three statements the journal's
//! append does: bump the space's head, insert the entry at the new head,
//! insert the idempotency receipt. Clients and journals as the journal's
//! append rows: client `c`'s `n`th append goes to journal
//! `(c + n * clients) % journals`.
//!
//! The cluster is `lab-pgcluster`'s: the system's binaries, a scratch
//! directory, a Unix socket.

use anyhow::{Context, Result};
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio_postgres::{Client, NoTls};

/// The receipt's stored result: the size of a journal append's answer.
const RECEIPT_RESULT_BYTES: usize = 200;

const SCHEMA: &str = "
    CREATE TABLE head (space integer PRIMARY KEY, position bigint NOT NULL);
    CREATE TABLE entry (
        space integer, position bigint, origin smallint NOT NULL,
        first bigint NOT NULL, last bigint NOT NULL, fact bytea NOT NULL,
        PRIMARY KEY (space, position));
    CREATE TABLE receipt (
        space integer, operation_id text, request_digest bytea NOT NULL,
        result bytea NOT NULL, PRIMARY KEY (space, operation_id));
";

/// A running throw-away cluster, stopped on drop.
pub struct Postgres {
    cluster: lab_pgcluster::Cluster,
    /// `PostgreSQL` and the server's version number.
    pub version: String,
}

impl Postgres {
    /// Starts a cluster under `dir` with `journals` heads at 0 (spaces 0 to
    /// `journals - 1`), or none where PostgreSQL is not installed.
    pub async fn start(dir: &Path, journals: usize) -> Result<Option<Postgres>> {
        // On this thread, a runtime worker that lives as long as the bench:
        // the server dies with the thread that started it.
        let Some(cluster) = lab_pgcluster::Cluster::start(dir).context("start PostgreSQL")? else {
            return Ok(None);
        };
        let postgres = Postgres {
            version: cluster.version.clone(),
            cluster,
        };
        let client = postgres.connect().await?;
        client.batch_execute(SCHEMA).await?;
        client
            .execute(
                "INSERT INTO head SELECT s, 0 FROM generate_series(0, $1 - 1) s",
                &[&(journals as i32)],
            )
            .await?;
        Ok(Some(postgres))
    }

    async fn connect(&self) -> Result<Client> {
        let (client, connection) = tokio_postgres::Config::new()
            .host_path(self.cluster.socket_dir())
            .user(lab_pgcluster::USER)
            .dbname(lab_pgcluster::DATABASE)
            .connect(NoTls)
            .await
            .map_err(|e| anyhow::anyhow!("connect to PostgreSQL: {e:?}"))?;
        tokio::spawn(connection);
        Ok(client)
    }

    /// `clients` connections appending one fact each, back to back, for
    /// `time`, over the first `journals` spaces: the appends committed and
    /// the time they took. `run` keeps operation IDs distinct across runs.
    pub async fn appends(
        &self,
        journals: usize,
        clients: usize,
        time: Duration,
        run: u64,
    ) -> Result<(u64, Duration)> {
        let mut tasks = Vec::new();
        let started = Arc::new(tokio::sync::Barrier::new(clients));
        for client in 0..clients {
            let db = self.connect().await?;
            let started = Arc::clone(&started);
            tasks.push(tokio::spawn(async move {
                let bump = db
                    .prepare(
                        "UPDATE head SET position = position + 1 WHERE space = $1 \
                         RETURNING position",
                    )
                    .await?;
                let entry = db
                    .prepare("INSERT INTO entry VALUES ($1, $2, 0, $2, $2, $3)")
                    .await?;
                let receipt = db
                    .prepare("INSERT INTO receipt VALUES ($1, $2, $3, $4)")
                    .await?;
                let result = vec![b'r'; RECEIPT_RESULT_BYTES];
                started.wait().await;
                let begun = Instant::now();
                let mut n = 0u64;
                while begun.elapsed() < time {
                    let space = ((client + n as usize * clients) % journals) as i32;
                    let fact = format!("bench fact {run} {client} {n}").into_bytes();
                    let operation = format!("r{run}-c{client}-{n}");
                    let digest = [n as u8; 32].to_vec();
                    db.batch_execute("BEGIN").await?;
                    let position: i64 = db.query_one(&bump, &[&space]).await?.get(0);
                    db.execute(&entry, &[&space, &position, &fact]).await?;
                    db.execute(&receipt, &[&space, &operation, &digest, &result])
                        .await?;
                    db.batch_execute("COMMIT").await?;
                    n += 1;
                }
                anyhow::Ok((n, begun.elapsed()))
            }));
        }
        let (mut appends, mut longest) = (0, Duration::ZERO);
        for task in tasks {
            let (n, took) = task.await.context("a PostgreSQL client panicked")??;
            appends += n;
            longest = longest.max(took);
        }
        Ok((appends, longest))
    }
}
