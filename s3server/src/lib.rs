//! An S3 server over a directory: the S3 API of `s3s`, its objects files
//! of `s3s-fs`, on a loopback port, served from a thread of the caller's
//! process with one set of credentials. It can be stopped (the listener
//! and every connection closed) and started again on its port.
//!
//! The directory's layout is `s3s-fs`'s: a bucket is a directory, an
//! object a file under its bucket's named by its key, and the parts of a
//! multipart upload in progress files named `.upload_id-*` at the top.

use std::io;
use std::net::{SocketAddr, TcpListener};
use std::path::{Path, PathBuf};
use std::thread::JoinHandle;

/// The credentials every server accepts, and only them.
pub const ACCESS_KEY: &str = "lab-s3-access";
pub const SECRET_KEY: &str = "lab-s3-secret";
/// The region clients are told; the server accepts any.
pub const REGION: &str = "us-east-1";

/// A server, stopped on drop.
pub struct S3Server {
    pub root: PathBuf,
    pub bucket: String,
    pub address: SocketAddr,
    running: Option<(tokio::sync::oneshot::Sender<()>, JoinHandle<()>)>,
}

impl S3Server {
    /// Serves `root` (created, with the bucket `bucket`) on `address`;
    /// port 0 picks a free one.
    pub fn start(root: &Path, bucket: &str, address: SocketAddr) -> io::Result<S3Server> {
        std::fs::create_dir_all(root.join(bucket))?;
        let listener = TcpListener::bind(address)?;
        let mut server = S3Server {
            address: listener.local_addr()?,
            root: root.to_path_buf(),
            bucket: bucket.to_string(),
            running: None,
        };
        server.serve(listener)?;
        Ok(server)
    }

    fn serve(&mut self, listener: TcpListener) -> io::Result<()> {
        listener.set_nonblocking(true)?;
        let service = {
            let fs = s3s_fs::FileSystem::new(&self.root)
                .map_err(|e| io::Error::other(format!("{e:?}")))?;
            let mut builder = s3s::service::S3ServiceBuilder::new(fs);
            builder.set_auth(s3s::auth::SimpleAuth::from_single(ACCESS_KEY, SECRET_KEY));
            builder.build()
        };
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .thread_name("lab-s3server")
            .enable_all()
            .build()?;
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let thread = std::thread::spawn(move || {
            runtime.block_on(async move {
                let listener = tokio::net::TcpListener::from_std(listener).expect("a listener");
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
            // The runtime drops here with every connection's task.
        });
        self.running = Some((stop, thread));
        Ok(())
    }

    /// Stops serving: the listener and every connection are closed.
    pub fn stop(&mut self) {
        if let Some((stop, thread)) = self.running.take() {
            let _ = stop.send(());
            let _ = thread.join();
        }
    }

    /// Serves again on the same port.
    pub fn restart(&mut self) -> io::Result<()> {
        assert!(self.running.is_none(), "the server is running");
        let listener = TcpListener::bind(self.address)?;
        self.serve(listener)
    }

    /// The standard AWS environment that reaches this server.
    pub fn env(&self) -> Vec<(String, String)> {
        [
            ("AWS_ENDPOINT_URL", format!("http://{}", self.address)),
            ("AWS_REGION", REGION.to_string()),
            ("AWS_ACCESS_KEY_ID", ACCESS_KEY.to_string()),
            ("AWS_SECRET_ACCESS_KEY", SECRET_KEY.to_string()),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v))
        .collect()
    }

    /// The `--blobs` value of `labd` naming the bucket.
    pub fn blobs_setting(&self) -> String {
        format!("s3://{}", self.bucket)
    }

    /// The file holding the object `key`.
    pub fn object_file(&self, key: &str) -> PathBuf {
        self.root.join(&self.bucket).join(key)
    }

    /// Objects directly under `prefix/` in the bucket.
    pub fn objects_under(&self, prefix: &str) -> usize {
        std::fs::read_dir(self.root.join(&self.bucket).join(prefix))
            .map(|d| d.count())
            .unwrap_or(0)
    }

    /// Multipart uploads' parts neither completed nor aborted.
    pub fn pending_parts(&self) -> usize {
        std::fs::read_dir(&self.root)
            .map(|d| {
                d.flatten()
                    .filter(|e| e.file_name().to_string_lossy().starts_with(".upload_id-"))
                    .count()
            })
            .unwrap_or(0)
    }
}

impl Drop for S3Server {
    fn drop(&mut self) {
        self.stop();
    }
}
