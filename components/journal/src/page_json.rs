//! The JSON text of `read`, `query`, `children`, `head` and `append`
//! answers, and of an append's normalized request, written straight into
//! their buffers instead of through a `serde_json::Value` tree.
//!
//! Invariant: every document written here is byte for byte what
//! `serde_json::to_vec` writes for the same document as a `Value` (members
//! in key order, compact, strings escaped as serde_json escapes them); the
//! tests below hold each writer to that.

use crate::ids::{RootId, SpaceId};
use crate::manifest::{Listed, Manifest};
use crate::store::EntryRecord;
use base64::engine::general_purpose::STANDARD;
use base64::Engine as _;

/// A page's entries as a JSON array, then the rest of its answer.
pub struct PageJson {
    out: Vec<u8>,
    entries: usize,
}

/// `"root_id":"…","space_id":"…"}` of one space: the tail shared by every
/// entry reference in it. Identifiers are a prefix and lowercase hex, so
/// they need no escaping.
pub struct SpaceTail(Vec<u8>);

impl SpaceTail {
    pub fn new(root: RootId, space: SpaceId) -> SpaceTail {
        let mut tail = Vec::with_capacity(96);
        space_ref_members(&mut tail, root, space);
        tail.push(b'}');
        SpaceTail(tail)
    }
}

/// `"root_id":"…","space_id":"…"`.
fn space_ref_members(out: &mut Vec<u8>, root: RootId, space: SpaceId) {
    out.extend_from_slice(b"\"root_id\":\"");
    root.write_to(out);
    out.extend_from_slice(b"\",\"space_id\":\"");
    space.write_to(out);
    out.push(b'"');
}

/// `n` in decimal, as serde_json writes an unsigned integer.
pub fn decimal(out: &mut Vec<u8>, mut n: u64) {
    let mut digits = [0u8; 20];
    let mut at = digits.len();
    loop {
        at -= 1;
        digits[at] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    out.extend_from_slice(&digits[at..]);
}

impl PageJson {
    /// Opens the answer at its `entries` member, the first in key order of
    /// both `read` and `query` answers.
    pub fn open() -> PageJson {
        let mut out = Vec::new();
        out.extend_from_slice(b"{\"entries\":[");
        PageJson { out, entries: 0 }
    }

    /// Makes room for `records` of one space, so that a page's buffer is
    /// allocated about once instead of doubling as it is written: an
    /// entry takes at most its fixed members, three decimals of 20 digits,
    /// its base64 fact and the space's tail.
    pub fn reserve<'a>(
        &mut self,
        tail: &SpaceTail,
        records: impl Iterator<Item = &'a EntryRecord>,
    ) {
        const FIXED: usize = 96 + 3 * 20;
        let bytes: usize = records
            .map(|record| FIXED + tail.0.len() + record.fact.len().div_ceil(3) * 4)
            .sum();
        // The closing members of either answer, the echoed snapshot aside.
        self.out.reserve(bytes + 256);
    }

    /// One entry: `{batch: {first, last}, fact, origin, ref: {position,
    /// root_id, space_id}}`, the fact in standard padded base64.
    pub fn entry(&mut self, tail: &SpaceTail, position: u64, record: &EntryRecord) {
        let out = &mut self.out;
        if self.entries > 0 {
            out.push(b',');
        }
        self.entries += 1;
        out.extend_from_slice(b"{\"batch\":{\"first\":");
        decimal(out, record.first);
        out.extend_from_slice(b",\"last\":");
        decimal(out, record.last);
        out.extend_from_slice(b"},\"fact\":");
        base64_string(out, &record.fact);
        out.extend_from_slice(b",\"origin\":\"");
        out.extend_from_slice(record.origin.as_str().as_bytes());
        out.extend_from_slice(b"\",\"ref\":{\"position\":");
        decimal(out, position);
        out.push(b',');
        out.extend_from_slice(&tail.0);
        out.push(b'}');
    }

    /// Closes a `read` answer: `next_after` (when the page did not reach
    /// `through`), `scanned_through`, `space`, `through`.
    pub fn finish_read(
        mut self,
        space: &SpaceTail,
        through: u64,
        scanned_through: u64,
        next_after: Option<u64>,
    ) -> Vec<u8> {
        let out = &mut self.out;
        out.push(b']');
        if let Some(next) = next_after {
            out.extend_from_slice(b",\"next_after\":");
            decimal(out, next);
        }
        out.extend_from_slice(b",\"scanned_through\":");
        decimal(out, scanned_through);
        out.extend_from_slice(b",\"space\":{");
        out.extend_from_slice(&space.0);
        out.extend_from_slice(b",\"through\":");
        decimal(out, through);
        out.push(b'}');
        self.out
    }

    /// Closes a `query` answer: `next_cursor` (when there is more), then
    /// `snapshot`, the manifest's normalized document.
    pub fn finish_query(mut self, manifest: &Manifest, next_cursor: Option<&str>) -> Vec<u8> {
        let out = &mut self.out;
        out.push(b']');
        if let Some(cursor) = next_cursor {
            out.extend_from_slice(b",\"next_cursor\":");
            string(out, cursor);
        }
        out.extend_from_slice(b",\"snapshot\":{\"max_depth\":");
        decimal(out, manifest.max_depth);
        out.extend_from_slice(b",\"scope\":{");
        space_ref_members(out, manifest.scope.root, manifest.scope.space);
        out.extend_from_slice(b"},\"spaces\":");
        array(out, &manifest.spaces, listed_json);
        out.extend_from_slice(b"}}");
        self.out
    }
}

/// A `children` answer: its children as a JSON array, then the rest.
pub struct ChildrenJson {
    out: Vec<u8>,
    children: usize,
}

impl ChildrenJson {
    /// Opens the answer at its `children` member, the first in key order.
    pub fn open() -> ChildrenJson {
        let mut out = Vec::with_capacity(8 << 10);
        out.extend_from_slice(b"{\"children\":[");
        ChildrenJson { out, children: 0 }
    }

    /// One child: `{created_at: {position, root_id, space_id}, key, space:
    /// {path, root_id, space_id}}`, where `created_at` is the creation
    /// entry at `position` in `parent` and `key` the path's last key.
    pub fn child(
        &mut self,
        root: RootId,
        parent: SpaceId,
        position: u64,
        child: SpaceId,
        path: &[String],
    ) {
        let out = &mut self.out;
        if self.children > 0 {
            out.push(b',');
        }
        self.children += 1;
        out.extend_from_slice(b"{\"created_at\":{\"position\":");
        decimal(out, position);
        out.push(b',');
        space_ref_members(out, root, parent);
        out.extend_from_slice(b"},\"key\":");
        string(out, path.last().map_or("", String::as_str));
        out.extend_from_slice(b",\"space\":{\"path\":");
        array(out, path, |out, key| string(out, key));
        out.push(b',');
        space_ref_members(out, root, child);
        out.extend_from_slice(b"}}");
    }

    /// Closes the answer: `next_cursor` (when there is more), `space`,
    /// `through`.
    pub fn finish(
        mut self,
        root: RootId,
        space: SpaceId,
        through: u64,
        next_cursor: Option<&str>,
    ) -> Vec<u8> {
        let out = &mut self.out;
        out.push(b']');
        if let Some(cursor) = next_cursor {
            out.extend_from_slice(b",\"next_cursor\":");
            string(out, cursor);
        }
        out.extend_from_slice(b",\"space\":{");
        space_ref_members(out, root, space);
        out.extend_from_slice(b"},\"through\":");
        decimal(out, through);
        out.push(b'}');
        self.out
    }
}

/// A `head` answer: `{cutoff, space: {root_id, space_id}}`.
pub fn head(root: RootId, space: SpaceId, cutoff: u64) -> Vec<u8> {
    let mut out = Vec::with_capacity(128);
    out.extend_from_slice(b"{\"cutoff\":");
    decimal(&mut out, cutoff);
    out.extend_from_slice(b",\"space\":{");
    space_ref_members(&mut out, root, space);
    out.extend_from_slice(b"}}");
    out
}

/// An append's normalized request, the text its receipt's digest is of:
/// `{expected_cutoff, facts, space: {root_id, space_id}}`, each fact in
/// standard padded base64, an absent precondition `null`.
pub fn append_request(
    root: RootId,
    space: SpaceId,
    facts: &[Vec<u8>],
    expected_cutoff: Option<u64>,
) -> Vec<u8> {
    let encoded: usize = facts.iter().map(|f| f.len().div_ceil(3) * 4 + 3).sum();
    let mut out = Vec::with_capacity(encoded + 160);
    out.extend_from_slice(b"{\"expected_cutoff\":");
    match expected_cutoff {
        Some(cutoff) => decimal(&mut out, cutoff),
        None => out.extend_from_slice(b"null"),
    }
    out.extend_from_slice(b",\"facts\":");
    array(&mut out, facts, |out, fact| base64_string(out, fact));
    out.extend_from_slice(b",\"space\":{");
    space_ref_members(&mut out, root, space);
    out.extend_from_slice(b"}}");
    out
}

/// An `append` answer: `{cutoff, first, last, replayed, space: {root_id,
/// space_id}}`, the cutoff the batch's last position.
pub fn appended(root: RootId, space: SpaceId, first: u64, last: u64, replayed: bool) -> Vec<u8> {
    let (template, at) = appended_template(root, space, replayed);
    let mut out = Vec::with_capacity(template.len() + 60);
    out.extend_from_slice(&template[..at.cutoff]);
    decimal(&mut out, last);
    out.extend_from_slice(&template[at.cutoff..at.first]);
    decimal(&mut out, first);
    out.extend_from_slice(&template[at.first..at.last]);
    decimal(&mut out, last);
    out.extend_from_slice(&template[at.last..]);
    out
}

/// Where an [`appended_template`] takes its numbers, in order.
pub struct AppendedAt {
    pub cutoff: usize,
    pub first: usize,
    pub last: usize,
}

/// An `append` answer with its cutoff, first and last positions left out,
/// and where each goes.
pub fn appended_template(root: RootId, space: SpaceId, replayed: bool) -> (Vec<u8>, AppendedAt) {
    let mut out = Vec::with_capacity(128);
    out.extend_from_slice(b"{\"cutoff\":");
    let cutoff = out.len();
    out.extend_from_slice(b",\"first\":");
    let first = out.len();
    out.extend_from_slice(b",\"last\":");
    let last = out.len();
    out.extend_from_slice(if replayed {
        b",\"replayed\":true,\"space\":{"
    } else {
        b",\"replayed\":false,\"space\":{"
    });
    space_ref_members(&mut out, root, space);
    out.extend_from_slice(b"}}");
    (
        out,
        AppendedAt {
            cutoff,
            first,
            last,
        },
    )
}

/// `bytes` as a JSON string of their standard padded base64, which needs
/// no escaping.
fn base64_string(out: &mut Vec<u8>, bytes: &[u8]) {
    out.push(b'"');
    let at = out.len();
    let encoded = bytes.len().div_ceil(3) * 4;
    out.resize(at + encoded, 0);
    let written = STANDARD
        .encode_slice(bytes, &mut out[at..])
        .expect("the buffer holds the padded encoding");
    debug_assert_eq!(written, encoded);
    out.push(b'"');
}

/// `{space: {path, root_id, space_id}, through}`.
fn listed_json(out: &mut Vec<u8>, listed: &Listed) {
    out.extend_from_slice(b"{\"space\":{\"path\":");
    array(out, &listed.path, |out, key| string(out, key));
    out.push(b',');
    space_ref_members(out, listed.root, listed.space);
    out.extend_from_slice(b"},\"through\":");
    decimal(out, listed.through);
    out.push(b'}');
}

/// `[item, …]`, each item written by `each`.
fn array<T>(out: &mut Vec<u8>, items: &[T], each: impl Fn(&mut Vec<u8>, &T)) {
    out.push(b'[');
    for (i, item) in items.iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        each(out, item);
    }
    out.push(b']');
}

/// A JSON string literal as serde_json writes it.
fn string(out: &mut Vec<u8>, text: &str) {
    serde_json::to_writer(out, text).expect("writing to a Vec cannot fail");
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::filter::Origin;
    use crate::requests::SpaceRef;
    use serde_json::{json, Value};

    fn root() -> RootId {
        RootId([0xab; 16])
    }

    fn space(n: u8) -> SpaceId {
        SpaceId([n; 16])
    }

    fn record(origin: Origin, first: u64, last: u64, fact: &[u8]) -> EntryRecord {
        EntryRecord {
            origin,
            first,
            last,
            fact: fact.to_vec(),
        }
    }

    fn entry_value(space: SpaceId, position: u64, record: &EntryRecord) -> Value {
        json!({
            "ref": {"root_id": root().to_string(), "space_id": space.to_string(), "position": position},
            "fact": STANDARD.encode(&record.fact),
            "origin": record.origin.as_str(),
            "batch": {"first": record.first, "last": record.last},
        })
    }

    fn records() -> Vec<(u64, EntryRecord)> {
        vec![
            (1, record(Origin::Create, 1, 1, b"")),
            (2, record(Origin::Append, 2, 4, b"a")),
            (3, record(Origin::Append, 2, 4, b"ab")),
            (4, record(Origin::Append, 2, 4, &[0xff, 0, 0xfe, 1])),
            (u64::MAX >> 11, record(Origin::Append, 7, 9, &[7; 300])),
        ]
    }

    #[test]
    fn decimals_are_what_serde_json_writes() {
        for n in [
            0,
            1,
            9,
            10,
            99,
            100,
            12345,
            u64::MAX >> 11,
            u64::MAX - 1,
            u64::MAX,
        ] {
            let mut out = b"x".to_vec();
            decimal(&mut out, n);
            assert_eq!(
                out,
                format!("x{}", serde_json::to_string(&n).unwrap()).as_bytes()
            );
        }
    }

    #[test]
    fn a_read_answer_is_what_serde_json_writes() {
        let s = space(3);
        let tail = SpaceTail::new(root(), s);
        for (count, next) in [(0, None), (1, Some(1)), (5, None), (5, Some(99))] {
            let mut page = PageJson::open();
            page.reserve(&tail, records().iter().take(count).map(|(_, r)| r));
            let reserved = page.out.capacity();
            let mut values = Vec::new();
            for (position, record) in records().iter().take(count) {
                page.entry(&tail, *position, record);
                values.push(entry_value(s, *position, record));
            }
            let mut expected = json!({
                "space": {"root_id": root().to_string(), "space_id": s.to_string()},
                "through": 120,
                "entries": values,
                "scanned_through": 110,
            });
            if let Some(next) = next {
                expected["next_after"] = Value::from(next);
            }
            let written = page.finish_read(&tail, 120, 110, next);
            assert_eq!(
                written.capacity(),
                reserved,
                "the page fits what it reserved"
            );
            assert_eq!(
                String::from_utf8(written).unwrap(),
                serde_json::to_string(&expected).unwrap()
            );
        }
    }

    #[test]
    fn a_head_answer_is_what_serde_json_writes() {
        for cutoff in [0, 7, u64::MAX >> 11] {
            // The document the operation built before, as it built it.
            let expected = json!({
                "space": {"root_id": root().to_string(), "space_id": space(9).to_string()},
                "cutoff": cutoff,
            });
            assert_eq!(
                String::from_utf8(head(root(), space(9), cutoff)).unwrap(),
                serde_json::to_string(&expected).unwrap()
            );
        }
    }

    #[test]
    fn an_append_request_is_what_serde_json_writes() {
        let facts = [
            b"".to_vec(),
            b"a".to_vec(),
            vec![0xfb, 0xff, 0xbf],
            vec![7; 301],
        ];
        for (facts, expected_cutoff) in [
            (&facts[..1], None),
            (&facts[..], Some(0)),
            (&facts[2..], Some(u64::MAX >> 11)),
        ] {
            // The document the operation digested before, as it built it.
            let texts: Vec<String> = facts.iter().map(|f| STANDARD.encode(f)).collect();
            let expected = json!({
                "space": {"root_id": root().to_string(), "space_id": space(3).to_string()},
                "facts": texts,
                "expected_cutoff": expected_cutoff,
            });
            assert_eq!(
                String::from_utf8(append_request(root(), space(3), facts, expected_cutoff))
                    .unwrap(),
                serde_json::to_string(&expected).unwrap()
            );
        }
    }

    #[test]
    fn an_append_answer_is_what_serde_json_writes() {
        for (first, last, replayed) in [
            (1, 1, false),
            (2, 129, true),
            (u64::MAX >> 11, u64::MAX >> 11, false),
        ] {
            // The document the operation built before, as it built it.
            let expected = json!({
                "space": {"root_id": root().to_string(), "space_id": space(4).to_string()},
                "first": first,
                "last": last,
                "cutoff": last,
                "replayed": replayed,
            });
            assert_eq!(
                String::from_utf8(appended(root(), space(4), first, last, replayed)).unwrap(),
                serde_json::to_string(&expected).unwrap()
            );
        }
    }

    #[test]
    fn a_children_answer_is_what_serde_json_writes() {
        let (parent, through) = (space(1), 77);
        let children: Vec<(u64, SpaceId, Vec<String>)> = vec![
            (2, space(2), vec!["s".into(), "a".into()]),
            (
                3,
                space(3),
                vec!["s".into(), "q\"\\\u{1}é\u{2028}\u{7f}".into()],
            ),
            (u64::MAX >> 11, space(4), vec!["k".repeat(300)]),
            (9, space(5), vec![]),
        ];
        for (count, cursor) in [(0, None), (1, Some("c.ab-_")), (4, None), (4, Some("x"))] {
            let mut page = ChildrenJson::open();
            let mut values = Vec::new();
            for (position, child, path) in children.iter().take(count) {
                page.child(root(), parent, *position, *child, path);
                // The document the operation built before, as it built it.
                values.push(json!({
                    "key": path.last().cloned().unwrap_or_default(),
                    "space": {"root_id": root().to_string(), "space_id": child.to_string(), "path": path},
                    "created_at": {"root_id": root().to_string(), "space_id": parent.to_string(), "position": position},
                }));
            }
            let mut expected = json!({
                "space": {"root_id": root().to_string(), "space_id": parent.to_string()},
                "through": through,
                "children": values,
            });
            if let Some(cursor) = cursor {
                expected["next_cursor"] = Value::String(cursor.into());
            }
            let written = page.finish(root(), parent, through, cursor);
            assert_eq!(
                String::from_utf8(written).unwrap(),
                serde_json::to_string(&expected).unwrap()
            );
        }
    }

    #[test]
    fn a_query_answer_is_what_serde_json_writes() {
        let manifest = Manifest {
            scope: SpaceRef {
                root: root(),
                space: space(1),
            },
            max_depth: 9,
            spaces: vec![
                Listed {
                    root: root(),
                    space: space(1),
                    path: vec!["s".into()],
                    through: 4,
                },
                Listed {
                    root: root(),
                    space: space(2),
                    path: vec!["s".into(), "q\"\\\u{1}é\u{2028}".into()],
                    through: 0,
                },
            ],
        };
        for cursor in [None, Some("c.ab-_")] {
            let mut page = PageJson::open();
            let mut values = Vec::new();
            for (i, (position, record)) in records().iter().enumerate() {
                let s = space(1 + (i % 2) as u8);
                page.entry(&SpaceTail::new(root(), s), *position, record);
                values.push(entry_value(s, *position, record));
            }
            let mut expected = json!({
                "snapshot": manifest.normalized_json(),
                "entries": values,
            });
            if let Some(cursor) = cursor {
                expected["next_cursor"] = Value::from(cursor);
            }
            let written = page.finish_query(&manifest, cursor);
            assert_eq!(
                String::from_utf8(written).unwrap(),
                serde_json::to_string(&expected).unwrap()
            );
        }
    }
}
