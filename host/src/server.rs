//! HTTP/1.1 listeners: their limits and graceful shutdown.
//!
//! Limits (design.md, "Limits" 1 and 2): a client has `header_read_timeout`
//! to send each request head; a listener serves at most `connections` at
//! once, answers up to as many more with the listener's refusal (503
//! `unavailable`, `Retry-After`) and closes them, and beyond that stops
//! accepting until a connection closes.
//!
//! Shutdown: when `shutdown` fires, the accept loop stops, every open
//! connection is told to finish its in-flight request and close, and
//! `serve` returns once they all have (or the grace period ran out).
//!
//! A connection upgraded to a socket keeps its places in both counts for
//! as long as the socket lives (its request carries them, [`Listener`]),
//! and learns of the shutdown the same way.

use hyper::body::Incoming;
use hyper::service::service_fn;
use hyper_util::rt::{TokioIo, TokioTimer};
use std::convert::Infallible;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;
use tokio::net::TcpListener;
use tokio::sync::{watch, OwnedSemaphorePermit, Semaphore};

use crate::dispatch::HttpResponse;
use crate::verified::Verified;

/// The bounds of one listener.
#[derive(Debug, Clone, Copy)]
pub struct ListenerLimits {
    /// Connections served at once.
    pub connections: u32,
    pub header_read_timeout: Duration,
}

/// What a request learns of its connection's listener: put in its
/// extensions, so that an upgraded connection can outlive hyper's.
#[derive(Clone)]
pub struct Listener {
    /// The connection's places in the listener's counts; held by every
    /// clone, so a socket holding one keeps them.
    pub slot: Arc<ConnectionSlot>,
    pub shutdown: watch::Receiver<bool>,
    /// The signatures the connection's requests had verified.
    pub verified: Arc<Verified>,
}

/// A connection's places in its listener's counts.
pub struct ConnectionSlot {
    _open: OwnedSemaphorePermit,
    _served: Option<OwnedSemaphorePermit>,
}

/// Accepts connections on `listener` and answers each request with
/// `handler` (or, past the connection limit, with `refusal`), until
/// `shutdown` turns true.
pub async fn serve<H, F, R>(
    listener: TcpListener,
    handler: H,
    refusal: R,
    limits: ListenerLimits,
    mut shutdown: watch::Receiver<bool>,
    grace: Duration,
) where
    H: Fn(hyper::Request<Incoming>) -> F + Clone + Send + Sync + 'static,
    F: Future<Output = Result<HttpResponse, Infallible>> + Send + 'static,
    R: Fn() -> HttpResponse + Clone + Send + Sync + 'static,
{
    let mut http = hyper::server::conn::http1::Builder::new();
    http.timer(TokioTimer::new())
        .header_read_timeout(limits.header_read_timeout);
    let mut refusing = http.clone();
    refusing.keep_alive(false);
    // Every open connection holds one of `open`; a served one also holds
    // one of `served`.
    let all = 2 * limits.connections;
    let served = Arc::new(Semaphore::new(limits.connections as usize));
    let open = Arc::new(Semaphore::new(all as usize));
    loop {
        let slot = tokio::select! {
            slot = Arc::clone(&open).acquire_owned() => slot.expect("never closed"),
            _ = shutdown.wait_for(|stop| *stop) => break,
        };
        let accepted = tokio::select! {
            accepted = listener.accept() => accepted,
            _ = shutdown.wait_for(|stop| *stop) => break,
        };
        let (stream, _) = match accepted {
            Ok(accepted) => accepted,
            Err(e) => {
                tracing::warn!(error = %e, "accept failed");
                continue;
            }
        };
        let _ = stream.set_nodelay(true);
        let io = TokioIo::new(stream);
        let permit = Arc::clone(&served).try_acquire_owned().ok();
        let builder = if permit.is_some() { &http } else { &refusing };
        let context = Listener {
            slot: Arc::new(ConnectionSlot {
                _open: slot,
                _served: permit,
            }),
            shutdown: shutdown.clone(),
            verified: Arc::default(),
        };
        let serving = context.slot._served.is_some();
        let handler = handler.clone();
        let refusal = refusal.clone();
        let request_context = context.clone();
        let respond = move |mut request: hyper::Request<Incoming>| {
            request.extensions_mut().insert(request_context.clone());
            let answer = serving.then(|| handler(request));
            let refusal = refusal.clone();
            async move {
                match answer {
                    Some(answer) => answer.await,
                    None => Ok::<_, Infallible>(refusal()),
                }
            }
        };
        let connection = builder
            .serve_connection(io, service_fn(respond))
            .with_upgrades();
        let mut stop = context.shutdown.clone();
        tokio::spawn(async move {
            let mut connection = std::pin::pin!(connection);
            let outcome = tokio::select! {
                outcome = connection.as_mut() => outcome,
                _ = async { let _ = stop.wait_for(|stop| *stop).await; } => {
                    connection.as_mut().graceful_shutdown();
                    connection.await
                }
            };
            if let Err(e) = outcome {
                tracing::debug!(error = %e, "connection ended with an error");
            }
            drop(context);
        });
    }
    drop(listener);
    // Every connection, and every socket, gives its place back when done.
    if tokio::time::timeout(grace, open.acquire_many(all))
        .await
        .is_err()
    {
        tracing::warn!("grace period over with requests still in flight");
    }
}
