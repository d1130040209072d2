//! `subscribe` and `unsubscribe`: the socket-only operations
//! (`contracts/coordination/WS.md`, "Subscriptions"). Each takes the
//! socket connection the call arrived on; the host's hub holds the
//! subscriptions and writes their frames (`subscriptions` in `wit/`).
//!
//! - `subscribe` is authorized once, by `read` on the request's path; the
//!   subscription lasts until `Authorization::valid_until` (the latest
//!   expiry among the grants that authorize it), until one of the carried
//!   grants is revoked (`retire_worker`), or until its connection ends.
//! - `unsubscribe`'s authority is ownership: the proof is verified (steps
//!   1 to 4, so a forged or replayed call changes nothing) but no grant
//!   chain is looked for; only the connection that opened a subscription
//!   can name it, and any other ID is `not_found`.

use crate::refusal::Refusal;
use crate::request::SubscribeRequest;
use crate::{Call, Reply};
use lab_coord_auth::GrantKind;
use lab_guest::lab::platform::{ids, subscriptions};
use serde_json::json;

/// `sub_` and 32 lowercase hex digits drawn at random (WS.md decision 2).
fn fresh_id() -> String {
    format!("sub_{}", lab_kit::hex::encode_lower(&ids::random_bytes(16)))
}

/// The socket connection of a call; none over HTTP, which has no route
/// to these operations.
fn connection(call: &Call<'_>) -> Result<u64, Refusal> {
    call.connection
        .ok_or_else(|| Refusal::Internal("a socket-only operation outside a socket".into()))
}

pub fn subscribe(call: &mut Call<'_>, request: SubscribeRequest) -> Result<Reply, Refusal> {
    let connection = connection(call)?;
    call.authenticate()?;
    // Authorized before the path is resolved: `denied` never depends on
    // whether the scope exists (request rule 10).
    let authorization = call.authorize(GrantKind::Read, &request.path)?;
    let space = call
        .world
        .resolve(&request.path)?
        .ok_or_else(|| Refusal::NotFound("no space at this path".into()))?;
    let scope = subscriptions::Scope {
        prefix: space.path.clone(),
        // A depth beyond every path a journal can hold is no bound.
        depth: request.depth.and_then(|d| u32::try_from(d).ok()),
        hidden: u32::try_from(call.world.world.path.len())
            .map_err(|_| Refusal::Internal("the world's path is too deep".into()))?,
        root_id: space.root_id.clone(),
        space_id: space.space_id.clone(),
    };
    // Every grant the call carried: a chain through any of them that is
    // revoked no longer authorizes, and the chain that authorized this
    // subscription is among them.
    let grants = &call.known_grants()?.digests;
    let id = fresh_id();
    subscriptions::open(connection, &id, &scope, authorization.valid_until, grants).map_err(
        |e| match e {
            subscriptions::OpenError::LimitExceeded => Refusal::LimitExceeded(
                "this connection holds 16 subscriptions, the most it may".into(),
            ),
            subscriptions::OpenError::Unavailable(why) => Refusal::Unavailable(why),
            subscriptions::OpenError::Closed => {
                Refusal::Unavailable("the connection is closing".into())
            }
        },
    )?;
    Ok(Reply::Json(
        200,
        json!({ "subscription": id, "expires_at": authorization.valid_until }),
    ))
}

pub fn unsubscribe(call: &mut Call<'_>) -> Result<Reply, Refusal> {
    let connection = connection(call)?;
    call.authenticate()?;
    let id = call
        .query
        .string("subscription")
        .ok_or_else(|| Refusal::invalid("subscription", "`subscription` is required"))?
        .to_string();
    // The `closed` frame is queued before this returns, so it precedes
    // the reply.
    if !subscriptions::close(connection, &id) {
        return Err(Refusal::NotFound(
            "this connection holds no such subscription".into(),
        ));
    }
    Ok(Reply::Json(200, json!({ "subscription": id })))
}
