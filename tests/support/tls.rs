//! A test-only TLS terminator in front of a `labd` operations listener, as
//! a deployment's fronting proxy: it accepts TLS on a loopback port with
//! the committed test certificate (`tests/fixtures/tls/`), strips the
//! external mount [`MOUNT`] from the request's target, and forwards to
//! `labd`. After the rewritten head, bytes pass through unchanged both
//! ways, so an upgraded socket passes too.
//!
//! One request per connection is rewritten (every `labctl` request says
//! `Connection: close`). A target outside the mount is answered 404 by the
//! terminator itself, without `Lab-Service`, as a proxy would.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio_rustls::rustls::pki_types::pem::PemObject;
use tokio_rustls::rustls::pki_types::{CertificateDer, PrivateKeyDer};
use tokio_rustls::rustls::ServerConfig;
use tokio_rustls::TlsAcceptor;

/// The external mount of the operations endpoint.
pub const MOUNT: &str = "/api/operations";

/// The longest request head the terminator reads before forwarding.
const MAX_HEAD: usize = 64 * 1024;

/// A committed TLS fixture (`tests/fixtures/tls/<name>`).
pub fn fixture(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(format!("../tests/fixtures/tls/{name}"))
}

/// A loopback port bound for TLS, not yet forwarding: its address is known
/// before `labd` starts, so that `labd`'s audience can name it.
pub struct Bound {
    listener: std::net::TcpListener,
    pub address: SocketAddr,
}

/// A running terminator; it stops when dropped.
pub struct Terminator {
    _runtime: tokio::runtime::Runtime,
}

impl Bound {
    pub fn new() -> Bound {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let address = listener.local_addr().unwrap();
        Bound { listener, address }
    }

    /// The external base URL, `https://127.0.0.1:<port>/api/operations`.
    pub fn base(&self) -> String {
        format!("https://{}{MOUNT}", self.address)
    }

    /// Starts accepting, forwarding to `upstream`.
    pub fn forward_to(self, upstream: SocketAddr) -> Terminator {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .unwrap();
        let acceptor = TlsAcceptor::from(Arc::new(server_config()));
        self.listener.set_nonblocking(true).unwrap();
        let listener = {
            let _entered = runtime.enter();
            TcpListener::from_std(self.listener).unwrap()
        };
        runtime.spawn(async move {
            loop {
                let Ok((tcp, _)) = listener.accept().await else {
                    continue;
                };
                let acceptor = acceptor.clone();
                tokio::spawn(async move {
                    // A refused handshake (the client distrusts the
                    // certificate) ends the connection; nothing to forward.
                    if let Ok(tls) = acceptor.accept(tcp).await {
                        let _ = forward(tls, upstream).await;
                    }
                });
            }
        });
        Terminator { _runtime: runtime }
    }
}

fn server_config() -> ServerConfig {
    let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(fixture("leaf.pem"))
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();
    let key = PrivateKeyDer::from_pem_file(fixture("leaf.key")).unwrap();
    let provider = Arc::new(tokio_rustls::rustls::crypto::ring::default_provider());
    ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_no_client_auth()
        .with_single_cert(certs, key)
        .unwrap()
}

/// Reads the request head, strips the mount from its target and relays.
async fn forward(
    mut tls: tokio_rustls::server::TlsStream<TcpStream>,
    upstream: SocketAddr,
) -> std::io::Result<()> {
    let mut head = Vec::new();
    let mut buf = [0u8; 4096];
    let end = loop {
        if let Some(at) = head.windows(4).position(|w| w == b"\r\n\r\n") {
            break at + 4;
        }
        if head.len() > MAX_HEAD {
            return Ok(());
        }
        let got = tls.read(&mut buf).await?;
        if got == 0 {
            return Ok(());
        }
        head.extend_from_slice(&buf[..got]);
    };
    let Some(rewritten) = strip_mount(&head[..end]) else {
        tls.write_all(b"HTTP/1.1 404 Not Found\r\ncontent-length: 0\r\nconnection: close\r\n\r\n")
            .await?;
        return tls.shutdown().await;
    };
    let mut labd = TcpStream::connect(upstream).await?;
    labd.write_all(&rewritten).await?;
    labd.write_all(&head[end..]).await?;
    // Each side's end is passed on; the TLS side's ends with close_notify.
    tokio::io::copy_bidirectional(&mut tls, &mut labd).await?;
    Ok(())
}

/// The head with `MOUNT` removed from the request target, or none when the
/// target is outside the mount.
fn strip_mount(head: &[u8]) -> Option<Vec<u8>> {
    let text = std::str::from_utf8(head).ok()?;
    let (line, rest) = text.split_once("\r\n")?;
    let mut parts = line.splitn(3, ' ');
    let (method, target, version) = (parts.next()?, parts.next()?, parts.next()?);
    let inner = target.strip_prefix(MOUNT)?;
    let inner = match inner.chars().next() {
        None => "/".to_owned(),
        Some('/') => inner.to_owned(),
        Some('?') => format!("/{inner}"),
        Some(_) => return None,
    };
    Some(format!("{method} {inner} {version}\r\n{rest}").into_bytes())
}
