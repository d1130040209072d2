//! `labctl verify-export`: an export's manifests and chunks fetched by
//! name from the bytes service, then checked offline (`lab-coord-client`'s
//! `verify_export`), each check printed.
//!
//! The chunks and manifests are retained in the bytes service, not named
//! by any journal, so the coordination service's `fetch` does not serve
//! them; they are read from the bytes service's `GET /v1/blobs/<name>`,
//! and every byte is checked against its name, so that source need not be
//! trusted.

use clap::Args;

use crate::call::connector_to;
use crate::checks;
use crate::failure::Failure;
use crate::http::{self, Request};
use crate::transport::Connector;
use crate::Common;

/// The development deployment's bytes service.
pub const DEFAULT_BYTES_ENDPOINT: &str = "http://127.0.0.1:8090";

#[derive(Debug, Args)]
pub struct VerifyExportArgs {
    /// The `manifest` an export call answered; repeat it for each call of
    /// a resumed traversal, in call order.
    #[arg(long = "manifest", value_name = "sha256:HEX", required = true)]
    pub manifests: Vec<String>,

    /// The bytes service's operations URL, where the manifests and chunks
    /// are retained.
    #[arg(
        long,
        env = "LAB_BYTES_ENDPOINT",
        default_value = DEFAULT_BYTES_ENDPOINT,
        value_name = "URL"
    )]
    pub bytes_endpoint: String,
}

pub fn run_verify_export(args: VerifyExportArgs, common: &Common) -> Result<(), Failure> {
    let connector = connector_to(&args.bytes_endpoint, common)?;
    let mut fetch = |name: &str| blob(&connector, name);
    let names: Vec<&str> = args.manifests.iter().map(String::as_str).collect();
    let checks = lab_coord_client::verify_export(&names, &mut fetch);
    checks::report(&checks, "the export")
}

/// The bytes retained under `name`, or none when they cannot be had (the
/// verifier reports which).
fn blob(connector: &Connector, name: &str) -> Option<Vec<u8>> {
    let endpoint = &connector.endpoint;
    let target = format!("{}/v1/blobs/{name}", endpoint.prefix);
    let request = Request {
        method: "GET",
        target: &target,
        host: &endpoint.authority,
        headers: Vec::new(),
        body: &[],
    };
    let mut response = http::send(connector.connect().ok()?, &request).ok()?;
    if response.status != 200 {
        return None;
    }
    response.read_body().ok()
}
