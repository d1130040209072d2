//! The seven operations. Each takes its decoded request and answers a status
//! and a JSON result (pages as JSON text, see [`crate::page_json`]), or a
//! refusal.
//!
//! - [`mutate`]: `create`, `append` (receipts, preconditions, one commit).
//! - [`tree`]: `resolve`, `children`, `head`.
//! - [`pages`]: `read`, `query`.

pub mod mutate;
pub mod pages;
pub mod tree;

use crate::ids::{RootId, SpaceId};
use crate::refusal::Refusal;
use crate::requests::SpaceRef;
use crate::store::{self, Identity, Reads, SpaceRecord};
use serde_json::{json, Value};

/// A success: the status and the result document.
pub type Answer = Result<(u16, Value), Refusal>;

/// A success whose result document is already JSON text.
pub type Encoded = Result<(u16, Vec<u8>), Refusal>;

/// What an operation answers once it left its answer to its batch's
/// outcome (`kv.submit-sequenced`): the host sets this status and body
/// aside for the answer the outcome picks.
pub const LEFT_TO_THE_BATCH: (u16, Vec<u8>) = (201, Vec::new());

/// The provisioned identity; a store that has none cannot serve.
pub fn identity(r: &impl Reads) -> Result<Identity, Refusal> {
    store::identity(r)?
        .ok_or_else(|| Refusal::Unavailable("the hierarchy is not provisioned".into()))
}

/// The space a reference names, checked against the one root.
pub fn existing_space(
    r: &impl Reads,
    identity: &Identity,
    space: &SpaceRef,
) -> Result<SpaceRecord, Refusal> {
    if space.root != identity.root {
        return Err(Refusal::NotFound("no such root".into()));
    }
    store::space(r, space.space)?.ok_or_else(|| Refusal::NotFound("no such space".into()))
}

/// The cutoff of an existing space.
pub fn cutoff(r: &impl Reads, space: SpaceId) -> Result<u64, Refusal> {
    store::head(r, space)?.ok_or_else(|| Refusal::Internal("a space without a head".into()))
}

pub fn space_ref_json(root: RootId, space: SpaceId) -> Value {
    json!({ "root_id": root.to_string(), "space_id": space.to_string() })
}

pub fn space_json(root: RootId, space: SpaceId, path: &[String]) -> Value {
    json!({ "root_id": root.to_string(), "space_id": space.to_string(), "path": path })
}

pub fn entry_ref_json(root: RootId, space: SpaceId, position: u64) -> Value {
    json!({ "root_id": root.to_string(), "space_id": space.to_string(), "position": position })
}

/// Whether `position` is a cutoff of the space: 0, or the last position of a
/// committed batch at or before `cutoff`.
pub fn is_cutoff(
    r: &impl Reads,
    space: SpaceId,
    position: u64,
    cutoff: u64,
) -> Result<bool, Refusal> {
    if position == 0 {
        return Ok(true);
    }
    if position > cutoff {
        return Ok(false);
    }
    Ok(store::entry(r, space, position)?.is_some_and(|e| e.last == position))
}
