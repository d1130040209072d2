//! Strict decoding of request bodies (request rule 3) and the grammars of
//! what they carry. A body is decoded once its proof holds (a failed proof
//! evaluates nothing) and before the grant is looked for, since the
//! authorization path is made of its members; checks of the layout
//! position and the profile catalog follow authorization, in the
//! operations.

use crate::facts::{self, Artifact, EntryRef, Hash};
use crate::layout;
use crate::params::{self, Query, MAX_POSITION};
use crate::refusal::Refusal;
use crate::table::{Operation, Serve};
use crate::views::evaluation::{Conflict, Rules};
use lab_coord_auth::{GrantKind, Principal};
use lab_strict_json::{expect_object, parse, Json, Object, ShapeError};
use std::collections::BTreeMap;

/// Greatest length of an operation ID.
pub const MAX_OPERATION_ID: usize = 128;

/// A decoded request of one operation.
#[derive(Debug, Clone)]
pub enum Decoded {
    /// Reads and `retain`: everything is in the query.
    Query,
    Publish(PublishRequest),
    CreateArtifact(CreateArtifactRequest),
    CreateProject(CreateProjectRequest),
    CreateCampaign(CreateCampaignRequest),
    ProvisionWorker(ProvisionWorkerRequest),
    RetireWorker(RetireWorkerRequest),
    Assign(AssignRequest),
    Declare(DeclareRequest),
    Compose(ComposeRequest),
    ViewQuery(QueryRequest),
    Explain(ExplainRequest),
    Apply(ApplyRequest),
    Subscribe(SubscribeRequest),
}

/// Greatest original body of a `declare` request (request rule 2).
pub const MAX_DECLARE_BODY: usize = 16 << 20;
/// Greatest number of facts in one journal batch.
pub const MAX_BATCH_FACTS: usize = 128;
/// Greatest number of cited evidence occurrences of a statement.
pub const MAX_EVIDENCE: usize = 128;

#[derive(Debug, Clone)]
pub struct DeclareRequest {
    pub operation_id: String,
    pub artifact: Vec<String>,
    pub statement: Statement,
    /// The exact body bytes, kept for the admission (`request_body`).
    pub body: Vec<u8>,
}

/// What a declaration states about its artifact.
#[derive(Debug, Clone)]
pub struct Statement {
    pub subject: Option<String>,
    /// The property and the RFC 8785 JSON of its value (never null): the
    /// claim. Both or neither.
    pub claim: Option<(String, Vec<u8>)>,
    pub evidence: Vec<EntryRef>,
    pub justifications: Vec<Justification>,
    pub relations: Vec<Relation>,
}

#[derive(Debug, Clone)]
pub struct Justification {
    pub group: String,
    pub premises: Vec<EntryRef>,
    pub method: String,
}

#[derive(Debug, Clone)]
pub struct Relation {
    pub kind: facts::RelationKind,
    pub target: EntryRef,
}

impl Statement {
    /// The RFC 8785 JSON of the normalized statement: every member, absent
    /// ones null or `[]`. The value's canonical bytes are spliced in last
    /// (`value` sorts last among the members), never parsed again.
    pub fn canonical(&self) -> Vec<u8> {
        let refs = |refs: &[EntryRef]| refs.iter().map(EntryRef::to_json).collect::<Vec<_>>();
        let justifications: Vec<_> = self
            .justifications
            .iter()
            .map(|j| serde_json::json!({ "group": j.group, "premises": refs(&j.premises), "method": j.method }))
            .collect();
        let relations: Vec<_> = self
            .relations
            .iter()
            .map(|r| serde_json::json!({ "kind": r.kind.name(), "target": r.target.to_json() }))
            .collect();
        let members = serde_json::json!({
            "subject": self.subject,
            "property": self.claim.as_ref().map(|(p, _)| p),
            "value": null,
            "evidence": refs(&self.evidence),
            "justifications": justifications,
            "relations": relations,
        });
        let canonical = lab_coord_auth::canonical_json(&members);
        let Some((_, value)) = &self.claim else {
            return canonical;
        };
        let prefix = canonical
            .strip_suffix(b"\"value\":null}".as_slice())
            .expect("`value` sorts last among a statement's members");
        let mut out = Vec::with_capacity(prefix.len() + value.len() + 10);
        out.extend_from_slice(prefix);
        out.extend_from_slice(b"\"value\":");
        out.extend_from_slice(value);
        out.push(b'}');
        out
    }

    /// The premises of every justification: each is one `justifies` fact
    /// of the batch.
    pub fn premise_count(&self) -> usize {
        self.justifications.iter().map(|j| j.premises.len()).sum()
    }
}

/// An application of a tool (`apply`).
#[derive(Debug, Clone)]
pub struct ApplyRequest {
    pub operation_id: String,
    pub path: Vec<String>,
    pub tool: String,
    /// Role to input occurrence, in role order.
    pub inputs: BTreeMap<String, EntryRef>,
    pub recipe: serde_json::Value,
    /// The release occurrence asked for; none: the tool's configured one.
    pub release: Option<EntryRef>,
    /// Accepted and not part of the semantic request: every run ends
    /// within its call (HTTP.md decision 33).
    pub wait: Option<bool>,
}

/// Greatest number of input roles of one application: the attempt and
/// one `bound` fact per role fill one batch.
pub const MAX_INPUT_ROLES: usize = MAX_BATCH_FACTS - 1;

/// Greatest number of selections of one view.
pub const MAX_SELECTIONS: usize = 16_384;
/// Greatest number of preferred publishers.
pub const MAX_PUBLISHERS: usize = 64;
/// Greatest number of records on one query page, and the default.
pub const MAX_QUERY_LIMIT: u64 = 128;
pub const DEFAULT_QUERY_LIMIT: u64 = 64;

#[derive(Debug, Clone)]
pub struct ComposeRequest {
    pub operation_id: String,
    pub path: Vec<String>,
    pub selections: Vec<EntryRef>,
    pub rules: Rules,
    pub interpretation_profile: String,
    pub expected_cutoff: Option<u64>,
    pub metadata: BTreeMap<String, String>,
}

/// The filters of a query: each an exact match when present.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Filters {
    pub kind: Option<String>,
    pub artifact: Option<String>,
    /// `Some(None)`: declarations without subject.
    pub subject: Option<Option<String>>,
    pub property: Option<String>,
    pub publisher: Option<String>,
    pub state: Option<String>,
}

impl Filters {
    /// Every member, absent ones as absent: what a cursor binds.
    pub fn to_json(&self) -> serde_json::Value {
        let mut out = serde_json::Map::new();
        let mut put = |name: &str, value: Option<serde_json::Value>| {
            if let Some(value) = value {
                out.insert(name.to_string(), value);
            }
        };
        put("kind", self.kind.clone().map(Into::into));
        put("artifact", self.artifact.clone().map(Into::into));
        put(
            "subject",
            self.subject
                .clone()
                .map(|s| s.map_or(serde_json::Value::Null, Into::into)),
        );
        put("property", self.property.clone().map(Into::into));
        put("publisher", self.publisher.clone().map(Into::into));
        put("state", self.state.clone().map(Into::into));
        serde_json::Value::Object(out)
    }
}

#[derive(Debug, Clone)]
pub struct QueryRequest {
    pub view: EntryRef,
    pub filters: Filters,
    pub cursor: Option<String>,
    /// 1..=128 (0 or absent is the default 64).
    pub limit: u64,
}

#[derive(Debug, Clone)]
pub struct ExplainRequest {
    pub view: EntryRef,
    pub assertion: String,
}

#[derive(Debug, Clone)]
pub struct CreateCampaignRequest {
    pub operation_id: String,
    pub label: String,
    pub project: String,
}

/// One permission a worker is to be granted.
#[derive(Debug, Clone)]
pub struct Permission {
    pub kind: GrantKind,
    pub path: Vec<String>,
}

#[derive(Debug, Clone)]
pub struct ProvisionWorkerRequest {
    pub operation_id: String,
    pub project: String,
    pub worker: String,
    pub principal: Principal,
    pub permissions: Vec<Permission>,
    pub valid_until: u64,
}

#[derive(Debug, Clone)]
pub struct RetireWorkerRequest {
    pub operation_id: String,
    pub project: String,
    pub worker: String,
    pub expected_cutoff: Option<u64>,
}

#[derive(Debug, Clone)]
pub struct AssignRequest {
    pub operation_id: String,
    pub campaign: String,
    pub assignment: String,
    pub worker: String,
    pub inputs: Vec<EntryRef>,
    pub outputs: Vec<Vec<String>>,
    pub brief: Option<String>,
    pub expected_cutoff: Option<u64>,
}

#[derive(Debug, Clone)]
pub struct PublishRequest {
    pub operation_id: String,
    pub path: Vec<String>,
    pub profile: String,
    /// The record in its RFC 8785 canonical form: what is retained, and
    /// what the request digest covers. Never a value tree: a record may
    /// be most of a 64 MiB body.
    pub record: Vec<u8>,
    pub expected_cutoff: Option<u64>,
    pub metadata: BTreeMap<String, String>,
}

#[derive(Debug, Clone)]
pub struct CreateArtifactRequest {
    pub operation_id: String,
    pub path: Vec<String>,
    pub artifact: Artifact,
}

#[derive(Debug, Clone)]
pub struct CreateProjectRequest {
    pub operation_id: String,
    pub label: String,
}

/// Each request type as a [`Decoded`] (what the fuzzing checks inspect).
macro_rules! decoded_from {
    ($($variant:ident($request:ident),)*) => {$(
        impl From<$request> for Decoded {
            fn from(request: $request) -> Decoded {
                Decoded::$variant(request)
            }
        }
    )*};
}

decoded_from! {
    Publish(PublishRequest),
    CreateArtifact(CreateArtifactRequest),
    CreateProject(CreateProjectRequest),
    CreateCampaign(CreateCampaignRequest),
    ProvisionWorker(ProvisionWorkerRequest),
    RetireWorker(RetireWorkerRequest),
    Assign(AssignRequest),
    Declare(DeclareRequest),
    Compose(ComposeRequest),
    ViewQuery(QueryRequest),
    Explain(ExplainRequest),
    Apply(ApplyRequest),
    Subscribe(SubscribeRequest),
}

/// The body's strict decoding alone, as `op`'s row does it.
pub fn decode(op: &Operation, body: &[u8]) -> Result<Decoded, Refusal> {
    match op.serve {
        Serve::Query(_) => Ok(Decoded::Query),
        Serve::Json { decode, .. } => decode(body),
    }
}

/// Grammar of the string parameters: checked with rule 5, before the proof.
pub fn check_query(query: &Query) -> Result<(), Refusal> {
    if let Some(root) = query.string("root_id") {
        if !facts::is_root_id(root) {
            return Err(Refusal::invalid(
                "root_id",
                "`root_id` is `rt_` and 32 lowercase hex digits",
            ));
        }
    }
    if let Some(space) = query.string("space_id") {
        if !facts::is_space_id(space) {
            return Err(Refusal::invalid(
                "space_id",
                "`space_id` is `spc_` and 32 lowercase hex digits",
            ));
        }
    }
    for name in ["bytes", "type"] {
        if let Some(hash) = query.string(name) {
            if Hash::parse(hash).is_none() {
                return Err(Refusal::invalid(
                    name,
                    format!("`{name}` is `sha256:` and 64 lowercase hex digits"),
                ));
            }
        }
    }
    Ok(())
}

pub fn object(body: &[u8]) -> Result<Object, Refusal> {
    let json = parse(body).map_err(strict_json_refusal)?;
    expect_object(json).map_err(shape)
}

fn strict_json_refusal(e: lab_strict_json::Error) -> Refusal {
    let message = format!("the body is not strict JSON: {e}");
    match e {
        // A repeated member is named like every other faulty member.
        lab_strict_json::Error::DuplicateMember { field, .. } => Refusal::invalid(field, message),
        _ => Refusal::invalid_request(message),
    }
}

fn shape(e: ShapeError) -> Refusal {
    match e.field() {
        Some(field) => Refusal::invalid(field.to_string(), e.to_string()),
        None => Refusal::invalid_request(e.to_string()),
    }
}

/// `[A-Za-z0-9._:-]`, 1..128 characters.
fn operation_id(body: &mut Object) -> Result<String, Refusal> {
    let id = body.take_required_str("operation_id").map_err(shape)?;
    let ok = !id.is_empty()
        && id.len() <= MAX_OPERATION_ID
        && id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"._:-".contains(&b));
    if ok {
        Ok(id)
    } else {
        Err(Refusal::invalid(
            "operation_id",
            "an operation ID is 1..128 characters of [A-Za-z0-9._:-]",
        ))
    }
}

fn path(body: &mut Object, field: &str) -> Result<Vec<String>, Refusal> {
    let labels = body.take_required_array(field).map_err(shape)?;
    let mut path = Vec::with_capacity(labels.len());
    for label in labels {
        let Json::String(label) = label else {
            return Err(Refusal::invalid(field, "a path is an array of strings"));
        };
        params::check_label(&label).map_err(|_| {
            Refusal::invalid(
                field,
                "a path label is 1..255 bytes with no control character and no `/`",
            )
        })?;
        path.push(label);
    }
    Ok(path)
}

fn expected_cutoff(body: &mut Object) -> Result<Option<u64>, Refusal> {
    let cutoff = body.take_optional_u64("expected_cutoff").map_err(shape)?;
    if cutoff.is_some_and(|c| c > MAX_POSITION) {
        return Err(Refusal::invalid(
            "expected_cutoff",
            "`expected_cutoff` is beyond 2^53 - 1",
        ));
    }
    Ok(cutoff)
}

fn hash_member(object: &mut Object, field: &str, within: &str) -> Result<Hash, Refusal> {
    let text = object
        .take_required_str(field)
        .map_err(|e| shape(e.within(within)))?;
    Hash::parse(&text).ok_or_else(|| {
        Refusal::invalid(
            format!("{within}.{field}"),
            "a hash is `sha256:` and 64 lowercase hex digits",
        )
    })
}

/// `<namespace>/<name>/<version>`: lowercase letters, digits, `.` and `-`,
/// version a positive integer.
pub fn is_profile(profile: &str) -> bool {
    let parts: Vec<&str> = profile.split('/').collect();
    let word = |w: &str| {
        !w.is_empty()
            && w.len() <= 64
            && w.as_bytes()[0].is_ascii_alphanumeric()
            && w.bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b".-".contains(&b))
    };
    matches!(parts[..], [ns, name, version]
        if word(ns) && word(name)
            && !version.is_empty() && version.len() <= 9
            && !version.starts_with('0')
            && version.bytes().all(|b| b.is_ascii_digit()))
}

/// The strict decoder of a publish body. Its `record` is canonicalized
/// straight from its bytes; the other members, small, are decoded as a
/// tree like every other body's.
pub fn publish(body: &[u8]) -> Result<PublishRequest, Refusal> {
    let (mut body_members, record) = object_without(body, "record")?;
    let operation_id = operation_id(&mut body_members)?;
    let path = path(&mut body_members, "path")?;
    let profile = body_members.take_required_str("profile").map_err(shape)?;
    if !is_profile(&profile) {
        return Err(Refusal::invalid(
            "profile",
            "a profile is `<namespace>/<name>/<version>`",
        ));
    }
    // The whole body is strict JSON by now, so its record is too.
    let record = match record {
        Some(span) => lab_strict_json::canonicalize_with_max_depth(
            &body[span],
            lab_strict_json::MAX_DEPTH - 1,
        )
        .map_err(strict_json_refusal)?,
        None => return Err(Refusal::invalid("record", "`record` is required")),
    };
    if record == b"null" {
        return Err(Refusal::invalid("record", "`record` is not null"));
    }
    let mut body = body_members;
    let expected_cutoff = expected_cutoff(&mut body)?;
    let metadata = metadata(&mut body)?;
    body.finish().map_err(shape)?;
    layout::check_user_labels(&path)?;
    Ok(PublishRequest {
        operation_id,
        path,
        profile,
        record,
        expected_cutoff,
        metadata,
    })
}

/// `metadata?`: a map of strings to strings, `{}` when absent.
fn metadata(body: &mut Object) -> Result<BTreeMap<String, String>, Refusal> {
    let mut metadata = BTreeMap::new();
    if let Some(object) = body.take_optional_object("metadata").map_err(shape)? {
        for (key, value) in object.members() {
            let Json::String(value) = value else {
                return Err(Refusal::invalid("metadata", "metadata values are strings"));
            };
            metadata.insert(key.clone(), value.clone());
        }
    }
    Ok(metadata)
}

pub fn apply(mut body: Object) -> Result<ApplyRequest, Refusal> {
    let operation_id = operation_id(&mut body)?;
    let path = path(&mut body, "path")?;
    let tool = body.take_required_str("tool").map_err(shape)?;
    layout::check_user_label("tool", &tool)?;
    let listed = body.take_required_object("inputs").map_err(shape)?;
    let mut inputs = BTreeMap::new();
    for (role, entry) in listed.into_members() {
        if inputs.len() == MAX_INPUT_ROLES {
            return Err(Refusal::LimitExceeded(format!(
                "an application binds at most {MAX_INPUT_ROLES} input roles"
            )));
        }
        let entry = entry_ref(entry, "inputs")?;
        inputs.insert(role, entry);
    }
    let recipe = body
        .take("recipe")
        .ok_or_else(|| Refusal::invalid("recipe", "`recipe` is required (null is a recipe)"))?;
    let recipe = serde_json::to_value(&recipe)
        .map_err(|_| Refusal::invalid("recipe", "not representable"))?;
    let release = match body.take_optional("release") {
        None | Some(Json::Null) => None,
        Some(entry) => Some(entry_ref(entry, "release")?),
    };
    let wait = body.take_optional_bool("wait").map_err(shape)?;
    body.finish().map_err(shape)?;
    layout::check_user_labels(&path)?;
    Ok(ApplyRequest {
        operation_id,
        path,
        tool,
        inputs,
        recipe,
        release,
        wait,
    })
}

pub fn compose(mut body: Object) -> Result<ComposeRequest, Refusal> {
    let operation_id = operation_id(&mut body)?;
    let path = path(&mut body, "path")?;
    let listed = body.take_required_array("selections").map_err(shape)?;
    if listed.len() > MAX_SELECTIONS {
        return Err(Refusal::LimitExceeded(format!(
            "a view selects at most {MAX_SELECTIONS} occurrences"
        )));
    }
    let mut selections = Vec::with_capacity(listed.len());
    let mut seen = std::collections::HashSet::new();
    for item in listed {
        let entry = entry_ref(item, "selections")?;
        if !seen.insert(entry.clone()) {
            return Err(Refusal::invalid(
                "selections",
                "an occurrence is selected twice",
            ));
        }
        selections.push(entry);
    }
    let rules = rules(body.take_required_object("rules").map_err(shape)?)?;
    let interpretation_profile = body
        .take_required_str("interpretation_profile")
        .map_err(shape)?;
    if !is_profile(&interpretation_profile) {
        return Err(Refusal::invalid(
            "interpretation_profile",
            "a profile is `<namespace>/<name>/<version>`",
        ));
    }
    let expected_cutoff = expected_cutoff(&mut body)?;
    let metadata = metadata(&mut body)?;
    body.finish().map_err(shape)?;
    layout::check_user_labels(&path)?;
    Ok(ComposeRequest {
        operation_id,
        path,
        selections,
        rules,
        interpretation_profile,
        expected_cutoff,
        metadata,
    })
}

/// `rules`: `{conflict?, publishers?, relations?}`.
fn rules(mut rules: Object) -> Result<Rules, Refusal> {
    let within = |e: ShapeError| shape(e.within("rules"));
    let conflict = rules.take_optional_str("conflict").map_err(within)?;
    let publishers = rules.take_optional_array("publishers").map_err(within)?;
    let relations = rules.take_optional_str("relations").map_err(within)?;
    rules.finish().map_err(within)?;
    let honor_relations = match relations.as_deref() {
        None | Some("honor") => true,
        Some("ignore") => false,
        Some(_) => return Err(Refusal::invalid("rules.relations", "`honor` or `ignore`")),
    };
    let conflict = match (conflict.as_deref(), publishers) {
        (None | Some("disagree"), None) => Conflict::Disagree,
        (None | Some("disagree"), Some(_)) => {
            return Err(Refusal::invalid(
                "rules.publishers",
                "publishers are listed only with `prefer_publishers`",
            ))
        }
        (Some("prefer_publishers"), Some(listed)) => {
            let refuse = || {
                Refusal::invalid(
                    "rules.publishers",
                    "1..64 distinct principals (`ed25519:` and 64 lowercase hex digits)",
                )
            };
            if listed.is_empty() || listed.len() > MAX_PUBLISHERS {
                return Err(refuse());
            }
            let mut publishers: Vec<String> = Vec::with_capacity(listed.len());
            for item in listed {
                let Json::String(text) = item else {
                    return Err(refuse());
                };
                if !facts::is_publisher(&text) || publishers.contains(&text) {
                    return Err(refuse());
                }
                publishers.push(text);
            }
            Conflict::PreferPublishers(publishers)
        }
        (Some("prefer_publishers"), None) => {
            return Err(Refusal::invalid(
                "rules.publishers",
                "`prefer_publishers` needs the publishers in order",
            ))
        }
        (Some(_), _) => {
            return Err(Refusal::invalid(
                "rules.conflict",
                "`disagree` or `prefer_publishers`",
            ))
        }
    };
    Ok(Rules {
        conflict,
        honor_relations,
    })
}

/// The item states a query may filter on.
pub const STATES: &[&str] = &[
    "adopted",
    "agreeing",
    "disagreeing",
    "overruled",
    "retired",
    "relation",
    "record",
];

pub fn query(mut body: Object) -> Result<QueryRequest, Refusal> {
    let view = entry_ref(body.take_required("view").map_err(shape)?, "view")?;
    let filters = filters(body.take_required_object("filters").map_err(shape)?)?;
    let cursor = body.take_optional_str("cursor").map_err(shape)?;
    if cursor
        .as_ref()
        .is_some_and(|c| c.len() > crate::cursor::MAX_CURSOR_CHARS)
    {
        return Err(Refusal::LimitExceeded(format!(
            "a cursor is at most {} characters",
            crate::cursor::MAX_CURSOR_CHARS
        )));
    }
    let limit = match body.take_optional_u64("limit").map_err(shape)? {
        None | Some(0) => DEFAULT_QUERY_LIMIT,
        Some(n) if n <= MAX_QUERY_LIMIT => n,
        Some(_) => return Err(Refusal::invalid("limit", "`limit` is 0..128")),
    };
    body.finish().map_err(shape)?;
    Ok(QueryRequest {
        view,
        filters,
        cursor,
        limit,
    })
}

fn filters(mut filters: Object) -> Result<Filters, Refusal> {
    let within = |e: ShapeError| shape(e.within("filters"));
    let kind = filters.take_optional_str("kind").map_err(within)?;
    if kind
        .as_deref()
        .is_some_and(|k| k != "declaration" && k != "record")
    {
        return Err(Refusal::invalid(
            "filters.kind",
            "`declaration` or `record`",
        ));
    }
    let artifact = filters.take_optional_str("artifact").map_err(within)?;
    if artifact
        .as_deref()
        .is_some_and(|a| Hash::parse(a).is_none())
    {
        return Err(Refusal::invalid(
            "filters.artifact",
            "an artifact's `bytes`: `sha256:` and 64 lowercase hex digits",
        ));
    }
    let subject = match filters.take("subject") {
        None => None,
        Some(Json::Null) => Some(None),
        Some(Json::String(s)) => Some(Some(s)),
        Some(_) => return Err(Refusal::invalid("filters.subject", "a string or null")),
    };
    let property = filters.take_optional_str("property").map_err(within)?;
    let publisher = filters.take_optional_str("publisher").map_err(within)?;
    let state = filters.take_optional_str("state").map_err(within)?;
    if state.as_deref().is_some_and(|s| !STATES.contains(&s)) {
        return Err(Refusal::invalid(
            "filters.state",
            format!("one of {}", STATES.join(", ")),
        ));
    }
    filters.finish().map_err(within)?;
    Ok(Filters {
        kind,
        artifact,
        subject,
        property,
        publisher,
        state,
    })
}

pub fn explain(mut body: Object) -> Result<ExplainRequest, Refusal> {
    let view = entry_ref(body.take_required("view").map_err(shape)?, "view")?;
    let assertion = body.take_required_str("assertion").map_err(shape)?;
    if assertion.is_empty() || assertion.chars().count() > 128 {
        return Err(Refusal::invalid(
            "assertion",
            "an assertion ID is 1..128 characters",
        ));
    }
    body.finish().map_err(shape)?;
    Ok(ExplainRequest { view, assertion })
}

pub fn create_artifact(mut body: Object) -> Result<CreateArtifactRequest, Refusal> {
    let operation_id = operation_id(&mut body)?;
    let path = path(&mut body, "path")?;
    let mut artifact = body.take_required_object("artifact").map_err(shape)?;
    let bytes = hash_member(&mut artifact, "bytes", "artifact")?;
    let kind = hash_member(&mut artifact, "type", "artifact")?;
    artifact.finish().map_err(|e| shape(e.within("artifact")))?;
    body.finish().map_err(shape)?;
    layout::check_user_labels(&path)?;
    Ok(CreateArtifactRequest {
        operation_id,
        path,
        artifact: Artifact { bytes, kind },
    })
}

pub fn create_project(mut body: Object) -> Result<CreateProjectRequest, Refusal> {
    let operation_id = operation_id(&mut body)?;
    let label = body.take_required_str("label").map_err(shape)?;
    body.finish().map_err(shape)?;
    layout::check_user_label("label", &label)?;
    Ok(CreateProjectRequest {
        operation_id,
        label,
    })
}

fn label(body: &mut Object, field: &str) -> Result<String, Refusal> {
    let label = body.take_required_str(field).map_err(shape)?;
    layout::check_user_label(field, &label)?;
    Ok(label)
}

pub fn create_campaign(mut body: Object) -> Result<CreateCampaignRequest, Refusal> {
    let operation_id = operation_id(&mut body)?;
    let label = label(&mut body, "label")?;
    let project = label_of(&mut body, "project")?;
    body.finish().map_err(shape)?;
    Ok(CreateCampaignRequest {
        operation_id,
        label,
        project,
    })
}

/// A label that names an existing space: only its journal-key grammar is
/// checked here (it resolves or is `not_found` later).
fn label_of(body: &mut Object, field: &str) -> Result<String, Refusal> {
    let label = body.take_required_str(field).map_err(shape)?;
    params::check_label(&label).map_err(|_| Refusal::invalid(field, "not a label"))?;
    Ok(label)
}

pub fn provision_worker(mut body: Object) -> Result<ProvisionWorkerRequest, Refusal> {
    let operation_id = operation_id(&mut body)?;
    let project = label_of(&mut body, "project")?;
    let worker = label(&mut body, "worker")?;
    let principal = body.take_required_str("principal").map_err(shape)?;
    let principal = Principal::parse(&principal)
        .filter(|p| p.verifying_key().is_some())
        .ok_or_else(|| {
            Refusal::invalid(
                "principal",
                "a principal is `ed25519:` and 64 lowercase hex digits of an admissible key",
            )
        })?;
    let mut permissions = Vec::new();
    for item in body.take_required_array("permissions").map_err(shape)? {
        let Json::Object(mut item) = item else {
            return Err(Refusal::invalid(
                "permissions",
                "a permission is {kind, path}",
            ));
        };
        let kind = item
            .take_required_str("kind")
            .map_err(|e| shape(e.within("permissions")))?;
        let kind = GrantKind::parse(&kind).ok_or_else(|| {
            Refusal::invalid("permissions.kind", "read, publish, declare or provision")
        })?;
        let path =
            path(&mut item, "path").map_err(|_| Refusal::invalid("permissions.path", "a path"))?;
        item.finish().map_err(|e| shape(e.within("permissions")))?;
        permissions.push(Permission { kind, path });
    }
    let valid_until = body.take_required_u64("valid_until").map_err(shape)?;
    if valid_until > MAX_POSITION {
        return Err(Refusal::invalid(
            "valid_until",
            "`valid_until` is beyond 2^53 - 1",
        ));
    }
    body.finish().map_err(shape)?;
    Ok(ProvisionWorkerRequest {
        operation_id,
        project,
        worker,
        principal,
        permissions,
        valid_until,
    })
}

/// The body of `subscribe` (WS.md decision 1).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SubscribeRequest {
    /// The scope: labels below the world.
    pub path: Vec<String>,
    /// 0: the scope's journal; n: down to n levels below; none: every
    /// descendant.
    pub depth: Option<u64>,
}

pub fn subscribe(mut body: Object) -> Result<SubscribeRequest, Refusal> {
    let path = path(&mut body, "path")?;
    let depth = body.take_optional_u64("depth").map_err(shape)?;
    if depth.is_some_and(|d| d > MAX_POSITION) {
        return Err(Refusal::invalid("depth", "`depth` is beyond 2^53 - 1"));
    }
    body.finish().map_err(shape)?;
    Ok(SubscribeRequest { path, depth })
}

pub fn retire_worker(mut body: Object) -> Result<RetireWorkerRequest, Refusal> {
    let operation_id = operation_id(&mut body)?;
    let project = label_of(&mut body, "project")?;
    let worker = label_of(&mut body, "worker")?;
    let expected_cutoff = expected_cutoff(&mut body)?;
    body.finish().map_err(shape)?;
    Ok(RetireWorkerRequest {
        operation_id,
        project,
        worker,
        expected_cutoff,
    })
}

pub fn assign(mut body: Object) -> Result<AssignRequest, Refusal> {
    let operation_id = operation_id(&mut body)?;
    let campaign = label_of(&mut body, "campaign")?;
    let assignment = label(&mut body, "assignment")?;
    let worker = label_of(&mut body, "worker")?;
    let mut inputs = Vec::new();
    for item in body.take_required_array("inputs").map_err(shape)? {
        inputs.push(entry_ref(item, "inputs")?);
    }
    let mut outputs = Vec::new();
    for item in body.take_required_array("outputs").map_err(shape)? {
        let Json::Array(labels) = item else {
            return Err(Refusal::invalid("outputs", "an output is a path"));
        };
        let mut path = Vec::new();
        for label in labels {
            let Json::String(label) = label else {
                return Err(Refusal::invalid("outputs", "a path is an array of strings"));
            };
            params::check_label(&label).map_err(|_| Refusal::invalid("outputs", "not a label"))?;
            path.push(label);
        }
        outputs.push(path);
    }
    let brief = body.take_optional_str("brief").map_err(shape)?;
    let expected_cutoff = expected_cutoff(&mut body)?;
    body.finish().map_err(shape)?;
    Ok(AssignRequest {
        operation_id,
        campaign,
        assignment,
        worker,
        inputs,
        outputs,
        brief,
        expected_cutoff,
    })
}

/// Text of 1..=`max` characters without a control character.
fn bounded_text(text: &str, max: usize) -> bool {
    let count = text.chars().count();
    count >= 1 && count <= max && !text.chars().any(char::is_control)
}

/// `space#local`: 3..1024 characters, no control character, at least one
/// character on each side of the first `#`.
fn is_subject(subject: &str) -> bool {
    bounded_text(subject, 1024)
        && subject.chars().count() >= 3
        && subject
            .split_once('#')
            .is_some_and(|(space, local)| !space.is_empty() && !local.is_empty())
}

fn entry_refs(items: Vec<Json>, field: &str) -> Result<Vec<EntryRef>, Refusal> {
    items
        .iter()
        .map(|item| {
            let json = serde_json::to_value(item)
                .map_err(|_| Refusal::invalid(field, "not representable"))?;
            EntryRef::from_json(&json).map_err(|why| Refusal::invalid(field, why))
        })
        .collect()
}

fn entry_ref(item: Json, field: &str) -> Result<EntryRef, Refusal> {
    Ok(entry_refs(vec![item], field)?.remove(0))
}

/// The members of the JSON object `body` other than `skip`, as a parsed
/// object, and the span of `skip` when present: a large member (a record,
/// a statement's value) is never a value tree.
fn object_without(
    body: &[u8],
    skip: &str,
) -> Result<(Object, Option<std::ops::Range<usize>>), Refusal> {
    let mut skipped = None;
    let mut others = vec![b'{'];
    let is_object = lab_strict_json::object_members(body, &mut |name, span| {
        if name == skip {
            skipped = Some(span);
            return;
        }
        if others.len() > 1 {
            others.push(b',');
        }
        others.extend(serde_json::to_vec(name).expect("a string serializes"));
        others.push(b':');
        others.extend_from_slice(&body[span]);
    })
    .map_err(strict_json_refusal)?;
    if !is_object {
        return Err(Refusal::invalid_request("the body is not a JSON object"));
    }
    others.push(b'}');
    Ok((object(&others)?, skipped))
}

/// The strict decoder of a `declare` body; it keeps the body's bytes. The
/// statement's `value` is canonicalized straight from them.
pub fn declare(body: &[u8]) -> Result<DeclareRequest, Refusal> {
    let (mut object, statement) = object_without(body, "statement")?;
    let operation_id = operation_id(&mut object)?;
    let artifact = path(&mut object, "artifact")?;
    object.finish().map_err(shape)?;
    let statement = match statement.map(|span| &body[span]) {
        None | Some(b"null") => {
            return Err(Refusal::invalid("statement", "`statement` is required"))
        }
        Some(text) if !text.starts_with(b"{") => {
            return Err(Refusal::invalid("statement", "`statement` is an object"))
        }
        Some(text) => text,
    };
    let (members, value) = object_without(statement, "value")?;
    let value = match value {
        None => None,
        Some(span) => Some(
            lab_strict_json::canonicalize_with_max_depth(
                &statement[span],
                lab_strict_json::MAX_DEPTH - 2,
            )
            .map_err(strict_json_refusal)?,
        )
        .filter(|v| v != b"null"),
    };
    let statement = self::statement(members, value)?;
    Ok(DeclareRequest {
        operation_id,
        artifact,
        statement,
        body: body.to_vec(),
    })
}

fn statement(mut body: Object, value: Option<Vec<u8>>) -> Result<Statement, Refusal> {
    const AT: &str = "statement";
    let within = |e: ShapeError| shape(e.within(AT));
    let subject = body.take_optional_str("subject").map_err(within)?;
    if subject.as_deref().is_some_and(|s| !is_subject(s)) {
        return Err(Refusal::invalid(
            "statement.subject",
            "a subject is `space#local`: 3..1024 characters, no control character",
        ));
    }
    let property = body.take_optional_str("property").map_err(within)?;
    if property.as_deref().is_some_and(|p| !bounded_text(p, 256)) {
        return Err(Refusal::invalid(
            "statement.property",
            "a property is 1..256 characters, no control character",
        ));
    }
    let evidence = body.take_optional_array("evidence").map_err(within)?;
    let evidence = evidence.unwrap_or_default();
    if evidence.len() > MAX_EVIDENCE {
        return Err(Refusal::LimitExceeded(format!(
            "a statement cites at most {MAX_EVIDENCE} evidence occurrences"
        )));
    }
    let evidence = entry_refs(evidence, "statement.evidence")?;
    let mut justifications = Vec::new();
    for item in body
        .take_optional_array("justifications")
        .map_err(within)?
        .unwrap_or_default()
    {
        justifications.push(justification(item)?);
    }
    let mut relations = Vec::new();
    for item in body
        .take_optional_array("relations")
        .map_err(within)?
        .unwrap_or_default()
    {
        relations.push(relation(item)?);
    }
    body.finish().map_err(within)?;
    let claim = match (property, value) {
        (Some(property), Some(value)) => Some((property, value)),
        (None, None) => None,
        (Some(_), None) => {
            return Err(Refusal::invalid_record(
                "statement.value",
                "a property is claimed with its value",
            ))
        }
        (None, Some(_)) => {
            return Err(Refusal::invalid_record(
                "statement.property",
                "a value is claimed of a property",
            ))
        }
    };
    if claim.is_none() && relations.is_empty() {
        return Err(Refusal::invalid_record(
            "statement.relations",
            "a statement without a claim is a pure relation and carries one",
        ));
    }
    let statement = Statement {
        subject,
        claim,
        evidence,
        justifications,
        relations,
    };
    if statement.premise_count() + statement.relations.len() + 1 > MAX_BATCH_FACTS {
        return Err(Refusal::LimitExceeded(format!(
            "premises and relations and the declaration exceed one batch of {MAX_BATCH_FACTS} facts"
        )));
    }
    Ok(statement)
}

fn justification(item: Json) -> Result<Justification, Refusal> {
    const AT: &str = "statement.justifications";
    let Json::Object(mut item) = item else {
        return Err(Refusal::invalid(
            AT,
            "a justification is {group, premises, method}",
        ));
    };
    let within = |e: ShapeError| shape(e.within(AT));
    let group = item.take_required_str("group").map_err(within)?;
    let premises = item.take_required_array("premises").map_err(within)?;
    let method = item.take_required_str("method").map_err(within)?;
    item.finish().map_err(within)?;
    if !bounded_text(&group, 128) {
        return Err(Refusal::invalid(
            format!("{AT}.group"),
            "a group is 1..128 characters, no control character",
        ));
    }
    if !bounded_text(&method, 256) {
        return Err(Refusal::invalid(
            format!("{AT}.method"),
            "a method is 1..256 characters, no control character",
        ));
    }
    if premises.is_empty() || premises.len() > MAX_BATCH_FACTS - 1 {
        return Err(Refusal::invalid(
            format!("{AT}.premises"),
            "a justification has 1..127 premises",
        ));
    }
    let premises = entry_refs(premises, &format!("{AT}.premises"))?;
    Ok(Justification {
        group,
        premises,
        method,
    })
}

fn relation(item: Json) -> Result<Relation, Refusal> {
    const AT: &str = "statement.relations";
    let Json::Object(mut item) = item else {
        return Err(Refusal::invalid(AT, "a relation is {kind, target}"));
    };
    let within = |e: ShapeError| shape(e.within(AT));
    let kind = item.take_required_str("kind").map_err(within)?;
    let target = item.take_required("target").map_err(within)?;
    item.finish().map_err(within)?;
    let kind = facts::RelationKind::from_name(&kind).ok_or_else(|| {
        Refusal::invalid(
            format!("{AT}.kind"),
            "a relation is `supersedes`, `challenges` or `withdraws`",
        )
    })?;
    let target = entry_ref(target, &format!("{AT}.target"))?;
    Ok(Relation { kind, target })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn profiles() {
        assert!(is_profile("lab/finding/1"));
        assert!(is_profile("coord/acquisition-target/1"));
        assert!(!is_profile("lab/finding/0"));
        assert!(!is_profile("lab/finding"));
        assert!(!is_profile("Lab/finding/1"));
        assert!(!is_profile("lab//1"));
    }

    #[test]
    fn publish_strictness() {
        let ok = br#"{"record":{"y":[1,2.50,"\u00e9"],"x":1},"operation_id":"op-1","path":["projects","p","snapshots","s"],"profile":"lab/finding/1"}"#;
        let decoded = publish(ok).unwrap();
        assert_eq!(decoded.record, "{\"x\":1,\"y\":[1,2.5,\"é\"]}".as_bytes());
        assert_eq!(decoded.operation_id, "op-1");
        let unknown = br#"{"operation_id":"op-1","path":["projects","p","snapshots","s"],"profile":"lab/finding/1","record":1,"extra":1}"#;
        let r = publish(unknown).unwrap_err();
        assert_eq!(r.details().unwrap()["field"], "extra");
        for (body, field) in [
            (
                &br#"{"operation_id":"op-1","path":[],"profile":"lab/f/1"}"#[..],
                "record",
            ),
            (
                br#"{"operation_id":"op-1","path":[],"profile":"lab/f/1","record":null}"#,
                "record",
            ),
            (
                br#"{"operation_id":"op-1","path":[],"profile":"lab/f/1","record":{"a":1,"a":2}}"#,
                "record.a",
            ),
            (
                br#"{"operation_id":"op-1","record":1,"record":2}"#,
                "record",
            ),
        ] {
            let r = publish(body).unwrap_err();
            assert_eq!(
                r.details().unwrap()["field"],
                field,
                "{}",
                String::from_utf8_lossy(body)
            );
        }
        assert!(publish(b"[1]").is_err());
        assert!(publish(b"{} x").is_err());
        let dup = br#"{"operation_id":"a","operation_id":"b"}"#;
        let r = object(dup).unwrap_err();
        assert_eq!(r.code(), "invalid");
        assert_eq!(r.details().unwrap()["field"], "operation_id");
        let deep = br#"{"artifact":{"bytes":"a","bytes":"b"}}"#;
        assert_eq!(
            object(deep).unwrap_err().details().unwrap()["field"],
            "artifact.bytes"
        );
        let bad_id = br#"{"operation_id":"a b","path":[],"profile":"lab/f/1","record":1}"#;
        let r = publish(bad_id).unwrap_err();
        assert_eq!(r.details().unwrap()["field"], "operation_id");
    }
}
