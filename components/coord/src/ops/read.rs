//! `resolve`, `children`, `entries`, `get`, `snapshot`: reads at fixed
//! cutoffs.
//!
//! Invariant: a path is authorized before it is resolved, so `denied` never
//! depends on whether the path exists (request rule 10).

use super::{entry_json, read_refusal};
use crate::blobs;
use crate::facts::EntryRef;
use crate::journal::{self, Space};
use crate::refusal::Refusal;
use crate::{Call, Reply};
use lab_coord_auth::GrantKind;
use serde_json::{json, Value};

/// The space at an authorized path, or `not_found`.
pub(crate) fn existing(call: &Call<'_>, path: &[String]) -> Result<Space, Refusal> {
    call.world
        .resolve(path)?
        .ok_or_else(|| Refusal::NotFound("no space at this path".into()))
}

pub fn resolve(call: &mut Call<'_>) -> Result<Reply, Refusal> {
    let path = call.query.path.clone();
    call.verify(&path)?;
    let space = call.world.resolve(&path)?;
    let space = space.map_or(Value::Null, |s| call.world.space_json(&s));
    Ok(Reply::Json(200, json!({ "space": space })))
}

pub fn children(call: &mut Call<'_>) -> Result<Reply, Refusal> {
    let path = call.query.path.clone();
    call.verify(&path)?;
    let space = existing(call, &path)?;
    let page = journal::children(
        &space,
        call.query.int("through"),
        call.query.string("cursor"),
        call.query.limit(),
    )
    .map_err(read_refusal)?;
    let children: Vec<Value> = page["children"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|child| {
            let space = Space::from_json(&child["space"]).ok();
            json!({
                "key": child["key"],
                "space": space.map_or(Value::Null, |s| call.world.space_json(&s)),
                "created_at": child["created_at"],
            })
        })
        .collect();
    let mut result = json!({
        "space": call.world.space_json(&space),
        "through": page["through"],
        "children": children,
    });
    if let Some(cursor) = page.get("next_cursor").filter(|c| !c.is_null()) {
        result["next_cursor"] = cursor.clone();
    }
    Ok(Reply::Json(200, result))
}

pub fn entries(call: &mut Call<'_>) -> Result<Reply, Refusal> {
    let path = call.query.path.clone();
    call.verify(&path)?;
    let space = existing(call, &path)?;
    let after = call.query.int("after").unwrap_or(0);
    let through = call.query.int("through");
    if after > 0 && through.is_none() {
        return Err(Refusal::invalid(
            "through",
            "a continuation resends the `through` of its first page",
        ));
    }
    let page =
        journal::read(&space, after, through, call.query.limit(), None).map_err(read_refusal)?;
    Ok(Reply::Json(200, entries_page(call, &space, &page)))
}

fn entries_page(call: &Call<'_>, space: &Space, page: &Value) -> Value {
    let entries: Vec<Value> = page["entries"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|entry| entry_json(&call.world, space, entry))
        .collect();
    let mut result = json!({
        "space": call.world.space_json(space),
        "through": page["through"],
        "entries": entries,
        "scanned_through": page["scanned_through"],
    });
    if let Some(next) = page.get("next_after").filter(|n| !n.is_null()) {
        result["next_after"] = next.clone();
    }
    result
}

/// One occurrence by reference: resolved to its path, then authorized
/// there (request rule 10).
///
/// The authorization path is known only once the reference is resolved, so
/// here the domain rules follow the proof and precede resolution.
pub fn get(call: &mut Call<'_>) -> Result<Reply, Refusal> {
    call.authenticate()?;
    crate::params::check_domains(&call.query)?;
    let root_id = call.query.string("root_id").unwrap_or_default().to_string();
    let space_id = call
        .query
        .string("space_id")
        .unwrap_or_default()
        .to_string();
    let position = call.query.int("position").unwrap_or_default();
    let (space, cutoff) = readable_reference(call, &root_id, &space_id)?;
    if position > cutoff {
        return Err(Refusal::NotFound(
            "the position is beyond the journal's head".into(),
        ));
    }
    let page = journal::read(&space, position - 1, Some(cutoff), 1, None).map_err(read_refusal)?;
    let entry = page["entries"]
        .get(0)
        .filter(|e| e["ref"]["position"].as_u64() == Some(position))
        .ok_or_else(|| Refusal::Unavailable("the journal did not return the entry".into()))?;
    Ok(Reply::Json(
        200,
        json!({
            "space": call.world.space_json(&space),
            "through": cutoff,
            "entry": entry_json(&call.world, &space, entry),
        }),
    ))
}

/// The space of an occurrence reference, resolved to where it lies and
/// authorized there (request rule 10), with its journal's head: a space
/// outside the world is `not_found` for a caller who may read the world and
/// `denied` for every other; inside it, `read` on its path is required.
pub(crate) fn readable_reference(
    call: &Call<'_>,
    root_id: &str,
    space_id: &str,
) -> Result<(Space, u64), Refusal> {
    let space = journal::resolve_id(root_id, space_id).map_err(|e| e.into_refusal("journal"))?;
    let Some((space, path)) = space.and_then(|s| call.world.world_path(&s).map(|p| (s, p))) else {
        return Err(call.absent("no such space in this world"));
    };
    call.authorize(GrantKind::Read, &path)?;
    let head = journal::head(&space).map_err(|e| e.into_refusal("journal"))?;
    Ok((space, head))
}

/// A body EntryRef (an input of `assign`, declare's evidence, premises and
/// relation targets, compose's selections, a view): the one rule every
/// operation follows, after its own grant (request rule 10). A space
/// unknown, foreign, the journal root or outside the world is `not_found`
/// for a caller who may read the world and `denied` otherwise; inside it,
/// `read` on its path is required (`denied`); a position beyond the
/// journal's head is `unresolved` naming the reference. Returns the space
/// the reference lies in and that journal's head.
pub(crate) fn body_reference(call: &Call<'_>, entry: &EntryRef) -> Result<(Space, u64), Refusal> {
    let (space, head) = readable_reference(call, &entry.root_id, &entry.space_id)?;
    if entry.position > head {
        return Err(Refusal::Unresolved {
            reference: entry.to_json(),
            message: "this reference's position is beyond its journal's head".into(),
        });
    }
    Ok((space, head))
}

/// An explicit manifest of the scope and its descendants, retained in the
/// bytes service (as RFC 8785 JSON of the journal's normalized manifest)
/// and cited by its digest.
pub fn snapshot(call: &mut Call<'_>) -> Result<Reply, Refusal> {
    let path = call.query.path.clone();
    call.verify(&path)?;
    let space = existing(call, &path)?;
    let depth = call.query.int("depth");
    let manifest = journal::capture(&space, depth).map_err(read_refusal)?;
    let spaces = manifest["spaces"].as_array().map_or(0, Vec::len);
    let retained = blobs::put(lab_coord_auth::canonical_json(&manifest))
        .map_err(|e| e.into_refusal("bytes"))?;
    Ok(Reply::Json(
        200,
        json!({
            "scope": call.world.space_json(&space),
            "manifest": retained.name,
            "spaces": spaces,
            "depth": manifest["max_depth"],
        }),
    ))
}
