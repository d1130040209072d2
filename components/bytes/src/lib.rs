//! The bytes service: a content-addressed store of immutable blobs.
//!
//! - [`names`]: blob names (`sha256:` and 64 lowercase hex digits).
//! - [`ops`]: the nine verbs on five routes.
//! - [`operational`]: `livez`, `healthz`, `describe` and the served files.
//! - [`contract`]: the contract files, embedded at build.
//!
//! The router here matches raw paths: an unclean path is 404, never a
//! redirect; every answer carries `Lab-Service: bytes`.

mod contract;
mod names;
mod operational;
mod ops;

use lab_guest::exports::lab::platform::handler::{Guest, Request, Response, ServiceIdentity};
use lab_guest::lab::platform::body::IncomingBody;
use lab_kit::reply::Replier;

/// Identity headers of every response.
pub(crate) const REPLY: Replier = Replier {
    service: "bytes",
    contract: "2026-09-10",
    extra: &[],
};

/// JSON request bodies are limited to 4 MiB.
pub(crate) const MAX_JSON_BODY: u64 = 4 * 1024 * 1024;

struct Bytes;

impl Guest for Bytes {
    fn identity() -> ServiceIdentity {
        REPLY.identity()
    }

    fn prepare() -> Result<(), String> {
        Ok(())
    }

    fn handle(request: Request, body: &IncomingBody) -> Response {
        route(&request, body)
    }
}

lab_guest::export_service!(Bytes);

/// The route table: exactly one answer per (method, path).
fn route(request: &Request, body: &IncomingBody) -> Response {
    let Some(segments) = lab_kit::path::clean_segments(&request.path) else {
        return not_found_route();
    };
    let method = request.method.as_str();
    let (allow, answer): (&str, fn(&Request, &IncomingBody) -> Response) = match segments[..] {
        ["v1", "blobs", _] => ("GET", ops::get),
        ["v1", "stat"] => ("POST", ops::stat),
        ["v1", "blobs"] => ("POST", ops::put),
        ["v1", "get"] => ("POST", ops::get_many),
        ["v1", "put"] => ("POST", ops::put_many),
        ["livez"] => ("GET", operational::livez),
        ["healthz"] => ("GET", operational::healthz),
        ["describe"] => ("GET", operational::describe),
        ["describe", ..] => ("GET", operational::describe_file),
        _ => return not_found_route(),
    };
    if method == allow {
        answer(request, body)
    } else {
        REPLY.method_not_allowed("bad_request", allow)
    }
}

fn not_found_route() -> Response {
    REPLY.error(404, "not_found", "no such route", None, None)
}

/// A 400 `bad_request` for `operation`.
pub(crate) fn bad_request(message: &str, operation: &str) -> Response {
    REPLY.error(400, "bad_request", message, None, Some(operation))
}

/// A 503 `unavailable`: the store has no room now (the host's message says
/// what is short); nothing of the blob was committed.
pub(crate) fn unavailable(message: &str, operation: &str) -> Response {
    REPLY.error(503, "unavailable", message, None, Some(operation))
}

/// A 500 `internal`: the server failed, the client may retry.
pub(crate) fn internal(message: &str, operation: &str) -> Response {
    REPLY.error(500, "internal", message, None, Some(operation))
}
