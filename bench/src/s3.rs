//! The S3 rows' setup: an S3 server over a scratch directory (s3s-fs, on a
//! loopback port, in a thread of the bench) and a second labd keeping its
//! blobs in its bucket.

use crate::labd::Labd;
use anyhow::{Context, Result};
use std::net::TcpListener;
use std::path::Path;

const BUCKET: &str = "lab-bench";
const ACCESS_KEY: &str = "lab-bench-access";
const SECRET_KEY: &str = "lab-bench-secret";

/// An S3 server, stopped (its runtime dropped) on drop.
pub struct Server {
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
    env: Vec<(String, String)>,
}

impl Server {
    /// Serves `root` (created, with the bucket) on a free loopback port.
    pub fn start(root: &Path) -> Result<Server> {
        std::fs::create_dir_all(root.join(BUCKET)).context("the S3 server's directory")?;
        let listener = TcpListener::bind("127.0.0.1:0")?;
        listener.set_nonblocking(true)?;
        let address = listener.local_addr()?;
        let fs = s3s_fs::FileSystem::new(root).map_err(|e| anyhow::anyhow!("s3s-fs: {e:?}"))?;
        let service = {
            let mut builder = s3s::service::S3ServiceBuilder::new(fs);
            builder.set_auth(s3s::auth::SimpleAuth::from_single(ACCESS_KEY, SECRET_KEY));
            builder.build()
        };
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let thread = std::thread::spawn(move || {
            let runtime = tokio::runtime::Builder::new_multi_thread()
                .worker_threads(1)
                .enable_all()
                .build()
                .expect("the S3 server's runtime");
            runtime.block_on(async move {
                let listener = tokio::net::TcpListener::from_std(listener).expect("listener");
                let mut stopped = std::pin::pin!(stopped);
                loop {
                    let socket = tokio::select! {
                        accepted = listener.accept() => match accepted {
                            Ok((socket, _)) => socket,
                            Err(_) => continue,
                        },
                        _ = stopped.as_mut() => break,
                    };
                    // Small answers must not wait out a delayed ACK.
                    let _ = socket.set_nodelay(true);
                    let service = service.clone();
                    tokio::spawn(async move {
                        let _ = hyper::server::conn::http1::Builder::new()
                            .serve_connection(hyper_util::rt::TokioIo::new(socket), service)
                            .await;
                    });
                }
            });
        });
        let env = [
            ("AWS_ENDPOINT_URL", format!("http://{address}")),
            ("AWS_REGION", "us-east-1".to_string()),
            ("AWS_ACCESS_KEY_ID", ACCESS_KEY.to_string()),
            ("AWS_SECRET_ACCESS_KEY", SECRET_KEY.to_string()),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v))
        .collect();
        Ok(Server {
            stop: Some(stop),
            thread: Some(thread),
            env,
        })
    }

    /// A labd (bytes rows only matter) whose blobs are in the bucket.
    pub fn labd(&self, binary: &Path, scratch: &Path) -> Result<Labd> {
        Labd::start_with_env(
            binary,
            scratch,
            &["--blobs".into(), format!("s3://{BUCKET}").into()],
            &self.env,
        )
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}
