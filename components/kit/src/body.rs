//! Whole request bodies, within a bound.

use lab_guest::lab::platform::body::{BodyError, IncomingBody};

/// Body reads move at most this much at once.
const READ_CHUNK: u32 = 256 << 10;

/// Why a body was not read whole.
#[derive(Debug)]
pub enum ReadError {
    /// More than the bound, declared up front or as it arrived; the rest is
    /// left unread.
    TooLarge,
    /// The body broke off before its end.
    Broken(BodyError),
}

/// The rest of `body`, refused as soon as it is known to exceed `max` bytes.
pub fn read_to_end(body: &IncomingBody, max: u64) -> Result<Vec<u8>, ReadError> {
    read_declared_to_end(body, body.declared_length(), max)
}

/// [`read_to_end`] of a body whose declared length the caller asked for
/// already (`declared`). A body read whole up to its declared length is
/// at its end: the request's framing holds no more, so no read is spent
/// on seeing the end.
pub fn read_declared_to_end(
    body: &IncomingBody,
    declared: Option<u64>,
    max: u64,
) -> Result<Vec<u8>, ReadError> {
    if declared.is_some_and(|n| n > max) {
        return Err(ReadError::TooLarge);
    }
    // A declared length is reserved exactly: a body near the bound must not
    // grow its buffer to twice its size.
    let mut bytes = Vec::with_capacity(declared.unwrap_or(0) as usize);
    while declared != Some(bytes.len() as u64) {
        let chunk = body.read(READ_CHUNK).map_err(ReadError::Broken)?;
        if chunk.is_empty() {
            break;
        }
        bytes.extend_from_slice(&chunk);
        if bytes.len() as u64 > max {
            return Err(ReadError::TooLarge);
        }
    }
    Ok(bytes)
}
