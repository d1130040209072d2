//! The black-box harness: a `labd` on free loopback ports, and a raw HTTP/1.1
//! client that sends exactly the bytes a test names.
#![allow(dead_code)]

pub mod coord;
pub mod s3;
pub mod subscriptions;
pub mod ws;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

/// How long a readiness probe waits before the test fails.
const PROBE_LIMIT: Duration = Duration::from_secs(60);

/// Every listener of every service on a free loopback port.
pub const LOOPBACK_LISTENERS: [&str; 12] = [
    "--bytes-listen",
    "127.0.0.1:0",
    "--bytes-management-listen",
    "127.0.0.1:0",
    "--journal-listen",
    "127.0.0.1:0",
    "--journal-management-listen",
    "127.0.0.1:0",
    "--coord-listen",
    "127.0.0.1:0",
    "--coord-management-listen",
    "127.0.0.1:0",
];

/// A running `labd` and its data directory.
pub struct Labd {
    pub child: Child,
    pub data_dir: PathBuf,
    bytes: Option<SocketAddr>,
    bytes_management: Option<SocketAddr>,
    journal: Option<SocketAddr>,
    journal_management: Option<SocketAddr>,
    coord: Option<SocketAddr>,
    coord_management: Option<SocketAddr>,
    args: Vec<String>,
    env: Vec<(String, String)>,
    /// Under `LAB_TEST_HOSTS=2`, a second labd on the same store, which
    /// the clients alternate with.
    peer: Option<Peer>,
}

/// The second labd of a pair, killed with the first.
struct Peer {
    child: Child,
    bytes: Option<SocketAddr>,
    journal: Option<SocketAddr>,
    coord: Option<SocketAddr>,
    coord_management: Option<SocketAddr>,
}

impl Peer {
    fn of(child: Child, addresses: &Addresses) -> Peer {
        Peer {
            child,
            bytes: addresses.of("bytes", "operations"),
            journal: addresses.of("journal", "operations"),
            coord: addresses.of("coord", "operations"),
            coord_management: addresses.of("coord", "management"),
        }
    }
}

impl Drop for Peer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A fresh directory under the target's temporary directory.
pub fn temp_dir(name: &str) -> PathBuf {
    static NEXT: AtomicU32 = AtomicU32::new(0);
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(format!(
        "{name}-{}-{}",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed)
    ));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// The cluster of `LAB_TEST_STORE=postgres`: one for the whole test
/// process (started with its first `labd`, killed when the process ends),
/// holding a database of its own for each data directory. A database
/// shares nothing with another but the server: its tables, its
/// `LISTEN`/`NOTIFY` channels and its sessions are its own.
static TEST_CLUSTER: std::sync::OnceLock<lab_pgcluster::Cluster> = std::sync::OnceLock::new();

/// The databases on [`TEST_CLUSTER`], by data directory: kept across that
/// `labd`'s restarts, dropped with it.
static TEST_DATABASES: std::sync::Mutex<std::collections::BTreeMap<PathBuf, String>> =
    std::sync::Mutex::new(std::collections::BTreeMap::new());

fn test_cluster() -> &'static lab_pgcluster::Cluster {
    TEST_CLUSTER.get_or_init(|| pg_cluster("test-store"))
}

fn test_databases() -> std::sync::MutexGuard<'static, std::collections::BTreeMap<PathBuf, String>> {
    TEST_DATABASES.lock().unwrap_or_else(|p| p.into_inner())
}

/// A PostgreSQL cluster of the system's binaries in a fresh directory, for
/// a test that runs hosts on a store of its own.
pub fn pg_cluster(name: &str) -> lab_pgcluster::Cluster {
    lab_pgcluster::Cluster::start(&temp_dir(name).join("postgres"))
        .expect("start PostgreSQL")
        .expect("these tests need PostgreSQL installed (Debian: postgresql)")
}

/// The store every `labd` of a test run keeps its key-value state in:
/// `LAB_TEST_STORE=postgres` gives each data directory a database of its
/// own on the process's cluster ([`TEST_CLUSTER`]), so that a suite runs
/// unchanged on the shared-storage backend; otherwise LMDB, the default.
/// A test that names `--store` itself is left as it is.
fn with_test_store(data_dir: &Path, mut args: Vec<String>) -> Vec<String> {
    if std::env::var("LAB_TEST_STORE").as_deref() != Ok("postgres")
        || args.iter().any(|a| a == "--store")
    {
        return args;
    }
    static NEXT: AtomicU32 = AtomicU32::new(0);
    let cluster = test_cluster();
    let known = test_databases().get(data_dir).cloned();
    let database = known.unwrap_or_else(|| {
        let database = format!("test_{}", NEXT.fetch_add(1, Ordering::Relaxed));
        cluster
            .execute(&format!("CREATE DATABASE {database}"))
            .expect("create a test database");
        test_databases().insert(data_dir.to_path_buf(), database.clone());
        database
    });
    args.extend(["--store".to_string(), cluster.url_of(&database)]);
    args
}

/// Whether `args` name a store.
fn args_have_store(args: &[String]) -> bool {
    args.iter().any(|a| a == "--store")
}

/// Whether the harness gives each labd a store of its own
/// (`LAB_TEST_STORE=postgres`), which a pair shares.
fn harness_gives_store() -> bool {
    std::env::var("LAB_TEST_STORE").as_deref() == Ok("postgres")
}

/// The ready file's addresses.
struct Addresses(serde_json::Value);

impl Addresses {
    /// A service this labd does not host is absent from the ready file.
    fn of(&self, service: &str, listener: &str) -> Option<SocketAddr> {
        self.0[service][listener]
            .as_str()
            .map(|a| a.parse().unwrap())
    }
}

/// Starts `labd` with its state in `data_dir/<state>`, `args` and `env`
/// added,
/// and waits for its ready file.
fn spawn_ready(
    data_dir: &Path,
    state: &str,
    args: &[String],
    env: &[(String, String)],
) -> (Child, Addresses) {
    let ready = data_dir.join(format!("{state}-ready.json"));
    let _ = std::fs::remove_file(&ready);
    let cache = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("component-cache");
    let mut child = Command::new(labd_binary())
        .arg("--data-dir")
        .arg(data_dir.join(state))
        .arg("--cache-dir")
        .arg(&cache)
        .args(LOOPBACK_LISTENERS)
        .arg("--ready-file")
        .arg(&ready)
        .args(["--log", "warn"])
        .args(args)
        .envs(env.iter().map(|(k, v)| (k, v)))
        .stdin(Stdio::null())
        .spawn()
        .expect("start labd");
    let started = Instant::now();
    loop {
        if let Ok(text) = std::fs::read_to_string(&ready) {
            let addresses = serde_json::from_str(&text).expect("ready file is JSON");
            return (child, Addresses(addresses));
        }
        if let Some(status) = child.try_wait().unwrap() {
            panic!("labd exited before it was ready: {status}");
        }
        assert!(started.elapsed() < PROBE_LIMIT, "labd did not become ready");
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// The S3 servers of `LAB_TEST_BLOBS=s3`, by data directory.
static TEST_BLOB_SERVERS: std::sync::Mutex<
    Option<std::collections::HashMap<PathBuf, s3::S3Server>>,
> = std::sync::Mutex::new(None);

/// Where every `labd` of a test run keeps its blobs: `LAB_TEST_BLOBS=s3`
/// gives each data directory an S3 server of its own (its files under
/// the data directory, started with its first `labd`, kept across that
/// `labd`'s restarts, stopped when it is dropped), so that a suite runs
/// unchanged on the S3 backend; otherwise local files, the default. A
/// test that names `--blobs` itself is left as it is. The arguments and
/// the environment to add.
fn with_test_blobs(data_dir: &Path, mut args: Vec<String>) -> (Vec<String>, Vec<(String, String)>) {
    if !test_blobs_on_s3() || args.iter().any(|a| a == "--blobs") {
        return (args, Vec::new());
    }
    let mut servers = TEST_BLOB_SERVERS.lock().unwrap();
    let server = servers
        .get_or_insert_with(Default::default)
        .entry(data_dir.to_path_buf())
        .or_insert_with(|| s3::start(&data_dir.join("s3")));
    args.extend(["--blobs".to_string(), server.blobs_setting()]);
    (args, server.env())
}

/// True, saying so, when this run keeps its blobs on S3 and the calling
/// test observes what only the local store shows (`why`); such a test
/// returns at once, its S3 counterpart being in tests/s3.rs.
pub fn skipped_on_s3(why: &str) -> bool {
    let skipped = test_blobs_on_s3();
    if skipped {
        eprintln!("not run with LAB_TEST_BLOBS=s3: {why}");
    }
    skipped
}

/// Whether this run keeps its blobs on S3 (`LAB_TEST_BLOBS=s3`).
pub fn test_blobs_on_s3() -> bool {
    std::env::var("LAB_TEST_BLOBS").as_deref() == Ok("s3")
}

/// The `labd` binary: this package's, or else, in a test of another
/// package of the workspace (`labctl`'s), the one built beside the test
/// (`cargo test --workspace` builds it; alone: `cargo build -p labd`).
pub fn labd_binary() -> PathBuf {
    if let Some(path) = option_env!("CARGO_BIN_EXE_labd") {
        return PathBuf::from(path);
    }
    let test = std::env::current_exe().unwrap();
    // target/<profile>/deps/<test> -> target/<profile>/labd
    let path = test
        .parent()
        .and_then(Path::parent)
        .unwrap()
        .join(format!("labd{}", std::env::consts::EXE_SUFFIX));
    assert!(
        path.is_file(),
        "{} is not built: run `cargo build -p labd` first",
        path.display()
    );
    path
}

/// The components the build produced (the same ones `labd` embeds).
pub fn built_component(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../target/components/wasm32-wasip2/release")
        .join(format!("lab_{name}.wasm"))
}

/// Runs `labd` with `args` expecting it to stop at start; returns what it
/// wrote to stderr.
pub fn refused_start(name: &str, args: &[String]) -> String {
    refused_start_on(&temp_dir(name).join("state"), args)
}

/// [`refused_start`] with its data directory at `data_dir`.
pub fn refused_start_on(data_dir: &Path, args: &[String]) -> String {
    let mut child = Command::new(labd_binary())
        .arg("--data-dir")
        .arg(data_dir)
        .args(["--log", "error"])
        .args(LOOPBACK_LISTENERS)
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let started = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if started.elapsed() > PROBE_LIMIT {
            child.kill().unwrap();
            panic!("labd did not stop at start");
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let mut stderr = String::new();
    std::io::Read::read_to_string(&mut child.stderr.take().unwrap(), &mut stderr).unwrap();
    assert!(!status.success(), "labd started: {stderr}");
    stderr
}

impl Labd {
    /// Starts `labd` with its state in a new directory and `args` added.
    pub fn start(name: &str, args: &[&str]) -> Labd {
        let data_dir = temp_dir(name);
        Labd::start_in(data_dir, args.iter().map(|a| a.to_string()).collect())
    }

    /// Starts `labd` on an existing data directory.
    pub fn start_in(data_dir: PathBuf, args: Vec<String>) -> Labd {
        Labd::start_in_env(data_dir, args, Vec::new())
    }

    /// [`Labd::start_in`] with `env` added to its environment.
    pub fn start_in_env(data_dir: PathBuf, args: Vec<String>, env: Vec<(String, String)>) -> Labd {
        // A pair shares the store the harness gives, never a test's own.
        let paired =
            std::env::var("LAB_TEST_HOSTS").as_deref() == Ok("2") && !args_have_store(&args);
        let args = with_test_store(&data_dir, args);
        let (args, blobs_env) = with_test_blobs(&data_dir, args);
        // Kept whole for a restart, whose arguments already name `--blobs`.
        let env: Vec<(String, String)> = blobs_env.into_iter().chain(env).collect();
        Labd::launch(data_dir, args, env, paired && harness_gives_store())
    }

    /// Starts `labd` (and, `paired`, its peer) with exactly `args` and
    /// `env`.
    fn launch(
        data_dir: PathBuf,
        args: Vec<String>,
        env: Vec<(String, String)>,
        paired: bool,
    ) -> Labd {
        let (child, addresses) = spawn_ready(&data_dir, "state", &args, &env);
        let mut labd = Labd {
            bytes: addresses.of("bytes", "operations"),
            bytes_management: addresses.of("bytes", "management"),
            journal: addresses.of("journal", "operations"),
            journal_management: addresses.of("journal", "management"),
            coord: addresses.of("coord", "operations"),
            coord_management: addresses.of("coord", "management"),
            child,
            data_dir,
            args,
            env,
            peer: None,
        };
        if paired {
            labd.peer = Some(labd.start_peer());
        }
        labd
    }

    /// A second `labd` on this one's store (`LAB_TEST_HOSTS=2`), with the
    /// same world: this one's root key and audience.
    fn start_peer(&self) -> Peer {
        let mut args = self.args.clone();
        if let Some(coord) = self.coord {
            if !args.iter().any(|a| a == "--coord-root-key") {
                args.extend(coord::same_world(self));
            }
            if !args.iter().any(|a| a == "--coord-audience") {
                args.extend(["--coord-audience".into(), format!("http://{coord}")]);
            }
        }
        let (child, addresses) = spawn_ready(&self.data_dir, "peer", &args, &self.env);
        Peer::of(child, &addresses)
    }

    /// The blob store's directory.
    pub fn blobs_dir(&self) -> PathBuf {
        self.data_dir.join("state/blobs")
    }

    /// Files in the staging directory; with blobs on a test S3 server,
    /// its staging objects and pending upload parts too.
    pub fn staging_files(&self) -> usize {
        let local = std::fs::read_dir(self.blobs_dir().join("staging"))
            .map(|d| d.count())
            .unwrap_or(0);
        local
            + self
                .with_test_s3(|s3| s3.objects_under("staging") + s3.pending_parts())
                .unwrap_or(0)
    }

    /// `f` of the S3 server `LAB_TEST_BLOBS=s3` gave this labd, if any.
    fn with_test_s3<T>(&self, f: impl FnOnce(&s3::S3Server) -> T) -> Option<T> {
        let servers = TEST_BLOB_SERVERS.lock().unwrap();
        servers.as_ref()?.get(&self.data_dir).map(f)
    }

    /// SIGKILL, then a new `labd` on the same data directory.
    pub fn kill_and_restart(mut self) -> Labd {
        // This host first, its peer after: a request in flight at this
        // host when the kill begins is still in flight when it lands.
        self.child.kill().unwrap();
        let paired = self.peer.take().is_some();
        self.child.wait().unwrap();
        let data_dir = self.data_dir.clone();
        let args = std::mem::take(&mut self.args);
        let env = std::mem::take(&mut self.env);
        std::mem::forget(self);
        Labd::launch(data_dir, args, env, paired)
    }

    /// SIGKILL without restarting; the data directory stays.
    pub fn kill(mut self) -> PathBuf {
        // As in `kill_and_restart`: this host first.
        self.child.kill().unwrap();
        self.peer = None;
        self.child.wait().unwrap();
        let dir = self.data_dir.clone();
        std::mem::forget(self);
        dir
    }

    /// Sends SIGTERM.
    pub fn terminate(&self) {
        let status = Command::new("kill")
            .args(["-TERM", &self.child.id().to_string()])
            .status()
            .unwrap();
        assert!(status.success());
    }

    /// A client of the bytes operations listener.
    pub fn bytes(&self) -> Client {
        Client {
            address: self.bytes.expect("this labd does not host the service"),
            peer: self.peer.as_ref().and_then(|p| p.bytes),
        }
    }

    /// A client of the bytes management listener.
    pub fn bytes_management(&self) -> Client {
        Client {
            address: self
                .bytes_management
                .expect("this labd does not host the service"),
            peer: None,
        }
    }

    /// A client of the journal operations listener.
    pub fn journal(&self) -> Client {
        Client {
            address: self.journal.expect("this labd does not host the service"),
            peer: self.peer.as_ref().and_then(|p| p.journal),
        }
    }

    /// A client of the journal management listener.
    pub fn journal_management(&self) -> Client {
        Client {
            address: self
                .journal_management
                .expect("this labd does not host the service"),
            peer: None,
        }
    }

    /// A client of the coordination operations listener.
    pub fn coord(&self) -> Client {
        Client {
            address: self.coord.expect("this labd does not host the service"),
            peer: self.peer.as_ref().and_then(|p| p.coord),
        }
    }

    /// A client of the coordination management listener.
    pub fn coord_management(&self) -> Client {
        Client {
            address: self
                .coord_management
                .expect("this labd does not host the service"),
            peer: None,
        }
    }

    /// The tool runs the host and its peer, if any, started, from the
    /// coordination service's metrics (the management listener needs no
    /// instance of the component).
    pub fn tool_runs(&self) -> u64 {
        let peer = self.peer.as_ref().and_then(|p| p.coord_management);
        [self.coord_management, peer]
            .into_iter()
            .flatten()
            .map(|address| {
                Client::of(address)
                    .metric("lab_tool_runs_total")
                    .expect("the metrics count tool runs")
            })
            .sum()
    }

    /// Every file named as a committed blob, with the name it claims:
    /// under the blob directory's fan-outs, or with blobs on a test S3
    /// server, the bucket's `sha256/` objects.
    pub fn blob_files(&self) -> Vec<(String, PathBuf)> {
        let dirs: Vec<PathBuf> = match self.with_test_s3(|s3| s3.object_file("sha256")) {
            Some(dir) => vec![dir],
            None => std::fs::read_dir(self.blobs_dir().join("sha256"))
                .map(|d| d.map(|e| e.unwrap().path()).collect())
                .unwrap_or_default(),
        };
        let mut files = Vec::new();
        for dir in dirs {
            for file in std::fs::read_dir(dir).into_iter().flatten() {
                let file = file.unwrap();
                let name = format!("sha256:{}", file.file_name().to_str().unwrap());
                files.push((name, file.path()));
            }
        }
        files
    }

    /// The file holding the committed blob `name`, wherever it is kept.
    pub fn blob_file(&self, name: &str) -> PathBuf {
        self.blob_files()
            .into_iter()
            .find_map(|(named, path)| (named == name).then_some(path))
            .unwrap_or_else(|| panic!("no committed blob {name}"))
    }

    /// Committed blob files in the blob store.
    pub fn committed_blobs(&self) -> usize {
        if let Some(objects) = self.with_test_s3(|s3| s3.objects_under("sha256")) {
            return objects;
        }
        let Ok(fan_out) = std::fs::read_dir(self.blobs_dir().join("sha256")) else {
            return 0;
        };
        fan_out
            .map(|dir| std::fs::read_dir(dir.unwrap().path()).unwrap().count())
            .sum()
    }
}

impl Drop for Labd {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        // Its database, if it has one, goes with its files, once its peer
        // is stopped too.
        drop(self.peer.take());
        discard(&self.data_dir);
    }
}

/// Removes `data_dir` with what the harness kept for its `labd` across
/// restarts: its database and its S3 server. For a `labd` that
/// [`Labd::kill`] left and nothing restarted.
pub fn discard(data_dir: &Path) {
    let database = test_databases().remove(data_dir);
    if let (Some(database), Some(cluster)) = (database, TEST_CLUSTER.get()) {
        let _ = cluster.execute(&format!("DROP DATABASE {database} WITH (FORCE)"));
    }
    if let Some(servers) = TEST_BLOB_SERVERS.lock().unwrap().as_mut() {
        servers.remove(data_dir);
    }
    let _ = std::fs::remove_dir_all(data_dir);
}

/// Polls `condition` until it holds; fails the test after the probe limit.
pub fn eventually(what: &str, mut condition: impl FnMut() -> bool) {
    let started = Instant::now();
    while !condition() {
        assert!(
            started.elapsed() < PROBE_LIMIT,
            "timed out waiting for: {what}"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// A parsed response.
#[derive(Debug)]
pub struct Response {
    pub status: u16,
    /// (lowercase name, value)
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

impl Response {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }

    pub fn json(&self) -> serde_json::Value {
        serde_json::from_slice(&self.body)
            .unwrap_or_else(|e| panic!("not JSON ({e}): {}", String::from_utf8_lossy(&self.body)))
    }

    /// Asserts an error envelope with this status and code.
    pub fn assert_error(&self, status: u16, code: &str) {
        assert_eq!(
            self.status,
            status,
            "body: {}",
            String::from_utf8_lossy(&self.body)
        );
        assert_eq!(self.header("content-type"), Some("application/json"));
        let body = self.json();
        assert_eq!(body["error"], code, "{body}");
        assert!(body["message"].is_string(), "{body}");
    }
}

/// A raw HTTP/1.1 client: one connection per request, to `address`, or
/// under `LAB_TEST_HOSTS=2` alternately to it and its peer.
#[derive(Clone, Copy)]
pub struct Client {
    pub address: SocketAddr,
    pub peer: Option<SocketAddr>,
}

impl Client {
    /// A client of `address` alone.
    pub fn of(address: SocketAddr) -> Client {
        Client {
            address,
            peer: None,
        }
    }

    pub fn connect(&self) -> TcpStream {
        static TURN: AtomicU32 = AtomicU32::new(0);
        let address = match self.peer {
            Some(peer) if TURN.fetch_add(1, Ordering::Relaxed) % 2 == 1 => peer,
            _ => self.address,
        };
        let stream = TcpStream::connect(address).unwrap();
        stream.set_read_timeout(Some(PROBE_LIMIT)).unwrap();
        stream.set_nodelay(true).unwrap();
        stream
    }

    /// Sends `head` (request line and headers, without the blank line) with
    /// `body` (adding `content-length` when `body` is some), and reads the
    /// response.
    pub fn send(&self, head: &str, body: Option<&[u8]>) -> Response {
        let mut stream = self.connect();
        let mut request = head.trim_end().replace('\n', "\r\n");
        request.push_str("\r\nhost: test\r\nconnection: close\r\n");
        if let Some(body) = body {
            request.push_str(&format!("content-length: {}\r\n", body.len()));
        }
        request.push_str("\r\n");
        stream.write_all(request.as_bytes()).unwrap();
        if let Some(body) = body {
            // The server may answer early (a refusal) and close.
            let _ = stream.write_all(body);
        }
        if head.starts_with("HEAD ") {
            read_head(&mut BufReader::new(&mut stream)).into_response(Vec::new())
        } else {
            read_response(&mut stream)
        }
    }

    pub fn get(&self, target: &str) -> Response {
        self.send(&format!("GET {target} HTTP/1.1"), None)
    }

    /// The value of `series` in this management listener's `GET
    /// /metrics`, if it is there: a metric's name, with all its labels or
    /// none (then its first series).
    pub fn metric(&self, series: &str) -> Option<u64> {
        let metrics = self.get("/metrics");
        assert_eq!(metrics.status, 200);
        String::from_utf8_lossy(&metrics.body)
            .lines()
            .find_map(|line| {
                let rest = line.strip_prefix(series)?;
                if !rest.starts_with([' ', '{']) {
                    return None;
                }
                rest.rsplit(' ').next()?.parse().ok()
            })
    }

    pub fn post(&self, target: &str, content_type: Option<&str>, body: &[u8]) -> Response {
        let mut head = format!("POST {target} HTTP/1.1");
        if let Some(ct) = content_type {
            head.push_str(&format!("\ncontent-type: {ct}"));
        }
        self.send(&head, Some(body))
    }

    pub fn post_json(&self, target: &str, body: &str) -> Response {
        self.post(target, Some("application/json"), body.as_bytes())
    }

    /// `POST /v1/blobs`: asserts success and returns the name.
    pub fn put(&self, bytes: &[u8]) -> String {
        let response = self.post("/v1/blobs", None, bytes);
        assert_eq!(
            response.status,
            200,
            "{}",
            String::from_utf8_lossy(&response.body)
        );
        let body = response.json();
        assert_eq!(body["size"], bytes.len() as u64);
        body["name"].as_str().unwrap().to_string()
    }

    /// The sizes `POST /v1/stat` reports for `names`.
    pub fn stat(&self, names: &[&str]) -> serde_json::Map<String, serde_json::Value> {
        let body = serde_json::json!({ "names": names }).to_string();
        let response = self.post_json("/v1/stat", &body);
        assert_eq!(response.status, 200);
        response.json()["sizes"].as_object().unwrap().clone()
    }
}

/// A `head` request for the root space of the journal `labd` hosts.
pub fn root_head_request(labd: &Labd) -> String {
    let health = labd.journal().get("/healthz").json();
    serde_json::json!({
        "space": {
            "root_id": health["identity"]["root_id"],
            "space_id": health["identity"]["root_space_id"],
        }
    })
    .to_string()
}

/// Reads one response: head, then a body framed by content-length, chunked
/// encoding or the end of the connection. Every response must name its
/// service.
pub fn read_response(stream: &mut TcpStream) -> Response {
    let mut reader = BufReader::new(stream);
    let head = read_head(&mut reader);
    let find = |n: &str| {
        head.headers
            .iter()
            .find(|(h, _)| h == n)
            .map(|(_, v)| v.clone())
    };
    let mut body = Vec::new();
    if let Some(length) = find("content-length") {
        body.resize(length.parse().unwrap(), 0);
        reader.read_exact(&mut body).unwrap();
    } else if find("transfer-encoding").is_some_and(|v| v.eq_ignore_ascii_case("chunked")) {
        loop {
            let mut size_line = String::new();
            reader.read_line(&mut size_line).unwrap();
            let size = usize::from_str_radix(size_line.trim(), 16).unwrap();
            let mut chunk = vec![0; size + 2];
            reader.read_exact(&mut chunk).unwrap();
            if size == 0 {
                break;
            }
            body.extend_from_slice(&chunk[..size]);
        }
    } else {
        reader.read_to_end(&mut body).unwrap();
    }
    head.into_response(body)
}

/// A response's status line and headers.
pub struct Head {
    status: u16,
    headers: Vec<(String, String)>,
}

impl Head {
    fn into_response(self, body: Vec<u8>) -> Response {
        let response = Response {
            status: self.status,
            headers: self.headers,
            body,
        };
        assert!(
            response.header("lab-service").is_some(),
            "a response without Lab-Service: {response:?}"
        );
        response
    }
}

fn read_head(reader: &mut impl BufRead) -> Head {
    let mut status_line = String::new();
    reader.read_line(&mut status_line).unwrap();
    let status: u16 = status_line
        .split(' ')
        .nth(1)
        .unwrap_or_else(|| panic!("bad status line {status_line:?}"))
        .parse()
        .unwrap();
    let mut headers = Vec::new();
    loop {
        let mut line = String::new();
        reader.read_line(&mut line).unwrap();
        let line = line.trim_end();
        if line.is_empty() {
            break;
        }
        let (name, value) = line.split_once(':').unwrap();
        headers.push((name.trim().to_ascii_lowercase(), value.trim().to_string()));
    }
    Head { status, headers }
}

/// SHA-256 blob name of `bytes`, computed independently of the service.
pub fn name_of(bytes: &[u8]) -> String {
    use sha2::Digest;
    format!("sha256:{}", hex::encode(sha2::Sha256::digest(bytes)))
}

/// Deterministic pseudo-random bytes (xorshift), distinct per seed.
pub fn pseudo_random(len: usize, seed: u64) -> Vec<u8> {
    let mut state = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..len)
        .map(|_| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state as u8
        })
        .collect()
}

impl Client {
    /// `POST` of a JSON body like `post_json`, but a transport failure (a
    /// refused connection, a reset, a truncated or unnamed answer) is an
    /// error instead of a panic: for clients racing a crash.
    pub fn try_post_json(&self, target: &str, body: &str) -> std::io::Result<Response> {
        let mut stream = TcpStream::connect(self.address)?;
        stream.set_read_timeout(Some(PROBE_LIMIT))?;
        stream.set_nodelay(true)?;
        let head = format!(
            "POST {target} HTTP/1.1\r\nhost: test\r\nconnection: close\r\n\
             content-type: application/json\r\ncontent-length: {}\r\n\r\n",
            body.len()
        );
        stream.write_all(head.as_bytes())?;
        stream.write_all(body.as_bytes())?;
        try_read_response(&mut stream)
    }
}

/// `read_response` that reports a broken or foreign answer as an error.
pub fn try_read_response(stream: &mut TcpStream) -> std::io::Result<Response> {
    use std::io::{Error, ErrorKind};
    let broken = |what: &str| Error::new(ErrorKind::InvalidData, what.to_string());
    let mut reader = BufReader::new(stream);
    let mut line = String::new();
    if reader.read_line(&mut line)? == 0 {
        return Err(Error::from(ErrorKind::UnexpectedEof));
    }
    let status: u16 = line
        .split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| broken("bad status line"))?;
    let mut headers = Vec::new();
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line)? == 0 {
            return Err(Error::from(ErrorKind::UnexpectedEof));
        }
        let line = line.trim_end();
        if line.is_empty() {
            break;
        }
        let (name, value) = line.split_once(':').ok_or_else(|| broken("bad header"))?;
        headers.push((name.trim().to_ascii_lowercase(), value.trim().to_string()));
    }
    let find = |n: &str| headers.iter().find(|(h, _)| h == n).map(|(_, v)| v.clone());
    let mut body = Vec::new();
    if let Some(length) = find("content-length") {
        body.resize(length.parse().map_err(|_| broken("bad length"))?, 0);
        reader.read_exact(&mut body)?;
    } else if find("transfer-encoding").is_some_and(|v| v.eq_ignore_ascii_case("chunked")) {
        loop {
            let mut size_line = String::new();
            reader.read_line(&mut size_line)?;
            let size = usize::from_str_radix(size_line.trim(), 16)
                .map_err(|_| broken("bad chunk size"))?;
            let mut chunk = vec![0; size + 2];
            reader.read_exact(&mut chunk)?;
            if size == 0 {
                break;
            }
            body.extend_from_slice(&chunk[..size]);
        }
    } else {
        reader.read_to_end(&mut body)?;
    }
    if find("lab-service").is_none() {
        return Err(broken("an answer without Lab-Service"));
    }
    Ok(Response {
        status,
        headers,
        body,
    })
}

/// The peak resident memory of process `pid` in KiB (`VmHWM`).
pub fn peak_rss_kib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let hwm = status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .expect("VmHWM in /proc/PID/status");
    hwm.trim().trim_end_matches("kB").trim().parse().unwrap()
}

/// Starts a new peak for [`peak_rss_kib`] from the current resident size.
pub fn reset_peak_rss(pid: u32) {
    std::fs::write(format!("/proc/{pid}/clear_refs"), "5").unwrap();
}
