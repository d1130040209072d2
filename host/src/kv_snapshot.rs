//! The key-value store read from outside its labd: opened read-only in
//! another process (LMDB admits concurrent readers beside the writer's
//! process), for backups and the integrity check.
//!
//! Invariants:
//! 1. Nothing is written to the store: the environment is opened with
//!    `MDB_RDONLY` (LMDB still records the reader in its lock file).
//! 2. A [`Snapshot`] is one read transaction: every table it shows, across
//!    every namespace, is the state of one durable commit.
//! 3. The compacted copy is made from one read transaction of its own and
//!    never takes LMDB's writer lock, so the serving labd's commits go on
//!    while it runs.
//! 4. Opening clears the reader slots of dead processes, so a reader
//!    killed mid-snapshot pins the store's old pages only until the next
//!    backup or check.

use crate::kv::{table_prefix, KvError};
use heed::types::Bytes;
use heed::{CompactionOption, Database, Env, EnvFlags, EnvOpenOptions, RoTxn, WithoutTls};
use std::fs::File;
use std::ops::Bound;
use std::path::Path;

/// More than the namespaces labd creates.
const MAX_NAMESPACES: u32 = 16;

fn storage(e: heed::Error) -> KvError {
    KvError::Storage(e.to_string())
}

/// A store opened read-only.
pub struct ReadOnlyStore {
    env: Env<WithoutTls>,
}

impl ReadOnlyStore {
    /// Opens the environment in `dir` (`<data-dir>/lmdb`), which must exist.
    pub fn open(dir: &Path) -> Result<ReadOnlyStore, KvError> {
        if !dir.join("data.mdb").is_file() {
            return Err(KvError::Storage(format!(
                "{} holds no key-value store (no data.mdb)",
                dir.display()
            )));
        }
        // After a power cut, the file may hold pages of unsynced commits;
        // only the serving labd's recovery (`kv::log` 4) makes it whole.
        match crate::kv::log::unrecovered(dir) {
            Ok(false) => {}
            Ok(true) => {
                return Err(KvError::Storage(format!(
                    "{} holds acknowledged writes past its last checkpoint, made before \
                     the host restarted: start labd on its data directory once to recover them",
                    dir.display()
                )))
            }
            Err(e) => return Err(KvError::Storage(e.to_string())),
        }
        let mut options = EnvOpenOptions::new().read_txn_without_tls();
        // No map size: LMDB takes the one the store records, which is the
        // serving labd's (a smaller one could not map its pages).
        options.max_dbs(MAX_NAMESPACES);
        // SAFETY: read-only, and this process opens the environment once;
        // the flags are the ones every reader of the store may use.
        let env = unsafe {
            options.flags(EnvFlags::READ_ONLY);
            options.open(dir)
        }
        .map_err(storage)?;
        // A reader killed mid-copy (a backup cut short) leaves its slot in
        // the lock file, pinning the pages of its snapshot; clear such
        // slots of dead processes before adding one.
        env.clear_stale_readers().map_err(storage)?;
        Ok(ReadOnlyStore { env })
    }

    /// Writes a compacted copy of one consistent state of the whole store
    /// to `file` (a `data.mdb` of its own); the caller syncs it.
    pub fn copy_compacted(&self, file: &mut File) -> Result<(), KvError> {
        self.env
            .copy_to_file(file, CompactionOption::Enabled)
            .map_err(storage)
    }

    /// One read transaction over every namespace.
    pub fn snapshot(&self) -> Result<Snapshot, KvError> {
        let txn = self.env.clone().static_read_txn().map_err(storage)?;
        Ok(Snapshot {
            env: self.env.clone(),
            txn,
        })
    }
}

/// One consistent state of the store.
pub struct Snapshot {
    env: Env<WithoutTls>,
    txn: RoTxn<'static, WithoutTls>,
}

/// A `(key, value)` of a table, borrowed from its snapshot.
pub type Row<'t> = (&'t [u8], &'t [u8]);

/// A namespace's database within a snapshot.
#[derive(Clone, Copy)]
pub struct NamespaceDb(Database<Bytes, Bytes>);

impl Snapshot {
    /// The namespace `name`, or none when the store has none by that name.
    pub fn namespace(&self, name: &str) -> Result<Option<NamespaceDb>, KvError> {
        Ok(self
            .env
            .open_database::<Bytes, Bytes>(&self.txn, Some(name))
            .map_err(storage)?
            .map(NamespaceDb))
    }

    /// The value of `key` in `table`.
    pub fn get(&self, ns: NamespaceDb, table: &str, key: &[u8]) -> Result<Option<&[u8]>, KvError> {
        let mut full = table_prefix(table)?;
        full.extend_from_slice(key);
        ns.0.get(&self.txn, &full).map_err(storage)
    }

    /// Every `(key, value)` of `table` in key order, keys without the
    /// table's prefix.
    pub fn table<'t>(
        &'t self,
        ns: NamespaceDb,
        table: &str,
    ) -> Result<impl Iterator<Item = Result<Row<'t>, KvError>> + 't, KvError> {
        let start = table_prefix(table)?;
        let mut end = start.clone();
        // The first key past the table: its separator 0x00 raised to 0x01.
        *end.last_mut().expect("a prefix ends in its separator") = 1;
        let skip = start.len();
        let bounds = (
            Bound::Included(start.as_slice()),
            Bound::Excluded(end.as_slice()),
        );
        let range = ns.0.range(&self.txn, &bounds).map_err(storage)?;
        Ok(range.map(move |row| row.map(|(k, v)| (&k[skip..], v)).map_err(storage)))
    }
}
