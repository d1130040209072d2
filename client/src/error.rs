//! Why a request cannot be built.

use std::fmt;

use crate::table::ParamKind;

/// A request the operation table does not allow; nothing is built.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BuildError {
    /// No operation of that name has an HTTP route.
    UnknownOperation { name: String },
    /// The operation exists on the socket binding only.
    SocketOnly { name: String },
    /// The row lists no parameter of that name.
    UnknownParam {
        operation: &'static str,
        name: String,
    },
    /// The value is not of the kind the row gives the parameter.
    WrongKind {
        operation: &'static str,
        name: &'static str,
        expected: ParamKind,
    },
    /// The parameter was given more than once.
    Repeated {
        operation: &'static str,
        name: &'static str,
    },
    /// Required parameters not given, in the row's order.
    Missing {
        operation: &'static str,
        names: Vec<&'static str>,
    },
    /// A body on an operation whose row carries none.
    UnexpectedBody { operation: &'static str },
}

impl fmt::Display for BuildError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            BuildError::UnknownOperation { name } => {
                write!(f, "no operation {name:?} has an HTTP route")
            }
            BuildError::SocketOnly { name } => {
                write!(f, "{name} exists only on the WebSocket binding")
            }
            BuildError::UnknownParam { operation, name } => {
                write!(f, "{operation} takes no parameter {name:?}")
            }
            BuildError::WrongKind {
                operation,
                name,
                expected,
            } => write!(f, "{operation}: parameter {name} is {}", expected.as_str()),
            BuildError::Repeated { operation, name } => {
                write!(f, "{operation}: parameter {name} given twice")
            }
            BuildError::Missing { operation, names } => {
                write!(f, "{operation} needs {}", names.join(" and "))
            }
            BuildError::UnexpectedBody { operation } => write!(f, "{operation} takes no body"),
        }
    }
}

impl std::error::Error for BuildError {}

/// Why a built request has no socket envelope.
#[derive(Debug)]
pub enum EnvelopeError {
    /// An integer parameter beyond 2^53 - 1.
    Record(lab_coord_auth::RecordError),
    /// The body is not JSON.
    Body(serde_json::Error),
}

impl fmt::Display for EnvelopeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            EnvelopeError::Record(e) => write!(f, "the parameters: {e}"),
            EnvelopeError::Body(e) => write!(f, "the body is not JSON: {e}"),
        }
    }
}

impl std::error::Error for EnvelopeError {}
