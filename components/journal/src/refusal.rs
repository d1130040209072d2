//! The journal's refusals: one table of codes, statuses and meanings that the
//! router, `describe` and the contract files all read.

use serde_json::{json, Value};

/// (code, HTTP status, meaning), in the spec's order.
pub const REFUSALS: &[(&str, u16, &str)] = &[
    (
        "invalid",
        400,
        "bad member, value, encoding, cutoff, continuation, manifest or request shape",
    ),
    (
        "not_found",
        404,
        "unknown root, exact space or route, or unlisted contract file",
    ),
    (
        "exists",
        409,
        "child key already occupied under that parent",
    ),
    (
        "conflict",
        409,
        "expected cutoff differs from the committed cutoff",
    ),
    (
        "idempotency_mismatch",
        409,
        "the scoped operation ID already committed a different normalized request",
    ),
    (
        "limit_exceeded",
        413,
        "a declared bound would be exceeded: value, batch, page, snapshot or continuation",
    ),
    (
        "unavailable",
        503,
        "the engine, a selected history or a required observation cannot be served now",
    ),
    (
        "internal",
        500,
        "unexpected failure; a mutation's outcome may be uncertain",
    ),
];

/// Why a request was refused. Every refusal carries a message for people;
/// clients act on the code and the details only.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Refusal {
    /// 400, or 413 for an oversized envelope, or 405 for a wrong method.
    Invalid {
        field: Option<String>,
        message: String,
    },
    /// The request envelope exceeds 8 MiB: 413 `invalid`.
    EnvelopeTooLarge,
    NotFound(String),
    Exists(String),
    Conflict {
        expected: u64,
        actual: u64,
    },
    IdempotencyMismatch(String),
    LimitExceeded(String),
    Unavailable(String),
    Internal(String),
}

impl Refusal {
    /// `invalid` naming the member at fault (`details.field`).
    pub fn invalid(field: impl Into<String>, message: impl Into<String>) -> Self {
        Refusal::Invalid {
            field: Some(field.into()),
            message: message.into(),
        }
    }

    /// `invalid` about the request as a whole.
    pub fn invalid_request(message: impl Into<String>) -> Self {
        Refusal::Invalid {
            field: None,
            message: message.into(),
        }
    }

    pub fn code(&self) -> &'static str {
        match self {
            Refusal::Invalid { .. } | Refusal::EnvelopeTooLarge => "invalid",
            Refusal::NotFound(_) => "not_found",
            Refusal::Exists(_) => "exists",
            Refusal::Conflict { .. } => "conflict",
            Refusal::IdempotencyMismatch(_) => "idempotency_mismatch",
            Refusal::LimitExceeded(_) => "limit_exceeded",
            Refusal::Unavailable(_) => "unavailable",
            Refusal::Internal(_) => "internal",
        }
    }

    pub fn status(&self) -> u16 {
        match self {
            Refusal::EnvelopeTooLarge => 413,
            other => REFUSALS
                .iter()
                .find(|(code, _, _)| *code == other.code())
                .map(|(_, status, _)| *status)
                .expect("every code is in the table"),
        }
    }

    pub fn message(&self) -> String {
        match self {
            Refusal::Invalid { message, .. } => message.clone(),
            Refusal::EnvelopeTooLarge => "the request envelope exceeds 8388608 bytes".into(),
            Refusal::Conflict { expected, actual } => {
                format!("expected cutoff {expected}, the committed cutoff is {actual}")
            }
            Refusal::NotFound(m)
            | Refusal::Exists(m)
            | Refusal::IdempotencyMismatch(m)
            | Refusal::LimitExceeded(m)
            | Refusal::Unavailable(m)
            | Refusal::Internal(m) => m.clone(),
        }
    }

    /// `details`, where the spec documents data for the code.
    pub fn details(&self) -> Option<Value> {
        match self {
            Refusal::Invalid {
                field: Some(field), ..
            } => Some(json!({ "field": field })),
            Refusal::Conflict { expected, actual } => {
                Some(json!({ "expected_cutoff": expected, "actual_cutoff": actual }))
            }
            _ => None,
        }
    }
}

/// The refusal table as `describe` reports it.
pub fn table() -> Value {
    let mut rows: Vec<Value> = REFUSALS
        .iter()
        .map(|(name, http, meaning)| json!({ "name": name, "http": http, "meaning": meaning }))
        .collect();
    rows.sort_by(|a, b| a["name"].as_str().cmp(&b["name"].as_str()));
    Value::Array(rows)
}
