//! `publish` and the writer protocol every record admission shares:
//! search the destination at a pinned cutoff, recover an earlier admission,
//! else build once and append under a stable journal operation ID, and
//! recover a concurrent winner on a mismatch.

use crate::backend::CallError;
use crate::blobs;
use crate::facts::{self, Fact, Hash, RecordFact};
use crate::journal::{self, Space};
use crate::layout::{self, Position};
use crate::refusal::Refusal;
use crate::request::PublishRequest;
use crate::world::create_child;
use crate::{Call, Reply};
use base64::Engine as _;
use lab_coord_auth::{canonical_json, Principal};
use lab_guest::lab::platform::{clock, kv};
use serde_json::{json, Value};
use sha2::{Digest, Sha256};
use std::collections::BTreeMap;

/// A record to admit into one leaf journal.
pub struct Admission<'a> {
    /// Table name of the operation (`publish`, `provision_worker`, ...).
    pub op: &'static str,
    pub leaf: &'a Space,
    pub publisher: Principal,
    pub operation_id: &'a str,
    pub profile: &'a str,
    /// The record's RFC 8785 canonical bytes: its retained payload.
    pub payload: &'a [u8],
    pub metadata: &'a BTreeMap<String, String>,
    pub expected_cutoff: Option<u64>,
    /// The normalized semantic request the digest covers.
    pub normalized: Value,
    /// Whether the request's `record` member is the payload (`publish`):
    /// then `normalized` holds null there, and the digest covers the
    /// payload's bytes in its place (see [`request_digest`]).
    pub record_in_request: bool,
}

/// The outcome: the record occurrence and whether it was an earlier one.
pub struct Admitted {
    pub record: Value,
    pub replayed: bool,
}

fn sha256(bytes: &[u8]) -> [u8; 32] {
    Sha256::digest(bytes).into()
}

/// `req_` + 64 hex: the publisher's operation ID scoped to the exact
/// destination journal.
pub fn request_id(publisher: &Principal, operation_id: &str, leaf: &Space) -> String {
    let scope = json!({
        "purpose": "coord.request-id.v1",
        "publisher": publisher.to_string(),
        "operation_id": operation_id,
        "destination": { "root_id": leaf.root_id, "space_id": leaf.space_id },
    });
    format!(
        "req_{}",
        lab_kit::hex::encode_lower(&sha256(&canonical_json(&scope)))
    )
}

/// The digest of the operation name, the destination and the normalized
/// request (proof bytes and server-chosen values excluded).
///
/// With `record`, the request's `record` member is those canonical bytes
/// (`normalized` holds null there), spliced in rather than parsed: RFC 8785
/// orders `request` last among the document's members and `record` last
/// among a publish request's, so the canonical document ends with the
/// record and `}}`.
pub fn request_digest(
    op: &str,
    leaf: &Space,
    normalized: &Value,
    record: Option<&[u8]>,
) -> Result<Hash, Refusal> {
    let document = json!({
        "purpose": "coord.request-digest.v1",
        "op": op,
        "destination": { "root_id": leaf.root_id, "space_id": leaf.space_id, "path": leaf.path },
        "request": normalized,
    });
    let canonical = canonical_json(&document);
    let Some(record) = record else {
        return Ok(Hash(sha256(&canonical)));
    };
    let prefix = canonical
        .strip_suffix(b"\"record\":null}}".as_slice())
        .ok_or_else(|| {
            Refusal::Internal("the normalized request does not end with its record".into())
        })?;
    let mut hasher = Sha256::new();
    hasher.update(prefix);
    hasher.update(b"\"record\":");
    hasher.update(record);
    hasher.update(b"}}");
    Ok(Hash(hasher.finalize().into()))
}

pub(crate) fn record_json(fact: &RecordFact, entry: &Value) -> Value {
    let mut json = Fact::Record(fact.clone()).to_json();
    json["entry"] = entry.clone();
    json
}

/// Step 1: every record of this request identity in the leaf at a pinned
/// cutoff, through every page.
fn search(leaf: &Space, request_id: &str) -> Result<Vec<(Value, RecordFact)>, Refusal> {
    let b64 = base64::engine::general_purpose::STANDARD;
    let filter = json!({
        "predicate": b64.encode(facts::predicate_value(facts::Predicate::Record)),
        "arguments": [{ "index": 4, "equals": b64.encode(facts::text_value_bytes(request_id)) }],
        "origin": "append",
    });
    let (_, entries) = journal::read_all_matching(leaf, None, filter)
        .map_err(|e| Refusal::Unavailable(format!("the recovery search failed: {e:?}")))?;
    let mut found = Vec::new();
    for entry in entries {
        let bytes = entry["fact"]
            .as_str()
            .and_then(|f| b64.decode(f).ok())
            .ok_or_else(|| Refusal::Unavailable("unreadable recovery data".into()))?;
        match facts::decode(&bytes) {
            Ok(Some(Fact::Record(record))) => found.push((entry["ref"].clone(), record)),
            _ => return Err(Refusal::Unavailable("unreadable recovery data".into())),
        }
    }
    Ok(found)
}

/// Step 2: an earlier admission of the same identity, compared.
fn recover(found: Vec<(Value, RecordFact)>, digest: &Hash) -> Result<Option<Admitted>, Refusal> {
    let mut found = found.into_iter();
    let Some((entry, record)) = found.next() else {
        return Ok(None);
    };
    if found.next().is_some() {
        return Err(Refusal::Unavailable(
            "two records carry one request identity: the leaf violates the fact profile".into(),
        ));
    }
    if record.request_digest != *digest {
        return Err(Refusal::IdempotencyMismatch(
            "this operation ID was accepted before with a different request".into(),
        ));
    }
    let retained = blobs::exists(&record.hash.to_string()).map_err(|e| e.into_refusal("bytes"))?;
    if !retained {
        return Err(Refusal::Unavailable(
            "the recovered record's payload is not retained".into(),
        ));
    }
    Ok(Some(Admitted {
        record: record_json(&record, &entry),
        replayed: true,
    }))
}

/// Steps 1 and 2 alone: an earlier admission of this request in `leaf`
/// (`idempotency_mismatch` for another request under its identity), for a
/// writer whose payload costs more to build than a search. The request's
/// `record` member must not be its payload (see [`Admission`]).
pub fn earlier(
    op: &'static str,
    leaf: &Space,
    publisher: &Principal,
    operation_id: &str,
    normalized: &Value,
) -> Result<Option<Admitted>, Refusal> {
    let digest = request_digest(op, leaf, normalized, None)?;
    recover(
        search(leaf, &request_id(publisher, operation_id, leaf))?,
        &digest,
    )
}

/// Steps 1 to 4 for one record.
pub fn admit(admission: Admission<'_>) -> Result<Admitted, Refusal> {
    let leaf = admission.leaf;
    let request_id = request_id(&admission.publisher, admission.operation_id, leaf);
    let record = admission.record_in_request.then_some(admission.payload);
    let digest = request_digest(admission.op, leaf, &admission.normalized, record)?;
    if let Some(earlier) = recover(search(leaf, &request_id)?, &digest)? {
        return Ok(earlier);
    }
    // Step 3: retain the payload once, choose the clock, append.
    let retained = blobs::put(admission.payload.to_vec()).map_err(|e| match e.code() {
        Some("too_large") => {
            Refusal::LimitExceeded("the record exceeds the per-object limit".into())
        }
        _ => e.into_refusal("bytes"),
    })?;
    let hash = Hash::parse(&retained.name)
        .ok_or_else(|| Refusal::Unavailable("the bytes service named the payload oddly".into()))?;
    retain_descriptor(admission.profile)?;
    let now = clock::now();
    let fact = RecordFact {
        profile: admission.profile.to_string(),
        hash,
        metadata: admission.metadata.clone(),
        publisher: admission.publisher.to_string(),
        request_id: request_id.clone(),
        request_digest: digest,
        accepted_at: lab_kit::time::rfc3339_micros(now.seconds, now.nanoseconds),
    };
    let bytes = Fact::Record(fact.clone()).encode();
    if bytes.len() > lab_values::MAX_FACT {
        return Err(Refusal::LimitExceeded(
            "the record fact (its metadata) exceeds 1 MiB".into(),
        ));
    }
    let operation_id = format!("coord.record.{}", &request_id[4..]);
    match journal::append(leaf, &[bytes], &operation_id, admission.expected_cutoff) {
        Ok(appended) => Ok(admitted(&fact, leaf, appended)),
        // Step 4: a concurrent winner (same journal operation ID with other
        // bytes), or a precondition that no longer holds: recover first.
        Err(CallError::Refused(r)) if r.code == "idempotency_mismatch" || r.code == "conflict" => {
            if let Some(winner) = recover(search(leaf, &request_id)?, &digest)? {
                return Ok(winner);
            }
            if r.code == "conflict" {
                return Err(Refusal::Conflict {
                    expected: r.details["expected_cutoff"].as_u64().unwrap_or_default(),
                    actual: r.details["actual_cutoff"].as_u64().unwrap_or_default(),
                });
            }
            Err(Refusal::Unavailable(
                "the journal holds another append under this request's identity".into(),
            ))
        }
        Err(e) => Err(e.into_refusal("journal")),
    }
}

/// The record an append admitted. A concurrent identical request can build
/// the same fact to its clock's microsecond; the journal then replays the
/// first of the two, and so is this answer a replay.
fn admitted(fact: &RecordFact, leaf: &Space, appended: journal::Appended) -> Admitted {
    let entry = json!({
        "root_id": leaf.root_id, "space_id": leaf.space_id, "position": appended.first,
    });
    Admitted {
        record: record_json(fact, &entry),
        replayed: appended.replayed,
    }
}

/// The interpretation descriptor of a record profile: RFC 8785 JSON of
/// `{"purpose": "coord.record-profile.v1", "profile": <profile>}`. A record
/// payload with its profile's descriptor hash as `type` is an artifact.
pub fn profile_descriptor(profile: &str) -> Vec<u8> {
    canonical_json(&json!({ "purpose": "coord.record-profile.v1", "profile": profile }))
}

/// Retains the profile's descriptor beside the payloads, once; returns its
/// hash.
pub fn retain_descriptor(profile: &str) -> Result<Hash, Refusal> {
    retain_once("descriptors", profile, profile_descriptor(profile))
}

/// Retains `descriptor` once: the store's `table` remembers under `name`
/// that it is retained (blobs are never removed), so later calls put
/// nothing; returns its hash.
pub fn retain_once(table: &str, name: &str, descriptor: Vec<u8>) -> Result<Hash, Refusal> {
    let known = kv::begin_read().and_then(|txn| txn.get(table, name.as_bytes()))?;
    let hash = Hash::of(&descriptor);
    if known.is_some() {
        return Ok(hash);
    }
    let retained = blobs::put(descriptor).map_err(|e| e.into_refusal("bytes"))?;
    if retained.name != hash.to_string() {
        return Err(Refusal::Unavailable(
            "the bytes service named a descriptor oddly".into(),
        ));
    }
    kv::begin_write().and_then(|txn| {
        txn.commit_with(&[kv::TableWrite {
            table: table.into(),
            key: name.as_bytes().to_vec(),
            value: retained.name.into_bytes(),
        }])
    })?;
    Ok(hash)
}

/// The leaf at `path`, created under its existing parent when absent.
/// Returns the leaf and whether this call created it.
pub fn ensure_leaf(
    call: &Call<'_>,
    path: &[String],
    create_operation_id: &str,
) -> Result<(Space, bool), Refusal> {
    let (parent_path, key) = path.split_at(path.len() - 1);
    if let Some(leaf) = call.world.resolve(path)? {
        return Ok((leaf, false));
    }
    let parent = call
        .world
        .resolve(parent_path)?
        .ok_or_else(|| Refusal::NotFound("the leaf's parent does not exist".into()))?;
    // `resolve` asked the journal for the leaf just now: create it at once.
    create_child(&parent, &key[0], create_operation_id).map_err(|e| e.into_refusal("journal"))
}

/// A journal operation ID derived from the publisher's own operation ID,
/// for the spaces a request creates.
pub fn scoped_operation_id(
    kind: &str,
    publisher: &Principal,
    operation_id: &str,
    path: &[String],
) -> String {
    let scope =
        json!({ "publisher": publisher.to_string(), "operation_id": operation_id, "path": path });
    format!(
        "coord.{kind}.{}",
        lab_kit::hex::encode_lower(&sha256(&canonical_json(&scope))[..20])
    )
}

pub fn publish(call: &mut Call<'_>, request: PublishRequest) -> Result<Reply, Refusal> {
    let publisher = call.verify(&request.path)?.principal;
    let position = layout::classify(&request.path);
    if !layout::is_publishable(position) {
        return Err(if position == Position::Outside {
            Refusal::invalid("path", "not a record leaf of the world layout")
        } else {
            Refusal::protected("`publish` does not write this space")
        });
    }
    check_profile(&request)?;
    let create_id = scoped_operation_id("leaf", &publisher, &request.operation_id, &request.path);
    let (leaf, created) = ensure_leaf(call, &request.path, &create_id)?;
    let normalized = json!({
        "operation_id": request.operation_id,
        "path": request.path,
        "profile": request.profile,
        "record": null,
        "expected_cutoff": request.expected_cutoff,
        "metadata": request.metadata,
    });
    let admitted = admit(Admission {
        op: "publish",
        leaf: &leaf,
        publisher,
        operation_id: &request.operation_id,
        profile: &request.profile,
        payload: &request.record,
        metadata: &request.metadata,
        expected_cutoff: request.expected_cutoff,
        normalized,
        record_in_request: true,
    })?;
    Ok(Reply::Json(
        if admitted.replayed { 200 } else { 201 },
        json!({
            "record": admitted.record,
            "space_created": created && !admitted.replayed,
            "replayed": admitted.replayed,
        }),
    ))
}

/// The record profile catalog: profiles under `coord/` are the service's
/// own and only those listed here may be published; every other namespace
/// is the users' and takes any JSON record.
fn check_profile(request: &PublishRequest) -> Result<(), Refusal> {
    let Some(name) = request.profile.strip_prefix("coord/") else {
        return Ok(());
    };
    match name {
        "acquisition-target/1" => {
            let record: Value = serde_json::from_slice(&request.record)
                .map_err(|_| Refusal::invalid_record("record", "not a JSON value"))?;
            check_acquisition_target(&record)
        }
        _ => Err(Refusal::invalid_record(
            "profile",
            format!(
                "`{}` is not a publishable profile of the catalog",
                request.profile
            ),
        )),
    }
}

/// `coord/acquisition-target/1`: {locator, type, label?, expected?,
/// expected_source?}.
fn check_acquisition_target(record: &Value) -> Result<(), Refusal> {
    let Some(object) = record.as_object() else {
        return Err(Refusal::invalid_record(
            "record",
            "an acquisition target is an object",
        ));
    };
    for name in object.keys() {
        if !["locator", "type", "label", "expected", "expected_source"].contains(&name.as_str()) {
            return Err(Refusal::invalid_record(
                format!("record.{name}"),
                "unknown member",
            ));
        }
    }
    for name in ["locator", "type"] {
        if !object.get(name).is_some_and(Value::is_string) {
            return Err(Refusal::invalid_record(
                format!("record.{name}"),
                "a string is required",
            ));
        }
    }
    if object.get("label").is_some_and(|l| !l.is_string()) {
        return Err(Refusal::invalid_record("record.label", "a string"));
    }
    match object.get("expected") {
        None | Some(Value::Null) => {}
        Some(Value::Object(e)) => {
            let ok = e.len() == 2
                && e.get("algorithm").and_then(Value::as_str) == Some("sha256")
                && e.get("hex").and_then(Value::as_str).is_some_and(|h| {
                    h.len() == 64
                        && h.bytes()
                            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
                });
            if !ok {
                return Err(Refusal::invalid_record(
                    "record.expected",
                    "ExpectedHash is {algorithm: \"sha256\", hex: 64 lowercase hex}",
                ));
            }
        }
        Some(_) => {
            return Err(Refusal::invalid_record(
                "record.expected",
                "an object or null",
            ))
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn leaf() -> Space {
        Space {
            root_id: "rt_5f1c0a7e2b9d4c3a8e6f1b0d2c4a6e8f".into(),
            space_id: "spc_1f2e3d4c5b6a79880716253443526170".into(),
            path: ["worlds", "lab", "projects", "alpha", "snapshots", "s1"]
                .map(String::from)
                .to_vec(),
        }
    }

    fn normalized(record: Value) -> Value {
        json!({
            "operation_id": "op-1",
            "path": ["projects", "alpha", "snapshots", "s1"],
            "profile": "lab/finding/1",
            "record": record,
            "expected_cutoff": null,
            "metadata": {},
        })
    }

    /// The worked example of HTTP.md decision 7, with the record spliced
    /// in as canonical bytes and as a value tree.
    #[test]
    fn the_documented_request_identity() {
        let publisher = Principal::parse(
            "ed25519:ed4928c628d1c2c6eae90338905995612959273a5c63f93636c14614ac8737d1",
        )
        .unwrap();
        assert_eq!(
            request_id(&publisher, "op-1", &leaf()),
            "req_a387fd0239c16ed6c52de527a74b71db550ceecd9a0057f4794677e0ecefed47"
        );
        let spliced = request_digest(
            "publish",
            &leaf(),
            &normalized(Value::Null),
            Some(b"{\"x\":1}"),
        )
        .unwrap();
        let tree = request_digest("publish", &leaf(), &normalized(json!({"x": 1})), None).unwrap();
        let documented = "sha256:f6112f60aca832892aa4bb2fd18b2205cdd70670a2d7216572d42f3c295e61ea";
        assert_eq!(spliced.to_string(), documented);
        assert_eq!(tree.to_string(), documented);
    }

    /// An append the journal replayed (a concurrent request built the same
    /// fact) is a replay; one it applied is an admission.
    #[test]
    fn a_replayed_append_is_a_replayed_admission() {
        let fact = RecordFact {
            profile: "lab/finding/1".into(),
            hash: Hash([7; 32]),
            metadata: BTreeMap::new(),
            publisher: format!("ed25519:{}", "ab".repeat(32)),
            request_id: format!("req_{}", "cd".repeat(32)),
            request_digest: Hash([9; 32]),
            accepted_at: "2026-12-04T04:00:00.000001Z".into(),
        };
        for replayed in [false, true] {
            let appended = journal::Appended {
                first: 3,
                last: 3,
                replayed,
            };
            let admitted = admitted(&fact, &leaf(), appended);
            assert_eq!(admitted.replayed, replayed);
            assert_eq!(admitted.record["entry"]["position"], 3);
            assert_eq!(admitted.record["accepted_at"], fact.accepted_at);
        }
    }

    /// Splicing agrees with the tree for records of every shape, metadata
    /// and preconditions included.
    #[test]
    fn splicing_agrees_with_the_tree() {
        for record in [
            json!(0),
            json!("a \"quoted\" é"),
            json!([1, [2, {"b": 1, "a": 2}]]),
            json!({"z": null, "a": {"y": 1.5, "x": -0.0}}),
        ] {
            let mut with_metadata = normalized(Value::Null);
            with_metadata["metadata"] = json!({"k": "v", "a": "b"});
            with_metadata["expected_cutoff"] = json!(7);
            let canonical = canonical_json(&record);
            let spliced =
                request_digest("publish", &leaf(), &with_metadata, Some(&canonical)).unwrap();
            with_metadata["record"] = record.clone();
            let tree = request_digest("publish", &leaf(), &with_metadata, None).unwrap();
            assert_eq!(spliced, tree, "{record}");
        }
    }
}
