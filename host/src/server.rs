//! HTTP/1.1 listeners with graceful shutdown.
//!
//! Shutdown: when `shutdown` fires, the accept loop stops, every open
//! connection is told to finish its in-flight request and close, and
//! `serve` returns once they all have (or the grace period ran out).

use hyper::body::Incoming;
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use hyper_util::server::graceful::GracefulShutdown;
use std::convert::Infallible;
use std::future::Future;
use std::time::Duration;
use tokio::net::TcpListener;
use tokio::sync::watch;

use crate::dispatch::HttpResponse;

/// Accepts connections on `listener` and answers each request with
/// `handler`, until `shutdown` turns true.
pub async fn serve<H, F>(
    listener: TcpListener,
    handler: H,
    mut shutdown: watch::Receiver<bool>,
    grace: Duration,
) where
    H: Fn(hyper::Request<Incoming>) -> F + Clone + Send + Sync + 'static,
    F: Future<Output = Result<HttpResponse, Infallible>> + Send + 'static,
{
    let graceful = GracefulShutdown::new();
    let http = hyper::server::conn::http1::Builder::new();
    loop {
        tokio::select! {
            accepted = listener.accept() => {
                let (stream, _) = match accepted {
                    Ok(accepted) => accepted,
                    Err(e) => {
                        tracing::warn!(error = %e, "accept failed");
                        continue;
                    }
                };
                let _ = stream.set_nodelay(true);
                let handler = handler.clone();
                let connection = http.serve_connection(TokioIo::new(stream), service_fn(handler));
                let connection = graceful.watch(connection);
                tokio::spawn(async move {
                    if let Err(e) = connection.await {
                        tracing::debug!(error = %e, "connection ended with an error");
                    }
                });
            }
            _ = shutdown.wait_for(|stop| *stop) => break,
        }
    }
    drop(listener);
    if tokio::time::timeout(grace, graceful.shutdown())
        .await
        .is_err()
    {
        tracing::warn!("grace period over with requests still in flight");
    }
}
