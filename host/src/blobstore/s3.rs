//! The S3 backend: blobs as objects in a bucket several hosts may share,
//! named by the SHA-256 of their bytes (`--blobs s3://BUCKET`).
//!
//! Layout in the bucket:
//! - `sha256/<64 hex digits>`: committed blobs;
//! - `staging/<random>`: large blobs being written, and write probes.
//!
//! Invariants (numbered as the local backend's):
//! 1. An object under a blob name is complete: its writer reached a clean
//!    end within its cap before anything was put under the name. A blob of
//!    less than [`PART_SIZE`] bytes is held in memory and put whole in one
//!    request (S3 shows an object only once its whole body arrived); a
//!    larger one is a multipart upload to a staging key, completed, then
//!    copied under its name (a copy, too, appears only whole). A success is
//!    S3's acknowledgement, which is its durability.
//! 2. The host never modifies a named object: a commit writes a name only
//!    where a look found nothing (a small blob's put is conditional on
//!    that, `If-None-Match: *`), and a repeated commit of equal bytes
//!    leaves the object there. Two hosts copying equal large blobs at once
//!    may both copy: the second writes the same bytes.
//! 3. A staging object never becomes visible under a blob name unless its
//!    writer reached a clean end; an abandoned writer aborts its upload
//!    (its parts were never an object) or removes its staged object. A
//!    start removes staging objects older than [`STALE_STAGING`]: younger
//!    ones may be another host's writes in progress. (Uploads a crash left
//!    incomplete are not listed by the client: a bucket lifecycle rule
//!    aborting them is the operator's, docs/operations.md.)
//! 4. Reads are ranged GETs, each answered by exactly its range or
//!    refused. An object can be replaced behind the host's back, so a
//!    response carrying a whole blob is hashed as it goes and cut short of
//!    its last chunk unless it hashes to the name (`parts.rs`).
//! 5. There are no totals: the bucket is shared and not listed.
//! 6. The parts being written are held in memory, and every writer
//!    charges what its buffer occupies (its capacity, in [`CHARGE_UNIT`]s)
//!    against one budget, `--blob-upload-memory-mib`, before it allocates
//!    it; a buffer grows by doubling up to one part and never past it. A
//!    charge that cannot be met within the wait refuses the write as
//!    unavailable; what a writer holds is released when it drops.
//!
//! Every call runs on this store's own runtime, so a request awaits it
//! without blocking a request thread, and a blocking caller (the tool
//! sandbox, the start) parks its own thread until it ends ([`block_on`]).

use super::{random_16, Digest32, WriteError};
use object_store::aws::{AmazonS3, AmazonS3Builder};
use object_store::path::Path;
use object_store::{
    BackoffConfig, ClientOptions, MultipartUpload, ObjectStore, ObjectStoreExt, PutMode,
    PutOptions, PutPayload, RetryConfig,
};
use sha2::{Digest, Sha256};
use std::future::Future;
use std::io;
use std::pin::pin;
use std::sync::Arc;
use std::task::{Context, Poll, Wake};
use std::time::{Duration, SystemTime};
use tokio::sync::Semaphore;

/// A blob up to this size is put in one request; past it, in parts of
/// this size (S3's parts are at least 5 MiB but the last).
pub const PART_SIZE: usize = 8 << 20;
/// Staging objects older than this at a start are litter.
pub const STALE_STAGING: Duration = Duration::from_secs(3600);
/// How long an unreachable S3 service is retried before a request is
/// refused (503): a failure is answered in seconds, not minutes.
const RETRY_FOR: Duration = Duration::from_secs(4);
/// What upload memory is charged in (invariant 6).
pub const CHARGE_UNIT: usize = 64 << 10;

/// The memory all writes in progress may hold together (invariant 6).
#[derive(Debug)]
pub struct UploadMemory {
    units: Arc<Semaphore>,
    total_units: usize,
    /// How long a charge waits for memory other writes release.
    wait: Duration,
}

impl UploadMemory {
    /// `bytes` in all, at least one part's worth; a charge waits at most
    /// `wait`.
    pub fn new(bytes: u64, wait: Duration) -> UploadMemory {
        let units = usize::try_from(bytes / CHARGE_UNIT as u64)
            .unwrap_or(usize::MAX)
            .clamp(PART_SIZE / CHARGE_UNIT, Semaphore::MAX_PERMITS);
        UploadMemory {
            units: Arc::new(Semaphore::new(units)),
            total_units: units,
            wait,
        }
    }

    /// The bytes writes may hold together, and the bytes they hold now.
    pub fn use_bytes(&self) -> (u64, u64) {
        let charged = self.total_units - self.units.available_permits();
        (
            (self.total_units * CHARGE_UNIT) as u64,
            (charged * CHARGE_UNIT) as u64,
        )
    }

    /// Units `bytes` of buffer occupy.
    fn units_of(bytes: usize) -> usize {
        bytes.div_ceil(CHARGE_UNIT)
    }
}

/// The bucket.
#[derive(Debug)]
pub struct S3Store {
    client: Arc<AmazonS3>,
    memory: UploadMemory,
    runtime: Option<tokio::runtime::Runtime>,
}

impl Drop for S3Store {
    fn drop(&mut self) {
        // A runtime dropped inside another one must not wait for its tasks.
        if let Some(runtime) = self.runtime.take() {
            runtime.shutdown_background();
        }
    }
}

fn blob_path(digest: &Digest32) -> Path {
    Path::from(format!("sha256/{}", hex::encode(digest)))
}

fn staging_path() -> Path {
    Path::from(format!("staging/{}", hex::encode(random_16())))
}

/// A failure of the S3 service as an I/O error; a missing object is
/// `NotFound`.
fn io_error(e: object_store::Error) -> io::Error {
    match e {
        object_store::Error::NotFound { .. } => io::Error::new(io::ErrorKind::NotFound, e),
        e => io::Error::other(format!("the blob bucket: {e}")),
    }
}

fn unavailable(e: impl std::fmt::Display) -> WriteError {
    WriteError::Unavailable(format!(
        "the blob bucket failed or cannot be reached; nothing was written; retry: {e}"
    ))
}

/// Runs `future` to its end on this thread, parked between wake-ups. The
/// futures it is given only await tasks of the store's runtime, so they
/// need no runtime of their own.
fn block_on<F: Future>(future: F) -> F::Output {
    struct Unpark(std::thread::Thread);
    impl Wake for Unpark {
        fn wake(self: Arc<Self>) {
            self.0.unpark();
        }
    }
    let waker = Arc::new(Unpark(std::thread::current())).into();
    let mut context = Context::from_waker(&waker);
    // Out of tokio's cooperative budget: a caller on a runtime's worker
    // (a tool run writing outputs) never yields to it, so a budget spent
    // would defer the wake-up until a yield that never comes.
    let mut future = pin!(tokio::task::unconstrained(future));
    loop {
        if let Poll::Ready(output) = future.as_mut().poll(&mut context) {
            return output;
        }
        std::thread::park();
    }
}

impl S3Store {
    /// The client for `bucket`, configured from the standard AWS
    /// environment (`AWS_ENDPOINT_URL`, `AWS_REGION`, `AWS_ACCESS_KEY_ID`,
    /// `AWS_SECRET_ACCESS_KEY`, ...); an `http://` endpoint is allowed (a
    /// server on the host's own network). The bucket is listed once, which
    /// proves it reachable, and stale staging objects are removed.
    pub fn open(bucket: &str, memory: UploadMemory) -> anyhow::Result<S3Store> {
        // reqwest's TLS runs on the process's rustls provider: ring.
        let _ = rustls::crypto::ring::default_provider().install_default();
        let setting = format!("--blobs s3://{bucket}");
        let endpoint = ["AWS_ENDPOINT_URL", "AWS_ENDPOINT"]
            .iter()
            .find_map(|name| std::env::var(name).ok());
        let options = ClientOptions::new()
            .with_allow_http(endpoint.is_some_and(|e| e.starts_with("http://")))
            .with_connect_timeout(Duration::from_secs(2))
            .with_timeout(Duration::from_secs(60));
        let retry = RetryConfig {
            backoff: BackoffConfig {
                init_backoff: Duration::from_millis(50),
                max_backoff: Duration::from_secs(1),
                base: 2.,
            },
            max_retries: 3,
            retry_timeout: RETRY_FOR,
        };
        let client = AmazonS3Builder::from_env()
            .with_bucket_name(bucket)
            .with_client_options(options)
            .with_retry(retry)
            .build()
            .map_err(|e| anyhow::anyhow!("{setting}: {e}"))?;
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .thread_name("labd-s3")
            .enable_all()
            .build()
            .map_err(|e| anyhow::anyhow!("{setting}: its runtime: {e}"))?;
        let store = S3Store {
            client: Arc::new(client),
            memory,
            runtime: Some(runtime),
        };
        let removed = store
            .remove_stale_staging()
            .map_err(|e| anyhow::anyhow!("{setting}: the bucket cannot be listed: {e}"))?;
        if removed > 0 {
            tracing::info!(bucket, removed, "removed stale staging objects");
        }
        Ok(store)
    }

    /// Runs `future` on the store's runtime; its outcome, awaited from
    /// anywhere.
    fn spawn<T: Send + 'static>(
        &self,
        future: impl Future<Output = T> + Send + 'static,
    ) -> impl Future<Output = io::Result<T>> + Send + 'static {
        let task = self
            .runtime
            .as_ref()
            .expect("the runtime lives as long as the store")
            .spawn(future);
        async move { task.await.map_err(io::Error::other) }
    }

    /// Removes staging objects older than [`STALE_STAGING`]; the count.
    fn remove_stale_staging(&self) -> io::Result<usize> {
        let client = Arc::clone(&self.client);
        block_on(self.spawn(async move {
            use futures_util::StreamExt;
            let cutoff = SystemTime::now() - STALE_STAGING;
            let mut listed = client.list(Some(&Path::from("staging")));
            let mut stale = Vec::new();
            while let Some(meta) = listed.next().await {
                let meta = meta.map_err(io_error)?;
                if SystemTime::from(meta.last_modified) < cutoff {
                    stale.push(meta.location);
                }
            }
            for location in &stale {
                match client.delete(location).await {
                    Ok(()) | Err(object_store::Error::NotFound { .. }) => {}
                    Err(e) => return Err(io_error(e)),
                }
            }
            Ok(stale.len())
        }))?
    }

    /// The memory writes in progress may hold, and hold (invariant 6).
    pub fn upload_memory(&self) -> &UploadMemory {
        &self.memory
    }

    /// The size of the object named `digest`, if there is one.
    async fn head(&self, digest: &Digest32) -> io::Result<Option<u64>> {
        let client = Arc::clone(&self.client);
        let path = blob_path(digest);
        self.spawn(async move {
            match client.head(&path).await {
                Ok(meta) => Ok(Some(meta.size)),
                Err(object_store::Error::NotFound { .. }) => Ok(None),
                Err(e) => Err(io_error(e)),
            }
        })
        .await?
    }

    /// Opens a committed blob (blocking).
    pub fn open_blob(self: &Arc<Self>, digest: &Digest32) -> io::Result<Option<S3Reader>> {
        block_on(self.open_blob_async(digest))
    }

    /// Opens a committed blob: its size, from a HEAD.
    pub async fn open_blob_async(
        self: &Arc<Self>,
        digest: &Digest32,
    ) -> io::Result<Option<S3Reader>> {
        Ok(self.head(digest).await?.map(|size| S3Reader {
            store: Arc::clone(self),
            digest: *digest,
            size,
        }))
    }

    /// The size of a committed blob (blocking).
    #[cfg(test)]
    pub fn size(&self, digest: &Digest32) -> io::Result<Option<u64>> {
        block_on(self.head(digest))
    }

    /// The size of a committed blob.
    pub async fn size_async(&self, digest: &Digest32) -> io::Result<Option<u64>> {
        self.head(digest).await
    }

    /// Whether a write could be made now: a probe object is put under
    /// `staging/` and removed (blocking).
    pub fn check_writable(&self) -> io::Result<()> {
        let client = Arc::clone(&self.client);
        block_on(self.spawn(async move {
            let probe = staging_path();
            client
                .put(&probe, PutPayload::from_static(b"x"))
                .await
                .map_err(io_error)?;
            client.delete(&probe).await.map_err(io_error)
        }))?
    }
}

/// A multipart upload to a staging key, once a blob outgrew one part.
struct Upload {
    staging: Path,
    parts: Box<dyn MultipartUpload>,
}

/// A blob being written to the bucket (invariants 1 and 3).
pub struct S3Writer {
    store: Arc<S3Store>,
    hasher: Sha256,
    size: u64,
    cap: u64,
    /// Bytes not yet sent: less than a part after every write.
    pending: Vec<u8>,
    /// Units of [`UploadMemory`] this writer holds (invariant 6).
    charged: usize,
    upload: Option<Upload>,
    /// A completed staging object not yet removed.
    staged: Option<Path>,
}

impl S3Writer {
    pub fn new(store: &Arc<S3Store>, cap: u64) -> S3Writer {
        S3Writer {
            store: Arc::clone(store),
            hasher: Sha256::new(),
            size: 0,
            cap,
            pending: Vec::new(),
            charged: 0,
            upload: None,
            staged: None,
        }
    }

    pub fn size(&self) -> u64 {
        self.size
    }

    /// Appends `bytes`, refusing to pass the cap (blocking).
    pub fn write(&mut self, bytes: &[u8]) -> Result<(), WriteError> {
        block_on(self.write_async(bytes))
    }

    /// Appends `bytes`, refusing to pass the cap; a full part is sent
    /// before this returns, so at most one part is held.
    pub async fn write_async(&mut self, bytes: &[u8]) -> Result<(), WriteError> {
        if self.size + bytes.len() as u64 > self.cap {
            return Err(WriteError::TooLarge);
        }
        let mut rest = bytes;
        while !rest.is_empty() {
            let room = PART_SIZE - self.pending.len();
            let (now, later) = rest.split_at(room.min(rest.len()));
            let needed = self.pending.len() + now.len();
            if needed > self.pending.capacity() {
                // Doubling, as a vector grows, up to one part.
                let grown = needed.max(self.pending.capacity() * 2).min(PART_SIZE);
                self.charge(grown).await?;
                self.pending.reserve_exact(grown - self.pending.len());
            }
            self.hasher.update(now);
            self.size += now.len() as u64;
            self.pending.extend_from_slice(now);
            rest = later;
            if self.pending.len() == PART_SIZE {
                let part = std::mem::take(&mut self.pending);
                self.send_part(part).await?;
                self.charge(0).await?;
            }
        }
        Ok(())
    }

    /// Makes this writer's charge cover exactly `bytes` of buffers,
    /// waiting for memory other writes release (invariant 6).
    async fn charge(&mut self, bytes: usize) -> Result<(), WriteError> {
        let units = UploadMemory::units_of(bytes);
        let memory = &self.store.memory;
        if units <= self.charged {
            memory.units.add_permits(self.charged - units);
            self.charged = units;
            return Ok(());
        }
        let more = u32::try_from(units - self.charged).unwrap_or(u32::MAX);
        let semaphore = Arc::clone(&memory.units);
        let wait = memory.wait;
        let acquired = self
            .store
            .spawn(
                async move { tokio::time::timeout(wait, semaphore.acquire_many_owned(more)).await },
            )
            .await;
        match acquired {
            Ok(Ok(Ok(permit))) => {
                permit.forget();
                self.charged = units;
                Ok(())
            }
            _ => Err(WriteError::Unavailable(
                "the memory for blob uploads in progress (--blob-upload-memory-mib) is held by \
                 other writes; nothing was written; retry"
                    .to_string(),
            )),
        }
    }

    /// Sends one part, starting the upload with the first.
    async fn send_part(&mut self, part: Vec<u8>) -> Result<(), WriteError> {
        if self.upload.is_none() {
            let client = Arc::clone(&self.store.client);
            let staging = staging_path();
            let path = staging.clone();
            let parts = self
                .store
                .spawn(async move { client.put_multipart(&path).await })
                .await
                .map_err(unavailable)?
                .map_err(unavailable)?;
            self.upload = Some(Upload { staging, parts });
        }
        let upload = self.upload.as_mut().expect("started above");
        let sent = upload.parts.put_part(PutPayload::from(part));
        self.store
            .spawn(sent)
            .await
            .map_err(unavailable)?
            .map_err(unavailable)
    }

    /// Publishes the blob under its name (blocking); its digest and size.
    pub fn commit(self) -> Result<(Digest32, u64), WriteError> {
        block_on(self.commit_async())
    }

    async fn commit_async(mut self) -> Result<(Digest32, u64), WriteError> {
        let digest: Digest32 = self.hasher.clone().finalize().into();
        let name = blob_path(&digest);
        let store = Arc::clone(&self.store);
        let client = Arc::clone(&store.client);
        if store.head(&digest).await.map_err(unavailable)?.is_some() {
            // Equal bytes are there (invariant 2); `drop` removes what was
            // staged.
            return Ok((digest, self.size));
        }
        match self.upload.take() {
            None => {
                let whole = PutPayload::from(std::mem::take(&mut self.pending));
                let create = PutOptions::from(PutMode::Create);
                let put = store
                    .spawn(async move { client.put_opts(&name, whole, create).await })
                    .await
                    .map_err(unavailable)?;
                match put {
                    Ok(_) | Err(object_store::Error::AlreadyExists { .. }) => {}
                    // A conditional put that lost a race may be refused
                    // before its body is read, and its connection cut:
                    // the name holds the same bytes if it holds any.
                    Err(e) => return self.committed_by_another(digest, e).await,
                }
            }
            Some(mut upload) => {
                if !self.pending.is_empty() {
                    let last = PutPayload::from(std::mem::take(&mut self.pending));
                    let sent = upload.parts.put_part(last);
                    let outcome = store.spawn(sent).await;
                    if let Err(e) = outcome
                        .map_err(unavailable)
                        .and_then(|r| r.map_err(unavailable))
                    {
                        self.upload = Some(upload);
                        return Err(e);
                    }
                }
                let staging = upload.staging.clone();
                let completed = store
                    .spawn(async move {
                        let outcome = upload.parts.complete().await;
                        (upload, outcome)
                    })
                    .await
                    .map_err(unavailable)?;
                let (upload, outcome) = completed;
                if let Err(e) = outcome {
                    self.upload = Some(upload);
                    return Err(unavailable(e));
                }
                self.staged = Some(staging.clone());
                let copied = store
                    .spawn(async move {
                        client.copy(&staging, &name).await?;
                        Ok(client.delete(&staging).await)
                    })
                    .await
                    .map_err(unavailable)?;
                let removed = match copied {
                    Ok(removed) => removed,
                    Err(e) => return self.committed_by_another(digest, e).await,
                };
                // The blob is published; a staging object left over is
                // removed again when the writer drops, else at a start.
                if let Ok(()) | Err(object_store::Error::NotFound { .. }) = removed {
                    self.staged = None;
                }
            }
        }
        Ok((digest, self.size))
    }
}

impl S3Writer {
    /// After a failed publication: committed if the name now holds an
    /// object of this size (names are content, invariant 1), else the
    /// failure.
    async fn committed_by_another(
        &self,
        digest: Digest32,
        failure: object_store::Error,
    ) -> Result<(Digest32, u64), WriteError> {
        match self.store.head(&digest).await {
            Ok(Some(size)) if size == self.size => Ok((digest, self.size)),
            _ => Err(unavailable(failure)),
        }
    }
}

impl Drop for S3Writer {
    /// Aborts an unfinished upload and removes a staged object, on the
    /// store's runtime without waiting for them (invariant 3).
    fn drop(&mut self) {
        self.store.memory.units.add_permits(self.charged);
        let upload = self.upload.take();
        let staged = self.staged.take();
        if upload.is_none() && staged.is_none() {
            return;
        }
        let client = Arc::clone(&self.store.client);
        let removal = self.store.spawn(async move {
            if let Some(mut upload) = upload {
                if let Err(e) = upload.parts.abort().await {
                    tracing::warn!(error = %e, "abort a blob upload");
                }
            }
            if let Some(staged) = staged {
                if let Err(e) = client.delete(&staged).await {
                    tracing::warn!(error = %e, "remove a staging object");
                }
            }
        });
        drop(removal);
    }
}

/// An open committed blob: its name and the size its HEAD gave.
#[derive(Debug, Clone)]
pub struct S3Reader {
    store: Arc<S3Store>,
    digest: Digest32,
    size: u64,
}

impl S3Reader {
    pub fn size(&self) -> u64 {
        self.size
    }

    pub fn digest(&self) -> Digest32 {
        self.digest
    }

    /// Fills `buf` from `offset` as far as the blob goes (blocking).
    pub fn read_at(&self, offset: u64, buf: &mut [u8]) -> io::Result<usize> {
        let length = self.size.saturating_sub(offset).min(buf.len() as u64) as usize;
        let bytes = block_on(self.read_range(offset, length))?;
        buf[..length].copy_from_slice(&bytes);
        Ok(length)
    }

    /// Exactly `length` bytes from `offset`: one ranged GET, refused unless
    /// it answers the whole range (invariant 4).
    pub async fn read_range(&self, offset: u64, length: usize) -> io::Result<bytes::Bytes> {
        if length == 0 {
            return Ok(bytes::Bytes::new());
        }
        let client = Arc::clone(&self.store.client);
        let path = blob_path(&self.digest);
        let range = offset..offset + length as u64;
        let bytes = self
            .store
            .spawn(async move { client.get_range(&path, range).await })
            .await?
            .map_err(io_error)?;
        if bytes.len() != length {
            return Err(io::Error::other(format!(
                "the blob bucket answered {} bytes for a range of {length}: the object changed",
                bytes.len()
            )));
        }
        Ok(bytes)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A blocking call on a runtime's worker that never yields (a tool run
    /// writing outputs) completes however many it makes: waiting on the
    /// store's runtime spends none of the worker's cooperative budget.
    #[test]
    fn blocking_writes_from_a_runtime_worker_never_wait_on_its_budget() {
        let dir = std::env::temp_dir().join(format!("lab-s3-budget-{}", std::process::id()));
        let server = lab_s3server::S3Server::start(&dir, "budget", ([127, 0, 0, 1], 0).into())
            .expect("an S3 server");
        // This test's process is the only reader of these variables.
        for (name, value) in server.env() {
            std::env::set_var(name, value);
        }
        let memory = UploadMemory::new(256 << 20, Duration::from_secs(2));
        let store = Arc::new(S3Store::open("budget", memory).expect("the bucket"));
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .unwrap();
        let (done, ended) = std::sync::mpsc::channel();
        runtime.spawn(async move {
            // Far past tokio's budget of 128 operations per poll.
            for _ in 0..400 {
                let mut writer = S3Writer::new(&store, 1 << 20);
                writer.write(b"x").expect("a write");
            }
            let _ = done.send(());
        });
        if ended.recv_timeout(Duration::from_secs(60)).is_err() {
            // Its worker is parked for good: the runtime cannot be dropped.
            std::mem::forget(runtime);
            panic!("the writes did not end within a minute");
        }
        runtime.shutdown_background();
        drop(server);
        let _ = std::fs::remove_dir_all(&dir);
    }
}
