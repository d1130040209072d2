//! The request body as a host resource the component reads from.

use bytes::{Buf, Bytes};
use http_body_util::combinators::UnsyncBoxBody;
use http_body_util::BodyExt;

/// Any request body the host can hand to a component.
pub type RawBody = UnsyncBoxBody<Bytes, Box<dyn std::error::Error + Send + Sync>>;

/// A request body read in arrival order. After a transport failure every
/// read fails with the same reason; after the clean end every read is empty.
pub struct IncomingBody {
    body: Option<RawBody>,
    pending: Bytes,
    declared: Option<u64>,
    failure: Option<String>,
}

impl IncomingBody {
    pub fn new(body: RawBody, declared: Option<u64>) -> Self {
        IncomingBody {
            body: Some(body),
            pending: Bytes::new(),
            declared,
            failure: None,
        }
    }

    /// The request's `content-length`, if it declared one.
    pub fn declared_length(&self) -> Option<u64> {
        self.declared
    }

    /// Makes `pending` non-empty; false at the clean end of body.
    async fn fill(&mut self) -> Result<bool, String> {
        while self.pending.is_empty() {
            if let Some(reason) = &self.failure {
                return Err(reason.clone());
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
                    break;
                }
                None => {
                    line.extend_from_slice(window);
                    let taken = window.len();
                    self.pending.advance(taken);
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
        Ok(skipped)
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
    async fn failure_sticks() {
        let mut body = body_of(&[b"abc"], true);
        assert_eq!(body.read(10).await.unwrap(), Bytes::from_static(b"abc"));
        assert!(body.read(10).await.is_err());
        assert!(body.skip(1).await.is_err());
    }
}
