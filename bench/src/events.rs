//! Subscriptions of the coordination service's socket: the latency from an
//! append acknowledged by the journal to its event on a subscription, with
//! 1,000 subscriptions open against one; and the journal's append rate with
//! 1,000 subscriptions open (their frames drained by readers) against none,
//! in alternating rounds.
//!
//! In the latency rows and the first throughput row every subscription
//! watches the whole world (`path []`, any depth), so each append is an
//! event for all of them: the worst case. In the second throughput row each
//! watches a journal of its own that nothing appends to: the hub's cost of
//! holding subscriptions an append does not concern.

use crate::coord::Target;
use crate::fanout::{Flow, NativeFanout};
use crate::journal::{self, Api};
use crate::measure::{percent, progress, verdict, Row};
use crate::socket::{open_socket, unix_now, unix_now_nanos, Signer, Socket};
use anyhow::{bail, ensure, Context, Result};
use futures_util::{SinkExt, StreamExt};
use lab_coord_auth::{
    canonical_json, sign_request_facts, BodyDigest, Carriage, Params, RequestFacts,
};
use serde_json::{json, Value};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::sync::mpsc;
use tokio::task::JoinHandle;
use tokio_tungstenite::tungstenite::Message;

/// Subscriptions open in the loaded case, the measuring one included.
pub(crate) const SUBSCRIPTIONS: usize = 1_000;
/// Subscriptions per connection (`WS.md`, Limits).
pub(crate) const PER_CONNECTION: usize = 16;
/// Sequential appends timed per latency figure.
const APPENDS: usize = 500;
/// Concurrent appenders of the throughput row, each to its own journal.
const APPENDERS: usize = 4;
/// Alternating rounds of the throughput row.
const ROUNDS: u32 = 3;
/// labd's default `--socket-event-interval-ms`, the native fan-out's
/// batch interval.
const EVENT_INTERVAL: Duration = Duration::from_millis(5);
/// How long an awaited event may take before the run fails.
const EVENT_WAIT: Duration = Duration::from_secs(10);

/// The envelope of `subscribe` to `path` (labels below the world, all
/// depths), with call ID `id`. Signed by hand: the client's request table
/// keeps socket-only operations out.
fn subscribe_envelope(signer: &Signer, id: &str, path: &Value) -> Result<Value> {
    let body = json!({ "path": path });
    let params = Params::new();
    let facts = RequestFacts {
        op: "subscribe",
        params: &params,
        body_digest: BodyDigest::of(&canonical_json(&body)),
    };
    let proof = sign_request_facts(
        &signer.key,
        &facts,
        &signer.nonce(),
        unix_now(),
        &signer.audience,
    )?;
    let carriage = Carriage::new(proof, signer.grants.clone());
    Ok(lab_coord_client::envelope(
        id,
        "subscribe",
        &params,
        Some(body),
        &carriage,
    )?)
}

/// One event as received: its journal, its cutoff and when it arrived.
struct Received {
    space: String,
    cutoff: u64,
    at: Instant,
}

/// Connections holding subscriptions, each read to its end by a task that
/// counts the frames. Dropping it closes them all.
struct Subscriptions {
    readers: Vec<JoinHandle<()>>,
    frames: Arc<AtomicU64>,
    /// Bytes of the text of those frames.
    bytes: Arc<AtomicU64>,
}

impl Subscriptions {
    /// `count` subscriptions, `PER_CONNECTION` to a connection, the n-th
    /// to `scopes[n % scopes.len()]`.
    async fn open(
        target: &Target,
        signer: &Signer,
        count: usize,
        scopes: &[Value],
    ) -> Result<Subscriptions> {
        let frames = Arc::new(AtomicU64::new(0));
        let bytes = Arc::new(AtomicU64::new(0));
        let mut readers = Vec::new();
        let mut left = count;
        while left > 0 {
            let here = left.min(PER_CONNECTION);
            let first = count - left;
            let mine: Vec<Value> = (first..first + here)
                .map(|n| scopes[n % scopes.len()].clone())
                .collect();
            let mut socket = subscribed(target, signer, &mine).await?;
            let (frames, bytes) = (Arc::clone(&frames), Arc::clone(&bytes));
            readers.push(tokio::spawn(async move {
                while let Some(Ok(message)) = socket.next().await {
                    if let Message::Text(text) = message {
                        frames.fetch_add(1, Ordering::Relaxed);
                        bytes.fetch_add(text.len() as u64, Ordering::Relaxed);
                    }
                }
            }));
            left -= here;
        }
        Ok(Subscriptions {
            readers,
            frames,
            bytes,
        })
    }
}

impl Drop for Subscriptions {
    fn drop(&mut self) {
        for reader in &self.readers {
            reader.abort();
        }
    }
}

/// A connection holding one subscription to each of `scopes`, each
/// answered `ok`.
async fn subscribed(target: &Target, signer: &Signer, scopes: &[Value]) -> Result<Socket> {
    let mut socket = open_socket(target.operations).await?;
    subscribe(&mut socket, signer, scopes).await?;
    Ok(socket)
}

/// Opens one subscription to each of `scopes` on `socket`, each answered
/// `ok`.
async fn subscribe(socket: &mut Socket, signer: &Signer, scopes: &[Value]) -> Result<()> {
    let count = scopes.len();
    for (i, scope) in scopes.iter().enumerate() {
        let envelope = subscribe_envelope(signer, &format!("s{i}"), scope)?;
        socket.send(Message::text(envelope.to_string())).await?;
    }
    let mut answered = 0;
    while answered < count {
        let text = match socket.next().await.context("the socket closed")?? {
            Message::Text(text) => text,
            _ => continue,
        };
        let reply: Value = serde_json::from_str(text.as_str())?;
        if reply.get("subscription").is_some() {
            continue;
        }
        ensure!(reply["status"] == "ok", "subscribe replied {reply}");
        answered += 1;
    }
    Ok(())
}

/// Opens [`SUBSCRIPTIONS`] subscriptions to the whole world,
/// [`PER_CONNECTION`] to a socket, on the first of `sockets`. Nothing is
/// appended meanwhile, so their pending tables stay empty.
pub(crate) async fn subscribe_idle(sockets: &mut [Socket], signer: &Signer) -> Result<()> {
    let world = vec![json!([]); SUBSCRIPTIONS];
    let chunks = world.chunks(PER_CONNECTION);
    ensure!(
        sockets.len() >= chunks.len(),
        "{SUBSCRIPTIONS} subscriptions need {} sockets",
        chunks.len()
    );
    for (socket, mine) in sockets.iter_mut().zip(chunks) {
        subscribe(socket, signer, mine).await?;
    }
    Ok(())
}

/// The measuring subscription: its events, time-stamped on arrival by a
/// reader of its own connection.
async fn measuring(
    target: &Target,
    signer: &Signer,
) -> Result<(mpsc::UnboundedReceiver<Received>, JoinHandle<()>)> {
    let mut socket = subscribed(target, signer, &[json!([])]).await?;
    let (tx, rx) = mpsc::unbounded_channel();
    let reader = tokio::spawn(async move {
        while let Some(Ok(message)) = socket.next().await {
            let at = Instant::now();
            let Message::Text(text) = message else {
                continue;
            };
            let Ok(frame) = serde_json::from_str::<Value>(text.as_str()) else {
                continue;
            };
            let event = &frame["event"];
            if let (Some(space), Some(cutoff)) = (
                event["space"]["space_id"].as_str(),
                event["cutoff"].as_u64(),
            ) {
                let space = space.to_string();
                if tx.send(Received { space, cutoff, at }).is_err() {
                    return;
                }
            }
        }
    });
    Ok((rx, reader))
}

/// Appends one fact to `space`: the new cutoff.
async fn append(api: &mut Api, space: &Value, n: u64) -> Result<u64> {
    let body = json!({
        "space": space,
        "facts": [journal::base64(&journal::fact("evbench", n))],
        "operation_id": format!("evbench-{:016x}-{n}", unix_now_nanos()),
    });
    let answer = api.call("append", &body, 201).await?;
    answer["cutoff"]
        .as_u64()
        .with_context(|| format!("append answered {answer}"))
}

/// Latencies of `APPENDS` sequential appends to `space` (id `space_id`),
/// each from its acknowledgement to the event naming its cutoff.
async fn latencies(
    api: &mut Api,
    space: &Value,
    space_id: &str,
    events: &mut mpsc::UnboundedReceiver<Received>,
    first: u64,
) -> Result<Vec<Duration>> {
    // Events of earlier appends are stale here.
    while events.try_recv().is_ok() {}
    let mut out = Vec::with_capacity(APPENDS);
    for n in first..first + APPENDS as u64 {
        let cutoff = append(api, space, n).await?;
        let acknowledged = Instant::now();
        let received = loop {
            let event = tokio::time::timeout(EVENT_WAIT, events.recv())
                .await
                .context("no event within the wait")?
                .context("the measuring subscription ended")?;
            if event.space == space_id && event.cutoff >= cutoff {
                break event;
            }
        };
        ensure!(
            received.cutoff == cutoff,
            "sequential appends coalesced: event at {}, append at {cutoff}",
            received.cutoff
        );
        // An event read before the acknowledgement counts as zero.
        out.push(received.at.saturating_duration_since(acknowledged));
    }
    out.sort();
    Ok(out)
}

/// The p50 and p99 of sorted `samples`.
fn quantiles(samples: &[Duration]) -> (Duration, Duration) {
    let at = |q: usize| samples[(samples.len() * q / 100).min(samples.len() - 1)];
    (at(50), at(99))
}

fn ms(d: Duration) -> String {
    format!("{:.2} ms", d.as_secs_f64() * 1e3)
}

/// Appends acknowledged in some rounds, and the CPU time labd and this
/// process spent meanwhile.
#[derive(Default)]
struct Load {
    appends: u64,
    labd: Duration,
    bench: Duration,
}

impl Load {
    /// One round of `append_load`.
    async fn measure(target: &Target, spaces: &[Value], time: Duration) -> Result<Load> {
        let labd_stat = format!("/proc/{}/stat", target.pid);
        let cpu = || -> Result<(Duration, Duration)> {
            Ok((
                journal::cpu_time(&labd_stat)?,
                journal::cpu_time("/proc/self/stat")?,
            ))
        };
        let (labd, bench) = cpu()?;
        let appends = append_load(target, spaces, time).await?;
        let (labd_after, bench_after) = cpu()?;
        Ok(Load {
            appends,
            labd: labd_after.saturating_sub(labd),
            bench: bench_after.saturating_sub(bench),
        })
    }

    fn add(&mut self, other: &Load) {
        self.appends += other.appends;
        self.labd += other.labd;
        self.bench += other.bench;
    }

    /// Microseconds of labd's CPU per append.
    fn labd_per_append(&self) -> f64 {
        self.labd.as_secs_f64() * 1e6 / self.appends.max(1) as f64
    }

    /// Microseconds of this process's CPU per append.
    fn bench_per_append(&self) -> f64 {
        self.bench.as_secs_f64() * 1e6 / self.appends.max(1) as f64
    }
}

/// Appends acknowledged by `APPENDERS` clients over `time`, each appending
/// in turn to its own journal.
async fn append_load(target: &Target, spaces: &[Value], time: Duration) -> Result<u64> {
    let mut tasks = Vec::new();
    for (i, space) in spaces.iter().enumerate() {
        let (addr, space) = (target.journal, space.clone());
        tasks.push(tokio::spawn(async move {
            let mut api = Api::connect(addr).await?;
            let deadline = Instant::now() + time;
            let mut done = 0u64;
            while Instant::now() < deadline {
                append(&mut api, &space, (i as u64) << 32 | done).await?;
                done += 1;
            }
            anyhow::Ok(done)
        }));
    }
    let mut done = 0;
    for task in tasks {
        done += task.await??;
    }
    Ok(done)
}

pub async fn run(target: Target, round: Duration) -> Result<Vec<Row>> {
    progress("events: setup");
    let signer = Signer::root(&target).await?;

    // Journals below the world's space, created straight in the journal:
    // the first is timed for latency, all are appended to for throughput.
    let ids = journal::identity(target.journal).await?;
    let mut api = Api::connect(target.journal).await?;
    let resolved = api
        .call(
            "resolve",
            &json!({ "root_id": ids.root, "path": ["worlds", &signer.world] }),
            200,
        )
        .await?;
    let world_space = resolved["space"]["space_id"]
        .as_str()
        .with_context(|| format!("resolve of the world answered {resolved}"))?
        .to_string();
    let mut spaces = Vec::new();
    let mut space_ids = Vec::new();
    for i in 0..APPENDERS {
        let id = journal::create(&mut api, &ids, &world_space, &format!("evbench-{i}")).await?;
        spaces.push(ids.space_ref(&id));
        space_ids.push(id);
    }

    // One journal per subscription of the disjoint case, none appended to.
    let mut apart = Vec::new();
    for i in 0..SUBSCRIPTIONS {
        let key = format!("evbench-apart-{i}");
        journal::create(&mut api, &ids, &world_space, &key).await?;
        apart.push(json!([key]));
    }

    progress("events: latency, 1 subscription");
    let (mut events, reader) = measuring(&target, &signer).await?;
    let alone = latencies(&mut api, &spaces[0], &space_ids[0], &mut events, 0).await?;
    progress(&format!("events: latency, {SUBSCRIPTIONS} subscriptions"));
    let world_scope = [json!([])];
    let others = Subscriptions::open(&target, &signer, SUBSCRIPTIONS - 1, &world_scope).await?;
    // A fresh connection: opening the subscriptions may outlast labd's
    // allowance for an idle keep-alive connection (`--header-read-timeout-ms`,
    // 10 s), as it does against a debug build, and labd closes one idle
    // that long.
    let mut api = Api::connect(target.journal).await?;
    let loaded = latencies(
        &mut api,
        &spaces[0],
        &space_ids[0],
        &mut events,
        APPENDS as u64,
    )
    .await?;
    let drained = others.frames.load(Ordering::Relaxed);
    drop(others);
    reader.abort();
    // Every other subscription saw at least some of the timed appends.
    ensure!(
        drained >= (SUBSCRIPTIONS - 1) as u64,
        "the other subscriptions received {drained} frames"
    );
    let (alone_p50, alone_p99) = quantiles(&alone);
    let (p50, p99) = quantiles(&loaded);
    let mut rows = vec![
        Row::new(
            format!("event latency p50, append ack to event, {SUBSCRIPTIONS} subs"),
            ms(p50),
            format!("{} with 1 subscription", ms(alone_p50)),
            percent(p50.as_secs_f64() / alone_p50.as_secs_f64().max(1e-9)),
            "measured".into(),
        ),
        Row::new(
            format!("event latency p99, append ack to event, {SUBSCRIPTIONS} subs"),
            ms(p99),
            format!("{} with 1 subscription", ms(alone_p99)),
            percent(p99.as_secs_f64() / alone_p99.as_secs_f64().max(1e-9)),
            verdict("p99 < 10 ms", p99 < Duration::from_millis(10)),
        ),
    ];

    progress(&format!(
        "events: append throughput, c={APPENDERS}, {SUBSCRIPTIONS} subscriptions vs none"
    ));
    let (mut with, mut without, mut disjoint, mut native) = (
        Load::default(),
        Load::default(),
        Load::default(),
        Load::default(),
    );
    let (mut frames, mut bytes) = (0, 0);
    // The native server's CPU time and its frames while appends ran.
    let (mut native_cpu, mut native_frames) = (Duration::ZERO, 0);
    // Each case's name on stderr as it starts, for a profile of one case.
    for n in 1..=ROUNDS {
        let open = Subscriptions::open(&target, &signer, SUBSCRIPTIONS, &apart).await?;
        progress(&format!(
            "events: round {n}: subscriptions on other journals"
        ));
        disjoint.add(&Load::measure(&target, &spaces, round).await?);
        drop(open);
        let open = Subscriptions::open(&target, &signer, SUBSCRIPTIONS, &world_scope).await?;
        progress(&format!("events: round {n}: subscriptions read"));
        with.add(&Load::measure(&target, &spaces, round).await?);
        let (drained, length) = (
            open.frames.load(Ordering::Relaxed),
            open.bytes.load(Ordering::Relaxed),
        );
        drop(open);
        if drained == 0 {
            bail!("{SUBSCRIPTIONS} subscriptions received no frame during appends");
        }
        frames += drained;
        bytes += length;
        // The same frames, from a server that only sends them.
        let floor = NativeFanout::start(Flow {
            connections: SUBSCRIPTIONS.div_ceil(PER_CONNECTION),
            per_second: drained as f64 / round.as_secs_f64(),
            len: (length / drained) as usize,
            interval: EVENT_INTERVAL,
        })
        .await?;
        progress(&format!("events: round {n}: the native fan-out"));
        let (cpu, sent) = (floor.server_cpu()?, floor.frames.load(Ordering::Relaxed));
        native.add(&Load::measure(&target, &spaces, round).await?);
        native_cpu += floor.server_cpu()?.saturating_sub(cpu);
        let delivered = floor.frames.load(Ordering::Relaxed) - sent;
        ensure!(delivered > 0, "the native fan-out delivered no frame");
        native_frames += delivered;
        drop(floor);
        progress(&format!("events: round {n}: none open"));
        without.add(&Load::measure(&target, &spaces, round).await?);
    }
    let time = round.as_secs_f64() * f64::from(ROUNDS);
    let (with_rate, without_rate) = (with.appends as f64 / time, without.appends as f64 / time);
    let native_rate = native.appends as f64 / time;
    let (ratio, ceiling) = (with_rate / without_rate, native_rate / without_rate);
    // Where the frames alone keep the appends under 90% of none, the
    // nearest honest target is the same 90% of that ceiling.
    let verdict_with = if ceiling >= 0.9 {
        verdict(">= 90% of none", ratio >= 0.9)
    } else {
        verdict(
            &format!(
                ">= 90% of none, out of reach (ceiling {}); >= 90% of the ceiling",
                percent(ceiling)
            ),
            with_rate >= 0.9 * native_rate,
        )
    };
    rows.push(Row::new(
        format!("journal append c={APPENDERS}, {SUBSCRIPTIONS} subscriptions open, read"),
        format!("{with_rate:.0} appends/s"),
        format!("{without_rate:.0} appends/s with none open"),
        percent(ratio),
        verdict_with,
    ));
    rows.push(Row::new(
        format!(
            "  ceiling: journal append c={APPENDERS}, the same frames from a native WebSocket server"
        ),
        format!("{native_rate:.0} appends/s"),
        format!("{without_rate:.0} appends/s with none open"),
        percent(ceiling),
        format!(
            "measured: {:.0} frames/s of {} B over {} connections; labd's rate is {} of it",
            frames as f64 / time,
            bytes / frames.max(1),
            SUBSCRIPTIONS.div_ceil(PER_CONNECTION),
            percent(with_rate / native_rate.max(1e-9))
        ),
    ));
    let disjoint_rate = disjoint.appends as f64 / time;
    let apart_ratio = disjoint_rate / without_rate;
    rows.push(Row::new(
        format!("journal append c={APPENDERS}, {SUBSCRIPTIONS} subs open on other journals"),
        format!("{disjoint_rate:.0} appends/s"),
        format!("{without_rate:.0} appends/s with none open"),
        percent(apart_ratio),
        verdict(">= 90% of none", apart_ratio >= 0.9),
    ));
    let (with_labd, without_labd) = (with.labd_per_append(), without.labd_per_append());
    rows.push(Row::new(
        format!("labd CPU per append, {SUBSCRIPTIONS} subscriptions open"),
        format!("{with_labd:.0} us"),
        format!("{without_labd:.0} us with none open"),
        percent(with_labd / without_labd.max(1e-9)),
        format!(
            "measured: {:.0} frames read per append; the readers took {:.0} us of CPU per append",
            frames as f64 / with.appends.max(1) as f64,
            with.bench_per_append()
        ),
    ));
    // What sending a frame costs labd (its CPU per append beyond none's,
    // over the frames per append) and the native server.
    let labd_per_frame = (with_labd - without_labd) * with.appends as f64 / frames.max(1) as f64;
    let native_per_frame = native_cpu.as_secs_f64() * 1e6 / native_frames.max(1) as f64;
    rows.push(Row::new(
        "labd CPU per frame read, beyond its CPU with none open".to_string(),
        format!("{labd_per_frame:.2} us"),
        format!("{native_per_frame:.2} us by the native server"),
        percent(labd_per_frame / native_per_frame.max(1e-9)),
        "measured".into(),
    ));
    Ok(rows)
}
