//! One socket connection: a reader that checks each frame and starts its
//! call, calls running concurrently, and a writer that writes replies in
//! completion order and subscription frames as they wait; the reader and
//! the writer are two futures of the connection's one task (design.md,
//! "Sockets").
//!
//! Invariants:
//! - at most [`MAX_IN_FLIGHT`] calls of a connection are in flight, each
//!   with an `id` no other call in flight on it has;
//! - a call in flight holds its frame's bytes of the host-wide frame
//!   budget; a frame that does not fit is held, and nothing more is read
//!   from its connection, until it fits;
//! - a frame not written within [`Writing::reply_timeout`]
//!   (`--socket-reply-timeout-ms`, 30 s) is dropped and the connection
//!   closed (its client is not reading);
//! - on shutdown nothing more is read, calls in flight get
//!   [`SHUTDOWN_GRACE`], then the hub's `closed` frames and close 1001.

use super::call::{self, refusal};
use super::Sockets;
use crate::events::{Connection, Frames};
use crate::metrics::Metrics;
use crate::server::Listener;
use crate::service::Service;
use crate::verified::Verified;
use futures_util::stream::SplitSink;
use futures_util::{SinkExt, StreamExt};
use hyper::upgrade::Upgraded;
use hyper_util::rt::TokioIo;
use std::collections::HashSet;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::{mpsc, Semaphore};
use tokio::time::Instant;
use tokio_tungstenite::tungstenite::error::Error as WsError;
use tokio_tungstenite::tungstenite::protocol::frame::coding::{CloseCode, Data, OpCode};
use tokio_tungstenite::tungstenite::protocol::frame::Frame;
use tokio_tungstenite::tungstenite::protocol::{CloseFrame, Role, WebSocketConfig};
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::WebSocketStream;

/// The frame limit: 64 MiB plus 1 MiB of envelope headroom (WS.md
/// decision 9); over it the connection closes with 1009.
pub const MAX_FRAME: usize = 68_157_440;
/// Calls in flight per connection.
pub const MAX_IN_FLIGHT: u32 = 32;
/// Characters of a correlation ID.
pub const MAX_ID_CHARS: usize = 128;
/// Calls in flight at shutdown get this long to finish.
pub const SHUTDOWN_GRACE: Duration = Duration::from_secs(10);
/// The read buffer's size: tungstenite's default (128 KiB) would be held
/// by every idle socket; larger frames grow it as they arrive.
const READ_BUFFER: usize = 8 << 10;
/// Frames queued for the writer before the reader waits for it.
const OUTGOING_DEPTH: usize = 64;
/// After the service closes for a frame it refused, how long it keeps
/// reading (and discarding) what the client is still sending, so that the
/// client reads the close instead of a reset.
const LINGER: Duration = Duration::from_secs(5);

type Socket = WebSocketStream<TokioIo<Upgraded>>;

/// A call in flight: its instance's work, then its reply handed to the
/// writer.
type Call = std::pin::Pin<Box<dyn std::future::Future<Output = ()> + Send>>;

/// How a connection's writer paces and bounds its writes.
#[derive(Debug, Clone, Copy)]
pub struct Writing {
    /// Shortest time between two takes of the connection's subscription
    /// frames (`--socket-event-interval-ms`).
    pub event_interval: Duration,
    /// Longest wait for the client to take a frame
    /// (`--socket-reply-timeout-ms`).
    pub reply_timeout: Duration,
}

/// What the writer is given.
enum Out {
    Text(String),
    Close(CloseCode, &'static str),
}

/// A connection counted open in its service's metrics while this lives.
struct Open(Arc<Metrics>);

impl Open {
    fn counted(metrics: Arc<Metrics>) -> Open {
        metrics.socket_opened();
        Open(metrics)
    }
}

impl Drop for Open {
    fn drop(&mut self) {
        self.0.socket_closed();
    }
}

/// How reading ended.
enum Ending {
    /// The connection broke, or the writer gave up on it.
    Gone,
    /// The client closed; its close is echoed.
    ClientClosed,
    /// The service closes with this code and reason.
    Close(CloseCode, &'static str),
    Shutdown,
}

/// Serves one upgraded connection until it ends. `offered`: whether the
/// client offered the service's subprotocol.
pub async fn serve(
    service: Arc<Service>,
    sockets: Arc<Sockets>,
    upgraded: Upgraded,
    listener: Listener,
    offered: bool,
) {
    let config = WebSocketConfig::default()
        .read_buffer_size(READ_BUFFER)
        .max_message_size(Some(MAX_FRAME))
        .max_frame_size(Some(MAX_FRAME));
    let socket =
        WebSocketStream::from_raw_socket(TokioIo::new(upgraded), Role::Server, Some(config)).await;
    let (sink, mut stream) = socket.split();
    let conn = sockets.hub.connect();
    let _open = Open::counted(Arc::clone(&service.metrics));
    let (out, outgoing) = mpsc::channel(OUTGOING_DEPTH);
    // The writer runs in this task beside the reader, not in a task of its
    // own, and the two are polled as a pair: a reply handed over, or the
    // stream's one waker proxy waking both halves, then costs no second
    // task and no second worker thread woken for nothing on every call.
    let writer = write(
        sink,
        outgoing,
        Arc::clone(&conn),
        sockets.writing,
        Arc::clone(&service.metrics),
    );
    if !offered {
        let reason = "the subprotocol `coord` is required";
        let _ = out.try_send(Out::Close(CloseCode::Protocol, reason));
        drop(out);
        let _ = writer.await;
        return;
    }
    let reader = Reader {
        service,
        sockets,
        conn: Arc::clone(&conn),
        out,
        in_flight: Arc::new(Semaphore::new(MAX_IN_FLIGHT as usize)),
        ids: Arc::new(Mutex::new(HashSet::new())),
        verified: Arc::clone(&listener.verified),
    };
    let mut shutdown = listener.shutdown.clone();
    // Every sender the reading side holds is dropped when it ends, so the
    // writer ends once the calls still running have handed over their
    // replies (or, after a close, drops them).
    let reading = async move {
        let ending = reader.read(&mut stream, &mut shutdown).await;
        let lingers = match ending {
            Ending::Gone => false,
            Ending::ClientClosed => {
                // The next read writes tungstenite's echo of the client's close.
                let _ = tokio::time::timeout(Duration::from_secs(1), stream.next()).await;
                false
            }
            Ending::Close(code, reason) => {
                let _ = reader.out.send(Out::Close(code, reason)).await;
                true
            }
            Ending::Shutdown => {
                let all = reader.in_flight.acquire_many(MAX_IN_FLIGHT);
                if tokio::time::timeout(SHUTDOWN_GRACE, all).await.is_err() {
                    tracing::warn!("socket calls still in flight after the shutdown grace");
                }
                for frame in conn.shut() {
                    let _ = reader.out.send(Out::Text(frame)).await;
                }
                let _ = reader
                    .out
                    .send(Out::Close(CloseCode::Away, "the service is shutting down"))
                    .await;
                false
            }
        };
        drop(reader);
        (stream, lingers)
    };
    // A close is the last frame written; replies of calls still running
    // after it are dropped with the connection.
    let (sink, (stream, lingers)) = super::pair::join(writer, reading).await;
    if lingers {
        if let Ok(mut socket) = sink.reunite(stream) {
            linger(socket.get_mut()).await;
        }
    }
    drop(listener);
}

/// The reading side of one connection.
struct Reader {
    service: Arc<Service>,
    sockets: Arc<Sockets>,
    conn: Arc<Connection>,
    out: mpsc::Sender<Out>,
    in_flight: Arc<Semaphore>,
    /// IDs of the calls in flight.
    ids: Arc<Mutex<HashSet<String>>>,
    /// Signatures this connection's calls had verified.
    verified: Arc<Verified>,
}

impl Reader {
    async fn read(
        &self,
        stream: &mut futures_util::stream::SplitStream<Socket>,
        shutdown: &mut tokio::sync::watch::Receiver<bool>,
    ) -> Ending {
        let mut inline = None;
        let ending = self.read_frames(stream, shutdown, &mut inline).await;
        // Reading ended, not the call: it finishes in a task of its own.
        if let Some(call) = inline {
            tokio::spawn(call);
        }
        ending
    }

    /// Reads frames and starts their calls until reading ends. The latest
    /// call runs in `inline`, polled by this task beside the next read, as
    /// long as no other frame arrives: a lone call costs no task and no
    /// hand-over between threads. When another frame arrives, or before
    /// anything here waits, it moves to a task of its own.
    async fn read_frames(
        &self,
        stream: &mut futures_util::stream::SplitStream<Socket>,
        shutdown: &mut tokio::sync::watch::Receiver<bool>,
        inline: &mut Option<Call>,
    ) -> Ending {
        loop {
            let step = tokio::select! {
                biased;
                _ = shutdown.wait_for(|stop| *stop) => return Ending::Shutdown,
                _ = self.out.closed() => return Ending::Gone,
                message = stream.next() => Some(message),
                () = async { inline.as_mut().expect("guarded").await }, if inline.is_some() => None,
            };
            let Some(message) = step else {
                *inline = None;
                continue;
            };
            let text = match message {
                None | Some(Err(WsError::ConnectionClosed | WsError::AlreadyClosed)) => {
                    return Ending::Gone
                }
                Some(Err(WsError::Capacity(_))) => {
                    return Ending::Close(CloseCode::Size, "a frame is at most 68,157,440 bytes")
                }
                Some(Err(e)) => {
                    tracing::debug!(error = %e, "socket read failed");
                    return Ending::Gone;
                }
                Some(Ok(Message::Text(text))) => text,
                Some(Ok(Message::Binary(_))) => {
                    return Ending::Close(CloseCode::Unsupported, "frames are text")
                }
                Some(Ok(Message::Close(_))) => return Ending::ClientClosed,
                // Pings are answered by the protocol layer on the next read.
                Some(Ok(Message::Ping(_) | Message::Pong(_) | Message::Frame(_))) => continue,
            };
            let Some(id) = frame_id(text.as_str()) else {
                return Ending::Close(
                    CloseCode::Invalid,
                    "a frame is a JSON object with a non-empty string `id`",
                );
            };
            if let Some(call) = inline.take() {
                tokio::spawn(call);
            }
            let frame = Vec::from(bytes::Bytes::from(text));
            match self.start(id, frame, shutdown).await {
                Ok(call) => *inline = call,
                Err(ending) => return ending,
            }
        }
    }

    /// The call of `frame`, to be run; none when it was refused with a
    /// reply of its own.
    async fn start(
        &self,
        id: String,
        frame: Vec<u8>,
        shutdown: &mut tokio::sync::watch::Receiver<bool>,
    ) -> Result<Option<Call>, Ending> {
        let contract = self.service.loaded().identity.contract.clone();
        let refuse = |message: &str| Out::Text(refusal(&contract, &id, "invalid", message));
        if id.chars().count() > MAX_ID_CHARS {
            return self.send(refuse("`id` is at most 128 characters")).await;
        }
        let Ok(slot) = Arc::clone(&self.in_flight).try_acquire_owned() else {
            return self
                .send(refuse(
                    "the connection has too many calls in flight (at most 32)",
                ))
                .await;
        };
        if !self.ids.lock().unwrap().insert(id.clone()) {
            return self
                .send(refuse("`id` names a call in flight on this connection"))
                .await;
        }
        // Backpressure: the frame waits for its place in the budget, and
        // nothing more is read from this connection meanwhile.
        let held = tokio::select! {
            held = self.sockets.budget.hold(frame.len() as u64) => held,
            _ = shutdown.wait_for(|stop| *stop) => {
                self.ids.lock().unwrap().remove(&id);
                return Err(Ending::Shutdown);
            }
        };
        let service = Arc::clone(&self.service);
        let connection = self.conn.id();
        let ids = Arc::clone(&self.ids);
        let out = self.out.clone();
        let verified = Arc::clone(&self.verified);
        Ok(Some(Box::pin(async move {
            let reply = call::reply(&service, connection, verified, &id, frame).await;
            drop(held);
            ids.lock().unwrap().remove(&id);
            let _ = out.send(Out::Text(reply)).await;
            drop(slot);
        })))
    }

    /// Sends a reply the host gives itself; no call follows.
    async fn send(&self, out: Out) -> Result<Option<Call>, Ending> {
        match self.out.send(out).await {
            Ok(()) => Ok(None),
            Err(_) => Err(Ending::Gone),
        }
    }
}

/// The frame's `id` when it is a JSON object with a non-empty string
/// `id` (other members are skipped, not kept).
fn frame_id(text: &str) -> Option<String> {
    #[derive(serde::Deserialize)]
    struct Head<'a> {
        #[serde(borrow)]
        id: std::borrow::Cow<'a, str>,
    }
    let head: Head = serde_json::from_str(text).ok()?;
    (!head.id.is_empty()).then(|| head.id.into_owned())
}

/// Reads and discards what the client still sends, until it closes or
/// [`LINGER`] has passed.
async fn linger(io: &mut TokioIo<Upgraded>) {
    use tokio::io::AsyncReadExt;
    let mut discard = vec![0u8; 64 << 10];
    let drain = async { while matches!(io.read(&mut discard).await, Ok(n) if n > 0) {} };
    let _ = tokio::time::timeout(LINGER, drain).await;
}

/// Writes replies as they come and subscription frames as they wait,
/// until a close or until every sender is gone. Subscription frames are
/// taken at most once per `writing.event_interval`:
/// advances announced meanwhile coalesce in the hub's pending tables, one
/// event per journal per subscription. A reply is never held back; it
/// takes what is waiting by then along with it.
async fn write(
    mut sink: SplitSink<Socket, Message>,
    mut outgoing: mpsc::Receiver<Out>,
    conn: Arc<Connection>,
    writing: Writing,
    metrics: Arc<Metrics>,
) -> SplitSink<Socket, Message> {
    let Writing {
        event_interval: interval,
        reply_timeout,
    } = writing;
    // The writer does not wake for subscription frames before this.
    let mut next_take = Instant::now();
    loop {
        let waiting = async {
            tokio::time::sleep_until(next_take).await;
            conn.frames().await
        };
        let (frames, reply) = tokio::select! {
            out = outgoing.recv() => match out {
                // Subscription frames queued before a reply precede it:
                // `unsubscribe`'s `closed` frame comes before its reply.
                Some(Out::Text(text)) => {
                    let frames = conn.take_frames();
                    if !frames.is_empty() {
                        next_take = Instant::now() + interval;
                    }
                    (frames, Some(text))
                }
                Some(Out::Close(code, reason)) => {
                    let close = CloseFrame { code, reason: reason.into() };
                    let _ = tokio::time::timeout(
                        reply_timeout,
                        sink.send(Message::Close(Some(close))),
                    )
                    .await;
                    break;
                }
                None => break,
            },
            frames = waiting => {
                next_take = Instant::now() + interval;
                (frames, None)
            }
        };
        if let Err(stop) = write_frames(&mut sink, frames, reply, reply_timeout).await {
            match stop {
                Stop::Failed(e) => tracing::debug!(error = %e, "socket write failed"),
                Stop::TimedOut => {
                    metrics.socket_not_reading();
                    tracing::info!(
                        timeout_ms = reply_timeout.as_millis() as u64,
                        "a socket frame was not taken by its client in time: dropped, connection closed"
                    )
                }
            }
            return sink;
        }
    }
    let _ = tokio::time::timeout(Duration::from_secs(1), sink.close()).await;
    sink
}

/// Why writing stopped.
enum Stop {
    Failed(WsError),
    TimedOut,
}

/// Writes `frames`, then `reply`, in order with one flush after the last
/// (frames are buffered up to tungstenite's write buffer, not written one
/// by one), all within `timeout`: one clock for the batch, not one per
/// frame. Subscription frames go out as slices of their take's buffer,
/// each a whole text frame: their text is UTF-8 by construction
/// ([`Frames`]), so it is not checked again on the way out.
async fn write_frames(
    sink: &mut SplitSink<Socket, Message>,
    frames: Frames,
    reply: Option<String>,
    timeout: Duration,
) -> Result<(), Stop> {
    let writing = async {
        for frame in frames.into_slices() {
            let text = Frame::message(frame, OpCode::Data(Data::Text), true);
            sink.feed(Message::Frame(text)).await?;
        }
        if let Some(reply) = reply {
            sink.feed(Message::text(reply)).await?;
        }
        sink.flush().await
    };
    match tokio::time::timeout(timeout, writing).await {
        Ok(Ok(())) => Ok(()),
        Ok(Err(e)) => Err(Stop::Failed(e)),
        Err(_) => Err(Stop::TimedOut),
    }
}
