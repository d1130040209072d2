//! The journal's tables against each other (layout: `docs/journal.md`,
//! "Storage layout"; integers big-endian).
//!
//! Checked:
//! - the identity, and the root space it names;
//! - each space's record against its parent: the path extends the
//!   parent's by the child's key, the `child` and `created` rows name it,
//!   and the parent's entry at its creation position is the creation fact
//!   naming its key and ID;
//! - each journal: positions 1 to its head, none missing or beyond;
//!   batches whole (every entry of a batch names the same first and last,
//!   and batches follow each other); each entry's predicate index row and
//!   one argument index row per pair of the store's declared argument
//!   index (`meta/argument-index`) the entry has;
//! - each receipt against the range it answered, and each batch and
//!   creation against a receipt (every `append` and `create` carries an
//!   operation ID, so every one left a receipt);
//! - every `child`, `created`, `predicate` and `argument` row against what
//!   it indexes, and every `argument` row against the declared pairs.

use super::Findings;
use crate::kv::KvError;
use crate::kv_snapshot::{NamespaceDb, Snapshot};
use serde_json::Value;
use sha2::{Digest, Sha256};
use std::collections::{HashMap, HashSet};

/// A space ID's 16 bytes.
type Id = [u8; 16];

/// The spaces of the journal, for the checks of what caches them.
pub struct Tree {
    pub root_id: String,
    pub spaces: HashMap<Id, SpaceRecord>,
}

/// A space's stored record.
pub struct SpaceRecord {
    pub parent: Option<Id>,
    pub created_at: u64,
    pub path: Vec<String>,
}

pub fn space_id(id: &Id) -> String {
    format!("spc_{}", hex::encode(id))
}

fn u64_at(bytes: &[u8], at: usize) -> Option<u64> {
    Some(u64::from_be_bytes(bytes.get(at..at + 8)?.try_into().ok()?))
}

fn id_at(bytes: &[u8], at: usize) -> Option<Id> {
    bytes.get(at..at + 16)?.try_into().ok()
}

fn decode_space(bytes: &[u8]) -> Option<SpaceRecord> {
    let parent = id_at(bytes, 0)?;
    let created_at = u64_at(bytes, 16)?;
    let mut rest = bytes.get(24..)?;
    let mut path = Vec::new();
    while !rest.is_empty() {
        let len = usize::from(u16::from_be_bytes(rest.get(..2)?.try_into().ok()?));
        path.push(String::from_utf8(rest.get(2..2 + len)?.to_vec()).ok()?);
        rest = &rest[2 + len..];
    }
    Some(SpaceRecord {
        parent: (parent != [0; 16]).then_some(parent),
        created_at,
        path,
    })
}

/// An entry's stored record.
struct EntryRecord<'a> {
    create: bool,
    first: u64,
    last: u64,
    fact: &'a [u8],
}

fn decode_entry(bytes: &[u8]) -> Option<EntryRecord<'_>> {
    let create = match bytes.first()? {
        0 => false,
        1 => true,
        _ => return None,
    };
    Some(EntryRecord {
        create,
        first: u64_at(bytes, 1)?,
        last: u64_at(bytes, 9)?,
        fact: bytes.get(17..)?,
    })
}

/// An index key: SHA-256 of a value's canonical bytes, first 16 bytes.
type IndexKey = [u8; 16];

/// The index keys of a canonical fact: its predicate's and each
/// argument's; none when the bytes are not a canonical fact.
fn index_keys(fact: &[u8]) -> Option<(IndexKey, Vec<IndexKey>)> {
    lab_values::decode(fact).ok()?.as_fact()?;
    let children = lab_values::tuple_children(fact).ok()?;
    let key = |bytes: &[u8]| -> IndexKey {
        let mut key = [0; 16];
        key.copy_from_slice(&Sha256::digest(bytes)[..16]);
        key
    };
    let (predicate, arguments) = children.split_first()?;
    Some((key(predicate), arguments.iter().map(|a| key(a)).collect()))
}

/// `argument` keys: space (16) ‖ predicate key (16) ‖ argument index (2)
/// ‖ value key (16) ‖ position (8).
const ARGUMENT_KEY_BYTES: usize = 58;

/// A declared pair: a predicate's index key and an argument index.
type Pair = (IndexKey, u16);

/// The declared pairs of `meta/argument-index` (18 octets each: predicate
/// key ‖ index, big-endian); none when absent; `None` when malformed.
fn declared_pairs(stored: Option<&[u8]>) -> Option<HashSet<Pair>> {
    let Some(bytes) = stored else {
        return Some(HashSet::new());
    };
    if !bytes.len().is_multiple_of(18) {
        return None;
    }
    Some(
        bytes
            .chunks_exact(18)
            .map(|pair| {
                let key: IndexKey = pair[..16].try_into().expect("16 octets");
                (key, u16::from_be_bytes([pair[16], pair[17]]))
            })
            .collect(),
    )
}

/// Checks the `journal` namespace; answers its tree when it has one.
pub fn check(snapshot: &Snapshot, findings: &mut Findings) -> Result<Option<Tree>, KvError> {
    let Some(ns) = snapshot.namespace("journal")? else {
        findings.note("the store has no journal namespace");
        return Ok(None);
    };
    let Some(identity) = snapshot.get(ns, "meta", b"identity")? else {
        if snapshot.table(ns, "space")?.next().is_some() {
            findings.problem("journal: spaces are stored but no identity (meta/identity)");
        } else {
            findings.note("the journal is not provisioned");
        }
        return Ok(None);
    };
    let (Some(root), Some(root_space)) = (id_at(identity, 0), id_at(identity, 16)) else {
        findings.problem("journal: the identity record (meta/identity) is malformed");
        return Ok(None);
    };
    if identity.len() != 80 {
        findings.problem("journal: the identity record (meta/identity) is not 80 bytes");
    }
    let tree = Tree {
        root_id: format!("rt_{}", hex::encode(root)),
        spaces: spaces(snapshot, ns, findings)?,
    };
    let heads = heads(snapshot, ns, &tree, findings)?;
    match tree.spaces.get(&root_space) {
        Some(r) if r.parent.is_none() && r.path.is_empty() && r.created_at == 0 => {}
        Some(_) => findings.problem(format!(
            "journal: the root space {} has a parent, a path or a creation position",
            space_id(&root_space)
        )),
        None => findings.problem(format!(
            "journal: the root space {} the identity names is not stored",
            space_id(&root_space)
        )),
    }
    for (id, record) in &tree.spaces {
        if record.parent.is_none() && *id != root_space {
            findings.problem(format!(
                "journal: space {} has no parent but is not the root space",
                space_id(id)
            ));
        }
    }
    check_places(snapshot, ns, &tree, findings)?;
    let receipts = receipts(snapshot, ns, &tree, findings)?;
    let stored = snapshot.get(ns, "meta", b"argument-index")?;
    if stored.is_none() {
        findings.note(
            "journal: the store was provisioned before the argument index: it declares no pair, \
             argument filters are served without it",
        );
    }
    let declared = declared_pairs(stored).unwrap_or_else(|| {
        findings.problem("journal: the declared argument index (meta/argument-index) is malformed");
        HashSet::new()
    });
    findings.count("declared argument index pairs", declared.len() as u64);
    entries(
        snapshot,
        ns,
        &Indexed {
            heads: &heads,
            receipts: &receipts,
            declared: &declared,
        },
        findings,
    )?;
    index_rows(snapshot, ns, &declared, findings)?;
    findings.count("spaces", tree.spaces.len() as u64);
    findings.count("receipts", receipts.count);
    Ok(Some(tree))
}

fn spaces(
    snapshot: &Snapshot,
    ns: NamespaceDb,
    findings: &mut Findings,
) -> Result<HashMap<Id, SpaceRecord>, KvError> {
    let mut spaces = HashMap::new();
    for row in snapshot.table(ns, "space")? {
        let (key, value) = row?;
        match (Id::try_from(key), decode_space(value)) {
            (Ok(id), Some(record)) => {
                spaces.insert(id, record);
            }
            _ => findings.problem(format!(
                "journal: the space record under {} is malformed",
                hex::encode(key)
            )),
        }
    }
    Ok(spaces)
}

fn heads(
    snapshot: &Snapshot,
    ns: NamespaceDb,
    tree: &Tree,
    findings: &mut Findings,
) -> Result<HashMap<Id, u64>, KvError> {
    let mut heads = HashMap::new();
    for row in snapshot.table(ns, "head")? {
        let (key, value) = row?;
        let (Ok(id), Some(cutoff), 8) = (Id::try_from(key), u64_at(value, 0), value.len()) else {
            findings.problem(format!(
                "journal: the head under {} is malformed",
                hex::encode(key)
            ));
            continue;
        };
        if !tree.spaces.contains_key(&id) {
            findings.problem(format!(
                "journal: a head is stored for {}, which is not a stored space",
                space_id(&id)
            ));
        }
        heads.insert(id, cutoff);
    }
    for id in tree.spaces.keys() {
        if !heads.contains_key(id) {
            findings.problem(format!("journal: space {} has no head", space_id(id)));
        }
    }
    Ok(heads)
}

/// Each space's place under its parent: path, `child`, `created` and the
/// creation entry.
fn check_places(
    snapshot: &Snapshot,
    ns: NamespaceDb,
    tree: &Tree,
    findings: &mut Findings,
) -> Result<(), KvError> {
    for (id, record) in &tree.spaces {
        let Some(parent) = record.parent else {
            continue;
        };
        let name = space_id(id);
        let Some(parent_record) = tree.spaces.get(&parent) else {
            findings.problem(format!(
                "journal: space {name} names a parent {} that is not stored",
                space_id(&parent)
            ));
            continue;
        };
        let Some((key, prefix)) = record.path.split_last() else {
            findings.problem(format!("journal: space {name} has a parent but no path"));
            continue;
        };
        if prefix != parent_record.path.as_slice() {
            findings.problem(format!(
                "journal: the path of space {name} does not extend its parent's"
            ));
        }
        let position = record.created_at.to_be_bytes();
        let created = snapshot.get(ns, "created", &[&parent[..], &position].concat())?;
        if created != Some(&id[..]) {
            findings.problem(format!(
                "journal: the creation index of {} at position {} does not name space {name}",
                space_id(&parent),
                record.created_at
            ));
        }
        let child = snapshot.get(ns, "child", &[&parent[..], key.as_bytes()].concat())?;
        if child != Some(&id[..]) {
            findings.problem(format!(
                "journal: the child index of {} under the key {key:?} does not name space {name}",
                space_id(&parent)
            ));
        }
        let entry = snapshot.get(ns, "entry", &[&parent[..], &position].concat())?;
        let expected = lab_values::creation_fact(key, &name);
        let agrees = entry.and_then(decode_entry).is_some_and(|e| {
            e.create
                && e.first == record.created_at
                && e.last == record.created_at
                && e.fact == expected.as_slice()
        });
        if !agrees {
            findings.problem(format!(
                "journal: the entry at position {} of {} is not the creation fact of space \
                 {name} (key {key:?})",
                record.created_at,
                space_id(&parent)
            ));
        }
    }
    Ok(())
}

/// What the receipts answered: append batches and creations, by space.
#[derive(Default)]
struct Receipts {
    batches: HashSet<(Id, u64, u64)>,
    creations: HashSet<(Id, u64)>,
    count: u64,
}

/// The first octet of an append receipt's result that holds the batch's
/// positions (`first ‖ last`) rather than its JSON.
const POSITIONS_RESULT: u8 = 1;

/// The result an append receipt holding only positions answered: the
/// space and root are those of its key.
fn positions_result(positions: &[u8], space: Id, root_id: &str) -> Option<Value> {
    let first = u64::from_be_bytes(positions.get(..8)?.try_into().ok()?);
    let last = u64::from_be_bytes(positions.get(8..)?.try_into().ok()?);
    Some(serde_json::json!({
        "space": {"root_id": root_id, "space_id": space_id(&space)},
        "first": first,
        "last": last,
        "cutoff": last,
        "replayed": false,
    }))
}

fn receipts(
    snapshot: &Snapshot,
    ns: NamespaceDb,
    tree: &Tree,
    findings: &mut Findings,
) -> Result<Receipts, KvError> {
    let mut receipts = Receipts::default();
    for row in snapshot.table(ns, "receipt")? {
        let (key, value) = row?;
        receipts.count += 1;
        let space = id_at(key, 0);
        let kind = key.get(16);
        let operation = String::from_utf8_lossy(key.get(17..).unwrap_or_default());
        let result = value.get(32..).and_then(|r| match (kind, r) {
            (Some(b'a'), [POSITIONS_RESULT, positions @ ..]) => {
                positions_result(positions, space?, &tree.root_id)
            }
            _ => serde_json::from_slice::<Value>(r).ok(),
        });
        let (Some(space), Some(kind), Some(result)) = (space, kind, result) else {
            findings.problem(format!(
                "journal: the receipt under {} is malformed",
                hex::encode(key)
            ));
            continue;
        };
        let about = format!(
            "journal: the receipt of {operation:?} in {}",
            space_id(&space)
        );
        if !tree.spaces.contains_key(&space) {
            findings.problem(format!("{about} is for a space that is not stored"));
            continue;
        }
        let name = space_id(&space);
        match kind {
            b'a' => {
                let first = result["first"].as_u64();
                let last = result["last"].as_u64();
                let answered = result["space"]["space_id"] == name.as_str()
                    && result["space"]["root_id"] == tree.root_id.as_str()
                    && result["cutoff"].as_u64() == last
                    && result["replayed"] == false;
                match (first, last) {
                    (Some(first), Some(last)) if answered && 1 <= first && first <= last => {
                        receipts.batches.insert((space, first, last));
                        let mut whole = true;
                        for end in [first, last] {
                            let key = [&space[..], &end.to_be_bytes()].concat();
                            whole &= snapshot
                                .get(ns, "entry", &key)?
                                .and_then(decode_entry)
                                .is_some_and(|e| !e.create && e.first == first && e.last == last);
                        }
                        if !whole {
                            findings.problem(format!(
                                "{about} answered positions {first}..{last}, which are not \
                                 that batch"
                            ));
                        }
                    }
                    _ => findings.problem(format!("{about} is not an append's result")),
                }
            }
            b'c' => {
                let position = result["parent_entry"]["position"].as_u64();
                let child = result["child"]["space_id"]
                    .as_str()
                    .and_then(|c| c.strip_prefix("spc_"))
                    .and_then(|c| hex::decode(c).ok())
                    .and_then(|c| Id::try_from(c).ok());
                let answered = result["parent_entry"]["space_id"] == name.as_str()
                    && result["parent_cutoff"].as_u64() == position
                    && result["replayed"] == false;
                match (position, child) {
                    (Some(position), Some(child)) if answered => {
                        receipts.creations.insert((space, position));
                        let placed = tree.spaces.get(&child).is_some_and(|c| {
                            c.parent == Some(space)
                                && c.created_at == position
                                && result["child"]["path"] == serde_json::json!(c.path)
                        });
                        if !placed {
                            findings.problem(format!(
                                "{about} answered the creation of {} at position {position}, \
                                 which the tree does not hold",
                                space_id(&child)
                            ));
                        }
                    }
                    _ => findings.problem(format!("{about} is not a create's result")),
                }
            }
            _ => findings.problem(format!("{about} is of no known kind")),
        }
    }
    Ok(receipts)
}

/// A batch being walked.
struct Batch {
    first: u64,
    last: u64,
    create: bool,
}

/// What the entries are checked against.
struct Indexed<'a> {
    heads: &'a HashMap<Id, u64>,
    receipts: &'a Receipts,
    /// The pairs whose argument rows every entry must have.
    declared: &'a HashSet<Pair>,
}

/// Walks `entry` in key order: each journal's positions, batches,
/// predicate and argument rows and receipts.
fn entries(
    snapshot: &Snapshot,
    ns: NamespaceDb,
    indexed: &Indexed,
    findings: &mut Findings,
) -> Result<(), KvError> {
    let (heads, receipts) = (indexed.heads, indexed.receipts);
    let mut count = 0u64;
    // The journal being walked: its ID, its last position seen, its open
    // batch.
    let mut current: Option<(Id, u64, Option<Batch>)> = None;
    let mut journals_seen = HashSet::new();
    let end_journal = |journal: &(Id, u64, Option<Batch>), findings: &mut Findings| {
        let (id, seen, batch) = journal;
        let name = space_id(id);
        if let Some(batch) = batch {
            findings.problem(format!(
                "journal: {name} ends inside the batch {}..{} (at {seen})",
                batch.first, batch.last
            ));
        }
        match heads.get(id) {
            Some(head) if head == seen => {}
            Some(head) if head > seen => findings.problem(format!(
                "journal: {name} is missing positions {}..{head} (its head is {head})",
                seen + 1
            )),
            Some(head) => findings.problem(format!(
                "journal: {name} holds positions past its head {head} (through {seen})"
            )),
            None => findings.problem(format!(
                "journal: entries are stored for {name}, which has no head"
            )),
        }
    };
    for row in snapshot.table(ns, "entry")? {
        let (key, value) = row?;
        count += 1;
        let (Some(id), Some(position), 24) = (id_at(key, 0), u64_at(key, 16), key.len()) else {
            findings.problem(format!(
                "journal: an entry key {} is malformed",
                hex::encode(key)
            ));
            continue;
        };
        if current.as_ref().is_some_and(|(c, ..)| *c != id) {
            end_journal(&current.take().expect("checked"), findings);
        }
        let (_, seen, batch) = current.get_or_insert_with(|| {
            journals_seen.insert(id);
            (id, 0, None)
        });
        let name = space_id(&id);
        if position == 0 {
            findings.problem(format!("journal: {name} holds an entry at position 0"));
            continue;
        }
        if position != *seen + 1 {
            findings.problem(format!(
                "journal: {name} is missing positions {}..{}",
                *seen + 1,
                position - 1
            ));
            *batch = None;
        }
        *seen = position;
        let Some(entry) = decode_entry(value) else {
            findings.problem(format!("journal: the entry {name}@{position} is malformed"));
            *batch = None;
            continue;
        };
        match batch {
            Some(b)
                if b.first == entry.first && b.last == entry.last && b.create == entry.create => {}
            Some(b) => {
                findings.problem(format!(
                    "journal: the entry {name}@{position} names the batch {}..{}, inside the \
                     batch {}..{}",
                    entry.first, entry.last, b.first, b.last
                ));
                *batch = None;
            }
            None if entry.first == position && entry.first <= entry.last => {
                *batch = Some(Batch {
                    first: entry.first,
                    last: entry.last,
                    create: entry.create,
                });
                let receipted = if entry.create {
                    entry.last == position && receipts.creations.contains(&(id, position))
                } else {
                    receipts.batches.contains(&(id, entry.first, entry.last))
                };
                if !receipted {
                    findings.problem(format!(
                        "journal: the batch {}..{} of {name} has no receipt answering it",
                        entry.first, entry.last
                    ));
                }
            }
            None => findings.problem(format!(
                "journal: the entry {name}@{position} names the batch {}..{}, which does not \
                 start there",
                entry.first, entry.last
            )),
        }
        if batch.as_ref().is_some_and(|b| b.last == position) {
            *batch = None;
        }
        match index_keys(entry.fact) {
            Some((predicate, arguments)) => {
                let row = [&id[..], &predicate, &position.to_be_bytes()].concat();
                if snapshot.get(ns, "predicate", &row)?.is_none() {
                    findings.problem(format!(
                        "journal: the entry {name}@{position} has no predicate index row"
                    ));
                }
                for (index, value) in arguments.iter().enumerate() {
                    let Ok(index) = u16::try_from(index) else {
                        break;
                    };
                    if !indexed.declared.contains(&(predicate, index)) {
                        continue;
                    }
                    let row = [
                        &id[..],
                        &predicate,
                        &index.to_be_bytes(),
                        value,
                        &position.to_be_bytes(),
                    ]
                    .concat();
                    if snapshot.get(ns, "argument", &row)?.is_none() {
                        findings.problem(format!(
                            "journal: the entry {name}@{position} has no argument index row \
                             for argument {index}"
                        ));
                    }
                }
            }
            None => findings.problem(format!(
                "journal: the fact of {name}@{position} is not a canonical fact"
            )),
        }
        if entry.create && snapshot.get(ns, "created", key)?.is_none() {
            findings.problem(format!(
                "journal: the creation entry {name}@{position} has no creation index row"
            ));
        }
    }
    if let Some(journal) = current.take() {
        end_journal(&journal, findings);
    }
    for (id, head) in heads {
        if *head > 0 && !journals_seen.contains(id) {
            findings.problem(format!(
                "journal: {} is missing positions 1..{head} (its head is {head})",
                space_id(id)
            ));
        }
    }
    findings.count("entries", count);
    Ok(())
}

/// `child`, `created`, `predicate` and `argument` rows each name what they
/// index.
fn index_rows(
    snapshot: &Snapshot,
    ns: NamespaceDb,
    declared: &HashSet<Pair>,
    findings: &mut Findings,
) -> Result<(), KvError> {
    for row in snapshot.table(ns, "created")? {
        let (key, value) = row?;
        let entry = snapshot.get(ns, "entry", key)?.and_then(decode_entry);
        if key.len() != 24 || value.len() != 16 || !entry.is_some_and(|e| e.create) {
            findings.problem(format!(
                "journal: the creation index row {} names no creation entry",
                hex::encode(key)
            ));
        }
    }
    for row in snapshot.table(ns, "child")? {
        let (key, value) = row?;
        let named = Id::try_from(value)
            .ok()
            .map(|child| snapshot.get(ns, "space", &child))
            .transpose()?
            .flatten()
            .and_then(decode_space);
        let agrees = named.is_some_and(|child| {
            child.parent.map(|p| p.to_vec()) == key.get(..16).map(<[u8]>::to_vec)
                && child.path.last().map(String::as_bytes) == key.get(16..)
        });
        if !agrees {
            findings.problem(format!(
                "journal: the child index row {} names no space with that parent and key",
                hex::encode(key)
            ));
        }
    }
    for row in snapshot.table(ns, "predicate")? {
        let (key, _) = row?;
        let entry_key = [
            key.get(..16).unwrap_or_default(),
            key.get(32..).unwrap_or_default(),
        ]
        .concat();
        let indexed = snapshot
            .get(ns, "entry", &entry_key)?
            .and_then(decode_entry)
            .and_then(|e| index_keys(e.fact));
        if key.len() != 40 || indexed.as_ref().map(|(p, _)| &p[..]) != key.get(16..32) {
            findings.problem(format!(
                "journal: the predicate index row {} names no entry with that predicate",
                hex::encode(key)
            ));
        }
    }
    let mut arguments = 0u64;
    for row in snapshot.table(ns, "argument")? {
        let (key, _) = row?;
        arguments += 1;
        if key.len() != ARGUMENT_KEY_BYTES {
            findings.problem(format!(
                "journal: the argument index row {} is malformed",
                hex::encode(key)
            ));
            continue;
        }
        let predicate: IndexKey = key[16..32].try_into().expect("16 octets");
        let index = u16::from_be_bytes([key[32], key[33]]);
        if !declared.contains(&(predicate, index)) {
            findings.problem(format!(
                "journal: the argument index row {} is for a pair the store does not declare",
                hex::encode(key)
            ));
            continue;
        }
        let entry_key = [&key[..16], &key[50..]].concat();
        let indexed = snapshot
            .get(ns, "entry", &entry_key)?
            .and_then(decode_entry)
            .and_then(|e| index_keys(e.fact))
            .filter(|(p, _)| *p == predicate)
            .and_then(|(_, arguments)| arguments.get(usize::from(index)).copied());
        if indexed.as_ref().map(|v| &v[..]) != Some(&key[34..50]) {
            findings.problem(format!(
                "journal: the argument index row {} names no entry with that argument",
                hex::encode(key)
            ));
        }
    }
    findings.count("argument index rows", arguments);
    Ok(())
}
