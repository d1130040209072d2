//! `compose`, `query` and `explain` (HTTP.md decisions 28 to 31): a view
//! is evaluated once, when it is composed, into a retained index that the
//! readers search without evaluating again.

use super::publish::{self, Admission, Admitted};
use crate::blobs;
use crate::cursor;
use crate::facts::{self, EntryRef, Fact, Hash, RelationKind};
use crate::journal::{self, Space};
use crate::layout::{self, Position};
use crate::refusal::Refusal;
use crate::request::{ComposeRequest, ExplainRequest, Filters, QueryRequest};
use crate::views::evaluation::{self, Claim, Declared, Selected, Selection};
use crate::views::index::{self, compare_prefix, Index, Visitor};
use crate::{Call, Reply};
use base64::Engine as _;
use lab_coord_auth::{canonical_json, GrantKind};
use lab_guest::lab::platform::kv;
use serde_json::{json, Value};
use std::cmp::Ordering;
use std::collections::HashMap;

/// The record profile of a view: the one interpretation this source
/// composes.
pub const VIEW_PROFILE: &str = "coord/view/1";
/// Greatest bytes of one retained document a view reads (an envelope, a
/// payload, an index page).
const MAX_DOCUMENT: usize = 64 << 20;
/// Items a query page may inspect.
pub const INSPECTION_BUDGET: u64 = 4096;
/// The store's table of view payload hash -> index root hash: derived from
/// the retained payloads, so it can always be rebuilt.
const VIEW_INDEX_TABLE: &str = "view-index";

/// The bytes service as the index's blob store.
struct Retained;

impl index::Blobs for Retained {
    fn put(&mut self, bytes: Vec<u8>) -> Result<Hash, Refusal> {
        let retained = blobs::put(bytes).map_err(|e| e.into_refusal("bytes"))?;
        Hash::parse(&retained.name)
            .ok_or_else(|| Refusal::Unavailable("the bytes service named a page oddly".into()))
    }
    fn get(&mut self, hash: &str) -> Result<Vec<u8>, Refusal> {
        blobs::get_small(hash, MAX_DOCUMENT)
            .map_err(|e| e.into_refusal("bytes"))?
            .ok_or_else(|| {
                Refusal::Unavailable("a page of the view's index is not retained".into())
            })
    }
}

/// A body reference under the common rule ([`super::read::body_reference`]),
/// with the path of its space below the world.
fn resolve(call: &Call<'_>, entry: &EntryRef) -> Result<(Space, Vec<String>, u64), Refusal> {
    let (space, head) = super::read::body_reference(call, entry)?;
    let path = call
        .world
        .world_path(&space)
        .ok_or_else(|| Refusal::Internal("a readable space outside the world".into()))?;
    Ok((space, path, head))
}

/// Reads entries of resolved positions, a journal page at a time: the page
/// read for one position serves the positions after it in the same journal
/// (selections are often listed in journal order). Only the last page is
/// kept.
#[derive(Default)]
struct Entries {
    /// (space ID, the page's entries by position).
    page: Option<(String, Vec<Value>)>,
}

impl Entries {
    /// The entry at `entry` (within `head`): its origin and its fact, if it
    /// is one of the profile's.
    fn read(
        &mut self,
        space: &Space,
        entry: &EntryRef,
        head: u64,
        batch: u64,
    ) -> Result<(String, Option<Fact>), Refusal> {
        let cached = |page: &Option<(String, Vec<Value>)>| -> Option<Value> {
            let (space_id, entries) = page.as_ref()?;
            if *space_id != entry.space_id {
                return None;
            }
            entries
                .iter()
                .find(|e| e["ref"]["position"].as_u64() == Some(entry.position))
                .cloned()
        };
        let found = match cached(&self.page) {
            Some(found) => found,
            None => {
                let mut page = journal::read(space, entry.position - 1, Some(head), batch, None)
                    .map_err(|e| e.into_refusal("journal"))?;
                let entries = match page["entries"].take() {
                    Value::Array(entries) => entries,
                    _ => Vec::new(),
                };
                self.page = Some((entry.space_id.clone(), entries));
                cached(&self.page).ok_or_else(|| {
                    Refusal::Unavailable("the journal did not return the entry".into())
                })?
            }
        };
        let bytes = found["fact"]
            .as_str()
            .and_then(|b| base64::engine::general_purpose::STANDARD.decode(b).ok())
            .ok_or_else(|| {
                Refusal::Unavailable("the journal returned an unreadable entry".into())
            })?;
        let origin = found["origin"].as_str().unwrap_or_default().to_string();
        Ok((origin, facts::decode(&bytes).ok().flatten()))
    }
}

fn not_selectable(entry: &EntryRef) -> Refusal {
    Refusal::invalid_reference(
        "selections",
        entry.to_json(),
        "a selection is a declaration or an appended record",
    )
}

/// A declaration's claim and relations, from its retained envelope.
fn declared(fact: facts::DeclarationFact) -> Result<Declared, Refusal> {
    let unreadable =
        || Refusal::Unavailable("a selected declaration's envelope is unreadable".into());
    let envelope = blobs::get_small(&fact.envelope.to_string(), MAX_DOCUMENT)
        .map_err(|e| e.into_refusal("bytes"))?
        .ok_or_else(unreadable)?;
    let envelope: Value = serde_json::from_slice(&envelope).map_err(|_| unreadable())?;
    let statement = &envelope["statement"];
    let claim = match (&statement["property"], &statement["value"]) {
        (Value::String(property), value) if !value.is_null() => Some(Claim {
            property: property.clone(),
            value: value.clone(),
        }),
        (Value::Null, Value::Null) => None,
        _ => return Err(unreadable()),
    };
    let mut relations = Vec::new();
    for relation in statement["relations"].as_array().into_iter().flatten() {
        let kind = relation["kind"]
            .as_str()
            .and_then(RelationKind::from_name)
            .ok_or_else(unreadable)?;
        let target = EntryRef::from_json(&relation["target"]).map_err(|_| unreadable())?;
        relations.push((kind, target));
    }
    Ok(Declared {
        assertion_id: fact.assertion_id,
        publisher: fact.publisher,
        artifact: fact.artifact,
        subject: fact.subject,
        claim,
        relations,
    })
}

/// Every selection authorized, resolved and read, in order.
/// Each selection's space, path and head, keyed by (root ID, space ID).
type Resolved = HashMap<(String, String), (Space, Vec<String>, u64)>;

/// Rule 10 for every selection, in order, before anything a selection
/// holds is read: what is refused for authority never depends on it.
fn authorize_selections(call: &Call<'_>, entries: &[EntryRef]) -> Result<Resolved, Refusal> {
    let mut spaces: Resolved = HashMap::new();
    for entry in entries {
        let id = (entry.root_id.clone(), entry.space_id.clone());
        let resolved = match spaces.get(&id) {
            Some(resolved) => resolved.clone(),
            None => {
                let resolved = resolve(call, entry)?;
                spaces.insert(id, resolved.clone());
                resolved
            }
        };
        if entry.position > resolved.2 {
            return Err(Refusal::Unresolved {
                reference: entry.to_json(),
                message: "the position is beyond its journal's head".into(),
            });
        }
    }
    Ok(spaces)
}

/// Every selection's fact (and a declaration's envelope), in order.
fn read_selections(spaces: &Resolved, entries: &[EntryRef]) -> Result<Vec<Selection>, Refusal> {
    let mut selections = Vec::with_capacity(entries.len());
    let mut reader = Entries::default();
    for entry in entries {
        let (space, path, head) = &spaces[&(entry.root_id.clone(), entry.space_id.clone())];
        let (origin, fact) = reader.read(space, entry, *head, 128)?;
        let selected = match fact {
            Some(Fact::Declaration(fact)) => Selected::Declaration(declared(fact)?),
            Some(Fact::Record(record)) if origin == "append" => {
                Selected::Record(publish::record_json(&record, &entry.to_json()))
            }
            _ => return Err(not_selectable(entry)),
        };
        selections.push(Selection {
            entry: entry.clone(),
            path: path.clone(),
            selected,
        });
    }
    Ok(selections)
}

fn remember_index(payload: &Hash, root: &Hash) -> Result<(), Refusal> {
    kv::begin_write()?.commit_with(&[kv::TableWrite {
        table: VIEW_INDEX_TABLE.into(),
        key: payload.to_string().into_bytes(),
        value: root.to_string().into_bytes(),
    }])?;
    Ok(())
}

pub fn compose(call: &mut Call<'_>, request: ComposeRequest) -> Result<Reply, Refusal> {
    let publisher = call.verify(&request.path)?.principal;
    match layout::classify(&request.path) {
        Position::View => {}
        Position::Outside => {
            return Err(Refusal::invalid(
                "path",
                "a view is projects/<project>/views/<name>",
            ))
        }
        _ => return Err(Refusal::protected("`compose` writes only views")),
    }
    if request.interpretation_profile != VIEW_PROFILE {
        return Err(Refusal::invalid_record(
            "interpretation_profile",
            format!("this source composes `{VIEW_PROFILE}` views only"),
        ));
    }
    let spaces = authorize_selections(call, &request.selections)?;
    let listed: Vec<Value> = request.selections.iter().map(EntryRef::to_json).collect();
    let rules = request.rules.to_json();
    let normalized = json!({
        "operation_id": request.operation_id,
        "path": request.path,
        "selections": listed,
        "rules": rules,
        "interpretation_profile": request.interpretation_profile,
        "expected_cutoff": request.expected_cutoff,
        "metadata": request.metadata,
    });
    // Writer protocol step 1 before anything is evaluated: a replay costs
    // a search, not a second evaluation of every selection.
    if let Some(leaf) = call.world.resolve(&request.path)? {
        let earlier = publish::earlier(
            "compose",
            &leaf,
            &publisher,
            &request.operation_id,
            &normalized,
        )?;
        if let Some(earlier) = earlier {
            return Ok(composed(earlier, false));
        }
    }
    let selections = read_selections(&spaces, &request.selections)?;
    let evaluated = evaluation::evaluate(&selections, &request.rules);
    // The items hold what the index needs; the selections as read go.
    drop(selections);
    let root = index::build(
        &mut Retained,
        &evaluated.items,
        evaluated.claims,
        &evaluated.counts,
    )?;
    let payload = canonical_json(&json!({
        "selections": listed,
        "rules": rules,
        "interpretation_profile": request.interpretation_profile,
        "index": root.to_string(),
        "counts": evaluated.counts,
    }));
    remember_index(&Hash::of(&payload), &root)?;
    let create_id =
        publish::scoped_operation_id("leaf", &publisher, &request.operation_id, &request.path);
    let (leaf, created) = publish::ensure_leaf(call, &request.path, &create_id)?;
    let admitted = publish::admit(Admission {
        op: "compose",
        leaf: &leaf,
        publisher,
        operation_id: &request.operation_id,
        profile: VIEW_PROFILE,
        payload: &payload,
        metadata: &request.metadata,
        expected_cutoff: request.expected_cutoff,
        normalized,
        record_in_request: false,
    })?;
    Ok(composed(admitted, created))
}

/// The PublishResult of a compose; `created`: this call created the leaf.
fn composed(admitted: Admitted, created: bool) -> Reply {
    Reply::Json(
        if admitted.replayed { 200 } else { 201 },
        json!({
            "record": admitted.record,
            "space_created": created && !admitted.replayed,
            "replayed": admitted.replayed,
        }),
    )
}

/// The index root of the view at `view`: the reference under the common
/// rule, then a `coord/view/1` record there (else `not_found`).
fn open_view(call: &Call<'_>, view: &EntryRef) -> Result<String, Refusal> {
    let (space, _, head) = resolve(call, view)?;
    let record = match Entries::default().read(&space, view, head, 1)? {
        (origin, Some(Fact::Record(record)))
            if origin == "append" && record.profile == VIEW_PROFILE =>
        {
            record
        }
        _ => return Err(Refusal::NotFound("the occurrence is not a view".into())),
    };
    let payload = record.hash.to_string();
    let known = kv::begin_read()?.get(VIEW_INDEX_TABLE, payload.as_bytes())?;
    if let Some(root) = known.and_then(|r| String::from_utf8(r).ok()) {
        return Ok(root);
    }
    // A store that lost the row: the payload names the index.
    let unreadable = || Refusal::Unavailable("the view's record is unreadable".into());
    let bytes = blobs::get_small(&payload, MAX_DOCUMENT)
        .map_err(|e| e.into_refusal("bytes"))?
        .ok_or_else(unreadable)?;
    let document: Value = serde_json::from_slice(&bytes).map_err(|_| unreadable())?;
    let root = document["index"]
        .as_str()
        .and_then(Hash::parse)
        .ok_or_else(unreadable)?;
    remember_index(&record.hash, &root)?;
    Ok(root.to_string())
}

/// Whether the caller may read items at a path, asked once per path.
struct Readable<'c, 'a> {
    call: &'c Call<'a>,
    known: HashMap<Vec<String>, bool>,
}

impl Readable<'_, '_> {
    fn item(&mut self, item: &Value) -> bool {
        let path: Vec<String> = item["path"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|l| l.as_str().map(String::from))
            .collect();
        if let Some(known) = self.known.get(&path) {
            return *known;
        }
        let readable = self.call.authorize(GrantKind::Read, &path).is_ok();
        self.known.insert(path, readable);
        readable
    }
}

/// Whether an item matches every filter. `artifact`, `subject` and
/// `property` match claims only.
fn matches(filters: &Filters, item: &Value) -> bool {
    let claim = !item["key"].is_null();
    let publisher = if item["kind"] == "record" {
        &item["record"]["publisher"]
    } else {
        &item["publisher"]
    };
    filters.kind.as_ref().is_none_or(|k| item["kind"] == *k)
        && filters
            .artifact
            .as_ref()
            .is_none_or(|a| claim && item["artifact"]["bytes"] == *a)
        && filters.subject.as_ref().is_none_or(|s| {
            claim
                && match s {
                    None => item["subject"].is_null(),
                    Some(s) => item["subject"] == *s,
                }
        })
        && filters
            .property
            .as_ref()
            .is_none_or(|p| claim && item["property"] == *p)
        && filters.publisher.as_ref().is_none_or(|p| *publisher == *p)
        && filters.state.as_ref().is_none_or(|s| item["state"] == *s)
}

/// The key prefix the filters narrow the scan to: `artifact`, then
/// `subject`, then `property`, each only after the one before it.
fn prefix(filters: &Filters) -> Option<Vec<Value>> {
    let mut prefix = vec![json!(filters.artifact.clone()?)];
    if let Some(subject) = &filters.subject {
        prefix.push(subject.clone().map_or(Value::Null, Value::from));
        if let Some(property) = &filters.property {
            prefix.push(json!(property));
        }
    }
    Some(prefix)
}

/// The counts a query carries from page to page.
#[derive(Debug, Default, Clone, Copy)]
struct Tally {
    inspected: u64,
    matched: u64,
    withheld: u64,
    disagreeing: bool,
}

/// Why a page ended before the query did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Bound {
    Limit,
    Inspection,
}

/// One page of a query: the scan state `walk` drives.
struct Page<'f, 'r, 'c, 'a> {
    filters: &'f Filters,
    readable: &'r mut Readable<'c, 'a>,
    prefix: Option<Vec<Value>>,
    claims: u64,
    limit: u64,
    tally: Tally,
    inspected_here: u64,
    records: Vec<Value>,
    /// Where the page stopped early, and why.
    stopped: Option<(u64, Bound)>,
    finished: bool,
}

impl Visitor for Page<'_, '_, '_, '_> {
    fn wants_more(&self) -> bool {
        self.stopped.is_none() && !self.finished
    }

    fn visit(&mut self, ordinal: u64, item: &Value) -> bool {
        if let Some(prefix) = &self.prefix {
            let key = json!([item["artifact"]["bytes"], item["subject"], item["property"]]);
            if ordinal >= self.claims {
                self.finished = true;
                return false;
            }
            match compare_prefix(&key, prefix) {
                // Before the range, on the page where it starts.
                Ordering::Less => return true,
                Ordering::Equal => {}
                Ordering::Greater => {
                    self.finished = true;
                    return false;
                }
            }
        }
        let bound = if self.records.len() as u64 >= self.limit {
            Some(Bound::Limit)
        } else if self.inspected_here >= INSPECTION_BUDGET {
            Some(Bound::Inspection)
        } else {
            None
        };
        if let Some(bound) = bound {
            self.stopped = Some((ordinal, bound));
            return false;
        }
        self.inspected_here += 1;
        self.tally.inspected += 1;
        if !matches(self.filters, item) {
            return true;
        }
        self.tally.matched += 1;
        if !self.readable.item(item) {
            self.tally.withheld += 1;
            return true;
        }
        if item["key"]["status"] == "disagreeing" {
            self.tally.disagreeing = true;
        }
        self.records.push(item.clone());
        true
    }
}

/// What a query cursor binds: the view occurrence and the filters.
fn query_scope(view: &EntryRef, filters: &Filters) -> String {
    let digest = Hash::of(&canonical_json(&filters.to_json()));
    format!(
        "{}/{}/{}/{}",
        view.root_id, view.space_id, view.position, digest
    )
}

fn resume(state: &Value) -> Result<(u64, Tally), Refusal> {
    let refuse = || Refusal::InvalidCursor("not a cursor of this query".into());
    let count = |name: &str| state[name].as_u64().ok_or_else(refuse);
    Ok((
        count("next")?,
        Tally {
            inspected: count("inspected")?,
            matched: count("matched")?,
            withheld: count("withheld")?,
            disagreeing: state["disagreeing"].as_bool().ok_or_else(refuse)?,
        },
    ))
}

pub fn query(call: &mut Call<'_>, request: QueryRequest) -> Result<Reply, Refusal> {
    let root = open_view(call, &request.view)?;
    let scope = query_scope(&request.view, &request.filters);
    let key = cursor::secret()?;
    let resumed = match &request.cursor {
        Some(text) => Some(resume(&cursor::open_state(
            &key,
            cursor::QUERY,
            &scope,
            text,
        )?)?),
        None => None,
    };
    let mut blobs = Retained;
    let mut index = Index::open(&mut blobs, &root)?;
    let selections = index.root["counts"]["selections"].clone();
    let prefix = prefix(&request.filters);
    let (from, tally) = match resumed {
        Some(resumed) => resumed,
        None => (
            prefix.as_deref().map_or(0, |p| index.range_start(p)),
            Tally::default(),
        ),
    };
    let mut readable = Readable {
        call,
        known: HashMap::new(),
    };
    let mut page = Page {
        filters: &request.filters,
        readable: &mut readable,
        prefix: prefix.clone(),
        claims: index.claims(),
        limit: request.limit,
        tally,
        inspected_here: 0,
        records: Vec::new(),
        stopped: None,
        finished: false,
    };
    index.walk(from, prefix.as_deref(), &mut page)?;
    let tally = page.tally;
    let more = page.stopped;
    let records = std::mem::take(&mut page.records);
    let outcome = if tally.withheld > 0 || more.is_some() {
        "incomplete"
    } else if tally.disagreeing {
        "disagreeing"
    } else if tally.matched > 0 {
        "answered"
    } else {
        "none"
    };
    let limits: Vec<&str> = match more {
        Some((_, Bound::Limit)) => vec!["limit"],
        Some((_, Bound::Inspection)) => vec!["inspection"],
        None => Vec::new(),
    };
    let mut result = json!({
        "view": request.view.to_json(),
        "outcome": outcome,
        "records": records,
        "coverage": {
            "selections": selections,
            "inspected": tally.inspected,
            "matched": tally.matched,
            "withheld": tally.withheld,
            "complete": more.is_none(),
        },
        "limits": limits,
    });
    if let Some((next, _)) = more {
        let state = json!({
            "next": next,
            "inspected": tally.inspected,
            "matched": tally.matched,
            "withheld": tally.withheld,
            "disagreeing": tally.disagreeing,
        });
        result["next_cursor"] = json!(cursor::seal_state(&key, cursor::QUERY, &scope, state));
    }
    Ok(Reply::Json(200, result))
}

/// The other active claims of one key, with their ordinals.
struct KeyMembers<'i> {
    prefix: Vec<Value>,
    item: &'i Value,
    value: Vec<u8>,
    found: Vec<(u64, Value)>,
}

impl Visitor for KeyMembers<'_> {
    fn wants_more(&self) -> bool {
        true
    }

    fn visit(&mut self, ordinal: u64, other: &Value) -> bool {
        let key = json!([
            other["artifact"]["bytes"],
            other["subject"],
            other["property"]
        ]);
        match compare_prefix(&key, &self.prefix) {
            Ordering::Less => return true,
            Ordering::Greater => return false,
            Ordering::Equal => {}
        }
        let same_key = other["artifact"] == self.item["artifact"] && !other["key"].is_null();
        if same_key
            && other["state"] != "retired"
            && other["selection"] != self.item["selection"]
            && canonical_json(&other["value"]) != self.value
        {
            self.found.push((ordinal, other["selection"].clone()));
        }
        true
    }
}

pub fn explain(call: &mut Call<'_>, request: ExplainRequest) -> Result<Reply, Refusal> {
    let root = open_view(call, &request.view)?;
    let mut blobs = Retained;
    let mut index = Index::open(&mut blobs, &root)?;
    let ordinal = index
        .assertion(&request.assertion)?
        .ok_or_else(|| Refusal::NotFound("the assertion is not selected in this view".into()))?;
    let item = index.item(ordinal)?;
    let mut readable = Readable {
        call,
        known: HashMap::new(),
    };
    if !readable.item(&item) {
        return Err(Refusal::Denied);
    }
    let mut against: Vec<(u64, Value)> = item["against"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|a| {
            (
                a["ordinal"].as_u64().unwrap_or(u64::MAX),
                a["selection"].clone(),
            )
        })
        .collect();
    if !item["key"].is_null() {
        let prefix = vec![
            item["artifact"]["bytes"].clone(),
            item["subject"].clone(),
            item["property"].clone(),
        ];
        let start = index.range_start(&prefix);
        let mut members = KeyMembers {
            prefix: prefix.clone(),
            item: &item,
            value: canonical_json(&item["value"]),
            found: Vec::new(),
        };
        index.walk(start, Some(&prefix), &mut members)?;
        against.extend(members.found);
    }
    against.sort_by_key(|(o, _)| *o);
    let mut disagreeing: Vec<Value> = Vec::new();
    for (_, selection) in against {
        if !disagreeing.contains(&selection) {
            disagreeing.push(selection);
        }
    }
    let adopted_by = if item["state"] == "adopted" || item["state"] == "agreeing" {
        item["selection"].clone()
    } else {
        Value::Null
    };
    Ok(Reply::Json(
        200,
        json!({
            "view": request.view.to_json(),
            "assertion": request.assertion,
            "defined_by": item["selection"],
            "adopted_by": adopted_by,
            "disagreeing": disagreeing,
            "record": item,
        }),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn claim_item() -> Value {
        json!({
            "kind": "declaration", "state": "adopted", "publisher": "ed25519:p",
            "artifact": {"bytes": "sha256:a", "type": "sha256:t"},
            "subject": null, "property": "license", "value": "MIT",
            "key": {"status": "agreed", "value": "MIT", "adopted_by": null},
        })
    }

    #[test]
    fn filters_match_exactly_and_claims_only_by_key() {
        let claim = claim_item();
        let mut relation = claim_item();
        relation["key"] = Value::Null;
        relation["property"] = Value::Null;
        relation["state"] = json!("relation");
        let record =
            json!({"kind": "record", "state": "record", "record": {"publisher": "ed25519:p"}});
        let f = |filters: Filters| {
            [&claim, &relation, &record]
                .iter()
                .map(|i| matches(&filters, i))
                .collect::<Vec<_>>()
        };
        assert_eq!(f(Filters::default()), [true, true, true]);
        let artifact = Filters {
            artifact: Some("sha256:a".into()),
            ..Filters::default()
        };
        assert_eq!(f(artifact), [true, false, false]);
        let no_subject = Filters {
            subject: Some(None),
            ..Filters::default()
        };
        assert_eq!(f(no_subject), [true, false, false]);
        let subject = Filters {
            subject: Some(Some("x#y".into())),
            ..Filters::default()
        };
        assert_eq!(f(subject), [false, false, false]);
        let publisher = Filters {
            publisher: Some("ed25519:p".into()),
            ..Filters::default()
        };
        assert_eq!(f(publisher), [true, true, true]);
        let state = Filters {
            state: Some("record".into()),
            kind: Some("record".into()),
            ..Filters::default()
        };
        assert_eq!(f(state), [false, false, true]);
    }

    #[test]
    fn only_a_leading_artifact_narrows_the_scan() {
        let p = |filters: Filters| prefix(&filters);
        assert_eq!(p(Filters::default()), None);
        let subject_alone = Filters {
            subject: Some(None),
            property: Some("license".into()),
            ..Filters::default()
        };
        assert_eq!(p(subject_alone), None);
        let artifact_and_property = Filters {
            artifact: Some("sha256:a".into()),
            property: Some("license".into()),
            ..Filters::default()
        };
        assert_eq!(p(artifact_and_property), Some(vec![json!("sha256:a")]));
        let all = Filters {
            artifact: Some("sha256:a".into()),
            subject: Some(None),
            property: Some("license".into()),
            ..Filters::default()
        };
        assert_eq!(
            p(all),
            Some(vec![json!("sha256:a"), Value::Null, json!("license")])
        );
    }

    #[test]
    fn a_query_cursor_binds_the_view_and_the_filters() {
        let view = EntryRef {
            root_id: format!("rt_{}", "a".repeat(32)),
            space_id: format!("spc_{}", "b".repeat(32)),
            position: 3,
        };
        let later = EntryRef {
            position: 4,
            ..view.clone()
        };
        let none = Filters::default();
        let records = Filters {
            kind: Some("record".into()),
            ..Filters::default()
        };
        let scope = query_scope(&view, &none);
        assert_ne!(scope, query_scope(&later, &none));
        assert_ne!(scope, query_scope(&view, &records));
        let key = [1u8; 32];
        let state =
            json!({"next": 7, "inspected": 7, "matched": 2, "withheld": 1, "disagreeing": true});
        let sealed = cursor::seal_state(&key, cursor::QUERY, &scope, state);
        let opened = cursor::open_state(&key, cursor::QUERY, &scope, &sealed).unwrap();
        let (next, tally) = resume(&opened).unwrap();
        assert_eq!(
            (next, tally.matched, tally.withheld, tally.disagreeing),
            (7, 2, 1, true)
        );
        for other in [query_scope(&later, &none), query_scope(&view, &records)] {
            let refused = cursor::open_state(&key, cursor::QUERY, &other, &sealed).unwrap_err();
            assert_eq!(refused.code(), "invalid_cursor");
        }
        let export = cursor::open_state(&key, cursor::EXPORT, &scope, &sealed).unwrap_err();
        assert_eq!(export.code(), "invalid_cursor");
    }
}
