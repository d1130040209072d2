//! `export`: a complete depth-first traversal of the world or a subtree.
//! Every journal prefix it covers (with the child observations its
//! creation entries carry) is written into chunks retained in the bytes
//! service; a manifest names the chunks and the covered prefixes. One call
//! does a bounded amount of work; the rest is resumed by a sealed cursor
//! naming the retained frontier.
//!
//! Chunk format: JSON lines, one object per covered stretch of a journal,
//! `{space, after, through, entries}`, with each entry as the journal
//! answers it (`ref`, `origin`, `batch`, `fact`).

use super::creation;
use crate::blobs;
use crate::cursor;
use crate::journal::{self, Space};
use crate::refusal::Refusal;
use crate::world::World;
use crate::{Call, Reply};
use serde_json::{json, Value};

/// Spaces, entries and fact bytes one call covers at most.
const MAX_SPACES: usize = 256;
const MAX_ENTRIES: u64 = 16_384;
const MAX_FACT_TEXT: usize = 32 << 20;
/// A chunk is retained once it holds this much.
const CHUNK_BYTES: usize = 1 << 20;
/// Pending spaces listed in `incomplete` (the cursor carries all of them).
const MAX_LISTED: usize = 128;

/// A space still to cover, from `after`, at `through` once it is fixed,
/// with the children already seen in the part covered so far.
struct Pending {
    space: Space,
    after: u64,
    through: Option<u64>,
    children: Vec<Space>,
}

impl Pending {
    fn fresh(space: Space) -> Pending {
        Pending {
            space,
            after: 0,
            through: None,
            children: Vec::new(),
        }
    }

    fn to_json(&self) -> Value {
        json!({
            "space": self.space.to_json(),
            "after": self.after,
            "through": self.through,
            "children": self.children.iter().map(Space::to_json).collect::<Vec<_>>(),
        })
    }

    fn from_json(value: &Value) -> Option<Pending> {
        Some(Pending {
            space: Space::from_json(&value["space"]).ok()?,
            after: value["after"].as_u64()?,
            through: value["through"].as_u64(),
            children: value["children"]
                .as_array()?
                .iter()
                .map(|c| Space::from_json(c).ok())
                .collect::<Option<_>>()?,
        })
    }
}

/// Chunks being written.
#[derive(Default)]
struct Chunks {
    current: Vec<u8>,
    names: Vec<String>,
}

impl Chunks {
    fn add(&mut self, line: &Value) -> Result<(), Refusal> {
        serde_json::to_writer(&mut self.current, line).expect("JSON serializes");
        self.current.push(b'\n');
        if self.current.len() >= CHUNK_BYTES {
            self.flush()?;
        }
        Ok(())
    }

    fn flush(&mut self) -> Result<(), Refusal> {
        if self.current.is_empty() {
            return Ok(());
        }
        let retained =
            blobs::put(std::mem::take(&mut self.current)).map_err(|e| e.into_refusal("bytes"))?;
        self.names.push(retained.name);
        Ok(())
    }
}

pub fn export(call: &mut Call<'_>) -> Result<Reply, Refusal> {
    let path = call.query.path.clone();
    call.verify(&path)?;
    let scope = super::read::existing(call, &path)?;
    let key = cursor::secret()?;
    let mut frontier = match call.query.string("cursor") {
        None => vec![Pending::fresh(scope.clone())],
        Some(text) => load_frontier(&cursor::open(&key, &scope.space_id, text)?)?,
    };
    let mut chunks = Chunks::default();
    let mut covered = Vec::new();
    let (mut entries, mut fact_text) = (0u64, 0usize);
    while let Some(mut item) = frontier.pop() {
        if covered.len() >= MAX_SPACES || entries >= MAX_ENTRIES || fact_text >= MAX_FACT_TEXT {
            frontier.push(item);
            break;
        }
        let through = match item.through {
            Some(through) => through,
            None => journal::head(&item.space).map_err(|e| e.into_refusal("journal"))?,
        };
        item.through = Some(through);
        let start = item.after;
        let mut stretch = Vec::new();
        while item.after < through && entries < MAX_ENTRIES && fact_text < MAX_FACT_TEXT {
            let page = journal::read(&item.space, item.after, Some(through), 128, None)
                .map_err(|e| e.into_refusal("journal"))?;
            for entry in page["entries"].as_array().into_iter().flatten() {
                if let Some(child) = child_of(&item.space, entry) {
                    item.children.push(child);
                }
                fact_text += entry["fact"].as_str().map_or(0, str::len);
                entries += 1;
                stretch.push(entry.clone());
            }
            item.after = page["next_after"].as_u64().unwrap_or(through);
        }
        chunks.add(&json!({
            "space": call.world.space_json(&item.space),
            "after": start,
            "through": through,
            "entries": stretch,
        }))?;
        if item.after < through {
            frontier.push(item);
            break;
        }
        covered.push(json!({ "space": call.world.space_json(&item.space), "through": through }));
        frontier.extend(item.children.into_iter().rev().map(Pending::fresh));
    }
    chunks.flush()?;
    let complete = frontier.is_empty();
    let manifest = json!({
        "purpose": "coord.export.v1",
        "scope": call.world.space_json(&scope),
        "chunks": chunks.names,
        "spaces": covered,
        "complete": complete,
    });
    let manifest_name = blobs::put(lab_coord_auth::canonical_json(&manifest))
        .map_err(|e| e.into_refusal("bytes"))?
        .name;
    let mut result = json!({
        "scope": call.world.space_json(&scope),
        "manifest": manifest_name,
        "chunks": manifest["chunks"],
        "spaces": covered.len(),
        "entries": entries,
        "complete": complete,
        "incomplete": incomplete(&call.world, &frontier),
    });
    if !complete {
        let stored = json!(frontier.iter().map(Pending::to_json).collect::<Vec<_>>());
        let name = blobs::put(serde_json::to_vec(&stored).expect("JSON serializes"))
            .map_err(|e| e.into_refusal("bytes"))?
            .name;
        result["next_cursor"] = json!(cursor::seal(&key, &scope.space_id, &name));
    }
    Ok(Reply::Json(200, result))
}

/// The pending spaces, next first, at most [`MAX_LISTED`] of them.
fn incomplete(world: &World, frontier: &[Pending]) -> Value {
    json!(frontier
        .iter()
        .rev()
        .take(MAX_LISTED)
        .map(|p| world.space_json(&p.space))
        .collect::<Vec<_>>())
}

fn load_frontier(name: &str) -> Result<Vec<Pending>, Refusal> {
    let bytes = blobs::get_small(name, 64 << 20)
        .map_err(|e| e.into_refusal("bytes"))?
        .ok_or_else(|| Refusal::Unavailable("the export's frontier is not retained".into()))?;
    let value: Value = serde_json::from_slice(&bytes)
        .map_err(|_| Refusal::Unavailable("the export's frontier is unreadable".into()))?;
    value
        .as_array()
        .and_then(|items| {
            items
                .iter()
                .map(Pending::from_json)
                .collect::<Option<Vec<_>>>()
        })
        .ok_or_else(|| Refusal::Unavailable("the export's frontier is unreadable".into()))
}

/// The child a creation entry of `parent` records.
fn child_of(parent: &Space, entry: &Value) -> Option<Space> {
    use base64::Engine as _;
    if entry["origin"] != "create" {
        return None;
    }
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(entry["fact"].as_str()?)
        .ok()?;
    let (key, space_id) = creation(&bytes)?;
    Some(Space {
        root_id: parent.root_id.clone(),
        space_id,
        path: parent.child_path(&key),
    })
}
