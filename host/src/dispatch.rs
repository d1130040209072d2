//! One HTTP request through a service component, and its response back out.

use crate::bindings::{services, types::Header, BodyPart, WitRequest, WitResponse};
use crate::blobstore::BlobReader;
use crate::body::IncomingBody;
use crate::service::Service;
use bytes::Bytes;
use http_body_util::BodyExt;
use hyper::body::{Body, Frame, Incoming, SizeHint};
use hyper::header::{HeaderName, HeaderValue};
use std::convert::Infallible;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Instant;
use tokio::sync::mpsc;

/// Blob bytes up to this size are read inline into the response; larger
/// ones stream from a blocking task so a cold disk never stalls a request
/// thread.
const INLINE_BLOB_BYTES: u64 = 64 << 10;
/// Bytes per frame of a streamed blob.
const STREAM_CHUNK: usize = 256 << 10;

/// A response body: whole, or streamed from a producer task.
pub enum ResponseBody {
    Whole(Option<Bytes>),
    Streamed(mpsc::Receiver<std::io::Result<Bytes>>),
}

impl ResponseBody {
    pub fn whole(bytes: impl Into<Bytes>) -> Self {
        ResponseBody::Whole(Some(bytes.into()))
    }
}

impl Body for ResponseBody {
    type Data = Bytes;
    type Error = std::io::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, std::io::Error>>> {
        match self.get_mut() {
            ResponseBody::Whole(bytes) => Poll::Ready(bytes.take().map(|b| Ok(Frame::data(b)))),
            ResponseBody::Streamed(rx) => rx.poll_recv(cx).map(|o| o.map(|r| r.map(Frame::data))),
        }
    }

    fn is_end_stream(&self) -> bool {
        matches!(self, ResponseBody::Whole(None))
    }

    fn size_hint(&self) -> SizeHint {
        match self {
            ResponseBody::Whole(Some(b)) => SizeHint::with_exact(b.len() as u64),
            ResponseBody::Whole(None) => SizeHint::with_exact(0),
            ResponseBody::Streamed(_) => SizeHint::default(),
        }
    }
}

pub type HttpResponse = hyper::Response<ResponseBody>;

/// A response the host itself gives, with the service's identity headers:
/// a JSON error envelope.
pub fn host_error(service: &Service, status: u16, code: &str, message: &str) -> HttpResponse {
    let loaded = service.loaded();
    let body = serde_json::json!({ "error": code, "message": message });
    let mut response = hyper::Response::new(ResponseBody::whole(body.to_string()));
    *response.status_mut() = hyper::StatusCode::from_u16(status).expect("a valid status");
    let headers = response.headers_mut();
    headers.insert("lab-service", header_value(&loaded.identity.service));
    headers.insert("lab-contract", header_value(&loaded.identity.contract));
    headers.insert("content-type", HeaderValue::from_static("application/json"));
    response
}

fn header_value(text: &str) -> HeaderValue {
    HeaderValue::from_str(text).unwrap_or_else(|_| HeaderValue::from_static("invalid"))
}

/// Serves one request on the operations listener.
pub async fn serve(
    service: Arc<Service>,
    request: hyper::Request<Incoming>,
) -> Result<HttpResponse, Infallible> {
    let started = Instant::now();
    let (operation, response) = match run(&service, request).await {
        Ok(done) => done,
        Err(e) => {
            tracing::error!(
                service = service.name,
                error = format!("{e:#}"),
                "request failed in the host or the component"
            );
            (
                None,
                host_error(
                    &service,
                    500,
                    "internal",
                    "the service failed while handling the request",
                ),
            )
        }
    };
    let elapsed = started.elapsed();
    let status = response.status().as_u16();
    let operation = operation.unwrap_or_else(|| "none".to_string());
    service.metrics.observe_request(&operation, status, elapsed);
    tracing::info!(
        service = service.name,
        route = operation,
        status,
        duration_us = elapsed.as_micros() as u64,
        "request"
    );
    Ok(response)
}

async fn run(
    service: &Service,
    request: hyper::Request<Incoming>,
) -> anyhow::Result<(Option<String>, HttpResponse)> {
    let (parts, body) = request.into_parts();
    let declared = parts
        .headers
        .get(hyper::header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse().ok());
    let wit_request = WitRequest {
        method: parts.method.as_str().to_string(),
        path: parts.uri.path().to_string(),
        query: parts.uri.query().map(str::to_string),
        headers: parts
            .headers
            .iter()
            .map(|(name, value)| Header {
                name: name.as_str().to_string(),
                value: value.as_bytes().to_vec(),
            })
            .collect(),
    };
    let body = IncomingBody::new(body.map_err(|e| e.into()).boxed_unsync(), declared);

    let (mut instance, _permit) = service.instantiate(false).await?;
    let body = instance.store.data_mut().table.push(body)?;
    let handler = instance.service.lab_platform_handler();
    let wit_response = handler
        .call_handle(&mut instance.store, &wit_request, body)
        .await?;
    let operation = wit_response.operation.clone();
    let response = into_http(wit_response, &mut instance.store.data_mut().table)?;
    Ok((operation, response))
}

/// Builds the HTTP response, taking ownership of the blob readers the
/// component handed over so they outlive its instance.
fn into_http(
    response: WitResponse,
    table: &mut wasmtime::component::ResourceTable,
) -> anyhow::Result<HttpResponse> {
    enum Part {
        Bytes(Bytes),
        Blob(BlobReader, u64, u64),
    }
    let mut parts = Vec::with_capacity(response.body.len());
    let mut blob_bytes = 0u64;
    for part in response.body {
        match part {
            BodyPart::Bytes(bytes) => parts.push(Part::Bytes(bytes.into())),
            BodyPart::Blob(slice) => {
                let reader = table.delete(slice.reader)?;
                let end = slice.offset.checked_add(slice.length);
                anyhow::ensure!(
                    end.is_some_and(|e| e <= reader.size()),
                    "a blob slice past the blob's end"
                );
                blob_bytes += slice.length;
                parts.push(Part::Blob(reader, slice.offset, slice.length));
            }
        }
    }

    let body = if blob_bytes <= INLINE_BLOB_BYTES {
        let mut whole = Vec::new();
        for part in parts {
            match part {
                Part::Bytes(bytes) => whole.extend_from_slice(&bytes),
                Part::Blob(reader, offset, length) => {
                    let start = whole.len();
                    whole.resize(start + length as usize, 0);
                    let n = reader.read_at(offset, &mut whole[start..])?;
                    anyhow::ensure!(n as u64 == length, "a blob shrank while being read");
                }
            }
        }
        ResponseBody::whole(whole)
    } else {
        let (tx, rx) = mpsc::channel(4);
        tokio::task::spawn_blocking(move || {
            for part in parts {
                let sent = match part {
                    Part::Bytes(bytes) => tx.blocking_send(Ok(bytes)).is_ok(),
                    Part::Blob(reader, offset, length) => stream_blob(&tx, &reader, offset, length),
                };
                if !sent {
                    return;
                }
            }
        });
        ResponseBody::Streamed(rx)
    };

    let mut http = hyper::Response::new(body);
    *http.status_mut() = hyper::StatusCode::from_u16(response.status)?;
    for header in response.headers {
        http.headers_mut().append(
            HeaderName::from_bytes(header.name.as_bytes())?,
            HeaderValue::from_bytes(&header.value)?,
        );
    }
    Ok(http)
}

/// Sends `length` bytes of the blob from `offset`; false once the client is
/// gone or the read failed (the failure ends the body early, which the
/// client sees as a broken transfer, never as a short success).
fn stream_blob(
    tx: &mpsc::Sender<std::io::Result<Bytes>>,
    reader: &BlobReader,
    offset: u64,
    length: u64,
) -> bool {
    let mut position = offset;
    let end = offset + length;
    while position < end {
        let mut chunk = vec![0u8; (end - position).min(STREAM_CHUNK as u64) as usize];
        let outcome = match reader.read_at(position, &mut chunk) {
            Ok(n) if n == chunk.len() => Ok(Bytes::from(chunk)),
            Ok(_) => Err(std::io::Error::other("a blob shrank while being read")),
            Err(e) => Err(e),
        };
        let failed = outcome.is_err();
        if tx.blocking_send(outcome).is_err() || failed {
            return false;
        }
        position = end.min(position + STREAM_CHUNK as u64);
    }
    true
}

/// Answers another service's request in-process: the whole body in, the
/// whole response out (blob slices read into it).
pub async fn call(
    service: &Service,
    request: services::ServiceRequest,
) -> anyhow::Result<services::ServiceResponse> {
    let started = Instant::now();
    let (path, query) = match request.target.split_once('?') {
        Some((path, query)) => (path.to_string(), Some(query.to_string())),
        None => (request.target, None),
    };
    let wit_request = WitRequest {
        method: request.method,
        path,
        query,
        headers: request.headers,
    };
    let length = request.body.len() as u64;
    let body = http_body_util::Full::new(Bytes::from(request.body))
        .map_err(|never| match never {})
        .boxed_unsync();
    let body = IncomingBody::new(body, Some(length));

    let (mut instance, _permit) = service.instantiate(true).await?;
    let body = instance.store.data_mut().table.push(body)?;
    let handler = instance.service.lab_platform_handler();
    let response = handler
        .call_handle(&mut instance.store, &wit_request, body)
        .await?;
    let table = &mut instance.store.data_mut().table;
    let mut bytes = Vec::new();
    for part in response.body {
        match part {
            BodyPart::Bytes(part) => bytes.extend_from_slice(&part),
            BodyPart::Blob(slice) => {
                let reader = table.delete(slice.reader)?;
                let start = bytes.len();
                bytes.resize(start + slice.length as usize, 0);
                let n = reader.read_at(slice.offset, &mut bytes[start..])?;
                anyhow::ensure!(n as u64 == slice.length, "a blob slice past the blob's end");
            }
        }
    }
    let operation = response.operation.as_deref().unwrap_or("none");
    service
        .metrics
        .observe_request(operation, response.status, started.elapsed());
    Ok(services::ServiceResponse {
        status: response.status,
        headers: response.headers,
        body: bytes,
    })
}
