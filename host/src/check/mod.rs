//! `labd check`: the offline integrity check of a data directory
//! (`docs/operations.md`, "Integrity check").
//!
//! - [`blobs`]: every blob file's bytes against its name; staging files.
//! - [`journal`]: the journal's tables against each other.
//! - [`coord`]: the coordination service's caches of the journal.
//!
//! Invariants:
//! 1. The check holds the data directory's lock for as long as it runs: it
//!    refuses to start while a labd serves the directory, and no labd
//!    starts meanwhile.
//! 2. It changes nothing, except with `repair`: then it removes the files
//!    of `blobs/staging/`, which no labd is writing (invariant 1) and
//!    which a start would remove in any case. The key-value store is
//!    opened read-only.
//! 3. Every table is read in one snapshot of the store, so the tables are
//!    compared in one state.

mod blobs;
mod coord;
mod journal;

use crate::kv_snapshot::ReadOnlyStore;
use anyhow::{Context, Result};
use std::path::Path;

/// What the check found.
#[derive(Debug, Default)]
pub struct Findings {
    /// Departures from an invariant: each one line, naming what it is about.
    pub problems: Vec<String>,
    /// What is not a problem but worth telling (what was repaired, what
    /// could be).
    pub notes: Vec<String>,
    /// What was examined, by name.
    pub counts: Vec<(&'static str, u64)>,
}

impl Findings {
    fn problem(&mut self, text: impl Into<String>) {
        self.problems.push(text.into());
    }

    fn note(&mut self, text: impl Into<String>) {
        self.notes.push(text.into());
    }

    fn count(&mut self, what: &'static str, n: u64) {
        self.counts.push((what, n));
    }
}

/// Checks the data directory `data_dir`; with `repair`, removes orphaned
/// staging files. Fails (without a finding) when it cannot run.
pub fn check(data_dir: &Path, repair: bool) -> Result<Findings> {
    anyhow::ensure!(
        data_dir.is_dir(),
        "{} is not a directory",
        data_dir.display()
    );
    let _lock = crate::lock_data_dir(data_dir)?;
    let mut findings = Findings::default();
    blobs::check(&data_dir.join("blobs"), repair, &mut findings)?;

    let store = ReadOnlyStore::open(&data_dir.join("lmdb"))
        .map_err(|e| anyhow::anyhow!("open the key-value store: {e}"))?;
    let snapshot = store
        .snapshot()
        .map_err(|e| anyhow::anyhow!("read the key-value store: {e}"))?;
    let tree = journal::check(&snapshot, &mut findings)
        .map_err(|e| anyhow::anyhow!("read the journal's tables: {e}"))?;
    coord::check(&snapshot, tree.as_ref(), &mut findings)
        .map_err(|e| anyhow::anyhow!("read the coordination service's tables: {e}"))
        .context("the coordination check")?;
    Ok(findings)
}
