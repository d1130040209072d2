//! The journal service's operations, typed.

use crate::backend::{call_json, CallError};
use base64::Engine as _;
use serde_json::{json, Value};

const SERVICE: &str = "journal";

/// An exact space of the journal with its full path from the journal root.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Space {
    pub root_id: String,
    pub space_id: String,
    pub path: Vec<String>,
}

impl Space {
    pub fn from_json(value: &Value) -> Result<Space, CallError> {
        let text = |name: &str| {
            value[name]
                .as_str()
                .map(str::to_string)
                .ok_or_else(|| CallError::Unavailable(format!("journal space lacks `{name}`")))
        };
        let path = value["path"]
            .as_array()
            .and_then(|labels| {
                labels
                    .iter()
                    .map(|l| l.as_str().map(String::from))
                    .collect()
            })
            .ok_or_else(|| CallError::Unavailable("journal space lacks `path`".into()))?;
        Ok(Space {
            root_id: text("root_id")?,
            space_id: text("space_id")?,
            path,
        })
    }

    /// `{root_id, space_id, path}`: the journal's own form (full path).
    pub fn to_json(&self) -> Value {
        json!({ "root_id": self.root_id, "space_id": self.space_id, "path": self.path })
    }

    /// `{root_id, space_id}` as the journal takes it.
    pub fn reference(&self) -> Value {
        space_ref(&self.root_id, &self.space_id)
    }

    /// The child at `key` of this space's path.
    pub fn child_path(&self, key: &str) -> Vec<String> {
        let mut path = self.path.clone();
        path.push(key.to_string());
        path
    }
}

pub fn space_ref(root_id: &str, space_id: &str) -> Value {
    json!({ "root_id": root_id, "space_id": space_id })
}

fn post(op: &str, body: Value) -> Result<(u16, Value), CallError> {
    call_json(
        SERVICE,
        "POST",
        &format!("/v1/{op}"),
        serde_json::to_vec(&body).expect("JSON serializes"),
        "application/json",
    )
}

/// The journal's identity: root ID and instance ID, from `GET /livez`.
pub fn identity() -> Result<(String, String), CallError> {
    let (_, answer) = call_json(SERVICE, "GET", "/livez", Vec::new(), "application/json")?;
    let identity = &answer["identity"];
    match (
        identity["root_id"].as_str(),
        identity["journal_instance_id"].as_str(),
    ) {
        (Some(root), Some(instance)) => Ok((root.to_string(), instance.to_string())),
        _ => Err(CallError::Unavailable(
            "the journal is not provisioned".into(),
        )),
    }
}

/// The occupant of `path` (from the journal root), or none.
pub fn resolve_path(root_id: &str, path: &[String]) -> Result<Option<Space>, CallError> {
    let (_, answer) = post("resolve", json!({ "root_id": root_id, "path": path }))?;
    match &answer["space"] {
        Value::Null => Ok(None),
        space => Space::from_json(space).map(Some),
    }
}

/// The space with this exact identity, or none when the journal does not
/// know it.
pub fn resolve_id(root_id: &str, space_id: &str) -> Result<Option<Space>, CallError> {
    match post("resolve", json!({ "space": space_ref(root_id, space_id) })) {
        Ok((_, answer)) => Space::from_json(&answer["space"]).map(Some),
        Err(e) if matches!(e.code(), Some("not_found" | "invalid")) => Ok(None),
        Err(e) => Err(e),
    }
}

/// The committed cutoff of a journal.
pub fn head(space: &Space) -> Result<u64, CallError> {
    let (_, answer) = post("head", json!({ "space": space.reference() }))?;
    answer["cutoff"]
        .as_u64()
        .ok_or_else(|| CallError::Unavailable("head without a cutoff".into()))
}

/// A created (or replayed) child.
#[derive(Debug, Clone)]
pub struct Created {
    pub child: Space,
    pub parent_entry: Value,
    pub replayed: bool,
}

pub fn create(
    parent: &Space,
    key: &str,
    operation_id: &str,
    expected_cutoff: Option<u64>,
) -> Result<Created, CallError> {
    let (_, answer) = post(
        "create",
        json!({
            "parent": parent.reference(),
            "key": key,
            "operation_id": operation_id,
            "expected_cutoff": expected_cutoff,
        }),
    )?;
    Ok(Created {
        child: Space::from_json(&answer["child"])?,
        parent_entry: answer["parent_entry"].clone(),
        replayed: answer["replayed"].as_bool().unwrap_or(false),
    })
}

/// The bounds of an appended (or replayed) batch.
#[derive(Debug, Clone, Copy)]
pub struct Appended {
    pub first: u64,
    pub last: u64,
    pub replayed: bool,
}

pub fn append(
    space: &Space,
    facts: &[Vec<u8>],
    operation_id: &str,
    expected_cutoff: Option<u64>,
) -> Result<Appended, CallError> {
    let b64 = base64::engine::general_purpose::STANDARD;
    let facts: Vec<String> = facts.iter().map(|f| b64.encode(f)).collect();
    let (_, answer) = post(
        "append",
        json!({
            "space": space.reference(),
            "facts": facts,
            "operation_id": operation_id,
            "expected_cutoff": expected_cutoff,
        }),
    )?;
    let bound = |name: &str| {
        answer[name]
            .as_u64()
            .ok_or_else(|| CallError::Unavailable(format!("append answer lacks `{name}`")))
    };
    Ok(Appended {
        first: bound("first")?,
        last: bound("last")?,
        replayed: answer["replayed"].as_bool().unwrap_or(false),
    })
}

/// One page of (after, through] of a journal, as the journal answers it.
pub fn read(
    space: &Space,
    after: u64,
    through: Option<u64>,
    limit: u64,
    filter: Option<Value>,
) -> Result<Value, CallError> {
    let mut body = json!({ "space": space.reference(), "after": after, "limit": limit });
    if let Some(through) = through {
        body["through"] = json!(through);
    }
    if let Some(filter) = filter {
        body["filter"] = filter;
    }
    post("read", body).map(|(_, page)| page)
}

/// The canonical bytes of the fact at `position` of the journal, read at
/// its cutoff `head` (a batch boundary, so a position inside a batch is
/// read too); none when the journal holds no entry there.
pub fn fact_at(space: &Space, position: u64, head: u64) -> Result<Option<Vec<u8>>, CallError> {
    let page = read(space, position.saturating_sub(1), Some(head), 1, None)?;
    Ok(page["entries"]
        .get(0)
        .filter(|e| e["ref"]["position"].as_u64() == Some(position))
        .and_then(|e| e["fact"].as_str())
        .and_then(|f| base64::engine::general_purpose::STANDARD.decode(f).ok()))
}

/// One page of a space's children, as the journal answers it.
pub fn children(
    space: &Space,
    through: Option<u64>,
    cursor: Option<&str>,
    limit: u64,
) -> Result<Value, CallError> {
    let mut body = json!({ "space": space.reference(), "limit": limit });
    if let Some(through) = through {
        body["through"] = json!(through);
    }
    if let Some(cursor) = cursor {
        body["cursor"] = json!(cursor);
    }
    post("children", body).map(|(_, page)| page)
}

/// Every entry of (0, through] that `filter` selects, through every page,
/// and the `through` they were read at: the given one, or the cutoff the
/// first page captured. An incomplete search is an error, never an absence.
pub fn read_all_matching(
    space: &Space,
    through: Option<u64>,
    filter: Value,
) -> Result<(u64, Vec<Value>), CallError> {
    let mut found = Vec::new();
    let mut after = 0;
    let mut through = through;
    loop {
        let page = read(space, after, through, 128, Some(filter.clone()))?;
        let pinned = page["through"]
            .as_u64()
            .ok_or_else(|| CallError::Unavailable("a read page lacks `through`".into()))?;
        through = Some(pinned);
        if let Some(entries) = page["entries"].as_array() {
            found.extend(entries.iter().cloned());
        }
        match page["next_after"].as_u64() {
            Some(next) if next > after && next < pinned => after = next,
            Some(next) if next > after => return Ok((pinned, found)),
            Some(_) => return Err(CallError::Unavailable("a read page did not advance".into())),
            None => return Ok((pinned, found)),
        }
    }
}

/// A snapshot manifest of `space` and its descendants within `max_depth`
/// (all when none), captured by the journal's `query`.
pub fn capture(space: &Space, max_depth: Option<u64>) -> Result<Value, CallError> {
    let (_, answer) = post(
        "query",
        json!({ "space": space.reference(), "max_depth": max_depth, "limit": 1 }),
    )?;
    Ok(answer["snapshot"].clone())
}
