//! What every service component does around its operations.
//!
//! - [`body`]: whole request bodies within a bound.
//! - [`contract`]: the embedded contract files `describe/{file}` serves.
//! - [`hex`]: lowercase hexadecimal.
//! - [`path`]: clean-path checks and route segments.
//! - [`query`]: strict query-string parameters.
//! - [`reply`]: responses carrying the service's headers, JSON and error bodies.
//! - [`time`]: RFC 3339 rendering of the host clock.
//! - [`health`]: the health envelope and build facts.

pub mod body;
pub mod contract;
pub mod health;
pub mod hex;
pub mod path;
pub mod query;
pub mod reply;
pub mod time;

pub use lab_guest::exports::lab::platform::handler::{
    BlobSlice, BodyPart, Request, Response, ServiceIdentity,
};
pub use lab_guest::lab::platform::types::Header;

/// The value of header `name` (lowercase) in `request`: none when absent, an
/// error when it is given more than once.
pub fn header<'r>(request: &'r Request, name: &str) -> Result<Option<&'r [u8]>, String> {
    let mut found = request.headers.iter().filter(|h| h.name == name);
    let first = found.next();
    match found.next() {
        Some(_) => Err(format!("header `{name}` is given more than once")),
        None => Ok(first.map(|h| h.value.as_slice())),
    }
}

/// Checks the request's `content-type`: absent, or `media_type` with nothing
/// but an optional UTF-8 charset parameter.
pub fn check_content_type(request: &Request, media_type: &str) -> Result<(), String> {
    match header(request, "content-type")? {
        Some(value) if !is_media_type(value, media_type) => {
            Err(format!("content-type must be {media_type}"))
        }
        _ => Ok(()),
    }
}

/// Whether a `content-type` value names `media_type`, with nothing but an
/// optional UTF-8 charset parameter. An absent header is accepted by callers
/// that allow omission.
pub fn is_media_type(value: &[u8], media_type: &str) -> bool {
    let Ok(value) = std::str::from_utf8(value) else {
        return false;
    };
    let mut parts = value.split(';');
    let essence = parts.next().unwrap_or("").trim();
    if !essence.eq_ignore_ascii_case(media_type) {
        return false;
    }
    parts.all(|param| {
        let (name, val) = param.split_once('=').unwrap_or((param, ""));
        name.trim().eq_ignore_ascii_case("charset")
            && val.trim().trim_matches('"').eq_ignore_ascii_case("utf-8")
    })
}
