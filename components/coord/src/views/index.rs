//! The view index (HTTP.md decision 29): retained blobs, built once by
//! `compose` before its record is appended and named by the record's
//! payload, read back by `query` and `explain`.
//!
//! Three kinds of blob, each RFC 8785 JSON:
//! - an item page: `{"purpose": "coord.view-items.v1", "first": <ordinal
//!   of its first item>, "items": [...]}`, at most [`PAGE_ITEMS`] items;
//! - an assertion page: `{"purpose": "coord.view-assertions.v1", "rows":
//!   [[assertion_id, ordinal], ...]}` sorted, at most [`PAGE_ITEMS`] rows;
//! - the root: `{"purpose": "coord.view-index.v1", "items", "claims",
//!   "counts", "pages": [{"page", "first", "count", "first_key",
//!   "last_key"}], "assertions": [{"page", "first"}]}`, where a key is
//!   `[artifact bytes, subject, property]` of a claim item (null for a
//!   page without claims at that end).
//!
//! Invariants:
//! 1. Items are in query order ([`super::evaluation`]); the first `claims`
//!    are claims, so a key prefix selects a contiguous ordinal range.
//! 2. A search reads the root and then only the pages holding the items
//!    it visits: by ordinal for a resumed scan, by `last_key`/`first_key`
//!    for a key range, by assertion ID through one assertion page.

use crate::facts::Hash;
use crate::refusal::Refusal;
use lab_coord_auth::canonical_json;
use serde_json::{json, Value};
use std::cmp::Ordering;

/// Greatest number of items (or assertion rows) in one page.
pub const PAGE_ITEMS: usize = 128;

/// Where the index's blobs are kept: the bytes service, or a map in tests.
pub trait Blobs {
    fn put(&mut self, bytes: Vec<u8>) -> Result<Hash, Refusal>;
    fn get(&mut self, hash: &str) -> Result<Vec<u8>, Refusal>;
}

/// The claim key prefix of an item: `[bytes, subject, property]`.
pub fn item_key(item: &Value) -> Value {
    json!([item["artifact"]["bytes"], item["subject"], item["property"]])
}

/// Compares the first `prefix.len()` components of `key` with `prefix`;
/// a null subject sorts before every text.
pub fn compare_prefix(key: &Value, prefix: &[Value]) -> Ordering {
    for (i, wanted) in prefix.iter().enumerate() {
        let have = &key[i];
        let order = match (have, wanted) {
            (Value::Null, Value::Null) => Ordering::Equal,
            (Value::Null, _) => Ordering::Less,
            (_, Value::Null) => Ordering::Greater,
            (a, b) => a.as_str().unwrap_or("").cmp(b.as_str().unwrap_or("")),
        };
        if order != Ordering::Equal {
            return order;
        }
    }
    Ordering::Equal
}

/// Builds and retains the index of `items` (of which the first `claims`
/// are claims); returns the root's hash.
pub fn build(
    blobs: &mut dyn Blobs,
    items: &[Value],
    claims: usize,
    counts: &Value,
) -> Result<Hash, Refusal> {
    let mut pages = Vec::new();
    for (n, chunk) in items.chunks(PAGE_ITEMS).enumerate() {
        let first = n * PAGE_ITEMS;
        let page = json!({ "purpose": "coord.view-items.v1", "first": first, "items": chunk });
        let hash = blobs.put(canonical_json(&page))?;
        let last = first + chunk.len() - 1;
        let key_at = |o: usize| {
            if o < claims {
                item_key(&items[o])
            } else {
                Value::Null
            }
        };
        pages.push(json!({
            "page": hash.to_string(),
            "first": first,
            "count": chunk.len(),
            "first_key": key_at(first),
            "last_key": key_at(last),
        }));
    }
    let mut rows: Vec<(String, usize)> = items
        .iter()
        .enumerate()
        .filter_map(|(o, item)| item["assertion_id"].as_str().map(|a| (a.to_string(), o)))
        .collect();
    rows.sort();
    let mut assertions = Vec::new();
    for chunk in rows.chunks(PAGE_ITEMS) {
        let page = json!({ "purpose": "coord.view-assertions.v1", "rows": chunk });
        let hash = blobs.put(canonical_json(&page))?;
        assertions.push(json!({ "page": hash.to_string(), "first": chunk[0].0 }));
    }
    let root = json!({
        "purpose": "coord.view-index.v1",
        "items": items.len(),
        "claims": claims,
        "counts": counts,
        "pages": pages,
        "assertions": assertions,
    });
    blobs.put(canonical_json(&root))
}

/// What a walk over the items does with each: `wants_more` is asked
/// before a page is read, `visit` for each item, which ends the walk by
/// answering false.
pub trait Visitor {
    fn wants_more(&self) -> bool;
    fn visit(&mut self, ordinal: u64, item: &Value) -> bool;
}

/// An opened index: its root, read once, and the blobs it reads pages
/// from.
pub struct Index<'b> {
    blobs: &'b mut dyn Blobs,
    pub root: Value,
}

fn malformed() -> Refusal {
    Refusal::Unavailable("the view's index is malformed".into())
}

impl<'b> Index<'b> {
    pub fn open(blobs: &'b mut dyn Blobs, root: &str) -> Result<Index<'b>, Refusal> {
        let root: Value = serde_json::from_slice(&blobs.get(root)?).map_err(|_| malformed())?;
        if root["purpose"] != "coord.view-index.v1" || !root["pages"].is_array() {
            return Err(malformed());
        }
        Ok(Index { blobs, root })
    }

    pub fn items(&self) -> u64 {
        self.root["items"].as_u64().unwrap_or(0)
    }

    pub fn claims(&self) -> u64 {
        self.root["claims"].as_u64().unwrap_or(0)
    }

    fn pages(&self) -> &[Value] {
        self.root["pages"].as_array().map_or(&[], Vec::as_slice)
    }

    fn read(&mut self, hash: &Value) -> Result<Value, Refusal> {
        let hash = hash.as_str().ok_or_else(malformed)?;
        serde_json::from_slice(&self.blobs.get(hash)?).map_err(|_| malformed())
    }

    /// The items of the page holding `ordinal`, with that page's first
    /// ordinal.
    fn page_of(&mut self, ordinal: u64) -> Result<Option<(u64, Vec<Value>)>, Refusal> {
        let pages = self.pages();
        let at = pages.partition_point(|p| p["first"].as_u64().unwrap_or(0) <= ordinal);
        let Some(page) = at.checked_sub(1).map(|i| pages[i].clone()) else {
            return Ok(None);
        };
        let first = page["first"].as_u64().ok_or_else(malformed)?;
        if ordinal >= first + page["count"].as_u64().ok_or_else(malformed)? {
            return Ok(None);
        }
        let mut body = self.read(&page["page"])?;
        match body["items"].take() {
            Value::Array(items) => Ok(Some((first, items))),
            _ => Err(malformed()),
        }
    }

    /// The first ordinal of the claims whose key starts with `prefix`, found
    /// from the root alone (where the range would start when it is empty).
    pub fn range_start(&self, prefix: &[Value]) -> u64 {
        let claims = self.claims();
        let pages = self.pages();
        let i = pages.partition_point(|p| {
            p["first"].as_u64().unwrap_or(0) < claims
                && !p["last_key"].is_null()
                && compare_prefix(&p["last_key"], prefix) == Ordering::Less
        });
        pages
            .get(i)
            .and_then(|p| p["first"].as_u64())
            .unwrap_or(claims)
            .min(claims)
    }

    /// Whether no claim at or after the page starting at `first` can start
    /// with `prefix` (from the root alone).
    fn beyond(&self, first: u64, prefix: &[Value]) -> bool {
        if first >= self.claims() {
            return true;
        }
        self.pages()
            .iter()
            .find(|p| p["first"].as_u64() == Some(first))
            .is_some_and(|p| compare_prefix(&p["first_key"], prefix) == Ordering::Greater)
    }

    /// Visits items from `from` in order, page by page, while the visitor
    /// wants more. With `within`, stops before reading a page whose claims
    /// all lie beyond that key prefix.
    pub fn walk(
        &mut self,
        from: u64,
        within: Option<&[Value]>,
        visitor: &mut dyn Visitor,
    ) -> Result<(), Refusal> {
        let mut ordinal = from;
        while ordinal < self.items() && visitor.wants_more() {
            let Some((first, items)) = self.page_of(ordinal)? else {
                return Err(malformed());
            };
            for (i, item) in items.iter().enumerate().skip((ordinal - first) as usize) {
                if !visitor.visit(first + i as u64, item) {
                    return Ok(());
                }
            }
            ordinal = first + items.len() as u64;
            if within.is_some_and(|prefix| self.beyond(ordinal, prefix)) {
                return Ok(());
            }
        }
        Ok(())
    }

    /// The item at `ordinal`.
    pub fn item(&mut self, ordinal: u64) -> Result<Value, Refusal> {
        let (first, mut items) = self.page_of(ordinal)?.ok_or_else(malformed)?;
        Ok(items.swap_remove((ordinal - first) as usize))
    }

    /// The ordinal of the item of `assertion_id`, through one assertion
    /// page.
    pub fn assertion(&mut self, assertion_id: &str) -> Result<Option<u64>, Refusal> {
        let table = self.root["assertions"]
            .as_array()
            .map_or(&[][..], Vec::as_slice);
        let at = table.partition_point(|p| p["first"].as_str().unwrap_or("") <= assertion_id);
        let Some(page) = at.checked_sub(1).map(|i| table[i]["page"].clone()) else {
            return Ok(None);
        };
        let page = self.read(&page)?;
        let rows = page["rows"].as_array().ok_or_else(malformed)?;
        let at = rows.partition_point(|r| r[0].as_str().unwrap_or("") < assertion_id);
        Ok(rows
            .get(at)
            .filter(|r| r[0] == assertion_id)
            .and_then(|r| r[1].as_u64()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::views::evaluation::tests::claim;
    use crate::views::evaluation::{evaluate, Conflict, Rules};
    use std::collections::HashMap;

    /// A closure as a visitor that always wants more.
    struct Each<F>(F);

    impl<F: FnMut(u64, &Value) -> bool> Visitor for Each<F> {
        fn wants_more(&self) -> bool {
            true
        }
        fn visit(&mut self, ordinal: u64, item: &Value) -> bool {
            (self.0)(ordinal, item)
        }
    }

    /// Blobs in memory, counting reads.
    #[derive(Default)]
    struct Memory {
        blobs: HashMap<String, Vec<u8>>,
        reads: usize,
    }

    impl Blobs for Memory {
        fn put(&mut self, bytes: Vec<u8>) -> Result<Hash, Refusal> {
            let hash = Hash::of(&bytes);
            self.blobs.insert(hash.to_string(), bytes);
            Ok(hash)
        }
        fn get(&mut self, hash: &str) -> Result<Vec<u8>, Refusal> {
            self.reads += 1;
            self.blobs.get(hash).cloned().ok_or_else(malformed)
        }
    }

    /// 1,000 claims over 10 artifacts, 10 subjects, 10 properties.
    fn large() -> (Memory, String, Vec<Value>) {
        let selections: Vec<_> = (0..1000u64)
            .map(|n| {
                let subject = format!("s#{}", n / 10 % 10);
                claim(
                    n + 1,
                    "p",
                    (n % 10) as u8,
                    Some(&subject),
                    &format!("prop{}", n / 100),
                    json!(n),
                )
            })
            .collect();
        let rules = Rules {
            conflict: Conflict::Disagree,
            honor_relations: true,
        };
        let e = evaluate(&selections, &rules);
        let mut memory = Memory::default();
        let root = build(&mut memory, &e.items, e.claims, &e.counts).unwrap();
        (memory, root.to_string(), e.items)
    }

    #[test]
    fn a_resumed_scan_reads_the_root_and_its_own_pages() {
        let (mut memory, root, items) = large();
        let mut seen = Vec::new();
        let mut index = Index::open(&mut memory, &root).unwrap();
        index
            .walk(
                0,
                None,
                &mut Each(|o, item: &Value| {
                    seen.push((o, item.clone()));
                    true
                }),
            )
            .unwrap();
        assert_eq!(seen.len(), 1000);
        assert!(seen
            .iter()
            .enumerate()
            .all(|(i, (o, item))| i as u64 == *o && *item == items[i]));
        assert_eq!(memory.reads, 1 + 8, "the root and every page");

        // The first and the last page of 64 cost the same: root + 1 page.
        for from in [0, 960] {
            memory.reads = 0;
            let mut index = Index::open(&mut memory, &root).unwrap();
            let mut n = 0;
            index
                .walk(
                    from,
                    None,
                    &mut Each(|_, _: &Value| {
                        n += 1;
                        n < 64
                    }),
                )
                .unwrap();
            assert_eq!(memory.reads, 2, "from {from}");
        }
    }

    #[test]
    fn a_key_range_reads_only_its_pages() {
        let (mut memory, root, items) = large();
        for (prefix, expected) in [
            (vec![json!(Hash([3; 32]).to_string())], 100),
            (vec![json!(Hash([3; 32]).to_string()), json!("s#4")], 10),
            (
                vec![
                    json!(Hash([3; 32]).to_string()),
                    json!("s#4"),
                    json!("prop7"),
                ],
                1,
            ),
            (vec![json!(Hash([200; 32]).to_string())], 0),
            (vec![json!(Hash([3; 32]).to_string()), Value::Null], 0),
        ] {
            memory.reads = 0;
            let mut index = Index::open(&mut memory, &root).unwrap();
            let start = index.range_start(&prefix);
            let mut found = Vec::new();
            index
                .walk(
                    start,
                    Some(&prefix),
                    &mut Each(
                        |_, item: &Value| match compare_prefix(&item_key(item), &prefix) {
                            Ordering::Less => true,
                            Ordering::Equal => {
                                found.push(item.clone());
                                true
                            }
                            Ordering::Greater => false,
                        },
                    ),
                )
                .unwrap();
            let wanted: Vec<Value> = items
                .iter()
                .filter(|i| compare_prefix(&item_key(i), &prefix) == Ordering::Equal)
                .cloned()
                .collect();
            assert_eq!(found.len(), expected);
            assert_eq!(found, wanted);
            // The root plus the pages the range spans (100 items span at
            // most two pages of 128).
            let pages = found.len().div_ceil(PAGE_ITEMS) + 1;
            assert!(
                memory.reads <= 1 + pages.max(1),
                "{prefix:?}: {}",
                memory.reads
            );
        }
    }

    #[test]
    fn an_assertion_is_found_through_one_page() {
        let (mut memory, root, items) = large();
        memory.reads = 0;
        let mut index = Index::open(&mut memory, &root).unwrap();
        let wanted = &items[777];
        let ordinal = index
            .assertion(wanted["assertion_id"].as_str().unwrap())
            .unwrap();
        assert_eq!(ordinal, Some(777));
        assert_eq!(index.item(777).unwrap(), *wanted);
        assert_eq!(index.assertion("asr_nope").unwrap(), None);
        assert_eq!(index.assertion("").unwrap(), None);
        assert_eq!(
            memory.reads, 4,
            "root, assertion page, item page, one more page"
        );
    }
}
