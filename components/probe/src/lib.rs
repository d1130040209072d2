//! A component for tests only: it answers as `bytes` so it can stand in for
//! the bytes component, and exposes host behaviour directly.
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
//! | `POST /call?key=S&value=T` | sends its body to service S as `POST T` (JSON); answers the peer's status and body, or 502 with the call's error |

use lab_guest::exports::lab::platform::handler::{
    BodyPart, Guest, Request, Response, ServiceIdentity,
};
use lab_guest::lab::platform::body::IncomingBody;
use lab_guest::lab::platform::kv;
use lab_guest::lab::platform::services::{self, ServiceRequest};
use lab_guest::lab::platform::types::Header;
use lab_kit::reply::Replier;

const REPLY: Replier = Replier {
    service: "bytes",
    contract: "probe",
    extra: &[],
};
const TABLE: &str = "probe";

struct Probe;

impl Guest for Probe {
    fn identity() -> ServiceIdentity {
        REPLY.identity()
    }

    fn prepare() -> Result<(), String> {
        Ok(())
    }

    fn handle(request: Request, body: &IncomingBody) -> Response {
        let params =
            lab_kit::query::parse(request.query.as_deref(), &["key", "value"]).unwrap_or_default();
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
            ("POST", "/call") => {
                let mut bytes = Vec::new();
                loop {
                    let chunk = body.read(64 * 1024).expect("read the body");
                    if chunk.is_empty() {
                        break;
                    }
                    bytes.extend_from_slice(&chunk);
                }
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
                    Ok(answer) => REPLY.raw(
                        answer.status,
                        vec![("content-type", b"application/json".to_vec())],
                        vec![BodyPart::Bytes(answer.body)],
                        Some("probe"),
                    ),
                    Err(e) => text(502, &e),
                }
            }
            _ => text(404, "no such probe"),
        }
    }
}

fn text(status: u16, body: &str) -> Response {
    REPLY.raw(
        status,
        vec![("content-type", b"text/plain".to_vec())],
        vec![BodyPart::Bytes(body.as_bytes().to_vec())],
        Some("probe"),
    )
}

lab_guest::export_service!(Probe);
