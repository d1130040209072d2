//! A response body as a component describes it: parts (bytes, blob slices,
//! relayed peer bodies) sent in order.
//!
//! Invariants:
//! 1. Parts leave the component's instance before it is dropped: blob
//!    readers and peer bodies move from its resource table into the host,
//!    so a body outlives the instance that described it.
//! 2. A streamed body is produced by one task through a bounded channel: it
//!    reads a blob slice a chunk at a time (a file on the blocking pool, so
//!    a cold disk never stalls a request thread; an object by a ranged GET)
//!    and never further ahead than the channel holds; when the receiver
//!    goes away the task stops.
//! 3. A relay is released through a [`Verifier`]; see [`crate::relay`].

use crate::bindings::BodyPart;
use crate::blobstore::BlobReader;
use crate::body::PeerBody;
use crate::relay::{RelayError, Verifier};
use bytes::Bytes;
use hyper::body::{Body, Frame};
use sha2::{Digest, Sha256};
use std::pin::Pin;
use std::task::{Context, Poll};
use tokio::sync::mpsc;
use wasmtime::component::ResourceTable;

/// Most bytes taken from a relayed body at once.
const RELAY_CHUNK: usize = 1 << 20;

/// One part of a body, held by the host.
pub enum Part {
    Bytes(Bytes),
    Blob {
        reader: BlobReader,
        offset: u64,
        length: u64,
    },
    Relay {
        body: PeerBody,
        length: u64,
        sha256: Vec<u8>,
    },
}

/// Moves a component's body parts out of its resource table, checking that
/// every blob slice lies within its blob.
pub fn take(body: Vec<BodyPart>, table: &mut ResourceTable) -> anyhow::Result<Vec<Part>> {
    let mut parts = Vec::with_capacity(body.len());
    for part in body {
        parts.push(match part {
            BodyPart::Bytes(bytes) => Part::Bytes(bytes.into()),
            BodyPart::Blob(slice) => {
                let reader = table.delete(slice.reader)?;
                let end = slice.offset.checked_add(slice.length);
                anyhow::ensure!(
                    end.is_some_and(|e| e <= reader.size()),
                    "a blob slice past the blob's end"
                );
                Part::Blob {
                    reader,
                    offset: slice.offset,
                    length: slice.length,
                }
            }
            BodyPart::Relay(relay) => Part::Relay {
                body: table.delete(relay.body)?,
                length: relay.length,
                sha256: relay.sha256,
            },
        });
    }
    Ok(parts)
}

/// Whether reading `parts` whole is cheap: no relay, and at most
/// `inline_blob_bytes` of blob slices.
pub fn small(parts: &[Part], inline_blob_bytes: u64) -> bool {
    let mut blob_bytes = 0u64;
    for part in parts {
        match part {
            Part::Bytes(_) => {}
            Part::Blob { length, .. } => blob_bytes = blob_bytes.saturating_add(*length),
            Part::Relay { .. } => return false,
        }
    }
    blob_bytes <= inline_blob_bytes
}

/// Bytes `parts` hold, relays not counted.
pub fn known_length(parts: &[Part]) -> u64 {
    parts
        .iter()
        .map(|part| match part {
            Part::Bytes(bytes) => bytes.len() as u64,
            Part::Blob { length, .. } => *length,
            Part::Relay { .. } => 0,
        })
        .fold(0, u64::saturating_add)
}

/// Reads bytes and blob slices into one buffer; a relay has no place in a
/// body read whole.
pub fn read_whole(parts: Vec<Part>) -> anyhow::Result<Vec<u8>> {
    let mut whole = Vec::new();
    for part in parts {
        match part {
            Part::Bytes(bytes) => whole.extend_from_slice(&bytes),
            Part::Blob {
                reader,
                offset,
                length,
            } => {
                let start = whole.len();
                whole.resize(start + length as usize, 0);
                let n = reader.read_at(offset, &mut whole[start..])?;
                anyhow::ensure!(n as u64 == length, "a blob shrank while being read");
            }
            Part::Relay { .. } => anyhow::bail!("a relay in a body read whole"),
        }
    }
    Ok(whole)
}

/// Verifies every empty relay now, and drops it. An empty relay holds back
/// no byte, so a client could see the response complete before a streamed
/// check ran: it must pass before the response starts.
pub async fn verify_empty_relays(parts: Vec<Part>) -> Result<Vec<Part>, RelayError> {
    let mut kept = Vec::with_capacity(parts.len());
    for part in parts {
        match part {
            Part::Relay {
                mut body,
                length: 0,
                sha256,
            } => {
                let mut verifier = Verifier::new(0, sha256);
                loop {
                    let chunk = body.read(RELAY_CHUNK).await.map_err(RelayError::Broken)?;
                    if chunk.is_empty() {
                        break;
                    }
                    verifier.push(chunk)?;
                }
                verifier.finish()?;
            }
            other => kept.push(other),
        }
    }
    Ok(kept)
}

/// Streams `parts` in order from a task of their own, at most `depth`
/// chunks ahead of the reader.
pub fn stream(parts: Vec<Part>, depth: usize) -> Streamed {
    let (tx, rx) = mpsc::channel(depth.max(1));
    tokio::spawn(produce(parts, tx));
    Streamed(rx)
}

/// A body streamed from whatever holds the sender, at most `depth` chunks
/// ahead of the reader; it ends when the sender is dropped.
pub fn channel(depth: usize) -> (Sender, Streamed) {
    let (tx, rx) = mpsc::channel(depth.max(1));
    (tx, Streamed(rx))
}

/// The receiving end of [`stream`]. An error ends the body early: the
/// reader sees a broken transfer, never a short success.
pub struct Streamed(mpsc::Receiver<std::io::Result<Bytes>>);

impl Body for Streamed {
    type Data = Bytes;
    type Error = std::io::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, std::io::Error>>> {
        self.get_mut()
            .0
            .poll_recv(cx)
            .map(|o| o.map(|r| r.map(Frame::data)))
    }
}

pub type Sender = mpsc::Sender<std::io::Result<Bytes>>;

async fn produce(parts: Vec<Part>, tx: Sender) {
    for part in parts {
        let delivered = match part {
            Part::Bytes(bytes) => bytes.is_empty() || tx.send(Ok(bytes)).await.is_ok(),
            Part::Blob {
                reader,
                offset,
                length,
            } => send_blob(&tx, reader, offset, length).await,
            Part::Relay {
                body,
                length,
                sha256,
            } => send_relay(&tx, body, Verifier::new(length, sha256)).await,
        };
        if !delivered {
            return;
        }
    }
}

/// Sends `length` bytes of the blob from `offset`; false once the reader is
/// gone or the read failed (the failure is sent as the body's end). A
/// whole blob whose backend asks for it is hashed as it goes, its last
/// chunk held back until the digest is its name's (blobstore/s3.rs,
/// invariant 4): a client that received every byte received the blob.
async fn send_blob(tx: &Sender, reader: BlobReader, offset: u64, length: u64) -> bool {
    let end = offset + length;
    let mut position = offset;
    let mut verify = reader
        .digest_to_verify()
        .filter(|_| offset == 0 && length == reader.size())
        .map(|digest| (digest, Sha256::new()));
    let mut held: Option<Bytes> = None;
    while position < end {
        let size = (end - position).min(reader.chunk_size() as u64) as usize;
        let read = reader.read_range(position, size).await;
        let failed = read.is_err();
        if let (Some((_, hasher)), Ok(chunk)) = (verify.as_mut(), &read) {
            hasher.update(chunk);
            let previous = held.replace(chunk.clone());
            if let Some(previous) = previous {
                if tx.send(Ok(previous)).await.is_err() {
                    return false;
                }
            }
        } else if tx.send(read).await.is_err() || failed {
            return false;
        }
        position += size as u64;
    }
    if let Some((digest, hasher)) = verify {
        let actual: [u8; 32] = hasher.finalize().into();
        let last = if actual == digest {
            Ok(held.unwrap_or_default())
        } else {
            Err(std::io::Error::other(format!(
                "the blob sha256:{} read back as sha256:{}: its object was altered",
                hex::encode(digest),
                hex::encode(actual)
            )))
        };
        let failed = last.is_err();
        if tx.send(last).await.is_err() || failed {
            return false;
        }
    }
    true
}

/// Relays `body` through `verifier`; false once the reader is gone or the
/// body was refused (the refusal is sent as the body's end).
async fn send_relay(tx: &Sender, mut body: PeerBody, mut verifier: Verifier) -> bool {
    let refused = loop {
        let chunk = match body.read(RELAY_CHUNK).await {
            Ok(chunk) => chunk,
            Err(reason) => break RelayError::Broken(reason),
        };
        if chunk.is_empty() {
            match verifier.finish() {
                Ok(held) => {
                    return match held {
                        Some(last) => tx.send(Ok(last)).await.is_ok(),
                        None => true,
                    }
                }
                Err(e) => break e,
            }
        }
        match verifier.push(chunk) {
            Ok(Some(out)) => {
                if tx.send(Ok(out)).await.is_err() {
                    return false;
                }
            }
            Ok(None) => {}
            Err(e) => break e,
        }
    };
    tracing::warn!(error = %refused, "relay refused: the response is cut short");
    let _ = tx.send(Err(std::io::Error::other(refused))).await;
    false
}
