//! The coordination service's caches of the journal (namespace `coord`):
//! the world layout (`world/layout`) and the resolved paths (`resolved`:
//! SHA-256 of the JSON `[root ID, journal path]` → the space occupying the
//! path) name spaces the journal holds at those paths.
//!
//! Its other tables (replay cache, revocations, worker keys, view index,
//! declarations, application runs and reuse, descriptors, secrets) are
//! not compared with anything: see `docs/operations.md`.

use super::journal::Tree;
use super::Findings;
use crate::kv::KvError;
use crate::kv_snapshot::Snapshot;
use serde_json::{json, Value};
use sha2::{Digest, Sha256};

pub fn check(
    snapshot: &Snapshot,
    tree: Option<&Tree>,
    findings: &mut Findings,
) -> Result<(), KvError> {
    let Some(ns) = snapshot.namespace("coord")? else {
        findings.note("the store has no coordination namespace");
        return Ok(());
    };
    let Some(tree) = tree else {
        if snapshot.get(ns, "world", b"layout")?.is_some() {
            findings.problem("coord: a world is provisioned but the journal holds no tree");
        }
        return Ok(());
    };
    // The space a cached `{root_id, space_id, path}` names, if the journal
    // holds it there.
    let holds = |space: &Value| -> bool {
        let id = space["space_id"]
            .as_str()
            .and_then(|s| s.strip_prefix("spc_"))
            .and_then(|s| hex::decode(s).ok())
            .and_then(|s| <[u8; 16]>::try_from(s).ok());
        space["root_id"] == tree.root_id.as_str()
            && id.is_some_and(|id| {
                tree.spaces
                    .get(&id)
                    .is_some_and(|s| space["path"] == json!(s.path))
            })
    };
    if let Some(layout) = snapshot.get(ns, "world", b"layout")? {
        match serde_json::from_slice::<Value>(layout) {
            Ok(world) if world["root_id"] == tree.root_id.as_str() && holds(&world["world"]) => {}
            Ok(world) => findings.problem(format!(
                "coord: the world layout names the space {} at {}, which the journal does not \
                 hold there",
                world["world"]["space_id"], world["world"]["path"]
            )),
            Err(_) => findings.problem("coord: the world layout (world/layout) is not JSON"),
        }
    }
    let mut resolved = 0;
    for row in snapshot.table(ns, "resolved")? {
        let (key, value) = row?;
        resolved += 1;
        let Ok(space) = serde_json::from_slice::<Value>(value) else {
            findings.problem(format!(
                "coord: the resolved path under {} is not JSON",
                hex::encode(key)
            ));
            continue;
        };
        let named =
            serde_json::to_vec(&json!([space["root_id"], space["path"]])).expect("JSON serializes");
        if Sha256::digest(named).as_slice() != key || !holds(&space) {
            findings.problem(format!(
                "coord: the resolved path {} names the space {}, which the journal does not hold \
                 there",
                space["path"], space["space_id"]
            ));
        }
    }
    findings.count("resolved paths", resolved);
    Ok(())
}
