//! `lab:platform/services`: requests to co-hosted services, in-process.

use super::{Peer, RequestState};
use crate::bindings::services;
use crate::dispatch;
use wasmtime::Result;

impl services::Host for RequestState {
    async fn call(
        &mut self,
        service: String,
        request: services::ServiceRequest,
    ) -> Result<Result<services::ServiceResponse, String>> {
        if self.nested {
            return Ok(Err("a service answering a call makes no calls".into()));
        }
        if service == self.env.service {
            return Ok(Err("a service does not call itself".into()));
        }
        let outcome = match self.env.peers.get(&service).cloned() {
            None => return Ok(Err(format!("no service `{service}` in this deployment"))),
            Some(Peer::Local(peer)) => dispatch::call(&peer, request).await,
            Some(Peer::Remote(remote)) => remote.call(request).await,
        };
        Ok(outcome.map_err(|e| format!("{e:#}")))
    }
}
