//! The coordination service's refusals: one table of codes, statuses and
//! meanings that the router, `describe` and the contract files all read.

use serde_json::{json, Value};

/// (code, HTTP status, meaning), in the specification's order.
pub const REFUSALS: &[(&str, u16, &str)] = &[
    ("not_found", 404, "path, space, occurrence, record or file is not here"),
    ("exists", 409, "a child of that key already exists under the parent, or the record identity is occupied"),
    ("conflict", 409, "an expected cutoff did not hold"),
    ("idempotency_mismatch", 409, "the operation ID was accepted before with a different semantic request"),
    ("invalid", 400, "a value is outside its grammar, limit or structural rule, or a cutoff is inside a batch or in the future"),
    ("invalid_cursor", 400, "malformed cursor, or one belonging to another enumeration, traversal or query"),
    ("limit_exceeded", 413, "a declared bound would be exceeded: value, batch, page, manifest or continuation"),
    ("unavailable", 503, "a backend, selected journal or required observation cannot be served; unreadable recovery data is unavailable, never absent"),
    ("unverified", 401, "signature, freshness, audience or key admissibility failed; nothing evaluated"),
    ("denied", 403, "no grant chain reaches the principal for this kind on this path; existence not revealed"),
    ("invalid_record", 400, "the record fails its interpretation profile, or an occurrence violates the fact profile; carries the field"),
    ("unresolved", 409, "a record or request refers to content or an occurrence that does not resolve; carries the reference"),
    ("structural", 400, "a user label collides with a structural label at that position, or a write targets a protected space"),
    ("internal", 500, "internal failure"),
    ("not_implemented", 500, "operation not implemented by the current source; names its item"),
];

/// Why a request was refused. The message is for people; clients act on the
/// code and the details only.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Refusal {
    /// 400 `invalid`, naming the offending field when there is one.
    Invalid {
        field: Option<String>,
        message: String,
    },
    /// A JSON body over 64 MiB: 413 with an `invalid` envelope.
    BodyTooLarge,
    InvalidCursor(String),
    NotFound(String),
    Exists(String),
    Conflict {
        expected: u64,
        actual: u64,
    },
    IdempotencyMismatch(String),
    InvalidRecord {
        field: String,
        /// The body reference at fault, when one is.
        reference: Option<Value>,
        message: String,
    },
    Unresolved {
        reference: Value,
        message: String,
    },
    /// The colliding label, when a user label is at fault; none when a write
    /// targets a protected space.
    Structural {
        label: Option<String>,
        message: String,
    },
    LimitExceeded(String),
    Unavailable(String),
    /// Carries nothing about the path.
    Unverified(String),
    /// Carries nothing about the path.
    Denied,
    Internal(String),
    /// An operation of the table this source does not implement yet.
    NotImplemented(&'static str),
}

/// The service's own store failing, or without room (the host's message
/// then names what is short): it cannot answer now.
impl From<lab_guest::lab::platform::kv::KvError> for Refusal {
    fn from(error: lab_guest::lab::platform::kv::KvError) -> Self {
        use lab_guest::lab::platform::kv::KvError;
        match error {
            KvError::Unavailable(why) => Refusal::Unavailable(why),
            error => Refusal::Unavailable(format!("store: {error:?}")),
        }
    }
}

impl Refusal {
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

    pub fn invalid_record(field: impl Into<String>, message: impl Into<String>) -> Self {
        Refusal::InvalidRecord {
            field: field.into(),
            reference: None,
            message: message.into(),
        }
    }

    /// `invalid_record` naming the member and the reference at fault.
    pub fn invalid_reference(
        field: impl Into<String>,
        reference: Value,
        message: impl Into<String>,
    ) -> Self {
        Refusal::InvalidRecord {
            field: field.into(),
            reference: Some(reference),
            message: message.into(),
        }
    }

    pub fn structural(label: impl Into<String>) -> Self {
        let label = label.into();
        Refusal::Structural {
            message: format!("`{label}` is a structural label at this position"),
            label: Some(label),
        }
    }

    /// A write aimed at a space this operation may not write.
    pub fn protected(message: impl Into<String>) -> Self {
        Refusal::Structural {
            label: None,
            message: message.into(),
        }
    }

    pub fn code(&self) -> &'static str {
        match self {
            Refusal::Invalid { .. } | Refusal::BodyTooLarge => "invalid",
            Refusal::InvalidCursor(_) => "invalid_cursor",
            Refusal::NotFound(_) => "not_found",
            Refusal::Exists(_) => "exists",
            Refusal::Conflict { .. } => "conflict",
            Refusal::IdempotencyMismatch(_) => "idempotency_mismatch",
            Refusal::InvalidRecord { .. } => "invalid_record",
            Refusal::Unresolved { .. } => "unresolved",
            Refusal::Structural { .. } => "structural",
            Refusal::LimitExceeded(_) => "limit_exceeded",
            Refusal::Unavailable(_) => "unavailable",
            Refusal::Unverified(_) => "unverified",
            Refusal::Denied => "denied",
            Refusal::Internal(_) => "internal",
            Refusal::NotImplemented(_) => "not_implemented",
        }
    }

    pub fn status(&self) -> u16 {
        match self {
            Refusal::BodyTooLarge => 413,
            other => status_of(other.code()),
        }
    }

    pub fn message(&self) -> String {
        match self {
            Refusal::Invalid { message, .. }
            | Refusal::InvalidRecord { message, .. }
            | Refusal::Unresolved { message, .. }
            | Refusal::Structural { message, .. } => message.clone(),
            Refusal::BodyTooLarge => "the request body exceeds 64 MiB".into(),
            Refusal::InvalidCursor(m)
            | Refusal::NotFound(m)
            | Refusal::Exists(m)
            | Refusal::IdempotencyMismatch(m)
            | Refusal::LimitExceeded(m)
            | Refusal::Unavailable(m)
            | Refusal::Unverified(m)
            | Refusal::Internal(m) => m.clone(),
            Refusal::Conflict { expected, actual } => {
                format!("expected cutoff {expected}, the journal is at {actual}")
            }
            Refusal::Denied => "no grant authorizes this request".into(),
            Refusal::NotImplemented(op) => {
                format!("`{op}` is not implemented by this source")
            }
        }
    }

    pub fn details(&self) -> Option<Value> {
        match self {
            Refusal::Invalid {
                field: Some(field), ..
            }
            | Refusal::InvalidRecord {
                field,
                reference: None,
                ..
            } => Some(json!({ "field": field })),
            Refusal::InvalidRecord {
                field,
                reference: Some(reference),
                ..
            } => Some(json!({ "field": field, "reference": reference })),
            Refusal::Conflict { expected, actual } => {
                Some(json!({ "expected_cutoff": expected, "actual_cutoff": actual }))
            }
            Refusal::Unresolved { reference, .. } => Some(json!({ "reference": reference })),
            Refusal::Structural {
                label: Some(label), ..
            } => Some(json!({ "label": label })),
            Refusal::NotImplemented(op) => Some(json!({ "operation": op })),
            _ => None,
        }
    }
}

/// The status of a refusal code.
pub fn status_of(code: &str) -> u16 {
    REFUSALS
        .iter()
        .find(|(name, _, _)| *name == code)
        .map_or(500, |(_, status, _)| *status)
}

/// The refusal table as `describe` reports it.
pub fn table() -> Value {
    Value::Array(
        REFUSALS
            .iter()
            .map(|(name, http, meaning)| json!({ "name": name, "http": http, "meaning": meaning }))
            .collect(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_code_has_its_status() {
        assert_eq!(Refusal::Denied.status(), 403);
        assert_eq!(Refusal::Unverified("x".into()).status(), 401);
        assert_eq!(Refusal::BodyTooLarge.status(), 413);
        assert_eq!(Refusal::BodyTooLarge.code(), "invalid");
        assert_eq!(Refusal::NotImplemented("apply").status(), 500);
        assert_eq!(
            Refusal::Conflict {
                expected: 1,
                actual: 2
            }
            .status(),
            409
        );
        assert_eq!(Refusal::Denied.details(), None);
        assert_eq!(Refusal::Unverified("x".into()).details(), None);
    }
}
