//! A service of the deployment hosted by another labd, reached over HTTP/1.1.

use crate::bindings::services::{ServiceRequest, ServiceResponse};
use crate::bindings::types::Header;
use crate::body::{BoxError, PeerBody, RawBody};
use crate::dispatch::CallHead;
use anyhow::{bail, Context, Result};
use bytes::Bytes;
use http_body_util::{BodyExt, Full, Limited};
use hyper::body::Incoming;
use hyper::header::{HeaderName, HeaderValue};
use tokio::net::TcpStream;

/// A remote service: its name (checked against `Lab-Service` on every
/// answer), the base URL of its operations listener and the largest answer
/// `call` reads whole from it.
#[derive(Debug, Clone)]
pub struct Remote {
    name: String,
    authority: String,
    base_path: String,
    max_answer: usize,
}

impl Remote {
    /// From `NAME=URL`; only `http://host:port[/prefix]` URLs.
    pub fn parse(spec: &str, max_answer: usize) -> Result<Remote> {
        let (name, url) = spec.split_once('=').context("a remote is NAME=URL")?;
        let rest = url
            .strip_prefix("http://")
            .with_context(|| format!("remote {name}: only http:// URLs are supported"))?;
        let (authority, path) = rest.split_once('/').map_or((rest, ""), |(a, p)| (a, p));
        let port = authority
            .rsplit_once(':')
            .map(|(host, port)| (host, port.parse::<u16>()));
        if !matches!(port, Some((host, Ok(_))) if !host.is_empty()) {
            bail!("remote {name}: the URL needs a host and a port");
        }
        Ok(Remote {
            name: name.to_string(),
            authority: authority.to_string(),
            base_path: format!("/{}", path.trim_end_matches('/'))
                .trim_end_matches('/')
                .to_string(),
            max_answer,
        })
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    /// One request and its whole answer, on a connection of its own.
    pub async fn call(&self, request: ServiceRequest) -> Result<ServiceResponse> {
        let head = CallHead {
            method: request.method,
            target: request.target,
            headers: request.headers,
        };
        let body = Full::new(Bytes::from(request.body))
            .map_err(|never| match never {})
            .boxed_unsync();
        let answer = self.send(head, body).await?;
        let (status, headers) = head_of(&answer);
        let body = Limited::new(answer.into_body(), self.max_answer)
            .collect()
            .await
            .map_err(|e| anyhow::anyhow!("reading the answer of {}: {e}", self.name))?
            .to_bytes();
        Ok(ServiceResponse {
            status,
            headers,
            body: body.to_vec(),
        })
    }

    /// One request with `body` streamed out as it arrives (sized when its
    /// length is known, chunked otherwise), and the answer's head; the
    /// answer's body is read as it arrives, on the same connection. A body
    /// that breaks off aborts the request: the remote sees a broken
    /// transfer, never a short complete one.
    pub async fn call_streaming(
        &self,
        head: CallHead,
        body: RawBody,
    ) -> Result<(u16, Vec<Header>, PeerBody)> {
        let answer = self.send(head, body).await?;
        let (status, headers) = head_of(&answer);
        let body = answer.into_body().map_err(BoxError::from).boxed_unsync();
        Ok((status, headers, PeerBody::new(body)))
    }

    /// Sends one request on a connection of its own and checks that the
    /// answer names this service. The host frames the body: a
    /// `content-length` or `transfer-encoding` among `head.headers` is
    /// dropped.
    async fn send(&self, head: CallHead, body: RawBody) -> Result<hyper::Response<Incoming>> {
        let stream = TcpStream::connect(&self.authority)
            .await
            .with_context(|| format!("connect to {} at {}", self.name, self.authority))?;
        let _ = stream.set_nodelay(true);
        let (mut sender, connection) =
            hyper::client::conn::http1::handshake(hyper_util::rt::TokioIo::new(stream)).await?;
        tokio::spawn(async move {
            let _ = connection.await;
        });
        let mut outgoing = hyper::Request::builder()
            .method(head.method.as_str())
            .uri(format!("{}{}", self.base_path, head.target))
            .header(hyper::header::HOST, &self.authority);
        for header in &head.headers {
            let name = HeaderName::from_bytes(header.name.as_bytes())?;
            if name == hyper::header::CONTENT_LENGTH || name == hyper::header::TRANSFER_ENCODING {
                continue;
            }
            outgoing = outgoing.header(name, HeaderValue::from_bytes(&header.value)?);
        }
        let answer = sender.send_request(outgoing.body(body)?).await?;
        let served_by = answer
            .headers()
            .get("lab-service")
            .map(|v| v.as_bytes().to_vec());
        if served_by.as_deref() != Some(self.name.as_bytes()) {
            bail!(
                "{} at {} answered without `Lab-Service: {}`",
                self.name,
                self.authority,
                self.name
            );
        }
        Ok(answer)
    }
}

/// An answer's status and headers, as WIT carries them.
fn head_of(answer: &hyper::Response<Incoming>) -> (u16, Vec<Header>) {
    let headers = answer
        .headers()
        .iter()
        .map(|(name, value)| Header {
            name: name.as_str().to_string(),
            value: value.as_bytes().to_vec(),
        })
        .collect();
    (answer.status().as_u16(), headers)
}

#[cfg(test)]
mod tests {
    use super::Remote;

    #[test]
    fn parses_name_and_url() {
        let remote = Remote::parse("journal=http://10.0.0.2:8092", 1 << 20).unwrap();
        assert_eq!(
            (
                remote.name(),
                remote.authority.as_str(),
                remote.base_path.as_str()
            ),
            ("journal", "10.0.0.2:8092", "")
        );
        let mounted = Remote::parse("journal=http://h:1/api/operations/", 1 << 20).unwrap();
        assert_eq!(mounted.base_path, "/api/operations");
        for bad in [
            "journal",
            "journal=https://h:1",
            "journal=http://h",
            "journal=http://:1",
        ] {
            assert!(Remote::parse(bad, 1 << 20).is_err(), "{bad}");
        }
    }
}
