//! Why a body is not strict JSON.

use std::fmt;

/// A refusal from [`parse`](crate::parse()).
///
/// Offsets are byte offsets into the input. For [`Error::InvalidUtf8`] the
/// offset is exact; elsewhere it is derived from the parser's position and
/// points at, or just after, the offending byte.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Error {
    /// The input is empty or holds only JSON whitespace.
    Empty,
    /// The input is not well-formed UTF-8; `offset` is where the first
    /// malformed sequence starts.
    InvalidUtf8 { offset: usize },
    /// The input is not RFC 8259 JSON: malformed tokens, truncation, a
    /// byte-order mark, raw control characters in a string, an unpaired
    /// UTF-16 surrogate escape, or a number outside the range of `f64`.
    /// `line` is 1-based; `column` is the 1-based byte column on that line
    /// (0 when the parser stopped at the start of a line).
    Syntax {
        offset: usize,
        line: usize,
        column: usize,
        message: String,
    },
    /// An object holds two members whose names are equal after unescaping.
    /// `field` is where: the names of the enclosing members from the root,
    /// then `name`, joined by `.` (an array adds no name).
    DuplicateMember {
        name: String,
        field: String,
        offset: usize,
    },
    /// Something other than JSON whitespace follows the value.
    TrailingData { offset: usize },
    /// Arrays and objects nest deeper than `limit`.
    TooDeep { limit: usize, offset: usize },
}

impl Error {
    /// The byte offset the refusal refers to, if it has one.
    pub fn offset(&self) -> Option<usize> {
        match self {
            Error::Empty => None,
            Error::InvalidUtf8 { offset }
            | Error::Syntax { offset, .. }
            | Error::DuplicateMember { offset, .. }
            | Error::TrailingData { offset }
            | Error::TooDeep { offset, .. } => Some(*offset),
        }
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Empty => f.write_str("empty body: expected one JSON value"),
            Error::InvalidUtf8 { offset } => {
                write!(f, "malformed UTF-8 at byte {offset}")
            }
            Error::Syntax {
                line,
                column,
                message,
                ..
            } => write!(f, "invalid JSON at line {line} column {column}: {message}"),
            Error::DuplicateMember { name, .. } => {
                write!(f, "duplicate member name {name:?}")
            }
            Error::TrailingData { offset } => {
                write!(f, "trailing data after the JSON value at byte {offset}")
            }
            Error::TooDeep { limit, .. } => {
                write!(f, "arrays and objects nest deeper than {limit}")
            }
        }
    }
}

impl std::error::Error for Error {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn display_names_the_problem() {
        let cases = [
            (Error::Empty, "empty"),
            (Error::InvalidUtf8 { offset: 3 }, "UTF-8 at byte 3"),
            (
                Error::Syntax {
                    offset: 0,
                    line: 1,
                    column: 1,
                    message: "expected value".into(),
                },
                "line 1 column 1: expected value",
            ),
            (
                Error::DuplicateMember {
                    name: "a".into(),
                    field: "a".into(),
                    offset: 5,
                },
                "duplicate member name \"a\"",
            ),
            (Error::TrailingData { offset: 2 }, "trailing data"),
            (
                Error::TooDeep {
                    limit: 128,
                    offset: 128,
                },
                "deeper than 128",
            ),
        ];
        for (error, fragment) in cases {
            let text = error.to_string();
            assert!(text.contains(fragment), "{text:?} lacks {fragment:?}");
        }
    }

    #[test]
    fn offset_is_absent_only_for_empty() {
        assert_eq!(Error::Empty.offset(), None);
        assert_eq!(Error::TrailingData { offset: 7 }.offset(), Some(7));
    }
}
