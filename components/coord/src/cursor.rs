//! Sealed export cursors: opaque to callers, authenticated by a secret the
//! service keeps in its store.
//!
//! Text form: URL-safe base64 without padding of
//! `payload ‖ HMAC-SHA256(key, "coord.export-cursor.v1" ‖ payload)[..16]`,
//! where the payload is the JSON `{scope, frontier}`: the scope's space ID
//! and the name of the retained frontier of the traversal.

use crate::refusal::Refusal;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine as _;
use hmac::{Hmac, Mac};
use lab_guest::lab::platform::{ids, kv};
use serde_json::{json, Value};
use sha2::Sha256;

const TABLE: &str = "secret";
const KEY: &[u8] = b"export-cursor";
const PURPOSE: &[u8] = b"coord.export-cursor.v1";
const TAG_BYTES: usize = 16;
/// Greatest cursor length accepted.
pub const MAX_CURSOR_CHARS: usize = 4096;

/// The service's cursor secret, created on first use.
pub fn secret() -> Result<[u8; 32], Refusal> {
    let stored = kv::begin_read().and_then(|t| t.get(TABLE, KEY))?;
    if let Some(bytes) = stored {
        return bytes
            .try_into()
            .map_err(|_| Refusal::Internal("the cursor secret is malformed".into()));
    }
    let txn = kv::begin_write()?;
    if let Some(bytes) = txn.get(TABLE, KEY)? {
        txn.commit()?;
        return bytes
            .try_into()
            .map_err(|_| Refusal::Internal("the cursor secret is malformed".into()));
    }
    let fresh: [u8; 32] = ids::random_bytes(32)
        .try_into()
        .map_err(|_| Refusal::Internal("the host gave too few random bytes".into()))?;
    txn.commit_with(&[kv::TableWrite {
        table: TABLE.into(),
        key: KEY.to_vec(),
        value: fresh.to_vec(),
    }])?;
    Ok(fresh)
}

fn tag(key: &[u8; 32], payload: &[u8]) -> Hmac<Sha256> {
    let mut mac = Hmac::<Sha256>::new_from_slice(key).expect("HMAC takes any key");
    mac.update(PURPOSE);
    mac.update(payload);
    mac
}

/// A cursor resuming the traversal of `scope` from `frontier`.
pub fn seal(key: &[u8; 32], scope: &str, frontier: &str) -> String {
    let mut sealed = serde_json::to_vec(&json!({ "scope": scope, "frontier": frontier }))
        .expect("JSON serializes");
    let tag = tag(key, &sealed).finalize().into_bytes();
    sealed.extend_from_slice(&tag[..TAG_BYTES]);
    URL_SAFE_NO_PAD.encode(sealed)
}

/// The frontier name of a cursor sealed for `scope`; `invalid_cursor` for
/// anything else.
pub fn open(key: &[u8; 32], scope: &str, text: &str) -> Result<String, Refusal> {
    let refuse = || Refusal::InvalidCursor("not a cursor of this export".into());
    if text.len() > MAX_CURSOR_CHARS {
        return Err(refuse());
    }
    let sealed = URL_SAFE_NO_PAD.decode(text).map_err(|_| refuse())?;
    if sealed.len() <= TAG_BYTES || URL_SAFE_NO_PAD.encode(&sealed) != text {
        return Err(refuse());
    }
    let (payload, given) = sealed.split_at(sealed.len() - TAG_BYTES);
    tag(key, payload)
        .verify_truncated_left(given)
        .map_err(|_| refuse())?;
    let value: Value = serde_json::from_slice(payload).map_err(|_| refuse())?;
    if value["scope"] != scope {
        return Err(refuse());
    }
    value["frontier"]
        .as_str()
        .map(str::to_string)
        .ok_or_else(refuse)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_tampering() {
        let key = [7u8; 32];
        let cursor = seal(&key, "spc_a", "sha256:00");
        assert_eq!(open(&key, "spc_a", &cursor).unwrap(), "sha256:00");
        assert_eq!(
            open(&key, "spc_b", &cursor).unwrap_err().code(),
            "invalid_cursor"
        );
        assert_eq!(
            open(&[8u8; 32], "spc_a", &cursor).unwrap_err().code(),
            "invalid_cursor"
        );
        let mut bytes = URL_SAFE_NO_PAD.decode(&cursor).unwrap();
        bytes[3] ^= 1;
        let forged = URL_SAFE_NO_PAD.encode(&bytes);
        assert_eq!(
            open(&key, "spc_a", &forged).unwrap_err().code(),
            "invalid_cursor"
        );
        assert_eq!(
            open(&key, "spc_a", &cursor[..cursor.len() - 2])
                .unwrap_err()
                .code(),
            "invalid_cursor"
        );
        assert_eq!(
            open(&key, "spc_a", "").unwrap_err().code(),
            "invalid_cursor"
        );
    }
}
