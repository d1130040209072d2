//! `labctl`: the command-line client of the coordination service.
//!
//! Map of the modules:
//!
//! - [`keyfile`]: Ed25519 key files (`ed25519-secret:<hex seed>`).
//! - [`grantfile`]: grant files (JSON arrays of grant wire objects).
//! - [`grant`]: `labctl grant`, root-issued and delegated grants.
//! - [`ops`]: the Operation table; arguments to query string and signing
//!   params.
//! - [`call`]: `labctl call`, `describe` and `health` over HTTP.
//! - [`declare`]: `labctl declare` and `labctl verify-admission`.
//! - [`endpoint`]: `http://` and `https://` base URLs, and the socket URL.
//! - [`transport`]: plain TCP or TLS (rustls) streams to an endpoint.
//! - [`http`]: the blocking HTTP/1.1 client.
//! - [`signer`]: the key, grants and audience that sign each call.
//! - [`socket`]: the coordination socket (`/v1/ws`, subprotocol `coord`).
//! - [`envelope`]: socket call envelopes from `labctl ws` input lines.
//! - [`session`]: `labctl ws` and `labctl watch`.
//! - [`output`]: stdout, or files that appear only when complete.
//! - [`failure`]: why a command fails, and its exit code.
//! - [`random`]: randomness from `/dev/urandom`.
//! - [`views`]: `labctl compose`, `query` and `explain`.
//! - [`apply`]: `labctl apply` and `labctl verify-application`.
//! - [`export`]: `labctl verify-export`.
//! - [`reproduce`]: `labctl reproduce-application`, an application's run
//!   repeated locally in the same sandbox and compared.
//!
//! The signing itself (proof, carriage, grant bytes) is `lab-coord-auth`'s;
//! the byte recipes are in `contracts/coordination/AUTH.md`, the usage in
//! `docs/labctl.md`.

mod apply;
mod call;
mod checks;
mod declare;
mod endpoint;
mod envelope;
mod export;
mod failure;
mod grant;
mod grantfile;
mod http;
mod keyfile;
mod occurrence;
mod ops;
mod output;
mod random;
mod reproduce;
mod session;
mod signer;
mod socket;
mod transport;
mod views;

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::{Args, Parser, Subcommand};
use lab_coord_auth::{Principal, SigningKey};

use crate::failure::{Failure, EXIT_USAGE};

/// Client of the coordination service: keys, grants and signed calls.
#[derive(Debug, Parser)]
#[command(name = "labctl", version, after_help = EXIT_HELP)]
struct Cli {
    #[command(flatten)]
    common: Common,

    #[command(subcommand)]
    command: Command,
}

/// The development deployment's operations endpoint.
pub const DEFAULT_ENDPOINT: &str = "http://127.0.0.1:8094";

/// Options every command accepts, before or after its name, each with an
/// environment fallback.
#[derive(Debug, Clone, Args)]
#[command(next_help_heading = "Common options")]
pub struct Common {
    /// The key file: signs proofs (call) and grants (grant).
    #[arg(long, env = "LAB_KEY", value_name = "FILE", global = true)]
    pub key: Option<PathBuf>,

    /// Grant files to carry (JSON arrays or single grants); repeatable
    /// [env: LAB_GRANTS, colon-separated, used when no --grants is given].
    #[arg(long, value_name = "FILE", global = true)]
    pub grants: Vec<PathBuf>,

    /// The operations base URL: http[s]://host[:port][/prefix], e.g. a
    /// deployment's external mount https://lab.example/api/operations.
    #[arg(
        long,
        env = "LAB_ENDPOINT",
        default_value = DEFAULT_ENDPOINT,
        value_name = "URL",
        global = true
    )]
    pub endpoint: String,

    /// The audience to sign: the service's external operations base URL
    /// [default: the endpoint without a trailing slash].
    #[arg(long, env = "LAB_AUDIENCE", value_name = "URL", global = true)]
    pub audience: Option<String>,

    /// The deployment's world name, part of every grant's signed bytes.
    #[arg(long, env = "LAB_WORLD", default_value = "lab", global = true)]
    pub world: String,

    /// Extra trusted certificate authorities for https:// (a PEM file),
    /// besides the built-in web roots.
    #[arg(long, env = "LAB_CA_FILE", value_name = "PEM", global = true)]
    pub ca_file: Option<PathBuf>,

    /// Seconds allowed for connecting and for each read or write.
    #[arg(long, default_value_t = 300, value_name = "SECONDS", global = true)]
    pub timeout: u64,
}

/// The environment variables `labctl` reads; an empty one counts as unset.
const ENVIRONMENT: [&str; 7] = [
    "LAB_KEY",
    "LAB_GRANTS",
    "LAB_ENDPOINT",
    "LAB_AUDIENCE",
    "LAB_WORLD",
    "LAB_BYTES_ENDPOINT",
    "LAB_CA_FILE",
];

impl Common {
    /// The grant files: the `--grants` options, or else `LAB_GRANTS`.
    pub fn grant_files(&self) -> Vec<PathBuf> {
        if !self.grants.is_empty() {
            return self.grants.clone();
        }
        let listed = std::env::var_os("LAB_GRANTS").unwrap_or_default();
        std::env::split_paths(&listed)
            .filter(|path| !path.as_os_str().is_empty())
            .collect()
    }

    /// The key file, which the command needs.
    pub fn key_file(&self) -> Result<&Path, Failure> {
        self.key
            .as_deref()
            .ok_or_else(|| Failure::Usage("no key: give --key FILE or set LAB_KEY".into()))
    }
}

const EXIT_HELP: &str = "Exit codes: 0 success; 2 invalid (also invalid_cursor, invalid_record, \
structural); 3 not_found; 4 exists, conflict, idempotency_mismatch, unresolved; 5 unverified; \
6 denied; 7 limit_exceeded; 8 unavailable; 9 internal, not_implemented; 64 usage; 65 malformed \
input file; 66 missing input file; 69 transport; 70 protocol; 73 cannot create output; \
74 I/O error. See docs/labctl.md.";

#[derive(Debug, Subcommand)]
enum Command {
    /// Create an Ed25519 key file (mode 0600) and print its principal.
    Keygen(KeygenArgs),
    /// Print the principal of a key file.
    Principal(PrincipalArgs),
    /// Sign a grant: root-issued, or delegated from a --parent grant.
    Grant(grant::GrantArgs),
    /// Sign and send one operation of the coordination service.
    #[command(after_help = call_help())]
    Call(call::CallArgs),
    /// Compose a view from selected occurrences (POST /v1/compose).
    Compose(views::ComposeArgs),
    /// Query a view (POST /v1/query); --all follows every page.
    Query(views::QueryArgs),
    /// Explain an assertion at a view (POST /v1/explain).
    Explain(views::ExplainArgs),
    /// A socket session (/v1/ws): one call per stdin line, {"op", "params"?,
    /// "body"?, "id"?}, each signed; every frame printed as a JSON line.
    Ws(session::WsArgs),
    /// Subscribe to PATH over the socket and print each subscription frame
    /// as a JSON line; exit 0 on its `closed` frame.
    Watch(session::WatchArgs),
    /// Print the service's description (GET /describe), or one contract file.
    Describe(call::DescribeArgs),
    /// Print the service's health (GET /healthz); exit 8 when a check fails.
    Health(call::HealthArgs),
    /// Declare a statement about an artifact; print its assertion ID,
    /// occurrence and envelope.
    Declare(declare::DeclareArgs),
    /// Check a fetched declaration envelope offline: the root's signature,
    /// the frame digest, the proof and the publisher; exit 5 when one fails.
    VerifyAdmission(declare::VerifyAdmissionArgs),
    /// Apply a configured tool to input occurrences (POST /v1/applications);
    /// print the outcome, attempt, result and outputs.
    Apply(apply::ApplyArgs),
    /// Fetch an application's facts and documents and check them offline:
    /// the root's DSSE signature over the in-toto statement and its
    /// agreement with every fact and document; exit 5 when one fails.
    VerifyApplication(apply::VerifyApplicationArgs),
    /// Verify an application as verify-application does, then run its
    /// release again locally in the same sandbox on the inputs fetched by
    /// their attested content, with its recipe and attested limits, and
    /// compare each output with the attested one; exit 5 on a mismatch.
    ReproduceApplication(reproduce::ReproduceApplicationArgs),
    /// Fetch an export's manifests and chunks from the bytes service and
    /// check them offline: digests, contiguous journal prefixes, whole
    /// batches, creation entries against the spaces listed; exit 5 when
    /// one fails.
    VerifyExport(export::VerifyExportArgs),
}

#[derive(Debug, Args)]
struct KeygenArgs {
    /// The key file to create; an existing file is never replaced.
    #[arg(long, value_name = "FILE")]
    out: PathBuf,
}

#[derive(Debug, Args)]
struct PrincipalArgs {}

fn call_help() -> String {
    let mut text = String::from("Operations (name: method route, parameters):\n");
    for op in lab_coord_client::OPERATIONS {
        let params: Vec<String> = op
            .params
            .iter()
            .map(|spec| {
                let mut name = match spec.kind {
                    lab_coord_client::ParamKind::Strings => format!("--{} LABEL...", spec.name),
                    lab_coord_client::ParamKind::Int => format!("{}=INT", spec.name),
                    lab_coord_client::ParamKind::String => format!("{}=TEXT", spec.name),
                };
                if !spec.required {
                    name = format!("[{name}]");
                }
                name
            })
            .collect();
        let mut words = params;
        match op.body {
            lab_coord_client::BodyKind::None => {}
            lab_coord_client::BodyKind::Json => words.push("--body JSON".into()),
            lab_coord_client::BodyKind::Raw => words.push("--body BYTES".into()),
        }
        text.push_str(&format!(
            "  {:<17} {:<4} {:<20} {}\n",
            op.name,
            op.method,
            op.route,
            words.join(" ")
        ));
    }
    text
}

fn keygen(args: KeygenArgs) -> Result<(), Failure> {
    let mut seed = [0u8; 32];
    random::fill(&mut seed)
        .map_err(|err| Failure::Io(format!("cannot read /dev/urandom: {err}")))?;
    let key = SigningKey::from_bytes(&seed);
    keyfile::create(&args.out, &key)?;
    println!("{}", Principal::of(&key));
    Ok(())
}

fn principal(_: PrincipalArgs, common: &Common) -> Result<(), Failure> {
    let key = keyfile::load(common.key_file()?)?;
    println!("{}", Principal::of(&key));
    Ok(())
}

fn main() -> ExitCode {
    // Before any thread exists: `LAB_KEY=` means no key, not an empty path.
    for name in ENVIRONMENT {
        if std::env::var_os(name).is_some_and(|value| value.is_empty()) {
            std::env::remove_var(name);
        }
    }
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(err) => {
            // Help and version are not errors; every other parse failure is
            // a usage error (64), never clap's 2, which is `invalid` here.
            let _ = err.print();
            return if err.use_stderr() {
                ExitCode::from(EXIT_USAGE)
            } else {
                ExitCode::SUCCESS
            };
        }
    };
    let common = &cli.common;
    let result = match cli.command {
        Command::Keygen(args) => keygen(args),
        Command::Principal(args) => principal(args, common),
        Command::Grant(args) => grant::run(args, common),
        Command::Call(args) => call::run_call(args, common),
        Command::Compose(args) => views::run_compose(args, common),
        Command::Query(args) => views::run_query(args, common),
        Command::Explain(args) => views::run_explain(args, common),
        Command::Ws(args) => session::run_ws(args, common),
        Command::Watch(args) => session::run_watch(args, common),
        Command::Describe(args) => call::run_describe(args, common),
        Command::Health(args) => call::run_health(args, common),
        Command::Declare(args) => declare::run_declare(args, common),
        Command::VerifyAdmission(args) => declare::run_verify_admission(args, common),
        Command::Apply(args) => apply::run_apply(args, common),
        Command::VerifyApplication(args) => apply::run_verify_application(args, common),
        Command::ReproduceApplication(args) => reproduce::run_reproduce_application(args, common),
        Command::VerifyExport(args) => export::run_verify_export(args, common),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(failure) => {
            eprintln!("labctl: {failure}");
            if let Failure::Refused(refusal) = &failure {
                if !refusal.body.is_empty() {
                    eprintln!("{}", refusal.body);
                }
            }
            ExitCode::from(failure.exit_code())
        }
    }
}
