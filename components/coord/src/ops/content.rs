//! `retain` and `fetch`: content in and out, streamed by the host.

use crate::blobs::{self, StageError};
use crate::declarations;
use crate::facts::{self, Hash};
use crate::journal;
use crate::layout::{self, Position};
use crate::refusal::Refusal;
use crate::{Call, Reply, REPLY};
use base64::Engine as _;
use lab_coord_auth::BodyDigest;
use lab_guest::exports::lab::platform::handler::{BodyPart, VerifiedRelay};
use serde_json::json;
use sha2::{Digest, Sha256};

/// Largest release description read to find its executable.
const MAX_DESCRIPTION: usize = 1 << 20;

/// Body reads when a body must be hashed here rather than retained.
const HASH_CHUNK: u32 = 1 << 20;

/// Stages the body in the host while it is hashed, verifies the proof over
/// that digest, and only then hands the bytes to the bytes service: a
/// refused request leaves nothing named. A carriage whose grants cannot
/// authorize the request is not even given staging: its body is hashed
/// here and dropped, and the proof is then judged in the specification's
/// order.
pub fn retain(call: &mut Call<'_>) -> Result<Reply, Refusal> {
    let path = call.query.path.clone();
    let kind = Hash::parse(call.query.string("type").unwrap_or_default())
        .ok_or_else(|| Refusal::invalid("type", "`type` is a hash"))?;
    if !call.could_authorize(call.op.grant, &path) {
        let digest = hash_body(call)?;
        call.authenticate_with(BodyDigest::from_sha256(digest))?;
        call.verify(&path)?;
        return Err(Refusal::Denied);
    }
    let staged = blobs::stage(call.body).map_err(|e| match e {
        StageError::TooLarge => {
            Refusal::LimitExceeded("the body exceeds the per-object limit".into())
        }
        StageError::Broken => Refusal::invalid_request("the request body broke off"),
        StageError::Storage(why) => Refusal::Unavailable(format!("staging the body: {why}")),
    })?;
    let digest: [u8; 32] = staged
        .info()
        .digest
        .try_into()
        .map_err(|_| Refusal::Internal("the host staged a digest of another size".into()))?;
    call.authenticate_with(BodyDigest::from_sha256(digest))?;
    call.verify(&path)?;
    // A descriptor may describe itself: it is retained by this very call.
    let self_described = kind.0 == digest;
    if !self_described && !blobs::exists(&kind.to_string()).map_err(|e| e.into_refusal("bytes"))? {
        return Err(Refusal::invalid_record(
            "type",
            "the interpretation descriptor is not retained",
        ));
    }
    let retained = blobs::put_staged(&staged).map_err(|e| e.into_refusal("bytes"))?;
    let bytes = Hash(digest);
    if retained.name != bytes.to_string() {
        return Err(Refusal::Unavailable(
            "the bytes service named the staged body otherwise".into(),
        ));
    }
    Ok(Reply::Json(
        200,
        json!({ "bytes": bytes.to_string(), "type": kind.to_string() }),
    ))
}

/// The SHA-256 of the rest of the request body, read through here.
fn hash_body(call: &Call<'_>) -> Result<[u8; 32], Refusal> {
    let mut hasher = Sha256::new();
    loop {
        let chunk = call
            .body
            .read(HASH_CHUNK)
            .map_err(|_| Refusal::invalid_request("the request body broke off"))?;
        if chunk.is_empty() {
            return Ok(hasher.finalize().into());
        }
        hasher.update(&chunk);
    }
}

/// The bytes the path's journal names, relayed from the bytes service and
/// verified against their hash as they stream.
pub fn fetch(call: &mut Call<'_>) -> Result<Reply, Refusal> {
    let path = call.query.path.clone();
    call.verify(&path)?;
    let wanted = Hash::parse(call.query.string("bytes").unwrap_or_default())
        .ok_or_else(|| Refusal::invalid("bytes", "`bytes` is a hash"))?;
    let space = super::read::existing(call, &path)?;
    let declared = || match layout::classify(&path) {
        Position::Declarations => declarations::names(&space, &wanted),
        Position::Application => super::apply::names(&space, &wanted),
        Position::Release => names_executable(&space, &wanted),
        _ => Ok(false),
    };
    if !names(&space, &wanted)? && !declared()? {
        return Err(Refusal::Unresolved {
            reference: json!({ "path": path, "bytes": wanted.to_string() }),
            message: "this journal names no such content".into(),
        });
    }
    let stream = blobs::open(&wanted.to_string())
        .map_err(|e| e.into_refusal("bytes"))?
        .ok_or_else(|| Refusal::Unavailable("named content is not retained".into()))?;
    let length = stream
        .header("content-length")
        .and_then(|v| std::str::from_utf8(v).ok())
        .and_then(|v| v.parse::<u64>().ok())
        .ok_or_else(|| Refusal::Unavailable("the bytes service did not give a length".into()))?;
    let response = REPLY.raw(
        200,
        vec![
            ("content-type", b"application/octet-stream".to_vec()),
            ("content-length", length.to_string().into_bytes()),
        ],
        vec![BodyPart::Relay(VerifiedRelay {
            body: stream.body,
            length,
            sha256: wanted.0.to_vec(),
        })],
        Some("fetch"),
    );
    Ok(Reply::Response(response))
}

/// Whether the journal of `space` names `wanted`: as the bytes of its
/// content fact, or as the payload hash of one of its records. (At a
/// declarations path, envelopes and their frames are found through the
/// declaration index instead; at an application, through its attempt and
/// result; at a release, through its description.)
fn names(space: &journal::Space, wanted: &Hash) -> Result<bool, Refusal> {
    let b64 = base64::engine::general_purpose::STANDARD;
    let (through, contents) = contents(space)?;
    if contents.iter().any(|artifact| artifact.bytes == *wanted) {
        return Ok(true);
    }
    let records = json!({
        "predicate": b64.encode(facts::predicate_value(facts::Predicate::Record)),
        "arguments": [{ "index": 1, "equals": b64.encode(wanted.to_value_bytes()) }],
    });
    let (_, found) = journal::read_all_matching(space, Some(through), records)
        .map_err(|e| e.into_refusal("journal"))?;
    Ok(!found.is_empty())
}

/// The artifacts of the space's `content` facts, and the cutoff read at.
fn contents(space: &journal::Space) -> Result<(u64, Vec<facts::Artifact>), Refusal> {
    let b64 = base64::engine::general_purpose::STANDARD;
    let content =
        json!({ "predicate": b64.encode(facts::predicate_value(facts::Predicate::Content)) });
    let (through, entries) =
        journal::read_all_matching(space, None, content).map_err(|e| e.into_refusal("journal"))?;
    let artifacts = entries
        .iter()
        .filter_map(|entry| {
            let fact = b64.decode(entry["fact"].as_str()?).ok()?;
            match facts::decode(&fact) {
                Ok(Some(facts::Fact::Content { artifact })) => Some(artifact),
                _ => None,
            }
        })
        .collect();
    Ok((through, artifacts))
}

/// Whether `wanted` is the executable of the release whose artifact space
/// is `space`: the `executable.service_binary` of the description its
/// content names (decision 38), so a release can be run again elsewhere.
fn names_executable(space: &journal::Space, wanted: &Hash) -> Result<bool, Refusal> {
    let (_, contents) = contents(space)?;
    for artifact in contents {
        let description = blobs::get_small(&artifact.bytes.to_string(), MAX_DESCRIPTION)
            .map_err(|e| e.into_refusal("bytes"))?;
        let Some(description) = description else {
            continue;
        };
        let description: serde_json::Value =
            serde_json::from_slice(&description).unwrap_or_default();
        if description["executable"]["service_binary"].as_str() == Some(&wanted.to_string()) {
            return Ok(true);
        }
    }
    Ok(false)
}
