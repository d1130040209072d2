//! The bytes service's operations, typed. Names are `sha256:` + 64
//! lowercase hex, which is also how this service writes a hash.

use crate::backend::{call_json, call_streaming, CallError, Streamed};
use lab_guest::lab::platform::blobs::{self as host_blobs, PutError, StagedBody};
use lab_guest::lab::platform::body::IncomingBody;
use serde_json::{json, Value};

const SERVICE: &str = "bytes";

/// A retained blob: its name and size.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Retained {
    pub name: String,
    pub size: u64,
}

fn retained(answer: &Value) -> Result<Retained, CallError> {
    match (answer["name"].as_str(), answer["size"].as_u64()) {
        (Some(name), Some(size)) => Ok(Retained {
            name: name.to_string(),
            size,
        }),
        _ => Err(CallError::Unavailable(
            "put answer lacks name or size".into(),
        )),
    }
}

/// Retains `bytes` (held by this component: small payloads only).
pub fn put(bytes: Vec<u8>) -> Result<Retained, CallError> {
    let (_, answer) = call_json(
        SERVICE,
        "POST",
        "/v1/blobs",
        bytes,
        "application/octet-stream",
    )?;
    retained(&answer)
}

/// Retains each of `blobs` (held by this component: small documents
/// only) in one call of the batch put; each is committed on its own, in
/// order. Answers their names in order; any item refused fails the call.
pub fn put_many(blobs: &[Vec<u8>]) -> Result<Vec<Retained>, CallError> {
    let mut body = Vec::with_capacity(blobs.iter().map(|b| b.len() + 12).sum());
    for blob in blobs {
        body.extend_from_slice(format!("{}\n", blob.len()).as_bytes());
        body.extend_from_slice(blob);
    }
    let (_, answer) = call_json(SERVICE, "POST", "/v1/put", body, "application/x-blobs")?;
    let results = answer["results"]
        .as_array()
        .filter(|results| results.len() == blobs.len())
        .ok_or_else(|| CallError::Unavailable("put many answered another count".into()))?;
    results
        .iter()
        .map(|result| match result["error"].as_str() {
            Some(code) => Err(CallError::Unavailable(format!(
                "put many refused an item: {code} ({})",
                result["message"].as_str().unwrap_or_default()
            ))),
            None => retained(result),
        })
        .collect()
}

/// Retains the rest of `body`, streamed by the host as it arrives; a body
/// that breaks off retains nothing.
pub fn put_streamed(body: &IncomingBody) -> Result<Retained, CallError> {
    let mut headers = vec![("content-type", "application/octet-stream".to_string())];
    if let Some(length) = body.declared_length() {
        headers.push(("content-length", length.to_string()));
    }
    let answer = call_streaming(SERVICE, "POST", "/v1/blobs", headers, Some(body))?;
    if !(200..300).contains(&answer.status) {
        return Err(answer.refused());
    }
    let json: Value = serde_json::from_slice(&answer.read_small(64 << 10)?)
        .map_err(|e| CallError::Unavailable(format!("unreadable put answer: {e}")))?;
    retained(&json)
}

/// Why a body could not be staged.
#[derive(Debug)]
pub enum StageError {
    /// More than the per-object limit arrived.
    TooLarge,
    /// The body broke off before its end.
    Broken,
    /// The host could not stage it.
    Storage(String),
}

/// Stages the rest of `body` in the host while hashing it: named by
/// nothing until [`put_staged`] hands it to the bytes service.
pub fn stage(body: &IncomingBody) -> Result<StagedBody, StageError> {
    let cap = lab_guest::lab::platform::runtime::blob_cap();
    host_blobs::stage_from_body(body, cap).map_err(|e| match e {
        PutError::TooLarge => StageError::TooLarge,
        PutError::Body(_) => StageError::Broken,
        PutError::Storage(why) | PutError::Unavailable(why) => StageError::Storage(why),
    })
}

/// Retains staged bytes: streamed to the bytes service, which names them.
pub fn put_staged(staged: &StagedBody) -> Result<Retained, CallError> {
    let body = staged
        .open()
        .map_err(|e| CallError::Unavailable(format!("the staged body cannot be read: {e}")))?;
    put_streamed(&body)
}

/// The sizes of the names that are retained (absent names are missing).
pub fn stat(names: &[&str]) -> Result<serde_json::Map<String, Value>, CallError> {
    let body = serde_json::to_vec(&json!({ "names": names })).expect("JSON serializes");
    let (_, answer) = call_json(SERVICE, "POST", "/v1/stat", body, "application/json")?;
    answer["sizes"]
        .as_object()
        .cloned()
        .ok_or_else(|| CallError::Unavailable("stat answer lacks sizes".into()))
}

/// Whether `name` is retained.
pub fn exists(name: &str) -> Result<bool, CallError> {
    Ok(stat(&[name])?.contains_key(name))
}

/// The blob's bytes as an unread stream, or none when it is not retained.
pub fn open(name: &str) -> Result<Option<Streamed>, CallError> {
    let answer = call_streaming(
        SERVICE,
        "GET",
        &format!("/v1/blobs/{name}"),
        Vec::new(),
        None,
    )?;
    match answer.status {
        200 => Ok(Some(answer)),
        404 => Ok(None),
        _ => Err(answer.refused()),
    }
}

/// A whole small blob, or none when it is not retained.
pub fn get_small(name: &str, max: usize) -> Result<Option<Vec<u8>>, CallError> {
    match open(name)? {
        Some(stream) => stream.read_small(max).map(Some),
        None => Ok(None),
    }
}
