//! Every setting of `labd`, by flag and by environment variable.

use clap::Parser;
use std::net::SocketAddr;
use std::path::PathBuf;

/// labd: serves the bytes, journal and coordination services from
/// WebAssembly components.
#[derive(Debug, Clone, Parser)]
#[command(
    name = "labd",
    version,
    after_help = "Maintenance: `labd backup`, `labd restore`, `labd check` \
                  (each with --help; docs/operations.md)."
)]
pub struct Settings {
    /// Directory for all durable state (blob files, stores).
    #[arg(long, env = "LAB_DATA_DIR", default_value = "./data")]
    pub data_dir: PathBuf,

    /// Directory for compiled components, reused across starts
    /// [default: <data-dir>/cache].
    #[arg(long, env = "LAB_CACHE_DIR")]
    pub cache_dir: Option<PathBuf>,

    /// Operations listener of the bytes service.
    #[arg(long, env = "LAB_BYTES_LISTEN", default_value = "127.0.0.1:8090")]
    pub bytes_listen: SocketAddr,

    /// Management listener of the bytes service.
    #[arg(
        long,
        env = "LAB_BYTES_MANAGEMENT_LISTEN",
        default_value = "127.0.0.1:8091"
    )]
    pub bytes_management_listen: SocketAddr,

    /// A bytes component to run instead of the built-in one; the management
    /// listener's `POST /reload` reads it again.
    #[arg(long, env = "LAB_BYTES_COMPONENT")]
    pub bytes_component: Option<PathBuf>,

    /// Operations listener of the journal service.
    #[arg(long, env = "LAB_JOURNAL_LISTEN", default_value = "127.0.0.1:8092")]
    pub journal_listen: SocketAddr,

    /// Management listener of the journal service.
    #[arg(
        long,
        env = "LAB_JOURNAL_MANAGEMENT_LISTEN",
        default_value = "127.0.0.1:8093"
    )]
    pub journal_management_listen: SocketAddr,

    /// A journal component to run instead of the built-in one; the
    /// management listener's `POST /reload` reads it again.
    #[arg(long, env = "LAB_JOURNAL_COMPONENT")]
    pub journal_component: Option<PathBuf>,

    /// The journal's argument index, fixed when its store is provisioned
    /// (a store keeps the list it was provisioned with): comma-separated
    /// `PREDICATE:INDEX` items, PREDICATE the padded standard base64 of a
    /// canonical atom (a filter's `predicate`), INDEX 0..65535. A filtered
    /// read naming a declared predicate and argument index is served from
    /// it; every entry pays one row per declared pair it has. The empty
    /// value declares none [default: `record` arguments 4 and 1, which the
    /// coordination service's searches filter on].
    #[arg(
        long,
        env = "LAB_JOURNAL_ARGUMENT_INDEX",
        default_value = "2CdGcmVjb3Jk:4,2CdGcmVjb3Jk:1",
        hide_default_value = true
    )]
    pub journal_argument_index: String,

    /// Operations listener of the coordination service.
    #[arg(long, env = "LAB_COORD_LISTEN", default_value = "127.0.0.1:8094")]
    pub coord_listen: SocketAddr,

    /// Management listener of the coordination service.
    #[arg(
        long,
        env = "LAB_COORD_MANAGEMENT_LISTEN",
        default_value = "127.0.0.1:8095"
    )]
    pub coord_management_listen: SocketAddr,

    /// A coordination component to run instead of the built-in one; the
    /// management listener's `POST /reload` reads it again.
    #[arg(long, env = "LAB_COORD_COMPONENT")]
    pub coord_component: Option<PathBuf>,

    /// The world the coordination service keeps (its journal space).
    #[arg(long, env = "LAB_COORD_WORLD", default_value = "lab")]
    pub coord_world: String,

    /// The root principal the coordination service trusts: `ed25519:` and
    /// 64 lowercase hex digits of its public key [default: the development
    /// root key, `<data-dir>/coord/root.key`, created on the first start].
    #[arg(long, env = "LAB_COORD_ROOT_KEY")]
    pub coord_root_key: Option<String>,

    /// With `--coord-root-key`: a secret key file
    /// (`ed25519-secret:<64 hex>`) the coordination service signs the
    /// grants it issues with [default: none; with the development root key,
    /// that key].
    #[arg(long, env = "LAB_COORD_ISSUER_KEY_FILE")]
    pub coord_issuer_key_file: Option<PathBuf>,

    /// The audience signed requests must name [default: `http://` and the
    /// bound operations address of the coordination service].
    #[arg(long, env = "LAB_COORD_AUDIENCE")]
    pub coord_audience: Option<String>,

    /// A tool release the coordination service offers, as
    /// `DESCRIPTION=COMPONENT`: the path of the tool's JSON description
    /// (UTF-8, at most 1 MiB) and the path of its WebAssembly component,
    /// which is kept in the blob store. Repeatable, or comma-separated in
    /// the variable.
    #[arg(long = "coord-tool", env = "LAB_COORD_TOOLS", value_delimiter = ',')]
    pub coord_tools: Vec<String>,

    /// MiB of linear memory one tool run may hold; past it the run ends
    /// `failed` (`limit: memory`).
    #[arg(long, env = "LAB_TOOL_MEMORY_MIB", default_value_t = 256,
          value_parser = clap::value_parser!(u64).range(1..=4096))]
    pub tool_memory_mib: u64,

    /// Fuel (about one per WebAssembly instruction) one tool run may use;
    /// past it the run ends `failed` (`limit: fuel`).
    #[arg(long, env = "LAB_TOOL_FUEL", default_value_t = 20_000_000_000)]
    pub tool_fuel: u64,

    /// Milliseconds of wall-clock time one tool run may take; past it the
    /// run ends `failed` (`limit: wall-time`).
    #[arg(long, env = "LAB_TOOL_WALL_MS", default_value_t = 60_000)]
    pub tool_wall_ms: u64,

    /// Outputs one tool run may create; past it the run ends `failed`
    /// (`limit: outputs`). The default fits one journal batch with its
    /// result fact.
    #[arg(long, env = "LAB_TOOL_MAX_OUTPUTS", default_value_t = 127)]
    pub tool_max_outputs: u32,

    /// Bytes all outputs of one tool run may hold together (no output is
    /// larger than `--blob-cap`); past it the run ends `failed`
    /// (`limit: output-bytes`).
    #[arg(long, env = "LAB_TOOL_MAX_OUTPUT_BYTES", default_value_t = 1 << 30)]
    pub tool_max_output_bytes: u64,

    /// Tool runs at once; more wait up to `--tool-run-wait-ms`, then are
    /// refused as unavailable.
    #[arg(long, env = "LAB_TOOL_CONCURRENT_RUNS", default_value_t = 2,
          value_parser = clap::value_parser!(u32).range(1..))]
    pub tool_concurrent_runs: u32,

    /// Milliseconds a tool run waits for a free slot.
    #[arg(long, env = "LAB_TOOL_RUN_WAIT_MS", default_value_t = 2_000)]
    pub tool_run_wait_ms: u64,

    /// Effects tool releases may be granted (comma-separated: `clock`,
    /// `random`); a release declaring another is refused at start.
    #[arg(long, env = "LAB_TOOL_EFFECTS", value_delimiter = ',')]
    pub tool_effects: Vec<String>,

    /// The services this labd hosts (comma-separated). They start in the
    /// order bytes, journal, coord: each may call the ones before it (and
    /// every `--remote`) while it prepares.
    #[arg(
        long,
        env = "LAB_SERVICES",
        value_delimiter = ',',
        default_value = "bytes,journal,coord"
    )]
    pub services: Vec<String>,

    /// A service hosted elsewhere, as `NAME=URL` of its operations listener
    /// (`journal=http://10.0.0.2:8092`); calls to it go over HTTP.
    /// Repeatable, or comma-separated in the variable.
    #[arg(long = "remote", env = "LAB_REMOTE", value_delimiter = ',')]
    pub remotes: Vec<String>,

    /// With the journal hosted elsewhere: the base URL of its management
    /// listener (`http://10.0.0.2:8093`), whose `GET /advances` stream the
    /// coordination service follows while subscriptions are open; or
    /// `store`, when the journal's labd shares this one's PostgreSQL store,
    /// whose channel carries the advances of every host. Without it, such
    /// a deployment refuses `subscribe` as `unavailable`.
    #[arg(long, env = "LAB_JOURNAL_ADVANCES")]
    pub journal_advances: Option<String>,

    /// Advances one follower of the journal's `GET /advances` stream may
    /// have unsent; past it the stream drops them and says so (a line
    /// `{"lost": true}`), and the follower's subscriptions get a `gap`.
    /// On a shared PostgreSQL store, also the journals whose advances the
    /// host may hold unpublished to the other hosts; past it they are lost
    /// and the other hosts' subscriptions get a `gap`.
    #[arg(long, env = "LAB_ADVANCE_STREAM_LINES", default_value_t = 4096,
          value_parser = clap::value_parser!(u64).range(1..=1_048_576))]
    pub advance_stream_lines: u64,

    /// Largest blob the bytes service accepts, in bytes.
    #[arg(long, env = "LAB_BLOB_CAP", default_value_t = 1 << 30)]
    pub blob_cap: u64,

    /// Where blobs live: `local`, files under `<data-dir>/blobs`; or
    /// `s3://BUCKET`, objects in an S3 bucket several hosts may share,
    /// reached as the standard AWS environment says (`AWS_ENDPOINT_URL`,
    /// `AWS_REGION`, `AWS_ACCESS_KEY_ID`, `AWS_SECRET_ACCESS_KEY`;
    /// docs/scale-out.md).
    #[arg(long, env = "LAB_BLOBS", default_value = "local",
          value_parser = crate::blobstore::BlobsSetting::parse)]
    pub blobs: crate::blobstore::BlobsSetting,

    /// MiB that blob writes to S3 in progress may hold in memory together
    /// (each holds up to one 8 MiB part). A write that cannot have its
    /// part's memory within `--instance-wait-ms` is refused with 503
    /// `unavailable` and `Retry-After`, and publishes nothing.
    #[arg(long, env = "LAB_BLOB_UPLOAD_MEMORY_MIB", default_value_t = 256,
          value_parser = clap::value_parser!(u64).range(8..=1 << 20))]
    pub blob_upload_memory_mib: u64,

    /// The key-value store's map at start, in bytes (address space
    /// reserved, not disk used; never below what the data already uses).
    /// It grows, doubling, up to `--lmdb-map-ceiling`
    /// [default: 1 GiB, or the ceiling when that is smaller].
    #[arg(long, env = "LAB_LMDB_MAP_SIZE")]
    pub lmdb_map_size: Option<usize>,

    /// Largest size the key-value store's map may grow to, in bytes; past
    /// it, writes are refused with 503 `unavailable` naming this setting,
    /// and reads go on [default: 64 GiB, or `--lmdb-map-size` when that is
    /// larger].
    #[arg(long, env = "LAB_LMDB_MAP_CEILING")]
    pub lmdb_map_ceiling: Option<usize>,

    /// The key-value store's write-ahead log (two files, half each), in
    /// bytes of disk written once at start; LMDB syncs itself each time a
    /// log file is half full, or its map's high-water mark climbed this far
    /// [default: an eighth of the map at start, from 1 MiB to 16 MiB].
    #[arg(long, env = "LAB_LMDB_LOG_SIZE",
          value_parser = clap::value_parser!(u64).range(65536..=1 << 32))]
    pub lmdb_log_size: Option<u64>,

    /// Longest the key-value store's writer pauses a group for more
    /// writers to join before it commits, in microseconds; only while the
    /// group holds two or more, the cores are saturated and more requests
    /// are being served outside the group than keep them busy. A larger
    /// group costs each write less CPU and fewer device writes; 0 commits
    /// as soon as the writer's queue is empty.
    #[arg(long, env = "LAB_LMDB_GROUP_WAIT_US", default_value_t = 1000,
          value_parser = clap::value_parser!(u64).range(0..=10_000))]
    pub lmdb_group_wait_us: u64,

    /// Where the services' key-value state lives: `lmdb`, an LMDB
    /// environment in the data directory; or a PostgreSQL database, named
    /// by a `postgresql://` URL (`?host=/dir` for a Unix socket), which
    /// several hosts may share (docs/scale-out.md).
    #[arg(long, env = "LAB_STORE", default_value = "lmdb")]
    pub store: String,

    /// Connections to a PostgreSQL store this host keeps open at most; a
    /// request that finds every one busy for five seconds is refused with
    /// 503 `unavailable`.
    #[arg(long, env = "LAB_STORE_CONNECTIONS", default_value_t = 32)]
    pub store_connections: usize,

    /// The `storage` health check fails once the key-value store uses this
    /// percent of its map's ceiling (writes go on to the ceiling).
    #[arg(long, env = "LAB_STORAGE_ALARM_MAP_PERCENT", default_value_t = 80,
          value_parser = clap::value_parser!(u8).range(1..=100))]
    pub storage_alarm_map_percent: u8,

    /// The `storage` health check fails once the data directory's
    /// filesystem has this many bytes free or fewer (writes go on until it
    /// is full).
    #[arg(long, env = "LAB_STORAGE_ALARM_FREE_BYTES", default_value_t = 1 << 30)]
    pub storage_alarm_free_bytes: u64,

    /// Requests one service runs at once (its instance budget: one
    /// component instance each, and the one instance of another service a
    /// request may be calling). More wait up to `--instance-wait-ms`, then
    /// are refused with 503 `unavailable`.
    #[arg(long, env = "LAB_MAX_CONCURRENT_REQUESTS", default_value_t = 64,
          value_parser = clap::value_parser!(u32).range(1..))]
    pub max_concurrent_requests: u32,

    /// Instances each service keeps for its operational routes (`GET
    /// /livez`, `GET /healthz`) beyond its budget, so that a service full
    /// of slow requests still answers them.
    #[arg(long, env = "LAB_OPERATIONAL_INSTANCES", default_value_t = 2)]
    pub operational_instances: u32,

    /// Milliseconds a request waits for a free instance of its service, or
    /// for memory its instance grows into, before it is refused with 503
    /// `unavailable` and `Retry-After`.
    #[arg(long, env = "LAB_INSTANCE_WAIT_MS", default_value_t = 2_000)]
    pub instance_wait_ms: u64,

    /// `perfmap` writes `/tmp/perf-<pid>.map` as components are loaded, so
    /// that `perf report` names the functions of guest code; `none` (the
    /// default) writes nothing.
    #[arg(long, env = "LAB_GUEST_PROFILER", value_enum, default_value_t = GuestProfiler::None)]
    pub guest_profiler: GuestProfiler,

    /// MiB of linear memory every instance may use without charge; the
    /// pool keeps this much of a slot resident between requests.
    #[arg(long, env = "LAB_INSTANCE_BASE_MEMORY_MIB", default_value_t = 4)]
    pub instance_base_memory_mib: u64,

    /// MiB of linear memory all instances together may grow to beyond
    /// their base. A growth that cannot be charged within
    /// `--instance-wait-ms` is denied, and its request refused with 503
    /// `unavailable`.
    #[arg(long, env = "LAB_MEMORY_BUDGET_MIB", default_value_t = 512)]
    pub memory_budget_mib: u64,

    /// Open connections one listener serves; past it a connection is
    /// answered 503 `unavailable` with `Retry-After` and closed (and past
    /// twice it, the listener stops accepting until one closes).
    #[arg(long, env = "LAB_MAX_CONNECTIONS", default_value_t = 1024,
          value_parser = clap::value_parser!(u32).range(1..))]
    pub max_connections: u32,

    /// Milliseconds a client has to send a request's head, from the start
    /// of a connection or the end of the previous response; past it the
    /// connection is closed.
    #[arg(long, env = "LAB_HEADER_READ_TIMEOUT_MS", default_value_t = 10_000)]
    pub header_read_timeout_ms: u64,

    /// Milliseconds a component waits for the next bytes of a request body;
    /// past it the body reads as aborted, and the connection is closed
    /// after the response.
    #[arg(long, env = "LAB_BODY_READ_TIMEOUT_MS", default_value_t = 30_000)]
    pub body_read_timeout_ms: u64,

    /// Largest answer, in bytes, a service's `services.call` reads whole
    /// from another service, co-hosted or remote.
    #[arg(long, env = "LAB_MAX_CALL_ANSWER_BYTES", default_value_t = 64 << 20)]
    pub max_call_answer_bytes: u64,

    /// Signed requests' (principal, nonce) pairs one service keeps in
    /// memory (about 70 bytes each) until they expire; past it a pair is
    /// remembered with a write to the service's store instead
    /// (contracts/coordination/AUTH.md, section 4). On a PostgreSQL
    /// `--store` the pairs are kept in the store, which the hosts share,
    /// and this bound does not apply.
    #[arg(long, env = "LAB_REPLAY_TABLE_PAIRS", default_value_t = 1 << 20)]
    pub replay_table_pairs: usize,

    /// Milliseconds of WebAssembly compute one request may use (waiting on
    /// the network or the disk does not count); past it the request is a
    /// 500 `internal` and its instance is discarded.
    #[arg(long, env = "LAB_COMPUTE_LIMIT_MS", default_value_t = 30_000)]
    pub compute_limit_ms: u64,

    /// Bytes of socket frames that calls in flight may hold, across every
    /// socket connection; past it a connection is not read from until its
    /// calls finish (design.md, "Sockets").
    #[arg(long, env = "LAB_SOCKET_FRAME_BUDGET_BYTES", default_value_t = 256 << 20,
          value_parser = clap::value_parser!(u64).range(1..))]
    pub socket_frame_budget_bytes: u64,

    /// Shortest time, in milliseconds, between two writes of a socket
    /// connection's subscription frames: advances announced meanwhile
    /// coalesce, one event per journal per subscription (design.md,
    /// "Sockets"). 0 writes them as soon as they are announced.
    #[arg(long, env = "LAB_SOCKET_EVENT_INTERVAL_MS", default_value_t = 5,
          value_parser = clap::value_parser!(u64).range(0..=10_000))]
    pub socket_event_interval_ms: u64,

    /// Milliseconds a socket connection's writer waits for its client to
    /// take a frame; past it the frame is dropped and the connection
    /// closed (the client is not reading).
    #[arg(long, env = "LAB_SOCKET_REPLY_TIMEOUT_MS", default_value_t = 30_000,
          value_parser = clap::value_parser!(u64).range(1..))]
    pub socket_reply_timeout_ms: u64,

    /// Seconds in-flight requests get to finish after SIGINT or SIGTERM.
    #[arg(long, env = "LAB_SHUTDOWN_GRACE", default_value_t = 30)]
    pub shutdown_grace: u64,

    /// Log filter (`info`, `labd=debug`, …); one line per request at `info`.
    #[arg(long, env = "LAB_LOG", default_value = "info")]
    pub log: String,

    /// Once every listener is bound, write their addresses here as JSON
    /// (`{"bytes": {"operations": "…", "management": "…"}, "journal": …,
    /// "coord": …}`, a service hosted elsewhere absent);
    /// useful with port 0.
    #[arg(long, env = "LAB_READY_FILE")]
    pub ready_file: Option<PathBuf>,
}

/// Default map size at start and ceiling.
const DEFAULT_MAP_SIZE: usize = 1 << 30;
const DEFAULT_MAP_CEILING: usize = 64 << 30;

impl Settings {
    /// The key-value map's size at start and its ceiling. Given alone, the
    /// map size raises the default ceiling to it (a deployment that set the
    /// old single bound keeps it as a floor); given both, the size may not
    /// pass the ceiling.
    pub fn map_limits(&self) -> Result<crate::kv::MapLimits, String> {
        let (initial, ceiling) = match (self.lmdb_map_size, self.lmdb_map_ceiling) {
            (Some(size), Some(ceiling)) if size > ceiling => {
                return Err(format!(
                    "--lmdb-map-size {size} is larger than --lmdb-map-ceiling {ceiling}"
                ))
            }
            (Some(size), Some(ceiling)) => (size, ceiling),
            (Some(size), None) => (size, size.max(DEFAULT_MAP_CEILING)),
            (None, Some(ceiling)) => (DEFAULT_MAP_SIZE.min(ceiling), ceiling),
            (None, None) => (DEFAULT_MAP_SIZE, DEFAULT_MAP_CEILING),
        };
        let log = self
            .lmdb_log_size
            .unwrap_or((initial as u64 / 8).clamp(1 << 20, 16 << 20));
        Ok(crate::kv::MapLimits {
            initial,
            ceiling,
            log,
        })
    }
}

/// What the engine tells a profiler about the code it compiles.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum GuestProfiler {
    None,
    Perfmap,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn limits(args: &[&str]) -> Result<(usize, usize), String> {
        let settings = Settings::try_parse_from(["labd"].iter().chain(args)).unwrap();
        settings.map_limits().map(|l| (l.initial, l.ceiling))
    }

    #[test]
    fn the_map_size_is_where_it_starts_and_never_above_its_ceiling() {
        assert_eq!(limits(&[]), Ok((1 << 30, 64 << 30)));
        // The map size alone (the old single bound): the map starts there
        // and grows to the default ceiling, or is its own ceiling when
        // larger, so no deployment's map shrinks.
        assert_eq!(
            limits(&["--lmdb-map-size", "1048576"]),
            Ok((1 << 20, 64 << 30))
        );
        let large = (128u64 << 30).to_string();
        assert_eq!(
            limits(&["--lmdb-map-size", &large]),
            Ok((128 << 30, 128 << 30))
        );
        assert_eq!(
            limits(&["--lmdb-map-ceiling", "4194304"]),
            Ok((4 << 20, 4 << 20))
        );
        let refused = limits(&[
            "--lmdb-map-size",
            "8388608",
            "--lmdb-map-ceiling",
            "4194304",
        ]);
        let message = refused.unwrap_err();
        assert!(message.contains("--lmdb-map-ceiling"), "{message}");
    }

    #[test]
    fn the_group_wait_is_bounded_at_ten_milliseconds() {
        let wait = |args: &[&str]| {
            Settings::try_parse_from(["labd"].iter().chain(args)).map(|s| s.lmdb_group_wait_us)
        };
        assert_eq!(wait(&[]).unwrap(), 1000);
        assert_eq!(wait(&["--lmdb-group-wait-us", "0"]).unwrap(), 0);
        assert_eq!(wait(&["--lmdb-group-wait-us", "10000"]).unwrap(), 10_000);
        let refused = wait(&["--lmdb-group-wait-us", "10001"]).unwrap_err();
        assert!(refused.to_string().contains("10001"), "{refused}");
    }
}
