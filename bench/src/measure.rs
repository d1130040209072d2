//! The measurements, each beside a baseline taken in the same run on the
//! same machine:
//!
//! - put MB/s against hashing and writing the same bytes durably (SHA-256,
//!   write, fsync, rename, fsync of the directory) in the same filesystem,
//!   with `sha256sum` and `cp` of a file of those bytes for reference;
//! - get MB/s and small-get (4 KiB) requests/s and latency against a plain
//!   hyper server ("native") that answers the same bytes with the same
//!   headers from memory.
//!
//! Puts and MB/s gets run over one keep-alive connection, one request after
//! another.
//!
//! Every loop is bounded both in count and in time. A figure and its
//! baseline are taken in alternating rounds, so that a change in the
//! machine's background load during the run falls on both.

use crate::client::{self, Conn};
use crate::native::{Native, Routes};
use anyhow::{ensure, Context, Result};
use bytes::Bytes;
use hyper::header::{HeaderName, HeaderValue};
use sha2::{Digest, Sha256};
use std::collections::HashMap;
use std::fs::{self, File, OpenOptions};
use std::io::Write;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// Put throughput over the durable-write baseline that is the target.
const PUT_TARGET: f64 = 0.70;
/// Most latency the component may add to a small get, in µs.
const ADDED_LATENCY_TARGET_US: f64 = 20.0;
/// A route the bytes component's router answers 404 without touching a
/// blob: the empty request.
const EMPTY_REQUEST_PATH: &str = "/v1/no-such-route";
/// Concurrent keep-alive clients of the small-get runs.
const CONCURRENCY: [usize; 3] = [1, 16, 64];
/// Alternating rounds of figure and baseline per throughput measurement.
const ROUNDS: u32 = 2;
/// Alternating rounds of figure and baseline per small-get measurement.
const LOAD_ROUNDS: u32 = 3;
/// Unmeasured time before each small-get round.
const WARMUP: Duration = Duration::from_millis(300);
/// Upper bound of requests per connection in a small-get run.
const MAX_REQUESTS_PER_CONN: u64 = 10_000_000;
/// The baseline writes in slices of this size.
const WRITE_SLICE: usize = 256 << 10;

/// Stop after `count` iterations or once `time` has passed, whichever is
/// first; at least one iteration runs.
#[derive(Clone, Copy)]
pub(crate) struct Bound {
    count: u64,
    time: Duration,
}

impl Bound {
    pub(crate) const fn new(count: u64, seconds: u64) -> Bound {
        Bound {
            count,
            time: Duration::from_secs(seconds),
        }
    }

    /// One of `rounds` equal shares of this bound.
    pub(crate) fn share(&self, rounds: u32) -> Bound {
        Bound {
            count: self.count.div_ceil(u64::from(rounds)),
            time: self.time / rounds,
        }
    }

    pub(crate) fn done(&self, count: u64, started: Instant) -> bool {
        count >= self.count.max(1) || (count > 0 && started.elapsed() >= self.time)
    }
}

/// One blob size and how long to spend on it.
struct Spec {
    label: &'static str,
    size: usize,
    puts: Bound,
    gets: Bound,
    /// Whether to time `sha256sum` and `cp`; below a megabyte they measure
    /// process start more than bytes.
    tools: bool,
}

const SPECS: [Spec; 3] = [
    Spec {
        label: "4 KiB",
        size: 4 << 10,
        puts: Bound::new(1_000, 2),
        gets: Bound::new(100_000, 2),
        tools: false,
    },
    Spec {
        label: "1 MiB",
        size: 1 << 20,
        puts: Bound::new(200, 3),
        gets: Bound::new(2_000, 2),
        tools: true,
    },
    Spec {
        label: "256 MiB",
        size: 256 << 20,
        puts: Bound::new(2, 120),
        gets: Bound::new(2, 60),
        tools: true,
    },
];

/// One line of the output table.
pub struct Row {
    pub what: String,
    pub figure: String,
    pub baseline: String,
    pub ratio: String,
    pub target: String,
}

impl Row {
    pub(crate) fn new(
        what: String,
        figure: String,
        baseline: String,
        ratio: String,
        target: String,
    ) -> Row {
        Row {
            what,
            figure,
            baseline,
            ratio,
            target,
        }
    }
}

/// Bytes moved over time.
#[derive(Clone, Copy, Default)]
struct Rate {
    count: u64,
    bytes: u64,
    elapsed: Duration,
}

impl Rate {
    fn add(&mut self, other: Rate) {
        self.count += other.count;
        self.bytes += other.bytes;
        self.elapsed += other.elapsed;
    }

    fn mb_per_s(&self) -> f64 {
        self.bytes as f64 / self.elapsed.as_secs_f64().max(1e-9) / 1e6
    }
}

/// A stored blob: its route and its bytes.
struct Stored {
    label: &'static str,
    path: String,
    bytes: Bytes,
}

/// Runs every measurement against the bytes service at `labd`; `scratch`
/// holds the baseline's files, `threads` is the native server's worker
/// count, `rps_time` the length of each small-get run.
pub async fn run(
    labd: SocketAddr,
    scratch: PathBuf,
    threads: usize,
    rps_time: Duration,
) -> Result<Vec<Row>> {
    measure(labd, scratch, threads, rps_time, &SPECS).await
}

/// The small-get rows alone (and the 4 KiB put they read back).
pub async fn small_gets(
    labd: SocketAddr,
    scratch: PathBuf,
    threads: usize,
    rps_time: Duration,
) -> Result<Vec<Row>> {
    measure(labd, scratch, threads, rps_time, &SPECS[..1]).await
}

/// The rows of `specs`, then the small-get rows over the first of them.
async fn measure(
    labd: SocketAddr,
    scratch: PathBuf,
    threads: usize,
    rps_time: Duration,
    specs: &[Spec],
) -> Result<Vec<Row>> {
    let mut rng = Xorshift::from_clock();
    let mut rows = Vec::new();
    let mut stored = Vec::new();

    for spec in specs {
        progress(&format!("put {}", spec.label));
        let mut data = vec![0u8; spec.size];
        rng.fill(&mut data);
        let (mut baseline, mut put, mut name) = (Rate::default(), Rate::default(), String::new());
        // The last put of the last round leaves `data` holding blob `name`.
        for _ in 0..ROUNDS {
            let bound = spec.puts.share(ROUNDS);
            baseline.add(tokio::task::block_in_place(|| {
                hash_and_write(&scratch.join("baseline"), &mut data, &mut rng, bound)
            })?);
            let (rate, last) = puts(labd, &mut data, &mut rng, bound).await?;
            put.add(rate);
            name = last;
        }
        let ratio = put.mb_per_s() / baseline.mb_per_s();
        rows.push(Row::new(
            format!("put {} MB/s (n={})", spec.label, put.count),
            format!("{:.1}", put.mb_per_s()),
            format!(
                "{:.1} hash+write+fsync (n={})",
                baseline.mb_per_s(),
                baseline.count
            ),
            percent(ratio),
            verdict(&format!(">= {}", percent(PUT_TARGET)), ratio >= PUT_TARGET),
        ));
        if spec.tools {
            rows.extend(tokio::task::block_in_place(|| {
                tool_rows(&scratch.join("reference-tools"), spec, &data)
            })?);
        }
        stored.push(Stored {
            label: spec.label,
            path: format!("/v1/blobs/{name}"),
            bytes: Bytes::from(data),
        });
    }

    // Every blob reads back whole through labd; the first answer's headers
    // are the ones the native server repeats.
    let mut headers = Vec::new();
    for blob in &stored {
        let response = fetch_exact(labd, blob).await?;
        ensure!(
            response.header("lab-service") == Some("bytes"),
            "a labd response without `Lab-Service: bytes`"
        );
        if headers.is_empty() {
            headers = response.headers;
        }
    }
    let native = Native::start(
        Routes {
            bodies: stored
                .iter()
                .map(|b| (b.path.clone(), b.bytes.clone()))
                .collect::<HashMap<_, _>>(),
            headers: repeatable(&headers)?,
        },
        threads,
    )?;
    for blob in &stored {
        fetch_exact(native.addr, blob).await?;
    }

    for (blob, spec) in stored.iter().zip(specs) {
        progress(&format!("get {}", blob.label));
        let (mut component, mut plain) = (Rate::default(), Rate::default());
        for _ in 0..ROUNDS {
            let bound = spec.gets.share(ROUNDS);
            component.add(gets(labd, blob, bound).await?);
            plain.add(gets(native.addr, blob, bound).await?);
        }
        rows.push(Row::new(
            format!("get {} MB/s (n={})", blob.label, component.count),
            format!("{:.1}", component.mb_per_s()),
            format!("{:.1} native (n={})", plain.mb_per_s(), plain.count),
            percent(component.mb_per_s() / plain.mb_per_s()),
            "-".into(),
        ));
    }

    let small = &stored[0];
    let get = Expected::of(small);
    let no_route = Expected {
        path: EMPTY_REQUEST_PATH.into(),
        status: 404,
        size: None,
    };
    for concurrency in CONCURRENCY {
        progress(&format!("small get, {concurrency} clients"));
        let (mut component, mut plain) = (Load::default(), Load::default());
        // At one client the empty request runs in the same rounds: the
        // ceiling of the get's added latency.
        let mut empty_request = (concurrency == 1).then(Load::default);
        for _ in 0..LOAD_ROUNDS {
            let time = rps_time / LOAD_ROUNDS;
            component.add(&load(labd, &get, concurrency, time).await?, LOAD_ROUNDS);
            plain.add(
                &load(native.addr, &get, concurrency, time).await?,
                LOAD_ROUNDS,
            );
            if let Some(empty_request) = &mut empty_request {
                let round = load(labd, &no_route, concurrency, time).await?;
                empty_request.add(&round, LOAD_ROUNDS);
            }
        }
        rows.push(Row::new(
            format!("small get req/s, c={concurrency}"),
            format!("{:.0}", component.per_second),
            format!("{:.0} native", plain.per_second),
            percent(component.per_second / plain.per_second),
            "-".into(),
        ));
        let (mean, native_mean) = (component.mean_us(), plain.mean_us());
        rows.push(Row::new(
            format!("small get mean latency, c={concurrency}"),
            format!("{mean:.1} µs"),
            format!("{native_mean:.1} µs native"),
            format!("{:+.1} µs", mean - native_mean),
            "-".into(),
        ));
        if let Some(empty_request) = empty_request {
            rows.extend(added_latency_rows(&component, &plain, &empty_request));
        }
    }
    drop(native);
    Ok(rows)
}

/// The small get's added latency at one client against its target, then
/// the ceiling that stops it on this machine: `empty_request`, a 404 from
/// the component's router (HTTP, a fresh instance, the call and its drop,
/// nothing read), which every component request pays, so a get adds at
/// least what it adds. Under that ceiling, the get may add at most the
/// target's 20 µs over the empty request: its own work, the blob read and
/// its answer.
fn added_latency_rows(get: &Load, native: &Load, empty_request: &Load) -> Vec<Row> {
    let per_request = |load: &Load| 1e6 / load.per_second;
    let (get_us, native_us, empty_us) = (
        per_request(get),
        per_request(native),
        per_request(empty_request),
    );
    let (added, empty_added) = (get_us - native_us, empty_us - native_us);
    let own = get_us - empty_us;
    vec![
        Row::new(
            "small get µs per request (1/rps), c=1".into(),
            format!("{get_us:.1} µs"),
            format!("{native_us:.1} µs native"),
            format!("{added:+.1} µs"),
            verdict(
                &format!("<= {ADDED_LATENCY_TARGET_US:.0} µs added"),
                added <= ADDED_LATENCY_TARGET_US,
            ),
        ),
        Row::new(
            "  ceiling: bytes empty request c=1 (404, no store): µs per request (1/rps)".into(),
            format!("{empty_us:.1} µs"),
            format!("{native_us:.1} µs native"),
            format!("{empty_added:+.1} µs"),
            reachable(
                "the get's target reachable under this ceiling",
                empty_added <= ADDED_LATENCY_TARGET_US,
            ),
        ),
        Row::new(
            "  small get c=1 over the empty request c=1".into(),
            format!("{get_us:.1} µs"),
            format!("{empty_us:.1} µs empty request"),
            format!("{own:+.1} µs"),
            verdict(
                &format!("<= {ADDED_LATENCY_TARGET_US:.0} µs over the ceiling"),
                own <= ADDED_LATENCY_TARGET_US,
            ),
        ),
    ]
}

pub(crate) fn progress(what: &str) {
    eprintln!("lab-bench: {what}");
}

pub(crate) fn percent(ratio: f64) -> String {
    format!("{:.0}%", ratio * 100.0)
}

pub(crate) fn verdict(target: &str, met: bool) -> String {
    format!("{target} ({})", if met { "met" } else { "missed" })
}

/// Whether a target lies under a ceiling: `question`, answered yes or no.
pub(crate) fn reachable(question: &str, yes: bool) -> String {
    format!("{question}: {}", if yes { "yes" } else { "no" })
}

/// The headers of a `labd` answer that describe the content, as opposed to
/// the framing and the date, which hyper sets per response.
pub(crate) fn repeatable(headers: &[(String, String)]) -> Result<Vec<(HeaderName, HeaderValue)>> {
    const PER_RESPONSE: [&str; 5] = [
        "content-length",
        "date",
        "transfer-encoding",
        "connection",
        "keep-alive",
    ];
    headers
        .iter()
        .filter(|(name, _)| !PER_RESPONSE.iter().any(|p| name.eq_ignore_ascii_case(p)))
        .map(|(name, value)| {
            Ok((
                HeaderName::from_bytes(name.as_bytes())?,
                HeaderValue::from_str(value)?,
            ))
        })
        .collect()
}

/// Puts `data` over one keep-alive connection, changing its first bytes
/// before each put so every put commits a new blob; the name of the last.
async fn puts(
    addr: SocketAddr,
    data: &mut [u8],
    rng: &mut Xorshift,
    bound: Bound,
) -> Result<(Rate, String)> {
    let head = client::post_head(addr, "/v1/blobs", "application/octet-stream", data.len());
    let mut conn = Conn::connect(addr).await?;
    let mut reply = Vec::with_capacity(256);
    let mut name = String::new();
    let mut count = 0;
    let started = Instant::now();
    while !bound.done(count, started) {
        rng.stamp(data);
        reply.clear();
        let response = conn.exchange(&head, data, false, Some(&mut reply)).await?;
        ensure!(
            response.status == 200,
            "put answered {}: {}",
            response.status,
            String::from_utf8_lossy(&reply)
        );
        let answer: serde_json::Value = serde_json::from_slice(&reply).context("put answer")?;
        ensure!(
            answer["size"].as_u64() == Some(data.len() as u64),
            "put answered {answer}"
        );
        name = answer["name"]
            .as_str()
            .context("put answer without a name")?
            .to_string();
        count += 1;
    }
    let elapsed = started.elapsed();
    Ok((
        Rate {
            count,
            bytes: count * data.len() as u64,
            elapsed,
        },
        name,
    ))
}

/// The physical limit of a put: hash the bytes while writing them to a new
/// file, fsync it, rename it under its digest and fsync the directory.
fn hash_and_write(dir: &Path, data: &mut [u8], rng: &mut Xorshift, bound: Bound) -> Result<Rate> {
    let staging = dir.join("staging");
    let committed = dir.join("committed");
    fs::create_dir_all(&staging)?;
    fs::create_dir_all(&committed)?;
    let mut count = 0;
    let started = Instant::now();
    while !bound.done(count, started) {
        rng.stamp(data);
        let part = staging.join(format!("{count}.part"));
        let mut file = OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&part)?;
        let mut hasher = Sha256::new();
        for slice in data.chunks(WRITE_SLICE) {
            file.write_all(slice)?;
            hasher.update(slice);
        }
        file.sync_all()?;
        drop(file);
        fs::rename(&part, committed.join(hex(&hasher.finalize())))?;
        File::open(&committed)?.sync_all()?;
        count += 1;
    }
    let elapsed = started.elapsed();
    fs::remove_dir_all(dir)?;
    Ok(Rate {
        count,
        bytes: count * data.len() as u64,
        elapsed,
    })
}

/// `sha256sum` and `cp` of a file holding `data`, for reference; a row
/// says so when a tool is missing or fails.
fn tool_rows(dir: &Path, spec: &Spec, data: &[u8]) -> Result<Vec<Row>> {
    fs::create_dir_all(dir)?;
    let source = dir.join("source");
    let copy = dir.join("copy");
    fs::write(&source, data)?;
    let mut rows = Vec::new();
    let tools: [(&str, &str, Command); 2] = [
        ("sha256sum", "with exec", {
            let mut command = Command::new("sha256sum");
            command.arg(&source);
            command
        }),
        ("cp", "no fsync, with exec", {
            let mut command = Command::new("cp");
            command.arg(&source).arg(&copy);
            command
        }),
    ];
    for (tool, note, mut command) in tools {
        let figure = match time_command(&mut command, &copy, spec.puts, data.len()) {
            Ok(rate) => format!("{:.1}", rate.mb_per_s()),
            Err(e) => format!("unavailable: {e}"),
        };
        rows.push(Row::new(
            format!("  ref: {tool} {} MB/s ({note})", spec.label),
            figure,
            "-".into(),
            "-".into(),
            "-".into(),
        ));
    }
    fs::remove_dir_all(dir)?;
    Ok(rows)
}

/// Runs `command` until `bound`; only the runs themselves are timed, not
/// the removal of `leftover` between them.
fn time_command(command: &mut Command, leftover: &Path, bound: Bound, size: usize) -> Result<Rate> {
    command
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    let mut count = 0;
    let mut elapsed = Duration::ZERO;
    let started = Instant::now();
    while !bound.done(count, started) {
        let run = Instant::now();
        let status = command.status()?;
        elapsed += run.elapsed();
        ensure!(status.success(), "{status}");
        let _ = fs::remove_file(leftover);
        count += 1;
    }
    Ok(Rate {
        count,
        bytes: count * size as u64,
        elapsed,
    })
}

/// Gets `blob` whole and checks every byte and the status.
async fn fetch_exact(addr: SocketAddr, blob: &Stored) -> Result<client::Response> {
    let mut conn = Conn::connect(addr).await?;
    let mut body = Vec::with_capacity(blob.bytes.len());
    let response = conn
        .exchange(
            &client::get_head(addr, &blob.path),
            &[],
            true,
            Some(&mut body),
        )
        .await?;
    ensure!(
        response.status == 200,
        "get {} from {addr}: {}",
        blob.path,
        response.status
    );
    ensure!(
        body == blob.bytes,
        "get {} from {addr}: other bytes than were put",
        blob.path
    );
    Ok(response)
}

/// Gets `blob` over one keep-alive connection, reading and dropping the body.
async fn gets(addr: SocketAddr, blob: &Stored, bound: Bound) -> Result<Rate> {
    let head = client::get_head(addr, &blob.path);
    let size = blob.bytes.len() as u64;
    let mut conn = Conn::connect(addr).await?;
    let mut count = 0;
    let started = Instant::now();
    while !bound.done(count, started) {
        let response = conn.exchange(&head, &[], false, None).await?;
        ensure!(
            response.status == 200 && response.body_len == size,
            "get answered {} with {} bytes",
            response.status,
            response.body_len
        );
        count += 1;
    }
    Ok(Rate {
        count,
        bytes: count * size,
        elapsed: started.elapsed(),
    })
}

/// The outcome of a small-get run.
#[derive(Default)]
struct Load {
    per_second: f64,
    requests: u64,
    latency: Duration,
}

impl Load {
    /// Adds one of `rounds` equally long rounds.
    fn add(&mut self, round: &Load, rounds: u32) {
        self.per_second += round.per_second / f64::from(rounds);
        self.requests += round.requests;
        self.latency += round.latency;
    }

    fn mean_us(&self) -> f64 {
        self.latency.as_secs_f64() * 1e6 / self.requests.max(1) as f64
    }
}

/// Requests counted by one connection of a small-get run.
#[derive(Default)]
struct Tally {
    requests: u64,
    latency: Duration,
    /// Start of the first counted request and end of the last.
    window: Option<(Instant, Instant)>,
}

/// What a small-get run asks for and the answer it checks.
struct Expected {
    path: String,
    status: u16,
    /// The body's length, when checked.
    size: Option<u64>,
}

impl Expected {
    /// `blob`, whole.
    fn of(blob: &Stored) -> Expected {
        Expected {
            path: blob.path.clone(),
            status: 200,
            size: Some(blob.bytes.len() as u64),
        }
    }
}

/// `concurrency` new keep-alive connections, each asking for `expected`
/// back to back: unmeasured for `WARMUP`, then measured for `time`.
async fn load(
    addr: SocketAddr,
    expected: &Expected,
    concurrency: usize,
    time: Duration,
) -> Result<Load> {
    let head: Arc<[u8]> = client::get_head(addr, &expected.path).into();
    let (status, size) = (expected.status, expected.size);
    let mut conns = Vec::with_capacity(concurrency);
    for _ in 0..concurrency {
        conns.push(Conn::connect(addr).await?);
    }
    let begin = Instant::now() + WARMUP;
    let end = begin + time;
    let tasks: Vec<_> = conns
        .into_iter()
        .map(|conn| {
            tokio::spawn(client_loop(
                conn,
                Arc::clone(&head),
                (status, size),
                begin,
                end,
            ))
        })
        .collect();
    let mut load = Load::default();
    for task in tasks {
        let tally = task.await??;
        if let Some((first, last)) = tally.window {
            load.per_second += tally.requests as f64 / (last - first).as_secs_f64();
        }
        load.requests += tally.requests;
        load.latency += tally.latency;
    }
    ensure!(load.requests > 0, "no request completed in {time:?}");
    Ok(load)
}

async fn client_loop(
    mut conn: Conn,
    head: Arc<[u8]>,
    (status, size): (u16, Option<u64>),
    begin: Instant,
    end: Instant,
) -> Result<Tally> {
    let mut tally = Tally::default();
    let mut sent = Instant::now();
    while sent < end && tally.requests < MAX_REQUESTS_PER_CONN {
        let response = conn.exchange(&head, &[], false, None).await?;
        let answered = Instant::now();
        ensure!(
            response.status == status && size.is_none_or(|size| response.body_len == size),
            "get answered {} with {} bytes",
            response.status,
            response.body_len
        );
        if sent >= begin {
            tally.requests += 1;
            tally.latency += answered - sent;
            let first = tally.window.map_or(sent, |(first, _)| first);
            tally.window = Some((first, answered));
        }
        sent = answered;
    }
    Ok(tally)
}

/// xorshift64*: fast, seeded from the clock, plenty for incompressible
/// and distinct bytes.
struct Xorshift(u64);

impl Xorshift {
    fn from_clock() -> Xorshift {
        let nanos = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or(0);
        Xorshift((nanos as u64 ^ (nanos >> 64) as u64) | 1)
    }

    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    fn fill(&mut self, buf: &mut [u8]) {
        let mut words = buf.chunks_exact_mut(8);
        for word in &mut words {
            word.copy_from_slice(&self.next().to_le_bytes());
        }
        let tail = words.into_remainder();
        let last = self.next().to_le_bytes();
        tail.copy_from_slice(&last[..tail.len()]);
    }

    /// Makes `buf` differ from every earlier stamp: new first eight bytes.
    fn stamp(&mut self, buf: &mut [u8]) {
        let n = buf.len().min(8);
        self.fill(&mut buf[..n]);
    }
}

fn hex(bytes: &[u8]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut text = String::with_capacity(bytes.len() * 2);
    for &b in bytes {
        text.push(DIGITS[usize::from(b >> 4)] as char);
        text.push(DIGITS[usize::from(b & 15)] as char);
    }
    text
}

/// Blob puts and whole gets through a labd whose blobs are on S3, each
/// beside the same through `local`, a labd on local files, in alternating
/// rounds: what the bucket costs a request.
pub async fn s3_rows(
    local: SocketAddr,
    s3: SocketAddr,
    endpoint: crate::s3::Endpoint,
) -> Result<Vec<Row>> {
    // One part, and several (a multipart upload, a copy, a delete).
    const SIZES: [(&str, usize, u64); 2] = [("1 MiB", 1 << 20, 100), ("32 MiB", 32 << 20, 6)];
    let mut rng = Xorshift::from_clock();
    let mut rows = Vec::new();
    for (label, size, count) in SIZES {
        progress(&format!("put and get {label} on S3 and local"));
        let bound = Bound::new(count, 20);
        let mut data = vec![0u8; size];
        rng.fill(&mut data);
        let (mut put_s3, mut put_local) = (Rate::default(), Rate::default());
        let (mut get_s3, mut get_local) = (Rate::default(), Rate::default());
        let mut direct = Rate::default();
        for _ in 0..ROUNDS {
            for (addr, put, get) in [
                (s3, &mut put_s3, &mut get_s3),
                (local, &mut put_local, &mut get_local),
            ] {
                let (rate, name) = puts(addr, &mut data, &mut rng, bound.share(ROUNDS)).await?;
                put.add(rate);
                let blob = Stored {
                    label,
                    path: format!("/v1/blobs/{name}"),
                    bytes: Bytes::from(data.clone()),
                };
                get.add(gets(addr, &blob, bound.share(ROUNDS)).await?);
                if addr == s3 {
                    let (count, elapsed) = endpoint
                        .whole_reads(&name, size as u64, bound.share(ROUNDS))
                        .await?;
                    direct.add(Rate {
                        count,
                        bytes: count * size as u64,
                        elapsed,
                    });
                }
            }
        }
        for (what, figure, baseline) in [("put", put_s3, put_local), ("get", get_s3, get_local)] {
            let ratio = figure.mb_per_s() / baseline.mb_per_s();
            rows.push(Row::new(
                format!("{what} {label} on S3 MB/s (n={})", figure.count),
                format!("{:.1}", figure.mb_per_s()),
                format!(
                    "{:.1} local files (n={})",
                    baseline.mb_per_s(),
                    baseline.count
                ),
                percent(ratio),
                "none (a loopback S3 server over files)".to_string(),
            ));
        }
        rows.push(Row::new(
            format!(
                "  ceiling: get {label} straight from the S3 server, 1 MiB ranges (n={})",
                direct.count
            ),
            format!("{:.1} (labd's S3 client alone)", direct.mb_per_s()),
            format!("{:.1} get through labd", get_s3.mb_per_s()),
            percent(get_s3.mb_per_s() / direct.mb_per_s()),
            "-".to_string(),
        ));
    }
    Ok(rows)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stamps_differ_and_fill_covers_the_tail() {
        let mut rng = Xorshift(1);
        let mut a = [0u8; 13];
        rng.fill(&mut a);
        assert_ne!(&a[8..], &[0u8; 5]);
        let mut b = a;
        rng.stamp(&mut b);
        assert_ne!(a[..8], b[..8]);
        assert_eq!(a[8..], b[8..]);
    }

    #[test]
    fn bounds_stop_on_count_or_time() {
        let started = Instant::now();
        assert!(!Bound::new(2, 60).done(0, started));
        assert!(Bound::new(2, 60).done(2, started));
        assert!(Bound::new(100, 0).done(1, started));
        assert!(!Bound::new(100, 0).done(0, started));
    }

    #[test]
    fn hex_is_lowercase() {
        assert_eq!(hex(&[0x0f, 0xa0]), "0fa0");
    }
}
