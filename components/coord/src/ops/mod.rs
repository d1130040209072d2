//! The operations.
//!
//! - [`read`]: `resolve`, `children`, `entries`, `get`, `snapshot`.
//! - [`content`]: `retain`, `fetch`.
//! - [`publish`]: `publish` and the writer protocol every record shares.
//! - [`export`]: `export`, resumable by cursor.
//! - [`provision`]: the provisioning verbs and `create_artifact`.

pub mod content;
pub mod export;
pub mod provision;
pub mod publish;
pub mod read;

use crate::backend::CallError;
use crate::facts;
use crate::journal::Space;
use crate::refusal::Refusal;
use crate::request::Decoded;
use crate::world::World;
use crate::{Call, Reply};
use base64::Engine as _;
use serde_json::{json, Value};

pub fn run(call: &mut Call<'_>, decoded: Decoded) -> Result<Reply, Refusal> {
    match (call.op.name, decoded) {
        ("resolve", _) => read::resolve(call),
        ("children", _) => read::children(call),
        ("entries", _) => read::entries(call),
        ("get", _) => read::get(call),
        ("fetch", _) => content::fetch(call),
        ("retain", _) => content::retain(call),
        (_, Decoded::Publish(request)) => publish::publish(call, request),
        (_, Decoded::CreateArtifact(request)) => provision::create_artifact(call, request),
        (_, Decoded::CreateProject(request)) => provision::create_project(call, request),
        (_, Decoded::CreateCampaign(request)) => provision::create_campaign(call, request),
        (_, Decoded::ProvisionWorker(request)) => provision::provision_worker(call, request),
        (_, Decoded::RetireWorker(request)) => provision::retire_worker(call, request),
        (_, Decoded::Assign(request)) => provision::assign(call, request),
        ("snapshot", _) => read::snapshot(call),
        ("export", _) => export::export(call),
        (name, _) => Err(Refusal::NotImplemented(name)),
    }
}

/// A read of a journal refused: `invalid` keeps its field (a cutoff inside
/// a batch or beyond the head); a refused cursor is `invalid_cursor`.
pub fn read_refusal(error: CallError) -> Refusal {
    if let CallError::Refused(r) = &error {
        if r.code == "invalid" {
            let field = r.details["field"].as_str().unwrap_or("through").to_string();
            if field == "cursor" {
                return Refusal::InvalidCursor(r.message.clone());
            }
            return Refusal::invalid(field, r.message.clone());
        }
    }
    error.into_refusal("journal")
}

/// A journal entry as this service reports it: the journal's members plus
/// the decoded member of a profile fact, or `child` for a creation entry.
pub fn entry_json(world: &World, space: &Space, entry: &Value) -> Value {
    let mut out = json!({
        "ref": entry["ref"],
        "origin": entry["origin"],
        "batch": entry["batch"],
        "fact": entry["fact"],
    });
    let Some(bytes) = entry["fact"]
        .as_str()
        .and_then(|b| base64::engine::general_purpose::STANDARD.decode(b).ok())
    else {
        return out;
    };
    if let Ok(Some(fact)) = facts::decode(&bytes) {
        let mut member = fact.to_json();
        member["entry"] = entry["ref"].clone();
        out[fact.member_name()] = member;
    } else if let Some((key, space_id)) = creation(&bytes) {
        let child = Space {
            root_id: space.root_id.clone(),
            space_id,
            path: space.child_path(&key),
        };
        out["child"] = json!({
            "key": key,
            "space": world.space_json(&child),
            "created_at": entry["ref"],
        });
    }
    out
}

/// The key and space ID of the journal's creation fact.
pub(crate) fn creation(bytes: &[u8]) -> Option<(String, String)> {
    use lab_values::Value as V;
    let V::Tuple(items) = lab_values::decode(bytes).ok()? else {
        return None;
    };
    match &items[..] {
        [V::Label(p), V::Text(key), V::Text(id)] if p == lab_values::CREATION_PREDICATE => {
            Some((key.clone(), id.clone()))
        }
        _ => None,
    }
}
