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
use lab_coord_auth::{canonical_json, GrantKind, Principal, SigningKey, ADMISSION_PURPOSE};
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
        lab_kit::hex::encode_lower(&Sha256::digest(canonical_json(&scope)))
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
    // The target is within the head: it was resolved before.
    let head = journal::head(declarations).map_err(|e| e.into_refusal("journal"))?;
    let fact = journal::fact_at(declarations, target.position, head)
        .map_err(|e| e.into_refusal("journal"))?;
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
    let envelope = declarations::summary(&indexed.envelope)?;
    if envelope.request_digest != *digest {
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

fn retain(document: Vec<u8>) -> Result<Hash, Refusal> {
    let retained = blobs::put(document).map_err(|e| match e.code() {
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
    let root = call.settings.root_signer().ok_or_else(|| {
        Refusal::Unavailable(
            "this deployment has no key to sign admissions with (the world's root key)".into(),
        )
    })?;
    // 7. Replay, else build, retain and append.
    let id = assertion_id(&publisher, &request.operation_id, &artifact);
    let statement_json = statement.canonical();
    // The normalized request `{operation_id, artifact, statement}`:
    // `statement` sorts last, so it is spliced in after this prefix.
    let request_prefix = spliced_prefix(
        json!({ "operation_id": request.operation_id, "artifact": path, "statement": null }),
        "statement",
    );
    let request_json: [&[u8]; 3] = [&request_prefix, &statement_json, b"}"];
    let digest = request_digest(&space, &request_json);
    if let Some(indexed) = declarations::find(&space, &id)? {
        return replay(&indexed, &digest, &space, &id);
    }
    let envelope = Envelope {
        call,
        body: &request.body,
        evidence: &statement.evidence,
        request: &request_json,
        statement: &statement_json,
        digest,
        id: &id,
        publisher,
        space: &space,
        content_entry,
        content: content.clone(),
    }
    .build(&root)?;
    let envelope_hash = retain(envelope)?;
    let facts = batch(&id, &envelope_hash, &content, statement, &publisher);
    let operation_id = format!("coord.declaration.{}", &id[4..]);
    match journal::append(&space, &facts, &operation_id, None) {
        // A replay: a concurrent identical declare built the same batch.
        Ok(appended) => Ok(result(
            &space,
            appended.first,
            &id,
            &envelope_hash,
            appended.replayed,
        )),
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

/// HTTP.md decision 7 for `declare` on the declarations space, the
/// normalized request given as canonical JSON in parts: `request` sorts
/// last in the digested document, so it is hashed after its prefix.
fn request_digest(space: &Space, request: &[&[u8]]) -> Hash {
    let document = json!({
        "purpose": "coord.request-digest.v1",
        "op": "declare",
        "destination": { "root_id": space.root_id, "space_id": space.space_id, "path": space.path },
        "request": null,
    });
    let mut hasher = Sha256::new();
    hasher.update(spliced_prefix(document, "request"));
    request.iter().for_each(|part| hasher.update(part));
    hasher.update(b"}");
    Hash(hasher.finalize().into())
}

/// The RFC 8785 JSON of `document` up to and including the name of its
/// `last` member, which must sort last and hold null: the caller appends
/// that member's canonical value and `}`.
fn spliced_prefix(document: Value, last: &str) -> Vec<u8> {
    let mut canonical = canonical_json(&document);
    let suffix = format!("\"{last}\":null}}");
    assert!(
        canonical.ends_with(suffix.as_bytes()),
        "`{last}` sorts last in its document"
    );
    canonical.truncate(canonical.len() - "null}".len());
    canonical
}

/// How a placeholder string starts in canonical JSON: a NUL, which no
/// label, key or ID of the documents spliced here can hold.
const PLACEHOLDER: &[u8] = b"\"\\u0000";

/// A placeholder [`spliced`] replaces.
fn placeholder(name: &str) -> Value {
    json!(format!("\u{0}{name}"))
}

/// RFC 8785 JSON of `document` with each placeholder string replaced by
/// the concatenated parts given for its name (canonical JSON already).
/// Large members (the request body, the statement) are written once into
/// one buffer of the right size, never held as value trees.
fn spliced(document: &Value, parts: &[(&str, &[&[u8]])]) -> Vec<u8> {
    let canonical = canonical_json(document);
    let extra: usize = parts
        .iter()
        .flat_map(|(_, p)| p.iter())
        .map(|p| p.len())
        .sum();
    let mut out = Vec::with_capacity(canonical.len() + extra);
    let mut rest = &canonical[..];
    while let Some(at) = rest
        .windows(PLACEHOLDER.len())
        .position(|w| w == PLACEHOLDER)
    {
        let after = &rest[at + PLACEHOLDER.len()..];
        let (name, pieces) = parts
            .iter()
            .find(|(name, _)| after.starts_with(format!("{name}\"").as_bytes()))
            .expect("every placeholder has its parts");
        out.extend_from_slice(&rest[..at]);
        pieces.iter().for_each(|piece| out.extend_from_slice(piece));
        rest = &after[name.len() + 1..];
    }
    out.extend_from_slice(rest);
    out
}

/// What the envelope (DeclarationRecord) is made of.
struct Envelope<'a, 'c> {
    call: &'a Call<'c>,
    /// The exact request body.
    body: &'a [u8],
    evidence: &'a [EntryRef],
    /// The normalized request's canonical JSON, in parts.
    request: &'a [&'a [u8]],
    /// The normalized statement's canonical JSON.
    statement: &'a [u8],
    digest: Hash,
    id: &'a str,
    publisher: Principal,
    space: &'a Space,
    content_entry: EntryRef,
    content: Artifact,
}

impl Envelope<'_, '_> {
    /// Retains the frame and answers the envelope's canonical JSON, its
    /// admission signed by the root.
    fn build(self, root: &SigningKey) -> Result<Vec<u8>, Refusal> {
        let b64 = base64::engine::general_purpose::STANDARD;
        let carriage = &self.call.carriage;
        let evidence: Vec<Value> = self.evidence.iter().map(EntryRef::to_json).collect();
        let frame = json!({
            "policy": POLICY,
            "content": self.content.to_json(),
            "evidence": evidence,
            "grants": carriage.to_json()["grants"],
            "proof": carriage.proof.to_json(),
        });
        let frame_hash = retain(canonical_json(&frame))?;
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
            "request_body": placeholder("body"),
        });
        // Base64 needs no escaping in a JSON string.
        let body = [b"\"".as_slice(), b64.encode(self.body).as_bytes(), b"\""].concat();
        let body: &[&[u8]] = &[&body];
        // `admission_signing_bytes`, with the body spliced in.
        let signing = spliced(
            &json!({ "purpose": ADMISSION_PURPOSE, "admission": admission }),
            &[("body", body)],
        );
        let signature = lab_coord_auth::sign(root, &signing);
        drop(signing);
        admission["signature"] = json!(b64.encode(signature));
        let record = json!({
            "purpose": "coord.declaration-record.v1",
            "assertion_id": self.id,
            "request": placeholder("request"),
            "request_digest": self.digest.to_string(),
            "statement": placeholder("statement"),
            "content": { "entry": self.content_entry.to_json(), "artifact": self.content.to_json() },
            "publisher": self.publisher.to_string(),
            "frame": frame,
            "admission": admission,
        });
        Ok(spliced(
            &record,
            &[
                ("body", body),
                ("request", self.request),
                ("statement", &[self.statement]),
            ],
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Splicing writes what canonicalizing the whole tree writes.
    #[test]
    fn splicing_agrees_with_the_tree() {
        let statement = json!({ "value": { "b": [1, "x\u{1}"], "a": null }, "subject": "s#l" });
        let canonical_statement = canonical_json(&statement);
        let body = b"\"eyJ9\"".as_slice();
        let document = json!({
            "z": placeholder("statement"),
            "a": { "request_body": placeholder("body"), "k": 1 },
            "m": placeholder("request"),
        });
        let request_prefix = spliced_prefix(json!({ "a": 1, "statement": null }), "statement");
        let request: &[&[u8]] = &[&request_prefix, &canonical_statement, b"}"];
        let out = spliced(
            &document,
            &[
                ("body", &[body]),
                ("request", request),
                ("statement", &[&canonical_statement]),
            ],
        );
        let tree = json!({
            "z": statement,
            "a": { "request_body": "eyJ9", "k": 1 },
            "m": { "a": 1, "statement": statement },
        });
        assert_eq!(
            String::from_utf8(out).unwrap(),
            String::from_utf8(canonical_json(&tree)).unwrap()
        );
        let mut hasher = Sha256::new();
        request.iter().for_each(|part| hasher.update(part));
        assert_eq!(
            Hash(hasher.finalize().into()),
            Hash::of(&canonical_json(&json!({ "a": 1, "statement": statement })))
        );
    }
}
