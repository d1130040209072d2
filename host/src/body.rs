//! Bodies as host resources a component reads from: the body of the
//! request it handles ([`IncomingBody`]) and the body of a peer's answer
//! ([`PeerBody`]).
//!
//! A body can also be handed on whole: [`IncomingBody::take_rest`] moves its
//! unread rest into a body of its own (for a request to another service)
//! and [`IncomingBody::restore`] puts back what that request left unread.

use bytes::{Buf, Bytes};
use http_body_util::combinators::UnsyncBoxBody;
use http_body_util::BodyExt;
use hyper::body::{Body, Frame, SizeHint};
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

/// Why a body transfer failed, as the host's bodies report it.
pub type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// Any request body the host can hand to a component.
pub type RawBody = UnsyncBoxBody<Bytes, BoxError>;

/// What a body that was handed on reads as until it is given back.
const HANDED_ON: &str = "the body was forwarded to another service";

/// A body whose reader waits at most `idle` for each next frame; past it
/// the body fails (its reader sees an aborted body). The wait is counted
/// only while someone waits: a reader busy elsewhere loses nothing.
pub fn with_idle_limit(body: RawBody, idle: std::time::Duration) -> RawBody {
    IdleLimited {
        body: Some(body),
        idle,
        waiting_since: None,
        deadline: None,
    }
    .boxed_unsync()
}

struct IdleLimited {
    /// None once the body ended or timed out.
    body: Option<RawBody>,
    idle: std::time::Duration,
    /// When the reader began waiting for the next frame.
    waiting_since: Option<tokio::time::Instant>,
    /// The end of that wait, armed at its second pending poll: the first
    /// is usually answered by a frame already in the connection's buffer
    /// (hyper reads a body once its reader asks), and a timer armed and
    /// cancelled costs more than a second poll.
    deadline: Option<Pin<Box<tokio::time::Sleep>>>,
}

impl Body for IdleLimited {
    type Data = Bytes;
    type Error = BoxError;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
        let this = self.get_mut();
        let Some(body) = this.body.as_mut() else {
            return Poll::Ready(None);
        };
        match Pin::new(body).poll_frame(cx) {
            Poll::Ready(frame) => {
                this.waiting_since = None;
                this.deadline = None;
                if frame.is_none() {
                    this.body = None;
                }
                Poll::Ready(frame)
            }
            Poll::Pending => {
                let idle = this.idle;
                let Some(since) = this.waiting_since else {
                    this.waiting_since = Some(tokio::time::Instant::now());
                    cx.waker().wake_by_ref();
                    return Poll::Pending;
                };
                let deadline = this
                    .deadline
                    .get_or_insert_with(|| Box::pin(tokio::time::sleep_until(since + idle)));
                match deadline.as_mut().poll(cx) {
                    Poll::Pending => Poll::Pending,
                    Poll::Ready(()) => {
                        this.body = None;
                        this.waiting_since = None;
                        this.deadline = None;
                        let message = format!("no body bytes for {} ms", idle.as_millis());
                        Poll::Ready(Some(Err(message.into())))
                    }
                }
            }
        }
    }

    fn is_end_stream(&self) -> bool {
        self.body.as_ref().is_none_or(|b| b.is_end_stream())
    }

    fn size_hint(&self) -> SizeHint {
        self.body
            .as_ref()
            .map_or_else(|| SizeHint::with_exact(0), |b| b.size_hint())
    }
}

/// A request body read in arrival order. After a transport failure every
/// read fails with the same reason; after the clean end every read is empty.
pub struct IncomingBody {
    body: Option<RawBody>,
    pending: Bytes,
    declared: Option<u64>,
    failure: Option<String>,
    /// Bytes handed to the reader so far (not counting `pending`).
    consumed: u64,
}

impl IncomingBody {
    pub fn new(body: RawBody, declared: Option<u64>) -> Self {
        IncomingBody {
            body: Some(body),
            pending: Bytes::new(),
            declared,
            failure: None,
            consumed: 0,
        }
    }

    /// The request's `content-length`, if it declared one.
    pub fn declared_length(&self) -> Option<u64> {
        self.declared
    }

    /// Moves the unread rest into a body of its own, whose declared length
    /// is what remains of this one's. Until [`restore`](Self::restore), this
    /// body fails every read: its bytes are elsewhere.
    pub fn take_rest(&mut self) -> IncomingBody {
        IncomingBody {
            body: self.body.take(),
            pending: std::mem::take(&mut self.pending),
            declared: self.declared.map(|d| d.saturating_sub(self.consumed)),
            failure: self.failure.replace(HANDED_ON.to_string()),
            consumed: 0,
        }
    }

    /// Puts back a rest taken by [`take_rest`](Self::take_rest), with
    /// whatever its reader left unread (or the failure it met).
    pub fn restore(&mut self, rest: IncomingBody) {
        self.body = rest.body;
        self.pending = rest.pending;
        self.failure = rest.failure;
        self.consumed += rest.consumed;
    }

    /// A body of `bytes`, all there already.
    pub fn from_bytes(bytes: Vec<u8>) -> Self {
        let length = bytes.len() as u64;
        let body = http_body_util::Full::new(Bytes::from(bytes))
            .map_err(|never| match never {})
            .boxed_unsync();
        IncomingBody::new(body, Some(length))
    }

    /// A body of the `size` bytes of `file`, read from its start as the
    /// reader asks.
    pub fn from_file(file: std::fs::File, size: u64) -> Self {
        let body = FileBody {
            file: tokio::fs::File::from_std(file),
            remaining: size,
            chunk: vec![0; FILE_CHUNK],
        };
        IncomingBody::new(body.boxed_unsync(), Some(size))
    }

    /// This body as a plain HTTP body (its unread bytes, then the rest of the
    /// transfer; a failure stays a failure), sized when the length is known.
    pub fn into_raw(self) -> RawBody {
        let remaining = self.declared.map(|d| d.saturating_sub(self.consumed));
        Rest {
            pending: self.pending,
            body: self.body,
            failure: self.failure,
            remaining,
        }
        .boxed_unsync()
    }

    /// Makes `pending` non-empty; false at the clean end of body.
    async fn fill(&mut self) -> Result<bool, String> {
        while self.pending.is_empty() {
            if let Some(reason) = &self.failure {
                return Err(reason.clone());
            }
            // Every declared byte was read: the transfer holds no more
            // (its framing ends it there), so its end is not waited for.
            if self.declared == Some(self.consumed) {
                return Ok(false);
            }
            let Some(body) = self.body.as_mut() else {
                return Ok(false);
            };
            match body.frame().await {
                None => self.body = None,
                Some(Ok(frame)) => {
                    if let Ok(data) = frame.into_data() {
                        self.pending = data;
                    }
                }
                Some(Err(e)) => {
                    self.body = None;
                    self.failure = Some(e.to_string());
                }
            }
        }
        Ok(true)
    }

    /// The next at most `max` bytes without copying; empty at the clean end.
    pub async fn read(&mut self, max: usize) -> Result<Bytes, String> {
        if max == 0 || !self.fill().await? {
            return Ok(Bytes::new());
        }
        let take = max.min(self.pending.len());
        self.consumed += take as u64;
        Ok(self.pending.split_to(take))
    }

    /// Bytes up to and including the next line feed, at most `max`.
    pub async fn read_line(&mut self, max: usize) -> Result<Vec<u8>, String> {
        let mut line = Vec::new();
        while line.len() < max && self.fill().await? {
            let room = max - line.len();
            let window = &self.pending[..room.min(self.pending.len())];
            match window.iter().position(|b| *b == b'\n') {
                Some(at) => {
                    line.extend_from_slice(&window[..=at]);
                    self.pending.advance(at + 1);
                    self.consumed += at as u64 + 1;
                    break;
                }
                None => {
                    line.extend_from_slice(window);
                    let taken = window.len();
                    self.pending.advance(taken);
                    self.consumed += taken as u64;
                }
            }
        }
        Ok(line)
    }

    /// Discards up to `n` bytes; returns how many (fewer only at the end).
    pub async fn skip(&mut self, n: u64) -> Result<u64, String> {
        let mut skipped = 0;
        while skipped < n && self.fill().await? {
            let take = (n - skipped).min(self.pending.len() as u64) as usize;
            self.pending.advance(take);
            skipped += take as u64;
        }
        self.consumed += skipped;
        Ok(skipped)
    }
}

/// Bytes a file body reads per frame.
const FILE_CHUNK: usize = 1 << 20;

/// The first `remaining` bytes of a file, a chunk per frame; a file that
/// ends early is a failed transfer.
struct FileBody {
    file: tokio::fs::File,
    remaining: u64,
    chunk: Vec<u8>,
}

impl Body for FileBody {
    type Data = Bytes;
    type Error = BoxError;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
        let this = self.get_mut();
        if this.remaining == 0 {
            return Poll::Ready(None);
        }
        let want = this.remaining.min(this.chunk.len() as u64) as usize;
        let mut buf = tokio::io::ReadBuf::new(&mut this.chunk[..want]);
        match tokio::io::AsyncRead::poll_read(Pin::new(&mut this.file), cx, &mut buf) {
            Poll::Pending => Poll::Pending,
            Poll::Ready(Err(e)) => Poll::Ready(Some(Err(e.into()))),
            Poll::Ready(Ok(())) if buf.filled().is_empty() => {
                Poll::Ready(Some(Err("the file ended before its size".into())))
            }
            Poll::Ready(Ok(())) => {
                let read = Bytes::copy_from_slice(buf.filled());
                this.remaining -= read.len() as u64;
                Poll::Ready(Some(Ok(Frame::data(read))))
            }
        }
    }

    fn is_end_stream(&self) -> bool {
        self.remaining == 0
    }

    fn size_hint(&self) -> SizeHint {
        SizeHint::with_exact(self.remaining)
    }
}

/// A peer service's response body (`services.response-body`), read in
/// arrival order like a request body: a failure sticks, the clean end reads
/// empty.
pub struct PeerBody(IncomingBody);

impl PeerBody {
    pub fn new(body: RawBody) -> Self {
        PeerBody(IncomingBody::new(body, None))
    }

    /// The next at most `max` bytes without copying; empty at the clean end.
    pub async fn read(&mut self, max: usize) -> Result<Bytes, String> {
        self.0.read(max).await
    }
}

/// The unread rest of an [`IncomingBody`] as an HTTP body.
struct Rest {
    pending: Bytes,
    body: Option<RawBody>,
    failure: Option<String>,
    /// What remains of the declared length, when one was declared.
    remaining: Option<u64>,
}

impl Body for Rest {
    type Data = Bytes;
    type Error = BoxError;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
        let this = self.get_mut();
        if !this.pending.is_empty() {
            return Poll::Ready(Some(Ok(Frame::data(std::mem::take(&mut this.pending)))));
        }
        if let Some(reason) = this.failure.take() {
            return Poll::Ready(Some(Err(reason.into())));
        }
        let Some(body) = this.body.as_mut() else {
            return Poll::Ready(None);
        };
        loop {
            match Pin::new(&mut *body).poll_frame(cx) {
                Poll::Ready(Some(Ok(frame))) => {
                    // Trailers are not part of the bytes handed on.
                    if let Ok(data) = frame.into_data() {
                        return Poll::Ready(Some(Ok(Frame::data(data))));
                    }
                }
                Poll::Ready(None) => {
                    this.body = None;
                    return Poll::Ready(None);
                }
                other => return other,
            }
        }
    }

    fn is_end_stream(&self) -> bool {
        self.pending.is_empty() && self.failure.is_none() && self.body.is_none()
    }

    fn size_hint(&self) -> SizeHint {
        match self.remaining {
            Some(n) => SizeHint::with_exact(n),
            None => SizeHint::default(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use hyper::body::{Body, Frame};
    use std::collections::VecDeque;
    use std::pin::Pin;
    use std::task::{Context, Poll};

    type BoxError = Box<dyn std::error::Error + Send + Sync>;

    /// Frames handed out in order, then the end.
    struct Scripted(VecDeque<Result<Frame<Bytes>, BoxError>>);

    impl Body for Scripted {
        type Data = Bytes;
        type Error = BoxError;
        fn poll_frame(
            mut self: Pin<&mut Self>,
            _: &mut Context<'_>,
        ) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
            Poll::Ready(self.0.pop_front())
        }
    }

    fn body_of(chunks: &[&'static [u8]], fail_at_end: bool) -> IncomingBody {
        let mut frames: VecDeque<_> = chunks
            .iter()
            .map(|c| Ok(Frame::data(Bytes::from_static(c))))
            .collect();
        if fail_at_end {
            frames.push_back(Err("connection reset".into()));
        }
        IncomingBody::new(Scripted(frames).boxed_unsync(), None)
    }

    #[tokio::test]
    async fn lines_span_chunks() {
        let mut body = body_of(&[b"12", b"3\n4", b"5\nrest"], false);
        assert_eq!(body.read_line(10).await.unwrap(), b"123\n");
        assert_eq!(body.read_line(10).await.unwrap(), b"45\n");
        assert_eq!(body.read_line(2).await.unwrap(), b"re");
        assert_eq!(body.skip(10).await.unwrap(), 2);
        assert_eq!(body.read(10).await.unwrap(), Bytes::new());
    }

    #[tokio::test]
    async fn a_rest_handed_on_and_back_keeps_its_place() {
        let mut body = IncomingBody::new(
            Scripted(
                [b"abc".as_slice(), b"defg"]
                    .iter()
                    .map(|c| Ok(Frame::data(Bytes::copy_from_slice(c))))
                    .collect(),
            )
            .boxed_unsync(),
            Some(7),
        );
        assert_eq!(body.read(2).await.unwrap(), Bytes::from_static(b"ab"));
        let mut rest = body.take_rest();
        assert_eq!(rest.declared_length(), Some(5));
        assert!(body.read(1).await.is_err(), "the bytes are elsewhere");
        assert_eq!(rest.read(2).await.unwrap(), Bytes::from_static(b"c"));
        assert_eq!(rest.read(1).await.unwrap(), Bytes::from_static(b"d"));
        body.restore(rest);
        assert_eq!(body.read(10).await.unwrap(), Bytes::from_static(b"efg"));
        assert_eq!(body.read(10).await.unwrap(), Bytes::new());
    }

    #[tokio::test]
    async fn a_rest_as_an_http_body_is_sized_and_keeps_its_failure() {
        let mut body = IncomingBody::new(
            Scripted(
                [
                    Ok(Frame::data(Bytes::from_static(b"abcd"))),
                    Err("reset".into()),
                ]
                .into_iter()
                .collect(),
            )
            .boxed_unsync(),
            Some(10),
        );
        assert_eq!(body.read(1).await.unwrap(), Bytes::from_static(b"a"));
        let raw = body.take_rest().into_raw();
        assert_eq!(raw.size_hint().exact(), Some(9));
        let mut raw = raw;
        let first = raw.frame().await.unwrap().unwrap().into_data().unwrap();
        assert_eq!(first, Bytes::from_static(b"bcd"));
        assert!(raw.frame().await.unwrap().is_err());
    }

    /// A body whose sender sent one frame and then went quiet.
    struct Stalled(bool);

    impl Body for Stalled {
        type Data = Bytes;
        type Error = BoxError;
        fn poll_frame(
            mut self: Pin<&mut Self>,
            _: &mut Context<'_>,
        ) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
            if std::mem::replace(&mut self.0, false) {
                Poll::Ready(Some(Ok(Frame::data(Bytes::from_static(b"x")))))
            } else {
                Poll::Pending
            }
        }
    }

    #[tokio::test]
    async fn a_body_idle_past_its_limit_reads_as_aborted() {
        let raw = with_idle_limit(
            Stalled(true).boxed_unsync(),
            std::time::Duration::from_millis(50),
        );
        let mut body = IncomingBody::new(raw, Some(10));
        assert_eq!(body.read(10).await.unwrap(), Bytes::from_static(b"x"));
        let failure = body.read(10).await.unwrap_err();
        assert!(failure.contains("no body bytes for 50 ms"), "{failure}");
        assert!(body.read(10).await.is_err(), "the failure sticks");
    }

    #[tokio::test]
    async fn a_body_read_to_its_declared_length_ends_without_polling_the_transfer() {
        // The transfer never ends by itself: only the declared length does.
        let mut body = IncomingBody::new(Stalled(true).boxed_unsync(), Some(1));
        assert_eq!(body.read(10).await.unwrap(), Bytes::from_static(b"x"));
        let mut end = std::pin::pin!(body.read(10));
        let mut cx = Context::from_waker(std::task::Waker::noop());
        assert!(matches!(end.as_mut().poll(&mut cx), Poll::Ready(Ok(b)) if b.is_empty()));
        // An undeclared length is ended by the transfer alone.
        let mut body = IncomingBody::new(Stalled(true).boxed_unsync(), None);
        assert_eq!(body.read(10).await.unwrap(), Bytes::from_static(b"x"));
        let mut end = std::pin::pin!(body.read(10));
        assert!(end.as_mut().poll(&mut cx).is_pending());
    }

    #[tokio::test]
    async fn failure_sticks() {
        let mut body = body_of(&[b"abc"], true);
        assert_eq!(body.read(10).await.unwrap(), Bytes::from_static(b"abc"));
        assert!(body.read(10).await.is_err());
        assert!(body.skip(1).await.is_err());
    }
}
