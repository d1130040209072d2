//! The reuse index (HTTP.md decision 33): in the service's store, the
//! reuse key of a completed application of a deterministic release →
//! that application's leaf and attempt.
//!
//! Invariants: a row is written only after the application's completion
//! batch (`result` with outcome `completed`) is committed, so it is derived
//! from facts; a row is a hint, never trusted: before it is used, the
//! earlier leaf's own facts must show the same release, the same bound
//! occurrences, the same recipe and a `completed` result (`ops::apply`).
//! A missing row (a crash between the result and the row, a lost store)
//! costs one run and is written again by that run, so the index rebuilds
//! itself from use; a stale row is refused by the check and overwritten.

use crate::application::Input;
use crate::facts::{EntryRef, Hash};
use crate::journal::Space;
use crate::refusal::Refusal;
use lab_coord_auth::canonical_json;
use lab_guest::lab::platform::kv;
use serde_json::{json, Value};

const TABLE: &str = "application-reuse";

/// The `purpose` of the document a reuse key hashes.
pub const KEY_PURPOSE: &str = "coord.reuse-key.v1";

/// Whether applications of a release with this description may be reused.
pub fn deterministic(description: &Value) -> bool {
    description["deterministic"] == true
}

/// SHA-256 of the RFC 8785 JSON `{purpose, project, release, inputs,
/// recipe}`: `project` the space ID of the application's project (reuse
/// never crosses projects, whose readers differ), `inputs` role → exact
/// occurrence, `recipe` as given.
pub fn key(project: &Space, release: &EntryRef, inputs: &[Input], recipe: &Value) -> Hash {
    let inputs: serde_json::Map<String, Value> = inputs
        .iter()
        .map(|i| (i.role.clone(), i.entry.to_json()))
        .collect();
    Hash::of(&canonical_json(&json!({
        "purpose": KEY_PURPOSE,
        "project": project.space_id,
        "release": release.to_json(),
        "inputs": inputs,
        "recipe": recipe,
    })))
}

/// The application a row names: its leaf and its attempt occurrence.
pub fn lookup(key: &Hash) -> Result<Option<(Space, EntryRef)>, Refusal> {
    let stored = kv::begin_read().and_then(|txn| txn.get(TABLE, &key.0))?;
    let Some(stored) = stored else {
        return Ok(None);
    };
    let unreadable = || Refusal::Unavailable("unreadable reuse index row".into());
    let stored: Value = serde_json::from_slice(&stored).map_err(|_| unreadable())?;
    let leaf = Space::from_json(&stored["leaf"]).map_err(|_| unreadable())?;
    let application = EntryRef::from_json(&stored["application"]).map_err(|_| unreadable())?;
    Ok(Some((leaf, application)))
}

/// The row naming the completed application `application` of `leaf`
/// under `key`, for the caller's commit.
pub fn row(key: &Hash, leaf: &Space, application: &EntryRef) -> kv::TableWrite {
    let value = json!({ "leaf": leaf.to_json(), "application": application.to_json() });
    kv::TableWrite {
        table: TABLE.into(),
        key: key.0.to_vec(),
        value: value.to_string().into_bytes(),
    }
}
