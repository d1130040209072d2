//! One HTTP request through a service component, and its response back out.

use crate::bindings::{services, types::Header, WitRequest, WitResponse};
use crate::body::{with_idle_limit, BoxError, IncomingBody, PeerBody};
use crate::deferred;
use crate::parts::{self, Part};
use crate::server::Listener;
use crate::service::{Admission, InstanceError, Service, NO_MEMORY};
use bytes::Bytes;
use http_body_util::BodyExt;
use hyper::body::{Body, Frame, Incoming, SizeHint};
use hyper::header::{HeaderName, HeaderValue};
use std::convert::Infallible;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Instant;
use wasmtime::component::Resource;

/// Blob bytes up to this size are read inline into the response; larger
/// ones stream from a producer task (see [`parts`]).
const INLINE_BLOB_BYTES: u64 = 64 << 10;
/// Chunks a streamed response body reads ahead of the client.
const STREAM_DEPTH: usize = 4;
/// Chunks a peer's streamed answer reads ahead of the calling component.
const PEER_STREAM_DEPTH: usize = 1;

/// A response body: whole, or streamed from a producer task.
pub enum ResponseBody {
    Whole(Option<Bytes>),
    Streamed(parts::Streamed),
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
            ResponseBody::Streamed(stream) => Pin::new(stream).poll_frame(cx),
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

/// Seconds a client refused for want of capacity is told to wait.
const RETRY_AFTER_SECONDS: &str = "1";

/// A 503 `unavailable` with `Retry-After`: the host is at one of its limits.
pub fn unavailable(service: &Service, message: &str) -> HttpResponse {
    let mut response = host_error(service, 503, "unavailable", message);
    response.headers_mut().insert(
        hyper::header::RETRY_AFTER,
        HeaderValue::from_static(RETRY_AFTER_SECONDS),
    );
    response
}

/// Why a request got no answer from its component.
enum Failure {
    /// A limit of the host (instances, memory): worth retrying.
    Unavailable(&'static str),
    Internal(anyhow::Error),
}

impl From<anyhow::Error> for Failure {
    fn from(e: anyhow::Error) -> Self {
        Failure::Internal(e)
    }
}

impl From<wasmtime::Error> for Failure {
    fn from(e: wasmtime::Error) -> Self {
        Failure::Internal(e.into())
    }
}

impl From<wasmtime::component::ResourceTableError> for Failure {
    fn from(e: wasmtime::component::ResourceTableError) -> Self {
        Failure::Internal(e.into())
    }
}

/// Serves one request on the operations listener.
pub async fn serve(
    service: Arc<Service>,
    request: hyper::Request<Incoming>,
) -> Result<HttpResponse, Infallible> {
    let started = Instant::now();
    let (operation, response) = match run(&service, request).await {
        Ok(done) => done,
        Err(Failure::Unavailable(why)) => {
            tracing::debug!(service = service.name, why, "request refused at a limit");
            (None, unavailable(&service, why))
        }
        Err(Failure::Internal(e)) => {
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
    let operation = operation.as_deref().unwrap_or("none");
    service.metrics.observe_request(operation, status, elapsed);
    tracing::info!(
        service = service.name,
        route = operation,
        status,
        duration_us = elapsed.as_micros() as u64,
        "request"
    );
    Ok(response)
}

/// What a request from a listener is admitted as, decided from its head
/// alone: the operational routes have instances kept for them.
fn admission(parts: &hyper::http::request::Parts) -> Admission {
    let operational = matches!(parts.uri.path(), "/livez" | "/healthz");
    if operational && parts.method == hyper::Method::GET {
        Admission::Operational
    } else {
        Admission::Request
    }
}

async fn run(
    service: &Service,
    request: hyper::Request<Incoming>,
) -> Result<(Option<String>, HttpResponse), Failure> {
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
    let body = with_idle_limit(
        body.map_err(|e| e.into()).boxed_unsync(),
        service.env.body_read_timeout,
    );
    let body = IncomingBody::new(body, declared);

    let (mut instance, _permit) = match service.instantiate(admission(&parts)).await {
        Ok(admitted) => admitted,
        Err(InstanceError::Unavailable(why)) => return Err(Failure::Unavailable(why)),
        Err(InstanceError::Failed(e)) => return Err(e.into()),
    };
    instance.store.data_mut().verified = parts
        .extensions
        .get::<Listener>()
        .map(|listener| Arc::clone(&listener.verified));
    instance.store.data_mut().allow_deferred();
    let body = instance.store.data_mut().table.push(body)?;
    let handler = instance.service.lab_platform_handler();
    let mut wit_response = match handler
        .call_handle(&mut instance.store, &wit_request, body)
        .await
    {
        Ok(response) => response,
        Err(_) if instance.store.data().limits.denied() => {
            return Err(Failure::Unavailable(NO_MEMORY))
        }
        Err(e) => return Err(e.into()),
    };
    let operation = wit_response.operation.take();
    if let Some(deferred) = instance.store.data_mut().take_deferred() {
        // The instance goes before the batch is applied; its place in the
        // budget stays the request's until it is answered, so the budget
        // bounds the answers waiting on batches as it bounded the
        // instances, and the request stays counted as served for the
        // writer's groups.
        drop(instance);
        let answer = deferred.answer().await;
        let headers = answer_headers(&answer, wit_response.headers);
        let response = with_head(answer.status, headers, ResponseBody::whole(answer.body))?;
        return Ok((operation, response));
    }
    let response = into_http(wit_response, &mut instance.store.data_mut().table).await?;
    Ok((operation, response))
}

/// The headers of an answer a batch's outcome gave: the handler's, and
/// `Retry-After` where the answer asks for a later retry.
fn answer_headers(answer: &deferred::Answer, mut headers: Vec<Header>) -> Vec<Header> {
    if answer.retry_later {
        headers.push(Header {
            name: hyper::header::RETRY_AFTER.as_str().to_string(),
            value: RETRY_AFTER_SECONDS.as_bytes().to_vec(),
        });
    }
    headers
}

/// Builds the HTTP response, taking ownership of the blob readers and peer
/// bodies the component handed over so they outlive its instance.
async fn into_http(
    response: WitResponse,
    table: &mut wasmtime::component::ResourceTable,
) -> anyhow::Result<HttpResponse> {
    let parts = parts::take(response.body, table)?;
    let parts = parts::verify_empty_relays(parts)
        .await
        .map_err(|e| anyhow::anyhow!("refusing the response: {e}"))?;
    let body = if parts::small(&parts, INLINE_BLOB_BYTES) {
        ResponseBody::whole(parts::read_whole(parts)?)
    } else {
        ResponseBody::Streamed(parts::stream(parts, STREAM_DEPTH))
    };

    with_head(response.status, response.headers, body)
}

/// `body` with a component's status and headers.
fn with_head(
    status: u16,
    headers: Vec<Header>,
    body: ResponseBody,
) -> anyhow::Result<HttpResponse> {
    let mut http = hyper::Response::new(body);
    *http.status_mut() = hyper::StatusCode::from_u16(status)?;
    for header in headers {
        http.headers_mut().append(
            HeaderName::from_bytes(header.name.as_bytes())?,
            HeaderValue::from_bytes(&header.value)?,
        );
    }
    Ok(http)
}

/// The head of a request from one service to another.
pub struct CallHead {
    pub method: String,
    /// The path with its query string.
    pub target: String,
    pub headers: Vec<Header>,
}

/// A co-hosted service's answer to a call, its body not yet read.
pub struct Answer {
    pub status: u16,
    pub headers: Vec<Header>,
    parts: Vec<Part>,
}

/// Answers another service's request in-process, its body read whole.
pub async fn call(
    service: &Service,
    request: services::ServiceRequest,
) -> anyhow::Result<services::ServiceResponse> {
    let head = CallHead {
        method: request.method,
        target: request.target,
        headers: request.headers,
    };
    let (answer, _) = answer_call(service, head, IncomingBody::from_bytes(request.body)).await;
    let answer = answer?;
    // Bounded like a remote answer (`remote::Remote::call`).
    let length = parts::known_length(&answer.parts);
    anyhow::ensure!(
        length <= service.env.max_call_answer as u64,
        "the answer of {} passes {} bytes",
        service.name,
        service.env.max_call_answer
    );
    Ok(services::ServiceResponse {
        status: answer.status,
        headers: answer.headers,
        body: parts::read_whole(answer.parts)?,
    })
}

/// Answers another service's request in-process, both bodies streamed:
/// the callee reads `body` as its request body, and its answer's parts are
/// read lazily through the returned [`PeerBody`].
///
/// `body` comes back with whatever the callee left unread (none when it
/// was lost with a failed instance).
pub async fn call_streaming(
    service: &Service,
    head: CallHead,
    body: IncomingBody,
) -> (
    anyhow::Result<(u16, Vec<Header>, PeerBody)>,
    Option<IncomingBody>,
) {
    let (answer, body) = answer_call(service, head, body).await;
    let answer = answer.map(|answer| {
        let stream = parts::stream(answer.parts, PEER_STREAM_DEPTH);
        let peer = PeerBody::new(stream.map_err(BoxError::from).boxed_unsync());
        (answer.status, answer.headers, peer)
    });
    (answer, body)
}

/// Runs one call through a fresh instance of `service`, marked nested (it
/// may make no call itself), and counts it in the service's metrics.
async fn answer_call(
    service: &Service,
    head: CallHead,
    body: IncomingBody,
) -> (anyhow::Result<Answer>, Option<IncomingBody>) {
    let started = Instant::now();
    let (path, query) = match head.target.split_once('?') {
        Some((path, query)) => (path.to_string(), Some(query.to_string())),
        None => (head.target, None),
    };
    let wit_request = WitRequest {
        method: head.method,
        path,
        query,
        headers: head.headers,
    };
    let (mut instance, _) = match service.instantiate(Admission::Nested).await {
        Ok(ready) => ready,
        Err(e) => return (Err(e.into()), Some(body)),
    };
    instance.store.data_mut().allow_deferred();
    let resource = match instance.store.data_mut().table.push(body) {
        Ok(resource) => resource,
        Err(e) => return (Err(e.into()), None),
    };
    let rep = resource.rep();
    let handler = instance.service.lab_platform_handler();
    let outcome = handler
        .call_handle(&mut instance.store, &wit_request, resource)
        .await;
    let state = instance.store.data_mut();
    // The body was lent to the instance; it is the host's again.
    let body = state
        .table
        .delete(Resource::<IncomingBody>::new_own(rep))
        .ok();
    let response = match outcome {
        Ok(response) => response,
        Err(e) => return (Err(e.into()), body),
    };
    let operation = response.operation.as_deref().unwrap_or("none");
    let answer = match state.take_deferred() {
        Some(deferred) => {
            drop(instance);
            let answer = deferred.answer().await;
            Ok(Answer {
                status: answer.status,
                headers: answer_headers(&answer, response.headers),
                parts: vec![Part::Bytes(answer.body.into())],
            })
        }
        None => parts::take(response.body, &mut state.table).and_then(|parts| {
            anyhow::ensure!(
                !parts.iter().any(|p| matches!(p, Part::Relay { .. })),
                "a relay in the answer to a call"
            );
            Ok(Answer {
                status: response.status,
                headers: response.headers,
                parts,
            })
        }),
    };
    if let Ok(answer) = &answer {
        service
            .metrics
            .observe_request(operation, answer.status, started.elapsed());
    }
    (answer, body)
}
