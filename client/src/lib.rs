//! The client side of the coordination service's HTTP binding.
//!
//! - [`table`]: every operation with an HTTP route (name, method, route,
//!   grant kind, parameters, body kind), as `operations.json` gives them.
//! - [`request`]: an operation and its typed parameters and body become the
//!   method, the target with its query string, the signing record's
//!   `params` and the content type. Both forms come from the same
//!   parameters, so what is sent is what is signed: the service rebuilds
//!   the signing record from the query it receives.
//! - [`Built::carriage`]: a key, its grants, a nonce, a timestamp and an
//!   audience sign a built request into the `Svc-Auth` carriage.
//! - [`Built::canonical`] and [`Built::envelope`]: the same request as a
//!   socket call envelope (`WS.md`), signed over its canonical body.
//!
//! - [`admission`]: offline verification of a declaration's admission.
//! - [`attestation`]: offline verification of an application.
//! - [`export`]: offline verification of an export's chunks and manifests.
//!
//! The crate does no I/O; each user keeps its own transport.

pub mod admission;
pub mod attestation;
pub mod error;
pub mod export;
pub mod request;
pub mod table;

pub use crate::admission::{verify_admission, Check};
pub use crate::attestation::verify_application;
pub use crate::error::{BuildError, EnvelopeError};
pub use crate::export::verify_export;
pub use crate::request::{envelope, percent_encode, Built, Request};
pub use crate::table::{find, Answer, BodyKind, Operation, ParamKind, ParamSpec, OPERATIONS};
pub use lab_coord_auth::{ParamValue, Params, HEADER};
