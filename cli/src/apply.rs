//! `labctl apply` (a configured tool run on input occurrences, answered
//! readably) and `labctl verify-application` (an application's facts and
//! documents fetched, then checked offline, each check printed).

use clap::Args;
use lab_coord_auth::Principal;
use lab_coord_client::Request as CoordRequest;
use serde_json::{json, Value};

use crate::call::{call_json, json_answer, signed_exchange};
use crate::checks;
use crate::failure::{Failure, Refusal};
use crate::Common;

#[derive(Debug, Args)]
pub struct ApplyArgs {
    /// One label of the application's path
    /// (`projects <p> applications <name>`); repeat it for each label.
    #[arg(
        long = "path",
        value_name = "LABEL",
        required = true,
        allow_hyphen_values = true
    )]
    pub path: Vec<String>,

    /// The operation ID: a retry with the same one is the same application.
    #[arg(long, value_name = "ID")]
    pub operation_id: String,

    /// The configured tool's name.
    #[arg(long, value_name = "NAME")]
    pub tool: String,

    /// An input: ROLE=ROOT_ID/SPACE_ID/POSITION; repeat it for each role.
    #[arg(long = "input", value_name = "ROLE=REF")]
    pub inputs: Vec<String>,

    /// The recipe, as JSON text (default null).
    #[arg(long, value_name = "JSON", default_value = "null")]
    pub recipe: String,

    /// Print the whole answer as JSON.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct VerifyApplicationArgs {
    /// One label of the application's path; repeat it for each label.
    #[arg(
        long = "path",
        value_name = "LABEL",
        required = true,
        allow_hyphen_values = true
    )]
    pub path: Vec<String>,

    /// The world's root principal (`ed25519:<hex>`).
    #[arg(long, value_name = "PRINCIPAL")]
    pub root: String,
}

/// `ROLE=ROOT_ID/SPACE_ID/POSITION` as a role and an EntryRef.
fn input(text: &str) -> Result<(String, Value), Failure> {
    let usage = || Failure::Usage(format!("{text:?} is not ROLE=ROOT_ID/SPACE_ID/POSITION"));
    let (role, reference) = text.split_once('=').ok_or_else(usage)?;
    let mut parts = reference.split('/');
    let (Some(root_id), Some(space_id), Some(position), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return Err(usage());
    };
    let position: u64 = position.parse().map_err(|_| usage())?;
    Ok((
        role.to_string(),
        json!({ "root_id": root_id, "space_id": space_id, "position": position }),
    ))
}

pub fn run_apply(args: ApplyArgs, common: &Common) -> Result<(), Failure> {
    let recipe: Value = serde_json::from_str(&args.recipe)
        .map_err(|err| Failure::Usage(format!("the recipe is not JSON: {err}")))?;
    let mut inputs = serde_json::Map::new();
    for text in &args.inputs {
        let (role, reference) = input(text)?;
        if inputs.insert(role.clone(), reference).is_some() {
            return Err(Failure::Usage(format!("role {role:?} is given twice")));
        }
    }
    let body = json!({
        "operation_id": args.operation_id,
        "path": args.path,
        "tool": args.tool,
        "inputs": inputs,
        "recipe": recipe,
    });
    let answer = call_json(common, "apply", &body)?;
    if args.json {
        println!("{answer}");
        return Ok(());
    }
    let at = |entry: &Value| {
        format!(
            "{} {} {}",
            entry["root_id"].as_str().unwrap_or_default(),
            entry["space_id"].as_str().unwrap_or_default(),
            entry["position"]
        )
    };
    println!(
        "{} {}",
        if answer["replayed"] == true {
            "replayed"
        } else {
            "applied"
        },
        answer["outcome"].as_str().unwrap_or_default()
    );
    println!("  attempt  {}", at(&answer["attempt"]));
    println!("  result   {}", at(&answer["result"]));
    if answer["reused"].is_object() {
        println!("  reused   {}", at(&answer["reused"]));
    }
    if let Some(reason) = answer["reason"].as_str() {
        println!("  reason   {reason}");
    }
    for (role, artifact) in answer["outputs"].as_object().into_iter().flatten() {
        println!(
            "  output   {role} {}",
            artifact["bytes"].as_str().unwrap_or_default()
        );
    }
    Ok(())
}

pub fn run_verify_application(args: VerifyApplicationArgs, common: &Common) -> Result<(), Failure> {
    let root = Principal::parse(&args.root)
        .ok_or_else(|| Failure::Usage(format!("{:?} is not a principal", args.root)))?;
    let entries = leaf_entries(&args.path, common)?;
    let mut fetch = |hash: &str| fetch(&args.path, hash, common).ok();
    let checks = lab_coord_client::verify_application(&entries, &mut fetch, &root);
    checks::report(&checks, "the application")
}

/// Every entry of the leaf, page by page at the first page's cutoff.
pub fn leaf_entries(path: &[String], common: &Common) -> Result<Vec<Value>, Failure> {
    let mut entries = Vec::new();
    let mut after = 0;
    let mut through: Option<i64> = None;
    loop {
        let mut request = CoordRequest::new("entries")
            .expect("the table lists entries")
            .path(path.iter().cloned())
            .int("after", after)
            .int("limit", 128);
        if let Some(through) = through {
            request = request.int("through", through);
        }
        let op = request.operation();
        let page = json_answer(&mut signed_exchange(op, request, Vec::new(), common)?)?;
        through = page["through"].as_i64();
        entries.extend(page["entries"].as_array().into_iter().flatten().cloned());
        match page["next_after"].as_i64() {
            Some(next) if next > after => after = next,
            _ => return Ok(entries),
        }
    }
}

/// The bytes `fetch` serves at `path` for `hash`.
pub fn fetch(path: &[String], hash: &str, common: &Common) -> Result<Vec<u8>, Failure> {
    let request = CoordRequest::new("fetch")
        .expect("the table lists fetch")
        .path(path.iter().cloned())
        .string("bytes", hash);
    let op = request.operation();
    let mut response = signed_exchange(op, request, Vec::new(), common)?;
    let body = response
        .read_body()
        .map_err(|err| Failure::Transport(format!("reading the answer: {err}")))?;
    if response.status != 200 {
        return Err(Failure::Refused(Refusal::from_answer(
            response.status,
            &body,
        )));
    }
    Ok(body)
}
