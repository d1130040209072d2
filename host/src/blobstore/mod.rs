//! The blob store: blobs named by the SHA-256 of their bytes, on one of two
//! backends chosen by `--blobs`: files under the data directory (the
//! default, [`local`]) or objects in an S3 bucket several hosts may share
//! ([`s3`]). Both keep the same invariants, numbered alike in each module:
//! a blob is published under its name only once its writer reached a clean
//! end within its cap, a published blob is complete and never modified,
//! and an abandoned writer leaves nothing behind.
//!
//! The interface is synchronous, for the tool sandbox and the start's
//! component copies; the request paths use the `_async` forms, which on
//! the local backend are the synchronous calls themselves (its behaviour
//! is unchanged) and on S3 wait for the network without holding a thread.

pub mod local;
pub mod s3;

pub use local::{committed_files, committed_path, Found, StagedBlob};
use local::{LocalReader, LocalStore, LocalWriter};
pub use s3::UploadMemory;
use s3::{S3Reader, S3Store, S3Writer};
use std::io;
use std::path::Path;
use std::sync::Arc;

/// A SHA-256 digest.
pub type Digest32 = [u8; 32];

/// Errors of a blob write.
#[derive(Debug)]
#[non_exhaustive]
pub enum WriteError {
    /// More bytes than the writer's cap.
    TooLarge,
    /// The store cannot take the write now (the S3 service failed or
    /// cannot be reached); nothing was published.
    Unavailable(String),
    /// The filesystem failed.
    Io(io::Error),
}

impl From<io::Error> for WriteError {
    fn from(e: io::Error) -> Self {
        WriteError::Io(e)
    }
}

impl std::fmt::Display for WriteError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            WriteError::TooLarge => write!(f, "blob exceeds the size cap"),
            WriteError::Unavailable(e) => write!(f, "{e}"),
            WriteError::Io(e) => write!(f, "blob store: {e}"),
        }
    }
}

/// Committed blobs and their bytes together.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Totals {
    pub count: u64,
    pub bytes: u64,
}

/// Where blobs live, as `--blobs` names it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BlobsSetting {
    /// `local`: `<data-dir>/blobs`.
    Local,
    /// `s3://BUCKET`: the bucket, reached as the AWS environment says.
    S3 { bucket: String },
}

impl BlobsSetting {
    /// Parses a `--blobs` value; the error says what is wrong with it.
    pub fn parse(value: &str) -> Result<BlobsSetting, String> {
        if value == "local" {
            return Ok(BlobsSetting::Local);
        }
        let Some(bucket) = value.strip_prefix("s3://") else {
            return Err(format!("`{value}` is neither `local` nor `s3://BUCKET`"));
        };
        let bucket = bucket.strip_suffix('/').unwrap_or(bucket);
        // S3's bucket naming rules: 3 to 63 of [a-z0-9.-], starting and
        // ending with a letter or digit. A prefix inside the bucket is not
        // supported: the store owns its bucket's `sha256/` and `staging/`.
        let well_formed = (3..=63).contains(&bucket.len())
            && bucket
                .bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'.' || b == b'-')
            && bucket.as_bytes()[0].is_ascii_alphanumeric()
            && bucket.as_bytes()[bucket.len() - 1].is_ascii_alphanumeric();
        if !well_formed {
            return Err(format!(
                "`{value}`: a bucket name is 3 to 63 lowercase letters, digits, dots and \
                 hyphens, starting and ending with a letter or digit (no path after it)"
            ));
        }
        Ok(BlobsSetting::S3 {
            bucket: bucket.to_string(),
        })
    }
}

/// The store, on its backend.
#[derive(Debug)]
pub enum BlobStore {
    Local(Arc<LocalStore>),
    /// Blobs in the bucket; staged bodies (never named) stay in the local
    /// store's staging directory.
    S3 {
        bucket: Arc<S3Store>,
        staging: Arc<LocalStore>,
    },
}

impl BlobStore {
    /// The local store under `dir`.
    pub fn open(dir: &Path) -> io::Result<BlobStore> {
        Ok(BlobStore::Local(Arc::new(LocalStore::open(dir)?)))
    }

    /// The store `setting` names; `dir` holds the local blobs, or on S3
    /// only the staged bodies, and `upload_memory` bounds the parts S3
    /// writes hold.
    pub fn open_setting(
        setting: &BlobsSetting,
        dir: &Path,
        upload_memory: UploadMemory,
    ) -> anyhow::Result<BlobStore> {
        match setting {
            BlobsSetting::Local => Ok(BlobStore::open(dir)?),
            BlobsSetting::S3 { bucket } => Ok(BlobStore::S3 {
                bucket: Arc::new(S3Store::open(bucket, upload_memory)?),
                staging: Arc::new(LocalStore::open(dir)?),
            }),
        }
    }

    /// The committed blobs and their bytes, where the store can count
    /// them: on S3 the bucket is shared and not listed, so none.
    pub fn totals(&self) -> Option<Totals> {
        match self {
            BlobStore::Local(store) => Some(store.totals()),
            BlobStore::S3 { .. } => None,
        }
    }

    /// On S3, the bytes blob uploads in progress may hold in memory and
    /// the bytes they hold now.
    pub fn upload_memory(&self) -> Option<(u64, u64)> {
        match self {
            BlobStore::Local(_) => None,
            BlobStore::S3 { bucket, .. } => Some(bucket.upload_memory().use_bytes()),
        }
    }

    /// Opens a committed blob.
    pub fn open_blob(&self, digest: &Digest32) -> io::Result<Option<BlobReader>> {
        match self {
            BlobStore::Local(store) => Ok(store.open_blob(digest)?.map(BlobReader::Local)),
            BlobStore::S3 { bucket, .. } => Ok(bucket.open_blob(digest)?.map(BlobReader::S3)),
        }
    }

    /// [`BlobStore::open_blob`] from a request.
    pub async fn open_blob_async(&self, digest: &Digest32) -> io::Result<Option<BlobReader>> {
        match self {
            BlobStore::Local(store) => Ok(store.open_blob(digest)?.map(BlobReader::Local)),
            BlobStore::S3 { bucket, .. } => {
                Ok(bucket.open_blob_async(digest).await?.map(BlobReader::S3))
            }
        }
    }

    /// The size of a committed blob.
    #[cfg(test)]
    pub fn size(&self, digest: &Digest32) -> io::Result<Option<u64>> {
        match self {
            BlobStore::Local(store) => store.size(digest),
            BlobStore::S3 { bucket, .. } => bucket.size(digest),
        }
    }

    /// The size of a committed blob, from a request.
    pub async fn size_async(&self, digest: &Digest32) -> io::Result<Option<u64>> {
        match self {
            BlobStore::Local(store) => store.size(digest),
            BlobStore::S3 { bucket, .. } => bucket.size_async(digest).await,
        }
    }

    /// A new writer whose blob may hold at most `cap` bytes.
    pub fn writer(&self, cap: u64) -> BlobWriter {
        match self {
            BlobStore::Local(store) => BlobWriter::Local(store.writer(cap)),
            BlobStore::S3 { bucket, .. } => BlobWriter::S3(S3Writer::new(bucket, cap)),
        }
    }

    /// A new writer for bytes that will be staged, never named
    /// ([`local::LocalWriter::stage`]): on every backend the local store's
    /// (held in memory when small, else a local file).
    pub fn stager(&self, cap: u64) -> LocalWriter {
        match self {
            BlobStore::Local(store) | BlobStore::S3 { staging: store, .. } => store.writer(cap),
        }
    }

    /// Whether a commit could be made now (blocking: call it off the
    /// request threads).
    pub fn check_writable(&self) -> io::Result<()> {
        match self {
            BlobStore::Local(store) => store.check_writable(),
            BlobStore::S3 { bucket, staging } => {
                staging.check_writable()?;
                bucket.check_writable()
            }
        }
    }
}

/// A blob being written: hashes while it writes; `commit` publishes it.
/// Dropped uncommitted, it removes what it staged.
pub enum BlobWriter {
    Local(LocalWriter),
    S3(S3Writer),
}

impl BlobWriter {
    /// Appends `bytes`, refusing to pass the cap.
    pub fn write(&mut self, bytes: &[u8]) -> Result<(), WriteError> {
        match self {
            BlobWriter::Local(writer) => writer.write(bytes),
            BlobWriter::S3(writer) => writer.write(bytes),
        }
    }

    /// [`BlobWriter::write`] from a request.
    pub async fn write_async(&mut self, bytes: &[u8]) -> Result<(), WriteError> {
        match self {
            BlobWriter::Local(writer) => writer.write(bytes),
            BlobWriter::S3(writer) => writer.write_async(bytes).await,
        }
    }

    /// Bytes written so far.
    pub fn size(&self) -> u64 {
        match self {
            BlobWriter::Local(writer) => writer.size(),
            BlobWriter::S3(writer) => writer.size(),
        }
    }

    /// Makes the blob durable under its name; returns its digest and size.
    /// Blocking: call it off the request threads.
    pub fn commit(self) -> Result<(Digest32, u64), WriteError> {
        match self {
            BlobWriter::Local(writer) => writer.commit(),
            BlobWriter::S3(writer) => writer.commit(),
        }
    }
}

/// An open committed blob. Clones read the same blob.
#[derive(Debug, Clone)]
pub enum BlobReader {
    Local(LocalReader),
    S3(S3Reader),
}

impl BlobReader {
    pub fn size(&self) -> u64 {
        match self {
            BlobReader::Local(reader) => reader.size(),
            BlobReader::S3(reader) => reader.size(),
        }
    }

    /// Fills `buf` from `offset` as far as the blob goes; returns the count.
    /// Blocking: call it off the request threads.
    pub fn read_at(&self, offset: u64, buf: &mut [u8]) -> io::Result<usize> {
        match self {
            BlobReader::Local(reader) => reader.read_at(offset, buf),
            BlobReader::S3(reader) => reader.read_at(offset, buf),
        }
    }

    /// Exactly `length` bytes from `offset`, which lie within the blob,
    /// from a request: a local file is read on the blocking pool (a cold
    /// disk never stalls a request thread), an object by a ranged GET.
    pub async fn read_range(&self, offset: u64, length: usize) -> io::Result<bytes::Bytes> {
        match self {
            BlobReader::Local(reader) => {
                let reader = reader.clone();
                tokio::task::spawn_blocking(move || {
                    let mut chunk = vec![0u8; length];
                    match reader.read_at(offset, &mut chunk) {
                        Ok(n) if n == length => Ok(bytes::Bytes::from(chunk)),
                        Ok(_) => Err(io::Error::other("a blob shrank while being read")),
                        Err(e) => Err(e),
                    }
                })
                .await
                .unwrap_or_else(|e| Err(io::Error::other(e)))
            }
            BlobReader::S3(reader) => reader.read_range(offset, length).await,
        }
    }

    /// Bytes a streamed read takes at once: a file's reads are cheap, an
    /// object's each cost a request.
    pub fn chunk_size(&self) -> usize {
        match self {
            BlobReader::Local(_) => 256 << 10,
            BlobReader::S3(_) => 1 << 20,
        }
    }

    /// The digest a whole read of this blob must hash to, where the
    /// backend asks for that check: objects in a bucket can be replaced
    /// behind the host's back, files under its data directory are `labd
    /// check`'s to verify.
    pub fn digest_to_verify(&self) -> Option<Digest32> {
        match self {
            BlobReader::Local(_) => None,
            BlobReader::S3(reader) => Some(reader.digest()),
        }
    }
}

/// 16 unpredictable bytes from the OS.
pub fn random_16() -> [u8; 16] {
    let mut bytes = [0u8; 16];
    getrandom(&mut bytes);
    bytes
}

/// Fills `buf` from the kernel's random source.
pub use lab_tool_runner::getrandom;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn blobs_setting_parses_local_and_buckets_and_names_what_is_wrong() {
        assert_eq!(BlobsSetting::parse("local"), Ok(BlobsSetting::Local));
        assert_eq!(
            BlobsSetting::parse("s3://lab-blobs"),
            Ok(BlobsSetting::S3 {
                bucket: "lab-blobs".into()
            })
        );
        assert_eq!(
            BlobsSetting::parse("s3://lab-blobs/"),
            BlobsSetting::parse("s3://lab-blobs")
        );
        for bad in [
            "",
            "Local",
            "/var/blobs",
            "s3://",
            "s3://ab",
            "s3://Lab",
            "s3://lab/prefix",
            "s3://-lab",
            "gs://lab-blobs",
        ] {
            assert!(BlobsSetting::parse(bad).is_err(), "{bad}");
        }
    }
}
