//! A small HTTP/1.1 keep-alive client over one `TcpStream`.
//!
//! It does only what the bench needs, so that it costs as little as
//! possible per request: requests are prebuilt bytes, bodies are written
//! from memory in large slices, and responses are parsed in place from one
//! reused buffer. Responses are framed by `Content-Length` or chunked
//! encoding; one request is in flight per connection.

use anyhow::{bail, ensure, Context, Result};
use std::net::SocketAddr;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// Read buffer per connection: a response head must fit in it, and large
/// bodies are read through it in reads of up to this size.
const READ_BUFFER: usize = 256 << 10;
/// Request bodies go to the socket in slices of this size.
const WRITE_SLICE: usize = 1 << 20;
/// Bodies up to this size are sent in the same write as the head.
const COALESCE: usize = 64 << 10;

/// The request head of `GET path`.
pub fn get_head(addr: SocketAddr, path: &str) -> Vec<u8> {
    format!("GET {path} HTTP/1.1\r\nhost: {addr}\r\n\r\n").into_bytes()
}

/// The request head of `POST path` with a body of `length` bytes.
pub fn post_head(addr: SocketAddr, path: &str, content_type: &str, length: usize) -> Vec<u8> {
    format!(
        "POST {path} HTTP/1.1\r\nhost: {addr}\r\ncontent-type: {content_type}\r\n\
         content-length: {length}\r\n\r\n"
    )
    .into_bytes()
}

/// What the bench keeps of a response.
#[derive(Debug)]
pub struct Response {
    pub status: u16,
    /// Every header, in order, when asked for; otherwise empty.
    pub headers: Vec<(String, String)>,
    /// Body bytes received, whether kept or not.
    pub body_len: u64,
}

impl Response {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }
}

/// How a response body ends.
enum Framing {
    Length(u64),
    Chunked,
}

/// One keep-alive connection.
pub struct Conn {
    stream: TcpStream,
    buf: Box<[u8]>,
    /// Unconsumed bytes are `buf[start..end]`.
    start: usize,
    end: usize,
}

impl Conn {
    pub async fn connect(addr: SocketAddr) -> Result<Conn> {
        let stream = TcpStream::connect(addr)
            .await
            .with_context(|| format!("connect to {addr}"))?;
        stream.set_nodelay(true)?;
        Ok(Conn {
            stream,
            buf: vec![0; READ_BUFFER].into_boxed_slice(),
            start: 0,
            end: 0,
        })
    }

    /// Sends a request and reads its response. With `keep_headers` the
    /// response lists its headers; with `body` the body is appended there,
    /// otherwise it is read and dropped.
    pub async fn exchange(
        &mut self,
        head: &[u8],
        body: &[u8],
        keep_headers: bool,
        keep_body: Option<&mut Vec<u8>>,
    ) -> Result<Response> {
        self.send(head, body).await?;
        self.receive(keep_headers, keep_body).await
    }

    async fn send(&mut self, head: &[u8], body: &[u8]) -> Result<()> {
        if body.is_empty() {
            self.stream.write_all(head).await?;
        } else if body.len() <= COALESCE {
            let mut whole = Vec::with_capacity(head.len() + body.len());
            whole.extend_from_slice(head);
            whole.extend_from_slice(body);
            self.stream.write_all(&whole).await?;
        } else {
            self.stream.write_all(head).await?;
            for slice in body.chunks(WRITE_SLICE) {
                self.stream.write_all(slice).await?;
            }
        }
        Ok(())
    }

    async fn receive(
        &mut self,
        keep_headers: bool,
        mut keep_body: Option<&mut Vec<u8>>,
    ) -> Result<Response> {
        let head_len = loop {
            if let Some(at) = find(&self.buf[self.start..self.end], b"\r\n\r\n") {
                break at + 4;
            }
            self.fill().await?;
        };
        let head = &self.buf[self.start..self.start + head_len];
        let (mut response, framing) = parse_head(head, keep_headers)?;
        self.start += head_len;
        match framing {
            Framing::Length(length) => {
                self.body(length, keep_body.as_deref_mut()).await?;
                response.body_len = length;
            }
            Framing::Chunked => loop {
                let line = self.line().await?;
                let digits = line.split(|&b| b == b';').next().unwrap_or_default();
                let size = std::str::from_utf8(digits)
                    .ok()
                    .and_then(|d| u64::from_str_radix(d.trim(), 16).ok())
                    .context("malformed chunk size")?;
                if size == 0 {
                    while !self.line().await?.is_empty() {}
                    break;
                }
                self.body(size, keep_body.as_deref_mut()).await?;
                response.body_len += size;
                ensure!(self.line().await?.is_empty(), "chunk not followed by CRLF");
            },
        }
        Ok(response)
    }

    /// Reads more bytes into the buffer; an error at end of stream.
    async fn fill(&mut self) -> Result<()> {
        if self.start == self.end {
            self.start = 0;
            self.end = 0;
        } else if self.end == self.buf.len() {
            ensure!(
                self.start > 0,
                "response head larger than {READ_BUFFER} bytes"
            );
            self.buf.copy_within(self.start..self.end, 0);
            self.end -= self.start;
            self.start = 0;
        }
        let n = self.stream.read(&mut self.buf[self.end..]).await?;
        if n == 0 {
            bail!("the server closed the connection");
        }
        self.end += n;
        Ok(())
    }

    /// One CRLF-terminated line, without the CRLF.
    async fn line(&mut self) -> Result<Vec<u8>> {
        loop {
            if let Some(at) = find(&self.buf[self.start..self.end], b"\r\n") {
                let line = self.buf[self.start..self.start + at].to_vec();
                self.start += at + 2;
                return Ok(line);
            }
            self.fill().await?;
        }
    }

    /// Consumes `length` body bytes: first what is buffered, then straight
    /// from the socket, never reading past the body.
    async fn body(&mut self, length: u64, mut keep: Option<&mut Vec<u8>>) -> Result<()> {
        let buffered = (self.end - self.start).min(usize::try_from(length).unwrap_or(usize::MAX));
        if let Some(keep) = keep.as_deref_mut() {
            keep.extend_from_slice(&self.buf[self.start..self.start + buffered]);
        }
        self.start += buffered;
        let mut remaining = length - buffered as u64;
        if remaining == 0 {
            return Ok(());
        }
        match keep {
            Some(keep) => {
                let at = keep.len();
                keep.resize(at + usize::try_from(remaining)?, 0);
                self.stream.read_exact(&mut keep[at..]).await?;
            }
            None => {
                self.start = 0;
                self.end = 0;
                while remaining > 0 {
                    let want = self
                        .buf
                        .len()
                        .min(usize::try_from(remaining).unwrap_or(usize::MAX));
                    let n = self.stream.read(&mut self.buf[..want]).await?;
                    if n == 0 {
                        bail!("the server closed the connection mid-body");
                    }
                    remaining -= n as u64;
                }
            }
        }
        Ok(())
    }
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).position(|w| w == needle)
}

/// The response a head starts (its body still to come) and its framing.
fn parse_head(head: &[u8], keep_headers: bool) -> Result<(Response, Framing)> {
    let mut lines = head
        .split(|&b| b == b'\n')
        .map(|l| l.strip_suffix(b"\r").unwrap_or(l));
    let status_line = lines.next().unwrap_or_default();
    ensure!(
        status_line.starts_with(b"HTTP/1.1 ") && status_line.len() >= 12,
        "malformed status line {:?}",
        String::from_utf8_lossy(status_line)
    );
    let status = std::str::from_utf8(&status_line[9..12])
        .ok()
        .and_then(|s| s.parse().ok())
        .context("malformed status code")?;
    let mut length = None;
    let mut chunked = false;
    let mut headers = Vec::new();
    for line in lines.filter(|l| !l.is_empty()) {
        let colon = line
            .iter()
            .position(|&b| b == b':')
            .context("malformed header line")?;
        let (name, value) = (&line[..colon], line[colon + 1..].trim_ascii());
        if name.eq_ignore_ascii_case(b"content-length") {
            length = Some(
                std::str::from_utf8(value)
                    .ok()
                    .and_then(|v| v.parse::<u64>().ok())
                    .context("malformed content-length")?,
            );
        } else if name.eq_ignore_ascii_case(b"transfer-encoding") {
            chunked = value.eq_ignore_ascii_case(b"chunked");
        }
        if keep_headers {
            headers.push((
                String::from_utf8_lossy(name).into_owned(),
                String::from_utf8_lossy(value).into_owned(),
            ));
        }
    }
    let framing = match (chunked, length) {
        (true, _) => Framing::Chunked,
        (false, Some(length)) => Framing::Length(length),
        (false, None) if (100..200).contains(&status) || status == 204 || status == 304 => {
            Framing::Length(0)
        }
        (false, None) => bail!("a {status} response without Content-Length or chunked encoding"),
    };
    let response = Response {
        status,
        headers,
        body_len: 0,
    };
    Ok((response, framing))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_a_head() {
        let head = b"HTTP/1.1 200 OK\r\nContent-Length: 4096\r\nlab-service: bytes\r\n\r\n";
        let (response, framing) = parse_head(head, true).unwrap();
        assert_eq!(response.status, 200);
        assert!(matches!(framing, Framing::Length(4096)));
        assert_eq!(response.header("Lab-Service"), Some("bytes"));
        let head = b"HTTP/1.1 404 Not Found\r\ntransfer-encoding: chunked\r\n\r\n";
        let (response, framing) = parse_head(head, false).unwrap();
        assert_eq!(response.status, 404);
        assert!(matches!(framing, Framing::Chunked));
        assert!(response.headers.is_empty());
        assert!(parse_head(b"HTTP/1.1 200 OK\r\n\r\n", false).is_err());
    }
}
