//! `read` and `query`: pages of fixed prefixes.

use super::{cutoff, existing_space, identity, is_cutoff, Encoded};
use crate::cursor::{self, CursorKey, QueryCursor};
use crate::filter::Filter;
use crate::ids::SpaceId;
use crate::manifest::{Listed, Manifest, MAX_SNAPSHOT_BYTES, MAX_SNAPSHOT_SPACES, UNBOUNDED_DEPTH};
use crate::page_json::{PageJson, SpaceTail};
use crate::pager::{self, Budget, Plan, MAX_INSPECT_CANDIDATES};
use crate::refusal::Refusal;
use crate::requests::{QueryRequest, ReadRequest, SpaceRef};
use crate::store::{self, Identity, Reads};

pub fn read(request: ReadRequest) -> Encoded {
    let txn = store::read()?;
    let identity = identity(&txn)?;
    existing_space(&txn, &identity, &request.space)?;
    let space = request.space.space;
    let current = cutoff(&txn, space)?;
    let through = match request.through {
        None if request.after > 0 => {
            return Err(Refusal::invalid(
                "through",
                "a continuation (`after` > 0) must resend `through`",
            ))
        }
        None => current,
        Some(through) if is_cutoff(&txn, space, through, current)? => through,
        Some(_) => {
            return Err(Refusal::invalid(
                "through",
                "`through` is not a cutoff of this journal",
            ))
        }
    };
    if request.after > through {
        return Err(Refusal::invalid("after", "`after` is past `through`"));
    }
    let filter = request.filter.unwrap_or_else(Filter::unfiltered);
    let plan = Plan::new(&txn, &filter)?;
    let mut budget = Budget::page(request.limit);
    let mut found = Vec::new();
    let progress = pager::scan(
        &txn,
        space,
        request.after,
        through,
        &plan,
        &mut budget,
        &mut found,
    )?;
    let tail = SpaceTail::new(identity.root, space);
    let mut page = PageJson::open();
    page.reserve(&tail, found.iter().map(|f| &f.record));
    for f in &found {
        page.entry(&tail, f.position, &f.record);
    }
    let next_after = (!progress.exhausted).then_some(progress.accounted);
    Ok((
        200,
        page.finish_read(&tail, through, progress.accounted, next_after),
    ))
}

pub fn query(request: QueryRequest) -> Encoded {
    let txn = store::read()?;
    let identity = identity(&txn)?;
    existing_space(&txn, &identity, &request.space)?;
    let filter = request.filter.unwrap_or_else(Filter::unfiltered);
    let key = CursorKey(identity.cursor_key);
    let cursor = match &request.cursor {
        Some(text) => Some(cursor::open_query(&key, text)?),
        None => None,
    };

    let (manifest, manifest_digest) = match request.snapshot {
        Some(manifest) => {
            if manifest.scope != request.space {
                return Err(Refusal::invalid(
                    "snapshot.scope",
                    "the snapshot's scope is not the request's space",
                ));
            }
            if request.max_depth.is_some_and(|d| d != manifest.max_depth) {
                return Err(Refusal::invalid(
                    "max_depth",
                    "`max_depth` disagrees with the snapshot",
                ));
            }
            // Its canonical size was bounded when it was decoded.
            let digest = manifest.digest();
            // A cursor is sealed by this instance and binds the manifest's
            // digest: the manifest it names was captured or validated when
            // the cursor was issued, and the tree it describes only grows.
            let issued_with_cursor = cursor
                .as_ref()
                .is_some_and(|cursor| cursor.manifest_digest == digest);
            if !issued_with_cursor {
                validate(&txn, &identity, &manifest)?;
            }
            (manifest, digest)
        }
        None => {
            if cursor.is_some() {
                return Err(Refusal::invalid(
                    "cursor",
                    "a continuation resubmits the snapshot",
                ));
            }
            let manifest = capture(
                &txn,
                &identity,
                &request.space,
                request.max_depth.unwrap_or(UNBOUNDED_DEPTH),
            )?;
            let digest = manifest.digest();
            (manifest, digest)
        }
    };
    let filter_digest = filter.digest();
    let (mut index, mut after) = match &cursor {
        Some(cursor) => {
            if cursor.manifest_digest != manifest_digest {
                return Err(Refusal::invalid(
                    "cursor",
                    "the cursor belongs to another snapshot",
                ));
            }
            if cursor.filter_digest != filter_digest {
                return Err(Refusal::invalid(
                    "cursor",
                    "the cursor belongs to another filter",
                ));
            }
            let position_ok = manifest
                .spaces
                .get(cursor.space_index as usize)
                .is_some_and(|listed| cursor.after <= listed.through);
            if !position_ok {
                return Err(Refusal::invalid(
                    "cursor",
                    "the cursor points outside the snapshot",
                ));
            }
            (cursor.space_index as usize, cursor.after)
        }
        None => (0, 0),
    };

    let plan = Plan::new(&txn, &filter)?;
    let mut budget = Budget::page(request.limit);
    let mut page = PageJson::open();
    let mut next = None;
    while index < manifest.spaces.len() {
        let listed = &manifest.spaces[index];
        let mut found = Vec::new();
        let progress = pager::scan(
            &txn,
            listed.space,
            after,
            listed.through,
            &plan,
            &mut budget,
            &mut found,
        )?;
        let tail = SpaceTail::new(identity.root, listed.space);
        page.reserve(&tail, found.iter().map(|f| &f.record));
        for f in &found {
            page.entry(&tail, f.position, &f.record);
        }
        if !progress.exhausted {
            next = Some((index, progress.accounted));
            break;
        }
        index += 1;
        after = 0;
    }
    let next_cursor = next.map(|(space_index, after)| {
        let cursor = QueryCursor {
            manifest_digest,
            filter_digest,
            space_index: space_index as u32,
            after,
        };
        cursor::seal_query(&key, &cursor)
    });
    Ok((200, page.finish_query(&manifest, next_cursor.as_deref())))
}

/// The manifest of the scope's tree as it stands now, within `max_depth`:
/// depth-first preorder by creation, each space at its current cutoff.
fn capture(
    r: &impl Reads,
    identity: &Identity,
    scope: &SpaceRef,
    max_depth: u64,
) -> Result<Manifest, Refusal> {
    let cutoffs = |space: SpaceId, _: &[String]| cutoff(r, space).map(Some);
    let spaces = walk(r, identity, scope.space, max_depth, cutoffs)?;
    let manifest = Manifest {
        scope: *scope,
        max_depth,
        spaces,
    };
    check_size(&manifest)?;
    Ok(manifest)
}

/// A submitted manifest must be exactly the walk of the tree at its own
/// cutoffs: the scope first, then below the depth bound every child visible
/// at each listed parent's cutoff, in creation order; paths and identities
/// as created; each cutoff 0 or a committed batch boundary.
fn validate(r: &impl Reads, identity: &Identity, manifest: &Manifest) -> Result<(), Refusal> {
    for listed in &manifest.spaces {
        if listed.root != identity.root || store::space(r, listed.space)?.is_none() {
            return Err(Refusal::NotFound(format!(
                "the snapshot lists an unknown space {}",
                listed.space
            )));
        }
    }
    let throughs: std::collections::HashMap<SpaceId, u64> = manifest
        .spaces
        .iter()
        .map(|l| (l.space, l.through))
        .collect();
    let listed_cutoff = |space: SpaceId, _: &[String]| -> Result<Option<u64>, Refusal> {
        let Some(&through) = throughs.get(&space) else {
            return Ok(None);
        };
        if !is_cutoff(r, space, through, cutoff(r, space)?)? {
            return Err(Refusal::invalid(
                "snapshot.spaces",
                "a listed cutoff is not a batch boundary",
            ));
        }
        Ok(Some(through))
    };
    let expected = walk(
        r,
        identity,
        manifest.scope.space,
        manifest.max_depth,
        listed_cutoff,
    )
    .map_err(|e| match e {
        Refusal::LimitExceeded(_) => {
            Refusal::invalid("snapshot.spaces", "the snapshot does not match the tree")
        }
        other => other,
    })?;
    if expected != manifest.spaces {
        return Err(Refusal::invalid(
            "snapshot.spaces",
            "the snapshot does not match the tree at its cutoffs",
        ));
    }
    Ok(())
}

/// Depth-first preorder from `scope`, each space at the cutoff `cutoff_of`
/// gives it; a space it gives none for ends the walk as inconsistent.
fn walk(
    r: &impl Reads,
    identity: &Identity,
    scope: SpaceId,
    max_depth: u64,
    mut cutoff_of: impl FnMut(SpaceId, &[String]) -> Result<Option<u64>, Refusal>,
) -> Result<Vec<Listed>, Refusal> {
    let record =
        store::space(r, scope)?.ok_or_else(|| Refusal::NotFound("no such space".into()))?;
    let mut listed = Vec::new();
    let mut inspected = 0u64;
    // (space, path, depth below the scope)
    let mut stack = vec![(scope, record.path, 0u64)];
    while let Some((space, path, depth)) = stack.pop() {
        let Some(through) = cutoff_of(space, &path)? else {
            return Err(Refusal::invalid(
                "snapshot.spaces",
                "the snapshot omits a visible child",
            ));
        };
        if listed.len() == MAX_SNAPSHOT_SPACES {
            return Err(Refusal::LimitExceeded(format!(
                "the snapshot would list more than {MAX_SNAPSHOT_SPACES} spaces"
            )));
        }
        listed.push(Listed {
            root: identity.root,
            space,
            path: path.clone(),
            through,
        });
        if depth >= max_depth {
            continue;
        }
        let children = store::created(r, space, 0, through, (MAX_SNAPSHOT_SPACES + 1) as u32)?;
        inspected += children.len() as u64;
        if inspected > MAX_INSPECT_CANDIDATES {
            return Err(Refusal::LimitExceeded(
                "the snapshot's topology exceeds the inspection budget".into(),
            ));
        }
        for (_, child) in children.into_iter().rev() {
            let record = store::space(r, child)?
                .ok_or_else(|| Refusal::Internal("a created child has no record".into()))?;
            stack.push((child, record.path, depth + 1));
        }
    }
    Ok(listed)
}

fn check_size(manifest: &Manifest) -> Result<(), Refusal> {
    if manifest.canonical_json_len() > MAX_SNAPSHOT_BYTES {
        return Err(Refusal::LimitExceeded(format!(
            "the snapshot exceeds {MAX_SNAPSHOT_BYTES} bytes"
        )));
    }
    Ok(())
}
