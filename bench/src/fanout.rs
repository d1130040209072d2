//! The floor under the event fan-out's cost: a plain WebSocket server, with
//! no hub, no pending tables and no frame building, that sends prepared
//! frames of the size and at the rate labd's subscriptions received, to
//! readers like the bench's subscribers, on as many connections.
//!
//! What it costs the machine (its sends over loopback, the readers'
//! receives and parsing of frames) is what any fan-out of those frames
//! costs; the journal's append rate beside it is the ceiling for the
//! append rate with subscriptions open.

use anyhow::{Context, Result};
use futures_util::{SinkExt, StreamExt};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinHandle;
use tokio_tungstenite::tungstenite::{Message, Utf8Bytes};

/// The frames to send: `per_second` frames of `len` bytes in all, over
/// `connections`, each connection sending its share in batches one
/// `interval` apart with one flush each (as labd's writers do).
pub struct Flow {
    pub connections: usize,
    pub per_second: f64,
    pub len: usize,
    pub interval: Duration,
}

/// The name of the server's threads, by which [`NativeFanout::server_cpu`]
/// finds them.
const SERVER_THREAD: &str = "native-fanout";

/// The server (on a runtime of its own, two workers like labd's) and its
/// readers (on the caller's runtime). Dropping it stops both.
pub struct NativeFanout {
    runtime: Option<tokio::runtime::Runtime>,
    stop: Arc<AtomicBool>,
    readers: Vec<JoinHandle<()>>,
    /// Frames the readers received.
    pub frames: Arc<AtomicU64>,
}

impl NativeFanout {
    pub async fn start(flow: Flow) -> Result<NativeFanout> {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .thread_name(SERVER_THREAD)
            .enable_all()
            .build()?;
        let listener =
            std::net::TcpListener::bind("127.0.0.1:0").context("bind the native fan-out server")?;
        listener.set_nonblocking(true)?;
        let addr = listener.local_addr()?;
        let stop = Arc::new(AtomicBool::new(false));
        let frame: Utf8Bytes = "x".repeat(flow.len.max(1)).into();
        let per_take =
            flow.per_second * flow.interval.as_secs_f64() / flow.connections.max(1) as f64;
        let server_stop = Arc::clone(&stop);
        let connections = flow.connections;
        runtime.spawn(async move {
            let Ok(listener) = TcpListener::from_std(listener) else {
                return;
            };
            for _ in 0..connections {
                let Ok((stream, _)) = listener.accept().await else {
                    return;
                };
                let (frame, stop) = (frame.clone(), Arc::clone(&server_stop));
                tokio::spawn(send(stream, frame, per_take, flow.interval, stop));
            }
        });
        let frames = Arc::new(AtomicU64::new(0));
        let mut readers = Vec::new();
        for _ in 0..connections {
            let stream = TcpStream::connect(addr).await?;
            stream.set_nodelay(true)?;
            let (mut socket, _) =
                tokio_tungstenite::client_async(format!("ws://{addr}/"), stream).await?;
            let frames = Arc::clone(&frames);
            readers.push(tokio::spawn(async move {
                while let Some(Ok(message)) = socket.next().await {
                    // Parsed as the bench's subscribers parse nothing: they
                    // only count, so this only counts.
                    if matches!(message, Message::Text(_)) {
                        frames.fetch_add(1, Ordering::Relaxed);
                    }
                }
            }));
        }
        Ok(NativeFanout {
            runtime: Some(runtime),
            stop,
            readers,
            frames,
        })
    }

    /// The CPU time the server's threads (not its readers) spent so far.
    pub fn server_cpu(&self) -> Result<Duration> {
        crate::journal::threads_time("/proc/self", SERVER_THREAD)
    }
}

/// One connection's sender: every `interval`, the frames due by then
/// (`per_take` on average), one flush.
async fn send(
    stream: TcpStream,
    frame: Utf8Bytes,
    per_take: f64,
    interval: Duration,
    stop: Arc<AtomicBool>,
) {
    let _ = stream.set_nodelay(true);
    let Ok(mut socket) = tokio_tungstenite::accept_async(stream).await else {
        return;
    };
    let mut ticks = tokio::time::interval(interval);
    let mut owed = 0.0;
    while !stop.load(Ordering::Relaxed) {
        ticks.tick().await;
        owed += per_take;
        while owed >= 1.0 {
            if socket.feed(Message::Text(frame.clone())).await.is_err() {
                return;
            }
            owed -= 1.0;
        }
        if socket.flush().await.is_err() {
            return;
        }
    }
}

impl Drop for NativeFanout {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        for reader in &self.readers {
            reader.abort();
        }
        if let Some(runtime) = self.runtime.take() {
            runtime.shutdown_background();
        }
    }
}
