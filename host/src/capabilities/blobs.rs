//! `lab:platform/blobs`: blob files, written while hashing, read by range.

use super::RequestState;
use crate::bindings::{blobs, body};
use crate::blobstore::local::LocalWriter;
use crate::blobstore::{self, BlobReader, BlobStore, BlobWriter, StagedBlob, WriteError};
use crate::body::IncomingBody;
use crate::storage;
use std::sync::Arc;
use wasmtime::component::Resource;
use wasmtime::Result;

/// Request-body bytes moved per step of a streaming put.
const PUT_CHUNK: usize = 1 << 20;

/// A component-written blob until `finish` commits it (`None` after).
pub struct PendingBlob(Option<BlobWriter>);

fn put_error(e: WriteError) -> blobs::PutError {
    match e {
        WriteError::TooLarge => blobs::PutError::TooLarge,
        WriteError::Unavailable(e) => blobs::PutError::Unavailable(e),
        WriteError::Io(e) if storage::is_no_space(&e) => {
            blobs::PutError::Unavailable(storage::NO_SPACE.into())
        }
        WriteError::Io(e) => blobs::PutError::Storage(e.to_string()),
    }
}

/// A failed look-up: on S3 every failure is the bucket not answering now
/// (a missing object is an answer), worth a retry; on local disk, a failure.
fn read_error(store: &BlobStore, e: std::io::Error) -> blobs::ReadError {
    match store {
        BlobStore::Local(_) => blobs::ReadError::Storage(e.to_string()),
        BlobStore::S3 { .. } => blobs::ReadError::Unavailable(format!(
            "the blob bucket cannot be reached or failed; retry: {e}"
        )),
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

/// Where a body's bytes go: a blob writer, or a local staging file.
trait BodySink {
    fn size(&self) -> u64;
    async fn write(&mut self, bytes: &[u8]) -> Result<(), WriteError>;
}

impl BodySink for BlobWriter {
    fn size(&self) -> u64 {
        BlobWriter::size(self)
    }
    async fn write(&mut self, bytes: &[u8]) -> Result<(), WriteError> {
        self.write_async(bytes).await
    }
}

impl BodySink for LocalWriter {
    fn size(&self) -> u64 {
        LocalWriter::size(self)
    }
    async fn write(&mut self, bytes: &[u8]) -> Result<(), WriteError> {
        LocalWriter::write(self, bytes)
    }
}

/// Refuses a body whose announced size passes the cap before any writer.
fn check_announced(
    body: &IncomingBody,
    length: Option<u64>,
    cap: u64,
) -> Result<(), blobs::PutError> {
    if length.or(body.declared_length()).is_some_and(|n| n > cap) {
        return Err(blobs::PutError::TooLarge);
    }
    Ok(())
}

/// Streams `body` into `writer`: exactly `length` bytes when given, else
/// to the end. The writer is returned only at that clean end.
async fn write_body<W: BodySink>(
    mut writer: W,
    body: &mut IncomingBody,
    length: Option<u64>,
) -> Result<W, blobs::PutError> {
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
        writer.write(&chunk).await.map_err(put_error)?;
    }
    Ok(writer)
}

impl blobs::Host for RequestState {
    async fn put_from_body(
        &mut self,
        body: Resource<IncomingBody>,
        length: Option<u64>,
        cap: u64,
    ) -> Result<Result<blobs::BlobInfo, blobs::PutError>> {
        let store = Arc::clone(&self.env.blobs);
        let cap = cap.min(self.env.blob_cap);
        let body = self.table.get_mut(&body)?;
        if let Err(e) = check_announced(body, length, cap) {
            return Ok(Err(e));
        }
        Ok(match write_body(store.writer(cap), body, length).await {
            Ok(writer) => commit(writer).await,
            Err(e) => Err(e),
        })
    }

    async fn stage_from_body(
        &mut self,
        body: Resource<IncomingBody>,
        cap: u64,
    ) -> Result<Result<Resource<StagedBlob>, blobs::PutError>> {
        let store = Arc::clone(&self.env.blobs);
        let cap = cap.min(self.env.blob_cap);
        let body = self.table.get_mut(&body)?;
        if let Err(e) = check_announced(body, None, cap) {
            return Ok(Err(e));
        }
        let staged = match write_body(store.stager(cap), body, None).await {
            Ok(writer) => writer.stage().map_err(put_error),
            Err(e) => Err(e),
        };
        Ok(match staged {
            Ok(staged) => Ok(self.table.push(staged)?),
            Err(e) => Err(e),
        })
    }

    async fn open(
        &mut self,
        digest: Vec<u8>,
    ) -> Result<Result<Option<Resource<BlobReader>>, String>> {
        let digest = match digest_of(&digest) {
            Ok(d) => d,
            Err(e) => return Ok(Err(e)),
        };
        match self.env.blobs.open_blob_async(&digest).await {
            Ok(Some(reader)) => Ok(Ok(Some(self.table.push(reader)?))),
            Ok(None) => Ok(Ok(None)),
            Err(e) => Ok(Err(e.to_string())),
        }
    }

    async fn size(&mut self, digest: Vec<u8>) -> Result<Result<Option<u64>, String>> {
        let digest = match digest_of(&digest) {
            Ok(d) => d,
            Err(e) => return Ok(Err(e)),
        };
        Ok(self
            .env
            .blobs
            .size_async(&digest)
            .await
            .map_err(|e| e.to_string()))
    }

    async fn open_blob(
        &mut self,
        digest: Vec<u8>,
    ) -> Result<Result<Option<Resource<BlobReader>>, blobs::ReadError>> {
        let digest = match digest_of(&digest) {
            Ok(d) => d,
            Err(e) => return Ok(Err(blobs::ReadError::Storage(e))),
        };
        match self.env.blobs.open_blob_async(&digest).await {
            Ok(Some(reader)) => Ok(Ok(Some(self.table.push(reader)?))),
            Ok(None) => Ok(Ok(None)),
            Err(e) => Ok(Err(read_error(&self.env.blobs, e))),
        }
    }

    async fn blob_size(
        &mut self,
        digest: Vec<u8>,
    ) -> Result<Result<Option<u64>, blobs::ReadError>> {
        let digest = match digest_of(&digest) {
            Ok(d) => d,
            Err(e) => return Ok(Err(blobs::ReadError::Storage(e))),
        };
        Ok(self
            .env
            .blobs
            .size_async(&digest)
            .await
            .map_err(|e| read_error(&self.env.blobs, e)))
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
        Ok(match reader {
            BlobReader::Local(reader) => {
                let mut buf = vec![0u8; available as usize];
                match reader.read_at(offset, &mut buf) {
                    Ok(n) => {
                        buf.truncate(n);
                        Ok(buf)
                    }
                    Err(e) => Err(e.to_string()),
                }
            }
            BlobReader::S3(reader) => {
                let reader = reader.clone();
                match reader.read_range(offset, available as usize).await {
                    Ok(bytes) => Ok(bytes.to_vec()),
                    Err(e) => Err(e.to_string()),
                }
            }
        })
    }

    async fn drop(&mut self, this: Resource<BlobReader>) -> Result<()> {
        self.table.delete(this)?;
        Ok(())
    }
}

impl blobs::HostStagedBody for RequestState {
    async fn info(&mut self, this: Resource<StagedBlob>) -> Result<blobs::BlobInfo> {
        let staged = self.table.get(&this)?;
        Ok(blobs::BlobInfo {
            digest: staged.digest.to_vec(),
            size: staged.size,
        })
    }

    async fn open(
        &mut self,
        this: Resource<StagedBlob>,
    ) -> Result<Result<Resource<IncomingBody>, String>> {
        let staged = self.table.get(&this)?;
        Ok(match staged.body() {
            Ok(body) => Ok(self.table.push(body)?),
            Err(e) => Err(e.to_string()),
        })
    }

    async fn drop(&mut self, this: Resource<StagedBlob>) -> Result<()> {
        self.table.delete(this)?;
        Ok(())
    }
}

impl blobs::HostBlobWriter for RequestState {
    async fn new(&mut self, cap: u64) -> Result<Resource<PendingBlob>> {
        let writer = self.env.blobs.writer(cap.min(self.env.blob_cap));
        Ok(self.table.push(PendingBlob(Some(writer)))?)
    }

    async fn write(
        &mut self,
        this: Resource<PendingBlob>,
        bytes: Vec<u8>,
    ) -> Result<Result<(), blobs::PutError>> {
        let pending = self.table.get_mut(&this)?;
        Ok(match pending.0.as_mut() {
            Some(writer) => writer.write_async(&bytes).await.map_err(put_error),
            None => Err(blobs::PutError::Storage("the writer is finished".into())),
        })
    }

    async fn finish(
        &mut self,
        this: Resource<PendingBlob>,
    ) -> Result<Result<blobs::BlobInfo, blobs::PutError>> {
        let pending = self.table.get_mut(&this)?;
        Ok(match pending.0.take() {
            Some(writer) => commit(writer).await,
            None => Err(blobs::PutError::Storage("the writer is finished".into())),
        })
    }

    async fn drop(&mut self, this: Resource<PendingBlob>) -> Result<()> {
        self.table.delete(this)?;
        Ok(())
    }
}
