//! Strict decoding of each operation's request body into a typed request.
//!
//! Every refusal of representation happens here, before storage is touched:
//! `invalid` (naming `details.field` when a member is at fault) and the
//! `limit_exceeded` of declared value, batch, page and cursor bounds.
//!
//! Precedence, the same for every operation and at every nesting level, so
//! one body always draws one refusal:
//! 1. the body is strict JSON (UTF-8, no duplicate member, no unpaired
//!    surrogate, nothing but whitespace after the value), else `invalid`
//!    without a field;
//! 2. the body is an object;
//! 3. no member outside the documented ones: the first unknown member in
//!    body order is named (a case variant is an unknown member);
//! 4. the documented members one by one in the order the spec lists them in
//!    the operation's request; for each: presence and null, type, then its
//!    value rules in the order the spec states them (pattern, range, bounds).
//!    A nested object repeats steps 3 and 4 for its own members; an array is
//!    checked element by element, the first offending element deciding. A
//!    bound met on the way is reported at once (`limit_exceeded` certifies
//!    nothing about the remainder);
//! 5. the rules that relate members (a `read` continuation, a `query`
//!    continuation).
//!
//! Null is accepted only where the spec writes "or null" (`expected_cutoff`,
//! `children.through`, `query.max_depth`, `filter.positions` and its bounds);
//! any other optional member is absent or present with a value.

use lab_strict_json::{Json, Number, Object, ShapeError};
#[cfg(test)]
use serde_json::{json, Value};

use crate::filter::{self, Filter};
use crate::ids::{RootId, SpaceId};
use crate::manifest::{self, Manifest};
use crate::refusal::Refusal;

/// Greatest position, cutoff and numeric control: 2^53-1.
pub const MAX_POSITION: u64 = 9_007_199_254_740_991;
/// Greatest request envelope, in bytes.
pub const MAX_BODY_BYTES: u64 = 8_388_608;
/// Greatest key, in bytes of UTF-8.
pub const MAX_KEY_BYTES: usize = 255;
/// Greatest operation ID, in characters.
pub const MAX_OPERATION_ID_CHARS: usize = 128;
/// Greatest number of facts in one `append`.
pub const MAX_APPEND_FACTS: usize = 128;
/// Greatest total of decoded fact bytes in one `append`.
pub const MAX_APPEND_BYTES: usize = 4 << 20;
/// Greatest page, in entries or children.
pub const MAX_PAGE_ENTRIES: u64 = 128;
/// Page size when `limit` is absent.
pub const DEFAULT_PAGE_ENTRIES: u64 = 64;
/// Greatest cursor, in characters.
pub const MAX_CURSOR_CHARS: usize = 4096;

/// An exact space: the selector of every operation but `resolve`'s path form.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct SpaceRef {
    pub root: RootId,
    pub space: SpaceId,
}

impl SpaceRef {
    /// `{root_id, space_id}`.
    #[cfg(test)]
    pub fn to_json(&self) -> Value {
        json!({ "root_id": self.root.to_string(), "space_id": self.space.to_string() })
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CreateRequest {
    pub parent: SpaceRef,
    pub key: String,
    pub operation_id: String,
    /// Absent and null are both `None`: unconditional.
    pub expected_cutoff: Option<u64>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ResolveRequest {
    Exact(SpaceRef),
    Path { root: RootId, path: Vec<String> },
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChildrenRequest {
    pub space: SpaceRef,
    pub through: Option<u64>,
    /// Sealed text as given, at most [`MAX_CURSOR_CHARS`]; opened by the operation.
    pub cursor: Option<String>,
    pub limit: u64,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HeadRequest {
    pub space: SpaceRef,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AppendRequest {
    pub space: SpaceRef,
    /// Canonical fact bytes in input order; 1..=128 of them, each at most
    /// 1 MiB, at most 4 MiB together.
    pub facts: Vec<Vec<u8>>,
    pub operation_id: String,
    pub expected_cutoff: Option<u64>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReadRequest {
    pub space: SpaceRef,
    pub after: u64,
    /// Invariant: present whenever `after > 0`, and then `after <= through`.
    pub through: Option<u64>,
    pub limit: u64,
    pub filter: Option<Filter>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QueryRequest {
    pub space: SpaceRef,
    pub filter: Option<Filter>,
    /// As given; with a snapshot, equal to its `max_depth` when present.
    pub max_depth: Option<u64>,
    /// Invariant: its scope equals `space`.
    pub snapshot: Option<Manifest>,
    /// Invariant: present only with a snapshot.
    pub cursor: Option<String>,
    pub limit: u64,
}

/// Checks what is known before the body is read: the Content-Type (absent,
/// or `application/json` with at most a UTF-8 charset) and then the body
/// length (at most [`MAX_BODY_BYTES`], else 413 `invalid`).
pub fn check_envelope(content_type: Option<&[u8]>, body_len: u64) -> Result<(), Refusal> {
    if let Some(value) = content_type {
        if !lab_kit::is_media_type(value, "application/json") {
            return Err(Refusal::invalid_request(
                "content-type must be application/json with at most a UTF-8 charset",
            ));
        }
    }
    if body_len > MAX_BODY_BYTES {
        return Err(Refusal::EnvelopeTooLarge);
    }
    Ok(())
}

pub fn decode_create(body: &[u8]) -> Result<CreateRequest, Refusal> {
    let mut body = Members::body(body, &["parent", "key", "operation_id", "expected_cutoff"])?;
    let parent = space_ref(body.required("parent")?, "parent")?;
    let key = key(body.required("key")?, "key")?;
    let operation_id = operation_id(body.required("operation_id")?, "operation_id")?;
    let expected_cutoff = body.nullable_position("expected_cutoff")?;
    body.finish()?;
    Ok(CreateRequest {
        parent,
        key,
        operation_id,
        expected_cutoff,
    })
}

/// Exactly one form: `space`, or `root_id` with `path`. Both forms, or
/// neither, is `invalid`; half of the path form names the missing member.
pub fn decode_resolve(body: &[u8]) -> Result<ResolveRequest, Refusal> {
    let mut body = Members::body(body, &["space", "root_id", "path"])?;
    let exact = body.object.contains("space");
    let by_path = body.object.contains("root_id") || body.object.contains("path");
    let request = match (exact, by_path) {
        (true, true) => {
            return Err(Refusal::invalid(
                "space",
                "give either space or root_id and path, not both",
            ))
        }
        (false, false) => {
            return Err(Refusal::invalid_request(
                "one of space, or root_id and path, is required",
            ))
        }
        (true, false) => ResolveRequest::Exact(space_ref(body.required("space")?, "space")?),
        (false, true) => {
            let root = root_id(body.required("root_id")?, "root_id")?;
            let path = path(body.required("path")?, "path")?;
            ResolveRequest::Path { root, path }
        }
    };
    body.finish()?;
    Ok(request)
}

pub fn decode_children(body: &[u8]) -> Result<ChildrenRequest, Refusal> {
    let mut body = Members::body(body, &["space", "through", "cursor", "limit"])?;
    let space = space_ref(body.required("space")?, "space")?;
    let through = body.nullable_position("through")?;
    let cursor = body
        .optional("cursor")?
        .map(|c| cursor(c, "cursor"))
        .transpose()?;
    let limit = body
        .optional("limit")?
        .map(|l| limit(l, "limit"))
        .transpose()?;
    body.finish()?;
    Ok(ChildrenRequest {
        space,
        through,
        cursor,
        limit: limit.unwrap_or(DEFAULT_PAGE_ENTRIES),
    })
}

pub fn decode_head(body: &[u8]) -> Result<HeadRequest, Refusal> {
    compact_head(body).map_or_else(|| decode_head_document(body), Ok)
}

/// `decode_head` of any text: the document parsed and checked in full.
fn decode_head_document(body: &[u8]) -> Result<HeadRequest, Refusal> {
    let mut body = Members::body(body, &["space"])?;
    let space = space_ref(body.required("space")?, "space")?;
    body.finish()?;
    Ok(HeadRequest { space })
}

/// A `head` request in its compact form, `{"space":{"root_id":"…",
/// "space_id":"…"}}` with well-formed identifiers and no whitespace (what
/// serializers write), read in place without building the document; none
/// for any other text, which [`decode_head`] reads in full. The form admits
/// no escape, duplicate or other member, so the full reading of the same
/// bytes answers the same request.
fn compact_head(body: &[u8]) -> Option<HeadRequest> {
    /// The text up to the next `"`, and what follows that quote.
    fn quoted(text: &[u8]) -> Option<(&str, &[u8])> {
        let end = text.iter().position(|&b| b == b'"')?;
        Some((std::str::from_utf8(&text[..end]).ok()?, &text[end + 1..]))
    }
    let rest = body.strip_prefix(br#"{"space":{"root_id":""#)?;
    let (root, rest) = quoted(rest)?;
    let rest = rest.strip_prefix(br#","space_id":""#)?;
    let (space, rest) = quoted(rest)?;
    if rest != b"}}" {
        return None;
    }
    Some(HeadRequest {
        space: SpaceRef {
            root: RootId::parse(root)?,
            space: SpaceId::parse(space)?,
        },
    })
}

pub fn decode_append(body: &[u8]) -> Result<AppendRequest, Refusal> {
    let mut body = Members::body(body, &["space", "facts", "operation_id", "expected_cutoff"])?;
    let space = space_ref(body.required("space")?, "space")?;
    let facts = facts(body.required("facts")?, "facts")?;
    let operation_id = operation_id(body.required("operation_id")?, "operation_id")?;
    let expected_cutoff = body.nullable_position("expected_cutoff")?;
    body.finish()?;
    Ok(AppendRequest {
        space,
        facts,
        operation_id,
        expected_cutoff,
    })
}

/// Besides the members: a continuation (`after > 0`) must give `through`,
/// and `after <= through`.
pub fn decode_read(body: &[u8]) -> Result<ReadRequest, Refusal> {
    let mut body = Members::body(body, &["space", "after", "through", "limit", "filter"])?;
    let space = space_ref(body.required("space")?, "space")?;
    let after = body
        .optional("after")?
        .map(|a| position(a, "after"))
        .transpose()?;
    let through = body
        .optional("through")?
        .map(|t| position(t, "through"))
        .transpose()?;
    let limit = body
        .optional("limit")?
        .map(|l| limit(l, "limit"))
        .transpose()?;
    let filter = body
        .optional("filter")?
        .map(|f| filter::decode(f, "filter"))
        .transpose()?;
    body.finish()?;
    let after = after.unwrap_or(0);
    match through {
        None if after > 0 => {
            return Err(Refusal::invalid(
                "through",
                "a continuation (after > 0) must resend through",
            ))
        }
        Some(through) if after > through => {
            return Err(Refusal::invalid("after", "after must not exceed through"))
        }
        _ => {}
    }
    Ok(ReadRequest {
        space,
        after,
        through,
        limit: limit.unwrap_or(DEFAULT_PAGE_ENTRIES),
        filter,
    })
}

/// Besides the members: with a snapshot, `space` must equal its scope and an
/// explicit `max_depth` its depth; a cursor comes only with its snapshot.
pub fn decode_query(body: &[u8]) -> Result<QueryRequest, Refusal> {
    let mut body = Members::body(
        body,
        &[
            "space",
            "filter",
            "max_depth",
            "snapshot",
            "cursor",
            "limit",
        ],
    )?;
    let space = space_ref(body.required("space")?, "space")?;
    let filter = body
        .optional("filter")?
        .map(|f| filter::decode(f, "filter"))
        .transpose()?;
    let max_depth = body.nullable_position("max_depth")?;
    let snapshot = body
        .optional("snapshot")?
        .map(|s| manifest::decode(s, "snapshot"))
        .transpose()?;
    let cursor = body
        .optional("cursor")?
        .map(|c| cursor(c, "cursor"))
        .transpose()?;
    let limit = body
        .optional("limit")?
        .map(|l| limit(l, "limit"))
        .transpose()?;
    body.finish()?;
    match &snapshot {
        Some(snapshot) if snapshot.scope != space => {
            return Err(Refusal::invalid("space", "space must equal snapshot.scope"))
        }
        Some(snapshot) if max_depth.is_some_and(|depth| depth != snapshot.max_depth) => {
            return Err(Refusal::invalid(
                "max_depth",
                "max_depth must equal snapshot.max_depth",
            ))
        }
        None if cursor.is_some() => {
            return Err(Refusal::invalid(
                "cursor",
                "a cursor continues only with the snapshot it was issued with",
            ))
        }
        _ => {}
    }
    Ok(QueryRequest {
        space,
        filter,
        max_depth,
        snapshot,
        cursor,
        limit: limit.unwrap_or(DEFAULT_PAGE_ENTRIES),
    })
}

/// Whether `text` is a key: 1..=255 bytes of UTF-8, no `/`, no control
/// character (C0, DEL, C1).
pub fn is_key(text: &str) -> bool {
    (1..=MAX_KEY_BYTES).contains(&text.len())
        && !text
            .chars()
            .any(|c| c == '/' || matches!(c, '\u{0}'..='\u{1f}' | '\u{7f}'..='\u{9f}'))
}

/// Whether `text` is an operation ID: 1..=128 of `[A-Za-z0-9._:-]`.
pub fn is_operation_id(text: &str) -> bool {
    (1..=MAX_OPERATION_ID_CHARS).contains(&text.len())
        && text
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b':' | b'-'))
}

/// The members of one object under decoding, and the dotted path naming it
/// (empty for the body).
pub(crate) struct Members {
    object: Object,
    path: String,
}

impl Members {
    /// Parses a body and checks it is an object with only `documented` members.
    fn body(bytes: &[u8], documented: &[&str]) -> Result<Members, Refusal> {
        let json = lab_strict_json::parse(bytes)
            .map_err(|e| Refusal::invalid_request(format!("the body is not strict JSON: {e}")))?;
        let Json::Object(object) = json else {
            return Err(Refusal::invalid_request("the body must be a JSON object"));
        };
        Members::of(object, "", documented)
    }

    /// The member value `json` at `path` as an object with only `documented`
    /// members.
    pub(crate) fn nested(json: Json, path: &str, documented: &[&str]) -> Result<Members, Refusal> {
        let object = json.into_object(path).map_err(shape)?;
        Members::of(object, path, documented)
    }

    fn of(object: Object, path: &str, documented: &[&str]) -> Result<Members, Refusal> {
        let members = Members {
            object,
            path: path.to_owned(),
        };
        if let Some((name, _)) = members
            .object
            .iter()
            .find(|(name, _)| !documented.contains(name))
        {
            let field = members.field(name);
            return Err(Refusal::invalid(
                field.clone(),
                format!("unknown member {field:?}"),
            ));
        }
        Ok(members)
    }

    /// The dotted path of member `name`.
    pub(crate) fn field(&self, name: &str) -> String {
        if self.path.is_empty() {
            name.to_owned()
        } else {
            format!("{}.{name}", self.path)
        }
    }

    /// A member that must be present and not null.
    pub(crate) fn required(&mut self, name: &str) -> Result<Json, Refusal> {
        match self.object.take(name) {
            None => Err(Refusal::invalid(
                self.field(name),
                format!("missing required member {:?}", self.field(name)),
            )),
            Some(Json::Null) => Err(Refusal::invalid(
                self.field(name),
                format!("member {:?} must not be null", self.field(name)),
            )),
            Some(value) => Ok(value),
        }
    }

    /// A member that may be absent but not null.
    pub(crate) fn optional(&mut self, name: &str) -> Result<Option<Json>, Refusal> {
        match self.object.take(name) {
            Some(Json::Null) => Err(Refusal::invalid(
                self.field(name),
                format!(
                    "member {:?} must be omitted rather than null",
                    self.field(name)
                ),
            )),
            other => Ok(other),
        }
    }

    /// A member that may be absent or null, both read as `None`.
    pub(crate) fn nullable(&mut self, name: &str) -> Option<Json> {
        self.object.take_optional(name)
    }

    /// A numeric control that may be absent or null.
    pub(crate) fn nullable_position(&mut self, name: &str) -> Result<Option<u64>, Refusal> {
        let field = self.field(name);
        self.nullable(name).map(|n| position(n, &field)).transpose()
    }

    /// Every documented member has been taken.
    pub(crate) fn finish(self) -> Result<(), Refusal> {
        let path = self.path;
        self.object.finish().map_err(|e| {
            if path.is_empty() {
                shape(e)
            } else {
                shape(e.within(&path))
            }
        })
    }
}

/// `invalid` for a shape error, naming its field.
pub(crate) fn shape(error: ShapeError) -> Refusal {
    Refusal::Invalid {
        field: error.field().map(str::to_owned),
        message: error.to_string(),
    }
}

/// A numeric control: a canonical integer 0..=2^53-1; a fraction, exponent,
/// sign (`-0` included) or larger integer is `invalid`.
pub(crate) fn position(json: Json, field: &str) -> Result<u64, Refusal> {
    match json {
        Json::Number(Number::Unsigned(n)) if n <= MAX_POSITION => Ok(n),
        _ => Err(Refusal::invalid(
            field,
            format!("{field:?} must be an integer from 0 to {MAX_POSITION} without sign, fraction or exponent"),
        )),
    }
}

pub(crate) fn string(json: Json, field: &str) -> Result<String, Refusal> {
    json.into_string(field).map_err(shape)
}

pub(crate) fn array(json: Json, field: &str) -> Result<Vec<Json>, Refusal> {
    json.into_array(field).map_err(shape)
}

/// A page size: a numeric control, at most [`MAX_PAGE_ENTRIES`].
fn limit(json: Json, field: &str) -> Result<u64, Refusal> {
    let limit = position(json, field)?;
    if limit > MAX_PAGE_ENTRIES {
        return Err(Refusal::LimitExceeded(format!(
            "{field:?} is {limit}, above {MAX_PAGE_ENTRIES}"
        )));
    }
    Ok(limit)
}

/// A cursor's text, unopened: a string of at most [`MAX_CURSOR_CHARS`].
fn cursor(json: Json, field: &str) -> Result<String, Refusal> {
    let text = string(json, field)?;
    if text.chars().count() > MAX_CURSOR_CHARS {
        return Err(Refusal::LimitExceeded(format!(
            "{field:?} is longer than {MAX_CURSOR_CHARS} characters"
        )));
    }
    Ok(text)
}

/// `{root_id, space_id}` at `field`.
pub(crate) fn space_ref(json: Json, field: &str) -> Result<SpaceRef, Refusal> {
    let mut members = Members::nested(json, field, &["root_id", "space_id"])?;
    // Every request names a space: a well-formed identifier is taken
    // without building its field's name, which only a refusal needs.
    let root = members.required("root_id")?;
    let root = match root.as_str().and_then(RootId::parse) {
        Some(root) => root,
        None => root_id(root, &members.field("root_id"))?,
    };
    let space = members.required("space_id")?;
    let space = match space.as_str().and_then(SpaceId::parse) {
        Some(space) => space,
        None => space_id(space, &members.field("space_id"))?,
    };
    members.finish()?;
    Ok(SpaceRef { root, space })
}

pub(crate) fn root_id(json: Json, field: &str) -> Result<RootId, Refusal> {
    identifier(json, field, RootId::PREFIX, RootId::parse)
}

pub(crate) fn space_id(json: Json, field: &str) -> Result<SpaceId, Refusal> {
    identifier(json, field, SpaceId::PREFIX, SpaceId::parse)
}

/// An identifier: `prefix` and 32 lowercase hex digits.
fn identifier<T>(
    json: Json,
    field: &str,
    prefix: &str,
    parse: fn(&str) -> Option<T>,
) -> Result<T, Refusal> {
    let text = string(json, field)?;
    parse(&text).ok_or_else(|| {
        Refusal::invalid(
            field,
            format!("{field:?} must be {prefix} and 32 lowercase hex digits"),
        )
    })
}

/// A key; every violation, its length included, is `invalid`.
pub(crate) fn key(json: Json, field: &str) -> Result<String, Refusal> {
    let text = string(json, field)?;
    if !is_key(&text) {
        return Err(Refusal::invalid(
            field,
            format!("{field:?} must be 1 to {MAX_KEY_BYTES} bytes of UTF-8 without control characters or '/'"),
        ));
    }
    Ok(text)
}

/// An array of keys; the empty array is the root.
pub(crate) fn path(json: Json, field: &str) -> Result<Vec<String>, Refusal> {
    array(json, field)?
        .into_iter()
        .enumerate()
        .map(|(i, item)| key(item, &format!("{field}[{i}]")))
        .collect()
}

fn operation_id(json: Json, field: &str) -> Result<String, Refusal> {
    let text = string(json, field)?;
    if !is_operation_id(&text) {
        return Err(Refusal::invalid(
            field,
            format!(
                "{field:?} must be 1 to {MAX_OPERATION_ID_CHARS} characters of [A-Za-z0-9._:-]"
            ),
        ));
    }
    Ok(text)
}

/// Canonical padded standard base64 at `field`, decoded.
pub(crate) fn base64(json: Json, field: &str) -> Result<(String, Vec<u8>), Refusal> {
    let text = string(json, field)?;
    match lab_strict_json::decode_canonical_base64(&text) {
        Some(bytes) => Ok((text, bytes)),
        None => Err(Refusal::invalid(
            field,
            format!("{field:?} must be canonical padded standard base64"),
        )),
    }
}

/// A value's decoding refusal at `field`: a bound is `limit_exceeded`,
/// anything else `invalid`.
pub(crate) fn value_refusal(error: lab_values::DecodeError, field: &str) -> Refusal {
    if error.is_limit() {
        Refusal::LimitExceeded(format!("{field:?}: {error}"))
    } else {
        Refusal::invalid(
            field,
            format!("{field:?} is not a canonical value: {error}"),
        )
    }
}

/// The batch: per fact in order, a string, canonical base64, at most 1 MiB,
/// a canonical fact within the value bounds; then the running total.
fn facts(json: Json, field: &str) -> Result<Vec<Vec<u8>>, Refusal> {
    let items = array(json, field)?;
    if items.is_empty() {
        return Err(Refusal::invalid(
            field,
            format!("{field:?} must not be empty"),
        ));
    }
    if items.len() > MAX_APPEND_FACTS {
        return Err(Refusal::LimitExceeded(format!(
            "{} facts, above {MAX_APPEND_FACTS}",
            items.len()
        )));
    }
    let mut facts = Vec::with_capacity(items.len());
    let mut total = 0usize;
    for (i, item) in items.into_iter().enumerate() {
        let field = format!("{field}[{i}]");
        let (_, bytes) = base64(item, &field)?;
        if bytes.len() > lab_values::MAX_FACT {
            return Err(Refusal::LimitExceeded(format!(
                "{field:?} is {} bytes, above {}",
                bytes.len(),
                lab_values::MAX_FACT
            )));
        }
        lab_values::decode_fact(&bytes).map_err(|e| match e {
            lab_values::DecodeError::Invalid {
                defect: lab_values::Defect::NotAFact,
                ..
            } => Refusal::invalid(
                field.clone(),
                format!("{field:?} is not a fact: a tuple whose first child is an atom"),
            ),
            other => value_refusal(other, &field),
        })?;
        total += bytes.len();
        if total > MAX_APPEND_BYTES {
            return Err(Refusal::LimitExceeded(format!(
                "the facts total more than {MAX_APPEND_BYTES} bytes"
            )));
        }
        facts.push(bytes);
    }
    Ok(facts)
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use ::base64::engine::general_purpose::STANDARD;
    use ::base64::Engine as _;
    use lab_values::Value as V;

    pub(crate) const ROOT: &str = "rt_00112233445566778899aabbccddeeff";
    pub(crate) const SPACE: &str = "spc_00112233445566778899aabbccddeeff";
    pub(crate) const OTHER: &str = "spc_ffeeddccbbaa99887766554433221100";

    pub(crate) fn space_json() -> serde_json::Value {
        json!({ "root_id": ROOT, "space_id": SPACE })
    }

    pub(crate) fn b64(bytes: &[u8]) -> String {
        STANDARD.encode(bytes)
    }

    pub(crate) fn fact(n: u64) -> Vec<u8> {
        V::Tuple(vec![V::label("p"), V::int(n)]).to_bytes()
    }

    fn body(doc: serde_json::Value) -> Vec<u8> {
        serde_json::to_vec(&doc).unwrap()
    }

    /// The field of an `invalid`, or a panic naming what came instead.
    #[track_caller]
    pub(crate) fn invalid_field<T: std::fmt::Debug>(result: Result<T, Refusal>) -> Option<String> {
        match result {
            Err(Refusal::Invalid { field, .. }) => field,
            other => panic!("expected invalid, got {other:?}"),
        }
    }

    #[track_caller]
    pub(crate) fn assert_invalid<T: std::fmt::Debug>(result: Result<T, Refusal>, field: &str) {
        assert_eq!(invalid_field(result).as_deref(), Some(field));
    }

    #[track_caller]
    pub(crate) fn assert_limit<T: std::fmt::Debug>(result: Result<T, Refusal>) {
        match result {
            Err(Refusal::LimitExceeded(_)) => {}
            other => panic!("expected limit_exceeded, got {other:?}"),
        }
    }

    fn create(doc: serde_json::Value) -> Result<CreateRequest, Refusal> {
        decode_create(&body(doc))
    }

    fn create_with(name: &str, value: serde_json::Value) -> Result<CreateRequest, Refusal> {
        let mut doc = json!({
            "parent": space_json(), "key": "k", "operation_id": "op-1",
        });
        doc[name] = value;
        create(doc)
    }

    #[test]
    fn create_decodes() {
        let request = create(json!({
            "parent": space_json(), "key": "a.b", "operation_id": "A-z_0.9:x",
            "expected_cutoff": 7,
        }))
        .unwrap();
        assert_eq!(
            request,
            CreateRequest {
                parent: SpaceRef {
                    root: RootId::parse(ROOT).unwrap(),
                    space: SpaceId::parse(SPACE).unwrap(),
                },
                key: "a.b".into(),
                operation_id: "A-z_0.9:x".into(),
                expected_cutoff: Some(7),
            }
        );
        for cutoff in [json!(null), json!(0)] {
            let request = create_with("expected_cutoff", cutoff.clone()).unwrap();
            assert_eq!(request.expected_cutoff, cutoff.as_u64());
        }
        let request = create(json!({"parent": space_json(), "key": "..", "operation_id": "o"}));
        assert_eq!(request.unwrap().expected_cutoff, None);
    }

    #[test]
    fn strict_json_refusals_have_no_field() {
        let good = r#"{"parent":{"root_id":"rt_00112233445566778899aabbccddeeff","space_id":"spc_00112233445566778899aabbccddeeff"},"key":"k","operation_id":"o"}"#;
        assert!(decode_create(good.as_bytes()).is_ok());
        let duplicate = good.replace(r#""key":"k","#, r#""key":"k","key":"k","#);
        let trailing = format!("{good} x");
        let two = format!("{good}{good}");
        let surrogate = good.replace(r#""key":"k""#, r#""key":"\ud800""#);
        let mut malformed = good.as_bytes().to_vec();
        let at = good.find(r#""k""#).unwrap() + 1;
        malformed[at] = 0xff;
        for bad in [
            duplicate.as_bytes(),
            trailing.as_bytes(),
            two.as_bytes(),
            surrogate.as_bytes(),
            &malformed,
            b"",
            b"  ",
            b"[]",
            b"null",
        ] {
            assert_eq!(invalid_field(decode_create(bad)), None, "{bad:?}");
        }
        // Trailing whitespace is allowed.
        assert!(decode_create(format!("{good} \n\t\r").as_bytes()).is_ok());
        // A nested duplicate too.
        let nested = good.replace(r#""space_id""#, r#""root_id":"x","space_id""#);
        assert_eq!(invalid_field(decode_create(nested.as_bytes())), None);
    }

    #[test]
    fn unknown_and_case_variant_members() {
        assert_invalid(create_with("Key", json!("k")), "Key");
        assert_invalid(create_with("extra", json!(null)), "extra");
        let mut doc = json!({"parent": space_json(), "Key": "k", "operation_id": "o"});
        // The unknown member is named before the missing one.
        assert_invalid(create(doc.clone()), "Key");
        doc["parent"]["Root_id"] = json!(ROOT);
        assert_invalid(
            create_with("parent", doc["parent"].clone()),
            "parent.Root_id",
        );
    }

    #[test]
    fn required_members() {
        assert_invalid(create(json!({"key": "k", "operation_id": "o"})), "parent");
        assert_invalid(create_with("parent", json!(null)), "parent");
        assert_invalid(create_with("key", json!(null)), "key");
        assert_invalid(create_with("parent", json!([])), "parent");
        assert_invalid(
            create_with("parent", json!({"root_id": ROOT})),
            "parent.space_id",
        );
        assert_invalid(
            create_with("parent", json!({"root_id": ROOT, "space_id": null})),
            "parent.space_id",
        );
        assert_invalid(
            create_with("parent", json!({"root_id": SPACE, "space_id": SPACE})),
            "parent.root_id",
        );
        assert_invalid(
            create_with("parent", json!({"root_id": ROOT, "space_id": ROOT})),
            "parent.space_id",
        );
        assert_invalid(
            create_with(
                "parent",
                json!({"root_id": ROOT, "space_id": SPACE.to_uppercase()}),
            ),
            "parent.space_id",
        );
        // Members are checked in the spec's order: parent, key, operation_id.
        let doc = json!({"operation_id": "bad id", "key": "a/b", "parent": 1});
        assert_invalid(create(doc), "parent");
        let doc = json!({"operation_id": "bad id", "key": "a/b", "parent": space_json()});
        assert_invalid(create(doc), "key");
    }

    #[test]
    fn keys() {
        for good in [
            "a",
            ".",
            "..",
            "é",
            "a b",
            "\u{a0}",
            &"x".repeat(255),
            &"é".repeat(127),
        ] {
            assert!(create_with("key", json!(good)).is_ok(), "{good:?}");
        }
        for bad in [
            "",
            "a/b",
            "/",
            "a\u{0}",
            "\t",
            "a\u{7f}",
            "a\u{85}",
            "\u{9f}",
            &"x".repeat(256),
            &"é".repeat(128),
        ] {
            assert_invalid(create_with("key", json!(bad)), "key");
        }
        assert_invalid(create_with("key", json!(1)), "key");
    }

    #[test]
    fn operation_ids() {
        for good in ["a", "A-Z.a_z:0-9", &"x".repeat(128)] {
            assert!(create_with("operation_id", json!(good)).is_ok(), "{good:?}");
        }
        for bad in ["", "a b", "a/b", "é", "a+b", &"x".repeat(129)] {
            assert_invalid(create_with("operation_id", json!(bad)), "operation_id");
        }
    }

    #[test]
    fn numeric_controls() {
        let good = r#"{"parent":{"root_id":"rt_00112233445566778899aabbccddeeff","space_id":"spc_00112233445566778899aabbccddeeff"},"key":"k","operation_id":"o","expected_cutoff":N}"#;
        for literal in [
            "1.0",
            "-0",
            "1e2",
            "1E2",
            "-1",
            "9007199254740992",
            "18446744073709551616",
            "\"1\"",
            "true",
        ] {
            let text = good.replace('N', literal);
            assert_invalid(decode_create(text.as_bytes()), "expected_cutoff");
        }
        let text = good.replace('N', "9007199254740991");
        assert_eq!(
            decode_create(text.as_bytes()).unwrap().expected_cutoff,
            Some(MAX_POSITION)
        );
    }

    #[test]
    fn resolve_forms() {
        let resolve = |doc: serde_json::Value| decode_resolve(&body(doc));
        let exact = resolve(json!({"space": space_json()})).unwrap();
        assert!(matches!(exact, ResolveRequest::Exact(r) if r.space.to_string() == SPACE));
        let by_path = resolve(json!({"root_id": ROOT, "path": ["a", "..", "é"]})).unwrap();
        assert_eq!(
            by_path,
            ResolveRequest::Path {
                root: RootId::parse(ROOT).unwrap(),
                path: vec!["a".into(), "..".into(), "é".into()],
            }
        );
        let root = resolve(json!({"root_id": ROOT, "path": []})).unwrap();
        assert!(matches!(root, ResolveRequest::Path { path, .. } if path.is_empty()));

        assert_invalid(
            resolve(json!({"space": space_json(), "root_id": ROOT, "path": []})),
            "space",
        );
        assert_invalid(resolve(json!({"space": space_json(), "path": []})), "space");
        assert_eq!(invalid_field(resolve(json!({}))), None);
        assert_invalid(resolve(json!({"root_id": ROOT})), "path");
        assert_invalid(resolve(json!({"path": []})), "root_id");
        assert_invalid(resolve(json!({"space": null})), "space");
        assert_invalid(resolve(json!({"root_id": ROOT, "path": null})), "path");
        assert_invalid(resolve(json!({"root_id": ROOT, "path": "a/b"})), "path");
        assert_invalid(
            resolve(json!({"root_id": ROOT, "path": ["a", "b/c"]})),
            "path[1]",
        );
        assert_invalid(
            resolve(json!({"root_id": ROOT, "path": ["a", ""]})),
            "path[1]",
        );
        assert_invalid(resolve(json!({"root_id": ROOT, "path": [1]})), "path[0]");
        assert_invalid(resolve(json!({"root_id": SPACE, "path": []})), "root_id");
        assert_invalid(resolve(json!({"Space": space_json()})), "Space");
    }

    #[test]
    fn children_controls() {
        let children = |doc: serde_json::Value| decode_children(&body(doc));
        let request = children(json!({"space": space_json()})).unwrap();
        assert_eq!(
            (request.through, request.cursor, request.limit),
            (None, None, 64)
        );
        let request =
            children(json!({"space": space_json(), "through": null, "cursor": "c", "limit": 0}))
                .unwrap();
        assert_eq!(
            (request.through, request.cursor.as_deref(), request.limit),
            (None, Some("c"), 0)
        );
        let request = children(json!({"space": space_json(), "through": 5, "limit": 128})).unwrap();
        assert_eq!((request.through, request.limit), (Some(5), 128));

        assert_limit(children(json!({"space": space_json(), "limit": 129})));
        assert_invalid(
            children(json!({"space": space_json(), "limit": 9_007_199_254_740_992u64})),
            "limit",
        );
        assert_invalid(
            children(json!({"space": space_json(), "limit": -1})),
            "limit",
        );
        assert_invalid(
            children(json!({"space": space_json(), "limit": null})),
            "limit",
        );
        assert_invalid(
            children(json!({"space": space_json(), "cursor": null})),
            "cursor",
        );
        assert_invalid(
            children(json!({"space": space_json(), "cursor": 1})),
            "cursor",
        );
        assert_invalid(
            children(json!({"space": space_json(), "through": 1.5})),
            "through",
        );
        let long = "c".repeat(MAX_CURSOR_CHARS);
        assert!(children(json!({"space": space_json(), "cursor": long})).is_ok());
        let longer = "c".repeat(MAX_CURSOR_CHARS + 1);
        assert_limit(children(json!({"space": space_json(), "cursor": longer})));
    }

    #[test]
    fn a_compact_head_reads_as_its_document_does() {
        let compact = format!(r#"{{"space":{{"root_id":"{ROOT}","space_id":"{SPACE}"}}}}"#);
        assert_eq!(compact.as_bytes(), body(json!({"space": space_json()})));
        let read = compact_head(compact.as_bytes()).expect("the compact form");
        assert_eq!(Ok(read.clone()), decode_head_document(compact.as_bytes()));
        // Anything else is read in full, with the same answer or refusal
        // as before the compact reading existed.
        let upper_root = ROOT.to_uppercase();
        let others = [
            format!(r#"{{ "space":{{"root_id":"{ROOT}","space_id":"{SPACE}"}}}}"#),
            format!(r#"{{"space":{{"space_id":"{SPACE}","root_id":"{ROOT}"}}}}"#),
            format!(r#"{{"space":{{"root_id":"{ROOT}","space_id":"{SPACE}"}}}} "#),
            format!(r#"{{"space":{{"root_id":"{upper_root}","space_id":"{SPACE}"}}}}"#),
            format!(r#"{{"space":{{"root_id":"{ROOT}","space_id":"{ROOT}"}}}}"#),
            format!(
                r#"{{"space":{{"root_id":"{ROOT}","space_id":"spc_\u0030{}"}}}}"#,
                &SPACE[5..]
            ),
            format!(r#"{{"space":{{"root_id":"{ROOT}","space_id":"{SPACE}","x":1}}}}"#),
            format!(r#"{{"space":{{"root_id":"{ROOT}","space_id":"{SPACE}"}},"space":1}}"#),
            format!(r#"{{"space":{{"root_id":"{ROOT}","space_id":"{SPACE}"}}}}}}"#),
            format!(r#"{{"space":{{"root_id":"{ROOT}","space_id":"{SPACE}""#),
            format!(r#"{{"space":{{"root_id":"{ROOT}"}}}}"#),
        ];
        for text in &others {
            assert_eq!(compact_head(text.as_bytes()), None, "{text}");
            assert_eq!(
                decode_head(text.as_bytes()),
                decode_head_document(text.as_bytes()),
                "{text}"
            );
        }
        // The whitespace and member order the compact form leaves to the
        // full reading still name the same space.
        for text in &others[..3] {
            assert_eq!(decode_head(text.as_bytes()), Ok(read.clone()), "{text}");
        }
    }

    #[test]
    fn head() {
        let request = decode_head(&body(json!({"space": space_json()}))).unwrap();
        assert_eq!(request.space.root.to_string(), ROOT);
        assert_invalid(decode_head(&body(json!({}))), "space");
        assert_invalid(
            decode_head(&body(json!({"space": space_json(), "limit": 1}))),
            "limit",
        );
    }

    fn append(facts: serde_json::Value) -> Result<AppendRequest, Refusal> {
        decode_append(&body(json!({
            "space": space_json(), "facts": facts, "operation_id": "o",
        })))
    }

    #[test]
    fn append_decodes_facts_in_order() {
        let request = append(json!([b64(&fact(2)), b64(&fact(1)), b64(&fact(2))])).unwrap();
        assert_eq!(request.facts, vec![fact(2), fact(1), fact(2)]);
        assert_eq!(request.expected_cutoff, None);
        let creation = lab_values::creation_fact("a", SPACE);
        assert_eq!(
            append(json!([b64(&creation)])).unwrap().facts,
            vec![creation]
        );
        let max: Vec<String> = (0..128).map(|n| b64(&fact(n))).collect();
        assert_eq!(append(json!(max)).unwrap().facts.len(), 128);
    }

    #[test]
    fn append_refusals() {
        assert_invalid(append(json!([])), "facts");
        assert_invalid(append(json!(null)), "facts");
        assert_invalid(append(json!(b64(&fact(1)))), "facts");
        let over: Vec<String> = (0..129).map(|n| b64(&fact(n))).collect();
        assert_limit(append(json!(over)));
        // The count is a bound met before any element is read.
        let mut bad = vec![json!("!"); 129];
        bad[0] = json!(1);
        assert_limit(append(json!(bad)));

        let good = b64(&fact(1));
        let f = |bad: serde_json::Value| append(json!([good, good, good, bad]));
        assert_invalid(f(json!(null)), "facts[3]");
        assert_invalid(f(json!(1)), "facts[3]");
        let text = b64(&[0x81, 0x40]); // [h''] is "gUA="
        assert!(append(json!([text])).is_ok());
        for bad in ["gUA", "gUA==", " gUA=", "gUB=", "gUA=\n"] {
            assert_invalid(f(json!(bad)), "facts[3]");
        }
        // `f` is 0x66 (text of length 6, truncated): "Zg" lacks padding.
        assert_invalid(f(json!("Zg")), "facts[3]");
        // URL-safe alphabet: [h'\xfb\xff'] is "gUL7/w==" in the standard one.
        let standard = b64(&[0x81, 0x42, 0xfb, 0xff]);
        assert_eq!(standard, "gUL7/w==");
        assert!(append(json!([standard])).is_ok());
        assert_invalid(f(json!("gUL7_w==")), "facts[3]");
        // Non-canonical CBOR: a non-shortest integer, an indefinite array,
        // trailing bytes, unsorted map keys, a float.
        for bad in [
            &[0x82, 0x40, 0x18, 0x01][..],
            &[0x9f, 0x40, 0xff],
            &[0x81, 0x40, 0x00],
            &[0x82, 0x40, 0xa2, 0x61, 0x62, 0x00, 0x61, 0x61, 0x00],
            &[0x82, 0x40, 0xf9, 0x3c, 0x00],
        ] {
            assert_invalid(f(json!(b64(bad))), "facts[3]");
        }
        // Canonical values that are not facts.
        for bad in [&[0x80][..], &[0x40], &[0x81, 0x80], &[0xa0]] {
            assert_invalid(f(json!(b64(bad))), "facts[3]");
        }
        // Over 1 MiB of canonical bytes.
        let mut big = vec![0x82, 0x40, 0x5a, 0x00, 0x10, 0x00, 0x00];
        big.resize(big.len() + (1 << 20), 0);
        assert_limit(f(json!(b64(&big))));
        // Exactly 1 MiB is accepted.
        let payload = (1 << 20) - 7;
        let mut exact = vec![0x82, 0x40, 0x5a];
        exact.extend_from_slice(&(payload as u32).to_be_bytes());
        exact.resize(exact.len() + payload, 0);
        assert_eq!(exact.len(), 1 << 20);
        assert!(append(json!([b64(&exact)])).is_ok());
        // Four of those are 4 MiB; a fifth goes over.
        let four = vec![json!(b64(&exact)); 4];
        assert!(append(json!(four)).is_ok());
        let mut five = vec![json!(b64(&exact)); 4];
        five.push(json!(b64(&fact(1))));
        assert_limit(append(json!(five)));
        // A value bound (depth) inside a fact is a declared bound.
        let mut deep = vec![0x81; 257];
        deep.insert(0, 0x82);
        deep.insert(1, 0x40);
        deep.push(0x80);
        assert_limit(f(json!(b64(&deep))));
        // The first offending element decides.
        let first = append(json!([good, "Zg", b64(&big)]));
        assert_invalid(first, "facts[1]");
        assert_limit(append(json!([good, b64(&big), "Zg"])));
    }

    #[test]
    fn append_other_members() {
        let doc = |name: &str, value: serde_json::Value| {
            let mut doc =
                json!({"space": space_json(), "facts": [b64(&fact(1))], "operation_id": "o"});
            doc[name] = value;
            decode_append(&body(doc))
        };
        assert_eq!(
            doc("expected_cutoff", json!(0)).unwrap().expected_cutoff,
            Some(0)
        );
        assert_invalid(doc("expected_cutoff", json!(-0.0)), "expected_cutoff");
        assert_invalid(doc("operation_id", json!("a b")), "operation_id");
        assert_invalid(doc("facts", json!(["Zg"])), "facts[0]");
        assert_invalid(doc("Facts", json!([])), "Facts");
    }

    fn read(doc: serde_json::Value) -> Result<ReadRequest, Refusal> {
        let mut full = json!({"space": space_json()});
        for (k, v) in doc.as_object().unwrap() {
            full[k] = v.clone();
        }
        decode_read(&body(full))
    }

    #[test]
    fn read_controls() {
        let request = read(json!({})).unwrap();
        assert_eq!(
            (
                request.after,
                request.through,
                request.limit,
                request.filter
            ),
            (0, None, 64, None)
        );
        let request = read(json!({"after": 3, "through": 3, "limit": 1, "filter": {}})).unwrap();
        assert_eq!(
            (request.after, request.through, request.limit),
            (3, Some(3), 1)
        );
        assert_eq!(request.filter, Some(Filter::unfiltered()));
        assert!(read(json!({"after": 0})).is_ok());
        assert_invalid(read(json!({"after": 1})), "through");
        assert_invalid(read(json!({"after": 4, "through": 3})), "after");
        assert_invalid(read(json!({"after": null})), "after");
        assert_invalid(read(json!({"through": null})), "through");
        assert_invalid(read(json!({"filter": null})), "filter");
        assert_invalid(read(json!({"filter": []})), "filter");
        assert_invalid(read(json!({"filter": {"origin": "x"}})), "filter.origin");
        assert_limit(read(json!({"limit": 129})));
        assert_invalid(read(json!({"limit": 1.0})), "limit");
        // Members before cross-member rules.
        assert_invalid(read(json!({"after": 1, "limit": "x"})), "limit");
    }

    fn query(doc: serde_json::Value) -> Result<QueryRequest, Refusal> {
        let mut full = json!({"space": space_json()});
        for (k, v) in doc.as_object().unwrap() {
            full[k] = v.clone();
        }
        decode_query(&body(full))
    }

    fn snapshot(depth: u64) -> serde_json::Value {
        json!({
            "scope": space_json(),
            "max_depth": depth,
            "spaces": [{"space": {"root_id": ROOT, "space_id": SPACE, "path": []}, "through": 0}],
        })
    }

    #[test]
    fn query_controls() {
        let request = query(json!({})).unwrap();
        assert_eq!(
            (
                request.filter,
                request.max_depth,
                request.snapshot,
                request.cursor,
                request.limit
            ),
            (None, None, None, None, 64)
        );
        let request = query(json!({"max_depth": null, "limit": 2})).unwrap();
        assert_eq!((request.max_depth, request.limit), (None, 2));
        let request = query(json!({"max_depth": 0})).unwrap();
        assert_eq!(request.max_depth, Some(0));

        let request =
            query(json!({"snapshot": snapshot(3), "cursor": "c", "max_depth": 3})).unwrap();
        assert_eq!(request.snapshot.unwrap().max_depth, 3);
        assert!(query(json!({"snapshot": snapshot(3)})).is_ok());
        assert_invalid(
            query(json!({"snapshot": snapshot(3), "max_depth": 2})),
            "max_depth",
        );
        assert_invalid(query(json!({"cursor": "c"})), "cursor");
        assert_invalid(query(json!({"snapshot": null})), "snapshot");
        assert_invalid(query(json!({"max_depth": "1"})), "max_depth");
        assert_limit(query(json!({"limit": 200})));
        assert_limit(query(
            json!({"snapshot": snapshot(3), "cursor": "c".repeat(4097)}),
        ));

        let mut other = snapshot(1);
        other["scope"]["space_id"] = json!(OTHER);
        other["spaces"][0]["space"]["space_id"] = json!(OTHER);
        assert_invalid(query(json!({"snapshot": other})), "space");
        let mut broken = snapshot(1);
        broken["spaces"][0]["through"] = json!(-1);
        assert_invalid(
            query(json!({"snapshot": broken})),
            "snapshot.spaces[0].through",
        );
        assert_invalid(
            query(json!({"filter": {"arguments": [{"index": 0, "equals": "Zg"}]}})),
            "filter.arguments[0].equals",
        );
    }

    #[test]
    fn envelope() {
        assert_eq!(check_envelope(None, 0), Ok(()));
        assert_eq!(check_envelope(None, MAX_BODY_BYTES), Ok(()));
        assert_eq!(
            check_envelope(None, MAX_BODY_BYTES + 1),
            Err(Refusal::EnvelopeTooLarge)
        );
        assert_eq!(Refusal::EnvelopeTooLarge.status(), 413);
        for good in [
            &b"application/json"[..],
            b"Application/JSON",
            b"application/json; charset=utf-8",
            b"application/json;charset=\"UTF-8\"",
        ] {
            assert_eq!(check_envelope(Some(good), 10), Ok(()), "{good:?}");
        }
        for bad in [
            &b"text/plain"[..],
            b"",
            b"application/json; charset=latin1",
            b"application/json; boundary=x",
            b"application/json; charset=utf-8; q=1",
            b"application/jsonx",
            b"application/json\xff",
        ] {
            assert_eq!(
                invalid_field(check_envelope(Some(bad), 10)),
                None,
                "{bad:?}"
            );
        }
        // The Content-Type is decided before the length.
        assert_eq!(
            invalid_field(check_envelope(Some(b"text/plain"), MAX_BODY_BYTES + 1)),
            None
        );
    }

    #[test]
    fn key_and_operation_id_predicates() {
        assert!(is_key("a") && is_key("..") && !is_key("") && !is_key("a/"));
        assert!(!is_key("\u{1f}") && !is_key("\u{80}") && is_key("\u{a0}"));
        assert!(is_operation_id("x") && !is_operation_id("x y") && !is_operation_id(""));
    }
}
