//! The `coord-facts-v2` fact profile: the facts this service writes into
//! journals, their canonical bytes, and their JSON forms in read results.
//!
//! `contracts/coordination/FACTS.md` documents the bytes for outside
//! clients; `contracts/coordination/facts-vectors.json` holds vectors that
//! `tests/facts_vectors.rs` checks both ways.
//!
//! Every fact is a tuple headed by a label whose bytes are the predicate's
//! name ([`Predicate`]). Arguments are built from four reference shapes:
//!
//! | shape | value |
//! |---|---|
//! | [`EntryRef`] | `[label "coord.entry.v1", text root_id, text space_id, int position]` |
//! | [`Hash`] | `[label "sha256", bytes(32)]` |
//! | [`Artifact`] | `[label "coord.artifact.v1", hash bytes, hash type]` |
//! | metadata | map of text keys to text values |
//!
//! and the bare label `coord.none.v1` ([`Application::None`]).
//!
//! Invariants:
//! 1. [`Fact::encode`] is the one canonical encoding, and
//!    `decode(&f.encode()) == Ok(Some(f))` for every fact whose texts are in
//!    their grammars.
//! 2. [`decode`] refuses only facts headed by one of the ten predicate
//!    labels; any other fact (the journal's creation fact, a text predicate,
//!    a foreign label) is `Ok(None)`.
//! 3. Arguments are checked in order and the first offending one decides the
//!    refusal, which names it ([`FactError::field`]).

use std::collections::BTreeMap;
use std::fmt;

use base64::Engine as _;
use lab_values::{DecodeError, Map, Value};
use serde_json::{json, Value as Json};
use sha2::{Digest, Sha256};

mod grammar;

pub use grammar::{
    is_accepted_at, is_assertion_id, is_publisher, is_request_id, is_root_id, is_space_id,
    MAX_ASSERTION_ID_CHARS, MAX_POSITION,
};

/// Name of the profile.
pub const PROFILE: &str = "coord-facts-v2";
/// Label heading an occurrence reference.
pub const ENTRY_LABEL: &[u8] = b"coord.entry.v1";
/// Label heading a hash value.
pub const HASH_LABEL: &[u8] = b"sha256";
/// Label heading an artifact value.
pub const ARTIFACT_LABEL: &[u8] = b"coord.artifact.v1";
/// The bare label standing for "no application".
pub const NONE_LABEL: &[u8] = b"coord.none.v1";

/// The ten predicates of the profile. The label heading a fact holds the
/// bytes of [`Predicate::name`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Predicate {
    Content,
    Record,
    Declaration,
    Attempt,
    Bound,
    Produced,
    Result,
    Staged,
    Justifies,
    Relation,
}

/// What a JSON member of an argument holds; drives [`Fact::from_json`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    Text,
    Hash,
    Entry,
    Artifact,
    Metadata,
    /// An [`EntryRef`] or the none label (JSON: EntryRef, null or absent).
    Application,
    /// A text or null (JSON: string or absent).
    Subject,
}

impl Predicate {
    /// Every predicate, in the order of the profile's table.
    pub const ALL: [Predicate; 10] = [
        Predicate::Content,
        Predicate::Record,
        Predicate::Declaration,
        Predicate::Attempt,
        Predicate::Bound,
        Predicate::Produced,
        Predicate::Result,
        Predicate::Staged,
        Predicate::Justifies,
        Predicate::Relation,
    ];

    /// The table name: the label's bytes, and the Entry member the fact
    /// populates in a read result.
    pub const fn name(self) -> &'static str {
        match self {
            Predicate::Content => "content",
            Predicate::Record => "record",
            Predicate::Declaration => "declaration",
            Predicate::Attempt => "attempt",
            Predicate::Bound => "bound",
            Predicate::Produced => "produced",
            Predicate::Result => "result",
            Predicate::Staged => "staged",
            Predicate::Justifies => "justifies",
            Predicate::Relation => "relation",
        }
    }

    /// The predicate whose name is `name`.
    pub fn from_name(name: &str) -> Option<Predicate> {
        Predicate::ALL.into_iter().find(|p| p.name() == name)
    }

    /// The predicate whose label holds `bytes`.
    pub fn from_label(bytes: &[u8]) -> Option<Predicate> {
        Predicate::ALL
            .into_iter()
            .find(|p| p.name().as_bytes() == bytes)
    }

    /// The label atom heading the predicate's facts.
    pub fn label(self) -> Value {
        Value::label(self.name())
    }

    /// Canonical bytes of the label atom (`d8 27`, a byte-string head, the
    /// name).
    pub fn to_value_bytes(self) -> Vec<u8> {
        self.label().to_bytes()
    }

    /// The journal filter's `predicate` member: padded standard base64 of
    /// [`Predicate::to_value_bytes`].
    pub fn filter_base64(self) -> String {
        base64::engine::general_purpose::STANDARD.encode(self.to_value_bytes())
    }

    /// The argument names, in order. A journal filter's argument `index`
    /// is the position in this list (0 is the first after the predicate).
    pub fn arguments(self) -> impl Iterator<Item = &'static str> {
        self.shape().iter().map(|(name, _)| *name)
    }

    /// The filter `index` of the argument named `name`.
    pub fn argument_index(self, name: &str) -> Option<usize> {
        self.arguments().position(|a| a == name)
    }

    /// The JSON member an argument appears under in [`Fact::to_json`]: the
    /// argument's name, except `entry` of `bound` and `produced`, which
    /// appears as `bound` and `produced`.
    pub fn member(self, argument: &'static str) -> &'static str {
        match (self, argument) {
            (Predicate::Bound, "entry") => "bound",
            (Predicate::Produced, "entry") => "produced",
            _ => argument,
        }
    }

    const fn shape(self) -> &'static [(&'static str, Kind)] {
        use Kind::*;
        match self {
            Predicate::Content => &[("artifact", Artifact)],
            Predicate::Record => &[
                ("profile", Text),
                ("hash", Hash),
                ("metadata", Metadata),
                ("publisher", Text),
                ("request_id", Text),
                ("request_digest", Hash),
                ("accepted_at", Text),
            ],
            Predicate::Declaration => &[
                ("assertion_id", Text),
                ("envelope", Hash),
                ("artifact", Artifact),
                ("subject", Subject),
                ("publisher", Text),
                ("application", Application),
            ],
            Predicate::Attempt => &[
                ("release", Entry),
                ("request", Hash),
                ("publisher", Text),
                ("request_id", Text),
                ("request_digest", Hash),
                ("accepted_at", Text),
            ],
            Predicate::Bound | Predicate::Produced => {
                &[("application", Entry), ("role", Text), ("entry", Entry)]
            }
            Predicate::Result => &[
                ("application", Entry),
                ("outcome", Text),
                ("manifest", Hash),
                ("resolution", Hash),
                ("attestation", Hash),
            ],
            Predicate::Staged => &[("application", Entry)],
            Predicate::Justifies => &[
                ("assertion_id", Text),
                ("group", Text),
                ("premise", Entry),
                ("method", Text),
            ],
            Predicate::Relation => &[("assertion_id", Text), ("kind", Text), ("target", Entry)],
        }
    }
}

impl fmt::Display for Predicate {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// An occurrence: one entry of one journal.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct EntryRef {
    /// `rt_` and 32 lowercase hex digits.
    pub root_id: String,
    /// `spc_` and 32 lowercase hex digits.
    pub space_id: String,
    /// 1 ..= [`MAX_POSITION`].
    pub position: u64,
}

impl EntryRef {
    /// `[label "coord.entry.v1", text root_id, text space_id, int position]`.
    pub fn to_value(&self) -> Value {
        Value::Tuple(vec![
            Value::label(ENTRY_LABEL),
            Value::text(self.root_id.as_str()),
            Value::text(self.space_id.as_str()),
            Value::int(self.position),
        ])
    }

    /// Canonical bytes of [`EntryRef::to_value`], e.g. for a filter's
    /// `equals`.
    pub fn to_value_bytes(&self) -> Vec<u8> {
        self.to_value().to_bytes()
    }

    /// The reference a value holds, checking every part's grammar.
    pub fn from_value(value: &Value) -> Result<EntryRef, &'static str> {
        let Value::Tuple(parts) = value else {
            return Err("not an occurrence reference (a 4-tuple)");
        };
        let [label, root_id, space_id, position] = parts.as_slice() else {
            return Err("occurrence reference is not a 4-tuple");
        };
        if !matches!(label, Value::Label(l) if l == ENTRY_LABEL) {
            return Err("occurrence reference is not headed by label coord.entry.v1");
        }
        let Value::Text(root_id) = root_id else {
            return Err("occurrence root_id is not text");
        };
        let Value::Text(space_id) = space_id else {
            return Err("occurrence space_id is not text");
        };
        let Value::Int(position) = position else {
            return Err("occurrence position is not an int");
        };
        EntryRef::checked(root_id, space_id, position.to_u64())
    }

    /// The JSON form `{root_id, space_id, position}`.
    pub fn to_json(&self) -> Json {
        json!({
            "root_id": self.root_id,
            "space_id": self.space_id,
            "position": self.position,
        })
    }

    /// The reference a JSON object with exactly the members `root_id`,
    /// `space_id` and `position` holds, checking every member's grammar.
    pub fn from_json(json: &Json) -> Result<EntryRef, &'static str> {
        let Some(object) = json.as_object() else {
            return Err("occurrence reference is not an object");
        };
        if object.len() != 3 {
            return Err("occurrence reference must have exactly root_id, space_id, position");
        }
        let (Some(Json::String(root_id)), Some(Json::String(space_id)), Some(position)) = (
            object.get("root_id"),
            object.get("space_id"),
            object.get("position"),
        ) else {
            return Err("occurrence reference must have string root_id, string space_id and integer position");
        };
        EntryRef::checked(root_id, space_id, position.as_u64())
    }

    fn checked(
        root_id: &str,
        space_id: &str,
        position: Option<u64>,
    ) -> Result<EntryRef, &'static str> {
        if !is_root_id(root_id) {
            return Err("occurrence root_id is not rt_ and 32 lowercase hex digits");
        }
        if !is_space_id(space_id) {
            return Err("occurrence space_id is not spc_ and 32 lowercase hex digits");
        }
        match position {
            Some(position @ 1..=MAX_POSITION) => Ok(EntryRef {
                root_id: root_id.to_owned(),
                space_id: space_id.to_owned(),
                position,
            }),
            _ => Err("occurrence position is not in 1 ..= 2^53-1"),
        }
    }
}

/// A SHA-256 digest; as text `sha256:` and 64 lowercase hex digits.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Hash(pub [u8; 32]);

impl Hash {
    /// SHA-256 of `bytes`.
    pub fn of(bytes: &[u8]) -> Hash {
        Hash(Sha256::digest(bytes).into())
    }

    /// The digest `text` names, if it is `sha256:` and 64 lowercase hex
    /// digits.
    pub fn parse(text: &str) -> Option<Hash> {
        let hex = text.strip_prefix("sha256:")?;
        if hex.len() != 64 || !hex.bytes().all(|d| matches!(d, b'0'..=b'9' | b'a'..=b'f')) {
            return None;
        }
        let mut digest = [0u8; 32];
        hex::decode_to_slice(hex, &mut digest).ok()?;
        Some(Hash(digest))
    }

    /// The digest's octets.
    pub fn as_bytes(&self) -> &[u8; 32] {
        &self.0
    }

    /// `[label "sha256", bytes(32)]`.
    pub fn to_value(&self) -> Value {
        Value::Tuple(vec![
            Value::label(HASH_LABEL),
            Value::bytes(self.0.to_vec()),
        ])
    }

    /// Canonical bytes of [`Hash::to_value`], e.g. for a filter's `equals`.
    pub fn to_value_bytes(&self) -> Vec<u8> {
        self.to_value().to_bytes()
    }

    /// The digest a value holds.
    pub fn from_value(value: &Value) -> Result<Hash, &'static str> {
        match value {
            Value::Tuple(parts) => match parts.as_slice() {
                [Value::Label(label), Value::Bytes(digest)] if label == HASH_LABEL => digest
                    .as_slice()
                    .try_into()
                    .map(Hash)
                    .map_err(|_| "hash value does not hold exactly 32 bytes"),
                _ => Err("not a hash value [label sha256, bytes(32)]"),
            },
            _ => Err("not a hash value [label sha256, bytes(32)]"),
        }
    }

    /// The JSON form: the text `sha256:...`.
    pub fn to_json(&self) -> Json {
        Json::String(self.to_string())
    }
}

impl From<[u8; 32]> for Hash {
    fn from(digest: [u8; 32]) -> Hash {
        Hash(digest)
    }
}

impl fmt::Display for Hash {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&lab_values::digest_text(&self.0))
    }
}

/// Retained content with a selected interpretation.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Artifact {
    /// Hash of the content bytes.
    pub bytes: Hash,
    /// Hash of the interpretation descriptor (JSON member `type`).
    pub kind: Hash,
}

impl Artifact {
    /// `[label "coord.artifact.v1", hash bytes, hash type]`.
    pub fn to_value(&self) -> Value {
        Value::Tuple(vec![
            Value::label(ARTIFACT_LABEL),
            self.bytes.to_value(),
            self.kind.to_value(),
        ])
    }

    /// Canonical bytes of [`Artifact::to_value`], e.g. for a filter's
    /// `equals`.
    pub fn to_value_bytes(&self) -> Vec<u8> {
        self.to_value().to_bytes()
    }

    /// The artifact a value holds.
    pub fn from_value(value: &Value) -> Result<Artifact, &'static str> {
        let parts = match value {
            Value::Tuple(parts) => match parts.as_slice() {
                [Value::Label(label), bytes, kind] if label == ARTIFACT_LABEL => {
                    Some((bytes, kind))
                }
                _ => None,
            },
            _ => None,
        };
        let Some((bytes, kind)) = parts else {
            return Err("not an artifact value [label coord.artifact.v1, hash, hash]");
        };
        Ok(Artifact {
            bytes: Hash::from_value(bytes).map_err(|_| "artifact bytes is not a hash value")?,
            kind: Hash::from_value(kind).map_err(|_| "artifact type is not a hash value")?,
        })
    }

    /// The JSON form `{bytes, type}`.
    pub fn to_json(&self) -> Json {
        json!({ "bytes": self.bytes.to_string(), "type": self.kind.to_string() })
    }

    /// The artifact a JSON object with exactly the string members `bytes`
    /// and `type` holds.
    pub fn from_json(json: &Json) -> Result<Artifact, &'static str> {
        let Some(object) = json.as_object() else {
            return Err("artifact is not an object");
        };
        let (2, Some(Json::String(bytes)), Some(Json::String(kind))) =
            (object.len(), object.get("bytes"), object.get("type"))
        else {
            return Err("artifact must have exactly the string members bytes and type");
        };
        Ok(Artifact {
            bytes: Hash::parse(bytes).ok_or("artifact bytes is not sha256: and 64 hex digits")?,
            kind: Hash::parse(kind).ok_or("artifact type is not sha256: and 64 hex digits")?,
        })
    }
}

/// The application a declaration came from.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Application {
    /// Written by a hosted application: its admission occurrence A.
    Hosted(EntryRef),
    /// Written by a principal itself: the bare label `coord.none.v1`.
    None,
}

impl Application {
    /// The occurrence, or the label `coord.none.v1`.
    pub fn to_value(&self) -> Value {
        match self {
            Application::Hosted(entry) => entry.to_value(),
            Application::None => Value::label(NONE_LABEL),
        }
    }

    /// The application a value holds.
    pub fn from_value(value: &Value) -> Result<Application, &'static str> {
        match value {
            Value::Label(label) if label == NONE_LABEL => Ok(Application::None),
            Value::Label(_) => Err("a label other than coord.none.v1"),
            entry => EntryRef::from_value(entry).map(Application::Hosted),
        }
    }

    /// The JSON form: the EntryRef, or null.
    pub fn to_json(&self) -> Json {
        match self {
            Application::Hosted(entry) => entry.to_json(),
            Application::None => Json::Null,
        }
    }
}

/// How an application ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Outcome {
    Completed,
    Failed,
    Interrupted,
}

impl Outcome {
    /// The text the fact holds.
    pub const fn name(self) -> &'static str {
        match self {
            Outcome::Completed => "completed",
            Outcome::Failed => "failed",
            Outcome::Interrupted => "interrupted",
        }
    }

    /// The outcome named `name`.
    pub fn from_name(name: &str) -> Option<Outcome> {
        [Outcome::Completed, Outcome::Failed, Outcome::Interrupted]
            .into_iter()
            .find(|o| o.name() == name)
    }
}

/// How a relation's assertion bears on its target.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum RelationKind {
    Supersedes,
    Challenges,
    Withdraws,
}

impl RelationKind {
    /// The text the fact holds.
    pub const fn name(self) -> &'static str {
        match self {
            RelationKind::Supersedes => "supersedes",
            RelationKind::Challenges => "challenges",
            RelationKind::Withdraws => "withdraws",
        }
    }

    /// The kind named `name`.
    pub fn from_name(name: &str) -> Option<RelationKind> {
        [
            RelationKind::Supersedes,
            RelationKind::Challenges,
            RelationKind::Withdraws,
        ]
        .into_iter()
        .find(|k| k.name() == name)
    }
}

/// An admitted record: `record` fact.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RecordFact {
    pub profile: String,
    /// Hash of the retained payload.
    pub hash: Hash,
    pub metadata: BTreeMap<String, String>,
    /// The authenticated principal, `ed25519:` and 64 hex digits.
    pub publisher: String,
    /// `req_` and 64 hex digits.
    pub request_id: String,
    pub request_digest: Hash,
    /// RFC 3339 UTC with six fractional digits ([`is_accepted_at`]).
    pub accepted_at: String,
}

/// An assertion about an artifact's exact content: `declaration` fact.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DeclarationFact {
    /// 1 ..= 128 characters.
    pub assertion_id: String,
    /// Hash of the retained declaration envelope.
    pub envelope: Hash,
    pub artifact: Artifact,
    /// `None` is the value null.
    pub subject: Option<String>,
    pub publisher: String,
    pub application: Application,
}

/// The admission heading an application's batch: `attempt` fact.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AttemptFact {
    pub release: EntryRef,
    /// Hash of the retained normalized request.
    pub request: Hash,
    pub publisher: String,
    pub request_id: String,
    pub request_digest: Hash,
    pub accepted_at: String,
}

/// One fact of the profile.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Fact {
    Content {
        artifact: Artifact,
    },
    Record(RecordFact),
    Declaration(DeclarationFact),
    Attempt(AttemptFact),
    Bound {
        application: EntryRef,
        role: String,
        entry: EntryRef,
    },
    Produced {
        application: EntryRef,
        role: String,
        entry: EntryRef,
    },
    Result {
        application: EntryRef,
        outcome: Outcome,
        manifest: Hash,
        resolution: Hash,
        attestation: Hash,
    },
    Staged {
        application: EntryRef,
    },
    Justifies {
        assertion_id: String,
        group: String,
        premise: EntryRef,
        method: String,
    },
    Relation {
        assertion_id: String,
        kind: RelationKind,
        target: EntryRef,
    },
}

impl Fact {
    /// The predicate heading the fact.
    pub fn predicate(&self) -> Predicate {
        match self {
            Fact::Content { .. } => Predicate::Content,
            Fact::Record(_) => Predicate::Record,
            Fact::Declaration(_) => Predicate::Declaration,
            Fact::Attempt(_) => Predicate::Attempt,
            Fact::Bound { .. } => Predicate::Bound,
            Fact::Produced { .. } => Predicate::Produced,
            Fact::Result { .. } => Predicate::Result,
            Fact::Staged { .. } => Predicate::Staged,
            Fact::Justifies { .. } => Predicate::Justifies,
            Fact::Relation { .. } => Predicate::Relation,
        }
    }

    /// The Entry member of a read result the fact populates (`content`,
    /// `record`, ...): the predicate's name.
    pub fn member_name(&self) -> &'static str {
        self.predicate().name()
    }

    /// The fact as a value: the predicate's label, then the arguments.
    pub fn to_value(&self) -> Value {
        let text = |t: &str| Value::text(t);
        let arguments = match self {
            Fact::Content { artifact } => vec![artifact.to_value()],
            Fact::Record(r) => vec![
                text(&r.profile),
                r.hash.to_value(),
                Value::Map(
                    r.metadata
                        .iter()
                        .map(|(k, v)| (text(k), text(v)))
                        .collect::<Map>(),
                ),
                text(&r.publisher),
                text(&r.request_id),
                r.request_digest.to_value(),
                text(&r.accepted_at),
            ],
            Fact::Declaration(d) => vec![
                text(&d.assertion_id),
                d.envelope.to_value(),
                d.artifact.to_value(),
                d.subject.as_deref().map_or(Value::Null, text),
                text(&d.publisher),
                d.application.to_value(),
            ],
            Fact::Attempt(a) => vec![
                a.release.to_value(),
                a.request.to_value(),
                text(&a.publisher),
                text(&a.request_id),
                a.request_digest.to_value(),
                text(&a.accepted_at),
            ],
            Fact::Bound {
                application,
                role,
                entry,
            }
            | Fact::Produced {
                application,
                role,
                entry,
            } => vec![application.to_value(), text(role), entry.to_value()],
            Fact::Result {
                application,
                outcome,
                manifest,
                resolution,
                attestation,
            } => vec![
                application.to_value(),
                text(outcome.name()),
                manifest.to_value(),
                resolution.to_value(),
                attestation.to_value(),
            ],
            Fact::Staged { application } => vec![application.to_value()],
            Fact::Justifies {
                assertion_id,
                group,
                premise,
                method,
            } => vec![
                text(assertion_id),
                text(group),
                premise.to_value(),
                text(method),
            ],
            Fact::Relation {
                assertion_id,
                kind,
                target,
            } => vec![text(assertion_id), text(kind.name()), target.to_value()],
        };
        let mut children = Vec::with_capacity(1 + arguments.len());
        children.push(self.predicate().label());
        children.extend(arguments);
        Value::Tuple(children)
    }

    /// The canonical bytes of the fact, as appended to a journal.
    pub fn encode(&self) -> Vec<u8> {
        self.to_value().to_bytes()
    }

    /// The fact a value holds: `Ok(None)` when it is not a fact headed by
    /// one of the profile's predicate labels.
    pub fn from_value(value: &Value) -> Result<Option<Fact>, FactError> {
        let Some((Value::Label(label), arguments)) = value.as_fact() else {
            return Ok(None);
        };
        let Some(predicate) = Predicate::from_label(label) else {
            return Ok(None);
        };
        let mut a = Arguments::new(predicate, arguments);
        let fact = match predicate {
            Predicate::Content => Fact::Content {
                artifact: a.artifact()?,
            },
            Predicate::Record => Fact::Record(RecordFact {
                profile: a.text()?,
                hash: a.hash()?,
                metadata: a.metadata()?,
                publisher: a.checked_text(is_publisher, PUBLISHER)?,
                request_id: a.checked_text(is_request_id, REQUEST_ID)?,
                request_digest: a.hash()?,
                accepted_at: a.checked_text(is_accepted_at, ACCEPTED_AT)?,
            }),
            Predicate::Declaration => Fact::Declaration(DeclarationFact {
                assertion_id: a.checked_text(is_assertion_id, ASSERTION_ID)?,
                envelope: a.hash()?,
                artifact: a.artifact()?,
                subject: a.subject()?,
                publisher: a.checked_text(is_publisher, PUBLISHER)?,
                application: a.application()?,
            }),
            Predicate::Attempt => Fact::Attempt(AttemptFact {
                release: a.entry()?,
                request: a.hash()?,
                publisher: a.checked_text(is_publisher, PUBLISHER)?,
                request_id: a.checked_text(is_request_id, REQUEST_ID)?,
                request_digest: a.hash()?,
                accepted_at: a.checked_text(is_accepted_at, ACCEPTED_AT)?,
            }),
            Predicate::Bound => Fact::Bound {
                application: a.entry()?,
                role: a.text()?,
                entry: a.entry()?,
            },
            Predicate::Produced => Fact::Produced {
                application: a.entry()?,
                role: a.text()?,
                entry: a.entry()?,
            },
            Predicate::Result => Fact::Result {
                application: a.entry()?,
                outcome: a.parsed(Outcome::from_name, OUTCOME)?,
                manifest: a.hash()?,
                resolution: a.hash()?,
                attestation: a.hash()?,
            },
            Predicate::Staged => Fact::Staged {
                application: a.entry()?,
            },
            Predicate::Justifies => Fact::Justifies {
                assertion_id: a.checked_text(is_assertion_id, ASSERTION_ID)?,
                group: a.text()?,
                premise: a.entry()?,
                method: a.text()?,
            },
            Predicate::Relation => Fact::Relation {
                assertion_id: a.checked_text(is_assertion_id, ASSERTION_ID)?,
                kind: a.parsed(RelationKind::from_name, RELATION_KIND)?,
                target: a.entry()?,
            },
        };
        a.finish()?;
        Ok(Some(fact))
    }

    /// The decoded member of a read result's Entry (without `entry`, which
    /// the caller adds), under [`Fact::member_name`].
    pub fn to_json(&self) -> Json {
        match self {
            Fact::Content { artifact } => json!({ "artifact": artifact.to_json() }),
            Fact::Record(r) => json!({
                "profile": r.profile,
                "hash": r.hash.to_json(),
                "metadata": r.metadata,
                "publisher": r.publisher,
                "request_id": r.request_id,
                "request_digest": r.request_digest.to_json(),
                "accepted_at": r.accepted_at,
            }),
            Fact::Declaration(d) => {
                let mut member = json!({
                    "assertion_id": d.assertion_id,
                    "envelope": d.envelope.to_json(),
                    "artifact": d.artifact.to_json(),
                    "publisher": d.publisher,
                    "application": d.application.to_json(),
                });
                if let Some(subject) = &d.subject {
                    member["subject"] = Json::String(subject.clone());
                }
                member
            }
            Fact::Attempt(a) => json!({
                "release": a.release.to_json(),
                "request": a.request.to_json(),
                "publisher": a.publisher,
                "request_id": a.request_id,
                "request_digest": a.request_digest.to_json(),
                "accepted_at": a.accepted_at,
            }),
            Fact::Bound {
                application,
                role,
                entry,
            } => json!({
                "application": application.to_json(),
                "role": role,
                "bound": entry.to_json(),
            }),
            Fact::Produced {
                application,
                role,
                entry,
            } => json!({
                "application": application.to_json(),
                "role": role,
                "produced": entry.to_json(),
            }),
            Fact::Result {
                application,
                outcome,
                manifest,
                resolution,
                attestation,
            } => json!({
                "application": application.to_json(),
                "outcome": outcome.name(),
                "manifest": manifest.to_json(),
                "resolution": resolution.to_json(),
                "attestation": attestation.to_json(),
            }),
            Fact::Staged { application } => json!({ "application": application.to_json() }),
            Fact::Justifies {
                assertion_id,
                group,
                premise,
                method,
            } => json!({
                "assertion_id": assertion_id,
                "group": group,
                "premise": premise.to_json(),
                "method": method,
            }),
            Fact::Relation {
                assertion_id,
                kind,
                target,
            } => json!({
                "assertion_id": assertion_id,
                "kind": kind.name(),
                "target": target.to_json(),
            }),
        }
    }

    /// The fact whose [`Fact::to_json`] form is `member`, the inverse of
    /// `to_json`. Every member is required except a declaration's `subject`
    /// (absent for null) and `application` (null or absent for none); an
    /// unknown member is refused. A refusal's field is the JSON member
    /// name (`bound`, not `entry`).
    pub fn from_json(predicate: Predicate, member: &Json) -> Result<Fact, FactError> {
        let refuse = |field: &str, reason| FactError::argument(predicate, field, reason);
        let Some(object) = member.as_object() else {
            return Err(refuse(predicate.name(), "not a JSON object"));
        };
        let shape = predicate.shape();
        if let Some(unknown) = object
            .keys()
            .find(|k| !shape.iter().any(|(a, _)| predicate.member(a) == k.as_str()))
        {
            return Err(refuse(unknown, "not a member of this fact"));
        }
        let mut children = vec![predicate.label()];
        for &(argument, kind) in shape {
            let name = predicate.member(argument);
            let json = object.get(name);
            let string = || match json {
                Some(Json::String(s)) => Ok(s.as_str()),
                Some(_) => Err(refuse(name, "not a string")),
                None => Err(refuse(name, "missing")),
            };
            let present = || json.ok_or_else(|| refuse(name, "missing"));
            let value = match kind {
                Kind::Text => Value::text(string()?),
                Kind::Hash => Hash::parse(string()?)
                    .ok_or_else(|| refuse(name, "not sha256: and 64 lowercase hex digits"))?
                    .to_value(),
                Kind::Entry => EntryRef::from_json(present()?)
                    .map_err(|reason| refuse(name, reason))?
                    .to_value(),
                Kind::Artifact => Artifact::from_json(present()?)
                    .map_err(|reason| refuse(name, reason))?
                    .to_value(),
                Kind::Metadata => {
                    let Some(Json::Object(pairs)) = json else {
                        return Err(refuse(name, "not an object of strings"));
                    };
                    let mut map = Map::new();
                    for (key, value) in pairs {
                        let Json::String(value) = value else {
                            return Err(refuse(name, "not an object of strings"));
                        };
                        map.insert(Value::text(key.as_str()), Value::text(value.as_str()));
                    }
                    Value::Map(map)
                }
                Kind::Application => match json {
                    None | Some(Json::Null) => Value::label(NONE_LABEL),
                    Some(entry) => EntryRef::from_json(entry)
                        .map_err(|reason| refuse(name, reason))?
                        .to_value(),
                },
                Kind::Subject => match json {
                    None => Value::Null,
                    Some(Json::String(s)) => Value::text(s.as_str()),
                    Some(_) => return Err(refuse(name, "not a string (omitted when absent)")),
                },
            };
            children.push(value);
        }
        match Fact::from_value(&Value::Tuple(children)) {
            Ok(Some(fact)) => Ok(fact),
            Ok(None) => unreachable!("headed by a profile predicate"),
            // Name the JSON member rather than the argument.
            Err(FactError::Argument { field, reason, .. }) => {
                match shape.iter().find(|(argument, _)| *argument == field) {
                    Some((argument, _)) => Err(refuse(predicate.member(argument), reason)),
                    None => Err(refuse(&field, reason)),
                }
            }
            Err(other) => Err(other),
        }
    }
}

/// Decodes a journal fact: `Ok(None)` when it is a fact not headed by one
/// of the profile's predicate labels (the journal's creation fact, a
/// foreign fact), an error when the bytes are not one canonical fact or
/// when a profile fact's shape is wrong.
pub fn decode(bytes: &[u8]) -> Result<Option<Fact>, FactError> {
    let value = lab_values::decode_fact(bytes).map_err(FactError::Encoding)?;
    Fact::from_value(&value)
}

/// Canonical bytes of the label atom heading `predicate`'s facts, for a
/// journal filter's `predicate`.
pub fn predicate_value(predicate: Predicate) -> Vec<u8> {
    predicate.to_value_bytes()
}

/// Canonical bytes of the text atom `text`, for a journal filter's
/// `equals` on a text argument (`request_id`, `role`, `assertion_id`, ...).
pub fn text_value_bytes(text: &str) -> Vec<u8> {
    Value::text(text).to_bytes()
}

/// Why bytes are not a fact of the profile.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum FactError {
    /// The bytes are not one canonical fact (the journal never returns
    /// such bytes).
    Encoding(DecodeError),
    /// The fact is headed by a profile predicate but an argument is
    /// missing, superfluous, of the wrong kind or outside its grammar.
    Argument {
        predicate: Predicate,
        /// The argument's name ([`Predicate::arguments`]), the first one
        /// found wrong in order; `arity` when every argument is right but
        /// more follow.
        field: String,
        /// What is wrong with it, for a message.
        reason: &'static str,
    },
}

impl FactError {
    fn argument(predicate: Predicate, field: &str, reason: &'static str) -> FactError {
        FactError::Argument {
            predicate,
            field: field.to_owned(),
            reason,
        }
    }

    /// The predicate heading the refused fact, if it was decoded that far.
    pub fn predicate(&self) -> Option<Predicate> {
        match self {
            FactError::Argument { predicate, .. } => Some(*predicate),
            FactError::Encoding(_) => None,
        }
    }

    /// The offending argument, for a refusal's `details.field`.
    pub fn field(&self) -> Option<&str> {
        match self {
            FactError::Argument { field, .. } => Some(field),
            FactError::Encoding(_) => None,
        }
    }

    /// A refusal's `details`: `{predicate, field}`, or `{offset}` of the
    /// offending byte when the bytes are not a canonical fact.
    pub fn details(&self) -> Json {
        match self {
            FactError::Argument {
                predicate, field, ..
            } => json!({ "predicate": predicate.name(), "field": field }),
            FactError::Encoding(e) => json!({ "offset": e.offset() }),
        }
    }
}

impl fmt::Display for FactError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            FactError::Encoding(e) => write!(f, "not a canonical fact: {e}"),
            FactError::Argument {
                predicate,
                field,
                reason,
            } => write!(f, "{predicate} fact, argument {field}: {reason}"),
        }
    }
}

impl std::error::Error for FactError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            FactError::Encoding(e) => Some(e),
            FactError::Argument { .. } => None,
        }
    }
}

const PUBLISHER: &str = "not ed25519: and 64 lowercase hex digits";
const REQUEST_ID: &str = "not req_ and 64 lowercase hex digits";
const ACCEPTED_AT: &str = "not RFC 3339 UTC with six fractional digits and Z";
const ASSERTION_ID: &str = "not 1 to 128 characters";
const OUTCOME: &str = "not completed, failed or interrupted";
const RELATION_KIND: &str = "not supersedes, challenges or withdraws";

/// Reads a fact's arguments in order; each read names the argument it is
/// at, taken from the predicate's shape.
struct Arguments<'a> {
    predicate: Predicate,
    values: &'a [Value],
    next: usize,
}

impl<'a> Arguments<'a> {
    fn new(predicate: Predicate, values: &'a [Value]) -> Arguments<'a> {
        Arguments {
            predicate,
            values,
            next: 0,
        }
    }

    /// The next argument's name and value.
    fn take(&mut self) -> Result<(&'static str, &'a Value), FactError> {
        let (name, _) = self.predicate.shape()[self.next];
        self.next += 1;
        match self.values.get(self.next - 1) {
            Some(value) => Ok((name, value)),
            None => Err(FactError::argument(self.predicate, name, "missing")),
        }
    }

    fn read<T>(
        &mut self,
        read: impl FnOnce(&'a Value) -> Result<T, &'static str>,
    ) -> Result<T, FactError> {
        let (name, value) = self.take()?;
        read(value).map_err(|reason| FactError::argument(self.predicate, name, reason))
    }

    fn text(&mut self) -> Result<String, FactError> {
        self.read(|value| match value {
            Value::Text(text) => Ok(text.clone()),
            _ => Err("not text"),
        })
    }

    fn checked_text(
        &mut self,
        check: fn(&str) -> bool,
        reason: &'static str,
    ) -> Result<String, FactError> {
        self.read(|value| match value {
            Value::Text(text) if check(text) => Ok(text.clone()),
            Value::Text(_) => Err(reason),
            _ => Err("not text"),
        })
    }

    fn parsed<T>(
        &mut self,
        parse: fn(&str) -> Option<T>,
        reason: &'static str,
    ) -> Result<T, FactError> {
        self.read(|value| match value {
            Value::Text(text) => parse(text).ok_or(reason),
            _ => Err("not text"),
        })
    }

    fn hash(&mut self) -> Result<Hash, FactError> {
        self.read(Hash::from_value)
    }

    fn entry(&mut self) -> Result<EntryRef, FactError> {
        self.read(EntryRef::from_value)
    }

    fn artifact(&mut self) -> Result<Artifact, FactError> {
        self.read(Artifact::from_value)
    }

    fn application(&mut self) -> Result<Application, FactError> {
        self.read(Application::from_value)
    }

    fn subject(&mut self) -> Result<Option<String>, FactError> {
        self.read(|value| match value {
            Value::Text(text) => Ok(Some(text.clone())),
            Value::Null => Ok(None),
            _ => Err("neither text nor null"),
        })
    }

    fn metadata(&mut self) -> Result<BTreeMap<String, String>, FactError> {
        self.read(|value| {
            let Value::Map(map) = value else {
                return Err("not a map");
            };
            map.iter()
                .map(|pair| match pair {
                    (Value::Text(k), Value::Text(v)) => Ok((k.clone(), v.clone())),
                    _ => Err("a key or value is not text"),
                })
                .collect()
        })
    }

    /// Refuses arguments beyond the shape.
    fn finish(self) -> Result<(), FactError> {
        if self.values.len() > self.next {
            return Err(FactError::argument(
                self.predicate,
                "arity",
                "more arguments than the predicate takes",
            ));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests;
