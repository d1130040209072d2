//! The operational routes: no credentials, no body, no query.

use crate::pager::{MAX_INSPECT_BYTES, MAX_INSPECT_CANDIDATES, MAX_PAGE_BYTES};
use crate::refusal::{self, Refusal};
use crate::requests::{
    DEFAULT_PAGE_ENTRIES, MAX_APPEND_BYTES, MAX_APPEND_FACTS, MAX_BODY_BYTES, MAX_CURSOR_CHARS,
    MAX_KEY_BYTES, MAX_PAGE_ENTRIES, MAX_POSITION,
};
use crate::store::{self, Identity};
use crate::REPLY;
use lab_guest::exports::lab::platform::handler::{Request, Response};
use lab_guest::lab::platform::runtime;
use lab_kit::contract::Contract;
use lab_kit::health::{self, Check};
use serde_json::{json, Value};

include!(concat!(env!("OUT_DIR"), "/contract_files.rs"));

/// The journal's contract files.
pub const CONTRACT: Contract = Contract { files: FILES };

/// The provisioned identity, or why it cannot be read.
fn identity() -> Result<Option<Identity>, Refusal> {
    store::identity(&store::read()?)
}

fn identity_json(identity: Option<&Identity>) -> Value {
    identity.map_or(Value::Null, |i| {
        json!({
            "root_id": i.root.to_string(),
            "root_space_id": i.root_space.to_string(),
            "journal_instance_id": i.instance.to_string(),
        })
    })
}

pub fn livez(_request: &Request) -> Response {
    let found = identity().ok().flatten();
    let (_, body) = health::envelope(
        REPLY.service,
        REPLY.contract,
        &[],
        &[("identity", identity_json(found.as_ref()))],
    );
    REPLY.json(200, &body, Some("livez"))
}

/// `engine`: the store answers a read; `identity`: the hierarchy is
/// provisioned; `storage`: the host's storage has headroom.
pub fn healthz(_request: &Request) -> Response {
    let read = identity();
    let engine = Check {
        name: "engine",
        failure: read.as_ref().err().map(Refusal::message),
    };
    let found = read.ok().flatten();
    let identity_check = Check {
        name: "identity",
        failure: found
            .is_none()
            .then(|| "the hierarchy is not provisioned".to_string()),
    };
    let (ok, body) = health::envelope(
        REPLY.service,
        REPLY.contract,
        &[engine, identity_check, health::storage()],
        &[("identity", identity_json(found.as_ref()))],
    );
    REPLY.json(if ok { 200 } else { 503 }, &body, Some("healthz"))
}

pub fn describe(_request: &Request) -> Response {
    let found = identity().ok().flatten();
    let table = CONTRACT.operations();
    let body = json!({
        "service": REPLY.service,
        "contract": REPLY.contract,
        "build": health::build(),
        "component": runtime::component_digest(),
        "identity": identity_json(found.as_ref()),
        "bindings": { "primary": "http", "http": { "prefix": "/v1" } },
        "operations": table["operations"],
        "refusals": refusal::table(),
        "limits": limits(),
        "profiles": {
            "facts": "lab.journal.facts.v1",
            "codec": "restricted-deterministic-cbor",
            "compound": "tuple-and-map",
            "data": "lab.data.v1",
            "data_json": "lab.data-json.v1",
            "equality": "canonical-bytes",
            "creation_predicate": "lab.journal.child_created.v1",
        },
        "files": CONTRACT.names(),
    });
    REPLY.json(200, &body, Some("describe"))
}

/// The Limits table of the spec, as the service enforces it.
fn limits() -> Value {
    json!({
        "max_position": MAX_POSITION,
        "max_key_bytes": MAX_KEY_BYTES,
        "max_fact_bytes": lab_values::MAX_FACT,
        "max_append_facts": MAX_APPEND_FACTS,
        "max_append_bytes": MAX_APPEND_BYTES,
        "max_body_bytes": MAX_BODY_BYTES,
        "max_page_entries": MAX_PAGE_ENTRIES,
        "default_page_entries": DEFAULT_PAGE_ENTRIES,
        "max_page_bytes": MAX_PAGE_BYTES,
        "max_inspect_candidates": MAX_INSPECT_CANDIDATES,
        "max_inspect_bytes": MAX_INSPECT_BYTES,
        "max_snapshot_spaces": crate::manifest::MAX_SNAPSHOT_SPACES,
        "max_snapshot_bytes": crate::manifest::MAX_SNAPSHOT_BYTES,
        "max_cursor_bytes": MAX_CURSOR_CHARS,
        "max_value_depth": lab_values::MAX_DEPTH,
        "max_tuple_arity": lab_values::MAX_ARITY,
        "max_atom_bytes": lab_values::MAX_PAYLOAD,
    })
}

pub fn describe_file(request: &Request) -> Response {
    CONTRACT.serve(&REPLY, &request.path)
}
