//! The frames of one take of a connection's subscriptions, written into
//! one buffer: a take costs one allocation for all its text, not one per
//! frame, and the socket sends each frame as a slice of that buffer.

use bytes::Bytes;
use std::ops::Range;

/// Subscription frames in the order they are written.
///
/// Invariant: `ends` ascends and its last element is `text.len()`; frame
/// `i` is `text[ends[i - 1]..ends[i]]` (from 0 for the first), so every
/// frame boundary is a character boundary of `text`.
#[derive(Debug, Default)]
pub struct Frames {
    text: String,
    ends: Vec<usize>,
}

impl Frames {
    /// Room for `frames` frames of `bytes` bytes in all.
    pub fn with_capacity(frames: usize, bytes: usize) -> Frames {
        Frames {
            text: String::with_capacity(bytes),
            ends: Vec::with_capacity(frames),
        }
    }

    #[cfg(test)]
    pub fn len(&self) -> usize {
        self.ends.len()
    }

    pub fn is_empty(&self) -> bool {
        self.ends.is_empty()
    }

    /// Appends one frame, whose text `write` appends to the buffer.
    pub fn push_with(&mut self, write: impl FnOnce(&mut String)) {
        write(&mut self.text);
        self.ends.push(self.text.len());
    }

    pub fn push(&mut self, frame: &str) {
        self.push_with(|text| text.push_str(frame));
    }

    /// Each frame's text, in order.
    #[cfg(test)]
    pub fn iter(&self) -> impl Iterator<Item = &str> {
        spans(self.ends.iter().copied()).map(|span| &self.text[span])
    }

    /// Each frame as a slice of the one shared buffer (no copy), in order;
    /// every slice is UTF-8.
    pub fn into_slices(self) -> impl Iterator<Item = Bytes> {
        let text = Bytes::from(self.text);
        spans(self.ends).map(move |span| text.slice(span))
    }
}

/// Where each frame lies in the buffer, from the frames' `ends`.
fn spans(ends: impl IntoIterator<Item = usize>) -> impl Iterator<Item = Range<usize>> {
    ends.into_iter().scan(0, |start, end| {
        let span = *start..end;
        *start = end;
        Some(span)
    })
}

#[cfg(test)]
impl<'a> IntoIterator for &'a Frames {
    type Item = &'a str;
    type IntoIter = Box<dyn Iterator<Item = &'a str> + 'a>;

    fn into_iter(self) -> Self::IntoIter {
        Box::new(self.iter())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frames_come_back_whole_and_in_order() {
        let mut frames = Frames::with_capacity(1, 4);
        assert!(frames.is_empty());
        frames.push("{\"a\":1}");
        frames.push("");
        frames.push_with(|text| text.push_str("{\"é\":\"ü\"}"));
        assert_eq!(frames.len(), 3);
        let texts: Vec<&str> = frames.iter().collect();
        assert_eq!(texts, ["{\"a\":1}", "", "{\"é\":\"ü\"}"]);
        let slices: Vec<Bytes> = frames.into_slices().collect();
        let expected: Vec<&[u8]> = vec![b"{\"a\":1}", b"", "{\"é\":\"ü\"}".as_bytes()];
        assert_eq!(slices, expected);
    }
}
