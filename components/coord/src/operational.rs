//! The operational routes: no credentials (a `Svc-Auth` header on them is
//! ignored), no body.

use crate::backend::call_json;
use crate::refusal::{self, Refusal};
use crate::world::{self, Settings};
use crate::REPLY;
use lab_guest::exports::lab::platform::handler::{Request, Response};
use lab_guest::lab::platform::runtime;
use lab_kit::contract::Contract;
use lab_kit::health::{self, Check};
use serde_json::{json, Value};

include!(concat!(env!("OUT_DIR"), "/contract_files.rs"));

/// The coordination service's contract files.
pub const CONTRACT: Contract = Contract { files: FILES };

pub fn route(segments: &[&str], request: &Request) -> Response {
    let name = match segments {
        ["livez"] => "livez",
        ["healthz"] => "healthz",
        ["describe"] => "describe",
        ["describe", _, ..] => "describe_file",
        _ => return crate::refuse(None, &Refusal::NotFound("no such route".into())),
    };
    if request.method != "GET" {
        return REPLY.method_not_allowed("invalid", "GET");
    }
    match name {
        "livez" => livez(),
        "healthz" => healthz(),
        "describe" => describe(),
        _ => CONTRACT.serve(&REPLY, &request.path),
    }
}

/// The world's identity, when it is provisioned.
fn identity() -> Value {
    let Ok(settings) = Settings::load() else {
        return Value::Null;
    };
    match world::world(&settings) {
        Ok(world) => json!({
            "root_id": world.root_id,
            "world_space_id": world.world.space_id,
            "journal_instance_id": world.instance_id,
            "world": world.name,
        }),
        Err(_) => Value::Null,
    }
}

fn livez() -> Response {
    let (_, body) = health::envelope(
        REPLY.service,
        REPLY.contract,
        &[],
        &[("identity", identity())],
    );
    REPLY.json(200, &body, Some("livez"))
}

/// One backend's check: it answers `livez` as itself (and, for the
/// journal, with the identity the world was provisioned in).
fn backend_check(name: &'static str) -> Check {
    let failure = match call_json(name, "GET", "/livez", Vec::new(), "application/json") {
        Ok(_) => None,
        Err(e) => Some(format!("{e:?}")),
    };
    Check { name, failure }
}

fn healthz() -> Response {
    let mut journal = backend_check("journal");
    let identity = identity();
    if journal.failure.is_none() && identity.is_null() {
        journal.failure = Some("the world is not provisioned in the journal".into());
    }
    let bytes = backend_check("bytes");
    let (ok, body) = health::envelope(
        REPLY.service,
        REPLY.contract,
        &[journal, bytes, health::storage()],
        &[("identity", identity)],
    );
    REPLY.json(if ok { 200 } else { 503 }, &body, Some("healthz"))
}

fn describe() -> Response {
    let table = CONTRACT.operations();
    let body = json!({
        "service": REPLY.service,
        "contract": REPLY.contract,
        "build": health::build(),
        "component": runtime::component_digest(),
        "identity": identity(),
        "bindings": {
            "primary": "http",
            "http": { "prefix": "/v1" },
            "ws": { "path": "/v1/ws", "subprotocol": "coord" },
        },
        "operations": table["operations"],
        "refusals": refusal::table(),
        "files": CONTRACT.names(),
    });
    REPLY.json(200, &body, Some("describe"))
}
