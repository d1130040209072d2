//! `lab:platform/services`: requests to co-hosted services, in-process.

use super::RequestState;
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
        let Some(peer) = self.env.peers.get(&service) else {
            return Ok(Err(format!("no service `{service}` in this deployment")));
        };
        let peer = std::sync::Arc::clone(peer);
        Ok(dispatch::call(&peer, request)
            .await
            .map_err(|e| format!("{e:#}")))
    }
}
