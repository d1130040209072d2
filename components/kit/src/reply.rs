//! Responses: every one carries the service's identity headers.

use crate::{BodyPart, Header, Response, ServiceIdentity};
use serde_json::{json, Value};

/// Seconds a client refused as `unavailable` is told to wait.
const RETRY_AFTER_SECONDS: &str = "1";

/// Builds responses for one service.
#[derive(Debug, Clone, Copy)]
pub struct Replier {
    pub service: &'static str,
    pub contract: &'static str,
    /// Extra identity headers every response carries (`lab-surface`, …).
    pub extra: &'static [(&'static str, &'static str)],
}

impl Replier {
    pub fn identity(&self) -> ServiceIdentity {
        ServiceIdentity {
            service: self.service.to_string(),
            contract: self.contract.to_string(),
        }
    }

    /// A response with the identity headers, then `headers`, then `body`.
    pub fn raw(
        &self,
        status: u16,
        headers: Vec<(&str, Vec<u8>)>,
        body: Vec<BodyPart>,
        operation: Option<&str>,
    ) -> Response {
        let mut all = vec![
            header("lab-service", self.service.as_bytes().to_vec()),
            header("lab-contract", self.contract.as_bytes().to_vec()),
        ];
        all.extend(
            self.extra
                .iter()
                .map(|(n, v)| header(n, v.as_bytes().to_vec())),
        );
        all.extend(headers.into_iter().map(|(n, v)| header(n, v)));
        Response {
            status,
            headers: all,
            body,
            operation: operation.map(str::to_string),
        }
    }

    /// A JSON response.
    pub fn json(&self, status: u16, value: &Value, operation: Option<&str>) -> Response {
        let body = serde_json::to_vec(value).expect("a JSON value serializes");
        self.json_text(status, body, operation)
    }

    /// A JSON response whose body is already JSON text.
    pub fn json_text(&self, status: u16, body: Vec<u8>, operation: Option<&str>) -> Response {
        self.raw(
            status,
            vec![("content-type", b"application/json".to_vec())],
            vec![BodyPart::Bytes(body)],
            operation,
        )
    }

    /// The error envelope `{error, message}` (and `details` when given). A
    /// 503 says when to retry: `Retry-After: 1`, as the host's own 503s.
    pub fn error(
        &self,
        status: u16,
        code: &str,
        message: &str,
        details: Option<Value>,
        operation: Option<&str>,
    ) -> Response {
        let body = error_body(code, message, details);
        let mut response = self.json_text(status, body, operation);
        if status == 503 {
            response.headers.push(header(
                "retry-after",
                RETRY_AFTER_SECONDS.as_bytes().to_vec(),
            ));
        }
        response
    }

    /// 405 naming the one method the route supports in `Allow`.
    pub fn method_not_allowed(&self, code: &str, allow: &str) -> Response {
        let mut response = self.error(
            405,
            code,
            &format!("this route supports {allow} only"),
            None,
            None,
        );
        response
            .headers
            .push(header("allow", allow.as_bytes().to_vec()));
        response
    }
}

/// The JSON text of the error envelope `{error, message}` (and `details`
/// when given).
pub fn error_body(code: &str, message: &str, details: Option<Value>) -> Vec<u8> {
    let mut body = json!({ "error": code, "message": message });
    if let Some(details) = details {
        body["details"] = details;
    }
    serde_json::to_vec(&body).expect("a JSON value serializes")
}

fn header(name: &str, value: Vec<u8>) -> Header {
    Header {
        name: name.to_string(),
        value,
    }
}
