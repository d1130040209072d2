//! The local backend: blob files on local disk, named by the SHA-256 of
//! their bytes.
//!
//! Layout under the store's directory:
//! - `sha256/<first two hex digits>/<64 hex digits>`: committed blobs;
//! - `staging/<random>.part`: blobs being written.
//!
//! Invariants:
//! 1. A committed file is complete and durable: its bytes were fsynced before
//!    the rename that published it, and the directory entry after.
//! 2. A committed file is never modified: a commit renames its staging file
//!    to the blob's name only where no file is, and a repeated commit of
//!    equal bytes removes its staging file, unsynced, and leaves the one
//!    there; it answers once that name is durable (it syncs the directory
//!    itself while the commit that renamed it has not).
//! 3. A staging file never becomes visible under a blob name unless its writer
//!    reached a clean end; an abandoned writer removes it, and a start removes
//!    whatever a crash left behind.
//! 4. A staged blob ([`LocalWriter::stage`]) is never named: its bytes are
//!    only read back (to be handed on, for example to the bytes service,
//!    which names what it writes itself), and its file, if it has one, is
//!    removed when it drops.
//! 5. [`LocalStore::totals`] counts the committed blobs and their bytes: a
//!    start counts the files, and each commit that names a new blob adds it
//!    (the naming lock makes "new" exact under concurrent commits of equal
//!    bytes).
//! 6. A writer holds its first [`HELD_IN_MEMORY`] bytes in memory and
//!    creates its staging file only once they outgrow that, or once its
//!    commit finds the name new: equal bytes that fit, committed or staged,
//!    never create a file.

use super::{random_16, Digest32, Totals, WriteError};
use crate::body::IncomingBody;
use crate::durable::{self, sync_dir};
use sha2::{Digest, Sha256};
use std::collections::{HashMap, HashSet};
use std::fs::{self, File, OpenOptions};
use std::io::{self, Write};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

/// Open committed blobs kept for reuse: a blob never changes, so a kept
/// descriptor reads what a fresh open would, without the open.
const OPEN_BLOBS_KEPT: usize = 256;

/// The store.
#[derive(Debug)]
pub struct LocalStore {
    committed: PathBuf,
    staging: PathBuf,
    open: Mutex<HashMap<Digest32, LocalReader>>,
    /// Held from a commit's look at its name to its rename, so that of two
    /// commits of equal bytes one names the blob (invariants 2 and 5); it
    /// holds the names renamed and not yet synced into their directory.
    naming: Mutex<HashSet<Digest32>>,
    /// Committed blobs (invariant 5).
    count: AtomicU64,
    /// Their bytes together.
    bytes: AtomicU64,
}

impl LocalStore {
    /// Opens (creating) the store under `dir`, removes staging litter a
    /// crash left behind, and counts the committed blobs.
    pub fn open(dir: &Path) -> io::Result<LocalStore> {
        let store = LocalStore {
            committed: dir.join("sha256"),
            staging: dir.join("staging"),
            open: Mutex::default(),
            naming: Mutex::default(),
            count: AtomicU64::new(0),
            bytes: AtomicU64::new(0),
        };
        durable::create_dir_all(&store.committed)?;
        durable::create_dir_all(&store.staging)?;
        for entry in fs::read_dir(&store.staging)? {
            fs::remove_file(entry?.path())?;
        }
        sync_dir(&store.staging)?;
        sync_dir(dir)?;
        visit_committed(dir, |found| {
            if let Found::Blob(_, length, _) = found {
                store.add(length);
            }
        })?;
        Ok(store)
    }

    fn add(&self, size: u64) {
        self.count.fetch_add(1, Ordering::Relaxed);
        self.bytes.fetch_add(size, Ordering::Relaxed);
    }

    /// The committed blobs and their bytes.
    pub fn totals(&self) -> Totals {
        Totals {
            count: self.count.load(Ordering::Relaxed),
            bytes: self.bytes.load(Ordering::Relaxed),
        }
    }

    fn path_of(&self, digest: &Digest32) -> PathBuf {
        committed_path(&self.committed, digest)
    }

    /// Opens a committed blob.
    pub fn open_blob(&self, digest: &Digest32) -> io::Result<Option<LocalReader>> {
        if let Some(reader) = self.open.lock().unwrap().get(digest) {
            return Ok(Some(reader.clone()));
        }
        match File::open(self.path_of(digest)) {
            Ok(file) => {
                let size = file.metadata()?.len();
                let reader = LocalReader {
                    file: Arc::new(file),
                    size,
                };
                let mut open = self.open.lock().unwrap();
                if open.len() >= OPEN_BLOBS_KEPT {
                    // Any one goes; a miss costs only an open.
                    let evicted = *open.keys().next().expect("the map is full");
                    open.remove(&evicted);
                }
                open.insert(*digest, reader.clone());
                Ok(Some(reader))
            }
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// The size of a committed blob.
    pub fn size(&self, digest: &Digest32) -> io::Result<Option<u64>> {
        if let Some(reader) = self.open.lock().unwrap().get(digest) {
            return Ok(Some(reader.size));
        }
        match fs::metadata(self.path_of(digest)) {
            Ok(meta) => Ok(Some(meta.len())),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// A new writer whose blob may hold at most `cap` bytes.
    pub fn writer(self: &Arc<Self>, cap: u64) -> LocalWriter {
        LocalWriter {
            store: Arc::clone(self),
            held: Vec::new(),
            staged: None,
            hasher: Sha256::new(),
            size: 0,
            cap,
        }
    }

    /// A new staging file, empty.
    fn staging_file(&self) -> io::Result<(File, PathBuf)> {
        let path = self
            .staging
            .join(format!("{}.part", hex::encode(random_16())));
        let file = OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&path)?;
        Ok((file, path))
    }

    /// Whether a commit could be staged now: the directory exists and a
    /// staging file can be created, written, synced and removed.
    pub fn check_writable(self: &Arc<Self>) -> io::Result<()> {
        let mut writer = self.writer(1);
        writer.write(b"x").map_err(|e| match e {
            WriteError::Io(e) => e,
            WriteError::TooLarge => io::Error::other("cap"),
            WriteError::Unavailable(e) => io::Error::other(e),
        })?;
        writer.spill()?.sync_data()
    }
}

/// Bytes a writer holds in memory before it opens a staging file: a blob
/// no larger touches the disk only when its name is new (invariant 6).
const HELD_IN_MEMORY: usize = 64 << 10;

/// A blob being written: hashes while it writes; `commit` publishes it.
/// Dropped uncommitted, it removes its staging file.
pub struct LocalWriter {
    store: Arc<LocalStore>,
    /// The bytes while they fit in [`HELD_IN_MEMORY`]; empty once staged.
    held: Vec<u8>,
    /// The staging file and its path, once the bytes outgrew memory.
    staged: Option<(File, PathBuf)>,
    hasher: Sha256,
    size: u64,
    cap: u64,
}

impl LocalWriter {
    /// Appends `bytes`, refusing to pass the cap.
    pub fn write(&mut self, bytes: &[u8]) -> Result<(), WriteError> {
        if self.size + bytes.len() as u64 > self.cap {
            return Err(WriteError::TooLarge);
        }
        if self.staged.is_none() && self.held.len() + bytes.len() <= HELD_IN_MEMORY {
            self.held.extend_from_slice(bytes);
        } else {
            self.spill()?.write_all(bytes)?;
        }
        self.hasher.update(bytes);
        self.size += bytes.len() as u64;
        Ok(())
    }

    /// The staging file, created with the bytes held so far when there is
    /// none yet.
    fn spill(&mut self) -> io::Result<&mut File> {
        if self.staged.is_none() {
            let (mut file, path) = self.store.staging_file()?;
            if let Err(e) = file.write_all(&self.held) {
                let _ = fs::remove_file(&path);
                return Err(e);
            }
            self.held = Vec::new();
            self.staged = Some((file, path));
        }
        Ok(&mut self.staged.as_mut().expect("staged just now").0)
    }

    /// Bytes written so far.
    pub fn size(&self) -> u64 {
        self.size
    }

    /// Makes the blob durable under its name; returns its digest and size.
    pub fn commit(mut self) -> Result<(Digest32, u64), WriteError> {
        let digest: Digest32 = self.hasher.clone().finalize().into();
        let target = self.store.path_of(&digest);
        let fan_out = target.parent().expect("blob paths have a parent");
        if fs::symlink_metadata(&target).is_ok() {
            // Equal bytes are named already: this copy goes unsynced, and
            // when it was held in memory it never reached the disk.
            if let Some((_, staging)) = self.staged.take() {
                let _ = fs::remove_file(&staging);
            }
            self.store.await_named(&digest, fan_out)?;
            return Ok((digest, self.size));
        }
        self.spill()?.sync_all()?;
        let (_, staging) = self.staged.take().expect("spilled just now");
        durable::create_dir_all(fan_out)?;
        let named = {
            let mut unsynced = self.store.naming.lock().unwrap();
            match fs::symlink_metadata(&target) {
                Ok(_) => Ok(false),
                Err(e) if e.kind() == io::ErrorKind::NotFound => {
                    fs::rename(&staging, &target).map(|()| {
                        unsynced.insert(digest);
                        true
                    })
                }
                Err(e) => Err(e),
            }
        };
        match named {
            Ok(true) => {
                sync_dir(fan_out)?;
                // Left listed when the sync fails: equal commits after it
                // sync the directory themselves.
                self.store.naming.lock().unwrap().remove(&digest);
                self.store.add(self.size);
            }
            Ok(false) => {
                let _ = fs::remove_file(&staging);
                self.store.await_named(&digest, fan_out)?;
            }
            Err(e) => {
                let _ = fs::remove_file(&staging);
                return Err(e.into());
            }
        }
        Ok((digest, self.size))
    }
}

impl LocalStore {
    /// Returns once the name of `digest`, found in `fan_out`, is durable:
    /// at once unless a commit renamed it and has not synced it yet.
    fn await_named(&self, digest: &Digest32, fan_out: &Path) -> io::Result<()> {
        if self.naming.lock().unwrap().contains(digest) {
            sync_dir(fan_out)?;
        }
        Ok(())
    }
}

impl LocalWriter {
    /// Ends the write without naming it: the bytes stay in their staging
    /// file, known by digest and size, until the [`StagedBlob`] drops.
    /// Nothing is synced: a staged blob is never named, so a crash loses
    /// nothing anyone was told of (and a start removes its file).
    pub fn stage(mut self) -> Result<StagedBlob, WriteError> {
        let digest: Digest32 = self.hasher.clone().finalize().into();
        let bytes = match self.staged.take() {
            Some((mut file, path)) => {
                file.flush()?;
                Staged::File(path)
            }
            None => Staged::Memory(std::mem::take(&mut self.held)),
        };
        Ok(StagedBlob {
            bytes,
            digest,
            size: self.size,
        })
    }
}

/// Bytes staged and hashed, named by nothing. Dropped, it removes its file;
/// a body opened from it keeps reading (the open descriptor holds them).
pub struct StagedBlob {
    bytes: Staged,
    pub digest: Digest32,
    pub size: u64,
}

/// Where a staged blob's bytes are: held in memory when they fit in
/// [`HELD_IN_MEMORY`], else in their staging file.
enum Staged {
    Memory(Vec<u8>),
    File(PathBuf),
}

impl StagedBlob {
    /// The staged bytes from their start, as a body.
    pub fn body(&self) -> io::Result<IncomingBody> {
        match &self.bytes {
            Staged::Memory(bytes) => Ok(IncomingBody::from_bytes(bytes.clone())),
            Staged::File(path) => Ok(IncomingBody::from_file(File::open(path)?, self.size)),
        }
    }
}

impl Drop for StagedBlob {
    fn drop(&mut self) {
        if let Staged::File(path) = &self.bytes {
            let _ = fs::remove_file(path);
        }
    }
}

impl Drop for LocalWriter {
    fn drop(&mut self) {
        if let Some((_, path)) = self.staged.take() {
            let _ = fs::remove_file(path);
        }
    }
}

/// An open committed blob. Blobs are immutable, so positioned reads need no
/// coordination, and clones share one descriptor.
#[derive(Debug, Clone)]
pub struct LocalReader {
    file: Arc<File>,
    size: u64,
}

impl LocalReader {
    pub fn size(&self) -> u64 {
        self.size
    }

    /// Fills `buf` from `offset` as far as the blob goes; returns the count.
    pub fn read_at(&self, offset: u64, buf: &mut [u8]) -> io::Result<usize> {
        let mut filled = 0;
        while filled < buf.len() {
            match self
                .file
                .read_at(&mut buf[filled..], offset + filled as u64)
            {
                Ok(0) => break,
                Ok(n) => filled += n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        Ok(filled)
    }
}

/// Where the blob `digest` lives under a `sha256` directory.
pub fn committed_path(committed: &Path, digest: &Digest32) -> PathBuf {
    let hex = hex::encode(digest);
    committed.join(&hex[..2]).join(hex)
}

/// A file found under a store's `sha256` directory.
#[derive(Debug)]
pub enum Found {
    /// Named as a blob: the digest its name claims, and its length.
    Blob(Digest32, u64, PathBuf),
    /// Anything else (a stray file or directory, a malformed name).
    Stray(PathBuf),
}

/// Every entry under `<dir>/sha256`, blobs in digest order. Reads names
/// and lengths only; it does not open the blobs.
pub fn committed_files(dir: &Path) -> io::Result<Vec<Found>> {
    let mut found = Vec::new();
    visit_committed(dir, |entry| found.push(entry))?;
    found.sort_by(|a, b| match (a, b) {
        (Found::Blob(x, ..), Found::Blob(y, ..)) => x.cmp(y),
        (Found::Blob(..), Found::Stray(_)) => std::cmp::Ordering::Less,
        (Found::Stray(_), Found::Blob(..)) => std::cmp::Ordering::Greater,
        (Found::Stray(x), Found::Stray(y)) => x.cmp(y),
    });
    Ok(found)
}

/// Gives `visit` each entry under `<dir>/sha256`, in directory order,
/// holding none of them.
fn visit_committed(dir: &Path, mut visit: impl FnMut(Found)) -> io::Result<()> {
    let committed = dir.join("sha256");
    let fan_outs = match fs::read_dir(&committed) {
        Ok(entries) => entries,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(e),
    };
    for fan_out in fan_outs {
        let fan_out = fan_out?;
        let prefix = fan_out.file_name();
        if !fan_out.file_type()?.is_dir() {
            visit(Found::Stray(fan_out.path()));
            continue;
        }
        for entry in fs::read_dir(fan_out.path())? {
            let entry = entry?;
            let path = entry.path();
            let name = entry.file_name();
            let digest = name
                .to_str()
                .filter(|n| n.len() == 64 && n.bytes().all(|b| b.is_ascii_hexdigit()))
                .filter(|n| n.bytes().all(|b| !b.is_ascii_uppercase()))
                .filter(|n| Some(&n[..2]) == prefix.to_str())
                .and_then(|n| hex::decode(n).ok())
                .and_then(|d| Digest32::try_from(d).ok());
            match digest {
                Some(digest) if entry.file_type()?.is_file() => {
                    visit(Found::Blob(digest, entry.metadata()?.len(), path));
                }
                _ => visit(Found::Stray(path)),
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn temp_dir(name: &str) -> PathBuf {
        let dir =
            std::env::temp_dir().join(format!("blobstore-{name}-{}", hex::encode(random_16())));
        fs::create_dir_all(&dir).unwrap();
        dir
    }

    #[test]
    fn commit_names_by_content_and_reads_back() {
        let dir = temp_dir("commit");
        let store = Arc::new(LocalStore::open(&dir).unwrap());
        let mut writer = store.writer(10);
        writer.write(b"hello").unwrap();
        let (digest, size) = writer.commit().unwrap();
        assert_eq!(size, 5);
        assert_eq!(digest.to_vec(), Sha256::digest(b"hello").to_vec());
        let reader = store.open_blob(&digest).unwrap().unwrap();
        let mut buf = [0u8; 8];
        assert_eq!(reader.read_at(1, &mut buf).unwrap(), 4);
        assert_eq!(&buf[..4], b"ello");
        assert_eq!(store.size(&digest).unwrap(), Some(5));
        assert_eq!(fs::read_dir(dir.join("staging")).unwrap().count(), 0);
        // Equal bytes again: the same blob, counted once, here and at a start.
        let mut again = store.writer(10);
        again.write(b"hello").unwrap();
        assert_eq!(again.commit().unwrap(), (digest, 5));
        let mut other = store.writer(10);
        other.write(b"bye").unwrap();
        other.commit().unwrap();
        let totals = Totals { count: 2, bytes: 8 };
        assert_eq!(store.totals(), totals);
        assert_eq!(LocalStore::open(&dir).unwrap().totals(), totals);
        assert_eq!(fs::read_dir(dir.join("staging")).unwrap().count(), 0);
        fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn equal_bytes_committed_at_once_are_one_blob_counted_once() {
        let dir = temp_dir("race");
        let store = Arc::new(LocalStore::open(&dir).unwrap());
        std::thread::scope(|scope| {
            for _ in 0..8 {
                scope.spawn(|| {
                    let mut writer = store.writer(64);
                    writer.write(b"the same bytes").unwrap();
                    writer.commit().unwrap()
                });
            }
        });
        assert_eq!(
            store.totals(),
            Totals {
                count: 1,
                bytes: 14
            }
        );
        assert_eq!(fs::read_dir(dir.join("staging")).unwrap().count(), 0);
        // Every name is synced once its commit answered: none stays listed
        // for the equal commits after it to sync again.
        assert!(store.naming.lock().unwrap().is_empty());
        fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn an_equal_commit_answers_while_the_name_waits_for_its_sync() {
        let dir = temp_dir("unsynced");
        let store = Arc::new(LocalStore::open(&dir).unwrap());
        let mut first = store.writer(16);
        first.write(b"named").unwrap();
        let (digest, _) = first.commit().unwrap();
        // As if a commit had renamed it and not synced its directory yet.
        store.naming.lock().unwrap().insert(digest);
        let mut equal = store.writer(16);
        equal.write(b"named").unwrap();
        assert_eq!(equal.commit().unwrap(), (digest, 5));
        // The listing is the renaming commit's to remove.
        assert!(store.naming.lock().unwrap().contains(&digest));
        assert_eq!(fs::read_dir(dir.join("staging")).unwrap().count(), 0);
        fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn over_cap_and_abandoned_writers_leave_nothing() {
        let dir = temp_dir("cap");
        let store = Arc::new(LocalStore::open(&dir).unwrap());
        let mut writer = store.writer(3);
        writer.write(b"abc").unwrap();
        assert!(matches!(writer.write(b"d"), Err(WriteError::TooLarge)));
        drop(writer);
        assert_eq!(fs::read_dir(dir.join("staging")).unwrap().count(), 0);
        assert_eq!(store.size(&Sha256::digest(b"abc").into()).unwrap(), None);
        fs::remove_dir_all(dir).unwrap();
    }

    fn staging_count(dir: &Path) -> usize {
        fs::read_dir(dir.join("staging")).unwrap().count()
    }

    /// Invariant 6: bytes that fit in memory reach a staging file only to
    /// be named; larger ones are staged as they come, and every path
    /// leaves the staging directory empty.
    #[test]
    fn small_blobs_touch_the_disk_only_when_new() {
        let dir = temp_dir("held");
        let store = Arc::new(LocalStore::open(&dir).unwrap());
        let small = vec![7u8; HELD_IN_MEMORY];
        let mut writer = store.writer(1 << 20);
        writer.write(&small).unwrap();
        assert_eq!(staging_count(&dir), 0);
        let (digest, _) = writer.commit().unwrap();
        assert_eq!(
            fs::read(committed_path(&dir.join("sha256"), &digest)).unwrap(),
            small
        );
        let mut equal = store.writer(1 << 20);
        equal.write(&small[..10]).unwrap();
        equal.write(&small[10..]).unwrap();
        assert_eq!(equal.commit().unwrap().0, digest);

        let large = vec![8u8; HELD_IN_MEMORY + 1];
        let mut writer = store.writer(1 << 20);
        writer.write(&large[..HELD_IN_MEMORY]).unwrap();
        assert_eq!(staging_count(&dir), 0);
        writer.write(&large[HELD_IN_MEMORY..]).unwrap();
        assert_eq!(staging_count(&dir), 1, "outgrown: staged");
        let (digest, size) = writer.commit().unwrap();
        assert_eq!(size, large.len() as u64);
        assert_eq!(
            fs::read(committed_path(&dir.join("sha256"), &digest)).unwrap(),
            large
        );
        let mut equal = store.writer(1 << 20);
        equal.write(&large).unwrap();
        assert_eq!(staging_count(&dir), 1);
        assert_eq!(equal.commit().unwrap().0, digest);
        assert_eq!(staging_count(&dir), 0);
        assert_eq!(store.totals().count, 2);

        let mut abandoned = store.writer(1 << 20);
        abandoned.write(&large).unwrap();
        drop(abandoned);
        assert_eq!(staging_count(&dir), 0);
        fs::remove_dir_all(dir).unwrap();
    }

    /// A staged blob reads back whole from memory or from its file, and
    /// its file goes when it drops.
    #[test]
    fn staged_blobs_read_back_from_memory_or_their_file() {
        let dir = temp_dir("staged");
        let store = Arc::new(LocalStore::open(&dir).unwrap());
        let rt = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        for (bytes, files) in [(vec![1u8; 100], 0), (vec![2u8; HELD_IN_MEMORY * 2 + 3], 1)] {
            let mut writer = store.writer(1 << 20);
            for chunk in bytes.chunks(1000) {
                writer.write(chunk).unwrap();
            }
            let staged = writer.stage().unwrap();
            assert_eq!(staging_count(&dir), files);
            assert_eq!(staged.digest.to_vec(), Sha256::digest(&bytes).to_vec());
            assert_eq!(staged.size, bytes.len() as u64);
            let mut body = staged.body().unwrap();
            drop(staged);
            assert_eq!(staging_count(&dir), 0);
            // An opened body keeps reading after the drop.
            let read = rt.block_on(async {
                let mut read = Vec::new();
                loop {
                    let chunk = body.read(1 << 20).await.unwrap();
                    if chunk.is_empty() {
                        break read;
                    }
                    read.extend_from_slice(&chunk);
                }
            });
            assert_eq!(read, bytes);
        }
        assert_eq!(store.totals().count, 0);
        fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn committed_files_lists_blobs_in_digest_order_and_strays() {
        let dir = temp_dir("list");
        let store = Arc::new(LocalStore::open(&dir).unwrap());
        let mut digests = Vec::new();
        for bytes in [&b"one"[..], b"two", b"three"] {
            let mut writer = store.writer(10);
            writer.write(bytes).unwrap();
            digests.push(writer.commit().unwrap().0);
        }
        digests.sort();
        let hex = hex::encode(digests[0]);
        let fan_out = dir.join("sha256").join(&hex[..2]);
        fs::write(fan_out.join(hex.to_uppercase()), b"x").unwrap();
        fs::write(fan_out.join("short"), b"x").unwrap();
        fs::write(dir.join("sha256/loose"), b"x").unwrap();
        let found = committed_files(&dir).unwrap();
        let blobs: Vec<Digest32> = found
            .iter()
            .filter_map(|f| match f {
                Found::Blob(digest, size, path) => {
                    assert_eq!(fs::metadata(path).unwrap().len(), *size);
                    Some(*digest)
                }
                Found::Stray(_) => None,
            })
            .collect();
        assert_eq!(blobs, digests);
        assert_eq!(found.len(), 6, "three strays: {found:?}");
        fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn open_removes_staging_litter() {
        let dir = temp_dir("litter");
        drop(LocalStore::open(&dir).unwrap());
        fs::write(dir.join("staging/crashed.part"), b"partial").unwrap();
        LocalStore::open(&dir).unwrap();
        assert_eq!(fs::read_dir(dir.join("staging")).unwrap().count(), 0);
        fs::remove_dir_all(dir).unwrap();
    }
}
