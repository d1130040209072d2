//! `lab:platform/services`: requests to the other services of the
//! deployment, in-process when co-hosted, over HTTP otherwise.
//!
//! Invariants: an instance answering a call makes no call, and a service
//! never calls itself, so calls cannot cycle or wait on their own pool; an
//! instance holding a write transaction makes no call, so no writer waits
//! on another service (design.md, "Limits" 4).

use super::{Peer, RequestState};
use crate::bindings::services;
use crate::body::{IncomingBody, PeerBody};
use crate::dispatch::{self, CallHead};
use wasmtime::component::Resource;
use wasmtime::Result;

impl RequestState {
    /// The peer a call may go to, or why it may not.
    fn callee(&self, service: &str) -> Result<Peer, String> {
        if self.nested {
            return Err("a service answering a call makes no calls".into());
        }
        if self.open_writes > 0 {
            return Err("a service holding a write transaction makes no calls".into());
        }
        if service == self.env.service {
            return Err("a service does not call itself".into());
        }
        self.env
            .peers
            .get(service)
            .ok_or_else(|| format!("no service `{service}` in this deployment"))
    }
}

impl services::Host for RequestState {
    async fn call(
        &mut self,
        service: String,
        request: services::ServiceRequest,
    ) -> Result<Result<services::ServiceResponse, String>> {
        let outcome = match self.callee(&service) {
            Err(refusal) => return Ok(Err(refusal)),
            Ok(Peer::Local(peer)) => dispatch::call(&peer, request).await,
            Ok(Peer::Remote(remote)) => remote.call(request).await,
        };
        Ok(outcome.map_err(|e| format!("{e:#}")))
    }

    async fn call_streaming(
        &mut self,
        service: String,
        request: services::ServiceRequest,
        forward: Option<Resource<IncomingBody>>,
    ) -> Result<Result<services::StreamedResponse, String>> {
        let peer = match self.callee(&service) {
            Ok(peer) => peer,
            Err(refusal) => return Ok(Err(refusal)),
        };
        if forward.is_some() && !request.body.is_empty() {
            return Ok(Err("with `forward`, `request.body` must be empty".into()));
        }
        let head = CallHead {
            method: request.method,
            target: request.target,
            headers: request.headers,
        };
        // The forwarded body leaves the caller's table for the call; the
        // caller cannot read it meanwhile (it is waiting on this call).
        let body = match &forward {
            Some(forward) => self.table.get_mut(forward)?.take_rest(),
            None => IncomingBody::from_bytes(request.body),
        };
        let outcome = match peer {
            Peer::Local(peer) => {
                let (outcome, rest) = dispatch::call_streaming(&peer, head, body).await;
                if let (Some(forward), Some(rest)) = (&forward, rest) {
                    self.table.get_mut(forward)?.restore(rest);
                }
                outcome
            }
            // Over HTTP the body belongs to the connection: what the remote
            // leaves unread is not given back.
            Peer::Remote(remote) => remote.call_streaming(head, body.into_raw()).await,
        };
        Ok(match outcome {
            Ok((status, headers, body)) => Ok(services::StreamedResponse {
                status,
                headers,
                body: self.table.push(body)?,
            }),
            Err(e) => Err(format!("{e:#}")),
        })
    }
}

impl services::HostResponseBody for RequestState {
    async fn read(
        &mut self,
        this: Resource<PeerBody>,
        max: u32,
    ) -> Result<Result<Vec<u8>, String>> {
        let body = self.table.get_mut(&this)?;
        Ok(body.read(max as usize).await.map(|b| b.to_vec()))
    }

    async fn drop(&mut self, this: Resource<PeerBody>) -> Result<()> {
        self.table.delete(this)?;
        Ok(())
    }
}
