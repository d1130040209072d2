//! Online backups of a data directory, and restores into a fresh one
//! (`labd backup`, `labd restore`; `docs/operations.md`).
//!
//! A backup directory holds:
//! - `manifest.json`: the latest complete backup: its key-value snapshot,
//!   the files and the blobs it holds, each with its length and SHA-256;
//! - `kv/<sha256>.mdb`: compacted snapshots of the key-value store;
//! - `blobs/sha256/<2 hex>/<64 hex>`: blob files, shared by every backup
//!   made into the directory (a blob never changes, so a later backup
//!   copies only the blobs the directory lacks);
//! - `files/`: the data directory's other state (`coord/root.key`);
//! - `staging/`: files being written; `lock`: held while a backup runs.
//!
//! Invariants:
//! 1. The key-value snapshot is taken before any blob is listed. A blob a
//!    snapshot refers to was committed (fsynced, renamed, its directory
//!    fsynced) before the transaction referring to it, and blob files are
//!    never removed, so every blob the snapshot refers to is copied.
//! 2. Every file the backup writes is written to `staging/`, fsynced,
//!    renamed into place, and its directory fsynced before the manifest
//!    can name it; `manifest.json` is replaced last. A backup cut short
//!    leaves the previous manifest and everything it names intact.
//! 3. A blob is copied only when its bytes hash to its name and length;
//!    a restore copies only files whose length and SHA-256 are the
//!    manifest's. A restore builds a new directory beside its target and
//!    renames it into place whole.
//! 4. Neither takes the data directory's lock: a backup reads beside the
//!    serving labd (LMDB admits concurrent readers; blob files are
//!    immutable), and a restore writes only where no labd runs.

use crate::blobstore::{self, committed_files, committed_path, Digest32, Found};
use crate::durable::sync_dir;
use crate::kv_snapshot::ReadOnlyStore;
use anyhow::{bail, ensure, Context, Result};
use serde_json::{json, Value};
use sha2::{Digest, Sha256};
use std::fs::{self, File, OpenOptions};
use std::io::{Read, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

/// The manifest's format.
const FORMAT: &str = "lab-backup-1";
/// Data directory files besides the store and the blobs that a restore
/// needs: the development root key (the coordination service's root
/// principal when none is configured).
const FILES: &[&str] = &["coord/root.key"];
/// Bytes read and written at a time.
const CHUNK: usize = 1 << 20;

/// What one backup did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BackupReport {
    /// Blobs the backup holds.
    pub blobs: usize,
    /// Of those, blobs this run copied (the others were there already).
    pub copied: usize,
    /// Bytes of the blobs this run copied.
    pub copied_bytes: u64,
    /// Bytes of the key-value snapshot.
    pub kv_bytes: u64,
}

impl BackupReport {
    pub fn to_json(&self) -> Value {
        json!({
            "blobs": self.blobs,
            "copied": self.copied,
            "copied_bytes": self.copied_bytes,
            "kv_bytes": self.kv_bytes,
        })
    }
}

/// Backs `data_dir` up into `to` while a labd may be serving it.
pub fn backup(data_dir: &Path, to: &Path) -> Result<BackupReport> {
    let store = ReadOnlyStore::open(&data_dir.join("lmdb"))
        .map_err(|e| anyhow::anyhow!("open the key-value store of {}: {e}", data_dir.display()))?;
    let target = BackupDir::prepare(to)?;

    // Invariant 1: the snapshot first, then the blobs.
    let (kv_name, kv_digest, kv_bytes) = target.write_verified("kv", |file| {
        store
            .copy_compacted(file)
            .map_err(|e| anyhow::anyhow!("copy the key-value store: {e}"))
    })?;
    let kv_file = format!("kv/{kv_name}");

    let mut report = BackupReport {
        blobs: 0,
        copied: 0,
        copied_bytes: 0,
        kv_bytes,
    };
    let mut blobs = Vec::new();
    let committed = target.root.join("blobs/sha256");
    let mut pending = PendingBlobs::default();
    for found in committed_files(&data_dir.join("blobs")).context("list the blob files")? {
        let (digest, size, source) = match found {
            Found::Blob(digest, size, path) => (digest, size, path),
            Found::Stray(path) => {
                tracing::warn!(path = %path.display(), "not a blob file; not backed up");
                continue;
            }
        };
        let destination = committed_path(&committed, &digest);
        let present = fs::metadata(&destination).is_ok_and(|m| m.len() == size);
        if !present {
            let staged = target.staging_file()?;
            let (file, ..) = copy_verified(&source, &staged, Some((&digest, size)))?;
            pending.push(file, staged, destination, size)?;
            report.copied += 1;
            report.copied_bytes += size;
        }
        blobs.push(json!({ "digest": blob_name(&digest), "size": size }));
    }
    pending.finish(&committed)?;
    report.blobs = blobs.len();

    let mut files = Vec::new();
    for name in FILES {
        let source = data_dir.join(name);
        if !source.is_file() {
            continue;
        }
        let staged = target.staging_file()?;
        let (file, digest, size) = copy_verified(&source, &staged, None)?;
        file.sync_all()?;
        publish(&staged, &target.root.join("files").join(name))?;
        files.push(json!({ "path": name, "size": size, "sha256": hex::encode(digest) }));
    }

    let manifest = json!({
        "format": FORMAT,
        "taken_at_unix": std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs()),
        "kv": { "file": kv_file, "size": kv_bytes, "sha256": hex::encode(kv_digest) },
        "files": files,
        "blobs": blobs,
    });
    let staged = target.staging_file()?;
    write_synced(&staged, manifest.to_string().as_bytes())?;
    publish(&staged, &target.root.join("manifest.json"))?;

    // Snapshots no manifest names any more.
    for entry in fs::read_dir(target.root.join("kv"))? {
        let entry = entry?;
        if entry.file_name().to_str() != Some(kv_name.as_str()) {
            fs::remove_file(entry.path())?;
        }
    }
    sync_dir(&target.root.join("kv"))?;
    Ok(report)
}

/// A backup directory being written, locked against a second backup.
struct BackupDir {
    root: PathBuf,
    _lock: File,
}

impl BackupDir {
    fn prepare(to: &Path) -> Result<BackupDir> {
        for dir in ["staging", "kv", "blobs/sha256", "files"] {
            fs::create_dir_all(to.join(dir))
                .with_context(|| format!("create {}", to.join(dir).display()))?;
        }
        let lock_path = to.join("lock");
        let lock = OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&lock_path)
            .with_context(|| format!("open {}", lock_path.display()))?;
        match lock.try_lock() {
            Ok(()) => {}
            Err(fs::TryLockError::WouldBlock) => bail!(
                "another backup is writing into {} (it holds {})",
                to.display(),
                lock_path.display()
            ),
            Err(fs::TryLockError::Error(e)) => {
                return Err(e).with_context(|| format!("lock {}", lock_path.display()))
            }
        }
        // What a backup cut short left behind.
        for entry in fs::read_dir(to.join("staging"))? {
            fs::remove_file(entry?.path())?;
        }
        sync_dir(to)?;
        Ok(BackupDir {
            root: to.to_path_buf(),
            _lock: lock,
        })
    }

    fn staging_file(&self) -> Result<PathBuf> {
        Ok(self
            .root
            .join("staging")
            .join(format!("{}.part", hex::encode(blobstore::random_16()))))
    }

    /// Writes a file into `dir` through `fill`, named by its SHA-256:
    /// (name, digest, length).
    fn write_verified(
        &self,
        dir: &str,
        fill: impl FnOnce(&mut File) -> Result<()>,
    ) -> Result<(String, Digest32, u64)> {
        let staged = self.staging_file()?;
        let mut file = create_private(&staged)?;
        fill(&mut file)?;
        file.sync_all()?;
        drop(file);
        let (digest, size) = hash_file(&staged)?;
        let name = format!("{}.mdb", hex::encode(digest));
        publish(&staged, &self.root.join(dir).join(&name))?;
        Ok((name, digest, size))
    }
}

/// Restores the backup in `from` into `data_dir`, which must not exist or
/// be an empty directory.
pub fn restore(from: &Path, data_dir: &Path) -> Result<RestoreReport> {
    if data_dir.exists() {
        let mut entries = fs::read_dir(data_dir)
            .with_context(|| format!("read the target {}", data_dir.display()))?;
        ensure!(
            entries.next().is_none(),
            "the target {} is not empty: a restore writes only into a new or empty directory",
            data_dir.display()
        );
    }
    let manifest_path = from.join("manifest.json");
    let text = fs::read(&manifest_path).with_context(|| {
        format!(
            "{} holds no backup: read {}",
            from.display(),
            manifest_path.display()
        )
    })?;
    let manifest = Manifest::parse(&text)
        .with_context(|| format!("the manifest {} is malformed", manifest_path.display()))?;

    let name = data_dir
        .file_name()
        .context("the target names no directory")?
        .to_string_lossy()
        .into_owned();
    let parent = match data_dir.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    };
    fs::create_dir_all(&parent)?;
    let partial = parent.join(format!(
        ".{name}.restoring-{}",
        hex::encode(blobstore::random_16())
    ));
    let outcome = fill_restore(from, &manifest, &partial);
    if let Err(e) = outcome {
        let _ = fs::remove_dir_all(&partial);
        return Err(e);
    }
    if data_dir.exists() {
        fs::remove_dir(data_dir)
            .with_context(|| format!("replace the empty {}", data_dir.display()))?;
    }
    fs::rename(&partial, data_dir)
        .with_context(|| format!("move the restored state to {}", data_dir.display()))?;
    sync_dir(&parent)?;
    Ok(RestoreReport {
        blobs: manifest.blobs.len(),
        kv_bytes: manifest.kv.size,
    })
}

/// What one restore wrote.
#[derive(Debug)]
pub struct RestoreReport {
    pub blobs: usize,
    pub kv_bytes: u64,
}

fn fill_restore(from: &Path, manifest: &Manifest, partial: &Path) -> Result<()> {
    let lmdb = partial.join("lmdb");
    let committed = partial.join("blobs/sha256");
    fs::create_dir_all(&lmdb)?;
    fs::create_dir_all(&committed)?;
    fs::create_dir_all(partial.join("blobs/staging"))?;
    restore_file(
        &from.join(&manifest.kv.path),
        &lmdb.join("data.mdb"),
        &manifest.kv,
    )?;
    for file in &manifest.files {
        restore_file(
            &from.join("files").join(&file.path),
            &partial.join(&file.path),
            file,
        )?;
    }
    for (digest, size) in &manifest.blobs {
        let source = committed_path(&from.join("blobs/sha256"), digest);
        let destination = committed_path(&committed, digest);
        if let Some(fan_out) = destination.parent() {
            fs::create_dir_all(fan_out)?;
        }
        copy_verified(&source, &destination, Some((digest, *size)))?
            .0
            .sync_all()?;
    }
    // Every directory entry written above, deepest first.
    let mut dirs = vec![lmdb, partial.join("blobs/staging")];
    for entry in fs::read_dir(&committed)? {
        dirs.push(entry?.path());
    }
    dirs.push(committed);
    dirs.push(partial.join("blobs"));
    for file in &manifest.files {
        let mut dir = partial.join(&file.path);
        while dir.pop() && dir != partial {
            dirs.push(dir.clone());
        }
    }
    dirs.push(partial.to_path_buf());
    for dir in dirs {
        sync_dir(&dir)?;
    }
    Ok(())
}

/// Copies `source` to `destination` when its length and SHA-256 are the
/// manifest's.
fn restore_file(source: &Path, destination: &Path, expected: &ManifestFile) -> Result<()> {
    if let Some(parent) = destination.parent() {
        fs::create_dir_all(parent)?;
    }
    let (file, digest, size) = copy_verified(source, destination, None)?;
    file.sync_all()?;
    ensure!(
        size == expected.size && digest == expected.sha256,
        "{} is not the file the manifest names ({} bytes, sha256 {}): it holds {size} bytes hashing to {}",
        source.display(),
        expected.size,
        hex::encode(expected.sha256),
        hex::encode(digest)
    );
    Ok(())
}

/// A manifest as a restore reads it.
struct Manifest {
    kv: ManifestFile,
    files: Vec<ManifestFile>,
    blobs: Vec<(Digest32, u64)>,
}

struct ManifestFile {
    /// Relative, without `..`.
    path: PathBuf,
    size: u64,
    sha256: Digest32,
}

impl Manifest {
    fn parse(bytes: &[u8]) -> Result<Manifest> {
        let value: Value = serde_json::from_slice(bytes)?;
        ensure!(
            value["format"] == FORMAT,
            "its format is not `{FORMAT}` (found {})",
            value["format"]
        );
        let kv = ManifestFile::parse(&value["kv"], "file")?;
        let files = value["files"]
            .as_array()
            .context("no `files`")?
            .iter()
            .map(|f| ManifestFile::parse(f, "path"))
            .collect::<Result<_>>()?;
        let blobs = value["blobs"]
            .as_array()
            .context("no `blobs`")?
            .iter()
            .map(|b| {
                let digest = b["digest"]
                    .as_str()
                    .and_then(|d| d.strip_prefix("sha256:"))
                    .and_then(digest_of_hex)
                    .context("a blob without a `sha256:` digest")?;
                let size = b["size"].as_u64().context("a blob without a size")?;
                Ok((digest, size))
            })
            .collect::<Result<_>>()?;
        Ok(Manifest { kv, files, blobs })
    }
}

impl ManifestFile {
    fn parse(value: &Value, path_member: &str) -> Result<ManifestFile> {
        let path = PathBuf::from(
            value[path_member]
                .as_str()
                .context("a file without a path")?,
        );
        ensure!(
            path.components()
                .all(|c| matches!(c, std::path::Component::Normal(_))),
            "the path {} leaves the backup",
            path.display()
        );
        Ok(ManifestFile {
            path,
            size: value["size"].as_u64().context("a file without a size")?,
            sha256: value["sha256"]
                .as_str()
                .and_then(digest_of_hex)
                .context("a file without a sha256")?,
        })
    }
}

fn digest_of_hex(text: &str) -> Option<Digest32> {
    if text.len() != 64 || text.bytes().any(|b| b.is_ascii_uppercase()) {
        return None;
    }
    hex::decode(text).ok()?.try_into().ok()
}

/// `sha256:<64 hex>`.
pub fn blob_name(digest: &Digest32) -> String {
    format!("sha256:{}", hex::encode(digest))
}

/// Creates `path` for writing, readable by its owner only: a backup holds
/// every secret of the data directory.
fn create_private(path: &Path) -> Result<File> {
    OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(path)
        .with_context(|| format!("create {}", path.display()))
}

/// Copies `source` into a new file `destination`, hashing as it goes; with
/// `expected`, refuses (removing the copy) bytes that are not that blob.
/// Answers the copy, not yet synced, with its digest and length.
fn copy_verified(
    source: &Path,
    destination: &Path,
    expected: Option<(&Digest32, u64)>,
) -> Result<(File, Digest32, u64)> {
    let mut input = File::open(source).with_context(|| format!("open {}", source.display()))?;
    let mut output = create_private(destination)?;
    let copied = (|| -> Result<(Digest32, u64)> {
        let mut hasher = Sha256::new();
        let mut size = 0u64;
        let mut buf = vec![0u8; CHUNK];
        loop {
            let n = input
                .read(&mut buf)
                .with_context(|| format!("read {}", source.display()))?;
            if n == 0 {
                break;
            }
            hasher.update(&buf[..n]);
            output.write_all(&buf[..n])?;
            size += n as u64;
        }
        let digest: Digest32 = hasher.finalize().into();
        if let Some((want, want_size)) = expected {
            ensure!(
                digest == *want && size == want_size,
                "the blob file {} does not hold the blob it is named for ({want_size} bytes \
                 expected, {size} read, hashing to sha256:{}); `labd check` reports every such file",
                source.display(),
                hex::encode(digest)
            );
        }
        Ok((digest, size))
    })();
    match copied {
        Ok((digest, size)) => Ok((output, digest, size)),
        Err(e) => {
            let _ = fs::remove_file(destination);
            Err(e)
        }
    }
}

/// Blob copies written to staging and not yet synced. A batch is synced
/// by several threads at once (the filesystem commits concurrent syncs
/// together), then renamed into place; the directories the renames touched
/// are synced once, by [`PendingBlobs::finish`], before the manifest can
/// name the blobs. A file reaches its name only synced, so a crash leaves
/// a blob either absent (the next backup copies it) or whole.
#[derive(Default)]
struct PendingBlobs {
    files: Vec<(File, PathBuf, PathBuf)>,
    bytes: u64,
    dirs: std::collections::BTreeSet<PathBuf>,
}

impl PendingBlobs {
    /// Files or bytes after which a batch is synced.
    const FILES: usize = 64;
    const BYTES: u64 = 64 << 20;
    /// Threads syncing a batch.
    const SYNCERS: usize = 8;

    fn push(&mut self, file: File, staged: PathBuf, destination: PathBuf, size: u64) -> Result<()> {
        self.files.push((file, staged, destination));
        self.bytes += size;
        if self.files.len() >= Self::FILES || self.bytes >= Self::BYTES {
            self.flush()?;
        }
        Ok(())
    }

    fn flush(&mut self) -> Result<()> {
        let per_thread = self.files.len().div_ceil(Self::SYNCERS).max(1);
        std::thread::scope(|scope| {
            let syncs: Vec<_> = self
                .files
                .chunks(per_thread)
                .map(|chunk| {
                    scope.spawn(move || chunk.iter().try_for_each(|(file, ..)| file.sync_all()))
                })
                .collect();
            syncs
                .into_iter()
                .try_for_each(|s| s.join().expect("a sync thread panicked"))
        })
        .context("sync the copied blobs")?;
        for (_, staged, destination) in self.files.drain(..) {
            let dir = destination
                .parent()
                .context("a blob path has a directory")?;
            if self.dirs.insert(dir.to_path_buf()) {
                fs::create_dir_all(dir)?;
            }
            fs::rename(&staged, &destination)
                .with_context(|| format!("rename into {}", destination.display()))?;
        }
        self.bytes = 0;
        Ok(())
    }

    /// Syncs what is pending, then every directory the renames touched and
    /// `committed`, which holds them.
    fn finish(mut self, committed: &Path) -> Result<()> {
        self.flush()?;
        for dir in &self.dirs {
            sync_dir(dir)?;
        }
        sync_dir(committed)?;
        Ok(())
    }
}

/// SHA-256 and length of a file.
pub fn hash_file(path: &Path) -> std::io::Result<(Digest32, u64)> {
    let mut file = File::open(path)?;
    let mut hasher = Sha256::new();
    let mut size = 0u64;
    let mut buf = vec![0u8; CHUNK];
    loop {
        let n = file.read(&mut buf)?;
        if n == 0 {
            return Ok((hasher.finalize().into(), size));
        }
        hasher.update(&buf[..n]);
        size += n as u64;
    }
}

fn write_synced(path: &Path, bytes: &[u8]) -> Result<()> {
    let mut file = create_private(path)?;
    file.write_all(bytes)?;
    file.sync_all()?;
    Ok(())
}

/// Renames a synced staging file to `destination`, creating its directory,
/// and makes both directory entries durable.
fn publish(staged: &Path, destination: &Path) -> Result<()> {
    let dir = destination
        .parent()
        .context("a destination has a directory")?;
    if !dir.exists() {
        fs::create_dir_all(dir)?;
        if let Some(up) = dir.parent() {
            sync_dir(up)?;
        }
    }
    fs::rename(staged, destination)
        .with_context(|| format!("rename into {}", destination.display()))?;
    sync_dir(dir)?;
    Ok(())
}
