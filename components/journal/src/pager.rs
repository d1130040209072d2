//! One page of entries from a space's fixed prefix, under the page's output
//! and inspection budgets. Shared by `read` and `query`.
//!
//! Accounting: a position is accounted for once its entry was returned or
//! established not to match. Positions outside the filter's bounds, and
//! positions an index scan passes over, are established not to match
//! without being inspected. A matching entry that does not fit ends the page
//! before it, so the next page delivers it.

use crate::filter::{Filter, Origin};
use crate::ids::SpaceId;
use crate::refusal::Refusal;
use crate::requests::MAX_PAGE_ENTRIES;
use crate::store::{self, EntryRecord, Reads};

/// Fact bytes a page returns at most.
pub const MAX_PAGE_BYTES: u64 = 4 << 20;
/// Candidates a page inspects at most.
pub const MAX_INSPECT_CANDIDATES: u64 = 4096;
/// Fact bytes a page inspects at most.
pub const MAX_INSPECT_BYTES: u64 = 16 << 20;
/// Entries fetched per scan at most, where candidates may not match; a
/// scan whose every candidate matches fetches what the page can still
/// return plus one.
const SCAN_CHUNK: u32 = 64;

/// What one page may still return and inspect.
#[derive(Debug, Clone)]
pub struct Budget {
    pub entries: u64,
    pub bytes: u64,
    pub candidates: u64,
    pub inspected_bytes: u64,
}

impl Budget {
    /// A page returning at most `limit` entries.
    pub fn page(limit: u64) -> Budget {
        Budget {
            entries: limit.min(MAX_PAGE_ENTRIES),
            bytes: MAX_PAGE_BYTES,
            candidates: MAX_INSPECT_CANDIDATES,
            inspected_bytes: MAX_INSPECT_BYTES,
        }
    }
}

/// A returned entry with its position.
pub struct Found {
    pub position: u64,
    pub record: EntryRecord,
}

/// How far a scan of (after, through] got.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Progress {
    /// The last accounted position (after <= accounted <= through).
    pub accounted: u64,
    /// Whether every position through `through` is accounted for.
    pub exhausted: bool,
}

/// Where candidates come from.
enum Candidates {
    /// Positions from the argument index, for one declared argument's
    /// value.
    Argument(store::ArgumentValue),
    /// Positions from the predicate index.
    Predicate([u8; 16]),
    /// Positions from the creation index.
    Created,
    /// Every entry.
    All,
}

/// How a page serves a filter, decided once per page.
pub struct Plan<'f> {
    filter: &'f Filter,
    source: Candidates,
    /// Whether a candidate's fact must be read to decide it.
    inspect_facts: bool,
    /// Whether every candidate within the bounds matches: then the page ends
    /// at its entry budget or one candidate past it, and a scan fetches no
    /// more than that.
    every_candidate_matches: bool,
}

impl<'f> Plan<'f> {
    /// Candidates come from the narrowest index the filter names: the
    /// argument index for its first argument condition in normalized order
    /// (the lowest argument index, then the lowest canonical value) whose
    /// pair with the filter's predicate the store declares; else the
    /// predicate index for a predicate; else the creation index for
    /// `origin: create`; else every entry. A declared pair's rows are
    /// complete (the store's argument index never changes). Each candidate
    /// is then checked against the whole filter, so the source decides the
    /// cost, never the result.
    pub fn new(r: &impl Reads, filter: &'f Filter) -> Result<Plan<'f>, Refusal> {
        let predicate = filter
            .predicate
            .as_ref()
            .map(|p| store::index_key(&p.bytes));
        let declared_condition = match predicate {
            Some(predicate) if !filter.arguments.is_empty() => {
                let declared = store::argument_index(r)?;
                filter
                    .arguments
                    .iter()
                    .find(|c| declared.declares(&predicate, c.index))
                    .map(|c| store::ArgumentValue {
                        predicate,
                        index: c.index,
                        value: store::index_key(&c.bytes),
                    })
            }
            _ => None,
        };
        let source = match (declared_condition, predicate, filter.origin) {
            (Some(argument), ..) => Candidates::Argument(argument),
            (None, Some(predicate), _) => Candidates::Predicate(predicate),
            (None, None, Some(Origin::Create)) => Candidates::Created,
            (None, None, _) => Candidates::All,
        };
        let inspect_facts = filter.predicate.is_some() || !filter.arguments.is_empty();
        let every_candidate_matches =
            !inspect_facts && (filter.origin.is_none() || matches!(source, Candidates::Created));
        Ok(Plan {
            filter,
            source,
            inspect_facts,
            every_candidate_matches,
        })
    }

    /// Up to `limit` candidates in (after, through], in order: the entries
    /// themselves for a plan over every entry, else the positions its index
    /// names.
    fn candidates(
        &self,
        r: &impl Reads,
        space: SpaceId,
        after: u64,
        through: u64,
        limit: u32,
    ) -> Result<Pending, Refusal> {
        let positions = match &self.source {
            Candidates::All => {
                let read = store::entries(r, space, after, through, limit)?;
                return Ok(Pending {
                    count: read.len(),
                    positions: Vec::new(),
                    unfetched: 0,
                    fetched: read.into_iter(),
                });
            }
            Candidates::Argument(argument) => {
                store::argument_positions(r, space, argument, after, through, limit)?
            }
            Candidates::Predicate(key) => {
                store::predicate_positions(r, space, key, after, through, limit)?
            }
            Candidates::Created => store::created(r, space, after, through, limit)?
                .into_iter()
                .map(|(p, _)| p)
                .collect(),
        };
        Ok(Pending {
            count: positions.len(),
            positions,
            unfetched: 0,
            fetched: Vec::new().into_iter(),
        })
    }

    fn matches(&self, record: &EntryRecord, position: u64) -> bool {
        let filter = self.filter;
        if self.inspect_facts {
            return filter.matches(&record.fact, record.origin, position);
        }
        filter.origin.is_none_or(|o| o == record.origin)
            && position > filter.after
            && position <= filter.through
    }
}

/// A chunk's candidates, in order. An index's entries are fetched as the
/// page consumes them, each batch in one exchange and no larger than what
/// the page can still return plus one, so a small page reads few entries.
struct Pending {
    /// Candidates in the chunk.
    count: usize,
    /// Indexed positions; those from `unfetched` on are not fetched yet.
    positions: Vec<u64>,
    unfetched: usize,
    fetched: std::vec::IntoIter<(u64, EntryRecord)>,
}

impl Pending {
    fn next(
        &mut self,
        r: &impl Reads,
        space: SpaceId,
        budget: &Budget,
    ) -> Result<Option<(u64, EntryRecord)>, Refusal> {
        if let Some(found) = self.fetched.next() {
            return Ok(Some(found));
        }
        let rest = &self.positions[self.unfetched..];
        let take = rest.len().min(
            usize::try_from(budget.entries)
                .unwrap_or(usize::MAX)
                .saturating_add(1),
        );
        if take == 0 {
            return Ok(None);
        }
        let batch = &rest[..take];
        let records = store::entries_at(r, space, batch)?;
        self.fetched = batch
            .iter()
            .copied()
            .zip(records)
            .collect::<Vec<_>>()
            .into_iter();
        self.unfetched += take;
        Ok(self.fetched.next())
    }
}

/// Scans positions (after, through] of `space` for entries matching the
/// plan's filter, appending them to `out` while `budget` allows.
pub fn scan(
    r: &impl Reads,
    space: SpaceId,
    after: u64,
    through: u64,
    plan: &Plan,
    budget: &mut Budget,
    out: &mut Vec<Found>,
) -> Result<Progress, Refusal> {
    let low = after.max(plan.filter.after);
    let high = through.min(plan.filter.through);
    if low >= high {
        return Ok(Progress {
            accounted: through,
            exhausted: true,
        });
    }
    // Positions up to `low` lie outside the filter's bounds.
    let mut accounted = low;
    loop {
        if budget.candidates == 0 {
            return Ok(Progress {
                accounted,
                exhausted: false,
            });
        }
        let chunk = if plan.every_candidate_matches {
            // One scan fetches the page and the candidate past it: at most
            // MAX_PAGE_ENTRIES + 1 entries.
            budget.candidates.min(budget.entries + 1)
        } else {
            budget.candidates.min(u64::from(SCAN_CHUNK))
        };
        let chunk = chunk as u32;
        let mut pending = plan.candidates(r, space, accounted, high, chunk)?;
        let finished = (pending.count as u32) < chunk;
        while let Some((position, record)) = pending.next(r, space, budget)? {
            if budget.candidates == 0 {
                return Ok(Progress {
                    accounted,
                    exhausted: false,
                });
            }
            let size = record.fact.len() as u64;
            if size > budget.inspected_bytes {
                return Ok(Progress {
                    accounted,
                    exhausted: false,
                });
            }
            budget.candidates -= 1;
            budget.inspected_bytes -= size;
            if plan.matches(&record, position) {
                if budget.entries == 0 || size > budget.bytes {
                    return Ok(Progress {
                        accounted,
                        exhausted: false,
                    });
                }
                budget.entries -= 1;
                budget.bytes -= size;
                out.push(Found { position, record });
            }
            accounted = position;
        }
        if finished {
            // Nothing else in (accounted, high] is a candidate, and nothing
            // past `high` matches.
            return Ok(Progress {
                accounted: through,
                exhausted: true,
            });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::memory::Memory;
    use crate::store::{ArgumentIndex, FactIndex, Writes};
    use lab_values::Value;
    use serde_json::json;

    const SPACE: SpaceId = SpaceId([3; 16]);

    /// `[label p, int (n % 10), text t]`, t "even" or "odd" by n.
    fn fact(p: &str, n: u64) -> Vec<u8> {
        let parity = if n.is_multiple_of(2) { "even" } else { "odd" };
        lab_values::encode(&Value::Tuple(vec![
            Value::label(p),
            Value::int(n % 10),
            Value::text(parity),
        ]))
    }

    /// The argument index declaring `pairs` (predicate label, index).
    fn declaring(pairs: &[(&str, u16)]) -> ArgumentIndex {
        let items: Vec<String> = pairs
            .iter()
            .map(|(p, i)| format!("{}:{i}", b64(&Value::label(*p))))
            .collect();
        ArgumentIndex::parse(&items.join(",")).unwrap()
    }

    /// A store provisioned with `declared`, holding `facts` at positions
    /// 1.., one batch each.
    fn store_declaring(facts: &[Vec<u8>], declared: &ArgumentIndex) -> Memory {
        let mut writes = Writes::default();
        writes.argument_index(declared);
        for (i, fact) in facts.iter().enumerate() {
            let position = i as u64 + 1;
            let index = FactIndex::of(fact, declared).unwrap();
            writes.entry(
                SPACE,
                position,
                (Origin::Append, position, position),
                fact,
                &index,
            );
        }
        let mut memory = Memory::default();
        memory.commit(writes);
        memory
    }

    /// Both arguments of both predicates declared.
    fn store(facts: &[Vec<u8>]) -> Memory {
        store_declaring(facts, &declaring(&[("p", 0), ("p", 1), ("q", 0), ("q", 1)]))
    }

    /// `p` at positions not a multiple of 3, `q` at the others.
    fn hundred() -> Vec<Vec<u8>> {
        (1..=100u64)
            .map(|n| fact(if n.is_multiple_of(3) { "q" } else { "p" }, n))
            .collect()
    }

    fn filter(doc: serde_json::Value) -> Filter {
        let json = lab_strict_json::parse(&serde_json::to_vec(&doc).unwrap()).unwrap();
        crate::filter::decode(json, "filter").unwrap()
    }

    fn b64(value: &Value) -> String {
        use base64::Engine as _;
        base64::engine::general_purpose::STANDARD.encode(lab_values::encode(value))
    }

    /// A filter on predicate `p` and `conditions` (index, value).
    fn on(p: &str, conditions: &[(u16, Value)]) -> Filter {
        let arguments: Vec<serde_json::Value> = conditions
            .iter()
            .map(|(i, v)| json!({"index": i, "equals": b64(v)}))
            .collect();
        filter(json!({"predicate": b64(&Value::label(p)), "arguments": arguments}))
    }

    /// Every page of (0, through] under `budget`, each continuing from the
    /// last: the positions returned, and each page's progress.
    fn pages(
        r: &Memory,
        filter: &Filter,
        through: u64,
        budget: Budget,
    ) -> (Vec<u64>, Vec<Progress>) {
        let plan = Plan::new(r, filter).unwrap();
        let (mut found, mut progress, mut after) = (Vec::new(), Vec::new(), 0);
        loop {
            let mut out = Vec::new();
            let page = scan(
                r,
                SPACE,
                after,
                through,
                &plan,
                &mut budget.clone(),
                &mut out,
            )
            .unwrap();
            found.extend(out.iter().map(|f| f.position));
            progress.push(page);
            if page.exhausted {
                return (found, progress);
            }
            assert!(page.accounted > after || !out.is_empty(), "a page advances");
            after = page.accounted;
        }
    }

    /// What matches, entry by entry.
    fn expected(facts: &[Vec<u8>], filter: &Filter) -> Vec<u64> {
        (1..=facts.len() as u64)
            .filter(|&p| filter.matches(&facts[p as usize - 1], Origin::Append, p))
            .collect()
    }

    #[test]
    fn an_argument_filter_inspects_only_its_indexed_candidates() {
        let facts = hundred();
        let memory = store(&facts);
        let by_value = on("p", &[(0, Value::int(4u64))]);
        let mut budget = Budget::page(128);
        let mut out = Vec::new();
        let plan = Plan::new(&memory, &by_value).unwrap();
        let progress = scan(&memory, SPACE, 0, 100, &plan, &mut budget, &mut out).unwrap();
        let found: Vec<u64> = out.iter().map(|f| f.position).collect();
        assert_eq!(found, [4, 14, 34, 44, 64, 74, 94]);
        assert_eq!(found, expected(&facts, &by_value));
        assert_eq!(
            progress,
            Progress {
                accounted: 100,
                exhausted: true
            }
        );
        // Seven candidates inspected and fetched, of a hundred entries.
        assert_eq!(budget.candidates, MAX_INSPECT_CANDIDATES - 7);
        assert_eq!(
            memory.fetched.get(),
            1 + 7,
            "the argument index's pairs and the seven entries"
        );
    }

    #[test]
    fn several_conditions_predicate_and_origin_all_hold() {
        let facts = hundred();
        let memory = store(&facts);
        let cases = [
            json!({"arguments": [
                {"index": 1, "equals": b64(&Value::text("even"))},
                {"index": 0, "equals": b64(&Value::int(6u64))},
            ]}),
            json!({"predicate": b64(&Value::label("q")), "arguments": [
                {"index": 0, "equals": b64(&Value::int(3u64))},
            ]}),
            json!({"predicate": b64(&Value::label("p")), "arguments": [
                {"index": 0, "equals": b64(&Value::int(3u64))},
                {"index": 1, "equals": b64(&Value::text("even"))},
            ]}),
            json!({"predicate": b64(&Value::label("p")), "origin": "create",
                   "arguments": [{"index": 0, "equals": b64(&Value::int(3u64))}]}),
            json!({"predicate": b64(&Value::label("p")),
                   "arguments": [{"index": 0, "equals": b64(&Value::int(1u64))}],
                   "positions": {"after": 20, "through": 60}}),
        ];
        let mut nonempty = 0;
        for doc in cases {
            let f = filter(doc.clone());
            let (found, _) = pages(&memory, &f, 100, Budget::page(4));
            assert_eq!(found, expected(&facts, &f), "{doc}");
            nonempty += usize::from(!found.is_empty());
        }
        assert_eq!(nonempty, 3, "the cases that should find something do");
    }

    #[test]
    fn a_condition_beyond_the_facts_arity_has_no_candidates() {
        let memory = store_declaring(&hundred(), &declaring(&[("p", 2)]));
        let beyond = on("p", &[(2, Value::int(4u64))]);
        let (found, progress) = pages(&memory, &beyond, 100, Budget::page(128));
        assert!(found.is_empty());
        assert_eq!(
            progress,
            [Progress {
                accounted: 100,
                exhausted: true
            }]
        );
        assert_eq!(memory.fetched.get(), 1, "the argument index's pairs only");
    }

    #[test]
    fn a_colliding_digest_prefix_is_a_candidate_not_a_match() {
        let facts = hundred();
        let mut memory = store(&facts);
        // An index row under the key of 4 for the entry at 7, whose value
        // there is 7: what a collision of the two values' keys would store.
        let mut key = SPACE.0.to_vec();
        key.extend_from_slice(&store::index_key(&lab_values::encode(&Value::label("p"))));
        key.extend_from_slice(&0u16.to_be_bytes());
        key.extend_from_slice(&store::index_key(&lab_values::encode(&Value::int(4u64))));
        key.extend_from_slice(&7u64.to_be_bytes());
        memory.insert("argument", key, Vec::new());
        let by_value = on("p", &[(0, Value::int(4u64))]);
        let mut budget = Budget::page(128);
        let (found, _) = pages(&memory, &by_value, 100, budget.clone());
        assert_eq!(found, expected(&facts, &by_value));
        assert!(!found.contains(&7));
        // It was inspected: eight candidates.
        let plan = Plan::new(&memory, &by_value).unwrap();
        scan(&memory, SPACE, 0, 100, &plan, &mut budget, &mut Vec::new()).unwrap();
        assert_eq!(budget.candidates, MAX_INSPECT_CANDIDATES - 8);
    }

    #[test]
    fn budgets_end_a_page_inside_a_chunk_and_the_next_page_resumes() {
        let facts = hundred();
        let memory = store(&facts);
        // 33 matches: 1, 5, 7, 11, 13, 17, 19, …, 97.
        let odd = on("p", &[(1, Value::text("odd"))]);
        let size = facts[0].len() as u64;
        // Each budget with where its first page ends.
        let budgets = [
            // The entry budget: three matches a page.
            (Budget::page(3), 7),
            // The inspected bytes: two facts' worth a page.
            (
                Budget {
                    inspected_bytes: 2 * size + 1,
                    ..Budget::page(128)
                },
                5,
            ),
            // The candidate budget.
            (
                Budget {
                    candidates: 7,
                    ..Budget::page(128)
                },
                19,
            ),
        ];
        for (budget, first_page_through) in budgets {
            let (found, progress) = pages(&memory, &odd, 100, budget);
            assert_eq!(found, expected(&facts, &odd));
            assert_eq!(
                progress[0],
                Progress {
                    accounted: first_page_through,
                    exhausted: false
                }
            );
        }
        // Three matches a page: 33 matches in 11 pages.
        let (found, progress) = pages(&memory, &odd, 100, Budget::page(3));
        assert_eq!(found.len(), 33);
        assert_eq!(progress.len(), 11);
    }

    #[test]
    fn a_small_page_fetches_no_more_entries_than_it_can_return_plus_one() {
        let memory = store(&hundred());
        let by_predicate = filter(json!({"predicate": b64(&Value::label("p"))}));
        let plan = Plan::new(&memory, &by_predicate).unwrap();
        let mut out = Vec::new();
        let progress = scan(
            &memory,
            SPACE,
            0,
            100,
            &plan,
            &mut Budget::page(1),
            &mut out,
        )
        .unwrap();
        assert_eq!(out.iter().map(|f| f.position).collect::<Vec<_>>(), [1]);
        assert_eq!(
            progress,
            Progress {
                accounted: 1,
                exhausted: false
            }
        );
        // The index scan named a chunk of 64; two entries were read.
        assert_eq!(memory.scanned.get(), 64);
        assert_eq!(memory.fetched.get(), 2);
    }

    #[test]
    fn the_argument_index_serves_only_a_declared_pair_and_never_changes_a_result() {
        let facts = hundred();
        // Declared: argument 1 of `p` only. A store provisioned before the
        // argument index has no pairs stored at all.
        let declared = store_declaring(&facts, &declaring(&[("p", 1)]));
        let mut none = store_declaring(&facts, &ArgumentIndex::default());
        none.remove("meta", |_| true);
        assert_eq!(none.count("argument"), 0);
        // One argument row per `p` fact (67), none for `q`.
        assert_eq!(declared.count("argument"), 67);

        let source = |memory: &Memory, f: &Filter| match Plan::new(memory, f).unwrap().source {
            Candidates::Argument(a) => format!("argument {}", a.index),
            Candidates::Predicate(_) => "predicate".into(),
            Candidates::Created => "created".into(),
            Candidates::All => "all".into(),
        };
        let cases = [
            // Declared: the argument index.
            (on("p", &[(1, Value::text("odd"))]), "argument 1"),
            // The first declared condition in normalized order, past an
            // undeclared one.
            (
                on("p", &[(0, Value::int(5u64)), (1, Value::text("odd"))]),
                "argument 1",
            ),
            // Undeclared index, predicate or no predicate: the scans.
            (on("p", &[(0, Value::int(5u64))]), "predicate"),
            (on("q", &[(1, Value::text("odd"))]), "predicate"),
            (
                filter(json!({"arguments": [{"index": 1, "equals": b64(&Value::text("odd"))}]})),
                "all",
            ),
        ];
        for (f, used) in &cases {
            assert_eq!(source(&declared, f), *used);
            let without = source(&none, f);
            assert!(without == "predicate" || without == "all", "{without}");
            let (found, _) = pages(&declared, f, 100, Budget::page(5));
            assert!(!found.is_empty());
            assert_eq!(found, expected(&facts, f));
            assert_eq!(pages(&none, f, 100, Budget::page(5)).0, found);
        }
        // The declared pair inspected only its matches; the scan every `p`.
        let odd = &cases[0].0;
        let mut budget = Budget::page(128);
        let plan = Plan::new(&declared, odd).unwrap();
        scan(
            &declared,
            SPACE,
            0,
            100,
            &plan,
            &mut budget,
            &mut Vec::new(),
        )
        .unwrap();
        assert_eq!(budget.candidates, MAX_INSPECT_CANDIDATES - 33);
        let mut budget = Budget::page(128);
        let plan = Plan::new(&none, odd).unwrap();
        scan(&none, SPACE, 0, 100, &plan, &mut budget, &mut Vec::new()).unwrap();
        assert_eq!(budget.candidates, MAX_INSPECT_CANDIDATES - 67);
    }
}
