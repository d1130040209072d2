//! A throw-away PostgreSQL cluster from the system's binaries (Debian's
//! `/usr/lib/postgresql/<major>/bin`), in a scratch directory, reached on a
//! Unix socket there and nowhere else, with the server's default
//! durability (`fsync=on`, `synchronous_commit=on`, stated on the command
//! line so that no local configuration weakens it).
//!
//! The server is started through `setpriv`, which execs it, with a
//! parent-death signal, from a thread kept for it until the cluster is
//! stopped or dropped: it is killed when that thread ends, and so whatever
//! way the caller's process ends, but not when the thread that started it
//! ends (a runtime's worker may be retired): no server outlives its
//! process. When
//! the caller is root it runs as the unprivileged `nobody` (PostgreSQL
//! refuses to run as root), and its files are in a directory of its own
//! under /tmp, handed to that user.
//!
//! Readiness is the server's own: the status line of `postmaster.pid`
//! reads `ready` once it accepts connections.

use std::io;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// Clusters this process made, numbering their directories.
static NEXT: AtomicU32 = AtomicU32::new(0);

/// The cluster's superuser, trusted on its socket.
pub const USER: &str = "lab";
/// The database every cluster has.
pub const DATABASE: &str = "postgres";
/// The user the cluster runs as when the caller is root.
const UNPRIVILEGED: &str = "nobody";
const UNPRIVILEGED_GROUP: &str = "nogroup";
/// The server's start-up, waited for at most.
const START_TIMEOUT: Duration = Duration::from_secs(60);
/// `postmaster.pid`'s line holding the server's status (PostgreSQL 10 on).
const STATUS_LINE: usize = 7;

/// A running cluster, stopped (fast shutdown) on drop.
pub struct Cluster {
    bin: PathBuf,
    dir: PathBuf,
    root: bool,
    child: Option<Kept>,
    /// `PostgreSQL` and the server's version number.
    pub version: String,
}

/// The newest `bin` directory of the system's PostgreSQL installations.
pub fn installed() -> Option<PathBuf> {
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

fn is_root() -> bool {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|status| {
            let uid = status.lines().find(|l| l.starts_with("Uid:"))?;
            uid.split_whitespace().nth(1).map(|real| real == "0")
        })
        .unwrap_or(false)
}

fn failed(what: &str, detail: impl std::fmt::Display) -> io::Error {
    io::Error::other(format!("{what}: {detail}"))
}

impl Cluster {
    /// Makes a cluster under `dir` (which it owns from then on; as root,
    /// under a directory of its own in /tmp instead) and starts it; `None` where PostgreSQL is not installed. The server lives until
    /// the cluster is dropped or stopped, or the calling thread ends.
    pub fn start(dir: &Path) -> io::Result<Option<Cluster>> {
        let Some(bin) = installed() else {
            return Ok(None);
        };
        let root = is_root();
        // The unprivileged user must reach its files: not under `dir`,
        // whose ancestors may be closed to others (a checkout in a private
        // directory), but in a directory of its own under /tmp, removed
        // when the cluster is dropped.
        let dir = if root {
            remove_orphans();
            let own = PathBuf::from("/tmp").join(format!(
                "lab-pgcluster-{}-{}",
                std::process::id(),
                NEXT.fetch_add(1, Ordering::Relaxed)
            ));
            let _ = std::fs::remove_dir_all(&own);
            std::fs::create_dir_all(&own)?;
            let status = Command::new("chown").arg(UNPRIVILEGED).arg(&own).status()?;
            if !status.success() {
                return Err(failed("chown", own.display()));
            }
            own
        } else {
            std::fs::create_dir_all(dir)?;
            dir.to_path_buf()
        };
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
        let mut cluster = Cluster {
            bin,
            dir,
            root,
            child: None,
            version: format!("PostgreSQL {number}"),
        };
        let initdb = cluster
            .command("initdb")
            .arg(format!("--username={USER}"))
            .args(["--auth=trust", "--no-sync", "-D"])
            .arg(cluster.data())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .output()?;
        if !initdb.status.success() {
            return Err(failed("initdb", String::from_utf8_lossy(&initdb.stderr)));
        }
        cluster.resume()?;
        Ok(Some(cluster))
    }

    fn data(&self) -> PathBuf {
        self.dir.join("data")
    }

    /// A program of the cluster, killed when the spawning thread ends, and
    /// as the unprivileged user when the caller is root; `setpriv` execs
    /// the program, so the child is the program.
    fn command(&self, program: &str) -> Command {
        let mut command = Command::new("setpriv");
        command.args(["--pdeathsig", "KILL"]);
        if self.root {
            command
                .args(["--reuid", UNPRIVILEGED, "--regid", UNPRIVILEGED_GROUP])
                .arg("--clear-groups");
        }
        command.arg("--").arg(self.bin.join(program));
        command
    }

    /// The directory holding the server's socket.
    pub fn socket_dir(&self) -> &Path {
        &self.dir
    }

    /// A connection string for the cluster's superuser, in URL form.
    pub fn url(&self) -> String {
        self.url_of(DATABASE)
    }

    /// [`Cluster::url`] for `database` instead of [`DATABASE`].
    pub fn url_of(&self, database: &str) -> String {
        format!(
            "postgresql://{USER}@/{database}?host={}",
            self.dir.display()
        )
    }

    /// `psql` connected to the cluster's database as its superuser, for a
    /// test to hold a session of its own (no `setpriv`: a client may run as
    /// the caller).
    pub fn psql(&self) -> Command {
        let mut command = Command::new(self.bin.join("psql"));
        command
            .arg("--no-psqlrc")
            .args(["--quiet", "--host"])
            .arg(&self.dir)
            .args(["--username", USER, "--dbname", DATABASE]);
        command
    }

    /// Runs one SQL statement in [`DATABASE`] (`CREATE DATABASE`, which
    /// cannot run inside a transaction, among them).
    pub fn execute(&self, statement: &str) -> io::Result<()> {
        let output = self
            .psql()
            .args(["--set", "ON_ERROR_STOP=1", "--command", statement])
            .stdin(Stdio::null())
            .output()?;
        if !output.status.success() {
            return Err(failed(statement, String::from_utf8_lossy(&output.stderr)));
        }
        Ok(())
    }

    /// Starts the server on the cluster's data (again, after [`stop`]),
    /// and returns once it accepts connections.
    ///
    /// [`stop`]: Cluster::stop
    pub fn resume(&mut self) -> io::Result<()> {
        if self.child.is_some() {
            return Ok(());
        }
        let pid_file = self.data().join("postmaster.pid");
        let mut command = self.command("postgres");
        command
            .arg("-D")
            .arg(self.data())
            .args(["-c", "listen_addresses=", "-c"])
            .arg(format!("unix_socket_directories={}", self.dir.display()))
            .args(["-c", "fsync=on", "-c", "synchronous_commit=on"])
            .args(["-c", "full_page_writes=on", "-c", "max_connections=500"])
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        self.child = Some(Kept::spawn(command)?);
        let started = Instant::now();
        loop {
            let status = std::fs::read_to_string(&pid_file).unwrap_or_default();
            if status.lines().nth(STATUS_LINE).map(str::trim) == Some("ready") {
                return Ok(());
            }
            let kept = self.child.as_mut().expect("just started");
            if let Some(exit) = kept.child.try_wait()? {
                self.child = None;
                return Err(failed("postgres exited", exit));
            }
            if started.elapsed() > START_TIMEOUT {
                return Err(failed("postgres did not start", self.dir.display()));
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    /// Stops the server (fast shutdown: sessions are ended, what they
    /// committed stays) and waits for it; the data stays for [`resume`].
    ///
    /// [`resume`]: Cluster::resume
    pub fn stop(&mut self) {
        if let Some(mut kept) = self.child.take() {
            let _ = Command::new("kill")
                .args(["-INT", &kept.child.id().to_string()])
                .status();
            let _ = kept.child.wait();
        }
    }
}

/// Removes the directories of clusters whose process is gone (killed
/// before it could drop them): `/tmp/lab-pgcluster-<pid>-<n>`.
fn remove_orphans() {
    let Ok(entries) = std::fs::read_dir("/tmp") else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(pid) = name
            .to_str()
            .and_then(|n| n.strip_prefix("lab-pgcluster-"))
            .and_then(|rest| rest.split('-').next())
        else {
            continue;
        };
        if !Path::new("/proc").join(pid).exists() {
            let _ = std::fs::remove_dir_all(entry.path());
        }
    }
}

/// A child with a parent-death signal, and the thread that spawned it,
/// which lives until this is dropped.
struct Kept {
    child: Child,
    /// Ends the keeping thread when dropped.
    _release: mpsc::Sender<()>,
}

impl Kept {
    fn spawn(mut command: Command) -> io::Result<Kept> {
        let (spawned_tx, spawned) = mpsc::channel();
        let (release, released) = mpsc::channel::<()>();
        std::thread::Builder::new()
            .name("lab-pgcluster".into())
            .spawn(move || {
                let spawned = command.spawn();
                let keep = spawned.is_ok();
                let _ = spawned_tx.send(spawned);
                if keep {
                    // Until the sender drops: then `recv` fails.
                    let _ = released.recv();
                }
            })?;
        let child = spawned
            .recv()
            .map_err(|_| io::Error::other("the keeping thread ended"))??;
        Ok(Kept {
            child,
            _release: release,
        })
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        self.stop();
        if self.root {
            let _ = std::fs::remove_dir_all(&self.dir);
        }
    }
}
