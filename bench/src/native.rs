//! The baseline server: plain hyper HTTP/1.1 on `127.0.0.1:0`, answering
//! fixed paths with bytes held in memory and the headers `labd` sent for
//! them. No component, no store: what is left of a `labd` request once the
//! component is taken away.
//!
//! It runs on its own threads with its own runtime, as `labd` does in its
//! own process, so the client's runtime and the server's never share a
//! worker.

use anyhow::{Context, Result};
use bytes::Bytes;
use http_body_util::Full;
use hyper::header::{HeaderName, HeaderValue};
use hyper::{Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use std::collections::HashMap;
use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;
use std::thread::JoinHandle;
use tokio::sync::oneshot;

/// What the server answers.
pub struct Routes {
    /// Path → body.
    pub bodies: HashMap<String, Bytes>,
    /// Headers of every answer; hyper adds `date` and `content-length`.
    pub headers: Vec<(HeaderName, HeaderValue)>,
}

/// The running server; stopped on drop.
pub struct Native {
    pub addr: SocketAddr,
    stop: Option<oneshot::Sender<()>>,
    thread: Option<JoinHandle<()>>,
}

impl Native {
    /// Binds, then serves `routes` on a runtime of `threads` workers.
    pub fn start(routes: Routes, threads: usize) -> Result<Native> {
        let listener =
            std::net::TcpListener::bind("127.0.0.1:0").context("bind the native server")?;
        listener.set_nonblocking(true)?;
        let addr = listener.local_addr()?;
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(threads)
            .thread_name("native")
            .enable_all()
            .build()
            .context("start the native server's runtime")?;
        let (stop, stopped) = oneshot::channel();
        let thread = std::thread::Builder::new()
            .name("native-accept".into())
            .spawn(move || {
                runtime.block_on(async move {
                    match tokio::net::TcpListener::from_std(listener) {
                        Ok(listener) => accept(listener, Arc::new(routes), stopped).await,
                        Err(e) => eprintln!("lab-bench: native server: {e}"),
                    }
                });
                // Dropping the runtime here, outside any async context,
                // ends every connection task.
            })?;
        Ok(Native {
            addr,
            stop: Some(stop),
            thread: Some(thread),
        })
    }
}

impl Drop for Native {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

async fn accept(
    listener: tokio::net::TcpListener,
    routes: Arc<Routes>,
    mut stopped: oneshot::Receiver<()>,
) {
    let http = hyper::server::conn::http1::Builder::new();
    loop {
        let stream = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok((stream, _)) => stream,
                Err(e) => {
                    eprintln!("lab-bench: native server: accept: {e}");
                    continue;
                }
            },
            _ = &mut stopped => return,
        };
        let _ = stream.set_nodelay(true);
        let routes = Arc::clone(&routes);
        let service =
            hyper::service::service_fn(move |request| answer(Arc::clone(&routes), request));
        let connection = http.serve_connection(TokioIo::new(stream), service);
        tokio::spawn(async move {
            let _ = connection.await;
        });
    }
}

async fn answer<B>(
    routes: Arc<Routes>,
    request: Request<B>,
) -> Result<Response<Full<Bytes>>, Infallible> {
    let mut response = match routes.bodies.get(request.uri().path()) {
        Some(body) => Response::new(Full::new(body.clone())),
        None => {
            let mut response = Response::new(Full::new(Bytes::new()));
            *response.status_mut() = StatusCode::NOT_FOUND;
            response
        }
    };
    let headers = response.headers_mut();
    for (name, value) in &routes.headers {
        headers.append(name.clone(), value.clone());
    }
    Ok(response)
}
