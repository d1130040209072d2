//! Talking to the service: `labctl call` (a signed operation), `labctl
//! describe` and `labctl health` (operational routes, no carriage).

use std::io::{self, BufReader, Read as _, Write as _};
use std::path::{Path, PathBuf};
use std::time::Duration;

use clap::Args;
use lab_coord_client::{Answer as AnswerKind, BodyKind, Request as CoordRequest, HEADER};
use serde_json::Value;

use crate::endpoint::Endpoint;
use crate::failure::{Failure, Refusal};
use crate::http::{self, Request, Response};
use crate::ops::{self, Arguments};
use crate::output::Sink;
use crate::signer::Signer;
use crate::transport::{Connector, Stream};
use crate::Common;

/// An answer whose head has been read and checked.
pub type Answer = Response<BufReader<Stream>>;

/// The service name every answer must carry in `Lab-Service`.
pub const SERVICE: &str = "coord";
/// The contract this client was written against (`Lab-Contract`).
pub const CONTRACT: &str = "2026-09-19";

#[derive(Debug, Args)]
pub struct CallArgs {
    /// The operation's table name (see the list below).
    #[arg(value_name = "OP")]
    pub op: String,

    /// One label of the request path; repeat it for each label, in order.
    #[arg(long = "path", value_name = "LABEL", allow_hyphen_values = true)]
    pub path: Vec<String>,

    /// A query parameter of the operation, e.g. limit=10 or cursor=...
    #[arg(long = "param", value_name = "NAME=VALUE", allow_hyphen_values = true)]
    pub params: Vec<String>,

    /// The request body: a file, or - for stdin. JSON for the publishing,
    /// provisioning, query and explain verbs; raw bytes for retain.
    #[arg(long, value_name = "FILE|-")]
    pub body: Option<PathBuf>,

    /// The interpretation hash of retained bytes (retain's `type`).
    #[arg(long = "type", value_name = "HASH")]
    pub type_hash: Option<String>,

    /// Write the answer (fetch: the bytes) to FILE instead of stdout; the
    /// file appears only once complete.
    #[arg(long, value_name = "FILE")]
    pub out: Option<PathBuf>,
}

#[derive(Debug, Args)]
pub struct DescribeArgs {
    /// A contract file to print verbatim (SURFACE.md, operations.json,
    /// schema/<Type>.schema.json, ...); none prints the description.
    #[arg(value_name = "FILE")]
    pub file: Option<String>,
}

#[derive(Debug, Args)]
pub struct HealthArgs {
    /// Ask /livez (the process answers) instead of /healthz (its backends
    /// are reachable).
    #[arg(long)]
    pub live: bool,
}

/// A connector to the common `--endpoint`, with the common TLS roots.
pub fn connector_of(common: &Common) -> Result<Connector, Failure> {
    connector_to(&common.endpoint, common)
}

/// A connector to `url` with the common TLS roots and timeout.
pub fn connector_to(url: &str, common: &Common) -> Result<Connector, Failure> {
    let endpoint = Endpoint::parse(url).map_err(Failure::Usage)?;
    Connector::new(
        endpoint,
        common.ca_file.as_deref(),
        Duration::from_secs(common.timeout.max(1)),
    )
}

/// Sends `request` and checks the answer's `Lab-Service` header before its
/// body is read.
fn exchange(connector: &Connector, request: &Request<'_>) -> Result<Answer, Failure> {
    let endpoint = &connector.endpoint;
    let url = format!(
        "{}{}",
        endpoint.base,
        &request.target[endpoint.prefix.len()..]
    );
    let stream = connector
        .connect()
        .map_err(|err| Failure::Transport(format!("{} {url}: {err}", request.method)))?;
    let response = http::send(stream, request).map_err(|err| match err {
        http::Error::Io(err) => Failure::Transport(format!("{} {url}: {err}", request.method)),
        http::Error::Malformed(why) => Failure::Protocol(format!(
            "{} {url}: malformed HTTP answer: {why}",
            request.method
        )),
    })?;
    match response.header("Lab-Service") {
        Some(SERVICE) => {}
        Some(other) => {
            return Err(Failure::Protocol(format!(
                "{url} answered as service {other:?}, not {SERVICE:?}"
            )))
        }
        None => {
            return Err(Failure::Protocol(format!(
                "{url} answered HTTP {} without `Lab-Service: {SERVICE}`; \
                 is {} the coordination service?",
                response.status, endpoint.base
            )))
        }
    }
    if let Some(contract) = response.header("Lab-Contract") {
        if contract != CONTRACT {
            eprintln!(
                "labctl: warning: the service answers contract {contract}; \
                 labctl was written for {CONTRACT}"
            );
        }
    }
    Ok(response)
}

fn read_body(response: &mut Answer) -> Result<Vec<u8>, Failure> {
    response
        .read_body()
        .map_err(|err| Failure::Transport(format!("reading the answer: {err}")))
}

fn is_success(status: u16) -> bool {
    (200..300).contains(&status)
}

/// Reads a JSON answer: a success is returned, anything else is a refusal.
pub fn json_answer(response: &mut Answer) -> Result<Value, Failure> {
    let body = read_body(response)?;
    if !is_success(response.status) {
        return Err(Failure::Refused(Refusal::from_answer(
            response.status,
            &body,
        )));
    }
    serde_json::from_slice(&body).map_err(|err| {
        Failure::Protocol(format!(
            "the HTTP {} answer is not JSON: {err}",
            response.status
        ))
    })
}

fn write_json(value: &Value, out: Option<&Path>) -> Result<(), Failure> {
    let mut sink = Sink::open(out)?;
    let mut text = serde_json::to_string_pretty(value).expect("a JSON value serializes");
    text.push('\n');
    sink.write_all(text.as_bytes())
        .map_err(|err| sink.failed(err))?;
    sink.commit()
}

/// Reads the request body: a file, or stdin for `-`.
pub fn read_request_body(path: &Path) -> Result<Vec<u8>, Failure> {
    if path == Path::new("-") {
        let mut body = Vec::new();
        io::stdin()
            .read_to_end(&mut body)
            .map_err(|err| Failure::Io(format!("cannot read stdin: {err}")))?;
        Ok(body)
    } else {
        std::fs::read(path).map_err(|err| Failure::reading(path, err))
    }
}

pub fn run_call(args: CallArgs, common: &Common) -> Result<(), Failure> {
    let op = CoordRequest::new(&args.op)
        .map_err(|err| match err {
            lab_coord_client::BuildError::SocketOnly { name } => Failure::Usage(format!(
                "{name} exists only on the WebSocket binding (/v1/ws)"
            )),
            _ => Failure::Usage(format!(
                "no operation {:?}; the HTTP operations are {}",
                args.op,
                ops::names()
            )),
        })?
        .operation();

    let mut arguments = Arguments {
        path: args.path,
        params: args
            .params
            .iter()
            .map(|text| ops::split_param(text))
            .collect::<Result<_, _>>()
            .map_err(Failure::Usage)?,
    };
    if let Some(hash) = args.type_hash {
        arguments.params.push(("type".into(), hash));
    }
    let request = ops::request(op, &arguments).map_err(Failure::Usage)?;

    let body = match (op.body, &args.body) {
        (BodyKind::None, None) => Vec::new(),
        (BodyKind::None, Some(_)) => {
            return Err(Failure::Usage(format!("{} takes no --body", op.name)))
        }
        (_, None) => {
            return Err(Failure::Usage(format!(
                "{} needs --body FILE (or - for stdin)",
                op.name
            )))
        }
        (BodyKind::Json, Some(path)) => {
            let body = read_request_body(path)?;
            if let Err(err) = serde_json::from_slice::<Value>(&body) {
                return Err(Failure::Data(format!(
                    "the body {} is not JSON: {err}",
                    path.display()
                )));
            }
            body
        }
        (BodyKind::Raw, Some(path)) => read_request_body(path)?,
    };

    let mut response = signed_exchange(op, request, body, common)?;
    match op.answer {
        AnswerKind::Json => write_json(&json_answer(&mut response)?, args.out.as_deref()),
        AnswerKind::Bytes => {
            if !is_success(response.status) {
                let body = read_body(&mut response)?;
                return Err(Failure::Refused(Refusal::from_answer(
                    response.status,
                    &body,
                )));
            }
            stream_body(&mut response, args.out.as_deref())
        }
    }
}

/// Signs `request` (with `body` unless the operation takes none) with the
/// common key and grants, sends it, and answers the response once its
/// service is checked.
pub fn signed_exchange(
    op: &'static lab_coord_client::Operation,
    request: CoordRequest,
    body: Vec<u8>,
    common: &Common,
) -> Result<Answer, Failure> {
    let connector = connector_of(common)?;
    let signer = Signer::load(common, &connector.endpoint)?;
    let built = match op.body {
        BodyKind::None => request.build(),
        _ => request.body(body).build(),
    }
    .map_err(|err| Failure::Usage(ops::explain(op, err)))?;
    let header = signer
        .carriage(built.op(), &built.params, &built.body)?
        .to_header();

    let endpoint = &connector.endpoint;
    let target = format!("{}{}", endpoint.prefix, built.target);
    let mut headers = vec![(HEADER, header)];
    if let Some(content_type) = built.content_type {
        headers.push(("Content-Type", content_type.into()));
    }
    let request = Request {
        method: built.method(),
        target: &target,
        host: &endpoint.authority,
        headers,
        body: &built.body,
    };
    exchange(&connector, &request)
}

/// Signs and sends one JSON operation `op` with `body`; its JSON answer.
pub fn call_json(common: &Common, op: &str, body: &Value) -> Result<Value, Failure> {
    let request =
        CoordRequest::new(op).map_err(|_| Failure::Usage(format!("no operation {op:?}")))?;
    let operation = request.operation();
    let body = serde_json::to_vec(body).expect("a JSON value serializes");
    json_answer(&mut signed_exchange(operation, request, body, common)?)
}

/// Copies a bytes answer to `out` (or stdout). A body cut short is a
/// transport failure, and no file is left behind.
fn stream_body(response: &mut Answer, out: Option<&Path>) -> Result<(), Failure> {
    let mut sink = Sink::open(out)?;
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        let got = match response.body().read(&mut buf) {
            Ok(0) => break,
            Ok(got) => got,
            Err(err) if err.kind() == io::ErrorKind::Interrupted => continue,
            Err(err) => {
                return Err(Failure::Transport(format!(
                    "reading the bytes: {err}; the content is incomplete"
                )))
            }
        };
        sink.write_all(&buf[..got])
            .map_err(|err| sink.failed(err))?;
    }
    sink.commit()
}

fn operational(connector: &Connector, route: &str) -> Result<Answer, Failure> {
    let endpoint = &connector.endpoint;
    let target = format!("{}{route}", endpoint.prefix);
    let request = Request {
        method: "GET",
        target: &target,
        host: &endpoint.authority,
        headers: Vec::new(),
        body: b"",
    };
    exchange(connector, &request)
}

pub fn run_describe(args: DescribeArgs, common: &Common) -> Result<(), Failure> {
    let connector = connector_of(common)?;
    match &args.file {
        None => {
            let mut response = operational(&connector, "/describe")?;
            write_json(&json_answer(&mut response)?, None)
        }
        Some(file) => {
            let encoded: Vec<String> = file
                .split('/')
                .map(lab_coord_client::percent_encode)
                .collect();
            let route = format!("/describe/{}", encoded.join("/"));
            let mut response = operational(&connector, &route)?;
            if !is_success(response.status) {
                let body = read_body(&mut response)?;
                return Err(Failure::Refused(Refusal::from_answer(
                    response.status,
                    &body,
                )));
            }
            stream_body(&mut response, None)
        }
    }
}

pub fn run_health(args: HealthArgs, common: &Common) -> Result<(), Failure> {
    let connector = connector_of(common)?;
    let route = if args.live { "/livez" } else { "/healthz" };
    let mut response = operational(&connector, route)?;
    if response.status != 503 {
        return write_json(&json_answer(&mut response)?, None);
    }
    // 503 carries the health envelope: print it, and name what fails.
    let body = read_body(&mut response)?;
    let Ok(value) = serde_json::from_slice::<Value>(&body) else {
        return Err(Failure::Refused(Refusal::from_answer(503, &body)));
    };
    if value.get("checks").is_none() {
        return Err(Failure::Refused(Refusal::from_answer(503, &body)));
    }
    write_json(&value, None)?;
    let failing: Vec<String> = value["checks"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|check| check["status"] != "ok")
        .map(|check| {
            format!(
                "{} ({})",
                check["name"].as_str().unwrap_or("?"),
                check["detail"].as_str().unwrap_or("")
            )
        })
        .collect();
    Err(Failure::Unhealthy(format!(
        "unhealthy: failing checks: {}",
        if failing.is_empty() {
            "none named".into()
        } else {
            failing.join(", ")
        }
    )))
}
