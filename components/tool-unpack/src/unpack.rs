//! Unpacking: each regular member with a safe relative path goes to the
//! sink, in archive order; every member (written or skipped, with the
//! reason) goes to the index.

use crate::source::{Gunzip, Prefixed, Source, GZIP_MAGIC};
use crate::tar::{Header, Kind, Reader};
use alloc::format;
use alloc::string::String;
use alloc::vec;
use alloc::vec::Vec;
use serde_json::{json, Value};
use sha2::{Digest, Sha256};

/// Where the members' bytes go.
pub trait Sink {
    /// A new member output; `write` appends to the last one begun.
    fn begin(&mut self);
    fn write(&mut self, bytes: &[u8]);
}

const CHUNK: usize = 64 << 10;

/// Unpacks `source` (tar, or gzip-compressed tar by its magic) into `sink`
/// and answers the index: `{"members": [...]}` in archive order, each
/// `{path, type, size, mode}` with `ordinal` and `sha256` when written, or
/// `skipped` with the reason.
pub fn unpack<S: Source>(mut source: S, sink: &mut impl Sink) -> Result<Value, String> {
    let mut magic = vec![0u8; 2];
    let filled = match source.read_full(&mut magic)? {
        Ok(()) => 2,
        Err(n) => n,
    };
    magic.truncate(filled);
    let gzip = magic == GZIP_MAGIC;
    let source = Prefixed {
        prefix: magic,
        inner: source,
    };
    if gzip {
        let mut reader = Reader::new(Gunzip::new(source)?);
        let index = members(&mut reader, sink)?;
        // The rest of the stream, so its CRC-32 and length are checked:
        // a corrupt or cut archive is refused even past the tar's end.
        let mut rest = reader.into_inner();
        let mut scratch = vec![0u8; CHUNK];
        while rest.read(&mut scratch)? > 0 {}
        Ok(index)
    } else {
        members(&mut Reader::new(source), sink)
    }
}

fn members<S: Source>(reader: &mut Reader<S>, sink: &mut impl Sink) -> Result<Value, String> {
    let mut index = Vec::new();
    let mut ordinal = 0u64;
    let mut buf = vec![0u8; CHUNK];
    while let Some(header) = reader.next_member()? {
        let path = display_path(&header.path);
        let mut entry = json!({
            "path": path,
            "type": header.kind.name(),
            "size": header.size,
            "mode": format!("{:04o}", header.mode),
        });
        match skip_reason(&header) {
            Some(reason) => entry["skipped"] = reason.into(),
            None => {
                sink.begin();
                let mut hash = Sha256::new();
                loop {
                    let n = reader.data(&mut buf)?;
                    if n == 0 {
                        break;
                    }
                    hash.update(&buf[..n]);
                    sink.write(&buf[..n]);
                }
                entry["ordinal"] = ordinal.into();
                entry["sha256"] = hex(&hash.finalize()).into();
                ordinal += 1;
            }
        }
        index.push(entry);
    }
    Ok(json!({ "members": index }))
}

/// Why a member is not written, if it is not.
fn skip_reason(header: &Header) -> Option<String> {
    match header.kind {
        Kind::File => {}
        Kind::HardLink | Kind::Symlink => {
            let link = String::from_utf8_lossy(&header.link);
            return Some(format!("link to `{link}`"));
        }
        Kind::CharDevice | Kind::BlockDevice | Kind::Fifo => return Some("device".into()),
        Kind::Directory => return Some("directory".into()),
        Kind::Other(_) => return Some("unknown member type".into()),
    }
    let path = strip_dot(&header.path);
    if path.is_empty() {
        return Some("empty path".into());
    }
    if path.starts_with(b"/") {
        return Some("absolute path".into());
    }
    if path.split(|&b| b == b'/').any(|part| part == b"..") {
        return Some("`..` in path".into());
    }
    None
}

/// The path without leading `./`.
fn strip_dot(mut path: &[u8]) -> &[u8] {
    while let Some(rest) = path.strip_prefix(b"./") {
        path = rest;
    }
    path
}

/// The path as text (invalid UTF-8 replaced by U+FFFD), without leading `./`.
fn display_path(path: &[u8]) -> String {
    String::from_utf8_lossy(strip_dot(path)).into_owned()
}

fn hex(bytes: &[u8]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut out = String::with_capacity(bytes.len() * 2);
    for &b in bytes {
        out.push(DIGITS[usize::from(b >> 4)] as char);
        out.push(DIGITS[usize::from(b & 15)] as char);
    }
    out
}
