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
use sha2::{Digest, Sha256};
use std::collections::{BTreeMap, HashMap};
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

/// A pair as the table keys it: the first 16 octets of its SHA-256. Two
/// pairs sharing one (a chance of about 2^-88 among a million pairs, and
/// 2^64 work to make on purpose) would make the second read as present: a
/// refusal of a fresh request, never the acceptance of a replayed one.
type PairKey = [u8; 16];

fn pair_key(pair: &[u8]) -> PairKey {
    let digest = Sha256::digest(pair);
    digest[..16].try_into().expect("16 of 32 octets")
}

/// One service's remembered pairs, at most `bound` of them.
pub struct ReplayTable {
    bound: usize,
    pairs: Mutex<Pairs>,
    /// Inserts answered `Full`, since the start.
    full_total: AtomicU64,
}

/// The key and its expiry in a map, the key again under its expiry.
#[derive(Default)]
struct Pairs {
    /// Pair → its expiry.
    expiry_of: HashMap<PairKey, u64>,
    /// The same pairs under their expiry second, the earliest first: each
    /// pair of `expiry_of` listed once, under its expiry, and nothing else.
    by_expiry: BTreeMap<u64, Vec<PairKey>>,
}

impl Pairs {
    /// Drops the pairs expired at `now`.
    fn drop_expired(&mut self, now: u64) {
        while let Some(entry) = self.by_expiry.first_entry() {
            if *entry.key() > now {
                break;
            }
            for key in entry.remove() {
                self.expiry_of.remove(&key);
            }
        }
    }

    /// Forgets `key`, kept until `expiry`.
    fn remove(&mut self, key: &PairKey, expiry: u64) {
        self.expiry_of.remove(key);
        if let Some(listed) = self.by_expiry.get_mut(&expiry) {
            if let Some(at) = listed.iter().position(|k| k == key) {
                listed.swap_remove(at);
            }
            if listed.is_empty() {
                self.by_expiry.remove(&expiry);
            }
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
        let key = pair_key(pair);
        let mut pairs = self.pairs.lock().unwrap();
        if let Some(expiry) = pairs.expiry_of.get(&key).copied() {
            if expiry > now {
                return Insert::Present;
            }
            pairs.remove(&key, expiry);
        }
        if pairs.expiry_of.len() >= self.bound {
            pairs.drop_expired(now);
        }
        if pairs.expiry_of.len() >= self.bound {
            drop(pairs);
            self.full_total.fetch_add(1, Ordering::Relaxed);
            return Insert::Full;
        }
        pairs.expiry_of.insert(key, expires_at);
        pairs.by_expiry.entry(expires_at).or_default().push(key);
        Insert::Inserted
    }

    /// Whether `pair` is kept, unexpired at `now`.
    pub fn contains(&self, pair: &[u8], now: u64) -> bool {
        let pairs = self.pairs.lock().unwrap();
        pairs
            .expiry_of
            .get(&pair_key(pair))
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
    fn each_kept_pair_is_listed_once_under_its_expiry() {
        let table = ReplayTable::new(8);
        for pair in [&b"a"[..], b"b", b"c"] {
            assert_eq!(table.check_and_insert(pair, 110, 100), Insert::Inserted);
        }
        // `a` expires and is kept again: its old listing goes with it.
        assert_eq!(table.check_and_insert(b"a", 130, 110), Insert::Inserted);
        let listed = |table: &ReplayTable| {
            let pairs = table.pairs.lock().unwrap();
            let listed: Vec<(u64, usize)> = pairs
                .by_expiry
                .iter()
                .map(|(second, keys)| (*second, keys.len()))
                .collect();
            (listed, pairs.expiry_of.len())
        };
        assert_eq!(listed(&table), (vec![(110, 2), (130, 1)], 3));
        // Dropping the expired ones leaves `a` alone.
        table.pairs.lock().unwrap().drop_expired(110);
        assert_eq!(listed(&table), (vec![(130, 1)], 1));
        assert!(table.contains(b"a", 129));
        assert!(!table.contains(b"b", 100));
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
