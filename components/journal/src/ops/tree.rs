//! `resolve`, `children` and `head`: the tree as it stands at a cutoff.

use super::{cutoff, existing_space, identity, is_cutoff, space_json, Answer, Encoded};
use crate::cursor::{self, ChildrenCursor, CursorKey};
use crate::page_json::{self, ChildrenJson};
use crate::refusal::Refusal;
use crate::requests::{ChildrenRequest, HeadRequest, ResolveRequest};
use crate::store;
use serde_json::{json, Value};

pub fn resolve(request: ResolveRequest) -> Answer {
    let txn = store::read()?;
    let identity = identity(&txn)?;
    match request {
        ResolveRequest::Exact(space) => {
            let record = existing_space(&txn, &identity, &space)?;
            Ok((
                200,
                json!({ "space": space_json(identity.root, space.space, &record.path) }),
            ))
        }
        ResolveRequest::Path { root, path } => {
            if root != identity.root {
                return Err(Refusal::NotFound("no such root".into()));
            }
            let mut current = identity.root_space;
            for key in &path {
                match store::child(&txn, current, key)? {
                    Some(child) => current = child,
                    None => return Ok((200, json!({ "space": Value::Null }))),
                }
            }
            Ok((
                200,
                json!({ "space": space_json(identity.root, current, &path) }),
            ))
        }
    }
}

pub fn head(request: HeadRequest) -> Encoded {
    let space = request.space;
    let txn = store::read_head(space.space)?;
    let identity = identity(&txn)?;
    if space.root != identity.root {
        return Err(Refusal::NotFound("no such root".into()));
    }
    // A space has a head from the transaction that creates it on, so its
    // head alone settles that it exists.
    let cutoff =
        store::head(&txn, space.space)?.ok_or_else(|| Refusal::NotFound("no such space".into()))?;
    Ok((200, page_json::head(identity.root, space.space, cutoff)))
}

pub fn children(request: ChildrenRequest) -> Encoded {
    let txn = store::read()?;
    let identity = identity(&txn)?;
    existing_space(&txn, &identity, &request.space)?;
    let space = request.space.space;
    let key = CursorKey(identity.cursor_key);
    let (through, after) = match &request.cursor {
        Some(text) => {
            let cursor = cursor::open_children(&key, text)?;
            if cursor.space != space {
                return Err(Refusal::invalid(
                    "cursor",
                    "the cursor belongs to another space",
                ));
            }
            if request.through.is_some_and(|t| t != cursor.through) {
                return Err(Refusal::invalid(
                    "through",
                    "`through` disagrees with the cursor",
                ));
            }
            (cursor.through, cursor.after_position)
        }
        None => {
            let current = cutoff(&txn, space)?;
            match request.through {
                None => (current, 0),
                Some(through) if is_cutoff(&txn, space, through, current)? => (through, 0),
                Some(_) => {
                    return Err(Refusal::invalid(
                        "through",
                        "`through` is not a cutoff of this journal",
                    ))
                }
            }
        }
    };
    let limit = request.limit as u32;
    // One more than the page holds tells whether the set goes on.
    let found = store::created(&txn, space, after, through, limit + 1)?;
    let more = found.len() > limit as usize;
    let mut page = ChildrenJson::open();
    let mut last = after;
    for (position, child) in found.into_iter().take(limit as usize) {
        let record = store::space(&txn, child)?
            .ok_or_else(|| Refusal::Internal("a created child has no record".into()))?;
        page.child(identity.root, space, position, child, &record.path);
        last = position;
    }
    let next_cursor = more.then(|| {
        let next = ChildrenCursor {
            space,
            through,
            after_position: last,
        };
        cursor::seal_children(&key, &next)
    });
    Ok((
        200,
        page.finish(identity.root, space, through, next_cursor.as_deref()),
    ))
}
