//! The operational routes, outside the surface: no credentials, no body.

use crate::contract::CONTRACT;
use crate::{bad_request, MAX_JSON_BODY, REPLY};
use lab_guest::exports::lab::platform::handler::{Request, Response};
use lab_guest::lab::platform::blobs;
use lab_guest::lab::platform::body::IncomingBody;
use lab_guest::lab::platform::runtime;
use lab_kit::health::{self, Check};
use serde_json::json;

pub fn livez(request: &Request, _body: &IncomingBody) -> Response {
    if let Some(refusal) = no_parameters(request, "livez") {
        return refusal;
    }
    let (_, body) = health::envelope(REPLY.service, REPLY.contract, &[], &[]);
    REPLY.json(200, &body, Some("livez"))
}

/// The `store` check passes when a commit could be staged now; `storage`
/// when the host's storage has headroom.
pub fn healthz(request: &Request, _body: &IncomingBody) -> Response {
    if let Some(refusal) = no_parameters(request, "healthz") {
        return refusal;
    }
    let store = Check {
        name: "store",
        failure: blobs::check_writable().err(),
    };
    let checks = [store, health::storage()];
    let (ok, body) = health::envelope(REPLY.service, REPLY.contract, &checks, &[]);
    REPLY.json(if ok { 200 } else { 503 }, &body, Some("healthz"))
}

pub fn describe(request: &Request, _body: &IncomingBody) -> Response {
    if let Some(refusal) = no_parameters(request, "describe") {
        return refusal;
    }
    let table = CONTRACT.operations();
    let body = json!({
        "name": REPLY.service,
        "contract": REPLY.contract,
        "build": health::build(),
        "component": runtime::component_digest(),
        "bindings": { "primary": "http", "http": { "prefix": "/v1" } },
        "operations": table["operations"],
        "refusals": table["refusals"],
        "limits": {
            "max_json_body_bytes": MAX_JSON_BODY,
            "max_blob_bytes": runtime::blob_cap(),
            "max_batch_items": null,
        },
        "files": CONTRACT.names(),
    });
    REPLY.json(200, &body, Some("describe"))
}

pub fn describe_file(request: &Request, _body: &IncomingBody) -> Response {
    if let Some(refusal) = no_parameters(request, "describe_file") {
        return refusal;
    }
    CONTRACT.serve(&REPLY, &request.path)
}

/// Operational routes take no query parameters.
fn no_parameters(request: &Request, op: &str) -> Option<Response> {
    lab_kit::query::parse(request.query.as_deref(), &[])
        .err()
        .map(|e| bad_request(&e.to_string(), op))
}
