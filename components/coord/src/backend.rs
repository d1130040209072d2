//! Calls to the two services this one stands on, through the host's
//! `services` interface (in-process when co-hosted, HTTP otherwise).
//!
//! Invariant: an answer counts only when it carries the callee's
//! `lab-service` header; anything else is the backend being unavailable,
//! never a refusal of the request.

use crate::refusal::Refusal;
use lab_guest::lab::platform::body::IncomingBody;
use lab_guest::lab::platform::services::{self, ResponseBody, ServiceRequest};
use lab_guest::lab::platform::types::Header;
use serde_json::Value;

/// A refusal the backend answered: its code, message and details.
#[derive(Debug, Clone)]
pub struct Refused {
    pub status: u16,
    pub code: String,
    pub message: String,
    pub details: Value,
}

/// Why a backend call did not succeed.
#[derive(Debug, Clone)]
pub enum CallError {
    /// The backend answered with a refusal.
    Refused(Refused),
    /// No trustworthy answer: unreachable, wrong service, unreadable body.
    Unavailable(String),
}

impl CallError {
    /// The refusal code, when the backend answered one.
    pub fn code(&self) -> Option<&str> {
        match self {
            CallError::Refused(r) => Some(&r.code),
            CallError::Unavailable(_) => None,
        }
    }

    /// The refusal this service answers when it has nothing more specific
    /// to say: the backend's own `not_found`, `limit_exceeded` and
    /// `unavailable` carry over; anything else is an internal failure of
    /// this service's use of the backend.
    pub fn into_refusal(self, service: &str) -> Refusal {
        match self {
            CallError::Unavailable(why) => Refusal::Unavailable(format!("{service}: {why}")),
            CallError::Refused(r) => match r.code.as_str() {
                "not_found" => Refusal::NotFound(r.message),
                "limit_exceeded" => Refusal::LimitExceeded(r.message),
                "unavailable" => Refusal::Unavailable(format!("{service}: {}", r.message)),
                _ => Refusal::Internal(format!("{service} refused: {} ({})", r.code, r.message)),
            },
        }
    }
}

fn header(name: &str, value: &str) -> Header {
    Header {
        name: name.into(),
        value: value.as_bytes().to_vec(),
    }
}

fn has_service_header(headers: &[Header], service: &str) -> bool {
    headers
        .iter()
        .any(|h| h.name == "lab-service" && h.value == service.as_bytes())
}

/// One request with a whole body and a whole JSON answer.
pub fn call_json(
    service: &str,
    method: &str,
    target: &str,
    body: Vec<u8>,
    content_type: &str,
) -> Result<(u16, Value), CallError> {
    let request = ServiceRequest {
        method: method.into(),
        target: target.into(),
        headers: vec![header("content-type", content_type)],
        body,
    };
    let response = services::call(service, &request).map_err(CallError::Unavailable)?;
    if !has_service_header(&response.headers, service) {
        return Err(CallError::Unavailable(format!(
            "the answer does not carry `lab-service: {service}`"
        )));
    }
    let json: Value = serde_json::from_slice(&response.body)
        .map_err(|e| CallError::Unavailable(format!("unreadable answer: {e}")))?;
    if (200..300).contains(&response.status) {
        return Ok((response.status, json));
    }
    Err(refused(response.status, &json))
}

/// The refusal an error envelope carries.
fn refused(status: u16, envelope: &Value) -> CallError {
    CallError::Refused(Refused {
        status,
        code: envelope["error"].as_str().unwrap_or("internal").to_string(),
        message: envelope["message"].as_str().unwrap_or_default().to_string(),
        details: envelope.get("details").cloned().unwrap_or(Value::Null),
    })
}

/// A streamed answer: status, headers and the body left in the host.
pub struct Streamed {
    pub status: u16,
    pub headers: Vec<Header>,
    pub body: ResponseBody,
}

impl Streamed {
    pub fn header(&self, name: &str) -> Option<&[u8]> {
        self.headers
            .iter()
            .find(|h| h.name == name)
            .map(|h| h.value.as_slice())
    }

    /// The rest of the body, for answers known to be small (refusals).
    pub fn read_small(&self, max: usize) -> Result<Vec<u8>, CallError> {
        let mut bytes = Vec::new();
        loop {
            let chunk = self.body.read(64 << 10).map_err(CallError::Unavailable)?;
            if chunk.is_empty() {
                return Ok(bytes);
            }
            bytes.extend_from_slice(&chunk);
            if bytes.len() > max {
                return Err(CallError::Unavailable(
                    "the answer is larger than expected".into(),
                ));
            }
        }
    }

    /// The refusal a non-success answer carries.
    pub fn refused(&self) -> CallError {
        let body = match self.read_small(1 << 20) {
            Ok(body) => body,
            Err(e) => return e,
        };
        let json: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
        refused(self.status, &json)
    }
}

/// One request whose bodies stay in the host: `forward`, when given, is
/// streamed to the backend as the request body.
pub fn call_streaming(
    service: &str,
    method: &str,
    target: &str,
    headers: Vec<(&str, String)>,
    forward: Option<&IncomingBody>,
) -> Result<Streamed, CallError> {
    let request = ServiceRequest {
        method: method.into(),
        target: target.into(),
        headers: headers.iter().map(|(n, v)| header(n, v)).collect(),
        body: Vec::new(),
    };
    let response =
        services::call_streaming(service, &request, forward).map_err(CallError::Unavailable)?;
    if !has_service_header(&response.headers, service) {
        return Err(CallError::Unavailable(format!(
            "the answer does not carry `lab-service: {service}`"
        )));
    }
    Ok(Streamed {
        status: response.status,
        headers: response.headers,
        body: response.body,
    })
}
