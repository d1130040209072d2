//! Where a run's inputs come from and where its outputs go: `labd` binds
//! its blob store, `labctl` the bytes it fetched ([`MemoryStore`]).

use sha2::{Digest, Sha256};
use std::collections::HashMap;
use std::io;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

/// A SHA-256 digest: the name of committed bytes.
pub type Digest32 = [u8; 32];

/// The bytes of one bound input, read at offsets.
pub trait InputBytes: Send + Sync {
    fn size(&self) -> u64;
    /// Reads from `offset` into `buf`; answers how many bytes were read.
    fn read_at(&self, offset: u64, buf: &mut [u8]) -> io::Result<usize>;
}

/// Committed bytes by name.
pub trait InputSource: Send + Sync {
    /// None when no committed bytes have that name.
    fn open(&self, digest: &Digest32) -> io::Result<Option<Box<dyn InputBytes>>>;
}

/// Why an output write failed.
#[derive(Debug)]
pub enum WriteError {
    /// The output would pass its cap.
    TooLarge,
    Io(io::Error),
}

impl std::fmt::Display for WriteError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            WriteError::TooLarge => f.write_str("the output passes its cap"),
            WriteError::Io(e) => write!(f, "{e}"),
        }
    }
}

/// One output being written. Dropped without [`OutputWriter::commit`], it
/// leaves nothing behind.
pub trait OutputWriter: Send {
    fn write(&mut self, bytes: &[u8]) -> Result<(), WriteError>;
    /// Commits the bytes written; answers their name and size.
    fn commit(self: Box<Self>) -> Result<(Digest32, u64), WriteError>;
}

/// Where outputs are written.
pub trait OutputSink: Send + Sync {
    /// A new output that may hold at most `cap` bytes.
    fn writer(&self, cap: u64) -> io::Result<Box<dyn OutputWriter>>;
}

/// Committed bytes held in memory: the inputs a client fetched and the
/// outputs of its local runs.
#[derive(Clone, Default)]
pub struct MemoryStore {
    inner: Arc<Inner>,
}

#[derive(Default)]
struct Inner {
    blobs: Mutex<HashMap<Digest32, Arc<[u8]>>>,
    /// Writers created and neither committed nor dropped.
    open_writers: AtomicUsize,
}

impl MemoryStore {
    /// Commits `bytes`; answers their name.
    pub fn put(&self, bytes: &[u8]) -> Digest32 {
        let digest: Digest32 = Sha256::digest(bytes).into();
        self.blobs().insert(digest, bytes.into());
        digest
    }

    pub fn get(&self, digest: &Digest32) -> Option<Arc<[u8]>> {
        self.blobs().get(digest).cloned()
    }

    /// Committed blobs.
    pub fn len(&self) -> usize {
        self.blobs().len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Outputs being written: none once every run has ended.
    pub fn open_writers(&self) -> usize {
        self.inner.open_writers.load(Ordering::SeqCst)
    }

    fn blobs(&self) -> std::sync::MutexGuard<'_, HashMap<Digest32, Arc<[u8]>>> {
        self.inner
            .blobs
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

struct MemoryBytes(Arc<[u8]>);

impl InputBytes for MemoryBytes {
    fn size(&self) -> u64 {
        self.0.len() as u64
    }

    fn read_at(&self, offset: u64, buf: &mut [u8]) -> io::Result<usize> {
        let start = usize::try_from(offset)
            .unwrap_or(usize::MAX)
            .min(self.0.len());
        let read = buf.len().min(self.0.len() - start);
        buf[..read].copy_from_slice(&self.0[start..start + read]);
        Ok(read)
    }
}

impl InputSource for MemoryStore {
    fn open(&self, digest: &Digest32) -> io::Result<Option<Box<dyn InputBytes>>> {
        Ok(self
            .get(digest)
            .map(|bytes| Box::new(MemoryBytes(bytes)) as Box<dyn InputBytes>))
    }
}

struct MemoryWriter {
    store: MemoryStore,
    bytes: Vec<u8>,
    cap: u64,
}

impl OutputWriter for MemoryWriter {
    fn write(&mut self, bytes: &[u8]) -> Result<(), WriteError> {
        if (self.bytes.len() + bytes.len()) as u64 > self.cap {
            return Err(WriteError::TooLarge);
        }
        self.bytes.extend_from_slice(bytes);
        Ok(())
    }

    fn commit(self: Box<Self>) -> Result<(Digest32, u64), WriteError> {
        let size = self.bytes.len() as u64;
        Ok((self.store.put(&self.bytes), size))
    }
}

impl Drop for MemoryWriter {
    fn drop(&mut self) {
        self.store.inner.open_writers.fetch_sub(1, Ordering::SeqCst);
    }
}

impl OutputSink for MemoryStore {
    fn writer(&self, cap: u64) -> io::Result<Box<dyn OutputWriter>> {
        self.inner.open_writers.fetch_add(1, Ordering::SeqCst);
        Ok(Box::new(MemoryWriter {
            store: self.clone(),
            bytes: Vec::new(),
            cap,
        }))
    }
}
