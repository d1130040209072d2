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

use hyper::body::Incoming;
use hyper::service::service_fn;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::server::graceful::GracefulShutdown;
use std::convert::Infallible;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;
use tokio::net::TcpListener;
use tokio::sync::{watch, Semaphore};

use crate::dispatch::HttpResponse;

/// The bounds of one listener.
#[derive(Debug, Clone, Copy)]
pub struct ListenerLimits {
    /// Connections served at once.
    pub connections: u32,
    pub header_read_timeout: Duration,
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
    let graceful = GracefulShutdown::new();
    let mut http = hyper::server::conn::http1::Builder::new();
    http.timer(TokioTimer::new())
        .header_read_timeout(limits.header_read_timeout);
    let mut refusing = http.clone();
    refusing.keep_alive(false);
    // Every open connection holds one of `open`; a served one also holds
    // one of `served`.
    let served = Arc::new(Semaphore::new(limits.connections as usize));
    let open = Arc::new(Semaphore::new(2 * limits.connections as usize));
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
        let connection = match Arc::clone(&served).try_acquire_owned() {
            Ok(permit) => {
                let handler = handler.clone();
                let connection = http.serve_connection(io, service_fn(handler));
                let connection = graceful.watch(connection);
                Box::pin(async move {
                    let outcome = connection.await;
                    drop(permit);
                    outcome
                }) as std::pin::Pin<Box<dyn Future<Output = _> + Send>>
            }
            Err(_) => {
                let refusal = refusal.clone();
                let refuse = move |_| {
                    let response = refusal();
                    async move { Ok::<_, Infallible>(response) }
                };
                Box::pin(graceful.watch(refusing.serve_connection(io, service_fn(refuse))))
            }
        };
        tokio::spawn(async move {
            if let Err(e) = connection.await {
                tracing::debug!(error = %e, "connection ended with an error");
            }
            drop(slot);
        });
    }
    drop(listener);
    if tokio::time::timeout(grace, graceful.shutdown())
        .await
        .is_err()
    {
        tracing::warn!("grace period over with requests still in flight");
    }
}
