//! Storage headroom: the key-value map's use against its ceiling, the free
//! space of the data directory's filesystem, the blob store's totals. They
//! make the `storage` health check every service reports (through
//! `runtime.storage-headroom`) and the storage gauges of `/metrics`.
//!
//! The check fails before writes do: at its alarm share of the ceiling the
//! map still takes writes, and at its alarm bound of free space the disk
//! still has room. Nothing here scans the disk: the map's use is kept by the
//! key-value writer, the blob totals by the blob store, and free space is
//! one `statvfs`.

use crate::blobstore::BlobStore;
use crate::kv::{KvStore, CEILING_SETTING};
use std::fmt::Write;
use std::io;
use std::path::PathBuf;
use std::sync::Arc;

/// The refusal of a write the data directory's filesystem had no room for.
pub const NO_SPACE: &str =
    "the data directory's filesystem is full; nothing was written; retry once space is freed";

/// Whether `e` is the filesystem out of space (or out of quota).
pub fn is_no_space(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::StorageFull | io::ErrorKind::QuotaExceeded
    )
}

/// Where the `storage` check starts failing.
#[derive(Debug, Clone, Copy)]
pub struct Alarms {
    /// Percent of the map's ceiling in use.
    pub map_percent: u8,
    /// Free bytes left on the data directory's filesystem.
    pub free_bytes: u64,
}

/// The deployment's storage, as health and metrics see it.
pub struct Storage {
    /// The LMDB store, whose map has a ceiling (none on PostgreSQL).
    kv: Option<Arc<KvStore>>,
    blobs: Arc<BlobStore>,
    data_dir: PathBuf,
    alarms: Alarms,
}

impl Storage {
    pub fn new(
        kv: Option<Arc<KvStore>>,
        blobs: Arc<BlobStore>,
        data_dir: PathBuf,
        alarms: Alarms,
    ) -> Storage {
        Storage {
            kv,
            blobs,
            data_dir,
            alarms,
        }
    }

    /// Bytes the data directory's filesystem has free for us.
    fn free_bytes(&self) -> io::Result<u64> {
        let stat = rustix::fs::statvfs(&self.data_dir)?;
        Ok(stat.f_bavail.saturating_mul(stat.f_frsize))
    }

    /// Ok while both have headroom; else what is short, by how much.
    pub fn headroom(&self) -> Result<(), String> {
        let mut short = Vec::new();
        if let Some(map) = self.kv.as_ref().map(|kv| kv.map_use()) {
            let alarm = map.ceiling / 100 * u64::from(self.alarms.map_percent);
            if map.used >= alarm {
                short.push(format!(
                    "the key-value store uses {} of its {} bytes ({CEILING_SETTING}), past the alarm at {}% (--storage-alarm-map-percent)",
                    map.used, map.ceiling, self.alarms.map_percent
                ));
            }
        }
        match self.free_bytes() {
            Ok(free) if free <= self.alarms.free_bytes => short.push(format!(
                "the data directory's filesystem has {free} bytes free, at or below the alarm at {} (--storage-alarm-free-bytes)",
                self.alarms.free_bytes
            )),
            Ok(_) => {}
            Err(e) => short.push(format!(
                "the data directory's free space cannot be read: {e}"
            )),
        }
        if short.is_empty() {
            Ok(())
        } else {
            Err(short.join("; "))
        }
    }

    /// The storage gauges, in the Prometheus text format.
    pub fn render_metrics(&self) -> String {
        let blobs = self.blobs.totals();
        let mut out = String::new();
        let mut gauge = |name: &str, help: &str, value: u64| {
            let _ = write!(
                out,
                "# HELP {name} {help}\n# TYPE {name} gauge\n{name} {value}\n"
            );
        };
        if let Some(map) = self.kv.as_ref().map(|kv| kv.map_use()) {
            gauge(
                "lab_kv_map_size_bytes",
                "The key-value store's map now (it grows, doubling, up to its ceiling).",
                map.size,
            );
            gauge(
                "lab_kv_map_ceiling_bytes",
                "The size the key-value store's map may grow to.",
                map.ceiling,
            );
            gauge(
                "lab_kv_map_used_bytes",
                "The key-value store's high-water mark: the map up to its last page in use.",
                map.used,
            );
        }
        // An unreadable figure is left out rather than reported as zero.
        if let Ok(free) = self.free_bytes() {
            gauge(
                "lab_disk_free_bytes",
                "Bytes free for labd on the data directory's filesystem.",
                free,
            );
        }
        // Blobs in a shared bucket are not counted (blobstore/s3.rs, 5).
        if let Some(blobs) = blobs {
            gauge(
                "lab_blobs",
                "Committed blobs in the blob store.",
                blobs.count,
            );
            gauge(
                "lab_blob_bytes",
                "Bytes of the committed blobs together.",
                blobs.bytes,
            );
        }
        if let Some((budget, charged)) = self.blobs.upload_memory() {
            gauge(
                "lab_blob_upload_memory_bytes",
                "Memory blob uploads to S3 in progress may hold together.",
                budget,
            );
            gauge(
                "lab_blob_upload_memory_charged_bytes",
                "Memory blob uploads to S3 in progress hold now.",
                charged,
            );
        }
        out
    }
}
