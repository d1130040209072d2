//! The operations.
//!
//! - [`read`]: `resolve`, `children`, `entries`, `get`, `snapshot`.
//! - [`content`]: `retain`, `fetch`.
//! - [`publish`]: `publish` and the writer protocol every record shares.
//! - [`export`]: `export`, resumable by cursor.
//! - [`provision`]: the provisioning verbs and `create_artifact`.
//! - [`declare`]: `declare`, its admission and its replay.
//! - [`views`]: `compose`, `query`, `explain`.
//! - [`apply`]: `apply`: attempt, run, outputs, completion, attestation.
//! - [`subscriptions`]: `subscribe`, `unsubscribe` (socket only).

pub mod apply;
pub mod content;
pub mod declare;
pub mod export;
pub mod provision;
pub mod publish;
pub mod read;
pub mod subscriptions;
pub mod views;

use crate::backend::CallError;
use crate::facts;
use crate::journal::Space;
use crate::refusal::Refusal;
use crate::request::{
    self, ApplyRequest, AssignRequest, ComposeRequest, CreateArtifactRequest,
    CreateCampaignRequest, CreateProjectRequest, DeclareRequest, Decoded, ExplainRequest,
    ProvisionWorkerRequest, PublishRequest, QueryRequest, RetireWorkerRequest, SubscribeRequest,
};
use crate::table::Serve;
use crate::world::World;
use crate::{Call, Reply};
use base64::Engine as _;
use serde_json::{json, Value};

/// A request type of a JSON operation, paired with its strict decoder and
/// its handler: a table row names the type ([`json`]), so a decoder can
/// reach no other handler.
pub trait JsonOperation: Sized + Into<Decoded> {
    fn decode(body: &[u8]) -> Result<Self, Refusal>;
    fn handle(self, call: &mut Call<'_>) -> Result<Reply, Refusal>;
}

/// How a table row serves the JSON operation of request type `R`.
pub const fn json<R: JsonOperation>() -> Serve {
    Serve::Json {
        decode: decode_json::<R>,
        run: run_json::<R>,
    }
}

fn decode_json<R: JsonOperation>(body: &[u8]) -> Result<Decoded, Refusal> {
    R::decode(body).map(Into::into)
}

/// Decodes the body of an authenticated call, lets the body go (it may be
/// most of an instance's memory), and handles the request.
fn run_json<R: JsonOperation>(call: &mut Call<'_>) -> Result<Reply, Refusal> {
    let body = std::mem::take(&mut call.json_body);
    let request = R::decode(&body)?;
    drop(body);
    request.handle(call)
}

impl JsonOperation for PublishRequest {
    /// From the body's bytes: its record is never a value tree.
    fn decode(body: &[u8]) -> Result<Self, Refusal> {
        request::publish(body)
    }
    fn handle(self, call: &mut Call<'_>) -> Result<Reply, Refusal> {
        publish::publish(call, self)
    }
}

impl JsonOperation for DeclareRequest {
    /// Keeps the body's exact bytes: the admission carries them.
    fn decode(body: &[u8]) -> Result<Self, Refusal> {
        request::declare(body)
    }
    fn handle(self, call: &mut Call<'_>) -> Result<Reply, Refusal> {
        declare::declare(call, self)
    }
}

/// Each other JSON request type with the decoder of its body's tree and
/// its handler.
macro_rules! json_operations {
    ($($request:ident => $decode:path, $handle:path;)*) => {$(
        impl JsonOperation for $request {
            fn decode(body: &[u8]) -> Result<Self, Refusal> {
                $decode(request::object(body)?)
            }
            fn handle(self, call: &mut Call<'_>) -> Result<Reply, Refusal> {
                $handle(call, self)
            }
        }
    )*};
}

json_operations! {
    CreateArtifactRequest => request::create_artifact, provision::create_artifact;
    CreateProjectRequest => request::create_project, provision::create_project;
    CreateCampaignRequest => request::create_campaign, provision::create_campaign;
    ProvisionWorkerRequest => request::provision_worker, provision::provision_worker;
    RetireWorkerRequest => request::retire_worker, provision::retire_worker;
    AssignRequest => request::assign, provision::assign;
    ComposeRequest => request::compose, views::compose;
    QueryRequest => request::query, views::query;
    ExplainRequest => request::explain, views::explain;
    ApplyRequest => request::apply, apply::apply;
    SubscribeRequest => request::subscribe, subscriptions::subscribe;
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
