//! The journal service: one tree of spaces, each with an append-only journal
//! of canonical facts. See `docs/journal.md` for the storage layout.
//!
//! - [`refusal`]: refusal codes, statuses and details.
//! - [`ids`]: root, space and instance identifiers.
//! - [`requests`]: strict decoding of each operation's request.
//! - [`filter`]: filters, their normalization, digest and matching.
//! - [`manifest`]: snapshot manifests, their normalization and digest.
//! - [`cursor`]: sealed, self-validating cursors.
//! - [`store`]: the storage layout over the key-value store.
//! - [`fetched`]: point reads of one snapshot fetched in one exchange.
//! - [`declared`]: the pairs a store's argument index covers.
//! - [`pager`]: one page of a fixed prefix under the page budgets.
//! - [`page_json`]: the JSON text of `read`, `query`, `children` and `head`
//!   answers.
//! - [`ops`]: the seven operations.
//! - [`operational`]: `livez`, `healthz`, `describe`, `describe/{file}`.

pub mod cursor;
pub mod declared;
pub mod fetched;
pub mod filter;
pub mod ids;
pub mod manifest;
pub mod operational;
pub mod ops;
pub mod page_json;
pub mod pager;
pub mod refusal;
pub mod requests;
pub mod store;

use lab_guest::exports::lab::platform::handler::{Guest, Request, Response, ServiceIdentity};
use lab_guest::lab::platform::body::IncomingBody;
use lab_kit::body::ReadError;
use lab_kit::reply::Replier;
use ops::Encoded;
use refusal::Refusal;
use requests::MAX_BODY_BYTES;

/// Identity headers of every response on the operations listener.
pub(crate) const REPLY: Replier = Replier {
    service: "journal",
    contract: "2026-09-12",
    extra: &[("lab-surface", "operations")],
};

struct Journal;

impl Guest for Journal {
    fn identity() -> ServiceIdentity {
        REPLY.identity()
    }

    /// Refuses a malformed `argument-index` setting on every start, though
    /// only a store's provisioning reads it.
    fn prepare() -> Result<(), String> {
        let setting = lab_guest::lab::platform::config::get("argument-index").unwrap_or_default();
        let declared = declared::ArgumentIndex::parse(&setting).map_err(|why| {
            format!("the argument index setting (--journal-argument-index): {why}")
        })?;
        ops::mutate::provision(&declared).map_err(|e| e.message())
    }

    fn handle(request: Request, body: &IncomingBody) -> Response {
        route(&request, body)
    }
}

lab_guest::export_service!(Journal);

/// An operation: its request body in, its answer out.
type Operation = fn(&[u8]) -> Encoded;
/// An operational route.
type Operational = fn(&Request) -> Response;

fn route(request: &Request, body: &IncomingBody) -> Response {
    let Some(segments) = lab_kit::path::clean_segments(&request.path) else {
        return refuse(None, &Refusal::NotFound("no such route".into()));
    };
    let operation: Option<(&str, Operation)> = match segments[..] {
        ["v1", "create"] => Some(("create", |b| {
            requests::decode_create(b)
                .and_then(ops::mutate::create)
                .map(encode)
        })),
        ["v1", "resolve"] => Some(("resolve", |b| {
            requests::decode_resolve(b)
                .and_then(ops::tree::resolve)
                .map(encode)
        })),
        ["v1", "children"] => Some(("children", |b| {
            requests::decode_children(b).and_then(ops::tree::children)
        })),
        ["v1", "head"] => Some(("head", |b| {
            requests::decode_head(b).and_then(ops::tree::head)
        })),
        ["v1", "append"] => Some(("append", |b| {
            requests::decode_append(b).and_then(ops::mutate::append)
        })),
        ["v1", "read"] => Some(("read", |b| {
            requests::decode_read(b).and_then(ops::pages::read)
        })),
        ["v1", "query"] => Some(("query", |b| {
            requests::decode_query(b).and_then(ops::pages::query)
        })),
        _ => None,
    };
    if let Some((name, operation)) = operation {
        if request.method != "POST" {
            return method_not_allowed("POST");
        }
        let answer = read_body(request, body).and_then(|bytes| {
            if request.query.as_deref().is_some_and(|q| !q.is_empty()) {
                return Err(Refusal::invalid_request(
                    "application routes take no query parameters",
                ));
            }
            operation(&bytes)
        });
        return match answer {
            Ok((status, result)) => REPLY.json_text(status, result, Some(name)),
            Err(refusal) => refuse(Some(name), &refusal),
        };
    }
    let operational: Option<(&str, Operational)> = match segments[..] {
        ["livez"] => Some(("livez", operational::livez)),
        ["healthz"] => Some(("healthz", operational::healthz)),
        ["describe"] => Some(("describe", operational::describe)),
        ["describe", ..] => Some(("describe_file", operational::describe_file)),
        _ => None,
    };
    let Some((name, answer)) = operational else {
        return refuse(None, &Refusal::NotFound("no such route".into()));
    };
    if request.method != "GET" {
        return method_not_allowed("GET");
    }
    let has_query = request.query.as_deref().is_some_and(|q| !q.is_empty());
    let has_body = body.declared_length().is_some_and(|n| n > 0)
        || !matches!(body.read(1), Ok(b) if b.is_empty());
    if has_query || has_body {
        return refuse(
            Some(name),
            &Refusal::invalid_request("operational routes take no body or query parameters"),
        );
    }
    answer(request)
}

/// A result document as JSON text.
pub(crate) fn encode((status, result): (u16, serde_json::Value)) -> (u16, Vec<u8>) {
    let text = serde_json::to_vec(&result).expect("a JSON value serializes");
    (status, text)
}

/// The whole body, within the envelope bound and the Content-Type rule.
fn read_body(request: &Request, body: &IncomingBody) -> Result<Vec<u8>, Refusal> {
    let content_type =
        lab_kit::header(request, "content-type").map_err(Refusal::invalid_request)?;
    let declared = body.declared_length();
    requests::check_envelope(content_type, declared.unwrap_or(0))?;
    lab_kit::body::read_declared_to_end(body, declared, MAX_BODY_BYTES).map_err(|e| match e {
        ReadError::TooLarge => Refusal::EnvelopeTooLarge,
        ReadError::Broken(e) => {
            Refusal::invalid_request(format!("the request body broke off: {e:?}"))
        }
    })
}

pub(crate) fn refuse(operation: Option<&str>, refusal: &Refusal) -> Response {
    REPLY.error(
        refusal.status(),
        refusal.code(),
        &refusal.message(),
        refusal.details(),
        operation,
    )
}

/// The body [`refuse`] answers for `refusal`.
pub(crate) fn refusal_body(refusal: &Refusal) -> Vec<u8> {
    lab_kit::reply::error_body(refusal.code(), &refusal.message(), refusal.details())
}

fn method_not_allowed(allow: &str) -> Response {
    REPLY.method_not_allowed("invalid", allow)
}
