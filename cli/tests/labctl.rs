//! Black-box tests of the `labctl` binary: key files, grants checked with
//! `lab-coord-auth`, and `labctl call` against a one-request HTTP server
//! that records exactly what arrived and verifies its carriage.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::thread::JoinHandle;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use lab_coord_auth::{
    valid_grants, BodyDigest, Carriage, Grant, GrantKind, MemoryReplayCache, ParamValue, Params,
    Principal, RequestFacts, Verifier, HEADER,
};
use serde_json::{json, Value};

const LAB_VARS: [&str; 6] = [
    "LAB_KEY",
    "LAB_ENDPOINT",
    "LAB_AUDIENCE",
    "LAB_GRANTS",
    "LAB_WORLD",
    "LAB_BYTES_ENDPOINT",
];

fn temp_dir(name: &str) -> PathBuf {
    static NEXT: AtomicU32 = AtomicU32::new(0);
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(format!(
        "labctl-{name}-{}-{}",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed)
    ));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs()
}

/// Runs labctl with `args`, the `LAB_*` variables of `env` only, and
/// `stdin`.
fn labctl_with(args: &[&str], env: &[(&str, &str)], stdin: &[u8]) -> Output {
    let mut command = Command::new(env!("CARGO_BIN_EXE_labctl"));
    for var in LAB_VARS {
        command.env_remove(var);
    }
    command
        .args(args)
        .envs(env.iter().copied())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = command.spawn().expect("start labctl");
    let mut input = child.stdin.take().unwrap();
    input.write_all(stdin).unwrap();
    drop(input);
    child.wait_with_output().unwrap()
}

fn labctl(args: &[&str]) -> Output {
    labctl_with(args, &[], b"")
}

fn code(output: &Output) -> i32 {
    output.status.code().expect("labctl exited by a signal")
}

fn stdout(output: &Output) -> String {
    String::from_utf8(output.stdout.clone()).unwrap()
}

fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

fn ok(output: Output) -> Output {
    assert_eq!(code(&output), 0, "stderr: {}", stderr(&output));
    output
}

fn p(path: &Path) -> &str {
    path.to_str().unwrap()
}

/// A key file made by `labctl keygen`, and its principal.
fn keygen(dir: &Path, name: &str) -> (PathBuf, Principal) {
    let path = dir.join(format!("{name}.key"));
    let out = ok(labctl(&["keygen", "--out", p(&path)]));
    let principal = Principal::parse(stdout(&out).trim_end()).expect("keygen prints a principal");
    (path, principal)
}

/// Reads a grant file the way the service reads a carriage's grants.
fn read_grants(path: &Path) -> Vec<Grant> {
    let grants: Value = serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap();
    let grants = match grants {
        Value::Array(items) => items,
        one => vec![one],
    };
    let proof = json!({
        "principal": format!("ed25519:{}", "ab".repeat(32)),
        "nonce": "A".repeat(22),
        "timestamp": 1,
        "audience": "x",
        "signature": "A".repeat(86) + "==",
    });
    let carriage = json!({"proof": proof, "grants": grants});
    Carriage::from_json_bytes(carriage.to_string().as_bytes())
        .expect("grant file decodes strictly")
        .grants
}

#[test]
fn key_file_round_trip() {
    let dir = temp_dir("keys");
    let (path, principal) = keygen(&dir, "me");
    let text = std::fs::read_to_string(&path).unwrap();
    let hex = text
        .strip_prefix("ed25519-secret:")
        .and_then(|rest| rest.strip_suffix('\n'))
        .expect("key file format");
    assert_eq!(hex.len(), 64);
    assert!(hex
        .bytes()
        .all(|b| b.is_ascii_hexdigit() && !b.is_ascii_uppercase()));
    let mut seed = [0u8; 32];
    for (i, byte) in seed.iter_mut().enumerate() {
        *byte = u8::from_str_radix(&hex[2 * i..2 * i + 2], 16).unwrap();
    }
    let key = lab_coord_auth::SigningKey::from_bytes(&seed);
    assert_eq!(Principal::of(&key), principal);
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt as _;
        let mode = std::fs::metadata(&path).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
    }

    let out = ok(labctl(&["principal", "--key", p(&path)]));
    assert_eq!(stdout(&out), format!("{principal}\n"));
    let out = ok(labctl_with(&["principal"], &[("LAB_KEY", p(&path))], b""));
    assert_eq!(stdout(&out), format!("{principal}\n"));

    // Never replaced.
    let again = labctl(&["keygen", "--out", p(&path)]);
    assert_eq!(code(&again), 73, "{}", stderr(&again));
    assert_eq!(std::fs::read_to_string(&path).unwrap(), text);

    // Missing and malformed key files.
    let out = labctl(&["principal", "--key", p(&dir.join("absent.key"))]);
    assert_eq!(code(&out), 66);
    let bad = dir.join("bad.key");
    std::fs::write(&bad, "ed25519-secret:XYZ\n").unwrap();
    let out = labctl(&["principal", "--key", p(&bad)]);
    assert_eq!(code(&out), 65);
    // Two keys differ.
    let (_, other) = keygen(&dir, "other");
    assert_ne!(other, principal);
}

#[test]
fn root_grant_verifies() {
    let dir = temp_dir("grant");
    let (root_key, root) = keygen(&dir, "root");
    let (_, worker) = keygen(&dir, "worker");
    let file = dir.join("worker.grants");
    let out = ok(labctl(&[
        "grant",
        "--key",
        p(&root_key),
        "--to",
        &worker.to_string(),
        "--kind",
        "read",
        "--path",
        "projects",
        "--path",
        "a b/é",
        "--valid-for",
        "1h",
        "--append-to",
        p(&file),
    ]));
    let printed: Value = serde_json::from_str(&stdout(&out)).unwrap();
    let grants = read_grants(&file);
    assert_eq!(grants.len(), 1);
    let grant = &grants[0];
    assert_eq!(printed, grant.to_json());
    assert_eq!(grant.principal, worker);
    assert_eq!(grant.issuer, root);
    assert_eq!(grant.kind, GrantKind::Read);
    assert_eq!(grant.path, ["projects", "a b/é"]);
    let t = now();
    assert!((t + 3595..=t + 3600).contains(&grant.valid_until));
    assert_eq!(valid_grants(&grants, "lab", &root, t), [true]);
    assert_eq!(valid_grants(&grants, "other", &root, t), [false]);
    assert_eq!(valid_grants(&grants, "lab", &worker, t), [false]);

    // --valid-until, another world from LAB_WORLD, appended to the same file.
    let out = ok(labctl_with(
        &[
            "grant",
            "--key",
            p(&root_key),
            "--to",
            &worker.to_string(),
            "--kind",
            "provision",
            "--valid-until",
            "4000000000",
            "--append-to",
            p(&file),
        ],
        &[("LAB_WORLD", "w2")],
        b"",
    ));
    let grants = read_grants(&file);
    assert_eq!(grants.len(), 2);
    assert_eq!(
        grants[1].to_json(),
        serde_json::from_str::<Value>(&stdout(&out)).unwrap()
    );
    assert_eq!(grants[1].valid_until, 4_000_000_000);
    assert!(grants[1].path.is_empty());
    assert_eq!(valid_grants(&grants, "w2", &root, now()), [false, true]);

    // Exactly one expiry, a known kind, a principal.
    for args in [
        &["--kind", "read", "--to", &worker.to_string()][..],
        &[
            "--kind",
            "read",
            "--to",
            &worker.to_string(),
            "--valid-for",
            "1h",
            "--valid-until",
            "9",
        ],
        &[
            "--kind",
            "write",
            "--to",
            &worker.to_string(),
            "--valid-for",
            "1h",
        ],
        &["--kind", "read", "--to", "ed25519:AB", "--valid-for", "1h"],
        &[
            "--kind",
            "read",
            "--to",
            &worker.to_string(),
            "--valid-for",
            "1y",
        ],
    ] {
        let mut all = vec!["grant", "--key", p(&root_key)];
        all.extend_from_slice(args);
        let out = labctl(&all);
        assert_eq!(code(&out), 64, "{args:?}: {}", stderr(&out));
    }
}

#[test]
fn delegation_carries_its_chain_and_refuses_widening() {
    let dir = temp_dir("delegate");
    let (root_key, root) = keygen(&dir, "root");
    let (lead_key, lead) = keygen(&dir, "lead");
    let (worker_key, worker) = keygen(&dir, "worker");
    let (_, helper) = keygen(&dir, "helper");
    let lead_file = dir.join("lead.grants");
    let worker_file = dir.join("worker.grants");
    let helper_file = dir.join("helper.grants");
    let grant = |key: &Path, to: &Principal, extra: &[&str]| {
        let to = to.to_string();
        let mut args = vec!["grant", "--key", p(key), "--to", &to];
        args.extend_from_slice(extra);
        labctl(&args)
    };

    ok(grant(
        &root_key,
        &lead,
        &[
            "--kind",
            "publish",
            "--path",
            "projects",
            "--valid-for",
            "2h",
            "--append-to",
            p(&lead_file),
        ],
    ));
    let lead_grants = read_grants(&lead_file);
    let parent_expiry = lead_grants[0].valid_until.to_string();

    ok(grant(
        &lead_key,
        &worker,
        &[
            "--kind",
            "publish",
            "--path",
            "projects",
            "--path",
            "alpha",
            "--valid-for",
            "1h",
            "--parent",
            p(&lead_file),
            "--append-to",
            p(&worker_file),
        ],
    ));
    let chain = read_grants(&worker_file);
    assert_eq!(chain.len(), 2, "the parent's chain comes along");
    assert_eq!(chain[0], lead_grants[0]);
    assert_eq!(chain[1].issuer, lead);
    assert_eq!(chain[1].principal, worker);
    assert_eq!(valid_grants(&chain, "lab", &root, now()), [true, true]);
    // Without its parent the delegated grant is not valid.
    assert_eq!(valid_grants(&chain[1..], "lab", &root, now()), [false]);

    // A second level: the file holds the whole chain, root-first.
    ok(grant(
        &worker_key,
        &helper,
        &[
            "--kind",
            "publish",
            "--path",
            "projects",
            "--path",
            "alpha",
            "--path",
            "artifacts",
            "--valid-for",
            "30m",
            "--parent",
            p(&worker_file),
            "--append-to",
            p(&helper_file),
        ],
    ));
    let chain = read_grants(&helper_file);
    assert_eq!(chain.len(), 3);
    assert_eq!(chain[..2], read_grants(&worker_file)[..]);
    assert_eq!(
        valid_grants(&chain, "lab", &root, now()),
        [true, true, true]
    );

    // Widening is refused: broader path, other kind, later expiry.
    let before = std::fs::read(&helper_file).unwrap();
    let later = (lead_grants[0].valid_until + 10).to_string();
    for extra in [
        &["--kind", "publish", "--valid-for", "1h"][..],
        &["--kind", "publish", "--path", "beta", "--valid-for", "1h"],
        &["--kind", "read", "--path", "projects", "--valid-for", "1h"],
        &[
            "--kind",
            "publish",
            "--path",
            "projects",
            "--valid-until",
            &later,
        ],
    ] {
        let mut args = extra.to_vec();
        args.extend_from_slice(&["--parent", p(&lead_file), "--append-to", p(&helper_file)]);
        let out = grant(&lead_key, &worker, &args);
        assert_eq!(code(&out), 64, "{extra:?}");
        assert!(stderr(&out).contains("cannot delegate"), "{}", stderr(&out));
        assert!(out.stdout.is_empty());
    }
    assert_eq!(std::fs::read(&helper_file).unwrap(), before);
    // The same expiry as the parent's is not a widening.
    ok(grant(
        &lead_key,
        &worker,
        &[
            "--kind",
            "publish",
            "--path",
            "projects",
            "--valid-until",
            &parent_expiry,
            "--parent",
            p(&lead_file),
        ],
    ));

    // Only the parent's holder can delegate from it.
    let out = grant(
        &worker_key,
        &helper,
        &[
            "--kind",
            "publish",
            "--path",
            "projects",
            "--valid-for",
            "1m",
            "--parent",
            p(&lead_file),
        ],
    );
    assert_eq!(code(&out), 64);
    assert!(
        stderr(&out).contains("held by the signing key"),
        "{}",
        stderr(&out)
    );
}

// ---------------------------------------------------------------------------
// A one-request HTTP server.

/// What the server received.
#[derive(Debug)]
struct Received {
    method: String,
    target: String,
    headers: Vec<(String, String)>,
    body: Vec<u8>,
}

impl Received {
    fn header(&self, name: &str) -> Option<&str> {
        let mut found = self
            .headers
            .iter()
            .filter(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str());
        let first = found.next();
        assert!(found.next().is_none(), "header {name} repeated");
        first
    }

    fn route(&self) -> &str {
        self.target.split('?').next().unwrap()
    }

    fn query(&self) -> &str {
        self.target.split_once('?').map_or("", |(_, q)| q)
    }
}

/// Listens on a free port, answers one request with `answer`, and returns
/// what it received. The address is `127.0.0.1:port`.
fn serve_once(answer: Vec<u8>) -> (String, JoinHandle<Received>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let address = listener.local_addr().unwrap().to_string();
    let handle = std::thread::spawn(move || answer_one(&listener, &answer));
    (address, handle)
}

/// Answers one connection after another, each with the next answer.
fn serve_each(answers: Vec<Vec<u8>>) -> (String, JoinHandle<Vec<Received>>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let address = listener.local_addr().unwrap().to_string();
    let handle = std::thread::spawn(move || {
        answers
            .iter()
            .map(|answer| answer_one(&listener, answer))
            .collect()
    });
    (address, handle)
}

/// Reads one request from the next connection and sends `answer`.
fn answer_one(listener: &TcpListener, answer: &[u8]) -> Received {
    let (stream, _) = listener.accept().unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(30)))
        .unwrap();
    let mut reader = BufReader::new(stream.try_clone().unwrap());
    let mut line = String::new();
    reader.read_line(&mut line).unwrap();
    let mut parts = line.trim_end().split(' ');
    let method = parts.next().unwrap().to_owned();
    let target = parts.next().unwrap().to_owned();
    assert_eq!(parts.next(), Some("HTTP/1.1"));
    let mut headers = Vec::new();
    loop {
        let mut line = String::new();
        reader.read_line(&mut line).unwrap();
        assert!(line.ends_with("\r\n"), "{line:?}");
        let line = line.trim_end_matches("\r\n");
        if line.is_empty() {
            break;
        }
        let (name, value) = line.split_once(": ").unwrap();
        headers.push((name.to_owned(), value.to_owned()));
    }
    let length = headers
        .iter()
        .find(|(n, _)| n.eq_ignore_ascii_case("content-length"))
        .map_or(0, |(_, v)| v.parse::<usize>().unwrap());
    let mut body = vec![0; length];
    reader.read_exact(&mut body).unwrap();
    let mut stream: TcpStream = stream;
    stream.write_all(answer).unwrap();
    stream.flush().unwrap();
    Received {
        method,
        target,
        headers,
        body,
    }
}

/// An answer with a `Content-Length` body.
fn answer(status: &str, headers: &[&str], body: &[u8]) -> Vec<u8> {
    let mut text = format!("HTTP/1.1 {status}\r\n");
    for header in headers {
        text.push_str(header);
        text.push_str("\r\n");
    }
    text.push_str(&format!("Content-Length: {}\r\n\r\n", body.len()));
    let mut bytes = text.into_bytes();
    bytes.extend_from_slice(body);
    bytes
}

const COORD: &[&str] = &[
    "Lab-Service: coord",
    "Lab-Contract: 2026-09-19",
    "Content-Type: application/json",
];

fn json_answer(status: &str, value: &Value) -> Vec<u8> {
    answer(status, COORD, value.to_string().as_bytes())
}

fn percent_decode(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            out.push(u8::from_str_radix(&text[i + 1..i + 3], 16).unwrap());
            i += 3;
        } else {
            assert!(
                bytes[i].is_ascii_alphanumeric() || b"-._~".contains(&bytes[i]),
                "unencoded byte {:?} in {text:?}",
                bytes[i] as char
            );
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8(out).unwrap()
}

/// The signing params the service rebuilds from a query string: `path`
/// repeated into an array, the integer parameters as integers.
fn params_from_query(query: &str) -> (Params, Vec<String>) {
    let mut params = Params::new();
    let mut path = Vec::new();
    for pair in query.split('&').filter(|pair| !pair.is_empty()) {
        let (name, value) = pair.split_once('=').unwrap();
        let value = percent_decode(value);
        match name {
            "path" => path.push(value),
            "through" | "after" | "limit" | "position" | "depth" => {
                params.insert(name, ParamValue::Int(value.parse().unwrap()));
            }
            _ => params.insert(name, ParamValue::String(value)),
        }
    }
    if !path.is_empty() {
        params.insert("path", ParamValue::Strings(path.clone()));
    }
    (params, path)
}

/// Checks the request's carriage as the service would, for `op`: the
/// proof over what arrived, then a grant chain for `kind` on the path.
fn verify(
    received: &Received,
    op: &str,
    kind: GrantKind,
    root: &Principal,
    audience: &str,
    path: &[String],
) -> Principal {
    let header = received.header(HEADER).expect("Svc-Auth header");
    let carriage = Carriage::from_header(Some(header.as_bytes())).expect("carriage decodes");
    // The client sends JCS(carriage).
    assert_eq!(carriage.to_header(), header);
    assert_eq!(carriage.proof.nonce.len(), 22);
    assert!(carriage.proof.timestamp.abs_diff(now()) <= 5);
    assert_eq!(carriage.proof.audience, audience);
    let (params, query_path) = params_from_query(received.query());
    let path = if query_path.is_empty() {
        path.to_vec()
    } else {
        query_path
    };
    let request = RequestFacts {
        op,
        params: &params,
        body_digest: BodyDigest::of(&received.body),
    };
    let verifier = Verifier::new("lab", *root, audience);
    let auth = verifier
        .check(
            &carriage,
            &request,
            kind,
            &path,
            now(),
            &mut MemoryReplayCache::new(),
        )
        .expect("the carriage verifies and authorizes");
    auth.principal
}

/// Keys and grants for the call tests: the root, and a worker holding
/// `kinds` on `projects/alpha` through a delegate.
struct Setup {
    dir: PathBuf,
    root: Principal,
    worker_key: PathBuf,
    worker: Principal,
    grants: PathBuf,
}

fn setup(name: &str, kinds: &[&str]) -> Setup {
    let dir = temp_dir(name);
    let (root_key, root) = keygen(&dir, "root");
    let (lead_key, lead) = keygen(&dir, "lead");
    let (worker_key, worker) = keygen(&dir, "worker");
    let lead_file = dir.join("lead.grants");
    let grants = dir.join("worker.grants");
    for kind in kinds {
        ok(labctl(&[
            "grant",
            "--key",
            p(&root_key),
            "--to",
            &lead.to_string(),
            "--kind",
            kind,
            "--path",
            "projects",
            "--valid-for",
            "1h",
            "--append-to",
            p(&lead_file),
        ]));
        ok(labctl(&[
            "grant",
            "--key",
            p(&lead_key),
            "--to",
            &worker.to_string(),
            "--kind",
            kind,
            "--path",
            "projects",
            "--path",
            "alpha",
            "--valid-for",
            "30m",
            "--parent",
            p(&lead_file),
            "--append-to",
            p(&grants),
        ]));
    }
    Setup {
        dir,
        root,
        worker_key,
        worker,
        grants,
    }
}

#[test]
fn call_entries_end_to_end() {
    let s = setup("entries", &["read"]);
    let page = json!({"space": {"root_id": "r", "space_id": "s", "path": ["projects", "alpha"]},
                      "through": 4, "entries": [], "scanned_through": 4, "next_after": null});
    let (address, server) = serve_once(json_answer("200 OK", &page));
    let endpoint = format!("http://{address}");
    let out = ok(labctl(&[
        "call",
        "entries",
        "--path",
        "projects",
        "--path",
        "alpha",
        "--path",
        "a b&c=d/é",
        "--param",
        "limit=10",
        "--param",
        "after=2",
        "--key",
        p(&s.worker_key),
        "--grants",
        p(&s.grants),
        "--endpoint",
        &endpoint,
    ]));
    let received = server.join().unwrap();
    assert_eq!(received.method, "GET");
    assert_eq!(received.route(), "/v1/entries");
    assert_eq!(
        received.query(),
        "path=projects&path=alpha&path=a%20b%26c%3Dd%2F%C3%A9&after=2&limit=10"
    );
    assert_eq!(received.header("Host"), Some(address.as_str()));
    assert_eq!(received.header("Content-Length"), None);
    assert_eq!(received.header("Content-Type"), None);
    assert!(received.body.is_empty());
    let principal = verify(
        &received,
        "entries",
        GrantKind::Read,
        &s.root,
        &endpoint,
        &[],
    );
    assert_eq!(principal, s.worker);
    // The carriage holds the whole chain.
    let header = received.header(HEADER).unwrap();
    let carriage = Carriage::from_header(Some(header.as_bytes())).unwrap();
    assert_eq!(carriage.grants, read_grants(&s.grants));
    // The answer, pretty-printed.
    let printed: Value = serde_json::from_str(&stdout(&out)).unwrap();
    assert_eq!(printed, page);
    assert!(stdout(&out).contains("\n  \"entries\": []"));
}

#[test]
fn call_publish_from_the_environment() {
    let s = setup("publish", &["read", "publish"]);
    // Bytes exactly as written, odd spacing included.
    let body = b"{ \"operation_id\": \"op-1\",\n  \"path\": [\"projects\",\"alpha\",\"workers\",\"w\",\"notes\",\"n\"],\n  \"profile\": \"p\", \"record\": {\"x\": 1} }";
    let body_file = s.dir.join("publish.json");
    std::fs::write(&body_file, body).unwrap();
    let result = json!({"record": {"publisher": s.worker.to_string()}, "space_created": true, "replayed": false});
    // A chunked answer.
    let text = result.to_string();
    let (head, tail) = text.split_at(10);
    let chunked = format!(
        "HTTP/1.1 201 Created\r\nLab-Service: coord\r\nLab-Contract: 2026-09-19\r\n\
         Transfer-Encoding: chunked\r\n\r\n{:x}\r\n{head}\r\n{:x}\r\n{tail}\r\n0\r\n\r\n",
        head.len(),
        tail.len()
    );
    let (address, server) = serve_once(chunked.into_bytes());
    let endpoint = format!("http://{address}/api/operations/");
    let audience = format!("http://{address}/api/operations");
    // The read grants in a second file, both through LAB_GRANTS.
    let out = ok(labctl_with(
        &["call", "publish", "--body", p(&body_file)],
        &[
            ("LAB_KEY", p(&s.worker_key)),
            ("LAB_ENDPOINT", &endpoint),
            ("LAB_GRANTS", &format!("{}:{}", p(&s.grants), p(&s.grants))),
        ],
        b"",
    ));
    let received = server.join().unwrap();
    assert_eq!(received.method, "POST");
    assert_eq!(received.route(), "/api/operations/v1/publish");
    assert_eq!(received.query(), "");
    assert_eq!(received.body, body);
    assert_eq!(received.header("Content-Type"), Some("application/json"));
    assert_eq!(
        received.header("Content-Length"),
        Some(body.len().to_string().as_str())
    );
    let path: Vec<String> = ["projects", "alpha", "workers", "w", "notes", "n"]
        .map(String::from)
        .to_vec();
    verify(
        &received,
        "publish",
        GrantKind::Publish,
        &s.root,
        &audience,
        &path,
    );
    // Repeated grant files are carried once.
    let header = received.header(HEADER).unwrap();
    let carriage = Carriage::from_header(Some(header.as_bytes())).unwrap();
    assert_eq!(carriage.grants.len(), 4);
    let printed: Value = serde_json::from_str(&stdout(&out)).unwrap();
    assert_eq!(printed, result);

    // LAB_AUDIENCE overrides the audience; a body from stdin.
    let (address, server) = serve_once(json_answer("200 OK", &result));
    ok(labctl_with(
        &["call", "query", "--body", "-", "--grants", p(&s.grants)],
        &[
            ("LAB_KEY", p(&s.worker_key)),
            ("LAB_ENDPOINT", &format!("http://{address}")),
            ("LAB_AUDIENCE", "https://lab.example/api/operations"),
        ],
        br#"{"view":{"root_id":"r","space_id":"s","position":1},"filters":{}}"#,
    ));
    let received = server.join().unwrap();
    assert_eq!(received.route(), "/v1/query");
    verify(
        &received,
        "query",
        GrantKind::Read,
        &s.root,
        "https://lab.example/api/operations",
        &path,
    );
}

#[test]
fn call_retain_and_fetch_bytes() {
    let s = setup("bytes", &["read", "publish"]);
    let content: Vec<u8> = (0..=255u8).chain([0, 0xff, b'\r', b'\n']).collect();
    let artifact = json!({"bytes": "sha256:aa", "type": "sha256:bb"});
    let (address, server) = serve_once(json_answer("200 OK", &artifact));
    let endpoint = format!("http://{address}");
    let out = ok(labctl_with(
        &[
            "call",
            "retain",
            "--path",
            "projects",
            "--path",
            "alpha",
            "--type",
            "sha256:bb",
            "--body",
            "-",
            "--key",
            p(&s.worker_key),
            "--grants",
            p(&s.grants),
            "--endpoint",
            &endpoint,
        ],
        &[],
        &content,
    ));
    let received = server.join().unwrap();
    assert_eq!(received.method, "PUT");
    assert_eq!(received.route(), "/v1/retain");
    assert_eq!(
        received.query(),
        "path=projects&path=alpha&type=sha256%3Abb"
    );
    assert_eq!(
        received.header("Content-Type"),
        Some("application/octet-stream")
    );
    assert_eq!(received.body, content);
    let (params, _) = params_from_query(received.query());
    assert_eq!(
        params.to_json().unwrap(),
        json!({"path": ["projects", "alpha"], "type": "sha256:bb"})
    );
    verify(
        &received,
        "retain",
        GrantKind::Publish,
        &s.root,
        &endpoint,
        &[],
    );
    assert_eq!(
        serde_json::from_str::<Value>(&stdout(&out)).unwrap(),
        artifact
    );

    // fetch: the bytes to --out.
    let (address, server) = serve_once(answer(
        "200 OK",
        &[
            "Lab-Service: coord",
            "Content-Type: application/octet-stream",
        ],
        &content,
    ));
    let endpoint = format!("http://{address}");
    let file = s.dir.join("fetched.bin");
    let out = ok(labctl(&[
        "call",
        "fetch",
        "--path",
        "projects",
        "--path",
        "alpha",
        "--param",
        "bytes=sha256:aa",
        "--out",
        p(&file),
        "--key",
        p(&s.worker_key),
        "--grants",
        p(&s.grants),
        "--endpoint",
        &endpoint,
    ]));
    assert!(out.stdout.is_empty());
    assert_eq!(std::fs::read(&file).unwrap(), content);
    let received = server.join().unwrap();
    assert_eq!(received.route(), "/v1/fetch");
    assert_eq!(
        received.query(),
        "path=projects&path=alpha&bytes=sha256%3Aaa"
    );
    verify(&received, "fetch", GrantKind::Read, &s.root, &endpoint, &[]);

    // fetch to stdout; the common options may come before the command.
    let (address, server) = serve_once(answer("200 OK", &["Lab-Service: coord"], &content));
    let out = ok(labctl(&[
        "--key",
        p(&s.worker_key),
        "--endpoint",
        &format!("http://{address}"),
        "call",
        "fetch",
        "--path",
        "projects",
        "--param",
        "bytes=sha256:aa",
    ]));
    assert_eq!(out.stdout, content);
    server.join().unwrap();

    // A body cut short: transport failure, and no file.
    let mut short = answer("200 OK", &["Lab-Service: coord"], &content);
    short.truncate(short.len() - 10);
    let (address, server) = serve_once(short);
    let file = s.dir.join("short.bin");
    let out = labctl(&[
        "call",
        "fetch",
        "--path",
        "projects",
        "--param",
        "bytes=sha256:aa",
        "--out",
        p(&file),
        "--key",
        p(&s.worker_key),
        "--endpoint",
        &format!("http://{address}"),
    ]);
    server.join().unwrap();
    assert_eq!(code(&out), 69, "{}", stderr(&out));
    assert!(!file.exists());
    let leftovers: Vec<_> = std::fs::read_dir(&s.dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|name| name.contains(".part"))
        .collect();
    assert!(leftovers.is_empty(), "{leftovers:?}");
}

/// Runs `labctl call resolve --path projects` against one canned answer.
fn resolve_against(answer: Vec<u8>, s: &Setup) -> Output {
    let (address, server) = serve_once(answer);
    let out = labctl(&[
        "call",
        "resolve",
        "--path",
        "projects",
        "--key",
        p(&s.worker_key),
        "--grants",
        p(&s.grants),
        "--endpoint",
        &format!("http://{address}"),
    ]);
    server.join().unwrap();
    out
}

#[test]
fn refusals_map_to_exit_codes() {
    let s = setup("refusals", &["read"]);
    for (status, code_name, exit) in [
        ("400 Bad Request", "invalid", 2),
        ("400 Bad Request", "structural", 2),
        ("401 Unauthorized", "unverified", 5),
        ("403 Forbidden", "denied", 6),
        ("404 Not Found", "not_found", 3),
        ("409 Conflict", "idempotency_mismatch", 4),
        ("409 Conflict", "unresolved", 4),
        ("413 Payload Too Large", "limit_exceeded", 7),
        ("503 Service Unavailable", "unavailable", 8),
        ("500 Internal Server Error", "not_implemented", 9),
    ] {
        let envelope =
            json!({"error": code_name, "message": "because", "details": {"field": "path"}});
        let out = resolve_against(json_answer(status, &envelope), &s);
        assert_eq!(code(&out), exit, "{code_name}: {}", stderr(&out));
        assert!(out.stdout.is_empty());
        let err = stderr(&out);
        let (summary, rest) = err.split_once('\n').unwrap();
        let http = &status[..3];
        assert_eq!(
            summary,
            format!("labctl: refused: {code_name} (HTTP {http}): because")
        );
        assert_eq!(serde_json::from_str::<Value>(rest).unwrap(), envelope);
    }
}

#[test]
fn protocol_and_transport_failures() {
    let s = setup("protocol", &["read"]);
    let body = json!({"space": null});
    // No Lab-Service, whatever the status.
    for status in ["200 OK", "404 Not Found"] {
        let out = resolve_against(
            answer(
                status,
                &["Content-Type: application/json"],
                body.to_string().as_bytes(),
            ),
            &s,
        );
        assert_eq!(code(&out), 70, "{}", stderr(&out));
        assert!(stderr(&out).contains("Lab-Service"), "{}", stderr(&out));
        assert!(out.stdout.is_empty());
    }
    // Another service.
    let out = resolve_against(
        answer(
            "200 OK",
            &["Lab-Service: bytes"],
            body.to_string().as_bytes(),
        ),
        &s,
    );
    assert_eq!(code(&out), 70);
    // Not HTTP, or not JSON.
    let out = resolve_against(b"SSH-2.0-x\r\n".to_vec(), &s);
    assert_eq!(code(&out), 70, "{}", stderr(&out));
    let out = resolve_against(answer("200 OK", &["Lab-Service: coord"], b"<html>"), &s);
    assert_eq!(code(&out), 70, "{}", stderr(&out));

    // Nobody listening.
    let closed = TcpListener::bind("127.0.0.1:0").unwrap();
    let address = closed.local_addr().unwrap();
    drop(closed);
    let out = labctl(&[
        "call",
        "resolve",
        "--path",
        "projects",
        "--key",
        p(&s.worker_key),
        "--endpoint",
        &format!("http://{address}"),
    ]);
    assert_eq!(code(&out), 69, "{}", stderr(&out));
    let out = labctl(&["health", "--endpoint", &format!("http://{address}")]);
    assert_eq!(code(&out), 69, "{}", stderr(&out));
}

#[test]
fn usage_errors() {
    let s = setup("usage", &["read"]);
    let key = p(&s.worker_key);
    let json_file = s.dir.join("not.json");
    std::fs::write(&json_file, b"{ nope").unwrap();
    for (args, exit) in [
        (vec!["call", "entries", "--key", key], 64),
        (
            vec![
                "call", "entries", "--path", "a", "--param", "limit=x", "--key", key,
            ],
            64,
        ),
        (
            vec![
                "call", "entries", "--path", "a", "--body", "-", "--key", key,
            ],
            64,
        ),
        (vec!["call", "publish", "--key", key], 64),
        (vec!["call", "subscribe", "--key", key], 64),
        (vec!["call", "fork", "--key", key], 64),
        (vec!["call", "resolve", "--path", "a"], 64),
        (
            vec![
                "call",
                "resolve",
                "--path",
                "a",
                "--key",
                key,
                "--endpoint",
                "ftp://x",
            ],
            64,
        ),
        (
            vec![
                "call",
                "resolve",
                "--path",
                "a",
                "--key",
                key,
                "--endpoint",
                "https://x:65536",
            ],
            64,
        ),
        (
            vec!["call", "publish", "--body", p(&json_file), "--key", key],
            65,
        ),
        (
            vec![
                "call",
                "resolve",
                "--path",
                "a",
                "--key",
                key,
                "--grants",
                p(&json_file),
            ],
            65,
        ),
        (
            vec![
                "call",
                "resolve",
                "--path",
                "a",
                "--key",
                key,
                "--grants",
                "/nonexistent/g",
            ],
            66,
        ),
        (vec!["frobnicate"], 64),
    ] {
        let out = labctl(&args);
        assert_eq!(code(&out), exit, "{args:?}: {}", stderr(&out));
    }
    ok(labctl(&["--help"]));
    ok(labctl(&["call", "--help"]));
}

#[test]
fn describe_and_health_carry_no_proof() {
    let s = setup("describe", &["read"]);
    let description = json!({"service": "coord", "contract": "2026-09-19", "operations": []});
    let (address, server) = serve_once(json_answer("200 OK", &description));
    // A key in the environment is not used.
    let out = ok(labctl_with(
        &["describe"],
        &[
            ("LAB_KEY", p(&s.worker_key)),
            ("LAB_ENDPOINT", &format!("http://{address}")),
        ],
        b"",
    ));
    let received = server.join().unwrap();
    assert_eq!(received.method, "GET");
    assert_eq!(received.target, "/describe");
    assert_eq!(received.header(HEADER), None);
    assert_eq!(
        serde_json::from_str::<Value>(&stdout(&out)).unwrap(),
        description
    );

    // A contract file, verbatim.
    let schema = b"{\"type\":  \"object\"}";
    let (address, server) = serve_once(answer("200 OK", &["Lab-Service: coord"], schema));
    let out = ok(labctl(&[
        "describe",
        "schema/Grant.schema.json",
        "--endpoint",
        &format!("http://{address}"),
    ]));
    assert_eq!(
        server.join().unwrap().target,
        "/describe/schema/Grant.schema.json"
    );
    assert_eq!(out.stdout, schema);

    // Health: 200, then 503 naming the failing check.
    let healthy = json!({"status": "ok", "service": "coord", "checks": []});
    let (address, server) = serve_once(json_answer("200 OK", &healthy));
    let out = ok(labctl(&[
        "health",
        "--live",
        "--endpoint",
        &format!("http://{address}"),
    ]));
    assert_eq!(server.join().unwrap().target, "/livez");
    assert_eq!(
        serde_json::from_str::<Value>(&stdout(&out)).unwrap(),
        healthy
    );
    let failing = json!({"status": "failing", "service": "coord", "checks": [
        {"name": "journal", "status": "ok", "detail": ""},
        {"name": "bytes", "status": "failing", "detail": "connection refused"}]});
    let (address, server) = serve_once(json_answer("503 Service Unavailable", &failing));
    let out = labctl(&["health", "--endpoint", &format!("http://{address}")]);
    assert_eq!(server.join().unwrap().target, "/healthz");
    assert_eq!(code(&out), 8);
    assert_eq!(
        serde_json::from_str::<Value>(&stdout(&out)).unwrap(),
        failing
    );
    assert!(
        stderr(&out).contains("bytes (connection refused)"),
        "{}",
        stderr(&out)
    );
}

/// `labctl declare` sends `{operation_id, artifact, statement}` signed for
/// `declare` and prints the answer readably; `labctl verify-admission`
/// prints each check of an envelope and fails (exit 5) when one fails.
#[test]
fn declare_and_verify_an_admission() {
    use base64::Engine as _;
    let s = setup("declare", &["read", "declare"]);
    let statement = json!({ "subject": "pkg#core", "property": "license", "value": "MIT" });
    let statement_file = s.dir.join("statement.json");
    std::fs::write(&statement_file, statement.to_string()).unwrap();
    let declaration = json!({ "root_id": "rt_1", "space_id": "spc_2", "position": 3 });
    let result = json!({ "declaration": declaration, "assertion_id": "asr_9", "envelope": "sha256:e", "replayed": false });
    let (address, server) = serve_once(json_answer("201 Created", &result));
    let endpoint = format!("http://{address}");
    let artifact = ["projects", "alpha", "artifacts", "a1"];
    let mut args = vec![
        "declare",
        "--operation-id",
        "d-1",
        "--statement",
        p(&statement_file),
    ];
    for label in artifact {
        args.extend(["--artifact", label]);
    }
    args.extend([
        "--key",
        p(&s.worker_key),
        "--grants",
        p(&s.grants),
        "--endpoint",
        &endpoint,
    ]);
    let out = ok(labctl(&args));
    let received = server.join().unwrap();
    assert_eq!(received.route(), "/v1/declarations");
    let body: Value = serde_json::from_slice(&received.body).unwrap();
    assert_eq!(
        body,
        json!({ "operation_id": "d-1", "artifact": artifact, "statement": statement })
    );
    let path: Vec<String> = artifact.map(String::from).to_vec();
    verify(
        &received,
        "declare",
        GrantKind::Declare,
        &s.root,
        &endpoint,
        &path,
    );
    assert_eq!(
        stdout(&out),
        "declared asr_9\n  declaration  rt_1/spc_2/3\n  envelope     sha256:e\n"
    );

    // An envelope as the service would make it for that request, signed
    // with the root key.
    let root_text = std::fs::read_to_string(s.dir.join("root.key")).unwrap();
    let seed: [u8; 32] = hex::decode(root_text.trim().strip_prefix("ed25519-secret:").unwrap())
        .unwrap()
        .try_into()
        .unwrap();
    let root_key = lab_coord_auth::SigningKey::from_bytes(&seed);
    let header = received.header(HEADER).unwrap();
    let carriage = Carriage::from_header(Some(header.as_bytes())).unwrap();
    let b64 = base64::engine::general_purpose::STANDARD;
    let frame = json!({ "policy": "coord.declare.v1", "content": {}, "evidence": [],
                        "grants": carriage.to_json()["grants"], "proof": carriage.proof.to_json() });
    let frame_hash = lab_coord_auth::record::sha256_text(&lab_coord_auth::canonical_json(&frame));
    let mut admission = json!({ "world": "lab", "root": s.root.to_string(), "frame": frame_hash,
                                "policy": "coord.declare.v1", "auth": carriage.to_json(),
                                "request_body": b64.encode(&received.body) });
    let signature = lab_coord_auth::sign(
        &root_key,
        &lab_coord_auth::admission_signing_bytes(&admission),
    );
    admission["signature"] = json!(b64.encode(signature));
    let envelope =
        json!({ "publisher": s.worker.to_string(), "frame": frame, "admission": admission });
    let envelope_file = s.dir.join("envelope.json");
    std::fs::write(&envelope_file, envelope.to_string()).unwrap();
    let verify_args = |file: &Path| {
        labctl(&[
            "verify-admission",
            p(file),
            "--root",
            &s.root.to_string(),
            "--endpoint",
            &endpoint,
        ])
    };
    let out = ok(verify_args(&envelope_file));
    assert_eq!(
        stdout(&out),
        "ok    root signature\nok    frame digest\nok    proof\nok    publisher\n"
    );
    let mut tampered = envelope.clone();
    tampered["frame"]["evidence"] = json!([declaration]);
    std::fs::write(&envelope_file, tampered.to_string()).unwrap();
    let out = verify_args(&envelope_file);
    assert_eq!(code(&out), 5);
    let printed = stdout(&out);
    assert!(printed.contains("FAIL  frame digest"), "{printed}");
    assert!(printed.contains("ok    root signature"), "{printed}");
}

#[test]
fn query_follows_every_page_with_all() {
    let s = setup("query-all", &["read"]);
    let view = "rt_aa/spc_bb/3";
    let item = |position: u64| {
        json!({"kind": "record", "state": "record", "path": ["projects", "alpha"],
               "selection": {"root_id": "rt_aa", "space_id": "spc_cc", "position": position},
               "record": {"profile": "lab/finding/1", "hash": format!("sha256:{position:064}")}})
    };
    let coverage = |inspected: u64, complete: bool| json!({"selections": 2, "inspected": inspected, "matched": inspected, "withheld": 0, "complete": complete});
    let first = json!({"view": {"root_id": "rt_aa", "space_id": "spc_bb", "position": 3},
                       "outcome": "incomplete", "records": [item(1)], "coverage": coverage(1, false),
                       "limits": ["limit"], "next_cursor": "next-page"});
    let last = json!({"view": first["view"], "outcome": "answered", "records": [item(2)],
                      "coverage": coverage(2, true), "limits": []});
    let (address, server) = serve_once(json_answer("200 OK", &first));
    let endpoint = format!("http://{address}");
    // The first page alone, without --all: its cursor is printed.
    let out = ok(labctl(&[
        "query",
        "--view",
        view,
        "--kind",
        "record",
        "--limit",
        "1",
        "--key",
        p(&s.worker_key),
        "--grants",
        p(&s.grants),
        "--endpoint",
        &endpoint,
    ]));
    let received = server.join().unwrap();
    assert_eq!(received.route(), "/v1/query");
    let body: Value = serde_json::from_slice(&received.body).unwrap();
    assert_eq!(
        body,
        json!({"view": first["view"], "filters": {"kind": "record"}, "limit": 1})
    );
    let printed = stdout(&out);
    assert!(printed.contains("rt_aa/spc_cc/1"), "{printed}");
    assert!(printed.contains("outcome incomplete"), "{printed}");
    assert!(printed.contains("next cursor next-page"), "{printed}");
    // --all follows the cursor to the last page.
    let (address, server) = serve_each(vec![
        json_answer("200 OK", &first),
        json_answer("200 OK", &last),
    ]);
    let endpoint = format!("http://{address}");
    let out = ok(labctl(&[
        "query",
        "--view",
        view,
        "--all",
        "--key",
        p(&s.worker_key),
        "--grants",
        p(&s.grants),
        "--endpoint",
        &endpoint,
    ]));
    let received = server.join().unwrap();
    assert_eq!(received.len(), 2);
    let bodies: Vec<Value> = received
        .iter()
        .map(|r| serde_json::from_slice(&r.body).unwrap())
        .collect();
    assert!(bodies[0].get("cursor").is_none());
    assert_eq!(bodies[1]["cursor"], "next-page");
    let printed = stdout(&out);
    assert!(printed.contains("rt_aa/spc_cc/1"), "{printed}");
    assert!(printed.contains("rt_aa/spc_cc/2"), "{printed}");
    assert!(
        printed.contains("outcome answered: inspected 2 of 2"),
        "{printed}"
    );
    assert!(!printed.contains("next cursor"), "{printed}");
}

/// `labctl apply` sends `{operation_id, path, tool, inputs, recipe}` signed
/// for `apply` and prints the answer readably; `labctl verify-application`
/// reads the leaf's entries, fetches the documents its facts name, prints
/// each check and fails (exit 5) when one fails.
#[test]
fn apply_and_verify_an_application() {
    use base64::Engine as _;
    let s = setup("apply", &["read", "publish"]);
    let attempt = json!({ "root_id": "rt_1", "space_id": "spc_2", "position": 1 });
    let result_ref = json!({ "root_id": "rt_1", "space_id": "spc_2", "position": 2 });
    let release = json!({ "root_id": "rt_1", "space_id": "spc_9", "position": 1 });
    let applied = json!({ "attempt": attempt, "release": release, "outcome": "failed",
                         "replayed": false, "result": result_ref, "outputs": {},
                         "reason": "tool: asked to fail", "reused": null });
    let (address, server) = serve_once(json_answer("201 Created", &applied));
    let endpoint = format!("http://{address}");
    let path = ["projects", "alpha", "applications", "run-1"];
    let mut args = vec![
        "apply",
        "--operation-id",
        "run-1",
        "--tool",
        "hostile",
        "--input",
        "text=rt_1/spc_3/1",
        "--recipe",
        "\"fail\"",
    ];
    for label in path {
        args.extend(["--path", label]);
    }
    args.extend([
        "--key",
        p(&s.worker_key),
        "--grants",
        p(&s.grants),
        "--endpoint",
        &endpoint,
    ]);
    let out = ok(labctl(&args));
    let received = server.join().unwrap();
    assert_eq!(received.route(), "/v1/applications");
    let body: Value = serde_json::from_slice(&received.body).unwrap();
    let input = json!({ "root_id": "rt_1", "space_id": "spc_3", "position": 1 });
    assert_eq!(
        body,
        json!({ "operation_id": "run-1", "path": path, "tool": "hostile",
                "inputs": { "text": input }, "recipe": "fail" })
    );
    let labels: Vec<String> = path.map(String::from).to_vec();
    verify(
        &received,
        "apply",
        GrantKind::Publish,
        &s.root,
        &endpoint,
        &labels,
    );
    assert_eq!(
        stdout(&out),
        "applied failed\n  attempt  rt_1 spc_2 1\n  result   rt_1 spc_2 2\n  reason   tool: asked to fail\n"
    );

    // A failed application as the service would close it, signed with the
    // root key: its leaf's two entries and its four documents.
    let root_text = std::fs::read_to_string(s.dir.join("root.key")).unwrap();
    let seed: [u8; 32] = hex::decode(root_text.trim().strip_prefix("ed25519-secret:").unwrap())
        .unwrap()
        .try_into()
        .unwrap();
    let root_key = lab_coord_auth::SigningKey::from_bytes(&seed);
    let canonical = |v: &Value| lab_coord_auth::canonical_json(v);
    let name = |bytes: &[u8]| lab_coord_auth::record::sha256_text(bytes);
    let request = canonical(
        &json!({ "tool": "hostile", "release": release, "inputs": { "text": input },
                                     "recipe": "fail", "normalization": "coord.application-request.v1" }),
    );
    let inputs = json!([{ "role": "text", "entry": input,
                          "artifact": { "bytes": "sha256:aa", "type": "sha256:bb" } }]);
    let ending = json!({ "outcome": "failed", "reason": "tool: asked to fail", "limits": {"fuel": 1}, "used": {"fuel": 0} });
    let manifest =
        canonical(&json!({ "application": attempt, "outputs": [], "counts": {}, "coverage": {} }));
    let described = json!({ "entry": release, "description": { "name": "hostile" } });
    let resolution = canonical(
        &json!({ "application": attempt, "release": described, "inputs": inputs,
                                        "outcome": "failed", "reason": ending["reason"],
                                        "limits": ending["limits"], "used": ending["used"] }),
    );
    let statement = json!({
        "_type": "https://in-toto.io/Statement/v1",
        "subject": [{ "name": "request", "digest": { "sha256": &name(&request)[7..] } }],
        "predicateType": "urn:coord:application-run:v1",
        "predicate": { "application": { "path": path, "attempt": attempt }, "release": described,
                       "request": name(&request), "request_digest": "sha256:cc",
                       "publisher": s.worker.to_string(), "accepted_at": "t", "inputs": inputs,
                       "outputs": [], "outcome": "failed", "reason": ending["reason"],
                       "limits": ending["limits"], "used": ending["used"] },
    });
    let envelope = canonical(&lab_coord_auth::dsse::sign_envelope(
        &root_key,
        lab_coord_auth::dsse::IN_TOTO_PAYLOAD_TYPE,
        &canonical(&statement),
    ));
    let b64 = base64::engine::general_purpose::STANDARD;
    let entries = json!({ "space": {}, "through": 3, "scanned_through": 3, "entries": [
        { "ref": attempt, "origin": "append", "batch": { "first": 1, "last": 2 }, "fact": b64.encode("x"),
          "attempt": { "release": release, "request": name(&request), "publisher": s.worker.to_string(),
                       "request_id": "req_1", "request_digest": "sha256:cc", "accepted_at": "t" } },
        { "ref": json!({ "root_id": "rt_1", "space_id": "spc_2", "position": 2 }), "origin": "append",
          "batch": { "first": 2, "last": 2 }, "fact": b64.encode("y"),
          "bound": { "application": attempt, "role": "text", "bound": input } },
        { "ref": json!({ "root_id": "rt_1", "space_id": "spc_2", "position": 3 }), "origin": "append",
          "batch": { "first": 3, "last": 3 }, "fact": b64.encode("z"),
          "result": { "application": attempt, "outcome": "failed", "manifest": name(&manifest),
                      "resolution": name(&resolution), "attestation": name(&envelope) } },
    ]});
    let bytes = |body: &[u8]| {
        let headers = [
            "Lab-Service: coord",
            "Content-Type: application/octet-stream",
        ];
        answer("200 OK", &headers, body)
    };
    let run = |envelope: &[u8]| {
        let (address, server) = serve_each(vec![
            json_answer("200 OK", &entries),
            bytes(envelope),
            bytes(&request),
            bytes(&manifest),
            bytes(&resolution),
        ]);
        let mut args = vec!["verify-application", "--root"];
        let root = s.root.to_string();
        args.push(&root);
        for label in path {
            args.extend(["--path", label]);
        }
        let endpoint = format!("http://{address}");
        args.extend([
            "--key",
            p(&s.worker_key),
            "--grants",
            p(&s.grants),
            "--endpoint",
            &endpoint,
        ]);
        let out = labctl(&args);
        (out, server)
    };
    let (out, server) = run(&envelope);
    assert_eq!(code(&out), 0, "{}{}", stdout(&out), stderr(&out));
    assert_eq!(
        stdout(&out),
        "ok    facts\nok    signature\nok    statement\nok    attempt\nok    inputs\nok    outputs\nok    request\nok    manifest\nok    resolution\n"
    );
    let received = server.join().unwrap();
    assert_eq!(received[0].route(), "/v1/entries");
    assert_eq!(received[1].route(), "/v1/fetch");
    // Another envelope than the one the result names is refused.
    let forged = String::from_utf8(envelope.clone()).unwrap().replacen(
        "\"payload\":\"",
        "\"payload\":\"e30",
        1,
    );
    let (out, server) = run(forged.as_bytes());
    assert_eq!(code(&out), 5, "{}", stdout(&out));
    assert!(stdout(&out).contains("FAIL  signature"), "{}", stdout(&out));
    drop(server);
}

/// `labctl verify-export` fetches the manifest, then its chunks, from the
/// bytes endpoint by name and checks them; bytes that do not hash to
/// their name fail it with exit 5. (The checks themselves are tested
/// against a real export in the coordination tests.)
#[test]
fn verify_export_fetches_and_checks() {
    use lab_coord_auth::{canonical_json, record::sha256_text};
    let scope = json!({ "root_id": "rt_1", "space_id": "spc_1", "path": [] });
    let chunk = format!(
        "{}\n",
        json!({ "space": scope, "after": 0, "through": 0, "entries": [] })
    );
    let chunk_name = sha256_text(chunk.as_bytes());
    let manifest = canonical_json(&json!({
        "purpose": "coord.export.v1", "scope": scope, "chunks": [chunk_name],
        "spaces": [{ "space": scope, "through": 0 }], "complete": true,
    }));
    let manifest_name = sha256_text(&manifest);
    let blob = |body: &[u8]| answer("200 OK", &["Content-Type: application/octet-stream"], body);

    let (address, server) = serve_each(vec![blob(&manifest), blob(chunk.as_bytes())]);
    let endpoint = format!("http://{address}");
    let output = labctl(&[
        "verify-export",
        "--manifest",
        &manifest_name,
        "--bytes-endpoint",
        &endpoint,
    ]);
    assert_eq!(code(&output), 0, "{}", stderr(&output));
    let received = server.join().unwrap();
    assert_eq!(received[0].target, format!("/v1/blobs/{manifest_name}"));
    assert_eq!(received[1].target, format!("/v1/blobs/{chunk_name}"));
    assert!(stdout(&output).lines().all(|l| l.starts_with("ok ")));
    assert!(stdout(&output).contains("ok    children"));

    // The same name, other bytes: refused before anything else is read.
    let mut altered = manifest.clone();
    altered[2] ^= 1;
    let (address, server) = serve_each(vec![blob(&altered)]);
    let endpoint = format!("http://{address}");
    let output = labctl(&[
        "verify-export",
        "--manifest",
        &manifest_name,
        "--bytes-endpoint",
        &endpoint,
    ]);
    server.join().unwrap();
    assert_eq!(code(&output), 5, "{}", stderr(&output));
    assert!(
        stdout(&output).starts_with("FAIL  manifests: ") && stdout(&output).contains("hash"),
        "{}",
        stdout(&output)
    );
}

// ---- The socket: `labctl ws` and `labctl watch` against a scripted
// service speaking WS.md's binding (the real one is tested end to end in
// tests/labctl_ws.rs).

type ServiceSocket = tungstenite::WebSocket<TcpStream>;

/// A socket service that accepts one upgrade, answering with
/// `Lab-Service: coord` unless `identified` is false and with the offered
/// subprotocol `coord` unless `subprotocol` is false, then runs `script`.
// The handshake callback's error type is tungstenite's, not ours.
#[allow(clippy::result_large_err)]
fn serve_socket<T: Send + 'static>(
    identified: bool,
    subprotocol: bool,
    script: impl FnOnce(&mut ServiceSocket) -> T + Send + 'static,
) -> (String, JoinHandle<T>) {
    use tungstenite::handshake::server::{Request, Response};
    use tungstenite::http::HeaderValue;
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let address = listener.local_addr().unwrap().to_string();
    let handle = std::thread::spawn(move || {
        let (stream, _) = listener.accept().unwrap();
        stream
            .set_read_timeout(Some(Duration::from_secs(30)))
            .unwrap();
        let mut socket =
            tungstenite::accept_hdr(stream, |request: &Request, mut response: Response| {
                assert_eq!(request.uri().path(), "/v1/ws");
                let offered = request.headers().get("Sec-WebSocket-Protocol").unwrap();
                assert_eq!(offered, "coord");
                let headers = response.headers_mut();
                if identified {
                    headers.insert("Lab-Service", HeaderValue::from_static("coord"));
                    headers.insert("Lab-Contract", HeaderValue::from_static("2026-09-19"));
                }
                if subprotocol {
                    headers.insert("Sec-WebSocket-Protocol", HeaderValue::from_static("coord"));
                }
                Ok(response)
            })
            .unwrap();
        script(&mut socket)
    });
    (address, handle)
}

/// The next call envelope the service receives.
fn receive_call(socket: &mut ServiceSocket) -> Value {
    loop {
        match socket.read().unwrap() {
            tungstenite::Message::Text(text) => {
                return serde_json::from_str(text.as_str()).unwrap()
            }
            tungstenite::Message::Close(_) => panic!("the client closed before a call"),
            _ => {}
        }
    }
}

fn send_frame(socket: &mut ServiceSocket, frame: Value) {
    socket
        .send(tungstenite::Message::text(frame.to_string()))
        .unwrap();
}

/// Waits for the client's close and echoes it; answers whether one came.
fn await_close(socket: &mut ServiceSocket) -> bool {
    loop {
        match socket.read() {
            Ok(tungstenite::Message::Close(frame)) => {
                assert_eq!(frame.map(|f| u16::from(f.code)), Some(1000));
                let _ = socket.flush();
                return true;
            }
            Ok(tungstenite::Message::Text(text)) => panic!("a call after the end: {text}"),
            Ok(_) => {}
            Err(_) => return false,
        }
    }
}

/// Checks a call envelope's carriage as the service would: the proof over
/// the envelope's `op`, its `params` typed by their JSON shapes, and the
/// SHA-256 of the RFC 8785 text of its `body` (of "" without one); then a
/// grant chain for `kind` on `path`.
fn verify_envelope(
    envelope: &Value,
    kind: GrantKind,
    root: &Principal,
    audience: &str,
    path: &[&str],
) -> Principal {
    let carriage =
        Carriage::from_json_bytes(envelope["auth"].to_string().as_bytes()).expect("auth decodes");
    assert_eq!(carriage.proof.audience, audience);
    let mut params = Params::new();
    for (name, value) in envelope["params"].as_object().into_iter().flatten() {
        let value = match value {
            Value::String(text) => ParamValue::String(text.clone()),
            Value::Number(n) => ParamValue::Int(n.as_i64().unwrap()),
            Value::Array(items) => ParamValue::Strings(
                items
                    .iter()
                    .map(|i| i.as_str().unwrap().to_owned())
                    .collect(),
            ),
            other => panic!("param {name} is {other}"),
        };
        params.insert(name.as_str(), value);
    }
    let digested = envelope
        .get("body")
        .map(lab_coord_auth::canonical_json)
        .unwrap_or_default();
    let request = RequestFacts {
        op: envelope["op"].as_str().unwrap(),
        params: &params,
        body_digest: BodyDigest::of(&digested),
    };
    let path: Vec<String> = path.iter().map(|s| s.to_string()).collect();
    Verifier::new("lab", *root, audience)
        .check(
            &carriage,
            &request,
            kind,
            &path,
            now(),
            &mut MemoryReplayCache::new(),
        )
        .expect("the envelope's carriage verifies and authorizes")
        .principal
}

fn reply(id: &Value, status: &str, result: Value) -> Value {
    json!({"id": id, "status": status, "contract": "2026-09-19", "result": result})
}

fn lines(output: &Output) -> Vec<Value> {
    stdout(output)
        .lines()
        .map(|line| serde_json::from_str(line).expect("each line is JSON"))
        .collect()
}

#[test]
fn ws_signs_each_call_and_prints_every_frame() {
    let s = setup("ws-session", &["read"]);
    let root = s.root;
    let (address, server) = serve_socket(true, true, move |socket| {
        let audience = format!("http://{}", socket.get_ref().local_addr().unwrap());
        let children = receive_call(socket);
        assert_eq!(children["id"], "a");
        assert_eq!(children["op"], "children");
        assert_eq!(
            children["params"],
            json!({"path": ["projects", "alpha"], "limit": 2})
        );
        assert!(children.get("body").is_none());
        verify_envelope(
            &children,
            GrantKind::Read,
            &root,
            &audience,
            &["projects", "alpha"],
        );
        let subscribe = receive_call(socket);
        assert_eq!(subscribe["id"], "line-2");
        assert_eq!(subscribe["op"], "subscribe");
        assert_eq!(subscribe["params"], json!({}));
        assert_eq!(
            subscribe["body"],
            json!({"path": ["projects", "alpha"], "depth": 0})
        );
        verify_envelope(
            &subscribe,
            GrantKind::Read,
            &root,
            &audience,
            &["projects", "alpha"],
        );
        // Completion order, not call order; a subscription frame between.
        send_frame(
            socket,
            reply(
                &subscribe["id"],
                "created",
                json!({"subscription": format!("sub_{}", "0".repeat(32)), "expires_at": 9}),
            ),
        );
        send_frame(
            socket,
            json!({"subscription": format!("sub_{}", "0".repeat(32)),
            "contract": "2026-09-19", "event": {"space": "s", "cutoff": 4}}),
        );
        send_frame(
            socket,
            reply(&children["id"], "ok", json!({"children": []})),
        );
        await_close(socket)
    });
    let input = concat!(
        r#"{"op":"children","id":"a","params":{"path":["projects","alpha"],"limit":2}}"#,
        "\n",
        r#"{"op":"subscribe","body":{"depth":0,"path":["projects","alpha"]}}"#,
        "\n",
        r#"{"op":"fetch","params":{"path":["x"]}}"#,
        "\n\n",
    );
    let out = labctl_with(
        &["ws", "--endpoint", &format!("http://{address}")],
        &[("LAB_KEY", p(&s.worker_key)), ("LAB_GRANTS", p(&s.grants))],
        input.as_bytes(),
    );
    // Line 3 was refused before sending: the session still ran, and the
    // exit says some input was not sent.
    assert_eq!(code(&out), 65, "{}", stderr(&out));
    assert!(
        stderr(&out).contains("line 3: fetch is not carried by the socket"),
        "{}",
        stderr(&out)
    );
    let frames = lines(&out);
    assert_eq!(frames.len(), 3, "{frames:?}");
    assert_eq!(
        (&frames[0]["id"], &frames[0]["status"]),
        (&json!("line-2"), &json!("created"))
    );
    assert_eq!(frames[1]["event"]["cutoff"], 4);
    assert_eq!(
        (&frames[2]["id"], &frames[2]["status"]),
        (&json!("a"), &json!("ok"))
    );
    assert!(server.join().unwrap(), "labctl closed the socket normally");
}

#[test]
fn ws_reports_a_lost_connection_with_the_calls_unanswered() {
    let s = setup("ws-lost", &["read"]);
    let (address, server) = serve_socket(true, true, |socket| {
        let call = receive_call(socket);
        assert_eq!(call["id"], "q");
        // The connection ends without a reply or a close.
    });
    let out = labctl_with(
        &["ws", "--endpoint", &format!("http://{address}")],
        &[("LAB_KEY", p(&s.worker_key)), ("LAB_GRANTS", p(&s.grants))],
        br#"{"id":"q","op":"resolve","params":{"path":["projects"]}}"#,
    );
    server.join().unwrap();
    assert_eq!(code(&out), 69, "{}", stderr(&out));
    assert!(stderr(&out).contains("unanswered: q"), "{}", stderr(&out));
    assert_eq!(stdout(&out), "");
}

#[test]
fn watch_prints_subscription_frames_until_closed() {
    let s = setup("watch", &["read"]);
    let root = s.root;
    let sub = format!("sub_{}", "ab".repeat(16));
    let frames = [
        json!({"subscription": sub, "contract": "2026-09-19", "event": {"space": "s1", "cutoff": 7}}),
        json!({"subscription": sub, "contract": "2026-09-19", "gap": {"space": "s0"}}),
        json!({"subscription": sub, "contract": "2026-09-19", "closed": {"reason": "expired", "delivered": 1}}),
    ];
    let sent = frames.clone();
    let said = format!("labctl: subscribed {sub} (expires at 99)");
    let (address, server) = serve_socket(true, true, move |socket| {
        let audience = format!("http://{}", socket.get_ref().local_addr().unwrap());
        let call = receive_call(socket);
        assert_eq!(call["op"], "subscribe");
        assert_eq!(
            call["body"],
            json!({"path": ["projects", "alpha"], "depth": 1})
        );
        verify_envelope(
            &call,
            GrantKind::Read,
            &root,
            &audience,
            &["projects", "alpha"],
        );
        send_frame(
            socket,
            reply(
                &call["id"],
                "created",
                json!({"subscription": sub, "expires_at": 99}),
            ),
        );
        for frame in sent {
            send_frame(socket, frame);
        }
        let _ = await_close(socket);
    });
    let out = labctl_with(
        &[
            "watch",
            "projects/alpha",
            "--depth",
            "1",
            "--endpoint",
            &format!("http://{address}"),
        ],
        &[("LAB_KEY", p(&s.worker_key)), ("LAB_GRANTS", p(&s.grants))],
        b"",
    );
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    assert_eq!(lines(&out), frames);
    assert!(stderr(&out).contains(&said), "{}", stderr(&out));
    drop(server);
}

#[test]
fn watch_fails_on_a_lost_connection_and_on_a_refusal() {
    let s = setup("watch-lost", &["read"]);
    let env = [("LAB_KEY", p(&s.worker_key)), ("LAB_GRANTS", p(&s.grants))];
    let sub = format!("sub_{}", "cd".repeat(16));
    let event = json!({"subscription": sub, "contract": "2026-09-19", "event": {"space": "s", "cutoff": 1}});
    let sent = event.clone();
    let (address, server) = serve_socket(true, true, move |socket| {
        let call = receive_call(socket);
        send_frame(
            socket,
            reply(
                &call["id"],
                "created",
                json!({"subscription": sub, "expires_at": 9}),
            ),
        );
        send_frame(socket, sent);
        // Gone without a `closed` frame.
    });
    let endpoint = format!("http://{address}");
    let out = labctl_with(&["watch", "/", "--endpoint", &endpoint], &env, b"");
    server.join().unwrap();
    assert_eq!(code(&out), 69, "{}", stderr(&out));
    assert!(
        stderr(&out).contains("the connection was lost"),
        "{}",
        stderr(&out)
    );
    assert_eq!(lines(&out), [event]);

    let (address, server) = serve_socket(true, true, |socket| {
        let call = receive_call(socket);
        assert_eq!(call["body"], json!({"path": []}));
        send_frame(
            socket,
            json!({"id": call["id"], "status": "error", "contract": "2026-09-19",
            "error": {"error": "denied", "message": "no read grant covers the scope"}}),
        );
        let _ = await_close(socket);
    });
    let endpoint = format!("http://{address}");
    let out = labctl_with(&["watch", "/", "--endpoint", &endpoint], &env, b"");
    assert_eq!(code(&out), 6, "{}", stderr(&out));
    assert!(
        stderr(&out).contains("refused: denied (HTTP 403): no read grant covers the scope"),
        "{}",
        stderr(&out)
    );
    drop(server);
}

#[test]
fn the_socket_answer_is_checked_before_any_call() {
    let s = setup("ws-upgrade", &["read"]);
    let env = [("LAB_KEY", p(&s.worker_key)), ("LAB_GRANTS", p(&s.grants))];
    let line = br#"{"op":"resolve","params":{"path":["projects"]}}"#;
    // No subprotocol in the answer.
    let (address, server) = serve_socket(true, false, |socket| socket.read().is_ok());
    let out = labctl_with(
        &["ws", "--endpoint", &format!("http://{address}")],
        &env,
        line,
    );
    assert_eq!(code(&out), 70, "{}", stderr(&out));
    assert!(
        stderr(&out).contains("without the subprotocol \"coord\""),
        "{}",
        stderr(&out)
    );
    assert!(!server.join().unwrap(), "no call was sent");
    // Not the coordination service.
    let (address, server) = serve_socket(false, true, |socket| socket.read().is_ok());
    let out = labctl_with(
        &["ws", "--endpoint", &format!("http://{address}")],
        &env,
        line,
    );
    assert_eq!(code(&out), 70, "{}", stderr(&out));
    assert!(stderr(&out).contains("not \"coord\""), "{}", stderr(&out));
    assert!(!server.join().unwrap(), "no call was sent");
    // The service refuses the upgrade with its envelope: that refusal.
    let refusal = json!({"error": "not_implemented", "message": "the socket is not served",
                         "details": {"operation": "ws"}});
    let (address, server) = serve_once(json_answer("500 Internal Server Error", &refusal));
    let out = labctl_with(
        &["watch", "/", "--endpoint", &format!("http://{address}")],
        &env,
        b"",
    );
    assert_eq!(code(&out), 9, "{}", stderr(&out));
    assert!(
        stderr(&out).contains("refused: not_implemented (HTTP 500)"),
        "{}",
        stderr(&out)
    );
    let received = server.join().unwrap();
    assert_eq!(
        (received.method.as_str(), received.target.as_str()),
        ("GET", "/v1/ws")
    );
    assert_eq!(received.header("Sec-WebSocket-Protocol"), Some("coord"));
}

#[test]
fn a_silent_service_ends_the_session_after_the_timeout() {
    let s = setup("ws-silent", &["read"]);
    let env = [("LAB_KEY", p(&s.worker_key)), ("LAB_GRANTS", p(&s.grants))];
    // The service takes each call and never replies (WS.md: a reply not
    // written within 30 seconds is dropped).
    let (address, server) = serve_socket(true, true, |socket| {
        receive_call(socket);
        let _ = await_close(socket);
    });
    let endpoint = format!("http://{address}");
    let line = br#"{"id":"s","op":"resolve","params":{"path":["projects"]}}"#;
    let out = labctl_with(
        &["ws", "--timeout", "1", "--endpoint", &endpoint],
        &env,
        line,
    );
    assert_eq!(code(&out), 69, "{}", stderr(&out));
    assert!(
        stderr(&out).contains("no frame from the service for 1 seconds; unanswered: s"),
        "{}",
        stderr(&out)
    );
    drop(server);
    let (address, server) = serve_socket(true, true, |socket| {
        receive_call(socket);
        let _ = await_close(socket);
    });
    let endpoint = format!("http://{address}");
    let out = labctl_with(
        &["watch", "/", "--timeout", "1", "--endpoint", &endpoint],
        &env,
        b"",
    );
    assert_eq!(code(&out), 69, "{}", stderr(&out));
    assert!(
        stderr(&out).contains("no reply to subscribe within 1 seconds"),
        "{}",
        stderr(&out)
    );
    drop(server);
}
