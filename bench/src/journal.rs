//! The journal service's measurements, each beside a baseline taken in the
//! same run on the same machine:
//!
//! - durable appends per second (batches and facts) of 1 and of 128 facts
//!   from 1, 16 and 64 concurrent keep-alive clients, all into one journal
//!   and spread over 1,000 journals, against a plain heed loop writing the
//!   same rows ([`crate::lmdb`]: entries, predicate index rows, receipt,
//!   head): one commit per append, and for 64 clients one commit per 64
//!   appends (what perfect group commit would reach); beside one client,
//!   the same loop writing the entries and head alone, for reference;
//! - beside the single-fact appends, back to back in each round, the same
//!   appends into PostgreSQL from as many clients over as many journals,
//!   one transaction of the journal's three writes each
//!   ([`crate::postgres`]; the row says so where it is not installed);
//! - beside one single-fact appender, its ceiling through one HTTP request
//!   per append: heed's commit per append after the empty journal request
//!   at one client (the native no-op at one client shown inside it), and
//!   the same append sent again, answered as a replay from a snapshot: the
//!   append's request path without its commit;
//! - beside 64 single-fact appenders, the ceiling of a component round
//!   trip: `head` requests/s (read-only, one read transaction, nothing
//!   written) from 64 keep-alive clients, and the same requests answered
//!   from memory by the native hyper server ([`crate::native`]); then the
//!   appends' share of the head rate, the head rate against the grouped
//!   heed loop, and whether the head rate reaches the target's share of
//!   that loop, i.e. whether the target is reachable at zero write cost;
//!   and the same append replayed from 64 clients, whose CPU time with the
//!   grouped loop's is the least an append can cost: the appends' ceiling;
//! - entries read per second, `read` pages of 128 over a 100,000-entry
//!   journal, against heed range scans of the same rows;
//! - a filtered read where 1 in 1,000 entries matches a predicate: the time
//!   to page through every match, against a heed walk of a predicate index,
//!   and the pages it took, against the fewest possible;
//! - a `query` over 1,001 spaces (a scope, 10 children, 99 children each,
//!   32 appended facts in each space below the scope): the time to capture
//!   the snapshot and page through every entry, against `read` of each
//!   listed space up to the same cutoff.
//!
//! Each append row also shows what labd reports over the same time: write
//! transactions per store commit (its group commit at work), the share of
//! commits a lone append made on its request's thread (so that its CPU is
//! not the writer thread's), and the mean
//! time of its log's flush with the share of the time its writer spent in
//! one (from the management listener's metrics), the CPU cores its process
//! kept busy, of those its store's writer thread, the share of the time
//! that thread was ready to run and waited for a core (its `schedstat`),
//! the cores the clients
//! (this process) used (from /proc), and the bytes written to the device
//! that holds labd's data per append (from /proc/diskstats, by any
//! process: labd's log and the write-back of its checkpoints). A
//! reference row per batch size and layout runs the grouped heed loop with
//! each append in a nested transaction, as labd's store does.
//!
//! Journals here are spaces this run creates under the root it finds in
//! `GET /healthz`. Every loop is bounded in count and in time; figures and
//! their baselines are taken in alternating rounds.

use crate::client::{self, Conn};
use crate::lmdb::{self, Lmdb, Rows, Written};
use crate::measure::{percent, progress, reachable, repeatable, verdict, Bound, Row};
use crate::native::{Native, Routes};
use crate::postgres::Postgres;
use anyhow::{bail, ensure, Context, Result};
use bytes::Bytes;
use serde::Deserialize;
use serde_json::{json, Value};
use std::borrow::Cow;
use std::collections::{HashMap, HashSet};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Facts per append measured.
const BATCHES: [usize; 2] = [1, 128];
/// Concurrent appenders measured.
const CLIENTS: [usize; 3] = [1, 16, 64];
/// Appends per commit of the grouped baseline, the client count it is
/// compared with.
const GROUP: usize = 64;
/// The share of the grouped baseline the head rate is compared with (the
/// earlier target of 64 single-fact appenders, out of reach through one
/// request per append: see [`ceiling_rows`]).
const GROUPED_TARGET: f64 = 0.50;
/// The journal `head` rate at `GROUP` clients over the native no-op's.
const HEAD_TARGET: f64 = 0.40;
/// The journal `head` rate at `GROUP` clients over the ceiling of any
/// journal request, an empty one's at as many clients: the target under
/// that ceiling when it stands below [`HEAD_TARGET`].
const HEAD_CEILING_TARGET: f64 = 0.80;
/// The share of `head` at 64 clients 64 single-fact appenders must reach.
const APPEND_TARGET: f64 = 0.70;
/// The share of heed's commit-per-append rate one single-fact appender
/// must reach.
const SINGLE_TARGET: f64 = 0.80;
/// One single-fact appender's rate over its ceiling, heed's commit after
/// the empty journal request at one client: the target under that ceiling
/// when it stands below [`SINGLE_TARGET`] of heed.
const SINGLE_CEILING_TARGET: f64 = 0.80;
/// The tree: children of its scope, and children of each of those.
const TREE_PARENTS: usize = 10;
const TREE_CHILDREN: usize = 99;
/// Alternating rounds of figure and baseline.
const ROUNDS: u32 = 2;
/// Measured time of labd's appends per configuration (split into rounds).
const APPEND_TIME: Duration = Duration::from_secs(2);
/// Upper bound of requests per client and round of a measured run.
const MAX_REQUESTS_PER_CLIENT: u64 = 1_000_000;
/// The heed loop per configuration, counted in commits (split into rounds).
const BASELINE: Bound = Bound::new(1_000_000, 1);
/// The longest page `read` and `query` allow.
const PAGE: u64 = 128;
/// Entries of the journal read whole.
const READ_ENTRIES: u64 = 100_000;
/// Entries read per second to reach: 3x the rate before reads encoded
/// pages straight into the reply (102k/s).
const READ_TARGET: f64 = 306_000.0;
/// The longest a page of the 1,001-space query may take, capture and
/// continuations averaged.
const QUERY_PAGE_TARGET_MS: f64 = 10.0;
/// Entries of the filtered journal, and the size used instead when
/// building that many would take longer than `BUILD_BUDGET`.
const FILTERED_ENTRIES: u64 = 1_000_000;
const FILTERED_FALLBACK: u64 = 200_000;
const BUILD_BUDGET: Duration = Duration::from_secs(75);
/// One fact in this many matches the filter.
const HIT_EVERY: u64 = 1000;
/// Facts appended to each space of the queried tree below its scope.
const QUERY_FACTS: u64 = 32;
/// Concurrent clients that build journals and trees (not measured).
const BUILDERS: usize = 64;
/// Connections open before a measured run's clock starts.
const START_DELAY: Duration = Duration::from_millis(50);

/// Where the journal service listens, and its process.
pub struct Target {
    pub operations: SocketAddr,
    /// The management listener: its metrics count the store's commits.
    pub management: SocketAddr,
    /// labd's process id: its CPU time is read from /proc.
    pub pid: u32,
    /// The block device holding labd's data, whose writes are read from
    /// /proc/diskstats; `None` where it is not a device listed there.
    pub device: Option<Device>,
}

/// A block device by its major and minor numbers.
#[derive(Clone, Copy)]
pub struct Device {
    major: u64,
    minor: u64,
}

impl Device {
    /// The device holding `path`.
    pub fn holding(path: &Path) -> Result<Device> {
        use std::os::unix::fs::MetadataExt;
        let dev = std::fs::metadata(path)
            .with_context(|| format!("stat {}", path.display()))?
            .dev();
        // Linux's encoding of a device number (`major()` and `minor()` in
        // <sys/sysmacros.h>).
        Ok(Device {
            major: ((dev >> 8) & 0xfff) | ((dev >> 32) & !0xfff),
            minor: (dev & 0xff) | ((dev >> 12) & !0xff),
        })
    }

    /// Bytes written to the device since boot, by every process; `None`
    /// when /proc/diskstats does not list it.
    pub fn written(&self) -> Result<Option<u64>> {
        let stats = std::fs::read_to_string("/proc/diskstats").context("read /proc/diskstats")?;
        // Fields: major, minor, name, then reads (4 fields), then writes:
        // completed, merged, sectors of 512 octets, milliseconds.
        Ok(stats
            .lines()
            .find_map(|line| {
                let fields: Vec<&str> = line.split_whitespace().collect();
                let number = |at: usize| fields.get(at)?.parse::<u64>().ok();
                (number(0)? == self.major && number(1)? == self.minor).then(|| number(9))?
            })
            .map(|sectors| sectors * 512))
    }
}

/// The root the service was provisioned with.
pub(crate) struct Ids {
    pub(crate) root: String,
    pub(crate) root_space: String,
}

impl Ids {
    pub(crate) fn space_ref(&self, space: &str) -> Value {
        json!({ "root_id": self.root, "space_id": space })
    }
}

/// One keep-alive connection to the journal's operations listener.
pub(crate) struct Api {
    addr: SocketAddr,
    conn: Conn,
    reply: Vec<u8>,
    /// Time this client spent writing and parsing JSON.
    json_time: Duration,
}

impl Api {
    pub(crate) async fn connect(addr: SocketAddr) -> Result<Api> {
        Ok(Api {
            addr,
            conn: Conn::connect(addr).await?,
            reply: Vec::with_capacity(64 << 10),
            json_time: Duration::ZERO,
        })
    }

    /// `POST /v1/<op>` with a JSON body; the answer, whose status must be
    /// `want`.
    async fn post(&mut self, op: &str, body: &[u8], want: u16) -> Result<Value> {
        self.post_raw(op, body, want).await?;
        self.parsed(op)
    }

    /// `POST /v1/<op>` with a JSON body; its answer, whose status must be
    /// `want`, left in `reply`.
    async fn post_raw(&mut self, op: &str, body: &[u8], want: u16) -> Result<()> {
        let head = client::post_head(
            self.addr,
            &format!("/v1/{op}"),
            "application/json",
            body.len(),
        );
        self.receive(op, &head, body, want).await
    }

    /// `GET /<op>`; the answer, whose status must be `want`.
    async fn get(&mut self, op: &str, want: u16) -> Result<Value> {
        let head = client::get_head(self.addr, &format!("/{op}"));
        self.receive(op, &head, &[], want).await?;
        self.parsed(op)
    }

    /// Sends one request and leaves its answer, whose status must be
    /// `want`, in `reply`.
    async fn receive(&mut self, op: &str, head: &[u8], body: &[u8], want: u16) -> Result<()> {
        self.reply.clear();
        let response = self
            .conn
            .exchange(head, body, false, Some(&mut self.reply))
            .await?;
        ensure!(
            response.status == want,
            "{op} answered {}: {}",
            response.status,
            String::from_utf8_lossy(&self.reply)
        );
        Ok(())
    }

    /// `reply` as a JSON tree, the answer to `op`.
    fn parsed(&mut self, op: &str) -> Result<Value> {
        let parsing = Instant::now();
        let answer =
            serde_json::from_slice(&self.reply).with_context(|| format!("the answer to {op}"));
        self.json_time += parsing.elapsed();
        answer
    }

    /// `POST /v1/<op>` with `body` as JSON; its answer left in `reply`.
    async fn call_raw(&mut self, op: &str, body: &Value, want: u16) -> Result<()> {
        let writing = Instant::now();
        let body = serde_json::to_vec(body)?;
        self.json_time += writing.elapsed();
        self.post_raw(op, &body, want).await
    }

    pub(crate) async fn call(&mut self, op: &str, body: &Value, want: u16) -> Result<Value> {
        self.call_raw(op, body, want).await?;
        self.parsed(op)
    }
}

/// Which of the journal's rows a run measures.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Part {
    All,
    /// The read, filtered read and query rows.
    Reads,
    /// The append rows and their ceilings.
    Appends,
}

/// Runs the journal measurements of `part` against the service at
/// `target`; the baselines' environments go under `scratch`, `threads` is
/// the native server's worker count.
pub async fn run(target: Target, scratch: PathBuf, threads: usize, part: Part) -> Result<Vec<Row>> {
    let addr = target.operations;
    let ids = Arc::new(identity(addr).await?);
    let baselines = scratch.join("journal-baselines");
    let mut api = Api::connect(addr).await?;
    progress("journal: spaces");
    let root = ids.root_space.clone();
    let one = create(&mut api, &ids, &root, "one").await?;
    let tree = create(&mut api, &ids, &root, "tree").await?;
    let reads = create(&mut api, &ids, &root, "reads").await?;
    let filtered = create(&mut api, &ids, &root, "filtered").await?;
    let queried = create(&mut api, &ids, &root, "queried").await?;
    let mut rows = Vec::new();
    if part != Part::Reads {
        rows.extend(append_rows(&target, &ids, &baselines, one, tree, threads).await?);
    }
    if part == Part::Appends {
        return Ok(rows);
    }
    let (read_rows, fill_rate) = reads_rows(addr, target.pid, &ids, &reads, &baselines).await?;
    rows.extend(read_rows);
    rows.extend(filtered_rows(addr, &ids, &filtered, &baselines, fill_rate).await?);
    rows.extend(query_rows(addr, target.pid, &ids, &queried).await?);
    Ok(rows)
}

/// The append rows, on `one` journal and on the 1,000 under `tree`.
async fn append_rows(
    target: &Target,
    ids: &Arc<Ids>,
    baselines: &Path,
    one: String,
    tree: String,
    threads: usize,
) -> Result<Vec<Row>> {
    let addr = target.operations;
    let spread = build_tree(addr, ids, &tree).await?;
    let native = native_head(addr, ids, &one, threads).await?;
    let mut rows = Vec::new();
    progress("journal: start PostgreSQL");
    let postgres = Postgres::start(&baselines.join("postgres"), spread.len()).await?;
    if postgres.is_none() {
        rows.push(Row::new(
            "PostgreSQL baseline of the append rows".into(),
            "not installed (no /usr/lib/postgresql/*/bin/initdb, postgres)".into(),
            "-".into(),
            "-".into(),
            "-".into(),
        ));
    }

    let layouts = [
        ("1 journal", vec![one], 1),
        ("1000 journals", spread, TREE_PARENTS * (TREE_CHILDREN + 1)),
    ];
    let mut run = 0u64;
    for (label, journals, spaces) in layouts {
        let layout = Layout {
            label,
            journals: Arc::new(
                journals
                    .iter()
                    .map(|space| ids.space_ref(space).to_string())
                    .collect(),
            ),
            spaces,
        };
        for batch in BATCHES {
            progress(&format!("journal: append {batch}, {label}"));
            let dir = baselines.join(format!("append-{spaces}-{batch}"));
            let (native, postgres) = match batch {
                1 => (Some(native.addr), postgres.as_ref()),
                _ => (None, None),
            };
            rows.extend(appends(target, &layout, batch, &dir, &mut run, native, postgres).await?);
        }
    }
    drop(native);
    Ok(rows)
}

/// The journal `head` at `GROUP` clients against the native no-op, alone
/// (`--only callpath`): the rows [`ceiling_rows`] prints beside the appends.
pub async fn head_rows(target: &Target, threads: usize) -> Result<Vec<Row>> {
    let addr = target.operations;
    let ids = identity(addr).await?;
    let mut api = Api::connect(addr).await?;
    let root = ids.root_space.clone();
    let one = create(&mut api, &ids, &root, "head").await?;
    let native = native_head(addr, &ids, &one, threads).await?;
    let journals = Arc::new(vec![ids.space_ref(&one).to_string()]);
    progress("journal: head");
    let (mut head, mut noop, mut empty) = (Load::default(), Load::default(), Load::default());
    for _ in 0..ROUNDS {
        let time = APPEND_TIME / ROUNDS;
        head.add(head_load(target, addr, &journals, GROUP, time).await?);
        noop.add(head_load(target, native.addr, &journals, GROUP, time).await?);
        empty.add(empty_load(target, GROUP, time).await?);
    }
    drop(native);
    Ok(head_and_noop_rows("1 journal", &head, &noop, &empty))
}

/// The journal `head` rate at `GROUP` clients, the native hyper no-op's
/// beside it, and the head's share of the no-op's rate against its target;
/// then the ceiling that stops it on this machine: the rate of an `empty`
/// journal request (instantiate, call, drop, no store), and the head's
/// share of that ceiling against the target it can honestly meet.
fn head_and_noop_rows(label: &str, head: &Load, noop: &Load, empty: &Load) -> Vec<Row> {
    let rate = |load: &Load| per_second(load.written.batches, load.written.elapsed);
    let (head_rate, noop_rate, empty_rate) = (rate(head), rate(noop), rate(empty));
    let share = head_rate / noop_rate;
    let figure = |rate: f64, load: &Load| {
        let cpu_per_request = load.cpu.as_secs_f64() * 1e6 / load.written.batches.max(1) as f64;
        format!(
            "{rate:.0} (cpu: labd {:.2}, bench {:.2}; labd {cpu_per_request:.1} µs CPU/req)",
            load.cores(load.cpu),
            load.cores(load.client),
        )
    };
    vec![
        Row::new(
            format!(
                "journal head c={GROUP}, {label}: req/s (n={})",
                head.written.batches
            ),
            figure(head_rate, head),
            format!(
                "{noop_rate:.0} native hyper no-op (cpu: bench with server {:.2}; n={})",
                noop.cores(noop.client),
                noop.written.batches
            ),
            percent(share),
            verdict(
                &format!(">= {} of native", percent(HEAD_TARGET)),
                share >= HEAD_TARGET,
            ),
        ),
        Row::new(
            format!(
                "  ceiling: journal empty request c={GROUP} (404, no store): req/s (n={})",
                empty.written.batches
            ),
            figure(empty_rate, empty),
            format!("{noop_rate:.0} native hyper no-op"),
            percent(empty_rate / noop_rate),
            reachable(
                "head's target reachable under this ceiling",
                empty_rate / noop_rate >= HEAD_TARGET,
            ),
        ),
        Row::new(
            format!("  journal head c={GROUP} / empty request c={GROUP}, {label}"),
            format!("{head_rate:.0}"),
            format!("{empty_rate:.0} empty request"),
            percent(head_rate / empty_rate),
            verdict(
                &format!(">= {} of the ceiling", percent(HEAD_CEILING_TARGET)),
                head_rate / empty_rate >= HEAD_CEILING_TARGET,
            ),
        ),
    ]
}

/// The native hyper server answering `POST /v1/head` with the bytes and
/// the headers labd answered for the head of `space`, whatever the request.
async fn native_head(addr: SocketAddr, ids: &Ids, space: &str, threads: usize) -> Result<Native> {
    let path = "/v1/head";
    let body = json!({ "space": ids.space_ref(space) }).to_string();
    let mut conn = Conn::connect(addr).await?;
    let mut answer = Vec::new();
    let response = conn
        .exchange(
            &client::post_head(addr, path, "application/json", body.len()),
            body.as_bytes(),
            true,
            Some(&mut answer),
        )
        .await?;
    ensure!(
        response.status == 200,
        "head answered {}: {}",
        response.status,
        String::from_utf8_lossy(&answer)
    );
    let native = Native::start(
        Routes {
            bodies: HashMap::from([(path.to_string(), Bytes::from(answer))]),
            headers: repeatable(&response.headers)?,
        },
        threads,
    )?;
    let mut api = Api::connect(native.addr).await?;
    ensure!(
        api.post("head", body.as_bytes(), 200).await?["cutoff"].is_u64(),
        "the native server's head has no cutoff"
    );
    Ok(native)
}

/// The `GET /healthz` envelope of `service` at `addr`: it must answer as
/// that service, and healthy.
pub(crate) async fn healthz(addr: SocketAddr, service: &str) -> Result<Value> {
    let mut conn = Conn::connect(addr).await?;
    let mut body = Vec::new();
    let response = conn
        .exchange(
            &client::get_head(addr, "/healthz"),
            &[],
            true,
            Some(&mut body),
        )
        .await?;
    ensure!(
        response.header("lab-service") == Some(service),
        "{addr} is not the {service} service"
    );
    ensure!(
        response.status == 200,
        "healthz answered {}: {}",
        response.status,
        String::from_utf8_lossy(&body)
    );
    serde_json::from_slice(&body).context("the healthz answer")
}

/// The root from `GET /healthz`, which must come from the journal.
pub(crate) async fn identity(addr: SocketAddr) -> Result<Ids> {
    let health = healthz(addr, "journal").await?;
    let id = |name: &str| {
        health["identity"][name]
            .as_str()
            .map(str::to_string)
            .with_context(|| format!("healthz without identity.{name}"))
    };
    Ok(Ids {
        root: id("root_id")?,
        root_space: id("root_space_id")?,
    })
}

fn create_body(ids: &Ids, parent: &str, key: &str) -> Value {
    json!({
        "parent": ids.space_ref(parent),
        "key": key,
        "operation_id": format!("create-{key}"),
    })
}

fn created_id(answer: &Value) -> Result<String> {
    answer["child"]["space_id"]
        .as_str()
        .map(str::to_string)
        .with_context(|| format!("create answered {answer}"))
}

/// Creates the child `key` of `parent`; its space id.
pub(crate) async fn create(api: &mut Api, ids: &Ids, parent: &str, key: &str) -> Result<String> {
    created_id(
        &api.call("create", &create_body(ids, parent, key), 201)
            .await?,
    )
}

/// `TREE_PARENTS` children of `scope`, each with `TREE_CHILDREN` children:
/// the ids of all of them, parents first.
async fn build_tree(addr: SocketAddr, ids: &Arc<Ids>, scope: &str) -> Result<Vec<String>> {
    let mut api = Api::connect(addr).await?;
    let mut parents = Vec::new();
    for p in 0..TREE_PARENTS {
        parents.push(create(&mut api, ids, scope, &format!("p{p}")).await?);
    }
    let started = Instant::now();
    let (for_body, parents) = (Arc::clone(ids), Arc::new(parents));
    let in_body = Arc::clone(&parents);
    let answers = post_all(
        addr,
        "create",
        201,
        TREE_PARENTS * TREE_CHILDREN,
        Arc::new(move |i| {
            let parent = &in_body[i / TREE_CHILDREN];
            create_body(&for_body, parent, &format!("c{}", i % TREE_CHILDREN))
        }),
    )
    .await?;
    let mut spaces = parents.to_vec();
    for answer in &answers {
        spaces.push(created_id(answer)?);
    }
    progress(&format!(
        "journal: {} creates in {:.1} s",
        answers.len(),
        started.elapsed().as_secs_f64()
    ));
    Ok(spaces)
}

/// A request body per job.
type Bodies = Arc<dyn Fn(usize) -> Value + Send + Sync>;

/// Posts `jobs` requests to `op` from `BUILDERS` concurrent connections,
/// job `i` with `body(i)`; the answers in job order.
async fn post_all(
    addr: SocketAddr,
    op: &'static str,
    want: u16,
    jobs: usize,
    body: Bodies,
) -> Result<Vec<Value>> {
    let next = Arc::new(AtomicUsize::new(0));
    let mut tasks = Vec::new();
    for _ in 0..BUILDERS.min(jobs) {
        let mut api = Api::connect(addr).await?;
        let (next, body) = (Arc::clone(&next), Arc::clone(&body));
        tasks.push(tokio::spawn(async move {
            let mut done = Vec::new();
            loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                if i >= jobs {
                    return Ok::<_, anyhow::Error>(done);
                }
                done.push((i, api.call(op, &body(i), want).await?));
            }
        }));
    }
    let mut answers = Vec::with_capacity(jobs);
    for task in tasks {
        answers.extend(task.await??);
    }
    answers.sort_by_key(|(i, _)| *i);
    Ok(answers.into_iter().map(|(_, answer)| answer).collect())
}

/// The bounds of an append answer, checked against the batch size.
pub(crate) fn appended(answer: &Value, batch: usize) -> Result<(u64, u64)> {
    let (first, last) = (answer["first"].as_u64(), answer["last"].as_u64());
    match (first, last, answer["replayed"].as_bool()) {
        (Some(first), Some(last), Some(false)) if last + 1 == first + batch as u64 => {
            Ok((first, last))
        }
        _ => bail!("append of {batch} answered {answer}"),
    }
}

/// Where appends go: the journals, as JSON space refs, and over how many
/// spaces the baseline spreads the same rows.
struct Layout {
    label: &'static str,
    journals: Arc<Vec<String>>,
    spaces: usize,
}

/// labd's and the baseline's append rates for one layout and batch size;
/// with `native`, the native hyper server's address, also the ceiling of a
/// component round trip beside the `GROUP` appenders ([`ceiling_rows`]).
async fn appends(
    target: &Target,
    layout: &Layout,
    batch: usize,
    dir: &Path,
    run: &mut u64,
    native: Option<SocketAddr>,
    postgres: Option<&Postgres>,
) -> Result<Vec<Row>> {
    let Layout {
        label,
        journals,
        spaces,
    } = layout;
    let spaces = *spaces;
    let each = Lmdb::create(&dir.join("commit-per-append"))?;
    let grouped = Lmdb::create(&dir.join("commit-per-group"))?;
    let nested = Lmdb::create(&dir.join("nested-per-group"))?;
    let two_rows = Lmdb::create(&dir.join("entries-and-head"))?;
    let (mut single, mut group) = (Written::default(), Written::default());
    let (mut group_nested, mut single_two_rows) = (Written::default(), Written::default());
    let mut labd: [Load; CLIENTS.len()] = Default::default();
    let mut sql: [(u64, Duration); CLIENTS.len()] = Default::default();
    let (mut head, mut noop, mut empty) = (Load::default(), Load::default(), Load::default());
    let mut replay = Load::default();
    let (mut noop_one, mut empty_one, mut replay_one) =
        (Load::default(), Load::default(), Load::default());
    for _ in 0..ROUNDS {
        let bound = BASELINE.share(ROUNDS);
        single.add(tokio::task::block_in_place(|| {
            each.appends(spaces, batch, 1, false, Rows::Journal, bound)
        })?);
        group.add(tokio::task::block_in_place(|| {
            grouped.appends(spaces, batch, GROUP, false, Rows::Journal, bound)
        })?);
        group_nested.add(tokio::task::block_in_place(|| {
            nested.appends(spaces, batch, GROUP, true, Rows::Journal, bound)
        })?);
        single_two_rows.add(tokio::task::block_in_place(|| {
            two_rows.appends(spaces, batch, 1, false, Rows::EntriesAndHead, bound)
        })?);
        for ((total, sql), clients) in labd.iter_mut().zip(&mut sql).zip(CLIENTS) {
            *run += 1;
            let time = APPEND_TIME / ROUNDS;
            total.add(append_load(target, journals, batch, clients, time, *run).await?);
            if let Some(postgres) = postgres {
                let (n, took) = postgres.appends(spaces, clients, time, *run).await?;
                *sql = (sql.0 + n, sql.1 + took);
            }
        }
        if let Some(native) = native {
            let time = APPEND_TIME / ROUNDS;
            noop_one.add(head_load(target, native, journals, 1, time).await?);
            empty_one.add(empty_load(target, 1, time).await?);
            *run += 1;
            replay_one.add(replay_load(target, journals, 1, time, *run).await?);
            head.add(head_load(target, target.operations, journals, GROUP, time).await?);
            noop.add(head_load(target, native, journals, GROUP, time).await?);
            empty.add(empty_load(target, GROUP, time).await?);
            *run += 1;
            replay.add(replay_load(target, journals, GROUP, time, *run).await?);
        }
    }
    drop((each, grouped, nested, two_rows));
    let facts = if batch == 1 { "fact" } else { "facts" };
    let mut rows = Vec::new();
    for (load, clients) in labd.iter().zip(CLIENTS) {
        let rate = &load.written;
        let (baseline, how) = if clients == GROUP {
            (&group, format!("commit per {GROUP} appends"))
        } else {
            (&single, "commit per append".to_string())
        };
        let ratio =
            per_second(rate.batches, rate.elapsed) / per_second(baseline.batches, baseline.elapsed);
        let goal = if batch == 1 && clients == 1 {
            verdict(
                &format!(">= {} of heed", percent(SINGLE_TARGET)),
                ratio >= SINGLE_TARGET,
            )
        } else {
            "-".into()
        };
        rows.push(Row::new(
            format!(
                "append {batch} {facts}, c={clients}, {label}: batches/s (n={})",
                rate.batches
            ),
            format!(
                "{:.0} ({:.0} facts/s; {:.1}/commit, {} lone; cpu: labd {:.2}, writer thread {:.2} = {:.1} µs/append, \
                 waiting for a core {}; bench {:.2}; log flush {:.0} µs, {} of the time; disk {})",
                per_second(rate.batches, rate.elapsed),
                per_second(rate.facts, rate.elapsed),
                load.transactions as f64 / load.commits.max(1) as f64,
                percent(load.lone as f64 / load.commits.max(1) as f64),
                load.cores(load.cpu),
                load.cores(load.writer),
                load.writer.as_secs_f64() * 1e6 / rate.batches.max(1) as f64,
                load.writer_waiting.map_or("-".into(), |waited| format!(
                    "{} of the time",
                    percent(load.cores(waited))
                )),
                load.cores(load.client),
                load.flushing.as_secs_f64() * 1e6 / load.flushes.max(1) as f64,
                percent(load.flushing.as_secs_f64() / load.wall.as_secs_f64().max(1e-9)),
                disk_per_append(target, load.disk, rate.batches),
            ),
            format!(
                "{:.0} heed, {how} (n={}; disk {})",
                per_second(baseline.batches, baseline.elapsed),
                baseline.batches,
                disk_per_append(target, baseline.disk, baseline.batches)
            ),
            percent(ratio),
            goal,
        ));
        if clients == 1 {
            let two_rows = per_second(single_two_rows.batches, single_two_rows.elapsed);
            let journal_rows = per_second(single.batches, single.elapsed);
            rows.push(Row::new(
                format!("  ref: heed append {batch} {facts}, {label}, entries and head only, commit per append"),
                format!("{two_rows:.0} (n={})", single_two_rows.batches),
                format!("{journal_rows:.0} the journal's rows"),
                percent(journal_rows / two_rows),
                "-".into(),
            ));
        }
        if batch == 1 && clients == 1 && native.is_some() {
            rows.extend(single_ceiling_rows(
                label,
                load,
                [&noop_one, &empty_one, &replay_one],
                per_second(single.batches, single.elapsed),
            ));
        }
        if clients == GROUP && native.is_some() {
            rows.extend(ceiling_rows(
                label,
                load,
                [&head, &noop, &empty, &replay],
                &group,
            ));
        }
    }
    if let Some(postgres) = postgres {
        rows.extend(postgres_rows(label, &postgres.version, &labd, &sql));
    }
    rows.push(Row::new(
        format!("  ref: heed append {batch} {facts}, {label}, nested txn each, commit per {GROUP}"),
        format!(
            "{:.0} (n={})",
            per_second(group_nested.batches, group_nested.elapsed),
            group_nested.batches
        ),
        format!("{:.0} unnested", per_second(group.batches, group.elapsed)),
        percent(
            per_second(group_nested.batches, group_nested.elapsed)
                / per_second(group.batches, group.elapsed),
        ),
        "-".into(),
    ));
    Ok(rows)
}

/// `bytes` written to the device of labd's data over `appends`, per
/// append, where the device's writes are read.
fn disk_per_append(target: &Target, bytes: u64, appends: u64) -> String {
    match target.device {
        Some(_) => format!(
            "{:.1} KiB/append",
            bytes as f64 / 1024.0 / appends.max(1) as f64
        ),
        None => "not read".into(),
    }
}

/// Single-fact appends of the journal (`labd`) against PostgreSQL (`sql`:
/// appends, time), one row per client count, measured back to back.
fn postgres_rows(label: &str, version: &str, labd: &[Load], sql: &[(u64, Duration)]) -> Vec<Row> {
    let mut rows = Vec::new();
    for ((load, &(n, took)), clients) in labd.iter().zip(sql).zip(CLIENTS) {
        let journal = per_second(load.written.batches, load.written.elapsed);
        let postgres = per_second(n, took);
        rows.push(Row::new(
            format!("append 1 fact, c={clients}, {label}: journal against PostgreSQL (n={n})"),
            format!("{journal:.0} appends/s"),
            format!("{postgres:.0} {version}, a transaction per append, fsync on"),
            percent(journal / postgres),
            verdict("journal ahead of PostgreSQL", journal > postgres),
        ));
    }
    rows
}

/// The ceiling of a component round trip beside `GROUP` single-fact
/// appenders (`appends`): `head`, the journal's read-only `head` from as
/// many clients, `noop`, the same requests to the native hyper server,
/// which answers from memory (no component, no store), and `empty`, a
/// journal request that touches no store ([`head_and_noop_rows`]), and
/// `replay`, an append answered from its receipt by as many clients (the
/// append's request path without its write); then the share of
/// the head rate the appends reach, the replays' share, the ceiling of the
/// appends (the replay's CPU time and heed's grouped commit's, [`GROUP`]
/// appends a commit) and their share of it, the head rate against the
/// grouped heed baseline (`grouped`), and whether the head rate, which an
/// append could only reach if its write cost nothing, reaches the target's
/// share of that baseline.
fn ceiling_rows(label: &str, appends: &Load, ceilings: [&Load; 4], grouped: &Written) -> Vec<Row> {
    let [head, noop, empty, replay] = ceilings;
    let rate = |load: &Load| per_second(load.written.batches, load.written.elapsed);
    let (append_rate, head_rate) = (rate(appends), rate(head));
    let grouped_rate = per_second(grouped.batches, grouped.elapsed);
    // An append does all its replay does (the same request, answered from
    // its receipt) and writes at least the rows of heed's grouped commit,
    // so it costs at least the CPU time of both: labd's and the clients'
    // for the replay, the writing thread's for heed. The cores can give no
    // more than that rate; counting neither a flush's wait nor idle cores,
    // the ceiling errs high, and a "no" below is a proof for this run.
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let micros = |time: Duration, count: u64| time.as_secs_f64() * 1e6 / count.max(1) as f64;
    let replay_labd = micros(replay.cpu, replay.written.batches);
    let replay_clients = micros(replay.client, replay.written.batches);
    let commit = micros(grouped.cpu, grouped.batches);
    let cpu = replay_labd + replay_clients + commit;
    let ceiling = 1e6 * cores as f64 / cpu;
    let needed = GROUPED_TARGET * grouped_rate;
    let mut rows = head_and_noop_rows(label, head, noop, empty);
    rows.extend([
        Row::new(
            format!("  append 1 fact c={GROUP} / journal head c={GROUP}, {label}"),
            format!("{append_rate:.0}"),
            format!("{head_rate:.0} journal head c={GROUP}"),
            percent(append_rate / head_rate),
            verdict(
                &format!(">= {} of head", percent(APPEND_TARGET)),
                append_rate >= APPEND_TARGET * head_rate,
            ),
        ),
        Row::new(
            format!("  ref: append 1 fact c={GROUP} replayed (no write) / journal head c={GROUP}, {label}"),
            format!(
                "{:.0} (n={}; labd {:.1} µs CPU/req)",
                rate(replay),
                replay.written.batches,
                replay_labd
            ),
            format!("{head_rate:.0} journal head c={GROUP}"),
            percent(rate(replay) / head_rate),
            "measured: the append's request path without its write".into(),
        ),
        Row::new(
            format!("  ceiling: append 1 fact c={GROUP}, {label}: replayed c={GROUP} + heed grouped commit, CPU time"),
            format!(
                "{ceiling:.0}/s on {cores} cores ({cpu:.1} CPU-µs/append = replayed {replay_labd:.1} labd \
                 + {replay_clients:.1} clients, + {commit:.1} heed commit per {GROUP})"
            ),
            format!("{head_rate:.0} journal head c={GROUP}"),
            percent(ceiling / head_rate),
            reachable(
                &format!("{} of head reachable under this ceiling", percent(APPEND_TARGET)),
                ceiling >= APPEND_TARGET * head_rate,
            ),
        ),
        Row::new(
            format!("  append 1 fact c={GROUP} / its ceiling, {label}"),
            format!("{append_rate:.0}"),
            format!("{ceiling:.0} ceiling"),
            percent(append_rate / ceiling),
            format!(
                "the target needs {} of it",
                percent(APPEND_TARGET * head_rate / ceiling)
            ),
        ),
        Row::new(
            format!(
                "  journal head c={GROUP} / {} of heed grouped, {label}",
                percent(GROUPED_TARGET)
            ),
            format!("{head_rate:.0} ({:.1} µs/req)", 1e6 / head_rate),
            format!(
                "{needed:.0} = {} of {grouped_rate:.0} ({:.1} µs/append)",
                percent(GROUPED_TARGET),
                1e6 / needed
            ),
            percent(head_rate / needed),
            reachable("target reachable at zero write cost", head_rate >= needed),
        ),
    ]);
    rows
}

/// The ceiling of one client's single-fact appends through one HTTP
/// request each: the request can be no faster than heed's durable commit
/// (`commit_rate`, commits/s) after the empty journal request at one
/// client (`empty`: HTTP, a fresh instance, the call, its drop; `noop`, the
/// native hyper no-op at one client, is the HTTP round trip inside it).
/// Then whether the target share of heed is reachable under it, and the
/// appends' share of the ceiling against the target met in its place.
fn single_ceiling_rows(
    label: &str,
    appends: &Load,
    floors: [&Load; 3],
    commit_rate: f64,
) -> Vec<Row> {
    let [noop, empty, replay] = floors;
    let micros =
        |load: &Load| load.written.elapsed.as_secs_f64() * 1e6 / load.written.batches.max(1) as f64;
    let (commit, request, round_trip) = (1e6 / commit_rate, micros(empty), micros(noop));
    let ceiling = 1e6 / (commit + request);
    let append_rate = per_second(appends.written.batches, appends.written.elapsed);
    let replayed = micros(replay);
    vec![
        Row::new(
            format!(
                "  ceiling: append 1 fact c=1, {label}: heed commit + empty journal request c=1"
            ),
            format!(
                "{ceiling:.0}/s ({:.0} µs = {commit:.0} µs commit + {request:.0} µs empty request, \
                 of which {round_trip:.0} µs native round trip; n={}, {})",
                commit + request,
                empty.written.batches,
                noop.written.batches
            ),
            format!("{commit_rate:.0} heed, commit per append"),
            percent(ceiling / commit_rate),
            reachable(
                &format!(
                    "{} of heed reachable under this ceiling",
                    percent(SINGLE_TARGET)
                ),
                ceiling >= SINGLE_TARGET * commit_rate,
            ),
        ),
        Row::new(
            format!("  append 1 fact c=1 / its ceiling, {label}"),
            format!("{append_rate:.0} ({:.0} µs/append)", 1e6 / append_rate),
            format!("{ceiling:.0} ceiling"),
            percent(append_rate / ceiling),
            verdict(
                &format!(">= {} of the ceiling", percent(SINGLE_CEILING_TARGET)),
                append_rate >= SINGLE_CEILING_TARGET * ceiling,
            ),
        ),
        Row::new(
            format!("  ref: append 1 fact c=1 replayed (from a snapshot, no write), {label}"),
            format!(
                "{replayed:.0} µs/append (n={}; labd {:.0} µs CPU/req)",
                replay.written.batches,
                replay.cpu.as_secs_f64() * 1e6 / replay.written.batches.max(1) as f64
            ),
            format!("{:.0} µs/append written", 1e6 / append_rate),
            percent(replayed * append_rate / 1e6),
            format!(
                "measured: the append's path without its commit; commit + replay = {:.0} µs",
                commit + replayed
            ),
        ),
    ]
}

fn per_second(count: u64, elapsed: Duration) -> f64 {
    count as f64 / elapsed.as_secs_f64().max(1e-9)
}

/// Appends measured, with what labd reports over the same time: its store's
/// commits and the write transactions they made durable, and its CPU time.
#[derive(Default)]
struct Load {
    written: Written,
    commits: u64,
    transactions: u64,
    /// Commits a lone append made on its request's thread.
    lone: u64,
    cpu: Duration,
    /// CPU time of the store's writer thread alone.
    writer: Duration,
    /// Time the writer thread was ready to run and waited for a core;
    /// `None` where the kernel keeps no scheduler statistics.
    writer_waiting: Option<Duration>,
    /// CPU time of this process, the clients.
    client: Duration,
    /// Log flushes of labd's store meanwhile, and their time together
    /// (its `lab_kv_log_flush_seconds` histogram).
    flushes: u64,
    flushing: Duration,
    /// Bytes written to labd's data device meanwhile, by any process
    /// (labd's log and its checkpoints' page write-back, mostly); zero
    /// where the target has no device ([`Target::device`]).
    disk: u64,
    /// The time over which commits and CPU time were counted.
    wall: Duration,
}

impl Load {
    /// CPU cores `time` kept busy over the load's wall time.
    fn cores(&self, time: Duration) -> f64 {
        time.as_secs_f64() / self.wall.as_secs_f64().max(1e-9)
    }

    fn add(&mut self, other: Load) {
        self.written.add(other.written);
        self.commits += other.commits;
        self.transactions += other.transactions;
        self.lone += other.lone;
        self.cpu += other.cpu;
        self.writer += other.writer;
        // A load's first part adds to the default, which has none.
        self.writer_waiting = other
            .writer_waiting
            .map(|waited| self.writer_waiting.unwrap_or_default() + waited);
        self.client += other.client;
        self.wall += other.wall;
        self.flushes += other.flushes;
        self.flushing += other.flushing;
        self.disk += other.disk;
    }
}

/// labd's counters at one instant.
struct Sample {
    at: Instant,
    commits: u64,
    transactions: u64,
    lone: u64,
    cpu: Duration,
    writer: Duration,
    writer_waiting: Option<Duration>,
    client: Duration,
    flushes: u64,
    flushing: Duration,
    disk: u64,
}

impl Sample {
    async fn take(target: &Target) -> Result<Sample> {
        let mut conn = Conn::connect(target.management).await?;
        let mut body = Vec::new();
        let response = conn
            .exchange(
                &client::get_head(target.management, "/metrics"),
                &[],
                false,
                Some(&mut body),
            )
            .await?;
        ensure!(
            response.status == 200,
            "metrics answered {}",
            response.status
        );
        let text = String::from_utf8(body).context("metrics are not UTF-8")?;
        fn metric<T: std::str::FromStr>(text: &str, name: &str) -> Result<T> {
            text.lines()
                .find_map(|line| line.strip_prefix(name)?.strip_prefix(' '))
                .and_then(|value| value.trim().parse().ok())
                .with_context(|| format!("metrics without {name}"))
        }
        let counter = |name: &str| metric::<u64>(&text, name);
        let (writer, writer_waiting) = writer_times(target.pid)?;
        Ok(Sample {
            at: Instant::now(),
            flushes: counter("lab_kv_log_flush_seconds_count{}")?,
            flushing: Duration::from_secs_f64(metric(&text, "lab_kv_log_flush_seconds_sum{}")?),
            commits: counter("lab_kv_commits_total")?,
            transactions: counter("lab_kv_transactions_total")?,
            lone: counter("lab_kv_lone_commits_total")?,
            cpu: cpu_time(&format!("/proc/{}/stat", target.pid))?,
            writer,
            writer_waiting,
            client: cpu_time("/proc/self/stat")?,
            disk: match target.device {
                Some(device) => device.written()?.unwrap_or(0),
                None => 0,
            },
        })
    }

    fn until(&self, later: &Sample) -> Load {
        Load {
            written: Written::default(),
            commits: later.commits - self.commits,
            transactions: later.transactions - self.transactions,
            lone: later.lone - self.lone,
            cpu: later.cpu.saturating_sub(self.cpu),
            writer: later.writer.saturating_sub(self.writer),
            writer_waiting: later
                .writer_waiting
                .zip(self.writer_waiting)
                .map(|(later, now)| later.saturating_sub(now)),
            client: later.client.saturating_sub(self.client),
            flushes: later.flushes - self.flushes,
            flushing: later.flushing.saturating_sub(self.flushing),
            disk: later.disk.saturating_sub(self.disk),
            wall: later.at - self.at,
        }
    }
}

/// labd's CPU time so far, all its threads.
pub(crate) fn labd_cpu_time(pid: u32) -> Result<Duration> {
    cpu_time(&format!("/proc/{pid}/stat"))
}

/// The user plus system time in a /proc `stat` file: of a process (all its
/// threads) or of one thread. Times are in clock ticks of 1/100 s (Linux's
/// USER_HZ).
pub(crate) fn cpu_time(path: &str) -> Result<Duration> {
    let stat = std::fs::read_to_string(path).with_context(|| format!("read {path}"))?;
    // The name may hold spaces and parentheses; the fields after it do not.
    let (_, rest) = stat.rsplit_once(')').context("a malformed stat")?;
    let fields: Vec<&str> = rest.split_whitespace().collect();
    // utime and stime are fields 14 and 15; `state`, field 3, comes first.
    let ticks = |field: usize| -> Result<u64> {
        fields
            .get(field - 3)
            .and_then(|v| v.parse().ok())
            .context("a malformed stat")
    };
    Ok(Duration::from_millis((ticks(14)? + ticks(15)?) * 10))
}

/// CPU time of labd's store writer thread (named `kv-writer`), and how
/// long it has waited for a core while ready to run (the second field of
/// its `schedstat`; `None` where the kernel keeps no scheduler
/// statistics).
fn writer_times(pid: u32) -> Result<(Duration, Option<Duration>)> {
    let Some(writer) = threads_named(&format!("/proc/{pid}"), "kv-writer")?.pop() else {
        bail!("labd has no kv-writer thread");
    };
    let cpu = cpu_time(&writer.join("stat").to_string_lossy())?;
    let waited = match std::fs::read_to_string(writer.join("schedstat")) {
        Ok(stat) => Some(run_queue_wait(&stat)?),
        Err(_) => None,
    };
    Ok((cpu, waited))
}

/// The time a thread waited on a run queue, from its `schedstat`: time on
/// a core, time waiting for one (both in nanoseconds), time slices run.
fn run_queue_wait(schedstat: &str) -> Result<Duration> {
    let waited = schedstat
        .split_whitespace()
        .nth(1)
        .and_then(|ns| ns.parse().ok())
        .context("a malformed schedstat")?;
    Ok(Duration::from_nanos(waited))
}

/// The CPU time so far of the threads named `name` of the process at
/// `proc` (`/proc/<pid>` or `/proc/self`), together.
pub(crate) fn threads_time(proc: &str, name: &str) -> Result<Duration> {
    let mut total = Duration::ZERO;
    for task in threads_named(proc, name)? {
        // A thread may end between the listing and the read.
        if let Ok(time) = cpu_time(&task.join("stat").to_string_lossy()) {
            total += time;
        }
    }
    Ok(total)
}

/// The `/proc` directories of the threads named `name` of the process at
/// `proc`.
fn threads_named(proc: &str, name: &str) -> Result<Vec<std::path::PathBuf>> {
    let tasks = format!("{proc}/task");
    let mut named = Vec::new();
    for task in std::fs::read_dir(&tasks).with_context(|| format!("list {tasks}"))? {
        let task = task?.path();
        // A thread may end between the listing and the read.
        if std::fs::read_to_string(task.join("comm")).is_ok_and(|comm| comm.trim_end() == name) {
            named.push(task);
        }
    }
    Ok(named)
}

/// `clients` new connections appending `batch` facts back to back for
/// `time`, client `c`'s `n`th append into journal `c + n × clients`
/// (round-robin); `run` keeps operation IDs unique across runs.
async fn append_load(
    target: &Target,
    journals: &Arc<Vec<String>>,
    batch: usize,
    clients: usize,
    time: Duration,
    run: u64,
) -> Result<Load> {
    let facts: Vec<String> = (0..batch as u64)
        .map(|i| base64(&fact("bench", i)))
        .collect();
    let facts: Arc<str> = serde_json::to_string(&facts)?.into();
    let journals = Arc::clone(journals);
    let requests = Requests {
        op: "append",
        want: 201,
        body: Some(Box::new(move |client, n| {
            let journal = &journals[(client + n as usize * clients) % journals.len()];
            format!(
                r#"{{"space":{journal},"facts":{facts},"operation_id":"r{run}-c{client}-{n}"}}"#
            )
        })),
        check: Box::new(move |answer| appended(answer, batch).map(drop)),
    };
    let mut load = post_load(target, target.operations, clients, time, requests).await?;
    load.written.facts = load.written.batches * batch as u64;
    Ok(load)
}

/// `clients` new connections asking `addr` for the head of a journal back
/// to back for `time`, round-robin over `journals` as [`append_load`]
/// appends. Against labd each is a component request that reads the store
/// in one read transaction and writes nothing; against the native server
/// the same bytes are answered from memory.
async fn head_load(
    target: &Target,
    addr: SocketAddr,
    journals: &Arc<Vec<String>>,
    clients: usize,
    time: Duration,
) -> Result<Load> {
    let journals = Arc::clone(journals);
    let requests = Requests {
        op: "head",
        want: 200,
        body: Some(Box::new(move |client, n| {
            let journal = &journals[(client + n as usize * clients) % journals.len()];
            format!(r#"{{"space":{journal}}}"#)
        })),
        check: Box::new(|answer| {
            ensure!(answer["cutoff"].is_u64(), "head answered {answer}");
            Ok(())
        }),
    };
    post_load(target, addr, clients, time, requests).await
}

/// `clients` new connections asking the journal for a route it does not
/// have back to back for `time`: the component's router refuses it (404
/// `not_found`) without touching the store, so its rate is the ceiling of
/// any journal request through the host: a fresh instance, the call, its
/// drop, and HTTP around them.
async fn empty_load(target: &Target, clients: usize, time: Duration) -> Result<Load> {
    let requests = Requests {
        op: "no-such-route",
        want: 404,
        body: None,
        check: Box::new(|answer| {
            ensure!(answer["error"] == "not_found", "answered {answer}");
            Ok(())
        }),
    };
    post_load(target, target.operations, clients, time, requests).await
}

/// `clients` clients sending one append again and again for `time`: after
/// the first, each is answered from a snapshot as a replay (200), so its
/// rate is an append's request path without the writer and its commit.
async fn replay_load(
    target: &Target,
    journals: &Arc<Vec<String>>,
    clients: usize,
    time: Duration,
    run: u64,
) -> Result<Load> {
    let facts = serde_json::to_string(&[base64(&fact("bench", 0))])?;
    let body = format!(
        r#"{{"space":{},"facts":{facts},"operation_id":"replay-{run}"}}"#,
        journals[0]
    );
    let mut api = Api::connect(target.operations).await?;
    appended(&api.post("append", body.as_bytes(), 201).await?, 1)?;
    let requests = Requests {
        op: "append",
        want: 200,
        body: Some(Box::new(move |_, _| body.clone())),
        check: Box::new(|answer| {
            ensure!(answer["replayed"] == true, "a replay answered {answer}");
            Ok(())
        }),
    };
    post_load(target, target.operations, clients, time, requests).await
}

/// What the clients of a measured run post.
struct Requests {
    /// The operation, `POST /v1/<op>` (`GET /<op>` without a body), and
    /// the status it must answer.
    op: &'static str,
    want: u16,
    /// The body of client `c`'s `n`th request.
    body: Option<Box<dyn Fn(usize, u64) -> String + Send + Sync>>,
    /// Checks an answer.
    check: Check,
}

type Check = Box<dyn Fn(&Value) -> Result<()> + Send + Sync>;

/// `clients` new keep-alive connections to `addr`, each posting `requests`
/// back to back for `time`; the requests done (as batches) and what labd
/// (`target`) reports over the same time.
async fn post_load(
    target: &Target,
    addr: SocketAddr,
    clients: usize,
    time: Duration,
    requests: Requests,
) -> Result<Load> {
    let requests = Arc::new(requests);
    let mut apis = Vec::with_capacity(clients);
    for _ in 0..clients {
        apis.push(Api::connect(addr).await?);
    }
    let begin = Instant::now() + START_DELAY;
    let end = begin + time;
    let tasks: Vec<_> = apis
        .into_iter()
        .enumerate()
        .map(|(client, mut api)| {
            let requests = Arc::clone(&requests);
            tokio::spawn(async move {
                tokio::time::sleep_until(begin.into()).await;
                let mut n = 0u64;
                let mut finished = begin;
                while Instant::now() < end && n < MAX_REQUESTS_PER_CLIENT {
                    let answer = match &requests.body {
                        Some(body) => {
                            let body = body(client, n);
                            api.post(requests.op, body.as_bytes(), requests.want)
                                .await?
                        }
                        None => api.get(requests.op, requests.want).await?,
                    };
                    (requests.check)(&answer)?;
                    n += 1;
                    finished = Instant::now();
                }
                Ok::<_, anyhow::Error>((n, finished))
            })
        })
        .collect();
    tokio::time::sleep_until(begin.into()).await;
    let before = Sample::take(target).await?;
    let mut written = Written::default();
    let mut last = begin;
    for task in tasks {
        let (n, finished) = task.await??;
        written.batches += n;
        last = last.max(finished);
    }
    let mut load = before.until(&Sample::take(target).await?);
    ensure!(
        written.batches > 0,
        "no {} completed in {time:?}",
        requests.op
    );
    written.elapsed = last - begin;
    load.written = written;
    Ok(load)
}

/// The predicate of fact `k` of a built journal: with hits, 1 in
/// `HIT_EVERY` is "hit" and the rest "miss"; without, all are "entry".
fn built_predicate(k: u64, hits: bool) -> &'static str {
    match (hits, k.is_multiple_of(HIT_EVERY)) {
        (false, _) => "entry",
        (true, true) => "hit",
        (true, false) => "miss",
    }
}

/// Appends `total` facts to `space` in appends of `PAGE` facts from
/// `BUILDERS` concurrent clients; how long it took.
async fn build(
    addr: SocketAddr,
    ids: &Ids,
    space: &str,
    total: u64,
    hits: bool,
) -> Result<Duration> {
    let started = Instant::now();
    let space_ref = ids.space_ref(space);
    let jobs = total.div_ceil(PAGE) as usize;
    let answers = post_all(
        addr,
        "append",
        201,
        jobs,
        Arc::new(move |i| {
            let from = i as u64 * PAGE;
            let facts: Vec<String> = (from..total.min(from + PAGE))
                .map(|k| base64(&fact(built_predicate(k, hits), k)))
                .collect();
            json!({ "space": space_ref, "facts": facts, "operation_id": format!("build-{i}") })
        }),
    )
    .await?;
    let mut count = 0;
    for (i, answer) in answers.iter().enumerate() {
        let size = (total - i as u64 * PAGE).min(PAGE) as usize;
        appended(answer, size)?;
        count += size as u64;
    }
    ensure!(count == total, "built {count} entries of {total}");
    Ok(started.elapsed())
}

/// The same facts in a baseline environment, as space `space`.
fn build_baseline(dir: &Path, space: &[u8; 16], total: u64, hits: bool) -> Result<Lmdb> {
    let lmdb = Lmdb::create(dir)?;
    lmdb.fill(space, total, PAGE, hits, |k| {
        let predicate = built_predicate(k, hits);
        (fact(predicate, k), text(predicate))
    })?;
    Ok(lmdb)
}

/// A prefix paged through.
#[derive(Default)]
struct Paged {
    entries: u64,
    pages: u64,
    through: u64,
    /// The facts returned, when asked for.
    facts: Vec<String>,
    elapsed: Duration,
}

/// A `read` answer, as far as the bench checks it; the members it does
/// not name are still parsed (as JSON), not kept.
#[derive(Deserialize)]
struct ReadPage<'a> {
    through: u64,
    #[serde(borrow)]
    entries: Vec<PageEntry<'a>>,
    next_after: Option<u64>,
    scanned_through: Option<u64>,
}

#[derive(Deserialize)]
struct PageEntry<'a> {
    #[serde(rename = "ref")]
    reference: EntryRef,
    #[serde(borrow)]
    fact: Cow<'a, str>,
}

#[derive(Deserialize)]
struct EntryRef {
    position: u64,
}

/// Pages through (0, through] of `space` with `read` (limit `PAGE`), the
/// cutoff captured by the first page unless given; with `filter`, keeps the
/// facts returned. Checks order, bounds and, unfiltered, that no position
/// is missing. Pages are decoded into [`ReadPage`], as a client of the
/// journal would, not into a JSON tree.
async fn read_all(
    api: &mut Api,
    ids: &Ids,
    space: &str,
    through: Option<u64>,
    filter: Option<&Value>,
) -> Result<Paged> {
    let mut paged = Paged::default();
    let mut through = through;
    let mut after = 0u64;
    let mut last_position = 0u64;
    let started = Instant::now();
    loop {
        let mut body = json!({ "space": ids.space_ref(space), "after": after, "limit": PAGE });
        if let Some(through) = through {
            body["through"] = through.into();
        }
        if let Some(filter) = filter {
            body["filter"] = filter.clone();
        }
        api.call_raw("read", &body, 200).await?;
        let parsing = Instant::now();
        let answer: ReadPage = serde_json::from_slice(&api.reply).context("the answer to read")?;
        let page_through = answer.through;
        ensure!(
            through.is_none_or(|t| t == page_through),
            "read moved its cutoff"
        );
        through = Some(page_through);
        paged.pages += 1;
        for entry in &answer.entries {
            let position = entry.reference.position;
            ensure!(
                position > last_position && position <= page_through,
                "read returned position {position} after {last_position} (through {page_through})"
            );
            ensure!(
                filter.is_some() || position == last_position + 1,
                "read skipped from {last_position} to {position}"
            );
            last_position = position;
            paged.entries += 1;
            if filter.is_some() {
                paged.facts.push(entry.fact.to_string());
            }
        }
        api.json_time += parsing.elapsed();
        match answer.next_after {
            Some(next) => {
                ensure!(next > after || next == page_through, "read did not advance");
                after = next;
            }
            None => {
                ensure!(
                    answer.scanned_through == Some(page_through),
                    "a final page that did not scan through {page_through}: {:?}",
                    answer.scanned_through
                );
                break;
            }
        }
    }
    paged.elapsed = started.elapsed();
    paged.through = through.unwrap_or(0);
    if filter.is_none() {
        ensure!(
            paged.entries == paged.through,
            "read {} entries of {}",
            paged.entries,
            paged.through
        );
    }
    Ok(paged)
}

/// Reads of a `READ_ENTRIES` journal against heed range scans; also how
/// fast labd built it, in facts/s.
async fn reads_rows(
    addr: SocketAddr,
    pid: u32,
    ids: &Ids,
    space: &str,
    baselines: &Path,
) -> Result<(Vec<Row>, f64)> {
    progress(&format!("journal: build {READ_ENTRIES} entries"));
    let took = build(addr, ids, space, READ_ENTRIES, false).await?;
    let fill_rate = per_second(READ_ENTRIES, took);
    progress(&format!(
        "journal: built in {:.1} s ({fill_rate:.0} facts/s)",
        took.as_secs_f64()
    ));
    let id = lmdb::space_id(0);
    let lmdb = tokio::task::block_in_place(|| {
        build_baseline(&baselines.join("reads"), &id, READ_ENTRIES, false)
    })?;
    progress("journal: read");
    let mut api = Api::connect(addr).await?;
    let (mut labd, mut heed) = ((0u64, Duration::ZERO), (0u64, Duration::ZERO));
    let (json_before, mut pages, mut labd_cpu) = (api.json_time, 0u64, Duration::ZERO);
    for _ in 0..ROUNDS {
        let cpu_before = labd_cpu_time(pid)?;
        let paged = read_all(&mut api, ids, space, None, None).await?;
        labd_cpu += labd_cpu_time(pid)? - cpu_before;
        pages += paged.pages;
        ensure!(
            paged.through == READ_ENTRIES,
            "the read journal holds {}",
            paged.through
        );
        labd = (labd.0 + paged.entries, labd.1 + paged.elapsed);
        let scanned =
            tokio::task::block_in_place(|| lmdb.read_pages(&id, READ_ENTRIES, PAGE as usize))?;
        ensure!(
            scanned.entries == READ_ENTRIES,
            "the baseline read {}",
            scanned.entries
        );
        heed = (heed.0 + scanned.entries, heed.1 + scanned.elapsed);
    }
    drop(lmdb);
    let client_json = api.json_time - json_before;
    let (rate, base) = (per_second(labd.0, labd.1), per_second(heed.0, heed.1));
    let per_page = |time: Duration| time.as_secs_f64() * 1e6 / pages.max(1) as f64;
    let row = Row::new(
        format!(
            "read entries/s, pages of {PAGE}, {READ_ENTRIES}-entry journal (n={})",
            labd.0
        ),
        format!(
            "{rate:.0} ({:.0} µs per page, {:.0} of it bench JSON; labd {:.0} µs CPU per page)",
            per_page(labd.1),
            per_page(client_json),
            per_page(labd_cpu)
        ),
        format!("{base:.0} heed range scans, txn per page"),
        percent(rate / base),
        verdict(
            &format!(">= {READ_TARGET:.0} (3x 102k)"),
            rate >= READ_TARGET,
        ),
    );
    Ok((vec![row], fill_rate))
}

/// A filtered read where 1 in `HIT_EVERY` entries matches: its time
/// against a heed index walk, and its pages against the fewest possible.
async fn filtered_rows(
    addr: SocketAddr,
    ids: &Ids,
    space: &str,
    baselines: &Path,
    fill_rate: f64,
) -> Result<Vec<Row>> {
    let estimate = FILTERED_ENTRIES as f64 / fill_rate.max(1.0);
    let total = if estimate <= BUILD_BUDGET.as_secs_f64() {
        FILTERED_ENTRIES
    } else {
        progress(&format!(
            "journal: {FILTERED_ENTRIES} entries would take about {estimate:.0} s to build; \
             using {FILTERED_FALLBACK}"
        ));
        FILTERED_FALLBACK
    };
    progress(&format!(
        "journal: build {total} entries, 1 in {HIT_EVERY} a hit"
    ));
    let took = build(addr, ids, space, total, true).await?;
    progress(&format!(
        "journal: built in {:.1} s ({:.0} facts/s)",
        took.as_secs_f64(),
        per_second(total, took)
    ));
    let id = lmdb::space_id(0);
    let lmdb = tokio::task::block_in_place(|| {
        build_baseline(&baselines.join("filtered"), &id, total, true)
    })?;
    let expected: HashSet<String> = (0..total)
        .filter(|k| built_predicate(*k, true) == "hit")
        .map(|k| base64(&fact("hit", k)))
        .collect();
    let matches = expected.len() as u64;
    let predicate = text("hit");
    let filter = json!({ "predicate": base64(&predicate) });

    progress("journal: filtered read");
    let mut api = Api::connect(addr).await?;
    let (mut labd, mut heed) = (Duration::ZERO, Duration::ZERO);
    let mut pages = 0;
    for _ in 0..ROUNDS {
        let paged = read_all(&mut api, ids, space, None, Some(&filter)).await?;
        ensure!(
            paged.through == total,
            "the filtered journal holds {}",
            paged.through
        );
        let found: HashSet<String> = paged.facts.iter().cloned().collect();
        ensure!(
            found.len() == paged.facts.len() && found == expected,
            "the filtered read returned {} facts ({} distinct), not the {matches} hits",
            paged.facts.len(),
            found.len()
        );
        labd += paged.elapsed;
        pages = paged.pages;
        let scanned = tokio::task::block_in_place(|| {
            lmdb.index_pages(&id, &predicate, total, PAGE as usize)
        })?;
        ensure!(
            scanned.entries == matches,
            "the baseline found {}",
            scanned.entries
        );
        heed += scanned.elapsed;
    }
    drop(lmdb);
    let (ms, base_ms) = (
        labd.as_secs_f64() * 1e3 / f64::from(ROUNDS),
        heed.as_secs_f64() * 1e3 / f64::from(ROUNDS),
    );
    let fewest = matches.div_ceil(PAGE);
    Ok(vec![
        Row::new(
            format!("filtered read, {matches} of {total} entries match: ms for all"),
            format!("{ms:.1} ms"),
            format!("{base_ms:.1} ms heed index walk"),
            percent(base_ms / ms),
            "-".into(),
        ),
        Row::new(
            format!("filtered read pages of {PAGE} for {matches} matches"),
            format!("{pages}"),
            format!("{fewest} fewest possible"),
            percent(fewest as f64 / pages as f64),
            verdict(&format!("<= {}", fewest + 1), pages <= fewest + 1),
        ),
    ])
}

/// One capture and paging of a query over the whole subtree of `scope`.
struct Queried {
    spaces: Vec<(String, u64)>,
    /// The snapshot's size as JSON, which every continuation resends.
    snapshot_bytes: usize,
    /// Of `elapsed`, the time the client spent writing and parsing JSON.
    client_json: Duration,
    entries: u64,
    pages: u64,
    capture: Duration,
    elapsed: Duration,
}

async fn query_all(api: &mut Api, ids: &Ids, scope: &str) -> Result<Queried> {
    let json_before = api.json_time;
    let started = Instant::now();
    let mut body = json!({ "space": ids.space_ref(scope), "limit": PAGE });
    let mut answer = api.call("query", &body, 200).await?;
    let capture = started.elapsed();
    let snapshot = answer["snapshot"].clone();
    let spaces: Vec<(String, u64)> = snapshot["spaces"]
        .as_array()
        .context("query without snapshot.spaces")?
        .iter()
        .map(|listed| {
            let space = listed["space"]["space_id"]
                .as_str()
                .context("a listed space")?;
            let through = listed["through"].as_u64().context("a listed cutoff")?;
            Ok((space.to_string(), through))
        })
        .collect::<Result<_>>()?;
    let snapshot_bytes = serde_json::to_vec(&snapshot)?.len();
    body["snapshot"] = snapshot;
    let (mut entries, mut pages) = (0u64, 1u64);
    loop {
        entries += answer["entries"]
            .as_array()
            .context("query without entries")?
            .len() as u64;
        let Some(cursor) = answer["next_cursor"].as_str() else {
            break;
        };
        body["cursor"] = cursor.into();
        answer = api.call("query", &body, 200).await?;
        pages += 1;
    }
    let elapsed = started.elapsed();
    let client_json = api.json_time - json_before;
    let listed: u64 = spaces.iter().map(|(_, through)| through).sum();
    ensure!(
        entries == listed,
        "the query returned {entries} of {listed} entries"
    );
    Ok(Queried {
        spaces,
        snapshot_bytes,
        client_json,
        entries,
        pages,
        capture,
        elapsed,
    })
}

/// A query over a tree under `tree`, each of its spaces but `tree` given
/// `QUERY_FACTS` facts, against `read` of each space it lists; and the same
/// over the first child's subtree (100 spaces), to show how a page's cost
/// grows with the snapshot.
async fn query_rows(addr: SocketAddr, pid: u32, ids: &Arc<Ids>, tree: &str) -> Result<Vec<Row>> {
    progress("journal: query tree");
    let spaces = build_tree(addr, ids, tree).await?;
    let refs: Vec<Value> = spaces.iter().map(|space| ids.space_ref(space)).collect();
    let facts: Vec<String> = (0..QUERY_FACTS)
        .map(|k| base64(&fact("query", k)))
        .collect();
    for answer in post_all(
        addr,
        "append",
        201,
        refs.len(),
        Arc::new(move |i| json!({ "space": refs[i], "facts": facts, "operation_id": "fill" })),
    )
    .await?
    {
        appended(&answer, QUERY_FACTS as usize)?;
    }
    progress("journal: query");
    let mut api = Api::connect(addr).await?;
    let whole = query_vs_reads(&mut api, pid, ids, tree).await?;
    // Parents come first: the first is a child of `tree`.
    let part = query_vs_reads(&mut api, pid, ids, &spaces[0]).await?;
    let mut rows = Vec::new();
    for (figures, prefix) in [(whole, ""), (part, "  ref: ")] {
        let per_page = |ms: f64, pages: u64| ms / pages.max(1) as f64;
        rows.push(Row::new(
            format!(
                "{prefix}query, {} spaces, {} entries: capture + all pages",
                figures.spaces, figures.entries
            ),
            format!(
                "{:.0} ms ({} pages, {:.2} ms each, {:.2} of it bench JSON, labd {:.2} ms CPU; {} kB snapshot per page)",
                figures.ms,
                figures.pages,
                per_page(figures.ms, figures.pages),
                per_page(figures.client_json_ms, figures.pages),
                per_page(figures.labd_cpu_ms, figures.pages),
                figures.snapshot_bytes / 1000
            ),
            format!(
                "{:.0} ms read per space ({} pages, {:.2} ms each)",
                figures.read_ms,
                figures.read_pages,
                per_page(figures.read_ms, figures.read_pages)
            ),
            percent(figures.read_ms / figures.ms),
            match prefix {
                "" => {
                    let ms = per_page(figures.ms, figures.pages);
                    verdict(
                        &format!("<= {QUERY_PAGE_TARGET_MS} ms per page"),
                        ms <= QUERY_PAGE_TARGET_MS,
                    )
                }
                _ => "-".into(),
            },
        ));
        rows.push(Row::new(
            format!(
                "{prefix}query, {} spaces: capture + first page",
                figures.spaces
            ),
            format!("{:.1} ms", figures.capture_ms),
            "-".into(),
            "-".into(),
            "-".into(),
        ));
    }
    Ok(rows)
}

/// A query's figures, per round, beside `read` of each space it lists.
struct QueryFigures {
    spaces: usize,
    entries: u64,
    pages: u64,
    snapshot_bytes: usize,
    ms: f64,
    capture_ms: f64,
    /// Of `ms`, the client's own JSON work.
    client_json_ms: f64,
    /// labd's CPU time over `ms`.
    labd_cpu_ms: f64,
    read_ms: f64,
    read_pages: u64,
}

/// Queries the subtree of `scope` whole and reads each space it lists up to
/// the listed cutoff, in alternating rounds.
async fn query_vs_reads(api: &mut Api, pid: u32, ids: &Ids, scope: &str) -> Result<QueryFigures> {
    let (mut labd, mut reads, mut capture) = (Duration::ZERO, Duration::ZERO, Duration::ZERO);
    let mut labd_cpu = Duration::ZERO;
    let mut client_json = Duration::ZERO;
    let mut last = None;
    let mut read_pages = 0;
    for _ in 0..ROUNDS {
        let cpu_before = labd_cpu_time(pid)?;
        let queried = query_all(api, ids, scope).await?;
        labd_cpu += labd_cpu_time(pid)? - cpu_before;
        labd += queried.elapsed;
        capture += queried.capture;
        client_json += queried.client_json;
        let started = Instant::now();
        let (mut read, mut paged) = (0, 0);
        for (space, through) in &queried.spaces {
            let page = read_all(api, ids, space, Some(*through), None).await?;
            read += page.entries;
            paged += page.pages;
        }
        reads += started.elapsed();
        ensure!(
            read == queried.entries,
            "per-space reads returned {read} of {}",
            queried.entries
        );
        read_pages = paged;
        last = Some(queried);
    }
    let queried = last.context("no query round")?;
    let ms = |time: Duration| time.as_secs_f64() * 1e3 / f64::from(ROUNDS);
    Ok(QueryFigures {
        spaces: queried.spaces.len(),
        entries: queried.entries,
        pages: queried.pages,
        snapshot_bytes: queried.snapshot_bytes,
        ms: ms(labd),
        capture_ms: ms(capture),
        client_json_ms: ms(client_json),
        labd_cpu_ms: ms(labd_cpu),
        read_ms: ms(reads),
        read_pages,
    })
}

/// A text atom in canonical CBOR (shorter than 256 bytes here).
pub fn text(s: &str) -> Vec<u8> {
    let mut out = Vec::with_capacity(s.len() + 2);
    head(3, s.len() as u64, &mut out);
    out.extend_from_slice(s.as_bytes());
    out
}

/// A CBOR head: major type and argument in its shortest form.
fn head(major: u8, argument: u64, out: &mut Vec<u8>) {
    let major = major << 5;
    match argument {
        0..24 => out.push(major | argument as u8),
        24..0x100 => out.extend_from_slice(&[major | 24, argument as u8]),
        0x100..0x1_0000 => {
            out.push(major | 25);
            out.extend_from_slice(&(argument as u16).to_be_bytes());
        }
        0x1_0000..0x1_0000_0000 => {
            out.push(major | 26);
            out.extend_from_slice(&(argument as u32).to_be_bytes());
        }
        _ => {
            out.push(major | 27);
            out.extend_from_slice(&argument.to_be_bytes());
        }
    }
}

/// The fact `[predicate, n]`, canonical: a 2-tuple of a text atom and an
/// unsigned integer.
pub fn fact(predicate: &str, n: u64) -> Vec<u8> {
    let mut out = vec![0x82];
    out.extend_from_slice(&text(predicate));
    head(0, n, &mut out);
    out
}

/// Padded standard base64 (RFC 4648 section 4).
pub fn base64(bytes: &[u8]) -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::with_capacity(bytes.len().div_ceil(3) * 4);
    for chunk in bytes.chunks(3) {
        let word = chunk
            .iter()
            .enumerate()
            .fold(0u32, |word, (i, &b)| word | u32::from(b) << (16 - 8 * i));
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(ALPHABET[(word >> (18 - 6 * i) & 63) as usize] as char);
            } else {
                out.push('=');
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn facts_are_canonical_cbor() {
        assert_eq!(fact("p", 1), [0x82, 0x61, 0x70, 0x01]);
        assert_eq!(text("hit"), b"\x63hit");
        assert_eq!(fact("p", 23)[3..], [23]);
        assert_eq!(fact("p", 24)[3..], [0x18, 24]);
        assert_eq!(fact("p", 255)[3..], [0x18, 255]);
        assert_eq!(fact("p", 256)[3..], [0x19, 1, 0]);
        assert_eq!(fact("p", 65_536)[3..], [0x1a, 0, 1, 0, 0]);
        assert_eq!(fact("p", 1 << 32)[3..], [0x1b, 0, 0, 0, 1, 0, 0, 0, 0]);
        assert_eq!(text(&"x".repeat(30))[..2], [0x78, 30]);
    }

    #[test]
    fn base64_is_padded_standard() {
        assert_eq!(base64(&[0x82, 0x61, 0x70, 0x01]), "gmFwAQ==");
        assert_eq!(base64(b""), "");
        assert_eq!(base64(b"f"), "Zg==");
        assert_eq!(base64(b"fo"), "Zm8=");
        assert_eq!(base64(b"foo"), "Zm9v");
        assert_eq!(base64(b"foobar"), "Zm9vYmFy");
        assert_eq!(base64(&[0xfb, 0xff]), "+/8=");
    }

    #[test]
    fn one_in_a_thousand_is_a_hit() {
        let hits = (0..10_000)
            .filter(|k| built_predicate(*k, true) == "hit")
            .count();
        assert_eq!(hits, 10);
        assert_eq!(built_predicate(0, false), "entry");
    }

    #[test]
    fn a_threads_run_queue_wait_is_its_schedstats_second_field() {
        assert_eq!(
            run_queue_wait("4177016377 2233401915 19564\n").unwrap(),
            Duration::from_nanos(2_233_401_915)
        );
        assert!(run_queue_wait("4177016377").is_err());
        assert!(run_queue_wait("").is_err());
    }
}
