//! The strict decoder for restricted deterministic CBOR.
//!
//! Invariants:
//! 1. Everything accepted is in canonical form, so re-encoding an accepted
//!    input reproduces it byte for byte.
//! 2. Bounds are checked from a head before anything it announces is read
//!    or allocated: a count or length over its bound is a limit refusal
//!    even when the input ends before the announced content.
//! 3. No allocation is sized from an announced count beyond what the
//!    remaining input can hold (each child takes at least one byte).
//! 4. Nesting is walked with an explicit stack bounded by [`MAX_DEPTH`];
//!    the decoder never recurses.
//! 5. The first offending byte in input order decides the refusal.

use std::fmt;

use crate::encode::{
    LABEL_TAG, MAJOR_ARRAY, MAJOR_BYTES, MAJOR_MAP, MAJOR_NEGATIVE, MAJOR_SIMPLE, MAJOR_TAG,
    MAJOR_TEXT, MAJOR_UNSIGNED, SIMPLE_FALSE, SIMPLE_NULL, SIMPLE_TRUE,
};
use crate::int::Int;
use crate::value::{Map, Value};
use crate::{MAX_ARITY, MAX_DEPTH, MAX_FACT, MAX_PAYLOAD};

/// Why a decoder refused its input.
#[non_exhaustive]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DecodeError {
    /// A declared bound would be exceeded (the journal's `limit_exceeded`).
    Limit {
        /// Byte offset of the head announcing the excess; for depth, of the
        /// first item past the bound; 0 for the whole input.
        offset: usize,
        /// The bound.
        bound: Bound,
    },
    /// The input is malformed or not canonical (the journal's `invalid`).
    Invalid {
        /// Byte offset of the offending item's head, except as noted on [`Defect`].
        offset: usize,
        /// What is wrong.
        defect: Defect,
    },
}

/// The bound a [`DecodeError::Limit`] names.
#[non_exhaustive]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Bound {
    /// The whole input is longer than the caller's bound.
    Input {
        /// The caller's bound in bytes.
        limit: usize,
    },
    /// A value sits deeper than [`MAX_DEPTH`].
    Depth,
    /// A tuple announces more than [`MAX_ARITY`] children.
    Arity,
    /// A map announces more than [`MAX_ARITY`] entries.
    Entries,
    /// A label, text or bytes payload is longer than [`MAX_PAYLOAD`].
    Payload,
}

/// The defect a [`DecodeError::Invalid`] names.
#[non_exhaustive]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Defect {
    /// The input ended inside an item; the offset is the input length.
    Truncated,
    /// Bytes follow the single top-level value; the offset is the first of them.
    TrailingBytes,
    /// An indefinite-length byte string, text, array or map.
    IndefiniteLength,
    /// The break stop code outside any indefinite-length item.
    Break,
    /// Additional information 28..=30, or 31 on an integer or tag.
    Reserved,
    /// A length or integer argument not in its shortest form.
    NonShortest,
    /// A floating-point number.
    Float,
    /// The simple value `undefined`.
    Undefined,
    /// A simple value other than false, true, null and undefined.
    Simple(u8),
    /// A tag other than 39.
    Tag(u64),
    /// Tag 39 around something other than a byte string; the offset is the
    /// enclosed item's head.
    LabelContent,
    /// Text that is not valid UTF-8.
    InvalidUtf8,
    /// A map key not above the previous key in encoded byte order.
    UnsortedKeys,
    /// A map key equal to the previous key.
    DuplicateKey,
    /// A well-formed value that is not a fact (see [`Value::as_fact`]).
    NotAFact,
    /// A value that is not a tuple where one was expected
    /// ([`tuple_children`]).
    NotATuple,
}

impl DecodeError {
    /// Byte offset in the input the refusal points at.
    pub fn offset(&self) -> usize {
        match *self {
            DecodeError::Limit { offset, .. } | DecodeError::Invalid { offset, .. } => offset,
        }
    }

    /// Whether a bound was exceeded, as opposed to the input being invalid.
    pub fn is_limit(&self) -> bool {
        matches!(self, DecodeError::Limit { .. })
    }
}

impl fmt::Display for Bound {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Bound::Input { limit } => write!(f, "input longer than {limit} bytes"),
            Bound::Depth => write!(f, "value deeper than {MAX_DEPTH}"),
            Bound::Arity => write!(f, "tuple arity above {MAX_ARITY}"),
            Bound::Entries => write!(f, "map entry count above {MAX_ARITY}"),
            Bound::Payload => write!(f, "payload longer than {MAX_PAYLOAD} bytes"),
        }
    }
}

impl fmt::Display for Defect {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Defect::Truncated => f.write_str("input ends inside an item"),
            Defect::TrailingBytes => f.write_str("bytes after the value"),
            Defect::IndefiniteLength => f.write_str("indefinite length"),
            Defect::Break => f.write_str("unexpected break"),
            Defect::Reserved => f.write_str("reserved additional information"),
            Defect::NonShortest => f.write_str("argument not in shortest form"),
            Defect::Float => f.write_str("floating-point number"),
            Defect::Undefined => f.write_str("undefined"),
            Defect::Simple(n) => write!(f, "simple value {n}"),
            Defect::Tag(n) => write!(f, "tag {n}"),
            Defect::LabelContent => f.write_str("tag 39 around something other than bytes"),
            Defect::InvalidUtf8 => f.write_str("text is not UTF-8"),
            Defect::UnsortedKeys => f.write_str("map keys out of order"),
            Defect::DuplicateKey => f.write_str("duplicate map key"),
            Defect::NotAFact => f.write_str("not a fact"),
            Defect::NotATuple => f.write_str("not a tuple"),
        }
    }
}

impl fmt::Display for DecodeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DecodeError::Limit { offset, bound } => write!(f, "{bound} at byte {offset}"),
            DecodeError::Invalid { offset, defect } => write!(f, "{defect} at byte {offset}"),
        }
    }
}

impl std::error::Error for DecodeError {}

/// Decodes exactly one canonical value under the value bounds (depth,
/// arity, payload), with no bound on the whole input.
pub fn decode(bytes: &[u8]) -> Result<Value, DecodeError> {
    decode_bounded(bytes, usize::MAX)
}

/// Decodes exactly one canonical value under the value bounds, refusing an
/// input longer than `max_input` bytes before reading it.
pub fn decode_bounded(bytes: &[u8], max_input: usize) -> Result<Value, DecodeError> {
    if bytes.len() > max_input {
        return Err(DecodeError::Limit {
            offset: 0,
            bound: Bound::Input { limit: max_input },
        });
    }
    Decoder {
        input: bytes,
        pos: 0,
    }
    .value()
}

/// Decodes a fact under the facts profile: at most [`MAX_FACT`] bytes, the
/// value bounds, and a tuple of arity >= 1 whose first child is an atom.
pub fn decode_fact(bytes: &[u8]) -> Result<Value, DecodeError> {
    let value = decode_bounded(bytes, MAX_FACT)?;
    if value.as_fact().is_none() {
        return Err(DecodeError::Invalid {
            offset: 0,
            defect: Defect::NotAFact,
        });
    }
    Ok(value)
}

/// The children of an encoded tuple, each as its own bytes, found by
/// walking heads and payloads without building values.
///
/// On input [`decode`] accepts, each slice is the canonical encoding of the
/// child `decode` would return at that index. Only the structure is
/// checked (heads in shortest form, lengths within the input, nothing
/// after the tuple; payloads are not checked as UTF-8, map keys not for
/// order, depth not against [`MAX_DEPTH`]): use it on bytes already
/// validated, such as stored facts. A value that is not a tuple is
/// [`Defect::NotATuple`].
pub fn tuple_children(bytes: &[u8]) -> Result<Vec<&[u8]>, DecodeError> {
    let mut walker = Decoder {
        input: bytes,
        pos: 0,
    };
    let head = walker.head(0)?;
    if head.major != MAJOR_ARRAY {
        return Err(Decoder::invalid(0, Defect::NotATuple));
    }
    let arity = Decoder::count(0, head.arg, Bound::Arity)?;
    // A child takes at least one byte.
    let mut children = Vec::with_capacity(arity.min(walker.remaining()));
    for _ in 0..arity {
        let start = walker.pos;
        walker.skip_item()?;
        children.push(&bytes[start..walker.pos]);
    }
    if walker.pos != bytes.len() {
        return Err(Decoder::invalid(walker.pos, Defect::TrailingBytes));
    }
    Ok(children)
}

/// A compound whose children are still being read.
enum Frame {
    Tuple {
        children: Vec<Value>,
        remaining: usize,
    },
    Map {
        entries: Vec<(Value, Value)>,
        remaining: usize,
        /// The key read for the entry in progress.
        key: Option<Value>,
        /// Where the key in progress starts.
        key_start: usize,
        /// Input span of the previous key; the input read so far is
        /// canonical, so the span is that key's canonical encoding.
        previous_key: Option<(usize, usize)>,
    },
}

struct Decoder<'a> {
    input: &'a [u8],
    pos: usize,
}

/// An item's head: major type and argument.
struct Head {
    major: u8,
    arg: u64,
}

impl<'a> Decoder<'a> {
    fn invalid(offset: usize, defect: Defect) -> DecodeError {
        DecodeError::Invalid { offset, defect }
    }

    fn truncated(&self) -> DecodeError {
        Self::invalid(self.input.len(), Defect::Truncated)
    }

    fn remaining(&self) -> usize {
        self.input.len() - self.pos
    }

    fn take(&mut self, n: usize) -> Result<&'a [u8], DecodeError> {
        if n > self.remaining() {
            return Err(self.truncated());
        }
        let bytes = &self.input[self.pos..self.pos + n];
        self.pos += n;
        Ok(bytes)
    }

    fn take_array<const N: usize>(&mut self) -> Result<[u8; N], DecodeError> {
        let mut array = [0u8; N];
        array.copy_from_slice(self.take(N)?);
        Ok(array)
    }

    /// Reads the head starting at `start` (the current position).
    fn head(&mut self, start: usize) -> Result<Head, DecodeError> {
        let [initial] = self.take_array::<1>()?;
        let major = initial >> 5;
        let info = initial & 0x1f;
        if major == MAJOR_SIMPLE {
            return match info {
                SIMPLE_FALSE | SIMPLE_TRUE | SIMPLE_NULL => Ok(Head {
                    major,
                    arg: u64::from(info),
                }),
                23 => Err(Self::invalid(start, Defect::Undefined)),
                0..=19 => Err(Self::invalid(start, Defect::Simple(info))),
                24 => {
                    let [n] = self.take_array::<1>()?;
                    Err(Self::invalid(start, Defect::Simple(n)))
                }
                25..=27 => Err(Self::invalid(start, Defect::Float)),
                28..=30 => Err(Self::invalid(start, Defect::Reserved)),
                _ => Err(Self::invalid(start, Defect::Break)),
            };
        }
        let (arg, shortest_floor) = match info {
            0..=23 => (u64::from(info), 0),
            24 => (u64::from(self.take_array::<1>()?[0]), 24),
            25 => (u64::from(u16::from_be_bytes(self.take_array()?)), 0x100),
            26 => (u64::from(u32::from_be_bytes(self.take_array()?)), 0x1_0000),
            27 => (u64::from_be_bytes(self.take_array()?), 0x1_0000_0000),
            31 if (MAJOR_BYTES..=MAJOR_MAP).contains(&major) => {
                return Err(Self::invalid(start, Defect::IndefiniteLength))
            }
            _ => return Err(Self::invalid(start, Defect::Reserved)),
        };
        if arg < shortest_floor {
            return Err(Self::invalid(start, Defect::NonShortest));
        }
        Ok(Head { major, arg })
    }

    /// Reads the payload a byte-string or text head at `start` announces.
    fn payload(&mut self, start: usize, len: u64) -> Result<&'a [u8], DecodeError> {
        match usize::try_from(len) {
            Ok(len) if len <= MAX_PAYLOAD => self.take(len),
            _ => Err(DecodeError::Limit {
                offset: start,
                bound: Bound::Payload,
            }),
        }
    }

    /// Reads the label a tag head at `start` with tag number `tag` heads:
    /// the label tag over a byte string, whose payload it answers.
    fn label(&mut self, start: usize, tag: u64) -> Result<&'a [u8], DecodeError> {
        if tag != LABEL_TAG {
            return Err(Self::invalid(start, Defect::Tag(tag)));
        }
        let inner_start = self.pos;
        let inner = self.head(inner_start)?;
        if inner.major != MAJOR_BYTES {
            return Err(Self::invalid(inner_start, Defect::LabelContent));
        }
        self.payload(inner_start, inner.arg)
    }

    /// An announced child count, checked against its bound.
    fn count(start: usize, n: u64, bound: Bound) -> Result<usize, DecodeError> {
        match usize::try_from(n) {
            Ok(n) if n <= MAX_ARITY => Ok(n),
            _ => Err(DecodeError::Limit {
                offset: start,
                bound,
            }),
        }
    }

    /// Moves past one whole item: its head, payload and every child, with a
    /// count of items still owed instead of a stack.
    fn skip_item(&mut self) -> Result<(), DecodeError> {
        let mut owed: usize = 1;
        while owed > 0 {
            owed -= 1;
            let start = self.pos;
            let head = self.head(start)?;
            match head.major {
                MAJOR_BYTES | MAJOR_TEXT => {
                    self.payload(start, head.arg)?;
                }
                MAJOR_TAG => {
                    self.label(start, head.arg)?;
                }
                MAJOR_ARRAY => owed += Self::count(start, head.arg, Bound::Arity)?,
                MAJOR_MAP => owed += 2 * Self::count(start, head.arg, Bound::Entries)?,
                _ => {}
            }
            // Each item owed takes at least one more byte.
            if owed > self.remaining() {
                return Err(self.truncated());
            }
        }
        Ok(())
    }

    fn value(mut self) -> Result<Value, DecodeError> {
        let mut stack: Vec<Frame> = Vec::new();
        loop {
            let start = self.pos;
            if let Some(Frame::Map {
                key: None,
                key_start,
                ..
            }) = stack.last_mut()
            {
                *key_start = start;
            }
            let head = self.head(start)?;
            let mut done = match head.major {
                MAJOR_UNSIGNED => Value::Int(Int::from_cbor(false, head.arg)),
                MAJOR_NEGATIVE => Value::Int(Int::from_cbor(true, head.arg)),
                MAJOR_BYTES => Value::Bytes(self.payload(start, head.arg)?.to_vec()),
                MAJOR_TEXT => {
                    let payload = self.payload(start, head.arg)?;
                    match std::str::from_utf8(payload) {
                        Ok(text) => Value::Text(text.to_owned()),
                        Err(_) => return Err(Self::invalid(start, Defect::InvalidUtf8)),
                    }
                }
                MAJOR_TAG => Value::Label(self.label(start, head.arg)?.to_vec()),
                MAJOR_SIMPLE => match u8::try_from(head.arg) {
                    Ok(SIMPLE_FALSE) => Value::Bool(false),
                    Ok(SIMPLE_TRUE) => Value::Bool(true),
                    _ => Value::Null,
                },
                MAJOR_ARRAY | MAJOR_MAP => {
                    let is_map = head.major == MAJOR_MAP;
                    let bound = if is_map { Bound::Entries } else { Bound::Arity };
                    let n = Self::count(start, head.arg, bound)?;
                    if n == 0 {
                        if is_map {
                            Value::Map(Map::new())
                        } else {
                            Value::Tuple(Vec::new())
                        }
                    } else {
                        // The children would sit at depth stack.len() + 1.
                        if stack.len() >= MAX_DEPTH {
                            return Err(DecodeError::Limit {
                                offset: self.pos,
                                bound: Bound::Depth,
                            });
                        }
                        // A child takes at least one byte, an entry two.
                        let frame = if is_map {
                            Frame::Map {
                                entries: Vec::with_capacity(n.min(self.remaining() / 2)),
                                remaining: n,
                                key: None,
                                key_start: self.pos,
                                previous_key: None,
                            }
                        } else {
                            Frame::Tuple {
                                children: Vec::with_capacity(n.min(self.remaining())),
                                remaining: n,
                            }
                        };
                        stack.push(frame);
                        continue;
                    }
                }
                _ => unreachable!("the major type has three bits"),
            };

            // Attach the finished value to its parent, closing every
            // compound it completes.
            loop {
                match stack.last_mut() {
                    None => {
                        if self.pos != self.input.len() {
                            return Err(Self::invalid(self.pos, Defect::TrailingBytes));
                        }
                        return Ok(done);
                    }
                    Some(Frame::Tuple {
                        children,
                        remaining,
                    }) => {
                        children.push(done);
                        *remaining -= 1;
                        if *remaining > 0 {
                            break;
                        }
                        let Some(Frame::Tuple { children, .. }) = stack.pop() else {
                            unreachable!("the top frame is a tuple");
                        };
                        done = Value::Tuple(children);
                    }
                    Some(Frame::Map {
                        entries,
                        remaining,
                        key,
                        key_start,
                        previous_key,
                    }) => {
                        let Some(k) = key.take() else {
                            let span = (*key_start, self.pos);
                            if let Some((from, to)) = *previous_key {
                                let previous = &self.input[from..to];
                                let current = &self.input[span.0..span.1];
                                if current == previous {
                                    return Err(Self::invalid(span.0, Defect::DuplicateKey));
                                }
                                if current < previous {
                                    return Err(Self::invalid(span.0, Defect::UnsortedKeys));
                                }
                            }
                            *previous_key = Some(span);
                            *key = Some(done);
                            break;
                        };
                        entries.push((k, done));
                        *remaining -= 1;
                        if *remaining > 0 {
                            break;
                        }
                        let Some(Frame::Map { entries, .. }) = stack.pop() else {
                            unreachable!("the top frame is a map");
                        };
                        done = Value::Map(Map::from_sorted(entries));
                    }
                }
            }
        }
    }
}
