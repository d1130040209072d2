//! An S3 server of the test's own: the API over a directory (s3s-fs), on
//! a free loopback port, served from a thread of the test process. It can
//! be stopped (every connection closed) and started again on its port.

use std::net::{SocketAddr, TcpListener};
use std::path::{Path, PathBuf};
use std::thread::JoinHandle;

pub const BUCKET: &str = "lab-blobs";
const ACCESS_KEY: &str = "lab-test-access";
const SECRET_KEY: &str = "lab-test-secret";

pub struct S3Server {
    /// The server's directory: a bucket is a directory in it, an object a
    /// file under its bucket's, named by its key.
    pub root: PathBuf,
    pub address: SocketAddr,
    running: Option<(tokio::sync::oneshot::Sender<()>, JoinHandle<()>)>,
}

impl S3Server {
    /// A server over `root` (created) with an empty bucket [`BUCKET`].
    pub fn start(root: &Path) -> S3Server {
        std::fs::create_dir_all(root.join(BUCKET)).unwrap();
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let mut server = S3Server {
            root: root.to_path_buf(),
            address: listener.local_addr().unwrap(),
            running: None,
        };
        server.serve(listener);
        server
    }

    fn serve(&mut self, listener: TcpListener) {
        listener.set_nonblocking(true).unwrap();
        let root = self.root.clone();
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let thread = std::thread::spawn(move || {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap();
            runtime.block_on(async move {
                let service = {
                    let fs = s3s_fs::FileSystem::new(&root).unwrap();
                    let mut builder = s3s::service::S3ServiceBuilder::new(fs);
                    builder.set_auth(s3s::auth::SimpleAuth::from_single(ACCESS_KEY, SECRET_KEY));
                    builder.build()
                };
                let listener = tokio::net::TcpListener::from_std(listener).unwrap();
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
    }

    /// Stops serving: the listener and every connection are closed.
    pub fn stop(&mut self) {
        if let Some((stop, thread)) = self.running.take() {
            let _ = stop.send(());
            thread.join().unwrap();
        }
    }

    /// Serves again on the same port.
    pub fn restart(&mut self) {
        assert!(self.running.is_none(), "the server is running");
        let listener = TcpListener::bind(self.address).unwrap();
        self.serve(listener);
    }

    /// The environment a `labd` reaches this server with.
    pub fn env(&self) -> Vec<(String, String)> {
        [
            ("AWS_ENDPOINT_URL", format!("http://{}", self.address)),
            ("AWS_REGION", "us-east-1".to_string()),
            ("AWS_ACCESS_KEY_ID", ACCESS_KEY.to_string()),
            ("AWS_SECRET_ACCESS_KEY", SECRET_KEY.to_string()),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v))
        .collect()
    }

    /// The `--blobs` value naming the bucket.
    pub fn setting(&self) -> String {
        format!("s3://{BUCKET}")
    }

    /// The file holding the object `key`.
    pub fn object_file(&self, key: &str) -> PathBuf {
        self.root.join(BUCKET).join(key)
    }

    /// Objects under `prefix/` in the bucket.
    pub fn objects_under(&self, prefix: &str) -> usize {
        std::fs::read_dir(self.root.join(BUCKET).join(prefix))
            .map(|d| d.count())
            .unwrap_or(0)
    }

    /// Multipart uploads' parts not yet completed nor aborted.
    pub fn pending_parts(&self) -> usize {
        std::fs::read_dir(&self.root)
            .unwrap()
            .filter(|e| {
                e.as_ref()
                    .unwrap()
                    .file_name()
                    .to_string_lossy()
                    .starts_with(".upload_id-")
            })
            .count()
    }
}

impl Drop for S3Server {
    fn drop(&mut self) {
        self.stop();
    }
}
