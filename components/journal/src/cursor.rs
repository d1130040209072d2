//! Sealed cursors: opaque to callers, authenticated by the instance's secret.
//!
//! Text form: URL-safe base64 without padding of
//! `version (1) ‖ payload ‖ HMAC-SHA256(key, version ‖ payload)[..16]`.
//! A payload starts with a kind byte, so a cursor of one kind never opens as
//! another, and its decoder refuses missing or trailing bytes. Integers are
//! big-endian.

use ::base64::engine::general_purpose::URL_SAFE_NO_PAD;
use ::base64::Engine as _;
use hmac::{Hmac, Mac};
use sha2::Sha256;

use crate::ids::SpaceId;
use crate::refusal::Refusal;
use crate::requests::MAX_CURSOR_CHARS;

type HmacSha256 = Hmac<Sha256>;

/// The format version, the first sealed byte.
const VERSION: u8 = 1;
/// Bytes of the truncated tag.
const TAG_BYTES: usize = 16;
/// Kind byte of a [`ChildrenCursor`] payload.
const KIND_CHILDREN: u8 = 1;
/// Kind byte of a [`QueryCursor`] payload.
const KIND_QUERY: u8 = 2;

/// The instance's cursor secret.
#[derive(Clone)]
pub struct CursorKey(pub [u8; 32]);

impl std::fmt::Debug for CursorKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("CursorKey(..)")
    }
}

fn mac(key: &CursorKey, sealed: &[u8]) -> HmacSha256 {
    let mut mac = HmacSha256::new_from_slice(&key.0).expect("HMAC takes a key of any length");
    mac.update(sealed);
    mac
}

/// Seals `payload` under `key`.
pub fn seal(key: &CursorKey, payload: &[u8]) -> String {
    let mut sealed = Vec::with_capacity(1 + payload.len() + TAG_BYTES);
    sealed.push(VERSION);
    sealed.extend_from_slice(payload);
    let tag = mac(key, &sealed).finalize().into_bytes();
    sealed.extend_from_slice(&tag[..TAG_BYTES]);
    URL_SAFE_NO_PAD.encode(sealed)
}

/// The payload of a cursor sealed under `key`, or `None` for any other
/// text: too long, not canonical unpadded URL-safe base64, too short, another
/// version, or a tag that does not verify (compared in constant time).
pub fn open(key: &CursorKey, text: &str) -> Option<Vec<u8>> {
    if text.len() > MAX_CURSOR_CHARS {
        return None;
    }
    // The engine refuses padding and nonzero unused bits, so each sealed
    // byte string has exactly one accepted text.
    let mut sealed = URL_SAFE_NO_PAD.decode(text).ok()?;
    if sealed.len() < 1 + TAG_BYTES || sealed[0] != VERSION {
        return None;
    }
    let tag = sealed.split_off(sealed.len() - TAG_BYTES);
    mac(key, &sealed).verify_truncated_left(&tag).ok()?;
    sealed.remove(0);
    Some(sealed)
}

/// Where a `children` enumeration continues.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ChildrenCursor {
    pub space: SpaceId,
    /// The observed cutoff.
    pub through: u64,
    /// Creation entries at or before this position have been accounted for.
    pub after_position: u64,
}

impl ChildrenCursor {
    /// Bytes: kind ‖ space (16) ‖ through (8) ‖ after_position (8).
    pub const LEN: usize = 1 + 16 + 8 + 8;

    pub fn to_bytes(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(Self::LEN);
        out.push(KIND_CHILDREN);
        out.extend_from_slice(&self.space.0);
        out.extend_from_slice(&self.through.to_be_bytes());
        out.extend_from_slice(&self.after_position.to_be_bytes());
        out
    }

    pub fn from_bytes(bytes: &[u8]) -> Option<ChildrenCursor> {
        let mut reader = Reader::of_kind(bytes, KIND_CHILDREN, Self::LEN)?;
        Some(ChildrenCursor {
            space: SpaceId(reader.array()?),
            through: u64::from_be_bytes(reader.array()?),
            after_position: u64::from_be_bytes(reader.array()?),
        })
    }
}

/// Where a `query` continues within its manifest.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct QueryCursor {
    pub manifest_digest: [u8; 32],
    pub filter_digest: [u8; 32],
    /// Index into the manifest's spaces.
    pub space_index: u32,
    /// Positions of that space at or before this one have been accounted for.
    pub after: u64,
}

impl QueryCursor {
    /// Bytes: kind ‖ manifest digest (32) ‖ filter digest (32) ‖
    /// space_index (4) ‖ after (8).
    pub const LEN: usize = 1 + 32 + 32 + 4 + 8;

    pub fn to_bytes(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(Self::LEN);
        out.push(KIND_QUERY);
        out.extend_from_slice(&self.manifest_digest);
        out.extend_from_slice(&self.filter_digest);
        out.extend_from_slice(&self.space_index.to_be_bytes());
        out.extend_from_slice(&self.after.to_be_bytes());
        out
    }

    pub fn from_bytes(bytes: &[u8]) -> Option<QueryCursor> {
        let mut reader = Reader::of_kind(bytes, KIND_QUERY, Self::LEN)?;
        Some(QueryCursor {
            manifest_digest: reader.array()?,
            filter_digest: reader.array()?,
            space_index: u32::from_be_bytes(reader.array()?),
            after: u64::from_be_bytes(reader.array()?),
        })
    }
}

/// Reads a payload of exactly `len` bytes whose first byte is `kind`.
struct Reader<'a> {
    rest: &'a [u8],
}

impl<'a> Reader<'a> {
    fn of_kind(bytes: &'a [u8], kind: u8, len: usize) -> Option<Reader<'a>> {
        match bytes.split_first() {
            Some((&first, rest)) if first == kind && bytes.len() == len => Some(Reader { rest }),
            _ => None,
        }
    }

    fn array<const N: usize>(&mut self) -> Option<[u8; N]> {
        let (head, rest) = self.rest.split_first_chunk::<N>()?;
        self.rest = rest;
        Some(*head)
    }
}

fn refused() -> Refusal {
    Refusal::invalid("cursor", "the cursor was not issued for this request")
}

pub fn seal_children(key: &CursorKey, cursor: &ChildrenCursor) -> String {
    seal(key, &cursor.to_bytes())
}

pub fn open_children(key: &CursorKey, text: &str) -> Result<ChildrenCursor, Refusal> {
    open(key, text)
        .and_then(|payload| ChildrenCursor::from_bytes(&payload))
        .ok_or_else(refused)
}

pub fn seal_query(key: &CursorKey, cursor: &QueryCursor) -> String {
    seal(key, &cursor.to_bytes())
}

pub fn open_query(key: &CursorKey, text: &str) -> Result<QueryCursor, Refusal> {
    open(key, text)
        .and_then(|payload| QueryCursor::from_bytes(&payload))
        .ok_or_else(refused)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::requests::tests::assert_invalid;

    const KEY: CursorKey = CursorKey([7; 32]);

    fn children() -> ChildrenCursor {
        ChildrenCursor {
            space: SpaceId([0xab; 16]),
            through: 9_007_199_254_740_991,
            after_position: 42,
        }
    }

    fn query() -> QueryCursor {
        QueryCursor {
            manifest_digest: [1; 32],
            filter_digest: [2; 32],
            space_index: 4095,
            after: 7,
        }
    }

    #[test]
    fn round_trips() {
        let text = seal_children(&KEY, &children());
        assert_eq!(open_children(&KEY, &text), Ok(children()));
        let text = seal_query(&KEY, &query());
        assert_eq!(open_query(&KEY, &text), Ok(query()));
        assert_eq!(open(&KEY, &seal(&KEY, b"")), Some(Vec::new()));
        assert_eq!(open(&KEY, &seal(&KEY, b"xyz")), Some(b"xyz".to_vec()));
    }

    #[test]
    fn text_form() {
        let text = seal_children(&KEY, &children());
        assert_eq!(
            text.len(),
            (1 + ChildrenCursor::LEN + TAG_BYTES) * 4 / 3 + 1
        );
        assert!(text
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_'));
        let sealed = URL_SAFE_NO_PAD.decode(&text).unwrap();
        assert_eq!(sealed[0], VERSION);
        assert_eq!(&sealed[1..1 + ChildrenCursor::LEN], children().to_bytes());
        // The tag is the left half of HMAC-SHA256 over version ‖ payload.
        let mut mac = HmacSha256::new_from_slice(&KEY.0).unwrap();
        mac.update(&sealed[..1 + ChildrenCursor::LEN]);
        let full = mac.finalize().into_bytes();
        assert_eq!(&sealed[1 + ChildrenCursor::LEN..], &full[..TAG_BYTES]);
        assert_eq!(seal_children(&KEY, &children()), text);
        assert!(seal_query(&KEY, &query()).len() <= MAX_CURSOR_CHARS);
    }

    #[test]
    fn flipped_bytes_are_refused() {
        let text = seal_query(&KEY, &query());
        let sealed = URL_SAFE_NO_PAD.decode(&text).unwrap();
        for i in 0..sealed.len() {
            for bit in 0..8 {
                let mut tampered = sealed.clone();
                tampered[i] ^= 1 << bit;
                let tampered = URL_SAFE_NO_PAD.encode(&tampered);
                assert_eq!(open(&KEY, &tampered), None, "byte {i} bit {bit}");
                assert_invalid(open_query(&KEY, &tampered), "cursor");
            }
        }
    }

    #[test]
    fn altered_text_is_refused() {
        let text = seal_children(&KEY, &children());
        let alphabet = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_+/=. ";
        for i in 0..text.len() {
            for &c in alphabet {
                if text.as_bytes()[i] == c {
                    continue;
                }
                let mut altered = text.clone().into_bytes();
                altered[i] = c;
                let altered = String::from_utf8(altered).unwrap();
                assert_eq!(open(&KEY, &altered), None, "{altered}");
            }
        }
        for cut in 0..text.len() {
            assert_eq!(open(&KEY, &text[..cut]), None, "cut at {cut}");
        }
        for extra in ["A", "AA", "=", "==", " ", "\n"] {
            assert_eq!(open(&KEY, &format!("{text}{extra}")), None);
        }
        assert_eq!(open(&KEY, &format!("{text}é")), None);
    }

    #[test]
    fn truncated_and_extended_payloads_are_refused() {
        let bytes = children().to_bytes();
        for cut in 0..bytes.len() {
            let text = seal(&KEY, &bytes[..cut]);
            assert_invalid(open_children(&KEY, &text), "cursor");
        }
        let mut longer = bytes.clone();
        longer.push(0);
        assert_invalid(open_children(&KEY, &seal(&KEY, &longer)), "cursor");
        let mut longer = query().to_bytes();
        longer.push(0);
        assert_invalid(open_query(&KEY, &seal(&KEY, &longer)), "cursor");
        assert_eq!(ChildrenCursor::from_bytes(&bytes), Some(children()));
        assert_eq!(ChildrenCursor::from_bytes(&[]), None);
    }

    #[test]
    fn other_key_and_other_kind_are_refused() {
        let other = CursorKey([8; 32]);
        let text = seal_children(&KEY, &children());
        assert_invalid(open_children(&other, &text), "cursor");
        assert_invalid(open_query(&KEY, &text), "cursor");
        let text = seal_query(&KEY, &query());
        assert_invalid(open_query(&other, &text), "cursor");
        assert_invalid(open_children(&KEY, &text), "cursor");
        // A payload of the right length under the wrong kind byte.
        let mut relabeled = query().to_bytes();
        relabeled[0] = KIND_CHILDREN;
        assert_invalid(open_query(&KEY, &seal(&KEY, &relabeled)), "cursor");
        let mut relabeled = children().to_bytes();
        relabeled[0] = KIND_QUERY;
        assert_invalid(open_children(&KEY, &seal(&KEY, &relabeled)), "cursor");
        assert_eq!(format!("{KEY:?}"), "CursorKey(..)");
    }

    #[test]
    fn other_versions_and_garbage_are_refused() {
        let mut sealed = vec![2u8];
        sealed.extend_from_slice(&children().to_bytes());
        let mut mac = HmacSha256::new_from_slice(&KEY.0).unwrap();
        mac.update(&sealed);
        sealed.extend_from_slice(&mac.finalize().into_bytes()[..TAG_BYTES]);
        assert_eq!(open(&KEY, &URL_SAFE_NO_PAD.encode(&sealed)), None);
        for garbage in [
            "",
            "A",
            "AAAA",
            "====",
            "!!!!",
            &"A".repeat(MAX_CURSOR_CHARS + 4),
        ] {
            assert_eq!(open(&KEY, garbage), None, "{garbage}");
            assert_invalid(open_children(&KEY, garbage), "cursor");
        }
        // Arbitrary inputs never panic.
        let mut state = 0x9e37_79b9_7f4a_7c15u64;
        for len in 0..200 {
            let text: String = (0..len)
                .map(|_| {
                    state ^= state << 13;
                    state ^= state >> 7;
                    state ^= state << 17;
                    char::from(b"AZaz09-_=+/ \xc3"[(state % 13) as usize] & 0x7f)
                })
                .collect();
            assert_eq!(open(&KEY, &text), None);
        }
    }
}
