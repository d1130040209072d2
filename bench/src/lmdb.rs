//! The journal's baseline: a plain heed loop in this process writing and
//! reading the journal's rows in a fresh LMDB environment, on the same
//! filesystem as labd's data, with LMDB's default durability (an fsync per
//! commit).
//!
//! Rows, as the journal lays them out (integers big-endian):
//! - entry: space id (16) ‖ position (8) → origin (1) ‖ batch first (8) ‖
//!   batch last (8) ‖ fact;
//! - head: space id (16) → cutoff (8), one write per append;
//! - predicate index: space id (16) ‖ SHA-256(predicate)[..16] ‖ position
//!   (8) → empty, one per fact;
//! - receipt: space id (16) ‖ `a` ‖ operation id → request digest (32) ‖
//!   positions (1 + 8 + 8), one per append.
//!
//! An append writes all four, as the journal's does ([`Rows::Journal`]);
//! the entries and the head alone ([`Rows::EntriesAndHead`]), what this
//! baseline wrote before, are kept as a reference.
//!
//! The row kinds share one database behind a one-byte kind prefix,
//! as labd's tables share one behind their names.

use crate::journal::{fact, Device};
use crate::measure::Bound;
use anyhow::{ensure, Context, Result};
use heed::types::Bytes;
use heed::{Database, Env, EnvOpenOptions, RwTxn};
use sha2::{Digest, Sha256};
use std::io::Write as _;
use std::ops::Bound as Edge;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// Address space each environment reserves (not disk used).
const MAP_SIZE: usize = 16 << 30;
/// Key kinds, the first byte of every key.
const ENTRY: u8 = b'e';
const HEAD: u8 = b'h';
const PREDICATE: u8 = b'p';
const RECEIPT: u8 = b'r';
/// Batches per commit while filling a journal for the read baselines
/// (filling is not measured).
const FILL_GROUP: usize = 64;

/// A fresh LMDB environment in its own directory, removed on drop.
pub struct Lmdb {
    env: Env,
    db: Database<Bytes, Bytes>,
    dir: PathBuf,
}

impl Drop for Lmdb {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// The rows an append writes.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Rows {
    /// The journal's: each fact's entry and predicate index row, the
    /// append's receipt and the space's head.
    Journal,
    /// Only each fact's entry and the head.
    EntriesAndHead,
}

/// Appends written over time.
#[derive(Clone, Copy, Default)]
pub struct Written {
    pub batches: u64,
    pub facts: u64,
    pub elapsed: Duration,
    /// CPU time of the thread that wrote them over `elapsed`, where this
    /// process wrote them ([`Lmdb::appends`]); zero otherwise.
    pub cpu: Duration,
    /// Bytes written meanwhile to the device holding the environment, by
    /// any process, where /proc/diskstats lists it ([`Lmdb::appends`]);
    /// zero otherwise.
    pub disk: u64,
}

impl Written {
    pub fn add(&mut self, other: Written) {
        self.batches += other.batches;
        self.facts += other.facts;
        self.elapsed += other.elapsed;
        self.cpu += other.cpu;
        self.disk += other.disk;
    }
}

/// Entries read over time, in pages.
#[derive(Clone, Copy, Default)]
pub struct Scanned {
    pub entries: u64,
    pub pages: u64,
    pub elapsed: Duration,
}

/// CPU time of the calling thread so far: user and system, in ticks of
/// 10 ms, so a loop of half a second is read within 2%.
fn thread_cpu_time() -> Result<Duration> {
    crate::journal::cpu_time("/proc/thread-self/stat")
}

/// The id of the `n`th baseline space.
pub fn space_id(n: usize) -> [u8; 16] {
    let digest = Sha256::digest(format!("lab-bench space {n}"));
    digest[..16].try_into().expect("16 of 32 octets")
}

/// The predicate index's key of a predicate's canonical bytes.
pub fn predicate_key(predicate: &[u8]) -> [u8; 16] {
    Sha256::digest(predicate)[..16]
        .try_into()
        .expect("16 of 32 octets")
}

fn entry_key(space: &[u8; 16], position: u64) -> [u8; 25] {
    let mut key = [0u8; 25];
    key[0] = ENTRY;
    key[1..17].copy_from_slice(space);
    key[17..].copy_from_slice(&position.to_be_bytes());
    key
}

fn head_key(space: &[u8; 16]) -> [u8; 17] {
    let mut key = [0u8; 17];
    key[0] = HEAD;
    key[1..].copy_from_slice(space);
    key
}

/// An append receipt's key: kind ‖ space ‖ `a` ‖ operation id.
fn receipt_key(space: &[u8; 16], operation: &[u8]) -> Vec<u8> {
    let mut key = Vec::with_capacity(18 + operation.len());
    key.push(RECEIPT);
    key.extend_from_slice(space);
    key.push(b'a');
    key.extend_from_slice(operation);
    key
}

fn predicate_row(space: &[u8; 16], predicate: &[u8; 16], position: u64) -> [u8; 41] {
    let mut key = [0u8; 41];
    key[0] = PREDICATE;
    key[1..17].copy_from_slice(space);
    key[17..33].copy_from_slice(predicate);
    key[33..].copy_from_slice(&position.to_be_bytes());
    key
}

impl Lmdb {
    /// A new environment in `dir`, which must not exist yet.
    pub fn create(dir: &Path) -> Result<Lmdb> {
        ensure!(!dir.exists(), "{} exists already", dir.display());
        std::fs::create_dir_all(dir).with_context(|| format!("create {}", dir.display()))?;
        let mut options = EnvOpenOptions::new();
        options.map_size(MAP_SIZE).max_dbs(1);
        // SAFETY: a new directory, opened once, by this process only.
        let env = unsafe { options.open(dir) }.context("open the baseline environment")?;
        let mut txn = env.write_txn()?;
        let db = env.create_database::<Bytes, Bytes>(&mut txn, Some("journal"))?;
        txn.commit()?;
        Ok(Lmdb {
            env,
            db,
            dir: dir.to_path_buf(),
        })
    }

    /// One append: the batch's entries at `first..`, and the new head.
    fn append(
        &self,
        txn: &mut RwTxn<'_>,
        space: &[u8; 16],
        first: u64,
        facts: &[Vec<u8>],
        value: &mut Vec<u8>,
    ) -> Result<u64> {
        let last = first + facts.len() as u64 - 1;
        for (i, fact) in facts.iter().enumerate() {
            value.clear();
            value.push(0);
            value.extend_from_slice(&first.to_be_bytes());
            value.extend_from_slice(&last.to_be_bytes());
            value.extend_from_slice(fact);
            self.db
                .put(txn, &entry_key(space, first + i as u64), value)?;
        }
        self.db.put(txn, &head_key(space), &last.to_be_bytes())?;
        Ok(last)
    }

    /// The rest of the journal's rows for an append at `first..=last` of
    /// facts whose predicate index key is `predicate`: an index row per
    /// fact and the receipt of `operation`.
    fn index_and_receipt(
        &self,
        txn: &mut RwTxn<'_>,
        space: &[u8; 16],
        (first, last): (u64, u64),
        predicate: &[u8; 16],
        operation: &[u8],
        value: &mut Vec<u8>,
    ) -> Result<()> {
        for position in first..=last {
            self.db
                .put(txn, &predicate_row(space, predicate, position), &[])?;
        }
        value.clear();
        value.extend_from_slice(&Sha256::digest(operation));
        value.push(1);
        value.extend_from_slice(&first.to_be_bytes());
        value.extend_from_slice(&last.to_be_bytes());
        self.db.put(txn, &receipt_key(space, operation), value)?;
        Ok(())
    }

    /// Appends of `batch` facts writing `rows`, `group` appends per commit,
    /// round-robin over `spaces` spaces, until `bound` (counted in commits);
    /// with `nested`, each append in its own transaction nested in the
    /// commit's, as labd's store runs them. Only the loop is timed.
    pub fn appends(
        &self,
        spaces: usize,
        batch: usize,
        group: usize,
        nested: bool,
        rows: Rows,
        bound: Bound,
    ) -> Result<Written> {
        let ids: Vec<[u8; 16]> = (0..spaces).map(space_id).collect();
        let mut heads = vec![0u64; spaces];
        // The heads this environment already holds, from earlier rounds.
        {
            let txn = self.env.read_txn()?;
            for (id, head) in ids.iter().zip(&mut heads) {
                if let Some(bytes) = self.db.get(&txn, &head_key(id))? {
                    *head = u64::from_be_bytes(bytes.try_into().context("a head of 8 octets")?);
                }
            }
        }
        let facts: Vec<Vec<u8>> = (0..batch as u64).map(|i| fact("bench", i)).collect();
        let predicate = predicate_key(&crate::journal::text("bench"));
        // Operation ids unique within this environment: its first head
        // (rounds before this one) and the append's count.
        let round = heads.iter().sum::<u64>();
        let mut operation = Vec::with_capacity(32);
        let mut value = Vec::with_capacity(64);
        let mut next = 0usize;
        let mut commits = 0u64;
        let device = Device::holding(&self.dir)?;
        let disk_before = device.written()?;
        let cpu_before = thread_cpu_time()?;
        let started = Instant::now();
        while !bound.done(commits, started) {
            let mut txn = self.env.write_txn()?;
            for _ in 0..group {
                let at = next % spaces;
                let first = heads[at] + 1;
                let mut write = |txn: &mut RwTxn<'_>| -> Result<u64> {
                    let last = self.append(txn, &ids[at], first, &facts, &mut value)?;
                    if rows == Rows::Journal {
                        operation.clear();
                        write!(operation, "h{round}-{next}")?;
                        self.index_and_receipt(
                            txn,
                            &ids[at],
                            (first, last),
                            &predicate,
                            &operation,
                            &mut value,
                        )?;
                    }
                    Ok(last)
                };
                heads[at] = if nested {
                    let mut inner = self.env.nested_write_txn(&mut txn)?;
                    let last = write(&mut inner)?;
                    inner.commit()?;
                    last
                } else {
                    write(&mut txn)?
                };
                next += 1;
            }
            txn.commit()?;
            commits += 1;
        }
        let elapsed = started.elapsed();
        let appended = commits * group as u64;
        Ok(Written {
            batches: appended,
            facts: appended * batch as u64,
            elapsed,
            cpu: thread_cpu_time()?.saturating_sub(cpu_before),
            disk: disk_before
                .zip(device.written()?)
                .map_or(0, |(before, after)| after.saturating_sub(before)),
        })
    }

    /// Writes `facts` into space `space` in batches of `batch`, each entry
    /// with its predicate index row when `index`; not timed.
    pub fn fill(
        &self,
        space: &[u8; 16],
        total: u64,
        batch: u64,
        index: bool,
        fact_of: impl Fn(u64) -> (Vec<u8>, Vec<u8>),
    ) -> Result<()> {
        let mut value = Vec::with_capacity(64);
        let mut k = 0u64;
        while k < total {
            let mut txn = self.env.write_txn()?;
            for _ in 0..FILL_GROUP {
                if k >= total {
                    break;
                }
                let size = batch.min(total - k);
                let made: Vec<(Vec<u8>, Vec<u8>)> = (k..k + size).map(&fact_of).collect();
                let facts: Vec<Vec<u8>> = made.iter().map(|(f, _)| f.clone()).collect();
                self.append(&mut txn, space, k + 1, &facts, &mut value)?;
                if index {
                    for (i, (_, predicate)) in made.iter().enumerate() {
                        let row = predicate_row(space, &predicate_key(predicate), k + 1 + i as u64);
                        self.db.put(&mut txn, &row, &[])?;
                    }
                }
                k += size;
            }
            txn.commit()?;
        }
        Ok(())
    }

    /// Reads entries (0, through] of `space` in pages of `page`, a read
    /// transaction per page, copying each entry out as a server would.
    pub fn read_pages(&self, space: &[u8; 16], through: u64, page: usize) -> Result<Scanned> {
        let mut scanned = Scanned::default();
        let mut after = 0u64;
        let started = Instant::now();
        while after < through {
            let txn = self.env.read_txn()?;
            let start = entry_key(space, after + 1);
            let end = entry_key(space, through + 1);
            let range = (Edge::Included(&start[..]), Edge::Excluded(&end[..]));
            let mut kept: Vec<(u64, Vec<u8>)> = Vec::with_capacity(page);
            for row in self.db.range(&txn, &range)?.take(page) {
                let (key, value) = row?;
                let position = u64::from_be_bytes(key[17..25].try_into()?);
                kept.push((position, value.to_vec()));
            }
            let last = kept
                .last()
                .map(|(p, _)| *p)
                .context("a page without entries")?;
            ensure!(last > after, "the baseline scan did not advance");
            scanned.entries += kept.len() as u64;
            scanned.pages += 1;
            after = last;
        }
        scanned.elapsed = started.elapsed();
        Ok(scanned)
    }

    /// Reads every entry of `space` in (0, through] whose predicate is
    /// `predicate`, by its index rows, in pages of `page` matches, a read
    /// transaction per page.
    pub fn index_pages(
        &self,
        space: &[u8; 16],
        predicate: &[u8],
        through: u64,
        page: usize,
    ) -> Result<Scanned> {
        let key = predicate_key(predicate);
        let mut scanned = Scanned::default();
        let mut after = 0u64;
        let started = Instant::now();
        loop {
            let txn = self.env.read_txn()?;
            let start = predicate_row(space, &key, after + 1);
            let end = predicate_row(space, &key, through + 1);
            let range = (Edge::Included(&start[..]), Edge::Excluded(&end[..]));
            let mut kept: Vec<(u64, Vec<u8>)> = Vec::with_capacity(page);
            for row in self.db.range(&txn, &range)?.take(page) {
                let (row, _) = row?;
                let position = u64::from_be_bytes(row[33..41].try_into()?);
                let value = self
                    .db
                    .get(&txn, &entry_key(space, position))?
                    .context("an indexed entry is missing")?;
                kept.push((position, value.to_vec()));
            }
            scanned.pages += 1;
            scanned.entries += kept.len() as u64;
            match kept.last() {
                Some((position, _)) if kept.len() == page => after = *position,
                _ => break,
            }
        }
        scanned.elapsed = started.elapsed();
        Ok(scanned)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn writes_and_reads_back() {
        let dir = std::env::temp_dir().join(format!("lab-bench-lmdb-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let lmdb = Lmdb::create(&dir).unwrap();
        let written = lmdb
            .appends(3, 2, 4, false, Rows::Journal, Bound::new(2, 60))
            .unwrap();
        assert_eq!((written.batches, written.facts), (8, 16));
        let written = lmdb
            .appends(3, 2, 4, true, Rows::Journal, Bound::new(2, 60))
            .unwrap();
        assert_eq!((written.batches, written.facts), (8, 16));
        let written = lmdb
            .appends(3, 1, 3, false, Rows::EntriesAndHead, Bound::new(1, 60))
            .unwrap();
        assert_eq!((written.batches, written.facts), (3, 3));
        let txn = lmdb.env.read_txn().unwrap();
        let head = lmdb.db.get(&txn, &head_key(&space_id(0))).unwrap();
        // Space 0 took appends 0, 3 and 6 of the first two calls, two facts
        // each, and the first of the last.
        assert_eq!(head, Some(&13u64.to_be_bytes()[..]));
        let count = |kind: u8| {
            let rows = lmdb.db.prefix_iter(&txn, &[kind]).unwrap();
            rows.count()
        };
        // A receipt per append of the journal's rows, none reused across
        // calls; an entry and an index row per fact, the last call's
        // entries unindexed.
        assert_eq!(count(RECEIPT), 16);
        assert_eq!((count(ENTRY), count(PREDICATE)), (35, 32));
        drop(txn);
        let space = space_id(7);
        let atom = |k: u64| if k.is_multiple_of(10) { "hit" } else { "miss" };
        lmdb.fill(&space, 1000, 128, true, |k| {
            (fact(atom(k), k), crate::journal::text(atom(k)))
        })
        .unwrap();
        let all = lmdb.read_pages(&space, 1000, 128).unwrap();
        assert_eq!((all.entries, all.pages), (1000, 8));
        let hits = lmdb
            .index_pages(&space, &crate::journal::text("hit"), 1000, 64)
            .unwrap();
        assert_eq!((hits.entries, hits.pages), (100, 2));
        drop(lmdb);
        assert!(!dir.exists());
    }
}
