//! The nine verbs on five routes.

use crate::{bad_request, internal, names, unavailable, MAX_JSON_BODY, REPLY};
use lab_guest::exports::lab::platform::handler::{BlobSlice, BodyPart, Request, Response};
use lab_guest::lab::platform::blobs::{self, BlobReader, PutError};
use lab_guest::lab::platform::body::{BodyError, IncomingBody};
use lab_guest::lab::platform::runtime;
use lab_kit::body::ReadError;
use lab_kit::query::{self, canonical_u64};
use lab_strict_json::Json;
use serde_json::{json, Map, Value};

/// A batch record header is at most 20 digits and a line feed.
const MAX_RECORD_HEADER: u32 = 21;
/// After refusing a body as too large, up to this much more of it is read
/// and discarded, so a client still sending can read the refusal instead of
/// losing it to a reset connection.
const DRAIN_AFTER_REFUSAL: u64 = 8 << 20;

/// get, get range, get stream: `GET /v1/blobs/{name}?offset&length`.
pub fn get(request: &Request, _body: &IncomingBody) -> Response {
    const OP: &str = "get";
    let params = match query::parse(request.query.as_deref(), &["offset", "length"]) {
        Ok(params) => params,
        Err(e) => return bad_request(&e.to_string(), OP),
    };
    let mut bounds = [0u64, u64::MAX];
    for (slot, (name, value)) in ["offset", "length"].iter().zip(params).enumerate() {
        if let Some(value) = value {
            match canonical_u64(value) {
                Some(n) => bounds[slot] = n,
                None => {
                    return bad_request(&format!("`{name}` must be a non-negative integer"), OP)
                }
            }
        }
    }
    let name = request.path.rsplit('/').next().unwrap_or_default();
    let Some(digest) = names::parse_path_segment(name) else {
        return bad_request("malformed blob name", OP);
    };
    let reader = match blobs::open_blob(&digest) {
        Ok(Some(reader)) => reader,
        Ok(None) => return REPLY.error(404, "not_found", "no such blob", None, Some(OP)),
        Err(e) => return read_failed(&e, OP),
    };
    let size = reader.size();
    let offset = bounds[0].min(size);
    let length = bounds[1].min(size - offset);
    let mut body = Vec::new();
    if length > 0 {
        body.push(BodyPart::Blob(BlobSlice {
            reader,
            offset,
            length,
        }));
    }
    REPLY.raw(
        200,
        vec![
            ("content-type", b"application/octet-stream".to_vec()),
            ("content-length", length.to_string().into_bytes()),
        ],
        body,
        Some(OP),
    )
}

/// A look-up the store could not answer: 503 when it cannot now (the
/// host's message says why), 500 when it failed.
fn read_failed(e: &blobs::ReadError, operation: &str) -> Response {
    match e {
        blobs::ReadError::Unavailable(e) => unavailable(e, operation),
        blobs::ReadError::Storage(e) => internal(e, operation),
    }
}

/// has, size: `POST /v1/stat` `{names}` → `{sizes}`.
pub fn stat(request: &Request, body: &IncomingBody) -> Response {
    const OP: &str = "stat";
    let digests = match names_request(request, body, OP) {
        Ok(digests) => digests,
        Err(response) => return response,
    };
    let mut sizes = Map::new();
    for (name, digest) in digests {
        match blobs::blob_size(&digest) {
            Ok(Some(size)) => {
                sizes.insert(name, Value::from(size));
            }
            Ok(None) => {}
            Err(e) => return read_failed(&e, OP),
        }
    }
    REPLY.json(200, &json!({ "sizes": sizes }), Some(OP))
}

/// put, put stream: `POST /v1/blobs` with the raw bytes.
pub fn put(request: &Request, body: &IncomingBody) -> Response {
    const OP: &str = "put";
    if let Err(response) = no_query(request, OP) {
        return response;
    }
    match blobs::put_from_body(body, None, runtime::blob_cap()) {
        Ok(info) => REPLY.json(
            200,
            &json!({ "name": names::format(&info.digest), "size": info.size }),
            Some(OP),
        ),
        Err(e) => put_refusal(body, &e, OP),
    }
}

/// get many: `POST /v1/get` `{names}` → an `application/x-blobs` stream of
/// the present ones, each once, in request order.
pub fn get_many(request: &Request, body: &IncomingBody) -> Response {
    const OP: &str = "get_many";
    let digests = match names_request(request, body, OP) {
        Ok(digests) => digests,
        Err(response) => return response,
    };
    let mut parts = Vec::new();
    for (name, digest) in digests {
        let reader: BlobReader = match blobs::open_blob(&digest) {
            Ok(Some(reader)) => reader,
            Ok(None) => continue,
            Err(e) => return read_failed(&e, OP),
        };
        let length = reader.size();
        parts.push(BodyPart::Bytes(format!("{name} {length}\n").into_bytes()));
        if length > 0 {
            parts.push(BodyPart::Blob(BlobSlice {
                reader,
                offset: 0,
                length,
            }));
        }
    }
    REPLY.raw(
        200,
        vec![("content-type", b"application/x-blobs".to_vec())],
        parts,
        Some(OP),
    )
}

/// put many: `POST /v1/put` with anonymous `<size>\n<bytes>` records; each
/// record commits on its own, in order.
pub fn put_many(request: &Request, body: &IncomingBody) -> Response {
    const OP: &str = "put_many";
    if let Err(response) = no_query(request, OP) {
        return response;
    }
    if let Err(message) = lab_kit::check_content_type(request, "application/x-blobs") {
        return bad_request(&message, OP);
    }
    let cap = runtime::blob_cap();
    let mut results = Vec::new();
    loop {
        let line = match body.read_line(MAX_RECORD_HEADER) {
            Ok(line) => line,
            Err(e) => return aborted(&e, OP),
        };
        if line.is_empty() {
            break;
        }
        let Some(size) = line
            .strip_suffix(b"\n")
            .and_then(|digits| std::str::from_utf8(digits).ok())
            .and_then(canonical_u64)
        else {
            return bad_request(
                &format!("record {} has a malformed header", results.len()),
                OP,
            );
        };
        if size > cap {
            match body.skip(size) {
                Ok(skipped) if skipped == size => {}
                Ok(_) => return truncated(results.len(), OP),
                Err(e) => return aborted(&e, OP),
            }
            results.push(json!({ "error": "too_large", "message": too_large_message(cap) }));
            continue;
        }
        match blobs::put_from_body(body, Some(size), cap) {
            Ok(info) => {
                results.push(json!({ "name": names::format(&info.digest), "size": info.size }))
            }
            Err(PutError::TooLarge) => {
                results.push(json!({ "error": "too_large", "message": too_large_message(cap) }))
            }
            Err(PutError::Body(BodyError::Aborted(_))) => return truncated(results.len(), OP),
            Err(PutError::Storage(e)) => return internal(&e, OP),
            // The records before it are committed, as for a body that broke
            // off; the client learns which by asking (names are digests).
            Err(PutError::Unavailable(e)) => return unavailable(&e, OP),
        }
    }
    REPLY.json(200, &json!({ "results": results }), Some(OP))
}

fn put_refusal(body: &IncomingBody, error: &PutError, op: &str) -> Response {
    match error {
        PutError::TooLarge => {
            let _ = body.skip(DRAIN_AFTER_REFUSAL);
            REPLY.error(
                413,
                "too_large",
                &too_large_message(runtime::blob_cap()),
                None,
                Some(op),
            )
        }
        PutError::Body(e) => aborted(e, op),
        PutError::Storage(e) => internal(e, op),
        PutError::Unavailable(e) => unavailable(e, op),
    }
}

fn too_large_message(cap: u64) -> String {
    format!("a blob is limited to {cap} bytes")
}

/// The request body broke off: nothing of the partial blob was committed. The
/// client is usually gone; the answer is for one that is not.
fn aborted(error: &BodyError, op: &str) -> Response {
    let BodyError::Aborted(why) = error;
    bad_request(&format!("the request body broke off: {why}"), op)
}

fn truncated(committed: usize, op: &str) -> Response {
    bad_request(
        &format!("record {committed} ends before its size; the records before it were committed"),
        op,
    )
}

fn no_query(request: &Request, op: &str) -> Result<(), Response> {
    query::parse(request.query.as_deref(), &[])
        .map(|_| ())
        .map_err(|e| bad_request(&e.to_string(), op))
}

/// The `{names}` body of `stat` and `get many`: one object whose only member
/// is `names`, an array of blob names. Duplicates are collapsed, order kept.
fn names_request(
    request: &Request,
    body: &IncomingBody,
    op: &str,
) -> Result<Vec<(String, Vec<u8>)>, Response> {
    no_query(request, op)?;
    lab_kit::check_content_type(request, "application/json").map_err(|m| bad_request(&m, op))?;
    let bytes = read_json_body(body, op)?;
    let json = lab_strict_json::parse(&bytes)
        .map_err(|e| bad_request(&format!("malformed JSON body: {e}"), op))?;
    let Json::Object(mut object) = json else {
        return Err(bad_request("the body must be a JSON object", op));
    };
    let names = object.take("names");
    if object.finish().is_err() {
        return Err(bad_request("the body's only member is `names`", op));
    }
    let not_names = || bad_request("`names` must be an array of blob names", op);
    let Some(Json::Array(names)) = names else {
        return Err(not_names());
    };
    let mut seen = std::collections::BTreeSet::new();
    let mut digests = Vec::new();
    for name in names {
        let Json::String(name) = name else {
            return Err(not_names());
        };
        let Some(digest) = names::parse(&name) else {
            return Err(bad_request(&format!("malformed blob name `{name}`"), op));
        };
        if seen.insert(digest.clone()) {
            digests.push((name, digest));
        }
    }
    Ok(digests)
}

/// The whole body, refused with 413 beyond 4 MiB.
fn read_json_body(body: &IncomingBody, op: &str) -> Result<Vec<u8>, Response> {
    let too_large = || {
        REPLY.error(
            413,
            "too_large",
            &format!("a JSON request body is limited to {MAX_JSON_BODY} bytes"),
            None,
            Some(op),
        )
    };
    match lab_kit::body::read_to_end(body, MAX_JSON_BODY) {
        Ok(bytes) => Ok(bytes),
        Err(ReadError::Broken(e)) => Err(aborted(&e, op)),
        Err(ReadError::TooLarge) => {
            let _ = body.skip(DRAIN_AFTER_REFUSAL);
            Err(too_large())
        }
    }
}
