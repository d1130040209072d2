//! Sealed cursors: opaque to callers, authenticated by a secret the
//! service keeps in its store.
//!
//! Text form: URL-safe base64 without padding of
//! `payload ‖ HMAC-SHA256(key, purpose ‖ payload)[..16]`, where the payload
//! is a JSON object holding `scope` and the state the enumeration resumes
//! from. Each enumeration has its own purpose, so a cursor of one is never
//! a cursor of another:
//! - `export` ([`EXPORT`]): `{scope, frontier}`, the scope's space ID and
//!   the name of the retained frontier of the traversal;
//! - `query` ([`QUERY`]): `{scope, ...}`, the scope binding the view and
//!   the filters' digest, the state the next ordinal and running counts.

use crate::refusal::Refusal;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine as _;
use hmac::{Hmac, Mac};
use lab_guest::lab::platform::{ids, kv};
use serde_json::{json, Value};
use sha2::Sha256;

const TABLE: &str = "secret";
const KEY: &[u8] = b"export-cursor";
/// The purpose of export cursors.
pub const EXPORT: &str = "coord.export-cursor.v1";
/// The purpose of query cursors.
pub const QUERY: &str = "coord.query-cursor.v1";
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

fn tag(key: &[u8; 32], purpose: &str, payload: &[u8]) -> Hmac<Sha256> {
    let mut mac = Hmac::<Sha256>::new_from_slice(key).expect("HMAC takes any key");
    mac.update(purpose.as_bytes());
    mac.update(payload);
    mac
}

/// A cursor of the enumeration `purpose` over `scope`, resuming from
/// `state` (an object; its `scope` member is the scope's).
pub fn seal_state(key: &[u8; 32], purpose: &str, scope: &str, state: Value) -> String {
    let mut payload = match state {
        Value::Object(members) => members,
        _ => serde_json::Map::new(),
    };
    payload.insert("scope".into(), json!(scope));
    let mut sealed = serde_json::to_vec(&payload).expect("JSON serializes");
    let tag = tag(key, purpose, &sealed).finalize().into_bytes();
    sealed.extend_from_slice(&tag[..TAG_BYTES]);
    URL_SAFE_NO_PAD.encode(sealed)
}

/// The state of a cursor sealed for `purpose` and `scope`;
/// `invalid_cursor` for anything else.
pub fn open_state(
    key: &[u8; 32],
    purpose: &str,
    scope: &str,
    text: &str,
) -> Result<Value, Refusal> {
    let refuse = || Refusal::InvalidCursor("not a cursor of this enumeration".into());
    if text.len() > MAX_CURSOR_CHARS {
        return Err(refuse());
    }
    let sealed = URL_SAFE_NO_PAD.decode(text).map_err(|_| refuse())?;
    if sealed.len() <= TAG_BYTES || URL_SAFE_NO_PAD.encode(&sealed) != text {
        return Err(refuse());
    }
    let (payload, given) = sealed.split_at(sealed.len() - TAG_BYTES);
    tag(key, purpose, payload)
        .verify_truncated_left(given)
        .map_err(|_| refuse())?;
    let value: Value = serde_json::from_slice(payload).map_err(|_| refuse())?;
    if value["scope"] != scope {
        return Err(refuse());
    }
    Ok(value)
}

/// A cursor resuming the export of `scope` from `frontier`.
pub fn seal(key: &[u8; 32], scope: &str, frontier: &str) -> String {
    seal_state(key, EXPORT, scope, json!({ "frontier": frontier }))
}

/// The frontier name of an export cursor sealed for `scope`;
/// `invalid_cursor` for anything else.
pub fn open(key: &[u8; 32], scope: &str, text: &str) -> Result<String, Refusal> {
    open_state(key, EXPORT, scope, text)?["frontier"]
        .as_str()
        .map(str::to_string)
        .ok_or_else(|| Refusal::InvalidCursor("not a cursor of this export".into()))
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
        // A cursor of another purpose over the same scope is refused.
        let query = seal_state(&key, QUERY, "spc_a", json!({ "frontier": "sha256:00" }));
        assert_eq!(
            open(&key, "spc_a", &query).unwrap_err().code(),
            "invalid_cursor"
        );
        assert_eq!(
            open_state(&key, QUERY, "spc_a", &query).unwrap()["frontier"],
            "sha256:00"
        );
    }
}
