//! One socket call through a fresh instance of the service's component,
//! admitted like an HTTP request, and the replies the host gives itself.

use crate::body::IncomingBody;
use crate::service::{Admission, InstanceError, Service, NO_MEMORY};
use crate::verified::Verified;
use std::sync::Arc;
use std::time::Instant;
use wasmtime::component::Resource;

/// The reply frame's text for the call in `frame` on connection
/// `connection`; a failure of the host or the component is an `error`
/// reply like the HTTP binding's 503 or 500.
pub async fn reply(
    service: &Service,
    connection: u64,
    verified: Arc<Verified>,
    id: &str,
    frame: Vec<u8>,
) -> String {
    let started = Instant::now();
    let outcome = invoke(service, connection, verified, frame).await;
    let contract = &service.loaded().identity.contract;
    let (ended, reply) = match outcome {
        Ok(reply) => match String::from_utf8(reply) {
            Ok(text) => ("answered", text),
            Err(_) => (
                "internal",
                refusal(
                    contract,
                    id,
                    "internal",
                    "the service answered a malformed reply",
                ),
            ),
        },
        Err(InstanceError::Unavailable(why)) => {
            ("unavailable", refusal(contract, id, "unavailable", why))
        }
        Err(InstanceError::Failed(e)) => {
            tracing::error!(
                service = service.name,
                error = format!("{e:#}"),
                "socket call failed in the host or the component"
            );
            (
                "internal",
                refusal(
                    contract,
                    id,
                    "internal",
                    "the service failed while handling the call",
                ),
            )
        }
    };
    let elapsed = started.elapsed();
    service.metrics.observe_socket_call(ended, elapsed);
    tracing::info!(
        service = service.name,
        route = "ws",
        duration_us = elapsed.as_micros() as u64,
        "call"
    );
    reply
}

async fn invoke(
    service: &Service,
    connection: u64,
    verified: Arc<Verified>,
    frame: Vec<u8>,
) -> Result<Vec<u8>, InstanceError> {
    let (mut instance, _permit) = service.instantiate(Admission::Request).await?;
    instance.store.data_mut().verified = Some(verified);
    let failed = |e: wasmtime::Error| InstanceError::Failed(e);
    let index = instance
        .socket
        .ok_or_else(|| failed(wasmtime::format_err!("the component exports no socket")))?;
    let func = instance
        .instance
        .get_typed_func::<(u64, Resource<IncomingBody>), (Vec<u8>,)>(&mut instance.store, &index)
        .map_err(failed)?;
    let body = instance
        .store
        .data_mut()
        .table
        .push(IncomingBody::from_bytes(frame))
        .map_err(|e| failed(e.into()))?;
    match func
        .call_async(&mut instance.store, (connection, body))
        .await
    {
        Ok((reply,)) => Ok(reply),
        Err(_) if instance.store.data().limits.denied() => {
            Err(InstanceError::Unavailable(NO_MEMORY))
        }
        Err(e) => Err(failed(e)),
    }
}

/// An `error` reply the host gives itself (`SocketReply.schema.json`).
pub fn refusal(contract: &str, id: &str, code: &str, message: &str) -> String {
    serde_json::json!({
        "id": id,
        "status": "error",
        "contract": contract,
        "error": { "error": code, "message": message },
    })
    .to_string()
}
