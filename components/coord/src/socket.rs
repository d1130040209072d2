//! The socket binding's calls (`WS.md`): one client frame in, one reply
//! frame out. The envelope is decoded here; everything after decoding is
//! the HTTP binding's ([`crate::run`]): one implementation of each
//! operation.
//!
//! The host has already checked that the frame is a JSON object with a
//! non-empty string `id` of at most 128 characters, unique among the
//! connection's calls in flight, and within the frame limit.

use crate::refusal::Refusal;
use crate::table::{self, BodyKind, Operation};
use crate::{params, request, Reply, MAX_JSON_BODY, REPLY};
use lab_coord_auth::Carriage;
use lab_guest::lab::platform::body::IncomingBody;
use lab_strict_json::{Json, MAX_DEPTH};
use serde_json::{json, Value};
use std::ops::Range;

mod bindings {
    wit_bindgen::generate!({
        path: "../../wit",
        world: "lab:platform/socket-binding",
        with: { "lab:platform/body@0.1.0": lab_guest::lab::platform::body },
        default_bindings_module: "crate::socket::bindings",
    });
}

use crate::Coord;
bindings::export!(Coord);

/// The frame limit: 64 MiB plus 1 MiB of envelope headroom (WS.md
/// decision 9). The host closes a connection sending more with 1009.
pub const MAX_FRAME: u64 = 68_157_440;

/// Operational routes: not messages (`invalid` by name).
const OPERATIONAL: &[&str] = &["livez", "healthz", "describe", "describe_file"];

impl bindings::exports::lab::platform::socket::Guest for crate::Coord {
    fn call(connection: u64, frame: &IncomingBody) -> Vec<u8> {
        reply_to(connection, frame)
    }
}

/// The reply frame's text for the frame in `body`.
fn reply_to(connection: u64, body: &IncomingBody) -> Vec<u8> {
    let frame = match lab_kit::body::read_to_end(body, MAX_FRAME) {
        Ok(frame) => frame,
        Err(e) => {
            let refusal = Refusal::Internal(format!("the frame could not be read: {e:?}"));
            return reply_frame("", Err(refusal));
        }
    };
    // One strict pass over the frame; the lenient read of its `id` only
    // for a frame that pass refuses.
    match decode(&frame) {
        Ok(envelope) => {
            let id = envelope.id.clone();
            reply_frame(&id, serve(connection, &frame, envelope, body))
        }
        Err(refusal) => reply_frame(&envelope_id(&frame).unwrap_or_default(), Err(refusal)),
    }
}

/// The reply envelope (`SocketReply.schema.json`): `created` for HTTP's
/// 201, `ok` for 200, `error` with the HTTP refusal body otherwise.
fn reply_frame(id: &str, outcome: Result<Reply, Refusal>) -> Vec<u8> {
    let contract = REPLY.contract;
    let reply = match outcome {
        Ok(Reply::Json(status, result)) => json!({
            "id": id,
            "status": if status == 201 { "created" } else { "ok" },
            "contract": contract,
            "result": result,
        }),
        Ok(Reply::Response(_)) => {
            return reply_frame(
                id,
                Err(Refusal::Internal("a streamed answer on the socket".into())),
            )
        }
        Err(refusal) => json!({
            "id": id,
            "status": "error",
            "contract": contract,
            "error": error_body(&refusal),
        }),
    };
    serde_json::to_vec(&reply).expect("a reply serializes")
}

/// The HTTP refusal body of `refusal`.
fn error_body(refusal: &Refusal) -> Value {
    let mut body = json!({ "error": refusal.code(), "message": refusal.message() });
    if let Some(details) = refusal.details() {
        body["details"] = details;
    }
    body
}

/// The frame's `id`, read leniently: a reply carries it even when the rest
/// of the envelope is refused.
fn envelope_id(frame: &[u8]) -> Option<String> {
    #[derive(serde::Deserialize)]
    struct Head {
        id: String,
    }
    serde_json::from_slice::<Head>(frame).ok().map(|h| h.id)
}

/// The envelope's members, the body left as its span in the frame.
struct Envelope {
    /// The correlation ID (the host checked it is a non-empty string).
    id: String,
    op: String,
    params: Option<Json>,
    body: Option<Range<usize>>,
    auth: Option<Json>,
}

/// One call of a decoded envelope: the operation exactly as over HTTP. `body` is
/// the frame, read to its end: no operation the socket carries reads it.
fn serve(
    connection: u64,
    frame: &[u8],
    envelope: Envelope,
    body: &IncomingBody,
) -> Result<Reply, Refusal> {
    let op = operation(&envelope.op)?;
    let query = params::from_json(op, envelope.params)?;
    request::check_query(&query)?;
    let json_body = match (op.body, envelope.body) {
        (BodyKind::Json, Some(span)) => canonical_body(op, &frame[span])?,
        (BodyKind::Json, None) => Vec::new(),
        (_, Some(_)) => {
            return Err(Refusal::invalid(
                "body",
                "this operation takes no request body",
            ))
        }
        (_, None) => Vec::new(),
    };
    let carriage = match envelope.auth {
        None => Err(Refusal::Unverified("the call carries no `auth`".into())),
        Some(auth) => Carriage::from_json(auth).map_err(|why| Refusal::Unverified(why.to_string())),
    };
    crate::run(op, query, body, json_body, carriage, Some(connection))
}

/// The envelope's members, strictly: strict JSON (a member repeated at any
/// depth is refused), no member but `id`, `op`, `params`, `body`, `auth`,
/// and `op` a string.
fn decode(frame: &[u8]) -> Result<Envelope, Refusal> {
    let mut spans = Vec::new();
    let object = lab_strict_json::object_members(frame, &mut |name, span| {
        spans.push((name.to_string(), span));
    })
    .map_err(|e| Refusal::invalid_request(format!("the frame is not strict JSON: {e}")))?;
    if !object {
        return Err(Refusal::invalid_request("the frame is not a JSON object"));
    }
    let member = |span: Range<usize>, name: &str| {
        lab_strict_json::parse_with_max_depth(&frame[span], MAX_DEPTH - 1)
            .map_err(|e| Refusal::invalid(name, format!("`{name}`: {e}")))
    };
    let mut op = None;
    let mut envelope = Envelope {
        id: String::new(),
        op: String::new(),
        params: None,
        body: None,
        auth: None,
    };
    for (name, span) in spans {
        match name.as_str() {
            "id" => match member(span, "id")? {
                Json::String(id) => envelope.id = id,
                _ => return Err(Refusal::invalid("id", "`id` is a string")),
            },
            "op" => op = Some(member(span, "op")?),
            "params" => envelope.params = Some(member(span, "params")?),
            "body" => envelope.body = Some(span),
            "auth" => envelope.auth = Some(member(span, "auth")?),
            other => {
                return Err(Refusal::invalid(
                    other,
                    format!("unknown envelope member `{other}`"),
                ))
            }
        }
    }
    envelope.op = match op {
        Some(Json::String(op)) => op,
        Some(_) => return Err(Refusal::invalid("op", "`op` is an operation name")),
        None => return Err(Refusal::invalid("op", "`op` is required")),
    };
    Ok(envelope)
}

/// The table row `name` names, as the socket carries it.
fn operation(name: &str) -> Result<&'static Operation, Refusal> {
    match name {
        "retain" | "fetch" => {
            return Err(Refusal::invalid(
                "op",
                format!("`{name}` is not carried by the socket: use the HTTP binding"),
            ))
        }
        _ if OPERATIONAL.contains(&name) => {
            return Err(Refusal::invalid(
                "op",
                format!("`{name}` is an operational route, not a message"),
            ))
        }
        _ => {}
    }
    table::OPERATIONS
        .iter()
        .chain(table::SOCKET_OPERATIONS)
        .find(|o| o.name == name)
        .ok_or_else(|| Refusal::NotFound("no such operation".into()))
}

/// The body member's RFC 8785 text (WS.md decision 10), within the JSON
/// body limit and `declare`'s.
fn canonical_body(op: &Operation, member: &[u8]) -> Result<Vec<u8>, Refusal> {
    let canonical = lab_strict_json::canonicalize_with_max_depth(member, MAX_DEPTH - 1)
        .map_err(|e| Refusal::invalid("body", format!("`body`: {e}")))?;
    if canonical.len() as u64 > MAX_JSON_BODY {
        return Err(Refusal::BodyTooLarge);
    }
    crate::check_declare_size(op, &canonical)?;
    Ok(canonical)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn refused(frame: &str) -> (String, Option<String>) {
        let refusal = match decode(frame.as_bytes()).and_then(|e| operation(&e.op).map(|_| e)) {
            Err(r) => r,
            Ok(_) => panic!("accepted: {frame}"),
        };
        let field = refusal
            .details()
            .and_then(|d| d["field"].as_str().map(String::from));
        (refusal.code().to_string(), field)
    }

    #[test]
    fn envelopes_are_strict() {
        let invalid = |field: &str| ("invalid".to_string(), Some(field.to_string()));
        assert_eq!(refused(r#"{"id":"a","op":"resolve","x":1}"#), invalid("x"));
        assert_eq!(refused(r#"{"id":"a"}"#), invalid("op"));
        assert_eq!(refused(r#"{"id":"a","op":7}"#), invalid("op"));
        assert_eq!(refused(r#"{"id":"a","op":"retain"}"#), invalid("op"));
        assert_eq!(refused(r#"{"id":"a","op":"describe"}"#), invalid("op"));
        assert_eq!(
            refused(r#"{"id":"a","op":"resolve","op":"get"}"#).0,
            "invalid"
        );
        assert_eq!(refused(r#"{"id":"a","op":"fork"}"#).0, "not_found");
    }

    #[test]
    fn the_body_is_canonical() {
        let op = table::OPERATIONS
            .iter()
            .find(|o| o.name == "publish")
            .unwrap();
        assert_eq!(
            canonical_body(op, br#"{ "b": 1.0, "a": "\u00e9" }"#).unwrap(),
            "{\"a\":\"é\",\"b\":1}".as_bytes()
        );
        assert_eq!(envelope_id(br#"{"op":1,"id":"x","id":"y"}"#), None);
        assert_eq!(envelope_id(br#"{"op":1,"id":"x"}"#).as_deref(), Some("x"));
    }
}
