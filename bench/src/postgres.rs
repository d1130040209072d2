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
//! PostgreSQL refuses to run as root: when the bench is root, `initdb` and
//! `postgres` run as the unprivileged `nobody` (through `setpriv`, which
//! execs them), and the cluster's directory is handed to that user.

use anyhow::{bail, ensure, Context, Result};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio_postgres::{Client, NoTls};

/// The user the cluster runs as when the bench is root.
const UNPRIVILEGED: &str = "nobody";
const UNPRIVILEGED_GROUP: &str = "nogroup";
/// The cluster's start-up, waited for at most.
const START_TIMEOUT: Duration = Duration::from_secs(60);
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
    child: Child,
    socket_dir: PathBuf,
    /// `PostgreSQL` and the server's version number.
    pub version: String,
}

/// The newest `bin` directory of the system's PostgreSQL installations.
fn installed() -> Option<PathBuf> {
    let mut found: Vec<(u32, PathBuf)> = std::fs::read_dir("/usr/lib/postgresql")
        .ok()?
        .flatten()
        .filter_map(|dir| {
            let major = dir.file_name().to_str()?.parse().ok()?;
            let bin = dir.path().join("bin");
            (bin.join("initdb").is_file() && bin.join("postgres").is_file()).then_some((major, bin))
        })
        .collect();
    found.sort();
    found.pop().map(|(_, bin)| bin)
}

/// A command of the cluster, as the unprivileged user when the bench is
/// root; `setpriv` execs the program, so the child is the program itself.
fn as_owner(program: &Path, root: bool) -> Command {
    if root {
        let mut command = Command::new("setpriv");
        command
            .args(["--reuid", UNPRIVILEGED, "--regid", UNPRIVILEGED_GROUP])
            .args(["--clear-groups", "--"])
            .arg(program);
        command
    } else {
        Command::new(program)
    }
}

fn is_root() -> bool {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|status| {
            let uid = status.lines().find(|l| l.starts_with("Uid:"))?;
            uid.split_whitespace().nth(1).map(|real| real == "0")
        })
        .unwrap_or(false)
}

impl Postgres {
    /// Starts a cluster under `dir` with `journals` heads at 0 (spaces 0 to
    /// `journals - 1`), or none where PostgreSQL is not installed.
    pub async fn start(dir: &Path, journals: usize) -> Result<Option<Postgres>> {
        let Some(bin) = installed() else {
            return Ok(None);
        };
        let root = is_root();
        let data = dir.join("data");
        std::fs::create_dir_all(dir).with_context(|| format!("create {}", dir.display()))?;
        if root {
            let status = Command::new("chown").arg(UNPRIVILEGED).arg(dir).status()?;
            ensure!(status.success(), "chown {UNPRIVILEGED} {}", dir.display());
        }
        // `postgres (PostgreSQL) 15.18 (Debian 15.18-0+deb12u1)`
        let printed = Command::new(bin.join("postgres"))
            .arg("--version")
            .output()?
            .stdout;
        let number = String::from_utf8_lossy(&printed)
            .split_whitespace()
            .nth(2)
            .unwrap_or("?")
            .to_string();
        let version = format!("PostgreSQL {number}");
        let initdb = as_owner(&bin.join("initdb"), root)
            .args(["--auth=trust", "--username=bench", "--no-sync", "-D"])
            .arg(&data)
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .output()
            .context("run initdb")?;
        ensure!(
            initdb.status.success(),
            "initdb failed: {}",
            String::from_utf8_lossy(&initdb.stderr)
        );
        let child = as_owner(&bin.join("postgres"), root)
            .arg("-D")
            .arg(&data)
            .args(["-c", "listen_addresses=", "-c"])
            .arg(format!("unix_socket_directories={}", dir.display()))
            .args(["-c", "fsync=on", "-c", "synchronous_commit=on"])
            .args(["-c", "full_page_writes=on", "-c", "max_connections=100"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .context("start postgres")?;
        let mut postgres = Postgres {
            child,
            socket_dir: dir.to_path_buf(),
            version,
        };
        let client = postgres.ready().await?;
        client.batch_execute(SCHEMA).await?;
        client
            .execute(
                "INSERT INTO head SELECT s, 0 FROM generate_series(0, $1 - 1) s",
                &[&(journals as i32)],
            )
            .await?;
        Ok(Some(postgres))
    }

    /// The first connection, once the server accepts one.
    async fn ready(&mut self) -> Result<Client> {
        let started = Instant::now();
        loop {
            match self.connect().await {
                Ok(client) => return Ok(client),
                Err(e) if started.elapsed() > START_TIMEOUT => {
                    return Err(e.context("PostgreSQL did not start"))
                }
                Err(_) => {
                    if let Some(status) = self.child.try_wait()? {
                        bail!("postgres exited with {status}");
                    }
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
            }
        }
    }

    async fn connect(&self) -> Result<Client> {
        let (client, connection) = tokio_postgres::Config::new()
            .host_path(&self.socket_dir)
            .user("bench")
            .dbname("postgres")
            .connect(NoTls)
            .await?;
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

impl Drop for Postgres {
    fn drop(&mut self) {
        // SIGINT: PostgreSQL's fast shutdown; then wait so that the scratch
        // directory can go.
        let _ = Command::new("kill")
            .args(["-INT", &self.child.id().to_string()])
            .status();
        let _ = self.child.wait();
    }
}
