//! The replay table: pairs a service must not accept twice
//! (`lab:platform/replay`), kept in this process's memory for its life
//! ([`ReplayTable`]), or, on a store several hosts share, in the store
//! ([`Replay::Store`], `kv::postgres`), where every host finds them.
//!
//! Invariants of the table in memory:
//! 1. Check and insert are one step under one lock: of two requests
//!    inserting the same pair, exactly one hears `Inserted`.
//! 2. A pair is kept until its expiry (the host's clock, Unix seconds);
//!    an expired pair counts as absent and is dropped when room is needed.
//! 3. The table never holds more than its bound: past it an insert answers
//!    `Full` and changes nothing (the service then remembers the pair in
//!    its store).
//! 4. The table belongs to the service, not to a loaded component: a
//!    reload keeps it; a restart starts it empty.

use crate::kv::postgres::PgStore;
use std::collections::{BTreeSet, HashMap};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

/// What an insert met.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Insert {
    Inserted,
    Present,
    Full,
}

/// Where one service's pairs are kept.
pub enum Replay {
    /// In this host's memory.
    Memory(ReplayTable),
    /// In the store the hosts share, under the service's name.
    Store {
        store: Arc<PgStore>,
        service: &'static str,
    },
}

impl Replay {
    /// Keeps `pair` until `expires_at` unless it is kept, unexpired, at
    /// `now`; an error: the store cannot answer now.
    pub async fn check_and_insert(
        &self,
        pair: &[u8],
        expires_at: u64,
        now: u64,
    ) -> Result<Insert, String> {
        match self {
            Replay::Memory(table) => Ok(table.check_and_insert(pair, expires_at, now)),
            Replay::Store { store, service } => {
                match store.replay_insert(service, pair, expires_at, now).await {
                    Ok(true) => Ok(Insert::Inserted),
                    Ok(false) => Ok(Insert::Present),
                    Err(e) => Err(e.to_string()),
                }
            }
        }
    }

    /// Whether `pair` is kept, unexpired at `now`.
    pub async fn contains(&self, pair: &[u8], now: u64) -> Result<bool, String> {
        match self {
            Replay::Memory(table) => Ok(table.contains(pair, now)),
            Replay::Store { store, service } => store
                .replay_contains(service, pair, now)
                .await
                .map_err(|e| e.to_string()),
        }
    }

    /// The table's lines of the metrics exposition (none for the store's).
    pub fn render_metrics(&self, service: &str) -> String {
        match self {
            Replay::Memory(table) => table.render_metrics(service),
            Replay::Store { .. } => String::new(),
        }
    }
}

/// One service's remembered pairs, at most `bound` of them.
pub struct ReplayTable {
    bound: usize,
    pairs: Mutex<Pairs>,
    /// Inserts answered `Full`, since the start.
    full_total: AtomicU64,
}

#[derive(Default)]
struct Pairs {
    /// Pair → its expiry.
    expiry_of: HashMap<Arc<[u8]>, u64>,
    /// The same pairs in expiry order, so the expired ones are found first.
    by_expiry: BTreeSet<(u64, Arc<[u8]>)>,
}

impl Pairs {
    /// Drops the pairs expired at `now`.
    fn drop_expired(&mut self, now: u64) {
        while let Some(first) = self.by_expiry.first() {
            if first.0 > now {
                break;
            }
            let (_, pair) = self.by_expiry.pop_first().expect("a first pair");
            self.expiry_of.remove(&pair);
        }
    }
}

impl ReplayTable {
    pub fn new(bound: usize) -> Self {
        ReplayTable {
            bound,
            pairs: Mutex::new(Pairs::default()),
            full_total: AtomicU64::new(0),
        }
    }

    /// Keeps `pair` until `expires_at` unless it is kept, unexpired, at `now`.
    pub fn check_and_insert(&self, pair: &[u8], expires_at: u64, now: u64) -> Insert {
        let mut pairs = self.pairs.lock().unwrap();
        if let Some(expiry) = pairs.expiry_of.get(pair).copied() {
            if expiry > now {
                return Insert::Present;
            }
            let (key, _) = pairs.expiry_of.remove_entry(pair).expect("a kept pair");
            pairs.by_expiry.remove(&(expiry, key));
        }
        if pairs.expiry_of.len() >= self.bound {
            pairs.drop_expired(now);
        }
        if pairs.expiry_of.len() >= self.bound {
            drop(pairs);
            self.full_total.fetch_add(1, Ordering::Relaxed);
            return Insert::Full;
        }
        let key: Arc<[u8]> = Arc::from(pair);
        pairs.expiry_of.insert(Arc::clone(&key), expires_at);
        pairs.by_expiry.insert((expires_at, key));
        Insert::Inserted
    }

    /// Whether `pair` is kept, unexpired at `now`.
    pub fn contains(&self, pair: &[u8], now: u64) -> bool {
        let pairs = self.pairs.lock().unwrap();
        pairs
            .expiry_of
            .get(pair)
            .is_some_and(|&expiry| expiry > now)
    }

    /// Pairs held now (expired ones not dropped yet included).
    pub fn len(&self) -> usize {
        self.pairs.lock().unwrap().expiry_of.len()
    }

    /// Inserts answered `Full` since the start.
    pub fn full_total(&self) -> u64 {
        self.full_total.load(Ordering::Relaxed)
    }

    /// The table's lines of the metrics exposition.
    pub fn render_metrics(&self, service: &str) -> String {
        format!(
            "# HELP lab_replay_table_pairs Pairs the replay table holds.\n\
             # TYPE lab_replay_table_pairs gauge\n\
             lab_replay_table_pairs{{service=\"{service}\"}} {}\n\
             # HELP lab_replay_table_bound Pairs the replay table may hold.\n\
             # TYPE lab_replay_table_bound gauge\n\
             lab_replay_table_bound{{service=\"{service}\"}} {}\n\
             # HELP lab_replay_table_full_total Pairs the full replay table left to the service's store.\n\
             # TYPE lab_replay_table_full_total counter\n\
             lab_replay_table_full_total{{service=\"{service}\"}} {}\n",
            self.len(),
            self.bound,
            self.full_total()
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_pair_is_inserted_once_until_it_expires() {
        let table = ReplayTable::new(4);
        assert_eq!(table.check_and_insert(b"a", 110, 100), Insert::Inserted);
        assert_eq!(table.check_and_insert(b"a", 120, 105), Insert::Present);
        assert!(table.contains(b"a", 109));
        assert!(!table.contains(b"a", 110));
        // Expired: inserted again, with its new expiry.
        assert_eq!(table.check_and_insert(b"a", 130, 110), Insert::Inserted);
        assert!(table.contains(b"a", 129));
        assert_eq!(table.len(), 1);
    }

    #[test]
    fn a_full_table_refuses_new_pairs_until_one_expires() {
        let table = ReplayTable::new(2);
        assert_eq!(table.check_and_insert(b"a", 110, 100), Insert::Inserted);
        assert_eq!(table.check_and_insert(b"b", 200, 100), Insert::Inserted);
        assert_eq!(table.check_and_insert(b"c", 200, 100), Insert::Full);
        assert!(!table.contains(b"c", 100));
        // A kept pair is still found while the table is full.
        assert_eq!(table.check_and_insert(b"b", 200, 100), Insert::Present);
        assert_eq!(table.full_total(), 1);
        // Once `a` expires its room is taken.
        assert_eq!(table.check_and_insert(b"c", 200, 110), Insert::Inserted);
        assert!(!table.contains(b"a", 110));
        assert_eq!(table.len(), 2);
    }
}
