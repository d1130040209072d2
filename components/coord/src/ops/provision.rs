//! The provisioning verbs and `create_artifact`: spaces of the layout created
//! with journal operation IDs derived from the caller's, so a retry with
//! the same operation ID recovers the one original result.

use super::publish::{admit, ensure_leaf, scoped_operation_id, Admission};
use crate::backend::CallError;
use crate::blobs;
use crate::facts::{self, EntryRef, Fact};
use crate::journal::{self, Space};
use crate::layout::{self, Position, CAMPAIGN_ORGANIZERS, PROJECT_ORGANIZERS};
use crate::refusal::Refusal;
use crate::request::{
    AssignRequest, CreateArtifactRequest, CreateCampaignRequest, CreateProjectRequest,
    ProvisionWorkerRequest, RetireWorkerRequest,
};
use crate::world::{ensure_child, setup_operation_id};
use crate::{auth, Call, Reply};
use base64::Engine as _;
use lab_coord_auth::{issue_grant, GrantFields, GrantKind, Principal};
use serde_json::{json, Value};
use std::collections::BTreeMap;

/// A creation the journal refused, as this service answers it.
fn creation_refusal(error: CallError) -> Refusal {
    match error.code() {
        Some("exists") => Refusal::Exists("that label is taken".into()),
        Some("idempotency_mismatch") => Refusal::IdempotencyMismatch(
            "this operation ID was accepted before with a different request".into(),
        ),
        _ => error.into_refusal("journal"),
    }
}

fn organizer(call: &Call<'_>, path: &[&str]) -> Result<Space, Refusal> {
    let path: Vec<String> = path.iter().map(|s| s.to_string()).collect();
    call.world
        .resolve(&path)?
        .ok_or_else(|| Refusal::NotFound(format!("`{}` does not exist", path.join("/"))))
}

pub fn create_project(
    call: &mut Call<'_>,
    request: CreateProjectRequest,
) -> Result<Reply, Refusal> {
    let path = vec!["projects".to_string(), request.label.clone()];
    let publisher = call.verify(&path)?.principal;
    let projects = organizer(call, &["projects"])?;
    let operation_id = scoped_operation_id("project", &publisher, &request.operation_id, &[]);
    let created = journal::create(&projects, &request.label, &operation_id, None)
        .map_err(creation_refusal)?;
    for name in PROJECT_ORGANIZERS {
        ensure_child(&created.child, name, &setup_operation_id(name))
            .map_err(|e| e.into_refusal("journal"))?;
    }
    Ok(Reply::Json(
        if created.replayed { 200 } else { 201 },
        json!({ "space": call.world.space_json(&created.child), "replayed": created.replayed }),
    ))
}

pub fn create_artifact(
    call: &mut Call<'_>,
    request: CreateArtifactRequest,
) -> Result<Reply, Refusal> {
    let path = request.path.clone();
    let publisher = call.verify(&path)?.principal;
    if layout::classify(&path) != Position::Artifact {
        return Err(Refusal::invalid(
            "path",
            "an artifact path is projects/<project>/artifacts/<artifact>",
        ));
    }
    let artifacts = organizer(call, &["projects", &path[1], "artifacts"])?;
    let (bytes, kind) = (
        request.artifact.bytes.to_string(),
        request.artifact.kind.to_string(),
    );
    let sizes = blobs::stat(&[&bytes, &kind]).map_err(|e| e.into_refusal("bytes"))?;
    for name in [&bytes, &kind] {
        if !sizes.contains_key(name.as_str()) {
            return Err(Refusal::Unresolved {
                reference: json!(name),
                message: "the content is not retained".into(),
            });
        }
    }
    let operation_id = scoped_operation_id("artifact", &publisher, &request.operation_id, &[]);
    let created =
        journal::create(&artifacts, &path[3], &operation_id, None).map_err(creation_refusal)?;
    let space = created.child;
    let content = Fact::Content {
        artifact: request.artifact.clone(),
    }
    .encode();
    let appended =
        journal::append(&space, &[content], "coord.content", Some(0)).map_err(creation_refusal)?;
    let (declarations, _) =
        ensure_child(&space, "declarations", &setup_operation_id("declarations"))
            .map_err(|e| e.into_refusal("journal"))?;
    let replayed = created.replayed && appended.replayed;
    let entry =
        json!({ "root_id": space.root_id, "space_id": space.space_id, "position": appended.first });
    Ok(Reply::Json(
        if replayed { 200 } else { 201 },
        json!({
            "space": call.world.space_json(&space),
            "content": { "entry": entry, "artifact": { "bytes": bytes, "type": kind } },
            "declarations": call.world.space_json(&declarations),
            "replayed": replayed,
        }),
    ))
}

/// A record the service itself writes at provisioning: admitted into the
/// leaf at `path` (created under its existing parent) like any record.
struct ServiceRecord<'a> {
    op: &'static str,
    path: Vec<String>,
    operation_id: &'a str,
    profile: &'static str,
    record: Value,
    expected_cutoff: Option<u64>,
    normalized: Value,
}

fn admit_service_record(
    call: &Call<'_>,
    publisher: Principal,
    record: ServiceRecord<'_>,
) -> Result<(Value, bool, bool), Refusal> {
    let create_id = scoped_operation_id("leaf", &publisher, record.operation_id, &record.path);
    let (leaf, created) = ensure_leaf(call, &record.path, &create_id)?;
    let metadata = BTreeMap::new();
    let payload = lab_coord_auth::canonical_json(&record.record);
    let admitted = admit(Admission {
        op: record.op,
        leaf: &leaf,
        publisher,
        operation_id: record.operation_id,
        profile: record.profile,
        payload: &payload,
        metadata: &metadata,
        expected_cutoff: record.expected_cutoff,
        normalized: record.normalized,
        record_in_request: false,
    })?;
    Ok((
        admitted.record,
        created && !admitted.replayed,
        admitted.replayed,
    ))
}

fn publish_result(record: Value, space_created: bool, replayed: bool) -> Reply {
    Reply::Json(
        if replayed { 200 } else { 201 },
        json!({ "record": record, "space_created": space_created, "replayed": replayed }),
    )
}

fn strings(path: &[&str]) -> Vec<String> {
    path.iter().map(|s| s.to_string()).collect()
}

pub fn create_campaign(
    call: &mut Call<'_>,
    request: CreateCampaignRequest,
) -> Result<Reply, Refusal> {
    let path = strings(&["campaigns", &request.label]);
    let publisher = call.verify(&path)?.principal;
    // The project is a reference: cited only by a caller who may read it,
    // so its existence is told to no one else (request rule 10).
    let project_path = strings(&["projects", &request.project]);
    call.authorize(GrantKind::Read, &project_path)?;
    organizer(call, &["projects", &request.project])?;
    let campaigns = organizer(call, &["campaigns"])?;
    let operation_id = scoped_operation_id("campaign", &publisher, &request.operation_id, &[]);
    let created = journal::create(&campaigns, &request.label, &operation_id, None)
        .map_err(creation_refusal)?;
    for name in CAMPAIGN_ORGANIZERS {
        ensure_child(&created.child, name, &setup_operation_id(name))
            .map_err(|e| e.into_refusal("journal"))?;
    }
    let normalized = json!({
        "operation_id": request.operation_id, "label": request.label, "project": request.project,
    });
    let (record, _, replayed) = admit_service_record(
        call,
        publisher,
        ServiceRecord {
            op: "create_campaign",
            path: strings(&["campaigns", &request.label, "state"]),
            operation_id: &request.operation_id,
            profile: "coord/campaign-state/1",
            record: json!({ "project": request.project, "status": "open" }),
            expected_cutoff: None,
            normalized,
        },
    )?;
    Ok(publish_result(record, !created.replayed, replayed))
}

pub fn provision_worker(
    call: &mut Call<'_>,
    request: ProvisionWorkerRequest,
) -> Result<Reply, Refusal> {
    let worker_path = strings(&["projects", &request.project, "workers", &request.worker]);
    let authorization = call.verify(&worker_path)?;
    let publisher = authorization.principal;
    let project_path = strings(&["projects", &request.project]);
    for (i, permission) in request.permissions.iter().enumerate() {
        if permission.kind == GrantKind::Provision || !permission.path.starts_with(&project_path) {
            return Err(Refusal::invalid(
                "permissions",
                format!(
                    "permission {i}: a worker may hold read, publish or declare within its project"
                ),
            ));
        }
    }
    if request.principal == call.settings.root {
        return Err(Refusal::invalid(
            "principal",
            "the world's root key cannot be a worker",
        ));
    }
    if request.valid_until > authorization.valid_until {
        return Err(Refusal::invalid(
            "valid_until",
            "the worker's grants may not outlive the provisioner's authority",
        ));
    }
    for permission in &request.permissions {
        covered_by_provisioner(call, &permission.path, request.valid_until)?;
    }
    let Some(issuer) = call.settings.root_signer() else {
        return Err(Refusal::Unavailable(
            "this deployment has no key to issue grants with (the world's root key)".into(),
        ));
    };
    let workers = organizer(call, &["projects", &request.project, "workers"])?;
    if !auth::bind_worker_key(&request.principal, &worker_path)? {
        return Err(Refusal::invalid(
            "principal",
            "this key was provisioned for another worker; a worker takes a key of its own",
        ));
    }
    let operation_id = scoped_operation_id("worker", &publisher, &request.operation_id, &[]);
    let created = journal::create(&workers, &request.worker, &operation_id, None)
        .map_err(creation_refusal)?;
    ensure_child(&created.child, "notes", &setup_operation_id("notes"))
        .map_err(|e| e.into_refusal("journal"))?;
    let mut grants = Vec::new();
    let mut digests = Vec::new();
    for permission in &request.permissions {
        let grant = issue_grant(
            &issuer,
            &call.settings.world,
            GrantFields {
                principal: request.principal,
                kind: permission.kind,
                path: permission.path.clone(),
                valid_until: request.valid_until,
            },
            None,
        )
        .map_err(|e| Refusal::Internal(format!("issuing a grant: {e}")))?;
        digests.push(grant.digest());
        grants.push(grant.to_json());
    }
    let permissions: Vec<Value> = request
        .permissions
        .iter()
        .map(|p| json!({ "kind": p.kind.as_str(), "path": p.path }))
        .collect();
    let normalized = json!({
        "operation_id": request.operation_id,
        "project": request.project,
        "worker": request.worker,
        "principal": request.principal.to_string(),
        "permissions": permissions,
        "valid_until": request.valid_until,
    });
    let (state, _, replayed) = admit_service_record(
        call,
        publisher,
        ServiceRecord {
            op: "provision_worker",
            path: strings(&[
                "projects",
                &request.project,
                "workers",
                &request.worker,
                "state",
            ]),
            operation_id: &request.operation_id,
            profile: "coord/worker-state/1",
            record: json!({
                "status": "active",
                "principal": request.principal.to_string(),
                "permissions": permissions,
                "valid_until": request.valid_until,
                "grants": digests,
            }),
            expected_cutoff: None,
            normalized,
        },
    )?;
    Ok(Reply::Json(
        if replayed { 200 } else { 201 },
        json!({
            "space": call.world.space_json(&created.child),
            "state": state,
            "grants": grants,
            "workspace": {
                "endpoint": call.settings.audience,
                "audience": call.settings.audience,
                "principal": request.principal.to_string(),
                "project": request.project,
                "worker": request.worker,
                "path": worker_path,
            },
            "replayed": replayed,
        }),
    ))
}

pub fn retire_worker(call: &mut Call<'_>, request: RetireWorkerRequest) -> Result<Reply, Refusal> {
    let worker_path = strings(&["projects", &request.project, "workers", &request.worker]);
    let publisher = call.verify(&worker_path)?.principal;
    let state_path = strings(&[
        "projects",
        &request.project,
        "workers",
        &request.worker,
        "state",
    ]);
    let state = call
        .world
        .resolve(&state_path)?
        .ok_or_else(|| Refusal::NotFound("no such worker".into()))?;
    let provisioned = first_record(&state)?
        .and_then(Provisioned::read)
        .ok_or_else(|| {
            Refusal::Unavailable("the worker's provisioning record is unreadable".into())
        })?;
    let normalized = json!({
        "operation_id": request.operation_id,
        "project": request.project,
        "worker": request.worker,
        "expected_cutoff": request.expected_cutoff,
    });
    let (record, created, replayed) = admit_service_record(
        call,
        publisher,
        ServiceRecord {
            op: "retire_worker",
            path: state_path,
            operation_id: &request.operation_id,
            profile: "coord/worker-state/1",
            record: json!({ "status": "retired", "principal": provisioned.principal.to_string() }),
            expected_cutoff: request.expected_cutoff,
            normalized,
        },
    )?;
    // After the record (also on a replay, which finishes a retirement a
    // crash interrupted), and durably before the answer: the grants the
    // provisioning issued, and every delegation derived from them, no
    // longer authorize. The principal's other grants are untouched.
    auth::revoke(&provisioned.grants, record["entry"].to_string().as_bytes())?;
    // Then the subscriptions those grants authorized close (`expired`: the
    // grant that authorized them ended), once the revocation is durable.
    lab_guest::lab::platform::subscriptions::revoke(&provisioned.grants);
    Ok(publish_result(record, created, replayed))
}

/// What a worker's provisioning record says retirement must close.
struct Provisioned {
    principal: Principal,
    /// Digests of the grants the provisioning issued.
    grants: Vec<String>,
}

impl Provisioned {
    fn read(record: Value) -> Option<Provisioned> {
        if record["status"] != "active" {
            return None;
        }
        let principal = record["principal"].as_str().and_then(Principal::parse)?;
        let grants = record["grants"]
            .as_array()?
            .iter()
            .map(|d| d.as_str().map(String::from))
            .collect::<Option<Vec<_>>>()?;
        Some(Provisioned { principal, grants })
    }
}

/// Attenuation of provisioning: a permission the service issues on `path`
/// until `valid_until` must be covered by one of the caller's own valid
/// `provision` grants at or above `path` that lasts at least as long.
/// Otherwise the caller would widen authority it cannot show: `denied`.
fn covered_by_provisioner(
    call: &Call<'_>,
    path: &[String],
    valid_until: u64,
) -> Result<(), Refusal> {
    let covering = call.authorize(GrantKind::Provision, path)?;
    if covering.valid_until < valid_until {
        return Err(Refusal::Denied);
    }
    Ok(())
}

pub fn assign(call: &mut Call<'_>, request: AssignRequest) -> Result<Reply, Refusal> {
    let path = strings(&[
        "campaigns",
        &request.campaign,
        "assignments",
        &request.assignment,
    ]);
    let publisher = call.verify(&path)?.principal;
    let state = call
        .world
        .resolve(&strings(&["campaigns", &request.campaign, "state"]))?
        .ok_or_else(|| Refusal::NotFound("no such campaign".into()))?;
    let campaign = current_record(&state)?
        .ok_or_else(|| Refusal::Unavailable("the campaign has no state record".into()))?;
    let project = campaign["project"]
        .as_str()
        .ok_or_else(|| Refusal::Unavailable("the campaign's state names no project".into()))?
        .to_string();
    let worker_path = strings(&["projects", &project, "workers", &request.worker]);
    // The worker is a reference too: `read` on its space before resolving.
    call.authorize(GrantKind::Read, &worker_path)?;
    if call.world.resolve(&worker_path)?.is_none() {
        return Err(Refusal::Unresolved {
            reference: json!({ "worker": request.worker }),
            message: "the worker is not provisioned in the campaign's project".into(),
        });
    }
    for input in &request.inputs {
        super::read::body_reference(call, input)?;
    }
    for output in &request.outputs {
        let under_worker = output.starts_with(&worker_path);
        let declarations = layout::classify(output) == Position::Declarations;
        if !under_worker && !declarations {
            return Err(Refusal::invalid(
                "outputs",
                "an output lies under the worker's space or is an artifact's declarations",
            ));
        }
    }
    let inputs: Vec<Value> = request.inputs.iter().map(EntryRef::to_json).collect();
    let record = json!({
        "worker": request.worker,
        "project": project,
        "inputs": inputs,
        "outputs": request.outputs,
        "brief": request.brief,
    });
    let normalized = json!({
        "operation_id": request.operation_id,
        "campaign": request.campaign,
        "assignment": request.assignment,
        "worker": request.worker,
        "inputs": inputs,
        "outputs": request.outputs,
        "brief": request.brief,
        "expected_cutoff": request.expected_cutoff,
    });
    let (record, created, replayed) = admit_service_record(
        call,
        publisher,
        ServiceRecord {
            op: "assign",
            path,
            operation_id: &request.operation_id,
            profile: "coord/assignment/1",
            record,
            expected_cutoff: request.expected_cutoff,
            normalized,
        },
    )?;
    Ok(publish_result(record, created, replayed))
}

/// The payload of a leaf's current record: the last `append` entry whose
/// predicate is `record` (never the raw head).
pub fn current_record(leaf: &Space) -> Result<Option<Value>, Refusal> {
    record_payload(leaf, |records| records.last())
}

/// The payload of a leaf's first record.
fn first_record(leaf: &Space) -> Result<Option<Value>, Refusal> {
    record_payload(leaf, |records| records.first())
}

fn record_payload(
    leaf: &Space,
    pick: impl Fn(&[Value]) -> Option<&Value>,
) -> Result<Option<Value>, Refusal> {
    let b64 = base64::engine::general_purpose::STANDARD;
    let filter = json!({
        "predicate": b64.encode(facts::predicate_value(facts::Predicate::Record)),
        "origin": "append",
    });
    let (_, records) =
        journal::read_all_matching(leaf, None, filter).map_err(|e| e.into_refusal("journal"))?;
    let Some(picked) = pick(&records) else {
        return Ok(None);
    };
    let Some(Ok(Some(Fact::Record(record)))) = picked["fact"]
        .as_str()
        .and_then(|f| b64.decode(f).ok())
        .map(|bytes| facts::decode(&bytes))
    else {
        return Err(Refusal::Unavailable(
            "the current record is unreadable".into(),
        ));
    };
    let payload = blobs::get_small(&record.hash.to_string(), 16 << 20)
        .map_err(|e| e.into_refusal("bytes"))?
        .ok_or_else(|| {
            Refusal::Unavailable("the current record's payload is not retained".into())
        })?;
    serde_json::from_slice(&payload)
        .map(Some)
        .map_err(|_| Refusal::Unavailable("the current record's payload is not JSON".into()))
}
