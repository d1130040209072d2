//! The byte stream under every exchange: plain TCP for `http://`, TLS
//! (rustls, ring provider) for `https://`. HTTP and the socket are written
//! against [`Stream`], so every command works over either unchanged.
//!
//! Invariant: a [`Stream::Tls`] has completed its handshake, so the
//! server's certificate has been checked against the trusted roots and the
//! endpoint's host before any request byte is written.

use std::fmt;
use std::io::{self, Read, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName};
use rustls::{CertificateError, ClientConfig, ClientConnection, RootCertStore, StreamOwned};

use crate::endpoint::{Endpoint, Scheme};
use crate::failure::Failure;

/// A connected stream to an endpoint.
pub enum Stream {
    Plain(TcpStream),
    Tls(Box<StreamOwned<ClientConnection, TcpStream>>),
}

impl Stream {
    /// The TCP connection underneath, for its timeouts.
    pub fn tcp(&self) -> &TcpStream {
        match self {
            Stream::Plain(tcp) => tcp,
            Stream::Tls(tls) => tls.get_ref(),
        }
    }
}

impl Read for Stream {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        match self {
            Stream::Plain(tcp) => tcp.read(buf),
            Stream::Tls(tls) => tls.read(buf),
        }
    }
}

impl Write for Stream {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        match self {
            Stream::Plain(tcp) => tcp.write(buf),
            Stream::Tls(tls) => tls.write(buf),
        }
    }

    fn flush(&mut self) -> io::Result<()> {
        match self {
            Stream::Plain(tcp) => tcp.flush(),
            Stream::Tls(tls) => tls.flush(),
        }
    }
}

/// Why no stream was opened.
#[derive(Debug)]
pub enum ConnectError {
    /// Resolving, connecting, or the handshake's reads and writes failed.
    Io(io::Error),
    /// The TLS handshake was refused; the text says why, in the reader's
    /// terms (an untrusted issuer, a name the certificate lacks, ...).
    Tls(String),
}

impl fmt::Display for ConnectError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ConnectError::Io(err) => write!(f, "{err}"),
            ConnectError::Tls(why) => write!(f, "TLS: {why}"),
        }
    }
}

/// Opens streams to one endpoint.
pub struct Connector {
    pub endpoint: Endpoint,
    /// Present for `https://` endpoints.
    tls: Option<Arc<ClientConfig>>,
    /// Bounds connecting and each read and write.
    pub timeout: Duration,
}

impl Connector {
    /// A connector to `endpoint`. For `https://`, the trusted roots are the
    /// webpki-roots authorities plus every certificate of `ca_file`.
    pub fn new(
        endpoint: Endpoint,
        ca_file: Option<&Path>,
        timeout: Duration,
    ) -> Result<Connector, Failure> {
        let tls = match endpoint.scheme {
            Scheme::Http => None,
            Scheme::Https => Some(client_config(ca_file)?),
        };
        Ok(Connector {
            endpoint,
            tls,
            timeout,
        })
    }

    /// Connects, and for TLS completes the handshake.
    pub fn connect(&self) -> Result<Stream, ConnectError> {
        let tcp = connect_tcp(&self.endpoint.address, self.timeout).map_err(ConnectError::Io)?;
        tcp.set_read_timeout(Some(self.timeout))
            .map_err(ConnectError::Io)?;
        tcp.set_write_timeout(Some(self.timeout))
            .map_err(ConnectError::Io)?;
        let Some(config) = &self.tls else {
            return Ok(Stream::Plain(tcp));
        };
        let host = &self.endpoint.host;
        let name = ServerName::try_from(host.clone()).map_err(|_| {
            ConnectError::Tls(format!("{host:?} is neither a DNS name nor an IP address"))
        })?;
        let mut connection = ClientConnection::new(Arc::clone(config), name)
            .map_err(|err| ConnectError::Tls(err.to_string()))?;
        let mut tcp = tcp;
        while connection.is_handshaking() {
            connection
                .complete_io(&mut tcp)
                .map_err(|err| handshake_failure(err, host))?;
        }
        Ok(Stream::Tls(Box::new(StreamOwned::new(connection, tcp))))
    }
}

/// The client configuration: TLS 1.2 and 1.3 with the ring provider's
/// safe defaults, the trusted roots, no client certificate.
fn client_config(ca_file: Option<&Path>) -> Result<Arc<ClientConfig>, Failure> {
    let mut roots = RootCertStore {
        roots: webpki_roots::TLS_SERVER_ROOTS.to_vec(),
    };
    if let Some(path) = ca_file {
        let pem = std::fs::read(path).map_err(|err| Failure::reading(path, err))?;
        let mut added = 0;
        for cert in CertificateDer::pem_slice_iter(&pem) {
            let cert = cert.map_err(|err| {
                Failure::Data(format!("{}: not a PEM certificate: {err}", path.display()))
            })?;
            roots.add(cert).map_err(|err| {
                Failure::Data(format!(
                    "{}: a certificate cannot be trusted as a root: {err}",
                    path.display()
                ))
            })?;
            added += 1;
        }
        if added == 0 {
            return Err(Failure::Data(format!(
                "{}: holds no PEM CERTIFICATE block",
                path.display()
            )));
        }
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|err| Failure::Usage(format!("TLS configuration: {err}")))?
        .with_root_certificates(roots)
        .with_no_client_auth();
    Ok(Arc::new(config))
}

/// A handshake's I/O error, with a refused certificate explained.
fn handshake_failure(err: io::Error, host: &str) -> ConnectError {
    let Some(tls) = err
        .get_ref()
        .and_then(|inner| inner.downcast_ref::<rustls::Error>())
    else {
        return ConnectError::Io(err);
    };
    ConnectError::Tls(match tls {
        rustls::Error::InvalidCertificate(CertificateError::UnknownIssuer) => format!(
            "the certificate of {host} is not issued by a trusted authority; \
             to trust a private CA, give --ca-file PEM (or set LAB_CA_FILE)"
        ),
        rustls::Error::InvalidCertificate(
            CertificateError::NotValidForName | CertificateError::NotValidForNameContext { .. },
        ) => format!("the certificate presented is not valid for the name {host} ({tls})"),
        rustls::Error::InvalidCertificate(_) => {
            format!("the certificate of {host} is refused: {tls}")
        }
        other => format!("the handshake with {host} failed: {other}"),
    })
}

fn connect_tcp(address: &str, timeout: Duration) -> io::Result<TcpStream> {
    let mut last = None;
    for addr in address.to_socket_addrs()? {
        match TcpStream::connect_timeout(&addr, timeout) {
            Ok(stream) => return Ok(stream),
            Err(err) => last = Some(err),
        }
    }
    Err(last.unwrap_or_else(|| {
        io::Error::new(
            io::ErrorKind::NotFound,
            format!("{address} resolves to no address"),
        )
    }))
}
