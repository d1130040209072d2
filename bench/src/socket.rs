//! The coordination service's socket binding: a signed `resolve` over the
//! socket against the same call over HTTP keep-alive connections, at one
//! and at 16 clients, in alternating rounds; and the memory labd holds per
//! idle socket against an idle HTTP keep-alive connection, and per
//! subscription opened on those sockets.

use crate::client::{get_head, Conn};
use crate::coord::{secret_key, world, Target};
use crate::events::{PER_CONNECTION, SUBSCRIPTIONS};
use crate::measure::{percent, progress, verdict, Row};
use anyhow::{ensure, Context, Result};
use futures_util::{SinkExt, StreamExt};
use lab_coord_auth::{issue_grant, Carriage, GrantFields, GrantKind, Principal, SigningKey};
use lab_coord_client::{Built, Request};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};
use tokio::net::TcpStream;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use tokio_tungstenite::tungstenite::Message;

/// Concurrent clients of each row.
const CLIENTS: [usize; 2] = [1, 16];
/// Alternating rounds per binding.
const ROUNDS: u32 = 3;
/// Idle connections whose memory is measured.
const IDLE: usize = 500;

/// Which binding carries a call.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Binding {
    Http,
    Socket,
}

/// Signs each call afresh (a proof is one attempt) as the world's root,
/// with a `read` grant on the whole world.
pub(crate) struct Signer {
    /// The world's name.
    pub world: String,
    pub audience: String,
    pub key: SigningKey,
    pub grants: Vec<lab_coord_auth::Grant>,
    prefix: u64,
    next: AtomicU64,
}

impl Signer {
    /// The development root key in `target`'s data directory, granting
    /// itself `read` on the world for an hour.
    pub(crate) async fn root(target: &Target) -> Result<Signer> {
        let world = world(target.operations).await?;
        let key_file = target.data_dir.join("coord").join("root.key");
        let text = std::fs::read_to_string(&key_file)
            .with_context(|| format!("read {}", key_file.display()))?;
        let root = SigningKey::from_bytes(&secret_key(&text)?);
        let grant = issue_grant(
            &root,
            &world,
            GrantFields {
                principal: Principal::of(&root),
                kind: GrantKind::Read,
                path: Vec::new(),
                valid_until: unix_now() + 3_600,
            },
            None,
        )?;
        Ok(Signer {
            world,
            audience: format!("http://{}", target.operations),
            key: root,
            grants: vec![grant],
            prefix: unix_now_nanos(),
            next: AtomicU64::new(0),
        })
    }

    /// A nonce no other call of this run carries.
    pub(crate) fn nonce(&self) -> String {
        let n = self.next.fetch_add(1, Ordering::Relaxed);
        format!("s{:016x}{n:012}", self.prefix)
    }

    fn carriage(&self, built: &Built) -> Result<Carriage> {
        let nonce = self.nonce();
        Ok(built.carriage(
            &self.key,
            self.grants.clone(),
            &nonce,
            unix_now(),
            &self.audience,
        )?)
    }
}

pub(crate) fn unix_now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}

pub(crate) fn unix_now_nanos() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(0)
}

pub async fn run(target: Target, round: Duration) -> Result<Vec<Row>> {
    progress("socket: setup");
    let addr = target.operations;
    let signer = Arc::new(Signer::root(&target).await?);
    let built = Arc::new(Request::new("resolve")?.path(["projects"]).build()?);

    let mut rows = Vec::new();
    for clients in CLIENTS {
        progress(&format!("socket: resolve, c={clients}"));
        let (mut http, mut socket) = (Calls::default(), Calls::default());
        for _ in 0..ROUNDS {
            for binding in [Binding::Http, Binding::Socket] {
                let (labd_before, bench_before) =
                    (crate::journal::labd_cpu_time(target.pid)?, bench_cpu()?);
                let done = load(addr, &signer, &built, binding, clients, round).await?;
                let sum = if binding == Binding::Http {
                    &mut http
                } else {
                    &mut socket
                };
                sum.done += done;
                sum.time += round;
                sum.labd += crate::journal::labd_cpu_time(target.pid)?.saturating_sub(labd_before);
                sum.bench += bench_cpu()?.saturating_sub(bench_before);
            }
        }
        let (socket_rate, http_rate) = (socket.rate(), http.rate());
        rows.push(Row::new(
            format!("coord resolve over the socket, signed, c={clients}"),
            format!("{socket_rate:.0} calls/s"),
            format!("{http_rate:.0} req/s over HTTP keep-alive"),
            percent(socket_rate / http_rate),
            format!(
                "{}; labd CPU per call {:.0} us, over HTTP {:.0} us; the clients' {:.0} us, over HTTP {:.0} us",
                verdict(">= 100% of HTTP", socket_rate >= http_rate),
                socket.per_call(socket.labd),
                http.per_call(http.labd),
                socket.per_call(socket.bench),
                http.per_call(http.bench)
            ),
        ));
    }

    progress(&format!("socket: memory of {IDLE} idle connections"));
    let memory = idle_memory(addr, target.pid, &signer).await?;
    rows.push(Row::new(
        format!("labd memory per idle socket, {IDLE} open"),
        format!("{:.1} KiB", memory.socket_kib),
        format!(
            "{:.1} KiB per idle HTTP keep-alive connection",
            memory.http_kib
        ),
        percent(memory.socket_kib / memory.http_kib.max(0.1)),
        "measured (sockets first, so reuse favours HTTP)".into(),
    ));
    rows.push(Row::new(
        format!(
            "labd memory per open subscription, {SUBSCRIPTIONS} open, {PER_CONNECTION} a socket"
        ),
        format!("{:.0} B", memory.subscription_bytes),
        format!("{:.0} B per idle socket", memory.socket_kib * 1024.0),
        percent(memory.subscription_bytes / (memory.socket_kib * 1024.0).max(1.0)),
        "measured (empty pending tables; a full one holds 1,024 journals)".into(),
    ));
    Ok(rows)
}

/// One binding's calls over the rounds of a row.
#[derive(Default)]
struct Calls {
    done: u64,
    time: Duration,
    /// CPU time of labd and of this process (the clients) meanwhile.
    labd: Duration,
    bench: Duration,
}

impl Calls {
    fn rate(&self) -> f64 {
        self.done as f64 / self.time.as_secs_f64()
    }

    /// Microseconds of `cpu` per call.
    fn per_call(&self, cpu: Duration) -> f64 {
        cpu.as_secs_f64() * 1e6 / self.done.max(1) as f64
    }
}

/// Calls answered by `clients` clients, each calling in turn, over `time`.
async fn load(
    addr: SocketAddr,
    signer: &Arc<Signer>,
    built: &Arc<Built>,
    binding: Binding,
    clients: usize,
    time: Duration,
) -> Result<u64> {
    let mut tasks = Vec::new();
    for _ in 0..clients {
        let (signer, built) = (Arc::clone(signer), Arc::clone(built));
        tasks.push(tokio::spawn(async move {
            match binding {
                Binding::Http => http_client(addr, &signer, &built, time).await,
                Binding::Socket => socket_client(addr, &signer, &built, time).await,
            }
        }));
    }
    let mut done = 0;
    for task in tasks {
        done += task.await??;
    }
    Ok(done)
}

async fn http_client(
    addr: SocketAddr,
    signer: &Signer,
    built: &Built,
    time: Duration,
) -> Result<u64> {
    let mut conn = Conn::connect(addr).await?;
    let deadline = Instant::now() + time;
    let mut done = 0;
    while Instant::now() < deadline {
        let auth = signer.carriage(built)?.to_header();
        let head = format!(
            "GET {} HTTP/1.1\r\nhost: {addr}\r\nsvc-auth: {auth}\r\n\r\n",
            built.target
        );
        let response = conn.exchange(head.as_bytes(), &[], false, None).await?;
        ensure!(
            response.status == 200,
            "resolve answered {}",
            response.status
        );
        done += 1;
    }
    Ok(done)
}

pub(crate) type Socket = tokio_tungstenite::WebSocketStream<TcpStream>;

pub(crate) async fn open_socket(addr: SocketAddr) -> Result<Socket> {
    let stream = TcpStream::connect(addr).await?;
    stream.set_nodelay(true)?;
    let mut request = format!("ws://{addr}/v1/ws").into_client_request()?;
    request
        .headers_mut()
        .insert("sec-websocket-protocol", "coord".parse()?);
    let (socket, _) = tokio_tungstenite::client_async(request, stream).await?;
    Ok(socket)
}

async fn socket_client(
    addr: SocketAddr,
    signer: &Signer,
    built: &Built,
    time: Duration,
) -> Result<u64> {
    let mut socket = open_socket(addr).await?;
    let deadline = Instant::now() + time;
    let mut done = 0u64;
    while Instant::now() < deadline {
        let carriage = signer.carriage(built)?;
        let envelope = built.envelope(&done.to_string(), &carriage)?;
        socket.send(Message::text(envelope.to_string())).await?;
        let reply = loop {
            match socket.next().await.context("the socket closed")?? {
                Message::Text(text) => break text,
                Message::Ping(_) | Message::Pong(_) => continue,
                other => anyhow::bail!("unexpected frame {other:?}"),
            }
        };
        ensure!(
            reply.as_str().contains("\"status\":\"ok\""),
            "resolve replied {reply}"
        );
        done += 1;
    }
    socket.close(None).await.ok();
    Ok(done)
}

/// This process's CPU time so far: the clients' (user and system).
fn bench_cpu() -> Result<Duration> {
    crate::journal::cpu_time("/proc/self/stat")
}

/// labd's resident memory in KiB.
fn rss_kib(pid: u32) -> Result<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status"))?;
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .context("VmRSS in /proc/<pid>/status")
}

/// What labd's resident memory grew by.
struct Memory {
    /// KiB per idle socket.
    socket_kib: f64,
    /// KiB per idle HTTP keep-alive connection that answered one request.
    http_kib: f64,
    /// Bytes per subscription opened on the idle sockets.
    subscription_bytes: f64,
}

/// labd's resident memory per idle socket, per subscription opened on
/// those sockets, and per idle HTTP keep-alive connection.
async fn idle_memory(addr: SocketAddr, pid: u32, signer: &Signer) -> Result<Memory> {
    let settle = Duration::from_millis(500);
    let before = rss_kib(pid)?;
    let mut sockets = Vec::new();
    for _ in 0..IDLE {
        sockets.push(open_socket(addr).await?);
    }
    tokio::time::sleep(settle).await;
    let idle = rss_kib(pid)?;
    let socket_kib = idle.saturating_sub(before) as f64 / IDLE as f64;
    crate::events::subscribe_idle(&mut sockets, signer).await?;
    tokio::time::sleep(settle).await;
    let subscription_bytes =
        rss_kib(pid)?.saturating_sub(idle) as f64 * 1024.0 / SUBSCRIPTIONS as f64;
    for mut socket in sockets {
        socket.close(None).await.ok();
    }
    tokio::time::sleep(settle).await;
    let before = rss_kib(pid)?;
    let mut conns = Vec::new();
    for _ in 0..IDLE {
        let mut conn = Conn::connect(addr).await?;
        conn.exchange(&get_head(addr, "/livez"), &[], false, None)
            .await?;
        conns.push(conn);
    }
    tokio::time::sleep(settle).await;
    let http_kib = rss_kib(pid)?.saturating_sub(before) as f64 / IDLE as f64;
    drop(conns);
    Ok(Memory {
        socket_kib,
        http_kib,
        subscription_bytes,
    })
}
