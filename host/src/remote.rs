//! A service of the deployment hosted by another labd, reached over HTTP/1.1.

use crate::bindings::services::{ServiceRequest, ServiceResponse};
use crate::bindings::types::Header;
use anyhow::{bail, Context, Result};
use bytes::Bytes;
use http_body_util::{BodyExt, Full, Limited};
use hyper::header::{HeaderName, HeaderValue};
use tokio::net::TcpStream;

/// Largest answer accepted from a remote service.
const MAX_ANSWER_BYTES: usize = 64 << 20;

/// A remote service: its name (checked against `Lab-Service` on every
/// answer) and the base URL of its operations listener.
#[derive(Debug, Clone)]
pub struct Remote {
    name: String,
    authority: String,
    base_path: String,
}

impl Remote {
    /// From `NAME=URL`; only `http://host:port[/prefix]` URLs.
    pub fn parse(spec: &str) -> Result<Remote> {
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
        })
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    /// One request and its whole answer, on a connection of its own.
    pub async fn call(&self, request: ServiceRequest) -> Result<ServiceResponse> {
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
            .method(request.method.as_str())
            .uri(format!("{}{}", self.base_path, request.target))
            .header(hyper::header::HOST, &self.authority);
        for header in &request.headers {
            outgoing = outgoing.header(
                HeaderName::from_bytes(header.name.as_bytes())?,
                HeaderValue::from_bytes(&header.value)?,
            );
        }
        let outgoing = outgoing.body(Full::new(Bytes::from(request.body)))?;
        let answer = sender.send_request(outgoing).await?;
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
        let status = answer.status().as_u16();
        let headers = answer
            .headers()
            .iter()
            .map(|(name, value)| Header {
                name: name.as_str().to_string(),
                value: value.as_bytes().to_vec(),
            })
            .collect();
        let body = Limited::new(answer.into_body(), MAX_ANSWER_BYTES)
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
}

#[cfg(test)]
mod tests {
    use super::Remote;

    #[test]
    fn parses_name_and_url() {
        let remote = Remote::parse("journal=http://10.0.0.2:8092").unwrap();
        assert_eq!(
            (
                remote.name(),
                remote.authority.as_str(),
                remote.base_path.as_str()
            ),
            ("journal", "10.0.0.2:8092", "")
        );
        let mounted = Remote::parse("journal=http://h:1/api/operations/").unwrap();
        assert_eq!(mounted.base_path, "/api/operations");
        for bad in [
            "journal",
            "journal=https://h:1",
            "journal=http://h",
            "journal=http://:1",
        ] {
            assert!(Remote::parse(bad).is_err(), "{bad}");
        }
    }
}
