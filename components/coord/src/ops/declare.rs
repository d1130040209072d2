//! `declare`: an attributed statement about an artifact's exact content,
//! appended to the artifact's declarations journal as one batch (the
//! declaration, its `justifies` and `relation` facts) with a retained
//! envelope the world's root signs.
//!
//! Invariants: the assertion ID is the service's (publisher, operation ID,
//! artifact space), so one publisher's operation on one artifact has one
//! occurrence however often it is retried, concurrently or after a crash;
//! the declaration index finds it (see [`crate::declarations`]). A refused
//! request appends nothing.

use super::publish::request_digest;
use super::read::body_reference;
use crate::backend::CallError;
use crate::blobs;
use crate::declarations;
use crate::facts::{
    self, Application, Artifact, DeclarationFact, EntryRef, Fact, Hash, Predicate, RelationKind,
};
use crate::journal::{self, Space};
use crate::layout::{self, Position};
use crate::refusal::Refusal;
use crate::request::{DeclareRequest, Statement};
use crate::world::{ensure_child, setup_operation_id};
use crate::{Call, Reply};
use base64::Engine as _;
use lab_coord_auth::{admission_signing_bytes, canonical_json, GrantKind, Principal, SigningKey};
use lab_guest::lab::platform::clock;
use serde_json::{json, Value};
use sha2::{Digest, Sha256};

/// What a declaration's admission checked, and when.
pub const POLICY: &str = "coord.declare.v1";

/// `asr_` + 64 hex: one publisher's operation on one artifact space.
pub fn assertion_id(publisher: &Principal, operation_id: &str, artifact: &Space) -> String {
    let scope = json!({
        "purpose": "coord.assertion-id.v1",
        "publisher": publisher.to_string(),
        "operation_id": operation_id,
        "artifact": { "root_id": artifact.root_id, "space_id": artifact.space_id },
    });
    format!(
        "asr_{}",
        hex::encode(Sha256::digest(canonical_json(&scope)))
    )
}

/// The artifact's sole content fact: its occurrence and its Artifact.
fn content(space: &Space, path: &[String]) -> Result<(EntryRef, Artifact), Refusal> {
    let b64 = base64::engine::general_purpose::STANDARD;
    let filter = json!({ "predicate": Predicate::Content.filter_base64(), "origin": "append" });
    let (_, found) =
        journal::read_all_matching(space, None, filter).map_err(|e| e.into_refusal("journal"))?;
    match &found[..] {
        [] => Err(Refusal::Unresolved {
            reference: json!({ "artifact": path }),
            message: "the artifact has no content yet".into(),
        }),
        [entry] => {
            let fact = entry["fact"].as_str().and_then(|f| b64.decode(f).ok());
            let reference = EntryRef::from_json(&entry["ref"]);
            match (reference, fact.as_deref().map(facts::decode)) {
                (Ok(reference), Some(Ok(Some(Fact::Content { artifact })))) => {
                    Ok((reference, artifact))
                }
                _ => Err(Refusal::Unavailable(
                    "the artifact's content fact is unreadable".into(),
                )),
            }
        }
        _ => Err(Refusal::Unavailable(
            "two content facts in one artifact space: it violates the fact profile".into(),
        )),
    }
}

/// The `declaration` fact at `target`, which must lie in `declarations`.
fn declaration_at(
    declarations: &Space,
    target: &EntryRef,
) -> Result<Option<DeclarationFact>, Refusal> {
    if target.root_id != declarations.root_id || target.space_id != declarations.space_id {
        return Ok(None);
    }
    let b64 = base64::engine::general_purpose::STANDARD;
    // The target is within the head: it was resolved before.
    let head = journal::head(declarations).map_err(|e| e.into_refusal("journal"))?;
    let page = journal::read(declarations, target.position - 1, Some(head), 1, None)
        .map_err(|e| e.into_refusal("journal"))?;
    let entry = page["entries"]
        .get(0)
        .filter(|e| e["ref"]["position"].as_u64() == Some(target.position));
    let fact = entry
        .and_then(|e| e["fact"].as_str())
        .and_then(|f| b64.decode(f).ok());
    Ok(match fact.as_deref().map(facts::decode) {
        Some(Ok(Some(Fact::Declaration(declaration)))) => Some(declaration),
        _ => None,
    })
}

/// The relation rules: a target is a declaration of the same artifact's
/// declarations journal, and only its own publisher supersedes or
/// withdraws it.
fn check_relations(
    statement: &Statement,
    declarations: &Space,
    publisher: &Principal,
) -> Result<(), Refusal> {
    for relation in &statement.relations {
        let target = relation.target.to_json();
        let Some(declaration) = declaration_at(declarations, &relation.target)? else {
            return Err(Refusal::invalid_reference(
                "statement.relations",
                target,
                "a relation targets a declaration of the same artifact",
            ));
        };
        let own = declaration.publisher == publisher.to_string();
        if relation.kind != RelationKind::Challenges && !own {
            return Err(Refusal::invalid_reference(
                "statement.relations",
                target,
                "only a declaration's publisher supersedes or withdraws it",
            ));
        }
    }
    Ok(())
}

/// The answer for an indexed declaration: a replay when its request is
/// this one, else `idempotency_mismatch`.
fn replay(
    indexed: &declarations::Indexed,
    digest: &Hash,
    space: &Space,
    id: &str,
) -> Result<Reply, Refusal> {
    let envelope = declarations::envelope(&indexed.envelope)?;
    if envelope["request_digest"].as_str() != Some(digest.to_string().as_str()) {
        return Err(Refusal::IdempotencyMismatch(
            "this operation ID was accepted before with a different request".into(),
        ));
    }
    Ok(result(space, indexed.position, id, &indexed.envelope, true))
}

fn result(space: &Space, position: u64, id: &str, envelope: &Hash, replayed: bool) -> Reply {
    Reply::Json(
        if replayed { 200 } else { 201 },
        json!({
            "declaration": { "root_id": space.root_id, "space_id": space.space_id, "position": position },
            "assertion_id": id,
            "envelope": envelope.to_string(),
            "replayed": replayed,
        }),
    )
}

fn retain(document: &Value) -> Result<Hash, Refusal> {
    let retained = blobs::put(canonical_json(document)).map_err(|e| match e.code() {
        Some("too_large") => {
            Refusal::LimitExceeded("the declaration exceeds the per-object limit".into())
        }
        _ => e.into_refusal("bytes"),
    })?;
    Hash::parse(&retained.name)
        .ok_or_else(|| Refusal::Unavailable("the bytes service named a document oddly".into()))
}

pub fn declare(call: &mut Call<'_>, request: DeclareRequest) -> Result<Reply, Refusal> {
    let path = request.artifact.clone();
    // 1. `declare` on the artifact.
    let publisher = call.verify(&path)?.principal;
    // 2. An artifact position of the layout.
    match layout::classify(&path) {
        Position::Artifact | Position::Release => {}
        Position::Outside => {
            return Err(Refusal::invalid(
                "artifact",
                "an artifact is projects/<p>/artifacts/<a> or tools/<t>/releases/<digest>",
            ))
        }
        _ => {
            return Err(Refusal::protected(
                "`declare` is about an artifact position",
            ))
        }
    }
    // 3. `read` on its content.
    call.authorize(GrantKind::Read, &path)?;
    // 4. The artifact, its sole content, its declarations journal.
    let artifact = call
        .world
        .resolve(&path)?
        .ok_or_else(|| Refusal::NotFound("no artifact at this path".into()))?;
    let (content_entry, content) = content(&artifact, &path)?;
    let key = "declarations";
    let (space, _) = ensure_child(&artifact, key, &setup_operation_id(key))
        .map_err(|e| e.into_refusal("journal"))?;
    // 5. Every cited reference where it resolves, then the relation rules.
    let statement = &request.statement;
    let premises = statement.justifications.iter().flat_map(|j| &j.premises);
    let targets = statement.relations.iter().map(|r| &r.target);
    for reference in statement.evidence.iter().chain(premises).chain(targets) {
        body_reference(call, reference)?;
    }
    check_relations(statement, &space, &publisher)?;
    // 6. The root's signing key.
    let root = call
        .settings
        .issuer
        .clone()
        .filter(|key| Principal::of(key) == call.settings.root)
        .ok_or_else(|| {
            Refusal::Unavailable(
                "this deployment has no key to sign admissions with (the world's root key)".into(),
            )
        })?;
    // 7. Replay, else build, retain and append.
    let id = assertion_id(&publisher, &request.operation_id, &artifact);
    let normalized = json!({
        "operation_id": request.operation_id,
        "artifact": path,
        "statement": statement.to_json(),
    });
    let digest = request_digest("declare", &space, &normalized, None)?;
    if let Some(indexed) = declarations::find(&space, &id)? {
        return replay(&indexed, &digest, &space, &id);
    }
    let envelope = Envelope {
        call,
        request: &request,
        normalized,
        digest,
        id: &id,
        publisher,
        space: &space,
        content_entry,
        content: content.clone(),
    }
    .build(&root)?;
    let envelope_hash = retain(&envelope)?;
    let facts = batch(&id, &envelope_hash, &content, statement, &publisher);
    let operation_id = format!("coord.declaration.{}", &id[4..]);
    match journal::append(&space, &facts, &operation_id, None) {
        Ok(appended) => Ok(result(&space, appended.first, &id, &envelope_hash, false)),
        // A concurrent identical declare won: its occurrence is indexed.
        Err(CallError::Refused(r)) if r.code == "idempotency_mismatch" => {
            match declarations::find(&space, &id)? {
                Some(indexed) => replay(&indexed, &digest, &space, &id),
                None => Err(Refusal::Unavailable(
                    "the journal holds another batch under this declaration's identity".into(),
                )),
            }
        }
        Err(e) => Err(e.into_refusal("journal")),
    }
}

/// The declaration, then one `justifies` per premise, then one `relation`
/// per relation, in order.
fn batch(
    id: &str,
    envelope: &Hash,
    content: &Artifact,
    statement: &Statement,
    publisher: &Principal,
) -> Vec<Vec<u8>> {
    let mut facts = vec![Fact::Declaration(DeclarationFact {
        assertion_id: id.to_string(),
        envelope: *envelope,
        artifact: content.clone(),
        subject: statement.subject.clone(),
        publisher: publisher.to_string(),
        application: Application::None,
    })];
    for justification in &statement.justifications {
        for premise in &justification.premises {
            facts.push(Fact::Justifies {
                assertion_id: id.to_string(),
                group: justification.group.clone(),
                premise: premise.clone(),
                method: justification.method.clone(),
            });
        }
    }
    for relation in &statement.relations {
        facts.push(Fact::Relation {
            assertion_id: id.to_string(),
            kind: relation.kind,
            target: relation.target.clone(),
        });
    }
    facts.iter().map(Fact::encode).collect()
}

/// What the envelope (DeclarationRecord) is made of.
struct Envelope<'a, 'c> {
    call: &'a Call<'c>,
    request: &'a DeclareRequest,
    normalized: Value,
    digest: Hash,
    id: &'a str,
    publisher: Principal,
    space: &'a Space,
    content_entry: EntryRef,
    content: Artifact,
}

impl Envelope<'_, '_> {
    /// Retains the frame and answers the envelope, its admission signed by
    /// the root.
    fn build(self, root: &SigningKey) -> Result<Value, Refusal> {
        let b64 = base64::engine::general_purpose::STANDARD;
        let carriage = &self.call.carriage;
        let evidence: Vec<Value> = self
            .request
            .statement
            .evidence
            .iter()
            .map(EntryRef::to_json)
            .collect();
        let frame = json!({
            "policy": POLICY,
            "content": self.content.to_json(),
            "evidence": evidence,
            "grants": carriage.to_json()["grants"],
            "proof": carriage.proof.to_json(),
        });
        let frame_hash = retain(&frame)?;
        let now = clock::now();
        let mut admission = json!({
            "world": self.call.settings.world,
            "root": self.call.settings.root.to_string(),
            "space": { "root_id": self.space.root_id, "space_id": self.space.space_id },
            "path": self.call.world.world_path(self.space).unwrap_or_default(),
            "frame": frame_hash.to_string(),
            "policy": POLICY,
            "accepted_at": lab_kit::time::rfc3339_micros(now.seconds, now.nanoseconds),
            "auth": carriage.to_json(),
            "request_body": b64.encode(&self.request.body),
        });
        let signature = lab_coord_auth::sign(root, &admission_signing_bytes(&admission));
        admission["signature"] = json!(b64.encode(signature));
        Ok(json!({
            "purpose": "coord.declaration-record.v1",
            "assertion_id": self.id,
            "request": self.normalized,
            "request_digest": self.digest.to_string(),
            "statement": self.normalized["statement"],
            "content": { "entry": self.content_entry.to_json(), "artifact": self.content.to_json() },
            "publisher": self.publisher.to_string(),
            "frame": frame,
            "admission": admission,
        }))
    }
}
