//! The host side of the capability interfaces a component imports.
//!
//! Every request gets a fresh [`RequestState`]; what outlives a request (the
//! blob store, the build facts, the loaded component's digest) sits in the
//! shared [`ServiceEnv`].

use crate::bindings::{blobs, body, clock, ids, log, runtime, types};
use crate::blobstore::{self, BlobReader, BlobStore, BlobWriter, WriteError};
use crate::body::IncomingBody;
use std::sync::Arc;
use wasmtime::component::{Resource, ResourceTable};
use wasmtime::{Result, StoreLimits};
use wasmtime_wasi::{WasiCtx, WasiCtxView, WasiView};

/// Request-body bytes moved per step of a streaming put.
const PUT_CHUNK: usize = 1 << 20;

/// What every request of one service shares.
pub struct ServiceEnv {
    pub service: &'static str,
    pub blobs: Arc<BlobStore>,
    pub blob_cap: u64,
}

/// The store data of one request.
pub struct RequestState {
    pub table: ResourceTable,
    pub limits: StoreLimits,
    wasi: WasiCtx,
    env: Arc<ServiceEnv>,
    digest: Arc<str>,
}

impl RequestState {
    pub fn new(env: Arc<ServiceEnv>, digest: Arc<str>, limits: StoreLimits) -> Self {
        RequestState {
            table: ResourceTable::new(),
            limits,
            // No preopens, no environment, no network, no inherited stdio.
            wasi: WasiCtx::builder().build(),
            env,
            digest,
        }
    }
}

impl WasiView for RequestState {
    fn ctx(&mut self) -> WasiCtxView<'_> {
        WasiCtxView {
            ctx: &mut self.wasi,
            table: &mut self.table,
        }
    }
}

impl types::Host for RequestState {}

impl body::Host for RequestState {}

impl body::HostIncomingBody for RequestState {
    async fn read(
        &mut self,
        this: Resource<IncomingBody>,
        max: u32,
    ) -> Result<Result<Vec<u8>, body::BodyError>> {
        let body = self.table.get_mut(&this)?;
        Ok(body
            .read(max as usize)
            .await
            .map(|b| b.to_vec())
            .map_err(body::BodyError::Aborted))
    }

    async fn read_line(
        &mut self,
        this: Resource<IncomingBody>,
        max: u32,
    ) -> Result<Result<Vec<u8>, body::BodyError>> {
        let body = self.table.get_mut(&this)?;
        Ok(body
            .read_line(max as usize)
            .await
            .map_err(body::BodyError::Aborted))
    }

    async fn skip(
        &mut self,
        this: Resource<IncomingBody>,
        n: u64,
    ) -> Result<Result<u64, body::BodyError>> {
        let body = self.table.get_mut(&this)?;
        Ok(body.skip(n).await.map_err(body::BodyError::Aborted))
    }

    async fn declared_length(&mut self, this: Resource<IncomingBody>) -> Result<Option<u64>> {
        Ok(self.table.get(&this)?.declared_length())
    }

    async fn drop(&mut self, this: Resource<IncomingBody>) -> Result<()> {
        self.table.delete(this)?;
        Ok(())
    }
}

/// A component-written blob until `finish` commits it.
pub struct PendingBlob(Option<BlobWriter>);

fn put_error(e: WriteError) -> blobs::PutError {
    match e {
        WriteError::TooLarge => blobs::PutError::TooLarge,
        WriteError::Io(e) => blobs::PutError::Storage(e.to_string()),
    }
}

fn digest_of(digest: &[u8]) -> Result<blobstore::Digest32, String> {
    digest
        .try_into()
        .map_err(|_| format!("a digest is 32 octets, not {}", digest.len()))
}

/// fsync can take milliseconds; it must not stall the request threads.
async fn commit(writer: BlobWriter) -> Result<blobs::BlobInfo, blobs::PutError> {
    match tokio::task::spawn_blocking(move || writer.commit()).await {
        Ok(Ok((digest, size))) => Ok(blobs::BlobInfo {
            digest: digest.to_vec(),
            size,
        }),
        Ok(Err(e)) => Err(put_error(e)),
        Err(e) => Err(blobs::PutError::Storage(e.to_string())),
    }
}

/// Streams `body` into a new blob: exactly `length` bytes when given, else to
/// the end; commits only at that clean end.
async fn put_stream(
    store: &Arc<BlobStore>,
    body: &mut IncomingBody,
    length: Option<u64>,
    cap: u64,
) -> Result<blobs::BlobInfo, blobs::PutError> {
    let announced = length.or(body.declared_length());
    if announced.is_some_and(|n| n > cap) {
        return Err(blobs::PutError::TooLarge);
    }
    let mut writer = store.writer(cap).map_err(|e| put_error(e.into()))?;
    loop {
        let want = match length {
            Some(n) => (n - writer.size()).min(PUT_CHUNK as u64) as usize,
            None => PUT_CHUNK,
        };
        if want == 0 {
            break;
        }
        let chunk = body
            .read(want)
            .await
            .map_err(|e| blobs::PutError::Body(body::BodyError::Aborted(e)))?;
        if chunk.is_empty() {
            if length.is_some() {
                return Err(blobs::PutError::Body(body::BodyError::Aborted(
                    "the body ended before the announced size".into(),
                )));
            }
            break;
        }
        writer.write(&chunk).map_err(put_error)?;
    }
    commit(writer).await
}

impl blobs::Host for RequestState {
    async fn put_from_body(
        &mut self,
        body: Resource<IncomingBody>,
        length: Option<u64>,
        cap: u64,
    ) -> Result<Result<blobs::BlobInfo, blobs::PutError>> {
        let store = Arc::clone(&self.env.blobs);
        let body = self.table.get_mut(&body)?;
        Ok(put_stream(&store, body, length, cap).await)
    }

    async fn open(
        &mut self,
        digest: Vec<u8>,
    ) -> Result<Result<Option<Resource<BlobReader>>, String>> {
        let digest = match digest_of(&digest) {
            Ok(d) => d,
            Err(e) => return Ok(Err(e)),
        };
        match self.env.blobs.open_blob(&digest) {
            Ok(Some(reader)) => Ok(Ok(Some(self.table.push(reader)?))),
            Ok(None) => Ok(Ok(None)),
            Err(e) => Ok(Err(e.to_string())),
        }
    }

    async fn size(&mut self, digest: Vec<u8>) -> Result<Result<Option<u64>, String>> {
        Ok(digest_of(&digest).and_then(|d| self.env.blobs.size(&d).map_err(|e| e.to_string())))
    }

    async fn check_writable(&mut self) -> Result<Result<(), String>> {
        let store = Arc::clone(&self.env.blobs);
        Ok(
            match tokio::task::spawn_blocking(move || store.check_writable()).await {
                Ok(outcome) => outcome.map_err(|e| e.to_string()),
                Err(e) => Err(e.to_string()),
            },
        )
    }
}

impl blobs::HostBlobReader for RequestState {
    async fn size(&mut self, this: Resource<BlobReader>) -> Result<u64> {
        Ok(self.table.get(&this)?.size())
    }

    async fn read(
        &mut self,
        this: Resource<BlobReader>,
        offset: u64,
        length: u32,
    ) -> Result<Result<Vec<u8>, String>> {
        let reader = self.table.get(&this)?;
        let available = reader.size().saturating_sub(offset).min(u64::from(length));
        let mut buf = vec![0u8; available as usize];
        Ok(match reader.read_at(offset, &mut buf) {
            Ok(n) => {
                buf.truncate(n);
                Ok(buf)
            }
            Err(e) => Err(e.to_string()),
        })
    }

    async fn drop(&mut self, this: Resource<BlobReader>) -> Result<()> {
        self.table.delete(this)?;
        Ok(())
    }
}

impl blobs::HostBlobWriter for RequestState {
    async fn new(&mut self, cap: u64) -> Result<Resource<PendingBlob>> {
        // A writer that cannot be staged fails on its first write.
        let writer = self.env.blobs.writer(cap).ok();
        Ok(self.table.push(PendingBlob(writer))?)
    }

    async fn write(
        &mut self,
        this: Resource<PendingBlob>,
        bytes: Vec<u8>,
    ) -> Result<Result<(), blobs::PutError>> {
        let pending = self.table.get_mut(&this)?;
        Ok(match pending.0.as_mut() {
            Some(writer) => writer.write(&bytes).map_err(put_error),
            None => Err(blobs::PutError::Storage("the writer is not usable".into())),
        })
    }

    async fn finish(
        &mut self,
        this: Resource<PendingBlob>,
    ) -> Result<Result<blobs::BlobInfo, blobs::PutError>> {
        let pending = self.table.get_mut(&this)?;
        Ok(match pending.0.take() {
            Some(writer) => commit(writer).await,
            None => Err(blobs::PutError::Storage("the writer is not usable".into())),
        })
    }

    async fn drop(&mut self, this: Resource<PendingBlob>) -> Result<()> {
        self.table.delete(this)?;
        Ok(())
    }
}

impl clock::Host for RequestState {
    async fn now(&mut self) -> Result<types::Instant> {
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap_or_default();
        Ok(types::Instant {
            seconds: now.as_secs(),
            nanoseconds: now.subsec_nanos(),
        })
    }
}

impl ids::Host for RequestState {
    async fn random_bytes(&mut self, n: u8) -> Result<Vec<u8>> {
        let mut bytes = vec![0u8; usize::from(n.min(64))];
        blobstore::getrandom(&mut bytes);
        Ok(bytes)
    }
}

impl log::Host for RequestState {
    async fn emit(&mut self, level: log::Level, message: String) -> Result<()> {
        let service = self.env.service;
        match level {
            log::Level::Trace => tracing::trace!(target: "component", service, "{message}"),
            log::Level::Debug => tracing::debug!(target: "component", service, "{message}"),
            log::Level::Info => tracing::info!(target: "component", service, "{message}"),
            log::Level::Warn => tracing::warn!(target: "component", service, "{message}"),
            log::Level::Error => tracing::error!(target: "component", service, "{message}"),
        }
        Ok(())
    }
}

impl runtime::Host for RequestState {
    async fn build(&mut self) -> Result<runtime::BuildInfo> {
        Ok(runtime::BuildInfo {
            revision: env!("LAB_BUILD_REVISION").to_string(),
            dirty: env!("LAB_BUILD_DIRTY") == "true",
            toolchain: env!("LAB_BUILD_TOOLCHAIN").to_string(),
        })
    }

    async fn component_digest(&mut self) -> Result<String> {
        Ok(self.digest.to_string())
    }

    async fn blob_cap(&mut self) -> Result<u64> {
        Ok(self.env.blob_cap)
    }
}
