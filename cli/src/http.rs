//! A small blocking HTTP/1.1 client over any byte stream (plain TCP or
//! TLS: [`crate::transport::Stream`]).
//!
//! One request per connection (`Connection: close`). The request body is
//! sent with `Content-Length`; the answer's body is framed by
//! `Content-Length`, by `Transfer-Encoding: chunked`, or by the end of the
//! connection. The head is returned before the body is read, so the caller
//! can check the answer's headers first.

use std::fmt;
use std::io::{self, BufRead, BufReader, Read, Write};

/// The longest answer head (status line and headers) accepted.
const MAX_HEAD: usize = 64 * 1024;
/// The longest chunk-size line or trailer line accepted.
const MAX_LINE: usize = 4096;

/// One request.
#[derive(Debug, Clone)]
pub struct Request<'a> {
    pub method: &'a str,
    /// Origin-form target: path and query.
    pub target: &'a str,
    /// The `Host` header: host and port as in the URL.
    pub host: &'a str,
    /// Further headers; `Content-Length` is added when there is a body or
    /// the method is not GET.
    pub headers: Vec<(&'a str, String)>,
    pub body: &'a [u8],
}

/// Why no answer head was received.
#[derive(Debug)]
pub enum Error {
    /// Connecting, writing or reading failed.
    Io(io::Error),
    /// The peer answered something that is not an HTTP/1.x answer.
    Malformed(String),
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Io(err) => write!(f, "{err}"),
            Error::Malformed(why) => write!(f, "malformed HTTP answer: {why}"),
        }
    }
}

impl From<io::Error> for Error {
    fn from(err: io::Error) -> Error {
        Error::Io(err)
    }
}

/// An answer whose head has been read; the body is read from
/// [`Response::body`].
pub struct Response<R> {
    pub status: u16,
    headers: Vec<(String, String)>,
    body: Body<R>,
}

impl<R: BufRead> Response<R> {
    /// The first header named `name` (case-insensitive).
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    /// The body, decoded from its framing. A body that ends before its
    /// framing says it should is an `UnexpectedEof` error.
    pub fn body(&mut self) -> &mut Body<R> {
        &mut self.body
    }

    /// Reads the whole body.
    pub fn read_body(&mut self) -> io::Result<Vec<u8>> {
        let mut out = Vec::new();
        self.body.read_to_end(&mut out)?;
        Ok(out)
    }
}

/// Sends `request` on `stream` and reads the answer's head; the stream's
/// timeouts bound each read and write.
pub fn send<S: Read + Write>(
    mut stream: S,
    request: &Request<'_>,
) -> Result<Response<BufReader<S>>, Error> {
    let written = write_request(&mut stream, request);
    let reader = BufReader::new(stream);
    match (written, read_response(reader)) {
        (_, Ok(response)) => Ok(response),
        // A service may answer (e.g. 413) and close before reading all of
        // the body; its answer is then what counts. Without an answer, the
        // write error is the reason.
        (Err(err), Err(_)) => Err(Error::Io(err)),
        (Ok(()), Err(err)) => Err(err),
    }
}

/// Writes the request head and body.
pub fn write_request(out: &mut impl Write, request: &Request<'_>) -> io::Result<()> {
    let mut head = format!(
        "{} {} HTTP/1.1\r\nHost: {}\r\nUser-Agent: labctl/{}\r\nConnection: close\r\n",
        request.method,
        request.target,
        request.host,
        env!("CARGO_PKG_VERSION")
    );
    for (name, value) in &request.headers {
        head.push_str(&format!("{name}: {value}\r\n"));
    }
    if !request.body.is_empty() || request.method != "GET" {
        head.push_str(&format!("Content-Length: {}\r\n", request.body.len()));
    }
    head.push_str("\r\n");
    out.write_all(head.as_bytes())?;
    out.write_all(request.body)?;
    out.flush()
}

/// Reads an answer's head from `reader`, skipping interim (1xx) answers.
pub fn read_response<R: BufRead>(mut reader: R) -> Result<Response<R>, Error> {
    loop {
        let (status, headers) = read_head(&mut reader)?;
        if (100..200).contains(&status) {
            continue;
        }
        let framing = framing(status, &headers)?;
        return Ok(Response {
            status,
            headers,
            body: Body {
                inner: reader,
                framing,
            },
        });
    }
}

/// The status and the headers; the reason phrase is not kept.
type Head = (u16, Vec<(String, String)>);

fn read_head<R: BufRead>(reader: &mut R) -> Result<Head, Error> {
    let mut budget = MAX_HEAD;
    let status_line = read_line(reader, &mut budget)?
        .ok_or_else(|| Error::Malformed("the connection closed before an answer".into()))?;
    let mut parts = status_line.splitn(3, ' ');
    let version = parts.next().unwrap_or_default();
    if !version.starts_with("HTTP/1.") {
        return Err(Error::Malformed(format!(
            "status line {status_line:?} is not HTTP/1.x"
        )));
    }
    let status = parts
        .next()
        .filter(|code| code.len() == 3)
        .and_then(|code| code.parse::<u16>().ok())
        .filter(|code| (100..=599).contains(code))
        .ok_or_else(|| Error::Malformed(format!("status line {status_line:?}")))?;
    let mut headers = Vec::new();
    loop {
        let line = read_line(reader, &mut budget)?
            .ok_or_else(|| Error::Malformed("the connection closed inside the head".into()))?;
        if line.is_empty() {
            return Ok((status, headers));
        }
        let (name, value) = line
            .split_once(':')
            .filter(|(name, _)| !name.is_empty() && !name.contains([' ', '\t']))
            .ok_or_else(|| Error::Malformed(format!("header line {line:?}")))?;
        headers.push((name.to_owned(), value.trim().to_owned()));
    }
}

/// One line without its CRLF (or LF); `None` at the end of the stream
/// before any byte.
fn read_line<R: BufRead>(reader: &mut R, budget: &mut usize) -> Result<Option<String>, Error> {
    let mut line = Vec::new();
    let limit = u64::try_from(*budget).unwrap_or(u64::MAX);
    let got = reader.by_ref().take(limit).read_until(b'\n', &mut line)?;
    if got == 0 {
        return Ok(None);
    }
    if line.last() != Some(&b'\n') {
        return Err(if got >= *budget {
            Error::Malformed("the answer head is too long".into())
        } else {
            Error::Malformed("the connection closed inside a line".into())
        });
    }
    *budget -= got;
    line.pop();
    if line.last() == Some(&b'\r') {
        line.pop();
    }
    String::from_utf8(line)
        .map(Some)
        .map_err(|_| Error::Malformed("a head line is not UTF-8".into()))
}

fn framing(status: u16, headers: &[(String, String)]) -> Result<Framing, Error> {
    if status == 204 || status == 304 {
        return Ok(Framing::Length(0));
    }
    fn values<'h>(
        headers: &'h [(String, String)],
        name: &'static str,
    ) -> impl Iterator<Item = &'h str> {
        headers
            .iter()
            .filter(move |(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }
    if let Some(codings) = values(headers, "Transfer-Encoding").last() {
        let last = codings.rsplit(',').next().unwrap_or_default().trim();
        return Ok(if last.eq_ignore_ascii_case("chunked") {
            Framing::Chunked(ChunkState::Size)
        } else {
            Framing::UntilClose
        });
    }
    let mut length = None;
    for value in values(headers, "Content-Length") {
        for part in value.split(',') {
            let part = part.trim();
            let n: u64 = part
                .parse()
                .ok()
                .filter(|_| part.bytes().all(|b| b.is_ascii_digit()))
                .ok_or_else(|| Error::Malformed(format!("Content-Length {value:?}")))?;
            if length.is_some_and(|m| m != n) {
                return Err(Error::Malformed("conflicting Content-Length".into()));
            }
            length = Some(n);
        }
    }
    Ok(length.map_or(Framing::UntilClose, Framing::Length))
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Framing {
    /// This many bytes are left.
    Length(u64),
    Chunked(ChunkState),
    /// Everything until the peer closes.
    UntilClose,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum ChunkState {
    /// A chunk-size line comes next.
    Size,
    /// This many bytes of the current chunk are left, then its CRLF.
    Data(u64),
    /// The last chunk and the trailers were read.
    Done,
}

/// An answer body, read through its framing.
pub struct Body<R> {
    inner: R,
    framing: Framing,
}

fn early_end(what: &str) -> io::Error {
    io::Error::new(
        io::ErrorKind::UnexpectedEof,
        format!("the connection closed {what}"),
    )
}

fn bad_chunk(why: &str) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, format!("chunked body: {why}"))
}

impl<R: BufRead> Body<R> {
    fn chunk_line(&mut self) -> io::Result<String> {
        let mut budget = MAX_LINE;
        match read_line(&mut self.inner, &mut budget) {
            Ok(Some(line)) => Ok(line),
            Ok(None) => Err(early_end("inside a chunked body")),
            Err(Error::Io(err)) => Err(err),
            Err(Error::Malformed(why)) => Err(bad_chunk(&why)),
        }
    }
}

impl<R: BufRead> Read for Body<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        if buf.is_empty() {
            return Ok(0);
        }
        loop {
            match self.framing {
                Framing::UntilClose => return self.inner.read(buf),
                Framing::Length(0) => return Ok(0),
                Framing::Length(left) => {
                    let max = usize::try_from(left).unwrap_or(usize::MAX).min(buf.len());
                    let got = self.inner.read(&mut buf[..max])?;
                    if got == 0 {
                        return Err(early_end(&format!(
                            "with {left} bytes of the body still to come"
                        )));
                    }
                    self.framing = Framing::Length(left - got as u64);
                    return Ok(got);
                }
                Framing::Chunked(ChunkState::Done) => return Ok(0),
                Framing::Chunked(ChunkState::Size) => {
                    let line = self.chunk_line()?;
                    let size_text = line.split(';').next().unwrap_or_default().trim();
                    let size = u64::from_str_radix(size_text, 16)
                        .ok()
                        .filter(|_| !size_text.is_empty() && !size_text.starts_with('+'))
                        .ok_or_else(|| bad_chunk(&format!("chunk size {line:?}")))?;
                    if size == 0 {
                        // Trailers, up to the empty line.
                        while !self.chunk_line()?.is_empty() {}
                        self.framing = Framing::Chunked(ChunkState::Done);
                    } else {
                        self.framing = Framing::Chunked(ChunkState::Data(size));
                    }
                }
                Framing::Chunked(ChunkState::Data(0)) => {
                    if !self.chunk_line()?.is_empty() {
                        return Err(bad_chunk("no CRLF after a chunk"));
                    }
                    self.framing = Framing::Chunked(ChunkState::Size);
                }
                Framing::Chunked(ChunkState::Data(left)) => {
                    let max = usize::try_from(left).unwrap_or(usize::MAX).min(buf.len());
                    let got = self.inner.read(&mut buf[..max])?;
                    if got == 0 {
                        return Err(early_end("inside a chunk"));
                    }
                    self.framing = Framing::Chunked(ChunkState::Data(left - got as u64));
                    return Ok(got);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An answer parsed from `text`, and its body.
    type Parsed<'a> = (Response<&'a [u8]>, io::Result<Vec<u8>>);

    fn answer(text: &[u8]) -> Result<Parsed<'_>, Error> {
        let mut response = read_response(text)?;
        let body = response.read_body();
        Ok((response, body))
    }

    #[test]
    fn request_bytes() {
        let mut out = Vec::new();
        write_request(
            &mut out,
            &Request {
                method: "PUT",
                target: "/v1/retain?path=a",
                host: "127.0.0.1:8094",
                headers: vec![("Content-Type", "application/octet-stream".into())],
                body: b"xyz",
            },
        )
        .unwrap();
        let text = String::from_utf8(out).unwrap();
        assert_eq!(
            text,
            format!(
                "PUT /v1/retain?path=a HTTP/1.1\r\nHost: 127.0.0.1:8094\r\n\
                 User-Agent: labctl/{}\r\nConnection: close\r\n\
                 Content-Type: application/octet-stream\r\nContent-Length: 3\r\n\r\nxyz",
                env!("CARGO_PKG_VERSION")
            )
        );
        let mut out = Vec::new();
        let get = Request {
            method: "GET",
            target: "/describe",
            host: "h",
            headers: Vec::new(),
            body: b"",
        };
        write_request(&mut out, &get).unwrap();
        assert!(!String::from_utf8(out).unwrap().contains("Content-Length"));
        let mut out = Vec::new();
        write_request(
            &mut out,
            &Request {
                method: "POST",
                ..get
            },
        )
        .unwrap();
        assert!(String::from_utf8(out)
            .unwrap()
            .contains("Content-Length: 0\r\n"));
    }

    #[test]
    fn content_length_body() {
        let (response, body) = answer(
            b"HTTP/1.1 200 OK\r\nLab-Service: coord\r\ncontent-length: 5\r\n\r\nhello extra",
        )
        .unwrap();
        assert_eq!(response.status, 200);
        assert_eq!(response.header("LAB-SERVICE"), Some("coord"));
        assert_eq!(body.unwrap(), b"hello");
    }

    #[test]
    fn short_body_is_an_error() {
        let (_, body) = answer(b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nhello").unwrap();
        assert_eq!(body.unwrap_err().kind(), io::ErrorKind::UnexpectedEof);
    }

    #[test]
    fn chunked_body() {
        let (response, body) = answer(
            b"HTTP/1.1 404 Not Found\r\nTransfer-Encoding: chunked\r\n\r\n\
              5;ext=1\r\nhello\r\n1\r\n \r\nA\r\n0123456789\r\n0\r\nX-Trailer: 1\r\n\r\n",
        )
        .unwrap();
        assert_eq!(response.status, 404);
        assert_eq!(body.unwrap(), b"hello 0123456789");
        // Chunked wins over Content-Length.
        let (_, body) = answer(
            b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nTransfer-Encoding: chunked\r\n\r\n\
              3\r\nabc\r\n0\r\n\r\n",
        )
        .unwrap();
        assert_eq!(body.unwrap(), b"abc");
    }

    #[test]
    fn broken_chunked_bodies() {
        for text in [
            &b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\nabc\r\n0\r\n\r\n"[..],
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabcd\r\n0\r\n\r\n",
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nabc",
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n",
        ] {
            let (_, body) = answer(text).unwrap();
            assert!(body.is_err(), "{:?}", String::from_utf8_lossy(text));
        }
    }

    #[test]
    fn body_until_close_and_interim_answers() {
        let (response, body) = answer(
            b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.0 503 Service Unavailable\r\n\r\nall of it",
        )
        .unwrap();
        assert_eq!(response.status, 503);
        assert_eq!(body.unwrap(), b"all of it");
        let (_, body) = answer(b"HTTP/1.1 204 No Content\r\n\r\nignored").unwrap();
        assert_eq!(body.unwrap(), b"");
    }

    #[test]
    fn malformed_heads() {
        for text in [
            &b""[..],
            b"SSH-2.0-OpenSSH\r\n",
            b"HTTP/1.1 20 OK\r\n\r\n",
            b"HTTP/1.1 200 OK\r\nno colon here\r\n\r\n",
            b"HTTP/1.1 200 OK\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n",
            b"HTTP/1.1 200 OK\r\nContent-Length: -1\r\n\r\n",
            b"HTTP/1.1 200 OK\r\nContent-Length: 1\r\n",
        ] {
            assert!(
                matches!(read_response(text), Err(Error::Malformed(_))),
                "{:?}",
                String::from_utf8_lossy(text)
            );
        }
        let huge = format!("HTTP/1.1 200 OK\r\nX: {}\r\n\r\n", "a".repeat(MAX_HEAD));
        assert!(matches!(
            read_response(huge.as_bytes()),
            Err(Error::Malformed(_))
        ));
    }
}
