//! One page of entries from a space's fixed prefix, under the page's output
//! and inspection budgets. Shared by `read` and `query`.
//!
//! Accounting: a position is accounted for once its entry was returned or
//! established not to match. Positions outside the filter's bounds, and
//! positions an index scan passes over, are established not to match
//! without being inspected. A matching entry that does not fit ends the page
//! before it, so the next page delivers it.

use crate::filter::{self, Filter, Origin};
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
    /// Positions from the predicate index.
    Predicate([u8; 16]),
    /// Positions from the creation index.
    Created,
    /// Every entry.
    All,
}

/// Scans positions (after, through] of `space` for entries matching `filter`,
/// appending them to `out` while `budget` allows.
pub fn scan(
    r: &impl Reads,
    space: SpaceId,
    after: u64,
    through: u64,
    filter: &Filter,
    budget: &mut Budget,
    out: &mut Vec<Found>,
) -> Result<Progress, Refusal> {
    let low = after.max(filter.after);
    let high = through.min(filter.through);
    if low >= high {
        return Ok(Progress {
            accounted: through,
            exhausted: true,
        });
    }
    let source = match (&filter.predicate, filter.origin) {
        (Some(predicate), _) => Candidates::Predicate(filter::predicate_key(&predicate.bytes)),
        (None, Some(Origin::Create)) => Candidates::Created,
        (None, _) => Candidates::All,
    };
    let inspect_facts = filter.predicate.is_some() || !filter.arguments.is_empty();
    // Then the page ends at its entry budget or one candidate past it, and
    // a scan fetches no more than that.
    let every_candidate_matches =
        !inspect_facts && (filter.origin.is_none() || matches!(source, Candidates::Created));
    // Positions up to `low` lie outside the filter's bounds.
    let mut accounted = low;
    loop {
        if budget.candidates == 0 {
            return Ok(Progress {
                accounted,
                exhausted: false,
            });
        }
        let chunk = if every_candidate_matches {
            // One scan fetches the page and the candidate past it: at most
            // MAX_PAGE_ENTRIES + 1 entries.
            budget.candidates.min(budget.entries + 1)
        } else {
            budget.candidates.min(u64::from(SCAN_CHUNK))
        };
        let chunk = chunk as u32;
        let batch: Vec<(u64, Option<EntryRecord>)> = match &source {
            Candidates::Predicate(key) => {
                store::predicate_positions(r, space, key, accounted, high, chunk)?
                    .into_iter()
                    .map(|p| (p, None))
                    .collect()
            }
            Candidates::Created => store::created(r, space, accounted, high, chunk)?
                .into_iter()
                .map(|(p, _)| (p, None))
                .collect(),
            Candidates::All => store::entries(r, space, accounted, high, chunk)?
                .into_iter()
                .map(|(p, e)| (p, Some(e)))
                .collect(),
        };
        let finished = (batch.len() as u32) < chunk;
        for (position, record) in batch {
            if budget.candidates == 0 {
                return Ok(Progress {
                    accounted,
                    exhausted: false,
                });
            }
            let record = match record {
                Some(record) => record,
                None => store::entry(r, space, position)?.ok_or_else(|| {
                    Refusal::Internal(format!("an indexed entry at {position} is missing"))
                })?,
            };
            let size = record.fact.len() as u64;
            if size > budget.inspected_bytes {
                return Ok(Progress {
                    accounted,
                    exhausted: false,
                });
            }
            budget.candidates -= 1;
            budget.inspected_bytes -= size;
            if matches(filter, &record, position, inspect_facts)? {
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

fn matches(
    filter: &Filter,
    record: &EntryRecord,
    position: u64,
    inspect_fact: bool,
) -> Result<bool, Refusal> {
    let origin = record.origin;
    if !inspect_fact {
        return Ok(filter.origin.is_none_or(|o| o == origin)
            && position > filter.after
            && position <= filter.through);
    }
    let fact = lab_values::decode(&record.fact)
        .map_err(|e| Refusal::Internal(format!("a stored fact does not decode: {e}")))?;
    Ok(filter.matches(&fact, origin, position))
}
