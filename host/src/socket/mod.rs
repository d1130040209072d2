//! The socket binding (`GET /v1/ws`) of a service whose component exports
//! `socket` (design.md, "Sockets").
//!
//! - this module: the answer to a request for `/v1/ws` (the upgrade, or
//!   the refusal of a request that is not one);
//! - [`connection`]: one upgraded connection, its frames, calls and close;
//! - [`call`]: one call through a fresh instance of the component;
//! - [`pair`]: the connection's reader and writer, polled as one task.
//!
//! The host checks framing and the per-connection limits; the component
//! decodes the envelope and answers every call it is given.

mod call;
mod connection;
mod pair;

pub use connection::Writing;

use crate::dispatch::{host_error, HttpResponse, ResponseBody};
use crate::events::Hub;
use crate::server::Listener;
use crate::service::Service;
use hyper::body::Incoming;
use hyper::header::{self, HeaderMap, HeaderValue};
use std::sync::Arc;
use std::sync::Mutex;
use tokio::sync::Notify;

/// The route of the socket binding on the operations listener.
pub const ROUTE: &str = "/v1/ws";

/// What every socket of the process shares.
pub struct Sockets {
    pub hub: Arc<Hub>,
    /// Bytes of frames held by calls in flight, across every connection
    /// (`--socket-frame-budget-bytes`).
    budget: Arc<FrameBudget>,
    /// How a connection's writer paces and bounds its writes.
    writing: connection::Writing,
}

impl Sockets {
    /// `hub`: the process's subscription hub, which every socket joins.
    pub fn new(hub: Arc<Hub>, budget_bytes: u64, writing: Writing) -> Arc<Sockets> {
        Arc::new(Sockets {
            hub,
            writing,
            budget: Arc::new(FrameBudget {
                total: budget_bytes,
                used: Mutex::new(0),
                released: Notify::new(),
            }),
        })
    }
}

/// The host-wide budget of frame bytes held by calls in flight. Not fair
/// on purpose: a large frame waiting for room never holds back a smaller
/// one of another connection that fits now.
pub struct FrameBudget {
    total: u64,
    used: Mutex<u64>,
    released: Notify,
}

/// A frame's bytes of the budget, given back on drop.
pub struct Held {
    budget: Arc<FrameBudget>,
    bytes: u64,
}

impl FrameBudget {
    /// Waits until `bytes` fit (a frame larger than the whole budget waits
    /// until nothing else is held), then holds them.
    pub async fn hold(self: &Arc<Self>, bytes: u64) -> Held {
        let bytes = bytes.min(self.total);
        loop {
            let released = self.released.notified();
            tokio::pin!(released);
            released.as_mut().enable();
            {
                let mut used = self.used.lock().unwrap();
                if *used + bytes <= self.total {
                    *used += bytes;
                    return Held {
                        budget: Arc::clone(self),
                        bytes,
                    };
                }
            }
            released.await;
        }
    }
}

impl Drop for Held {
    fn drop(&mut self) {
        *self.budget.used.lock().unwrap() -= self.bytes;
        self.budget.released.notify_waiters();
    }
}

/// Whether `request` is for the socket binding of `service`.
pub fn is_for(service: &Service, request: &hyper::Request<Incoming>) -> bool {
    request.uri().path() == ROUTE && service.loaded().socket.is_some()
}

/// The answer to a request for [`ROUTE`]: the upgrade to a socket served
/// by [`connection::serve`], or a refusal of a request that is not an
/// upgrade (405 for another method, 400 for a GET without the upgrade).
pub fn answer(
    service: Arc<Service>,
    sockets: Arc<Sockets>,
    mut request: hyper::Request<Incoming>,
) -> HttpResponse {
    if request.method() != hyper::Method::GET {
        let mut response = host_error(&service, 405, "invalid", "this route supports GET only");
        response
            .headers_mut()
            .insert(header::ALLOW, HeaderValue::from_static("GET"));
        return response;
    }
    let headers = request.headers();
    let key = headers.get(header::SEC_WEBSOCKET_KEY).cloned();
    let (Some(key), true, true) = (
        key,
        has_token(headers, header::UPGRADE, "websocket"),
        has_token(headers, header::CONNECTION, "upgrade"),
    ) else {
        return host_error(
            &service,
            400,
            "invalid",
            "`/v1/ws` is a WebSocket: the request must ask for an upgrade (RFC 6455)",
        );
    };
    if headers
        .get(header::SEC_WEBSOCKET_VERSION)
        .is_none_or(|v| v.as_bytes() != b"13")
    {
        let mut response = host_error(&service, 400, "invalid", "the WebSocket version must be 13");
        response.headers_mut().insert(
            header::SEC_WEBSOCKET_VERSION,
            HeaderValue::from_static("13"),
        );
        return response;
    }
    let identity = service.loaded().identity.clone();
    // The subprotocol is the service's name (`coord`).
    let offered = has_token(headers, header::SEC_WEBSOCKET_PROTOCOL, &identity.service);
    let Some(listener) = request.extensions().get::<Listener>().cloned() else {
        return host_error(&service, 500, "internal", "the connection has no listener");
    };
    let upgrade = hyper::upgrade::on(&mut request);
    tokio::spawn(async move {
        match upgrade.await {
            Ok(upgraded) => connection::serve(service, sockets, upgraded, listener, offered).await,
            Err(e) => tracing::debug!(error = %e, "the socket upgrade failed"),
        }
    });
    let mut response = hyper::Response::new(ResponseBody::Whole(None));
    *response.status_mut() = hyper::StatusCode::SWITCHING_PROTOCOLS;
    let out = response.headers_mut();
    out.insert(header::UPGRADE, HeaderValue::from_static("websocket"));
    out.insert(header::CONNECTION, HeaderValue::from_static("Upgrade"));
    let accept = tokio_tungstenite::tungstenite::handshake::derive_accept_key(key.as_bytes());
    out.insert(header::SEC_WEBSOCKET_ACCEPT, header_value(&accept));
    if offered {
        out.insert(
            header::SEC_WEBSOCKET_PROTOCOL,
            header_value(&identity.service),
        );
    }
    out.insert("lab-service", header_value(&identity.service));
    out.insert("lab-contract", header_value(&identity.contract));
    response
}

fn header_value(text: &str) -> HeaderValue {
    HeaderValue::from_str(text).unwrap_or_else(|_| HeaderValue::from_static("invalid"))
}

/// Whether a comma-separated header `name` lists `token` (ASCII case
/// folded), in any of its occurrences.
fn has_token(headers: &HeaderMap, name: header::HeaderName, token: &str) -> bool {
    headers.get_all(name).iter().any(|value| {
        value.to_str().is_ok_and(|v| {
            v.split(',')
                .any(|item| item.trim().eq_ignore_ascii_case(token))
        })
    })
}
