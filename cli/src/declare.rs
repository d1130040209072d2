//! `labctl declare` (a statement about an artifact, answered readably) and
//! `labctl verify-admission` (a fetched declaration envelope checked
//! offline, each check printed).

use std::path::PathBuf;

use clap::Args;
use lab_coord_auth::Principal;
use lab_coord_client::Request as CoordRequest;
use serde_json::{json, Value};

use crate::call::{json_answer, read_request_body, signed_exchange};
use crate::checks;
use crate::failure::Failure;
use crate::occurrence;
use crate::Common;

#[derive(Debug, Args)]
pub struct DeclareArgs {
    /// One label of the artifact's path; repeat it for each label, in order.
    #[arg(
        long = "artifact",
        value_name = "LABEL",
        required = true,
        allow_hyphen_values = true
    )]
    pub artifact: Vec<String>,

    /// The operation ID: a retry with the same one is the same declaration.
    #[arg(long, value_name = "ID")]
    pub operation_id: String,

    /// The statement (JSON object): a file, or - for stdin.
    #[arg(long, value_name = "FILE|-")]
    pub statement: PathBuf,
}

#[derive(Debug, Args)]
pub struct VerifyAdmissionArgs {
    /// The envelope as `fetch` served it at the declarations path.
    #[arg(value_name = "ENVELOPE")]
    pub envelope: PathBuf,

    /// The world's root principal (`ed25519:<hex>`).
    #[arg(long, value_name = "PRINCIPAL")]
    pub root: String,
}

pub fn run_declare(args: DeclareArgs, common: &Common) -> Result<(), Failure> {
    let text = read_request_body(&args.statement)?;
    let statement: Value = serde_json::from_slice(&text).map_err(|err| {
        Failure::Data(format!(
            "the statement {} is not JSON: {err}",
            args.statement.display()
        ))
    })?;
    let body = json!({
        "operation_id": args.operation_id,
        "artifact": args.artifact,
        "statement": statement,
    });
    let request = CoordRequest::new("declare").expect("the table lists declare");
    let op = request.operation();
    let mut response = signed_exchange(op, request, body.to_string().into_bytes(), common)?;
    let answer = json_answer(&mut response)?;
    let entry = &answer["declaration"];
    println!(
        "{} {}",
        if answer["replayed"] == true {
            "replayed"
        } else {
            "declared"
        },
        answer["assertion_id"].as_str().unwrap_or_default()
    );
    println!("  declaration  {}", occurrence::written(entry));
    println!(
        "  envelope     {}",
        answer["envelope"].as_str().unwrap_or_default()
    );
    Ok(())
}

pub fn run_verify_admission(args: VerifyAdmissionArgs, common: &Common) -> Result<(), Failure> {
    let root = Principal::parse(&args.root)
        .ok_or_else(|| Failure::Usage(format!("{:?} is not a principal", args.root)))?;
    let audience = common
        .audience
        .clone()
        .unwrap_or_else(|| common.endpoint.trim_end_matches('/').to_string());
    let envelope =
        std::fs::read(&args.envelope).map_err(|err| Failure::reading(&args.envelope, err))?;
    let checks = lab_coord_client::verify_admission(&envelope, &root, &audience);
    checks::report(&checks, "the admission")
}
