//! Offline verification of an `export` (HTTP.md decision 17): given the
//! names of the manifests of one traversal, in call order, and a way to
//! fetch retained bytes by name, each check the export's contract
//! promises, with no call to the coordination service.
//!
//! - every manifest and chunk hashes to its name, the manifests are RFC
//!   8785 JSON of purpose `coord.export.v1`, one scope, and every chunk
//!   line is a stretch `{space, after, through, entries}`;
//! - every journal prefix a manifest cites (`{space, through}`) is
//!   covered by the stretches of that space, positions contiguous from 1
//!   to `through`, each stretch holding `through`'s of its predecessor and
//!   no entry beyond it;
//! - every batch is well formed: its entries carry the same `{first,
//!   last}`, its positions run from `first` to `last` without a gap, and
//!   it ends at or before the prefix's `through`;
//! - the creation entries among a space's entries name exactly the
//!   children of that space the export lists: each child's path is the
//!   parent's path and the creation key, and every space but the scope is
//!   named by its parent's creation entry. A child not covered must be
//!   pending (the last manifest incomplete).

use crate::admission::Check;
use base64::Engine as _;
use lab_coord_auth::canonical_json;
use lab_coord_auth::record::sha256_text;
use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet};

/// The manifest's `purpose`.
pub const EXPORT_PURPOSE: &str = "coord.export.v1";

/// A space as the export names it: its identity and its path.
type SpaceKey = (String, String);

/// The checks of an export traversal whose calls answered the manifests
/// `manifests` (in call order); `fetch` answers the retained bytes of a
/// name, or none.
pub fn verify_export(
    manifests: &[&str],
    fetch: &mut dyn FnMut(&str) -> Option<Vec<u8>>,
) -> Vec<Check> {
    let mut checks = Vec::new();
    let mut check =
        |name: &'static str, outcome: Result<(), String>| checks.push(Check::of(name, outcome));
    let read = read_manifests(manifests, fetch);
    let (manifests, scope) = match read {
        Ok(read) => {
            check("manifests", Ok(()));
            read
        }
        Err(e) => {
            check("manifests", Err(e));
            return checks;
        }
    };
    let stretches = match read_chunks(&manifests, fetch) {
        Ok(stretches) => {
            check("chunks", Ok(()));
            stretches
        }
        Err(e) => {
            check("chunks", Err(e));
            return checks;
        }
    };
    let covered = covered(&manifests);
    check("prefixes", covered.as_ref().map(drop).map_err(Clone::clone));
    let Ok(covered) = covered else {
        return checks;
    };
    let entries = prefixes(&covered, &stretches);
    check(
        "positions",
        entries.as_ref().map(drop).map_err(Clone::clone),
    );
    let Ok(entries) = entries else {
        return checks;
    };
    check("batches", batches(&covered, &entries));
    let complete = manifests.last().is_some_and(|m| m["complete"] == true);
    check("children", children(&scope, &covered, &entries, complete));
    checks
}

/// Bytes fetched by `name` and checked against it.
fn fetched(fetch: &mut dyn FnMut(&str) -> Option<Vec<u8>>, name: &str) -> Result<Vec<u8>, String> {
    let bytes = fetch(name).ok_or_else(|| format!("{name} could not be fetched"))?;
    let digest = sha256_text(&bytes);
    if digest != name {
        return Err(format!("{name} fetched bytes that hash to {digest}"));
    }
    Ok(bytes)
}

/// The manifests, each fetched, checked and parsed, and their one scope.
fn read_manifests(
    names: &[&str],
    fetch: &mut dyn FnMut(&str) -> Option<Vec<u8>>,
) -> Result<(Vec<Value>, Value), String> {
    if names.is_empty() {
        return Err("no manifest given".into());
    }
    let mut manifests = Vec::new();
    for (i, name) in names.iter().enumerate() {
        let bytes = fetched(fetch, name)?;
        let manifest: Value =
            serde_json::from_slice(&bytes).map_err(|e| format!("manifest {name}: {e}"))?;
        if canonical_json(&manifest) != bytes {
            return Err(format!("manifest {name} is not RFC 8785 JSON"));
        }
        if manifest["purpose"] != EXPORT_PURPOSE {
            return Err(format!(
                "manifest {name} is not of purpose {EXPORT_PURPOSE}"
            ));
        }
        if !manifest["chunks"].is_array() || !manifest["spaces"].is_array() {
            return Err(format!("manifest {name} lists no chunks or spaces"));
        }
        if i + 1 < names.len() && manifest["complete"] != false {
            return Err(format!("manifest {name} is complete, yet more follow"));
        }
        manifests.push(manifest);
    }
    let scope = manifests[0]["scope"].clone();
    if manifests.iter().any(|m| m["scope"] != scope) {
        return Err("the manifests name different scopes".into());
    }
    Ok((manifests, scope))
}

/// One line of a chunk.
struct Stretch {
    space: SpaceKey,
    after: u64,
    through: u64,
    entries: Vec<Value>,
}

/// Every stretch of every chunk, in order.
fn read_chunks(
    manifests: &[Value],
    fetch: &mut dyn FnMut(&str) -> Option<Vec<u8>>,
) -> Result<Vec<Stretch>, String> {
    let mut stretches = Vec::new();
    for name in manifests
        .iter()
        .flat_map(|m| m["chunks"].as_array().into_iter().flatten())
    {
        let name = name.as_str().ok_or("a chunk name is not a string")?;
        let bytes = fetched(fetch, name)?;
        let text = std::str::from_utf8(&bytes).map_err(|_| format!("chunk {name} is not UTF-8"))?;
        for (n, line) in text.lines().enumerate() {
            let at = || format!("chunk {name} line {}", n + 1);
            let value: Value = serde_json::from_str(line).map_err(|e| format!("{}: {e}", at()))?;
            let (Some(after), Some(through), Some(entries)) = (
                value["after"].as_u64(),
                value["through"].as_u64(),
                value["entries"].as_array(),
            ) else {
                return Err(format!("{} is not a stretch", at()));
            };
            stretches.push(Stretch {
                space: space_key(&value["space"]).ok_or_else(|| format!("{}: no space", at()))?,
                after,
                through,
                entries: entries.clone(),
            });
        }
    }
    Ok(stretches)
}

/// `(space_id, path as JSON text)` of a space object.
fn space_key(space: &Value) -> Option<SpaceKey> {
    let id = space["space_id"].as_str()?;
    space["path"].as_array()?;
    Some((id.to_string(), space["path"].to_string()))
}

/// Each prefix the manifests cite, by space: its `through`. A space cited
/// twice is an error (one traversal covers each space once).
fn covered(manifests: &[Value]) -> Result<BTreeMap<SpaceKey, u64>, String> {
    let mut covered = BTreeMap::new();
    for item in manifests
        .iter()
        .flat_map(|m| m["spaces"].as_array().into_iter().flatten())
    {
        let (Some(key), Some(through)) = (space_key(&item["space"]), item["through"].as_u64())
        else {
            return Err(format!("the manifest cites {item}, not {{space, through}}"));
        };
        if covered.insert(key, through).is_some() {
            return Err(format!("the space {} is cited twice", item["space"]));
        }
    }
    Ok(covered)
}

/// The entries of each cited prefix, from its stretches: contiguous from
/// position 1 to its `through`, every stretch at that `through`.
fn prefixes(
    covered: &BTreeMap<SpaceKey, u64>,
    stretches: &[Stretch],
) -> Result<BTreeMap<SpaceKey, Vec<Value>>, String> {
    let mut entries: BTreeMap<SpaceKey, Vec<Value>> = BTreeMap::new();
    for stretch in stretches {
        let space = &stretch.space;
        let Some(&through) = covered.get(space) else {
            // A stretch of a space still pending: checked when cited.
            continue;
        };
        let have = entries.entry(space.clone()).or_default();
        let next = have.len() as u64;
        if stretch.after != next || stretch.through != through {
            return Err(format!(
                "a stretch of {} covers ({}, {}] where ({next}, {through}] was due",
                space.1, stretch.after, stretch.through
            ));
        }
        for (i, entry) in stretch.entries.iter().enumerate() {
            let position = next + i as u64 + 1;
            if entry["ref"]["position"].as_u64() != Some(position)
                || entry["ref"]["space_id"].as_str() != Some(space.0.as_str())
            {
                return Err(format!(
                    "{}: the entry {} stands where position {position} was due",
                    space.1, entry["ref"]
                ));
            }
        }
        if next + stretch.entries.len() as u64 > through {
            return Err(format!("{}: entries beyond position {through}", space.1));
        }
        have.extend(stretch.entries.iter().cloned());
    }
    for (space, &through) in covered {
        let count = entries.get(space).map_or(0, Vec::len) as u64;
        if count != through {
            return Err(format!(
                "{} holds {count} entries in its stretches, not {through}",
                space.1
            ));
        }
    }
    Ok(entries)
}

/// Every batch whole and in order, within its prefix.
fn batches(
    covered: &BTreeMap<SpaceKey, u64>,
    entries: &BTreeMap<SpaceKey, Vec<Value>>,
) -> Result<(), String> {
    for (space, through) in covered {
        let mut open: Option<(u64, u64)> = None;
        for (i, entry) in entries.get(space).into_iter().flatten().enumerate() {
            let position = i as u64 + 1;
            let (Some(first), Some(last)) = (
                entry["batch"]["first"].as_u64(),
                entry["batch"]["last"].as_u64(),
            ) else {
                return Err(format!("{} position {position}: no batch", space.1));
            };
            let expected = match open {
                Some(batch) if position <= batch.1 => batch,
                _ => (position, last),
            };
            if (first, last) != expected || last > *through {
                return Err(format!(
                    "{} position {position}: batch {first}..{last} where {}..{} was due, within {through}",
                    space.1, expected.0, expected.1
                ));
            }
            if !matches!(entry["origin"].as_str(), Some("append" | "create")) {
                return Err(format!("{} position {position}: no origin", space.1));
            }
            if entry["fact"].as_str().is_none() {
                return Err(format!("{} position {position}: no fact", space.1));
            }
            open = Some((first, last));
        }
    }
    Ok(())
}

/// The child `(key, space_id)` a creation entry records, if it is one.
fn creation(entry: &Value) -> Result<Option<(String, String)>, String> {
    use lab_values::Value as V;
    if entry["origin"] != "create" {
        return Ok(None);
    }
    let fact = base64::engine::general_purpose::STANDARD
        .decode(entry["fact"].as_str().unwrap_or_default())
        .map_err(|_| format!("the creation entry {} is not base64", entry["ref"]))?;
    match lab_values::decode(&fact) {
        Ok(V::Tuple(items)) => match &items[..] {
            [V::Label(p), V::Text(key), V::Text(id)] if p == lab_values::CREATION_PREDICATE => {
                Ok(Some((key.clone(), id.clone())))
            }
            _ => Err(format!(
                "the creation entry {} is not a creation fact",
                entry["ref"]
            )),
        },
        _ => Err(format!(
            "the creation entry {} is not a value",
            entry["ref"]
        )),
    }
}

/// The creation entries of each covered space against the spaces listed.
fn children(
    scope: &Value,
    covered: &BTreeMap<SpaceKey, u64>,
    entries: &BTreeMap<SpaceKey, Vec<Value>>,
    complete: bool,
) -> Result<(), String> {
    let scope = space_key(scope).ok_or("the manifest names no scope")?;
    if !covered.contains_key(&scope) {
        return Err("the scope is not covered".into());
    }
    let mut named = BTreeSet::new();
    for (parent, list) in entries {
        let path: Vec<Value> = serde_json::from_str(&parent.1).unwrap_or_default();
        for entry in list {
            let Some((key, id)) = creation(entry)? else {
                continue;
            };
            let mut child = path.clone();
            child.push(Value::String(key));
            let child = (id, Value::Array(child).to_string());
            if !covered.contains_key(&child) && complete {
                return Err(format!(
                    "{} creates {} at {}, which the export does not cover",
                    parent.1, child.0, child.1
                ));
            }
            named.insert(child);
        }
    }
    match covered
        .keys()
        .find(|space| **space != scope && !named.contains(*space))
    {
        Some(space) => Err(format!(
            "{} ({}) is covered, but no covered parent creates it",
            space.1, space.0
        )),
        None => Ok(()),
    }
}
