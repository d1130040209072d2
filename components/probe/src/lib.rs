//! A component for tests only: it answers as the service it is hosted as
//! (the `service` setting; `bytes` without one), so it can stand in for any
//! service's component, and exposes host behaviour directly.
//!
//! | route | effect |
//! |---|---|
//! | `GET /ok` | 200 |
//! | `GET /trap` | the component panics (a trap) |
//! | `GET /spin` | the component computes for ever |
//! | `POST /kv/put?key=K&value=V` | one write transaction: put, commit |
//! | `GET /kv/get?key=K` | a read transaction: the value, or 404 |
//! | `POST /kv/increment` | read-modify-write of one counter; answers the new value |
//! | `POST /kv/two-writers` | opens a second write transaction while one is open |
//! | `POST /kv/batch-while-writing` | applies a sequenced batch while a write transaction is open |
//! | `POST /kv/counter` | one write transaction: sets the counter of `/kv/submit` to 0 |
//! | `POST /kv/hold-writer` | opens a write transaction, puts one key, reads its body to the end, then commits; answers the body's length, or 400 when the body broke off |
//! | `POST /kv/submit?key=MODE&value=G` | `kv.submit-sequenced` of a batch advancing the counter by 1, guarded by key G (MODE without one; see [`submit`]); MODE `ok`; `expect-5` (expects the counter at 5); `ceiling` (ceiling 0); `trap` (traps after submitting); `twice` (submits a second batch); `writing` (submits holding a write transaction: 409 with the refusal); `malformed` (a number past its body: 409 with the refusal) |
//! | `POST /call?key=S&value=T` | sends its body to service S as `POST T` (JSON); answers the peer's status and body, or 502 with the call's error |
//! | `POST /forward?key=S&value=T` | `call-streaming` of `POST T` to S with its own body forwarded; answers the peer's status and body (read through `response-body`), or 502 |
//! | `GET /config?key=K` | the service's setting K, or 404 |
//! | `GET /relay?key=S&value=T&sha=HEX&len=N` | `call-streaming` of `GET T` to S; answers 200, `content-length: N` and the peer's body as a relay verified against N and HEX, or 502 |
//! | `GET /livez`, `GET /healthz` | 200 |
//! | `POST /hold?key=N` | grows its memory by N MiB (and touches it), then reads its body to the end; answers the body's length, or 400 when the body broke off |
//! | `GET /heap?key=N` | allocates about N MiB of blocks of 1 to 1,024 bytes, each filled with its own pattern, frees and reallocates every third, grows every fifth; answers 200 `intact COUNT` when every block kept its bytes, or 500 naming the first that did not |
//! | `POST /kv/fill?key=N` | one write transaction: puts N entries into the table `fill` |
//! | `GET /kv/scan?key=N` | scans the table `fill` asking for N entries; answers how many came |
//! | `POST /blob/put` | `put-from-body` of its body with the largest cap; answers the size, or 413 `too-large` |
//! | `POST /blob/write?key=N` | writes N bytes through a `blob-writer` with the largest cap; answers the size, or 413 `too-large` |
//! | `GET /get?key=S&value=T` | `call` of `GET T` to S; answers the peer's status and body, or 502 with the call's error |
//! | `POST /call-writing?key=S&value=T` | opens a write transaction, then tries `call` and `call-streaming` of `GET T` to S; answers 409 with both refusals, or 200 when either went through |
//! | `POST /tool/run?key=R` | `tools.run` of the release R; the body's first line is the recipe, each further line `ROLE TYPE HEX-DIGEST` an input; answers 200 with the report as text (see [`report`]), or 404 `unknown-release`, 400 `missing-input ROLE`, 503 `unavailable`, 403 with the refusal |

use lab_guest::exports::lab::platform::handler::{
    BodyPart, Guest, Request, Response, ServiceIdentity, VerifiedRelay,
};
use lab_guest::lab::platform::body::IncomingBody;
use lab_guest::lab::platform::services::{self, ResponseBody, ServiceRequest};
use lab_guest::lab::platform::types::Header;
use lab_guest::lab::platform::{blobs, config, kv, tools};
use lab_kit::reply::Replier;
use std::sync::OnceLock;

const TABLE: &str = "probe";

/// Replies as the service the host runs the probe as.
fn reply() -> Replier {
    static SERVICE: OnceLock<String> = OnceLock::new();
    Replier {
        service: SERVICE.get_or_init(|| config::get("service").unwrap_or_else(|| "bytes".into())),
        contract: "probe",
        extra: &[],
    }
}

struct Probe;

impl Guest for Probe {
    fn identity() -> ServiceIdentity {
        reply().identity()
    }

    fn prepare() -> Result<(), String> {
        Ok(())
    }

    fn handle(request: Request, body: &IncomingBody) -> Response {
        let params =
            lab_kit::query::parse(request.query.as_deref(), &["key", "value", "sha", "len"])
                .unwrap_or_default();
        let param = |i: usize| {
            params
                .get(i)
                .copied()
                .flatten()
                .unwrap_or_default()
                .as_bytes()
                .to_vec()
        };
        match (request.method.as_str(), request.path.as_str()) {
            ("GET", "/ok") => text(200, "ok"),
            ("GET", "/trap") => panic!("asked to trap"),
            ("GET", "/spin") => {
                let mut n = 0u64;
                loop {
                    n = std::hint::black_box(n.wrapping_add(1));
                }
            }
            ("POST", "/kv/put") => {
                let txn = kv::begin_write().expect("begin");
                txn.put(TABLE, &param(0), &param(1)).expect("put");
                txn.commit().expect("commit");
                text(200, "committed")
            }
            ("GET", "/kv/get") => {
                let txn = kv::begin_read().expect("begin");
                match txn.get(TABLE, &param(0)).expect("get") {
                    Some(value) => text(200, &String::from_utf8_lossy(&value)),
                    None => text(404, "absent"),
                }
            }
            ("GET", "/kv/get-all") => {
                // `key` asked for `len` times, in one batch read.
                let count: usize = String::from_utf8(param(3)).unwrap().parse().unwrap();
                let key = kv::TableKey {
                    table: TABLE.into(),
                    key: param(0),
                };
                let txn = kv::begin_read().expect("begin");
                match txn.get_all(&vec![key; count]) {
                    Ok(values) => {
                        let found = values.iter().filter(|v| v.is_some()).count();
                        text(200, &format!("{found} of {}", values.len()))
                    }
                    Err(e) => text(413, &format!("{e:?}")),
                }
            }
            ("POST", "/kv/increment") => {
                let txn = kv::begin_write().expect("begin");
                let current = txn.get(TABLE, b"counter").expect("get");
                let n =
                    current.map_or(0, |v| String::from_utf8(v).unwrap().parse::<u64>().unwrap());
                txn.put(TABLE, b"counter", (n + 1).to_string().as_bytes())
                    .expect("put");
                txn.commit().expect("commit");
                text(200, &(n + 1).to_string())
            }
            ("POST", "/kv/two-writers") => {
                let _first = kv::begin_write().expect("begin");
                match kv::begin_write() {
                    Ok(_) => text(200, "second writer opened"),
                    Err(e) => text(409, &format!("{e:?}")),
                }
            }
            ("POST", "/kv/batch-while-writing") => {
                let _open = kv::begin_write().expect("begin");
                let batch = kv::SequencedBatch {
                    guard: kv::TableKey {
                        table: TABLE.into(),
                        key: b"guard".to_vec(),
                    },
                    counter: kv::TableKey {
                        table: TABLE.into(),
                        key: b"counter".to_vec(),
                    },
                    expected: None,
                    count: 1,
                    ceiling: u64::MAX,
                    writes: Vec::new(),
                };
                match kv::apply_sequenced(&batch) {
                    Ok(outcome) => text(200, &format!("{outcome:?}")),
                    Err(e) => text(409, &format!("{e:?}")),
                }
            }
            ("POST", "/kv/counter") => {
                let txn = kv::begin_write().expect("begin");
                txn.put(TABLE, b"counter", &0u64.to_be_bytes())
                    .expect("put");
                txn.commit().expect("commit");
                text(200, "0")
            }
            ("POST", "/kv/hold-writer") => {
                let txn = kv::begin_write().expect("begin");
                txn.put(TABLE, b"held", b"1").expect("put");
                match read_body(body) {
                    Ok(bytes) => {
                        txn.commit().expect("commit");
                        text(200, &bytes.len().to_string())
                    }
                    Err(e) => text(400, &e),
                }
            }
            ("POST", "/kv/submit") => {
                let (mode, guard) = (param(0), param(1));
                let guard = if guard.is_empty() { &mode } else { &guard };
                submit(&String::from_utf8_lossy(&mode), guard)
            }
            ("POST", "/call") => {
                let bytes = read_body(body).expect("read the body");
                let service = String::from_utf8(param(0)).unwrap();
                let call = ServiceRequest {
                    method: "POST".into(),
                    target: String::from_utf8(param(1)).unwrap(),
                    headers: vec![Header {
                        name: "content-type".into(),
                        value: b"application/json".to_vec(),
                    }],
                    body: bytes,
                };
                match services::call(&service, &call) {
                    Ok(answer) => reply().raw(
                        answer.status,
                        vec![("content-type", b"application/json".to_vec())],
                        vec![BodyPart::Bytes(answer.body)],
                        Some("probe"),
                    ),
                    Err(e) => text(502, &e),
                }
            }
            ("GET", "/config") => match config::get(&String::from_utf8(param(0)).unwrap()) {
                Some(value) => text(200, &value),
                None => text(404, "no such setting"),
            },
            ("POST", "/forward") => {
                let service = String::from_utf8(param(0)).unwrap();
                let call = ServiceRequest {
                    method: "POST".into(),
                    target: String::from_utf8(param(1)).unwrap(),
                    headers: vec![Header {
                        name: "content-type".into(),
                        value: b"application/octet-stream".to_vec(),
                    }],
                    body: Vec::new(),
                };
                let answer = match services::call_streaming(&service, &call, Some(body)) {
                    Ok(answer) => answer,
                    Err(e) => return text(502, &e),
                };
                match read_all(&answer.body) {
                    Ok(bytes) => reply().raw(
                        answer.status,
                        vec![("content-type", b"application/json".to_vec())],
                        vec![BodyPart::Bytes(bytes)],
                        Some("probe"),
                    ),
                    Err(e) => text(502, &e),
                }
            }
            ("GET", "/relay") => {
                let service = String::from_utf8(param(0)).unwrap();
                let sha256 = lab_kit::hex::decode_lower(&String::from_utf8(param(2)).unwrap())
                    .expect("sha is lowercase hex");
                let length: u64 = String::from_utf8(param(3)).unwrap().parse().expect("len");
                let call = ServiceRequest {
                    method: "GET".into(),
                    target: String::from_utf8(param(1)).unwrap(),
                    headers: Vec::new(),
                    body: Vec::new(),
                };
                match services::call_streaming(&service, &call, None) {
                    Ok(answer) => reply().raw(
                        200,
                        vec![
                            ("content-type", b"application/octet-stream".to_vec()),
                            ("content-length", length.to_string().into_bytes()),
                        ],
                        vec![BodyPart::Relay(VerifiedRelay {
                            body: answer.body,
                            length,
                            sha256,
                        })],
                        Some("probe"),
                    ),
                    Err(e) => text(502, &e),
                }
            }
            ("GET", "/livez" | "/healthz") => text(200, "live"),
            ("POST", "/hold") => {
                let mib: usize = String::from_utf8(param(0)).unwrap().parse().expect("N");
                let held = std::hint::black_box(vec![1u8; mib << 20]);
                let answer = match read_body(body) {
                    Ok(bytes) => text(200, &bytes.len().to_string()),
                    Err(e) => text(400, &e),
                };
                drop(held);
                answer
            }
            ("GET", "/heap") => {
                let mib: usize = String::from_utf8(param(0)).unwrap().parse().expect("N");
                heap_exercise(mib << 20)
            }
            ("POST", "/kv/fill") => {
                let n: u32 = String::from_utf8(param(0)).unwrap().parse().expect("N");
                let txn = kv::begin_write().expect("begin");
                for i in 0..n {
                    txn.put("fill", format!("{i:08}").as_bytes(), b"")
                        .expect("put");
                }
                txn.commit().expect("commit");
                text(200, "filled")
            }
            ("GET", "/kv/scan") => {
                let limit: u32 = String::from_utf8(param(0)).unwrap().parse().expect("N");
                let txn = kv::begin_read().expect("begin");
                let range = kv::Range {
                    start: Vec::new(),
                    end: None,
                    reverse: false,
                    limit,
                };
                let found = txn.scan("fill", &range).expect("scan");
                text(200, &found.len().to_string())
            }
            ("GET", "/kv/read-all") => {
                let n: u32 = String::from_utf8(param(0)).unwrap().parse().expect("N");
                let keys: Vec<kv::TableKey> = (0..n)
                    .map(|i| kv::TableKey {
                        table: "fill".into(),
                        key: format!("{i:08}").into_bytes(),
                    })
                    .collect();
                match kv::read_all(&keys) {
                    Ok(found) => {
                        let present = found.iter().filter(|v| v.is_some()).count();
                        text(200, &format!("{present} of {}", found.len()))
                    }
                    Err(kv::KvError::TooLarge) => text(413, "too-large"),
                    Err(e) => text(500, &format!("{e:?}")),
                }
            }
            ("POST", "/blob/put") => blob_answer(blobs::put_from_body(body, None, u64::MAX)),
            ("POST", "/blob/write") => {
                let n: usize = String::from_utf8(param(0)).unwrap().parse().expect("N");
                let writer = blobs::BlobWriter::new(u64::MAX);
                let chunk = vec![7u8; 64 * 1024];
                let mut written = 0;
                let mut outcome = Ok(());
                while written < n && outcome.is_ok() {
                    let take = chunk.len().min(n - written);
                    outcome = writer.write(&chunk[..take]);
                    written += take;
                }
                blob_answer(outcome.and_then(|()| writer.finish()))
            }
            ("GET", "/get") => {
                let call = ServiceRequest {
                    method: "GET".into(),
                    target: String::from_utf8(param(1)).unwrap(),
                    headers: Vec::new(),
                    body: Vec::new(),
                };
                match services::call(&String::from_utf8(param(0)).unwrap(), &call) {
                    Ok(answer) => reply().raw(
                        answer.status,
                        vec![("content-type", b"application/octet-stream".to_vec())],
                        vec![BodyPart::Bytes(answer.body)],
                        Some("probe"),
                    ),
                    Err(e) => text(502, &e),
                }
            }
            ("POST", "/call-writing") => {
                let service = String::from_utf8(param(0)).unwrap();
                let call = ServiceRequest {
                    method: "GET".into(),
                    target: String::from_utf8(param(1)).unwrap(),
                    headers: Vec::new(),
                    body: Vec::new(),
                };
                let txn = kv::begin_write().expect("begin");
                txn.put(TABLE, b"writing", b"yes").expect("put");
                let plain = services::call(&service, &call).map(|_| ());
                let streamed = services::call_streaming(&service, &call, None).map(|_| ());
                txn.commit().expect("commit");
                match (plain, streamed) {
                    (Err(plain), Err(streamed)) => text(409, &format!("{plain}\n{streamed}")),
                    _ => text(200, "a call went through"),
                }
            }
            ("POST", "/tool/run") => {
                let release = String::from_utf8(param(0)).unwrap();
                let body = String::from_utf8(read_body(body).unwrap()).unwrap();
                let mut lines = body.lines();
                let recipe = lines.next().unwrap_or_default().to_string();
                let inputs = lines
                    .filter(|l| !l.is_empty())
                    .map(|line| {
                        let mut words = line.split(' ');
                        let (role, type_, digest) = (words.next(), words.next(), words.next());
                        tools::RunInput {
                            role: role.unwrap_or_default().into(),
                            type_: type_.unwrap_or_default().into(),
                            blob: unhex(digest.unwrap_or_default()),
                        }
                    })
                    .collect::<Vec<_>>();
                match tools::run(&release, &inputs, &recipe) {
                    Ok(run) => text(200, &report(&run)),
                    Err(tools::RunError::UnknownRelease) => text(404, "unknown-release"),
                    Err(tools::RunError::MissingInput(role)) => {
                        text(400, &format!("missing-input {role}"))
                    }
                    Err(tools::RunError::Unavailable) => text(503, "unavailable"),
                    Err(tools::RunError::Refused(why)) => text(403, &why),
                }
            }
            _ => text(404, "no such probe"),
        }
    }
}

/// A run report as text: `completed` or `failed: REASON` on the first
/// line, then one line `output ROLE ORDINAL TYPE HEX-DIGEST SIZE` per
/// output, then `used FUEL PEAK-MEMORY WALL-US` and `limits FUEL MEMORY
/// WALL-MS OUTPUTS OUTPUT-BYTES`.
fn report(run: &tools::RunReport) -> String {
    let mut lines = Vec::new();
    match &run.outcome {
        tools::RunOutcome::Completed(outputs) => {
            lines.push("completed".to_string());
            for o in outputs {
                let digest: String = o.blob.iter().map(|b| format!("{b:02x}")).collect();
                lines.push(format!(
                    "output {} {} {} {digest} {}",
                    o.role, o.ordinal, o.type_, o.size
                ));
            }
        }
        tools::RunOutcome::Failed(reason) => lines.push(format!("failed: {reason}")),
    }
    let (used, limits) = (&run.used, &run.limits);
    lines.push(format!(
        "used {} {} {}",
        used.fuel, used.peak_memory, used.wall_us
    ));
    lines.push(format!(
        "limits {} {} {} {} {}",
        limits.fuel, limits.memory, limits.wall_ms, limits.outputs, limits.output_bytes
    ));
    lines.join("\n")
}

/// Hex digits to octets; a malformed digit or odd length gives fewer.
fn unhex(text: &str) -> Vec<u8> {
    text.as_bytes()
        .chunks_exact(2)
        .filter_map(|pair| u8::from_str_radix(std::str::from_utf8(pair).ok()?, 16).ok())
        .collect()
}

/// The whole request body.
fn read_body(body: &IncomingBody) -> Result<Vec<u8>, String> {
    let mut bytes = Vec::new();
    loop {
        let chunk = body.read(64 * 1024).map_err(|e| format!("{e:?}"))?;
        if chunk.is_empty() {
            return Ok(bytes);
        }
        bytes.extend_from_slice(&chunk);
    }
}

fn blob_answer(outcome: Result<blobs::BlobInfo, blobs::PutError>) -> Response {
    match outcome {
        Ok(info) => text(200, &info.size.to_string()),
        Err(blobs::PutError::TooLarge) => text(413, "too-large"),
        Err(e) => text(500, &format!("{e:?}")),
    }
}

/// A peer's whole (small) answer body.
fn read_all(body: &ResponseBody) -> Result<Vec<u8>, String> {
    let mut bytes = Vec::new();
    loop {
        let chunk = body.read(64 * 1024)?;
        if chunk.is_empty() {
            return Ok(bytes);
        }
        bytes.extend_from_slice(&chunk);
    }
}

/// `kv.submit-sequenced` of one batch advancing `counter` by 1, guarded
/// by `guard`, whose value is the counter's new value; `mode` says what
/// else the handler does (see the table above). Each outcome answers its
/// name and number: `applied N` (N the counter's new value, 201),
/// `guarded N` (200), `mismatch N` (409), `past N` (413), `no counter`
/// (404). The handler's own answer, 299, is set aside.
fn submit(mode: &str, guard: &[u8]) -> Response {
    let key = |key: &[u8]| kv::TableKey {
        table: TABLE.into(),
        key: key.to_vec(),
    };
    let batch = kv::SequencedBatch {
        guard: key(guard),
        counter: key(b"counter"),
        expected: (mode == "expect-5").then_some(5),
        count: 1,
        ceiling: if mode == "ceiling" { 0 } else { u64::MAX },
        writes: vec![kv::SequencedWrite {
            table: TABLE.into(),
            key: guard.to_vec(),
            value: vec![0; 8],
            slots: vec![kv::CounterSlot {
                in_key: false,
                offset: 0,
                addend: 1,
            }],
        }],
    };
    let numbered = |status: u16, name: &str, addend: u64, read_at: Option<u32>| {
        let body = format!("{name} ").into_bytes();
        kv::OutcomeAnswer {
            status,
            numbers: vec![kv::AnswerNumber {
                at: body.len() as u32,
                read_at,
                addend,
            }],
            body,
        }
    };
    let mut answers = kv::BatchAnswers {
        applied: numbered(201, "applied", 1, None),
        guarded: vec![kv::GuardedAnswer {
            prefix: Vec::new(),
            answer: numbered(200, "guarded", 0, Some(0)),
        }],
        mismatch: numbered(409, "mismatch", 0, None),
        past_ceiling: numbered(413, "past", 0, None),
        no_counter: kv::OutcomeAnswer {
            status: 404,
            body: b"no counter".to_vec(),
            numbers: Vec::new(),
        },
    };
    if mode == "malformed" {
        answers.applied.numbers[0].at = 99;
    }
    let _open = (mode == "writing").then(|| kv::begin_write().expect("begin"));
    if let Err(e) = kv::submit_sequenced(&batch, &answers, None) {
        return text(409, &format!("{e:?}"));
    }
    match mode {
        "trap" => panic!("asked to trap after submitting"),
        "twice" => {
            let second = kv::submit_sequenced(&batch, &answers, None);
            text(299, &format!("{second:?}"))
        }
        _ => text(299, "set aside"),
    }
}

fn text(status: u16, body: &str) -> Response {
    reply().raw(
        status,
        vec![("content-type", b"text/plain".to_vec())],
        vec![BodyPart::Bytes(body.as_bytes().to_vec())],
        Some("probe"),
    )
}

lab_guest::export_service!(Probe);

/// Fills about `bytes` of the heap with small blocks, each holding its own
/// pattern, churns them, and checks every one.
fn heap_exercise(bytes: usize) -> Response {
    let size = |i: usize| 1 + (i * 7919) % 1024;
    let fill = |i: usize| (i % 251) as u8;
    let mut blocks: Vec<Vec<u8>> = Vec::new();
    let mut total = 0;
    while total < bytes {
        let i = blocks.len();
        blocks.push(vec![fill(i); size(i)]);
        total += size(i);
    }
    for (i, block) in blocks.iter_mut().enumerate() {
        if i % 3 == 0 {
            *block = vec![fill(i); size(i)];
        }
        if i % 5 == 0 {
            block.extend(std::iter::repeat_n(fill(i), 300));
        }
    }
    for (i, block) in blocks.iter().enumerate() {
        let grown = if i % 5 == 0 { 300 } else { 0 };
        if block.len() != size(i) + grown || block.iter().any(|&b| b != fill(i)) {
            return text(500, &format!("block {i} of {} changed", blocks.len()));
        }
    }
    text(200, &format!("intact {}", blocks.len()))
}
