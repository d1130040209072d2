//! The journal service over the wire, written from its specification
//! (`journal-service.md`) and its contract files (`contracts/journal/`):
//! every operation and its result, every refusal each operation lists, the
//! identity headers, strict bodies, canonical facts, replays, paging,
//! filters, snapshots, races and a crash.

use crate::support;
use serde_json::{json, Value};
use std::collections::{BTreeMap, HashMap, HashSet};

use crate::crash::{
    crash_under_load, post_bytes, random_threshold, until_one_in_flight, Crash, Crashable,
};
use crate::support::{name_of, Client, Labd, Response};
use crate::swap::{across_reload, HalfSent, SwapFiles};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Mutex;

const CONTRACT: &str = "2026-09-12";
const MAX_POSITION: u64 = 9_007_199_254_740_991;
const MIB: usize = 1 << 20;
const CREATION_PREDICATE: &str = "lab.journal.child_created.v1";

// ------------------------------------------------------- canonical values

/// A value of the canonical value model (`contracts/values/VALUES.md`).
#[derive(Clone, Debug)]
enum V {
    Label(Vec<u8>),
    Text(String),
    Int(i128),
    Bytes(Vec<u8>),
    Bool(bool),
    Null,
    Tuple(Vec<V>),
    Map(Vec<(V, V)>),
}

fn label(s: &str) -> V {
    V::Label(s.as_bytes().to_vec())
}

fn text(s: &str) -> V {
    V::Text(s.to_string())
}

/// A CBOR head with its argument in the shortest form.
fn put_head(out: &mut Vec<u8>, major: u8, argument: u64) {
    let m = major << 5;
    if argument < 24 {
        out.push(m | argument as u8);
    } else if argument <= 0xff {
        out.extend([m | 24, argument as u8]);
    } else if argument <= 0xffff {
        out.push(m | 25);
        out.extend((argument as u16).to_be_bytes());
    } else if argument <= 0xffff_ffff {
        out.push(m | 26);
        out.extend((argument as u32).to_be_bytes());
    } else {
        out.push(m | 27);
        out.extend(argument.to_be_bytes());
    }
}

fn encode_into(value: &V, out: &mut Vec<u8>) {
    match value {
        V::Label(bytes) => {
            out.extend([0xd8, 0x27]);
            put_head(out, 2, bytes.len() as u64);
            out.extend(bytes);
        }
        V::Text(s) => {
            put_head(out, 3, s.len() as u64);
            out.extend(s.as_bytes());
        }
        V::Int(n) if *n >= 0 => put_head(out, 0, *n as u64),
        V::Int(n) => put_head(out, 1, (-1 - *n) as u64),
        V::Bytes(bytes) => {
            put_head(out, 2, bytes.len() as u64);
            out.extend(bytes);
        }
        V::Bool(false) => out.push(0xf4),
        V::Bool(true) => out.push(0xf5),
        V::Null => out.push(0xf6),
        V::Tuple(children) => {
            put_head(out, 4, children.len() as u64);
            for child in children {
                encode_into(child, out);
            }
        }
        V::Map(entries) => {
            let mut encoded: Vec<(Vec<u8>, Vec<u8>)> = entries
                .iter()
                .map(|(k, v)| (encode(k), encode(v)))
                .collect();
            encoded.sort();
            put_head(out, 5, encoded.len() as u64);
            for (k, v) in encoded {
                out.extend(k);
                out.extend(v);
            }
        }
    }
}

fn encode(value: &V) -> Vec<u8> {
    let mut out = Vec::new();
    encode_into(value, &mut out);
    out
}

/// A fact: the predicate label, then the arguments.
fn fact(predicate: &str, arguments: Vec<V>) -> Vec<u8> {
    let mut children = vec![label(predicate)];
    children.extend(arguments);
    encode(&V::Tuple(children))
}

/// The fact the service writes into a parent when it creates a child.
fn creation_fact(key: &str, space_id: &str) -> Vec<u8> {
    fact(CREATION_PREDICATE, vec![text(key), text(space_id)])
}

/// The standard base64 alphabet.
const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

/// Padded standard base64 (RFC 4648 section 4).
fn b64(bytes: &[u8]) -> String {
    let mut out = String::with_capacity(bytes.len().div_ceil(3) * 4);
    for chunk in bytes.chunks(3) {
        let b1 = chunk.get(1).copied().unwrap_or(0);
        let b2 = chunk.get(2).copied().unwrap_or(0);
        let n = (u32::from(chunk[0]) << 16) | (u32::from(b1) << 8) | u32::from(b2);
        out.push(ALPHABET[(n >> 18) as usize & 63] as char);
        out.push(ALPHABET[(n >> 12) as usize & 63] as char);
        out.push(if chunk.len() > 1 {
            ALPHABET[(n >> 6) as usize & 63] as char
        } else {
            '='
        });
        out.push(if chunk.len() > 2 {
            ALPHABET[n as usize & 63] as char
        } else {
            '='
        });
    }
    out
}

fn encoded(facts: &[Vec<u8>]) -> Vec<String> {
    facts.iter().map(|f| b64(f)).collect()
}

fn hex(text: &str) -> Vec<u8> {
    let digits: Vec<u8> = text.bytes().filter(|b| !b.is_ascii_whitespace()).collect();
    digits
        .chunks(2)
        .map(|pair| u8::from_str_radix(std::str::from_utf8(pair).unwrap(), 16).unwrap())
        .collect()
}

/// A fact whose only atom sits at `depth` (the root tuple at 0).
fn fact_with_atom_at_depth(depth: usize) -> Vec<u8> {
    let mut value = V::Null;
    for _ in 1..depth {
        value = V::Tuple(vec![value]);
    }
    encode(&V::Tuple(vec![label("deep"), value]))
}

/// A fact of exactly `size` canonical bytes (size >= 65_546).
fn fact_of_size(size: usize, seed: u8) -> Vec<u8> {
    // array(2), tag 39, bytes(1) "p", bytes(n) with a 4-byte length.
    let payload = size - 10;
    let bytes = fact("p", vec![V::Bytes(vec![seed; payload])]);
    assert_eq!(bytes.len(), size);
    bytes
}

// ------------------------------------------------------------- the client

static NEXT_OPERATION: AtomicU64 = AtomicU64::new(0);

/// A fresh operation ID.
fn op_id() -> String {
    format!("op-{}", NEXT_OPERATION.fetch_add(1, Ordering::Relaxed))
}

fn assert_identity(response: &Response) {
    assert_eq!(
        response.header("lab-service"),
        Some("journal"),
        "{response:?}"
    );
    assert_eq!(response.header("lab-surface"), Some("operations"));
    assert_eq!(response.header("lab-contract"), Some(CONTRACT));
}

fn text_of(response: &Response) -> String {
    String::from_utf8_lossy(&response.body).into_owned()
}

/// Asserts a 400 `invalid`, naming `field` when given.
fn assert_invalid(response: &Response, field: Option<&str>) {
    response.assert_error(400, "invalid");
    if let Some(field) = field {
        assert_eq!(
            response.json()["details"]["field"],
            field,
            "{}",
            text_of(response)
        );
    }
}

/// The `SpaceRef` of a `Space` (or of a `SpaceRef`).
fn sref(space: &Value) -> Value {
    json!({ "root_id": space["root_id"], "space_id": space["space_id"] })
}

fn positions(entries: &[Value]) -> Vec<u64> {
    entries
        .iter()
        .map(|e| e["ref"]["position"].as_u64().unwrap())
        .collect()
}

fn facts_of(entries: &[Value]) -> Vec<String> {
    entries
        .iter()
        .map(|e| e["fact"].as_str().unwrap().to_string())
        .collect()
}

/// A journal client bound to one running service and its root.
struct Journal {
    client: Client,
    identity: Value,
    root: Value,
}

impl Journal {
    fn new(labd: &Labd) -> Journal {
        let client = labd.journal();
        let describe = client.get("/describe");
        assert_identity(&describe);
        assert_eq!(describe.status, 200, "{}", text_of(&describe));
        let identity = describe.json()["identity"].clone();
        assert!(identity.is_object(), "not provisioned: {identity}");
        let root = json!({ "root_id": identity["root_id"], "space_id": identity["root_space_id"] });
        Journal {
            client,
            identity,
            root,
        }
    }

    fn raw(&self, operation: &str, body: &str) -> Response {
        let response = self.client.post_json(&format!("/v1/{operation}"), body);
        assert_identity(&response);
        response
    }

    fn post(&self, operation: &str, body: &Value) -> Response {
        self.raw(operation, &body.to_string())
    }

    /// Asserts a 200 JSON answer and returns it.
    fn ok(&self, operation: &str, body: &Value) -> Value {
        let response = self.post(operation, body);
        assert_eq!(
            response.status,
            200,
            "{operation} {body}: {}",
            text_of(&response)
        );
        assert_eq!(response.header("content-type"), Some("application/json"));
        response.json()
    }

    /// Creates `key` under `parent`; returns the CreateResult.
    fn create(&self, parent: &Value, key: &str) -> Value {
        let body = json!({ "parent": parent, "key": key, "operation_id": op_id() });
        let response = self.post("create", &body);
        assert_eq!(
            response.status,
            201,
            "create {body}: {}",
            text_of(&response)
        );
        let result = response.json();
        assert_eq!(result["replayed"], false);
        result
    }

    /// Creates `key` under `parent`; returns the child's SpaceRef.
    fn child(&self, parent: &Value, key: &str) -> Value {
        sref(&self.create(parent, key)["child"])
    }

    /// Appends unconditionally; returns the AppendResult.
    fn append(&self, space: &Value, facts: &[Vec<u8>]) -> Value {
        let body = json!({ "space": space, "facts": encoded(facts), "operation_id": op_id() });
        let response = self.post("append", &body);
        assert_eq!(response.status, 201, "append: {}", text_of(&response));
        let result = response.json();
        assert_eq!(result["replayed"], false);
        result
    }

    fn head(&self, space: &Value) -> u64 {
        let result = self.ok("head", &json!({ "space": space }));
        assert_eq!(result["space"], *space);
        result["cutoff"].as_u64().unwrap()
    }

    /// Reads the whole prefix captured by the first page, page by page,
    /// checking every page's accounting. Returns (through, entries).
    fn read_all(
        &self,
        space: &Value,
        filter: Option<&Value>,
        limit: Option<u64>,
    ) -> (u64, Vec<Value>) {
        let mut body = json!({ "space": space });
        if let Some(filter) = filter {
            body["filter"] = filter.clone();
        }
        if let Some(limit) = limit {
            body["limit"] = json!(limit);
        }
        let mut page = self.ok("read", &body);
        let through = page["through"].as_u64().unwrap();
        let mut after = 0;
        let mut entries = Vec::new();
        for _ in 0..1_000_000 {
            assert_eq!(page["space"], *space);
            assert_eq!(page["through"], through);
            let scanned = page["scanned_through"].as_u64().unwrap();
            assert!(after <= scanned && scanned <= through, "{page}");
            let batch = page["entries"].as_array().unwrap();
            if let Some(limit) = limit {
                assert!(batch.len() as u64 <= limit);
            }
            for position in positions(batch) {
                assert!(
                    after < position && position <= scanned,
                    "{position} outside the page"
                );
            }
            entries.extend(batch.iter().cloned());
            match page.get("next_after") {
                None => {
                    assert_eq!(scanned, through, "a final page accounts for the prefix");
                    let all = positions(&entries);
                    assert!(all.windows(2).all(|w| w[0] < w[1]), "{all:?}");
                    return (through, entries);
                }
                Some(next) => {
                    assert_eq!(next.as_u64(), Some(scanned));
                    assert!(scanned > after, "a continuation must advance");
                    after = scanned;
                    body["after"] = json!(after);
                    body["through"] = json!(through);
                    page = self.ok("read", &body);
                }
            }
        }
        panic!("read never finished");
    }

    /// Every child at the current cutoff, page by page.
    fn children_all(&self, space: &Value, limit: Option<u64>) -> (u64, Vec<Value>) {
        let mut body = json!({ "space": space });
        if let Some(limit) = limit {
            body["limit"] = json!(limit);
        }
        let mut page = self.ok("children", &body);
        let through = page["through"].clone();
        let mut children = Vec::new();
        for _ in 0..100_000 {
            assert_eq!(page["space"], *space);
            assert_eq!(page["through"], through);
            let batch = page["children"].as_array().unwrap();
            if let Some(limit) = limit {
                assert!(batch.len() as u64 <= limit);
            }
            children.extend(batch.iter().cloned());
            match page.get("next_cursor") {
                None => return (through.as_u64().unwrap(), children),
                Some(cursor) => {
                    body["cursor"] = cursor.clone();
                    page = self.ok("children", &body);
                }
            }
        }
        panic!("children never finished");
    }

    /// Runs a query to its end; returns (snapshot, entries, pages).
    fn query_all(&self, mut body: Value) -> (Value, Vec<Value>, usize) {
        let mut page = self.ok("query", &body);
        let snapshot = page["snapshot"].clone();
        let mut entries = Vec::new();
        for pages in 1..100_000 {
            assert_eq!(page["snapshot"], snapshot);
            entries.extend(page["entries"].as_array().unwrap().iter().cloned());
            match page.get("next_cursor") {
                None => return (snapshot, entries, pages),
                Some(cursor) => {
                    body["snapshot"] = snapshot.clone();
                    body["cursor"] = cursor.clone();
                    page = self.ok("query", &body);
                }
            }
        }
        panic!("query never finished");
    }
}

/// The journal alone (no coordination service writing its world into the
/// root), so tests see the hierarchy exactly as they built it.
fn start(name: &str) -> (Labd, Journal) {
    let labd = Labd::start(name, &["--services", "bytes,journal"]);
    let journal = Journal::new(&labd);
    (labd, journal)
}

// ------------------------------------------------------------------ tests

#[test]
fn the_encoder_reproduces_the_worked_creation_fact() {
    let expected = hex(
        "83d827581c6c61622e6a6f75726e616c2e6368696c645f637265617465642e76316161
         78247370635f3030303030303030303030303030303030303030303030303030303030303030",
    );
    let zeros = format!("spc_{}", "0".repeat(32));
    assert_eq!(creation_fact("a", &zeros), expected);
    assert_eq!(expected.len(), 73);
    // Shortest heads, sorted map keys, base64 padding.
    assert_eq!(encode(&V::Int(24)), [0x18, 24]);
    assert_eq!(encode(&V::Int(-25)), [0x38, 24]);
    assert_eq!(encode(&V::Int(65_536)), [0x1a, 0, 1, 0, 0]);
    assert_eq!(
        encode(&V::Map(vec![(text("aa"), V::Null), (text("b"), V::Null)])),
        [0xa2, 0x61, b'b', 0xf6, 0x62, b'a', b'a', 0xf6]
    );
    assert_eq!(b64(&[0x81, 0xd8, 0x27, 0x40]), "gdgnQA==");
    assert_eq!(b64(b"ab"), "YWI=");
    assert_eq!(b64(b"abc"), "YWJj");
}

#[test]
fn the_root_is_provisioned_and_reported() {
    let (labd, j) = start("provisioned");
    let id = &j.identity;
    let pattern = |value: &Value, prefix: &str| {
        let s = value.as_str().unwrap();
        let digits = s.strip_prefix(prefix).unwrap_or_else(|| panic!("{s}"));
        assert_eq!(digits.len(), 32, "{s}");
        assert!(
            digits
                .bytes()
                .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b)),
            "{s}"
        );
    };
    pattern(&id["root_id"], "rt_");
    pattern(&id["root_space_id"], "spc_");
    pattern(&id["journal_instance_id"], "jinst_");

    let healthz = j.client.get("/healthz");
    assert_identity(&healthz);
    assert_eq!(healthz.status, 200, "{}", text_of(&healthz));
    let health = healthz.json();
    assert_eq!(health["status"], "ok");
    assert_eq!(health["service"], "journal");
    assert_eq!(health["contract"], CONTRACT);
    assert_eq!(health["identity"], *id);
    let mut checks: Vec<(String, String)> = health["checks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| {
            assert!(c["detail"].is_string());
            (
                c["name"].as_str().unwrap().to_string(),
                c["status"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    checks.sort();
    assert_eq!(
        checks,
        [
            ("engine".to_string(), "ok".to_string()),
            ("identity".to_string(), "ok".to_string()),
            ("storage".to_string(), "ok".to_string())
        ]
    );
    assert!(health["time"].is_string());
    assert!(health["build"]["revision"].is_string());
    assert!(health["build"]["dirty"].is_boolean());
    assert!(health["build"]["go"].as_str().unwrap().contains("rustc"));

    let livez = j.client.get("/livez");
    assert_identity(&livez);
    assert_eq!(livez.status, 200);
    let live = livez.json();
    assert_eq!(live["status"], "ok");
    assert_eq!(live["checks"], json!([]));
    assert_eq!(live["identity"], *id);

    // The root resolves by path [] and by identity; its journal is empty.
    let root_space =
        json!({ "root_id": id["root_id"], "space_id": id["root_space_id"], "path": [] });
    let by_path = j.ok("resolve", &json!({ "root_id": id["root_id"], "path": [] }));
    assert_eq!(by_path, json!({ "space": root_space }));
    let by_identity = j.ok("resolve", &json!({ "space": j.root }));
    assert_eq!(by_identity, json!({ "space": root_space }));
    assert_eq!(j.head(&j.root), 0);
    let children = j.ok("children", &json!({ "space": j.root }));
    assert_eq!(children["children"], json!([]));
    assert_eq!(children["through"], 0);
    assert!(children.get("next_cursor").is_none());

    // A restart keeps the identity.
    let labd = labd.kill_and_restart();
    let again = Journal::new(&labd);
    assert_eq!(again.identity, *id);
}

#[test]
fn describe_and_served_files() {
    let (_labd, j) = start("describe");
    let describe = j.client.get("/describe");
    assert_eq!(describe.header("content-type"), Some("application/json"));
    let body = describe.json();
    assert_eq!(body["service"], "journal");
    assert_eq!(body["contract"], CONTRACT);
    assert!(body["build"]["go"].is_string());
    assert_eq!(body["bindings"]["primary"], "http");
    assert_eq!(body["bindings"]["http"]["prefix"], "/v1");
    let limits = json!({
        "max_position": MAX_POSITION, "max_key_bytes": 255, "max_fact_bytes": 1_048_576,
        "max_append_facts": 128, "max_append_bytes": 4_194_304, "max_body_bytes": 8_388_608,
        "max_page_entries": 128, "default_page_entries": 64, "max_page_bytes": 4_194_304,
        "max_inspect_candidates": 4096, "max_inspect_bytes": 16_777_216,
        "max_snapshot_spaces": 4096, "max_snapshot_bytes": 4_194_304, "max_cursor_bytes": 4096,
        "max_value_depth": 256, "max_tuple_arity": 65_536, "max_atom_bytes": 1_048_576,
    });
    assert_eq!(body["limits"], limits);
    for profile in [
        "facts",
        "codec",
        "compound",
        "data",
        "data_json",
        "equality",
    ] {
        assert!(body["profiles"][profile].is_string(), "{profile}");
    }
    assert_eq!(body["profiles"]["creation_predicate"], CREATION_PREDICATE);

    let mut refusals: Vec<(String, u64)> = body["refusals"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            assert!(r["meaning"].is_string());
            (
                r["name"].as_str().unwrap().to_string(),
                r["http"].as_u64().unwrap(),
            )
        })
        .collect();
    refusals.sort();
    let mut expected: Vec<(String, u64)> = [
        ("invalid", 400),
        ("not_found", 404),
        ("exists", 409),
        ("conflict", 409),
        ("idempotency_mismatch", 409),
        ("limit_exceeded", 413),
        ("unavailable", 503),
        ("internal", 500),
    ]
    .iter()
    .map(|(n, s)| (n.to_string(), *s))
    .collect();
    expected.sort();
    assert_eq!(refusals, expected);

    // The operation table is the contract file's.
    let contracts = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../contracts/journal");
    let table: Value =
        serde_json::from_slice(&std::fs::read(contracts.join("operations.json")).unwrap()).unwrap();
    assert_eq!(body["operations"], table["operations"]);
    let names: Vec<&str> = table["operations"]
        .as_array()
        .unwrap()
        .iter()
        .map(|o| o["name"].as_str().unwrap())
        .collect();
    for name in [
        "create",
        "resolve",
        "children",
        "head",
        "append",
        "read",
        "query",
        "livez",
        "healthz",
        "describe",
        "describe_file",
    ] {
        assert!(names.contains(&name), "{name}");
    }

    // Every contract file is listed and served verbatim; nothing else is.
    let files: Vec<String> = body["files"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f.as_str().unwrap().to_string())
        .collect();
    let mut on_disk = vec![
        "HTTP.md".to_string(),
        "SURFACE.md".to_string(),
        "openapi.json".to_string(),
        "operations.json".to_string(),
    ];
    for entry in std::fs::read_dir(contracts.join("schema")).unwrap() {
        let name = entry.unwrap().file_name().into_string().unwrap();
        assert!(name.ends_with(".schema.json"));
        on_disk.push(format!("schema/{name}"));
    }
    let mut listed = files.clone();
    listed.sort();
    on_disk.sort();
    assert_eq!(listed, on_disk);
    for file in &files {
        let response = j.client.get(&format!("/describe/{file}"));
        assert_identity(&response);
        assert_eq!(response.status, 200, "{file}");
        let media = if file.ends_with(".md") {
            "text/markdown"
        } else {
            "application/json"
        };
        assert_eq!(response.header("content-type"), Some(media), "{file}");
        assert!(
            response.body == std::fs::read(contracts.join(file)).unwrap(),
            "{file} is not served verbatim"
        );
    }
    for absent in [
        "/describe/nope.md",
        "/describe/schema/Nope.schema.json",
        "/describe/../journal/HTTP.md",
        "/describe/schema/../HTTP.md",
        "/describe/Cargo.toml",
        "/describe/surface.md",
        "/describe/",
    ] {
        let response = j.client.get(absent);
        assert_identity(&response);
        response.assert_error(404, "not_found");
    }
}

#[test]
fn operational_routes_take_no_body_or_query() {
    let (_labd, j) = start("operational");
    for route in ["/livez", "/healthz", "/describe", "/describe/SURFACE.md"] {
        let response = j.client.get(&format!("{route}?x=1"));
        assert_identity(&response);
        assert_invalid(&response, None);
        let response = j.client.send(&format!("GET {route} HTTP/1.1"), Some(b"{}"));
        assert_identity(&response);
        assert_invalid(&response, None);
        for method in ["POST", "PUT", "DELETE"] {
            let response = j
                .client
                .send(&format!("{method} {route} HTTP/1.1"), Some(b""));
            assert_identity(&response);
            response.assert_error(405, "invalid");
            assert_eq!(response.header("allow"), Some("GET"), "{method} {route}");
        }
    }
}

#[test]
fn router_failures_carry_the_identity_headers() {
    let (_labd, j) = start("router");
    for target in [
        "/",
        "/v1",
        "/v1/",
        "/v1/nope",
        "/v2/head",
        "/v1/head/",
        "/v1//head",
        "/v1/./head",
        "/v1/x/../head",
        "/v1/Head",
        "/V1/head",
        "/api/operations/v1/head",
        "/metrics",
        "/statusz",
        "/LIVEZ",
        "/livez/",
    ] {
        for method in ["GET", "POST"] {
            let response = j
                .client
                .send(&format!("{method} {target} HTTP/1.1"), Some(b"{}"));
            assert_identity(&response);
            response.assert_error(404, "not_found");
            assert!(response.header("location").is_none());
        }
    }
    for operation in [
        "create", "resolve", "children", "head", "append", "read", "query",
    ] {
        for method in ["GET", "PUT", "DELETE", "PATCH"] {
            let response = j
                .client
                .send(&format!("{method} /v1/{operation} HTTP/1.1"), Some(b"{}"));
            assert_identity(&response);
            response.assert_error(405, "invalid");
            assert_eq!(
                response.header("allow"),
                Some("POST"),
                "{method} {operation}"
            );
        }
    }
    // A query string on an application route is a bad request shape.
    let body = json!({ "space": j.root }).to_string();
    let response = j.client.post_json("/v1/head?x=1", &body);
    assert_identity(&response);
    assert_invalid(&response, None);
}

#[test]
fn the_management_listener_is_a_separate_surface() {
    let (labd, j) = start("management");
    j.head(&j.root);
    let management = labd.journal_management();
    assert_ne!(management.address, j.client.address);
    let identity = |response: &Response| {
        assert_eq!(response.header("lab-service"), Some("journal"));
        assert_eq!(response.header("lab-surface"), Some("management"));
        assert_eq!(response.header("lab-contract"), Some(CONTRACT));
    };
    let livez = management.get("/livez");
    identity(&livez);
    assert_eq!(livez.status, 200);
    let healthz = management.get("/healthz");
    identity(&healthz);
    assert_eq!(healthz.status, 200);
    let names: HashSet<String> = healthz.json()["checks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["name"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(
        names,
        HashSet::from(["engine", "identity", "storage"].map(String::from))
    );
    let metrics = management.get("/metrics");
    identity(&metrics);
    assert_eq!(metrics.status, 200);
    assert!(String::from_utf8(metrics.body)
        .unwrap()
        .contains("service=\"journal\""));
    let component = management.get("/component");
    identity(&component);
    assert_eq!(component.json()["service"], "journal");
    assert!(component.json()["digest"]
        .as_str()
        .unwrap()
        .starts_with("sha256:"));
    let missing = management.get("/v1/head");
    identity(&missing);
    assert_eq!(missing.status, 404);
}

#[test]
fn create_records_a_creation_entry_in_the_parent() {
    let (_labd, j) = start("create");
    j.append(&j.root, &[fact("before", vec![])]);
    let result = j.create(&j.root, "a");
    let child = &result["child"];
    let child_id = child["space_id"].as_str().unwrap().to_string();
    assert!(child_id.starts_with("spc_") && child_id.len() == 36);
    assert_ne!(child["space_id"], j.root["space_id"]);
    assert_eq!(child["root_id"], j.root["root_id"]);
    assert_eq!(child["path"], json!(["a"]));
    let entry = &result["parent_entry"];
    assert_eq!(entry["root_id"], j.root["root_id"]);
    assert_eq!(entry["space_id"], j.root["space_id"]);
    assert_eq!(entry["position"], 2);
    assert_eq!(result["parent_cutoff"], 2);
    assert_eq!(j.head(&j.root), 2);
    assert_eq!(j.head(&sref(child)), 0);

    // The creation entry: origin `create`, the creation fact, a batch of one.
    let (_, entries) = j.read_all(&j.root, None, None);
    assert_eq!(entries.len(), 2);
    assert_eq!(entries[0]["origin"], "append");
    assert_eq!(
        entries[1],
        json!({
            "ref": { "root_id": j.root["root_id"], "space_id": j.root["space_id"], "position": 2 },
            "fact": b64(&creation_fact("a", &child_id)),
            "origin": "create",
            "batch": { "first": 2, "last": 2 },
        })
    );

    // Descendants, resolution by path and by identity.
    let grandchild = j.create(&sref(child), "b");
    assert_eq!(grandchild["child"]["path"], json!(["a", "b"]));
    assert_eq!(grandchild["parent_entry"]["space_id"], child["space_id"]);
    assert_eq!(grandchild["parent_entry"]["position"], 1);
    assert_eq!(grandchild["parent_cutoff"], 1);
    let resolved = j.ok(
        "resolve",
        &json!({ "root_id": j.root["root_id"], "path": ["a", "b"] }),
    );
    assert_eq!(resolved["space"], grandchild["child"]);
    let resolved = j.ok("resolve", &json!({ "space": sref(&grandchild["child"]) }));
    assert_eq!(resolved["space"], grandchild["child"]);
    let resolved = j.ok(
        "resolve",
        &json!({ "root_id": j.root["root_id"], "path": ["a"] }),
    );
    assert_eq!(resolved["space"], *child);

    // The parent's child set.
    let children = j.ok("children", &json!({ "space": j.root }));
    assert_eq!(children["through"], 2);
    assert_eq!(
        children["children"],
        json!([{ "key": "a", "space": child, "created_at": entry }])
    );

    // Keys are compared byte for byte: dots, Unicode and long keys are ordinary.
    let long_key = "k".repeat(255);
    let four_byte_key = "\u{1F600}".repeat(63); // 252 bytes
    for key in [
        ".",
        "..",
        "A",
        "a ",
        "é",
        "e\u{301}",
        long_key.as_str(),
        four_byte_key.as_str(),
    ] {
        let created = j.create(&j.root, key);
        assert_eq!(created["child"]["path"], json!([key]));
        let resolved = j.ok(
            "resolve",
            &json!({ "root_id": j.root["root_id"], "path": [key] }),
        );
        assert_eq!(resolved["space"], created["child"]);
    }
    // A caller may append a value equal to a creation fact: it creates nothing.
    let imitation = creation_fact("ghost", &format!("spc_{}", "1".repeat(32)));
    let appended = j.append(&sref(child), std::slice::from_ref(&imitation));
    let (_, entries) = j.read_all(&sref(child), None, None);
    let last = entries.last().unwrap();
    assert_eq!(last["origin"], "append");
    assert_eq!(last["fact"], b64(&imitation));
    assert_eq!(last["ref"]["position"], appended["first"]);
    let children = j.ok("children", &json!({ "space": sref(child) }));
    assert_eq!(children["children"].as_array().unwrap().len(), 1);
    let resolved = j.ok(
        "resolve",
        &json!({ "root_id": j.root["root_id"], "path": ["a", "ghost"] }),
    );
    assert_eq!(resolved["space"], Value::Null);
}

#[test]
fn create_refusals() {
    let (_labd, j) = start("create-refusals");
    let root = j.root.clone();
    let body = |parent: &Value, key: &str| json!({ "parent": parent, "key": key, "operation_id": op_id() });

    // not_found: an unknown space under the root, and an unknown root.
    let unknown_space =
        json!({ "root_id": root["root_id"], "space_id": format!("spc_{}", "e".repeat(32)) });
    j.post("create", &body(&unknown_space, "x"))
        .assert_error(404, "not_found");
    let unknown_root =
        json!({ "root_id": format!("rt_{}", "e".repeat(32)), "space_id": root["space_id"] });
    j.post("create", &body(&unknown_root, "x"))
        .assert_error(404, "not_found");

    // exists: the key is occupied under that parent, whatever the operation ID.
    let first = j.create(&root, "taken");
    j.post("create", &body(&root, "taken"))
        .assert_error(409, "exists");
    // The same key under another parent is free.
    j.create(&sref(&first["child"]), "taken");

    // conflict: details carry both cutoffs; nothing is created.
    let cutoff = j.head(&root);
    let mut conditional = body(&root, "conditional");
    conditional["expected_cutoff"] = json!(cutoff + 5);
    let response = j.post("create", &conditional);
    response.assert_error(409, "conflict");
    assert_eq!(
        response.json()["details"],
        json!({ "expected_cutoff": cutoff + 5, "actual_cutoff": cutoff })
    );
    assert_eq!(j.head(&root), cutoff);
    let unresolved = j.ok(
        "resolve",
        &json!({ "root_id": root["root_id"], "path": ["conditional"] }),
    );
    assert_eq!(unresolved["space"], Value::Null);
    // A refused request reserved nothing: the same operation ID now commits.
    conditional["expected_cutoff"] = json!(cutoff);
    assert_eq!(j.post("create", &conditional).status, 201);
    let mut zero = body(&root, "zero");
    zero["expected_cutoff"] = json!(0);
    j.post("create", &zero).assert_error(409, "conflict");
    // An empty parent accepts 0.
    let empty = j.child(&root, "empty");
    let mut under_empty = body(&empty, "first");
    under_empty["expected_cutoff"] = json!(0);
    assert_eq!(j.post("create", &under_empty).status, 201);

    // idempotency_mismatch: one operation ID, another key.
    let mut original = body(&root, "original");
    assert_eq!(j.post("create", &original).status, 201);
    let before = j.head(&root);
    original["key"] = json!("different");
    j.post("create", &original)
        .assert_error(409, "idempotency_mismatch");
    assert_eq!(j.head(&root), before);
    original["key"] = json!("original");
    original["expected_cutoff"] = json!(before);
    j.post("create", &original)
        .assert_error(409, "idempotency_mismatch");

    // invalid keys name `key`.
    let too_long = "k".repeat(256);
    let two_byte_too_long = "é".repeat(128); // 256 bytes, 128 characters
    for key in [
        "",
        "a/b",
        "/",
        "\u{0}",
        "tab\there",
        "new\nline",
        "\u{7f}",
        "\u{80}",
        "\u{85}",
        "\u{9f}",
        too_long.as_str(),
        two_byte_too_long.as_str(),
    ] {
        assert_invalid(&j.post("create", &body(&root, key)), Some("key"));
    }
    for key in [json!(null), json!(1), json!(["a"]), json!({})] {
        let mut request = body(&root, "x");
        request["key"] = key;
        assert_invalid(&j.post("create", &request), Some("key"));
    }
    // invalid operation IDs.
    let long_id = "o".repeat(129);
    for id in [
        json!(""),
        json!("with space"),
        json!("é"),
        json!("a/b"),
        json!(long_id),
        json!(null),
        json!(7),
    ] {
        let mut request = body(&root, "x");
        request["operation_id"] = id;
        assert_invalid(&j.post("create", &request), Some("operation_id"));
    }
    let mut request = body(&root, "ok-id");
    request["operation_id"] = json!(format!("A-z.0:9{}", "x".repeat(121)));
    assert_eq!(j.post("create", &request).status, 201);
    // invalid parents.
    let mut request = body(&root, "x");
    request.as_object_mut().unwrap().remove("parent");
    assert_invalid(&j.post("create", &request), Some("parent"));
    for (parent, field) in [
        (json!(null), "parent"),
        (json!("spc"), "parent"),
        (json!({ "root_id": root["root_id"] }), "parent.space_id"),
        (
            json!({ "root_id": root["root_id"], "space_id": root["space_id"].as_str().unwrap().to_uppercase() }),
            "parent.space_id",
        ),
        (
            json!({ "root_id": root["root_id"], "space_id": "spc_123" }),
            "parent.space_id",
        ),
        (
            json!({ "root_id": root["space_id"], "space_id": root["space_id"] }),
            "parent.root_id",
        ),
    ] {
        assert_invalid(&j.post("create", &body(&parent, "x")), Some(field));
    }
    // invalid preconditions: canonical non-negative integers only.
    for raw in ["\"1\"", "-1", "1.0", "1e0", "-0", "true"] {
        let text = format!(
            r#"{{"parent":{},"key":"x","operation_id":"{}","expected_cutoff":{raw}}}"#,
            root,
            op_id()
        );
        assert_invalid(&j.raw("create", &text), Some("expected_cutoff"));
    }
    // Nothing above committed a child named x.
    let x = j.ok(
        "resolve",
        &json!({ "root_id": root["root_id"], "path": ["x"] }),
    );
    assert_eq!(x["space"], Value::Null);
}

#[test]
fn create_replays_return_the_original_result() {
    let (_labd, j) = start("create-replay");
    let root = j.root.clone();
    let request = json!({ "parent": root, "key": "k", "operation_id": "create-k" });
    let response = j.post("create", &request);
    assert_eq!(response.status, 201);
    let original = response.json();
    // The parent grows; the replay still answers the original result.
    j.append(&root, &[fact("later", vec![])]);
    j.create(&root, "other");
    let replay = j.post("create", &request);
    assert_eq!(replay.status, 200, "{}", text_of(&replay));
    let mut expected = original.clone();
    expected["replayed"] = json!(true);
    assert_eq!(replay.json(), expected);
    // Member order and whitespace are immaterial; null equals absent.
    let spelled = format!(
        "\n{{ \"operation_id\" : \"create-k\",\t\"key\":\"k\", \"expected_cutoff\": null, \"parent\": {{\"space_id\":{}, \"root_id\":{}}} }} \n",
        root["space_id"], root["root_id"]
    );
    let replay = j.raw("create", &spelled);
    assert_eq!(replay.status, 200, "{}", text_of(&replay));
    assert_eq!(replay.json(), expected);
    // An explicit zero differs from absent.
    let mut zero = request.clone();
    zero["expected_cutoff"] = json!(0);
    j.post("create", &zero)
        .assert_error(409, "idempotency_mismatch");

    // A conditional create replays even though its precondition no longer holds.
    let cutoff = j.head(&root);
    let conditional = json!({ "parent": root, "key": "c", "operation_id": "create-c", "expected_cutoff": cutoff });
    let first = j.post("create", &conditional);
    assert_eq!(first.status, 201);
    j.append(&root, &[fact("later", vec![])]);
    let replay = j.post("create", &conditional);
    assert_eq!(replay.status, 200, "{}", text_of(&replay));
    assert_eq!(replay.json()["replayed"], true);
    assert_eq!(replay.json()["child"], first.json()["child"]);
    assert_eq!(replay.json()["parent_cutoff"], cutoff + 1);
    let mut unconditional = conditional.clone();
    unconditional
        .as_object_mut()
        .unwrap()
        .remove("expected_cutoff");
    j.post("create", &unconditional)
        .assert_error(409, "idempotency_mismatch");

    // The scope includes the parent: the same ID under another parent is new.
    let other_parent = j.child(&root, "p");
    let elsewhere = json!({ "parent": other_parent, "key": "k", "operation_id": "create-k" });
    let response = j.post("create", &elsewhere);
    assert_eq!(response.status, 201, "{}", text_of(&response));
    assert_ne!(
        response.json()["child"]["space_id"],
        original["child"]["space_id"]
    );
    // A refused create reserves nothing.
    let refused = json!({ "parent": root, "key": "k", "operation_id": "fresh-id" });
    j.post("create", &refused).assert_error(409, "exists");
    let retried = json!({ "parent": root, "key": "k2", "operation_id": "fresh-id" });
    assert_eq!(j.post("create", &retried).status, 201);
}

#[test]
fn append_and_head() {
    let (_labd, j) = start("append");
    let space = j.child(&j.root, "s");
    assert_eq!(j.head(&space), 0);
    let facts = vec![
        fact("p", vec![text("x"), V::Int(1)]),
        encode(&V::Tuple(vec![V::Label(Vec::new())])),
        encode(&V::Tuple(vec![
            V::Label(vec![0xff, 0x00, 0xfe]),
            V::Bytes(vec![1, 2, 3]),
        ])),
        encode(&V::Tuple(vec![
            text("text predicate"),
            V::Null,
            V::Bool(true),
            V::Bool(false),
        ])),
        encode(&V::Tuple(vec![V::Int(-7), V::Int(i128::from(u64::MAX))])),
        encode(&V::Tuple(vec![V::Null])),
        encode(&V::Tuple(vec![
            V::Bytes(Vec::new()),
            V::Tuple(vec![]),
            V::Map(vec![]),
        ])),
        fact(
            "map",
            vec![V::Map(vec![
                (text("b"), V::Int(2)),
                (text("aa"), V::Int(1)),
                (V::Int(3), label("x")),
            ])],
        ),
        fact("p", vec![text("x"), V::Int(1)]),
    ];
    let result = j.append(&space, &facts[..3]);
    assert_eq!(
        result,
        json!({ "space": space, "first": 1, "last": 3, "cutoff": 3, "replayed": false })
    );
    assert_eq!(j.head(&space), 3);
    let result = j.append(&space, &facts[3..]);
    assert_eq!(
        result,
        json!({ "space": space, "first": 4, "last": 9, "cutoff": 9, "replayed": false })
    );
    assert_eq!(j.head(&space), 9);
    let (through, entries) = j.read_all(&space, None, None);
    assert_eq!(through, 9);
    assert_eq!(facts_of(&entries), encoded(&facts));
    for (i, entry) in entries.iter().enumerate() {
        let position = i as u64 + 1;
        let (first, last) = if position <= 3 { (1, 3) } else { (4, 9) };
        assert_eq!(
            *entry,
            json!({
                "ref": { "root_id": space["root_id"], "space_id": space["space_id"], "position": position },
                "fact": b64(&facts[i]),
                "origin": "append",
                "batch": { "first": first, "last": last },
            })
        );
    }
    // Equal facts at different positions are distinct occurrences.
    assert_eq!(entries[0]["fact"], entries[8]["fact"]);
    // Appending to a child leaves the parent alone, and vice versa.
    let root_cutoff = j.head(&j.root);
    j.append(&space, &[fact("q", vec![])]);
    assert_eq!(j.head(&j.root), root_cutoff);

    // head refusals.
    let unknown =
        json!({ "root_id": space["root_id"], "space_id": format!("spc_{}", "f".repeat(32)) });
    j.post("head", &json!({ "space": unknown }))
        .assert_error(404, "not_found");
    let foreign_root =
        json!({ "root_id": format!("rt_{}", "f".repeat(32)), "space_id": space["space_id"] });
    j.post("head", &json!({ "space": foreign_root }))
        .assert_error(404, "not_found");
    assert_invalid(&j.post("head", &json!({})), Some("space"));
    assert_invalid(&j.post("head", &json!({ "space": null })), Some("space"));
    assert_invalid(
        &j.post(
            "head",
            &json!({ "space": { "root_id": space["root_id"], "space_id": "spc_" } }),
        ),
        Some("space.space_id"),
    );
    assert_invalid(
        &j.post("head", &json!({ "space": { "root_id": space["root_id"], "space_id": space["space_id"], "path": [] } })),
        Some("space.path"),
    );
    assert_invalid(
        &j.post("head", &json!({ "space": space, "cutoff": 1 })),
        Some("cutoff"),
    );
}

#[test]
fn append_refusals() {
    let (_labd, j) = start("append-refusals");
    let space = j.child(&j.root, "s");
    j.append(&space, &[fact("seed", vec![])]);
    let good = b64(&fact("good", vec![V::Int(1)]));
    let request = |facts: Value| json!({ "space": space, "facts": facts, "operation_id": op_id() });

    let unknown =
        json!({ "root_id": space["root_id"], "space_id": format!("spc_{}", "d".repeat(32)) });
    j.post(
        "append",
        &json!({ "space": unknown, "facts": [good], "operation_id": op_id() }),
    )
    .assert_error(404, "not_found");

    // The batch: non-null, non-empty, at most 128 facts.
    assert_invalid(&j.post("append", &request(json!([]))), Some("facts"));
    assert_invalid(&j.post("append", &request(json!(null))), Some("facts"));
    assert_invalid(&j.post("append", &request(json!(good))), Some("facts"));
    let mut missing = request(json!([]));
    missing.as_object_mut().unwrap().remove("facts");
    assert_invalid(&j.post("append", &missing), Some("facts"));
    let many: Vec<Vec<u8>> = (0..129).map(|i| fact("n", vec![V::Int(i)])).collect();
    j.post("append", &request(json!(encoded(&many))))
        .assert_error(413, "limit_exceeded");
    let result = j.append(&space, &many[..128]);
    assert_eq!(
        result["last"].as_u64().unwrap() - result["first"].as_u64().unwrap(),
        127
    );

    // Canonical base64 only. A fact of 8 bytes has two padding characters,
    // one of 7 bytes one; one with 0xff bytes has `/` in its encoding.
    let two_pads = fact("pp", vec![V::Int(1)]);
    assert_eq!(two_pads.len() % 3, 1);
    let one_pad = fact("pp", vec![V::Int(1), V::Int(2)]);
    assert_eq!(one_pad.len() % 3, 2);
    let slashes = fact("p", vec![V::Bytes(vec![0xff; 30])]);
    let mut bad_strings = vec![String::new(), "*".repeat(8), "gdgnQA= =".to_string()];
    for bytes in [&two_pads, &one_pad] {
        let canonical = b64(bytes);
        let stripped = canonical.trim_end_matches('=').to_string();
        bad_strings.push(stripped.clone());
        bad_strings.push(format!("{canonical}="));
        bad_strings.push(format!("{canonical}===="));
        bad_strings.push(format!(" {canonical}"));
        bad_strings.push(format!("{}\n{}", &canonical[..4], &canonical[4..]));
        // Nonzero unused bits in the last data character.
        let last = stripped.bytes().last().unwrap();
        let index = ALPHABET.iter().position(|c| *c == last).unwrap();
        let replacement = ALPHABET[index + 1] as char;
        let pads = canonical.len() - stripped.len();
        bad_strings.push(format!(
            "{}{}{}",
            &stripped[..stripped.len() - 1],
            replacement,
            "=".repeat(pads)
        ));
    }
    let canonical_slashes = b64(&slashes);
    assert!(canonical_slashes.contains('/'));
    bad_strings.push(canonical_slashes.replace('/', "_"));
    for bad in &bad_strings {
        let response = j.post("append", &request(json!([good, good, bad])));
        assert_invalid(&response, Some("facts[2]"));
    }
    // Each canonical form is accepted.
    j.append(&space, &[two_pads, one_pad, slashes]);

    // Canonical values only, and only facts.
    let not_canonical = [
        "82d827417018 01",             // non-shortest int
        "9fd8274170ff",                // indefinite-length tuple
        "81d82741700 0",               // trailing byte
        "82d8274170f93c00",            // half-precision float
        "82d8274170c100",              // tag 1
        "82d8276170",                  // tag 39 around text
        "82d8274170a26261610061 6200", // unsorted map keys
        "82d8274170a2616100616100",    // duplicate map keys
        "82d82741",                    // truncated
        "82d8274170f7",                // undefined
        "82d827417061ff",              // invalid UTF-8 text
        "82d8274170f0",                // unassigned simple value
        "00",                          // an int is not a fact
        "80",                          // an empty tuple is not a fact
        "8180",                        // the predicate must be an atom
        "81a0",                        // ... a map is not one either
        "a0",                          // a map is not a fact
        "d8274170",                    // a bare label is not a fact
        "5f4170ff",                    // indefinite bytes
    ];
    for bytes in not_canonical {
        let response = j.post("append", &request(json!([good, good, b64(&hex(bytes))])));
        assert_invalid(&response, Some("facts[2]"));
    }
    for kind in [json!(1), json!(null), json!(["gdgnQA=="])] {
        assert_invalid(&j.post("append", &request(json!([kind]))), Some("facts[0]"));
    }

    // Value bounds: depth 256 is fine, 257 is over.
    j.append(&space, &[fact_with_atom_at_depth(256)]);
    j.post(
        "append",
        &request(json!([good, b64(&fact_with_atom_at_depth(257))])),
    )
    .assert_error(413, "limit_exceeded");

    // Fact and batch sizes: exactly 1 MiB and exactly 4 MiB are accepted.
    let cutoff = j.head(&space);
    j.post("append", &request(json!([b64(&fact_of_size(MIB + 1, 1))])))
        .assert_error(413, "limit_exceeded");
    let five: Vec<Vec<u8>> = (0..5).map(|i| fact_of_size(900_000, i)).collect();
    j.post("append", &request(json!(encoded(&five))))
        .assert_error(413, "limit_exceeded");
    assert_eq!(j.head(&space), cutoff);
    let four: Vec<Vec<u8>> = (0..4).map(|i| fact_of_size(MIB, i)).collect();
    let result = j.append(&space, &four);
    assert_eq!(result["first"], cutoff + 1);
    assert_eq!(result["last"], cutoff + 4);

    // conflict: details, and nothing appended.
    let cutoff = j.head(&space);
    for expected in [0, cutoff - 1, cutoff + 1, MAX_POSITION] {
        let mut body = request(json!([good]));
        body["expected_cutoff"] = json!(expected);
        let response = j.post("append", &body);
        response.assert_error(409, "conflict");
        assert_eq!(
            response.json()["details"],
            json!({ "expected_cutoff": expected, "actual_cutoff": cutoff })
        );
    }
    assert_eq!(j.head(&space), cutoff);
    let mut body = request(json!([good]));
    body["expected_cutoff"] = json!(cutoff);
    assert_eq!(j.post("append", &body).status, 201);

    // Operation IDs and preconditions.
    for id in [json!(""), json!("a b"), json!("ü"), json!(null), json!(1)] {
        let mut body = request(json!([good]));
        body["operation_id"] = id;
        assert_invalid(&j.post("append", &body), Some("operation_id"));
    }
    for raw in ["\"3\"", "-1", "2.5", "3e0", "-0", "[]"] {
        let text = format!(
            r#"{{"space":{space},"facts":["{good}"],"operation_id":"{}","expected_cutoff":{raw}}}"#,
            op_id()
        );
        assert_invalid(&j.raw("append", &text), Some("expected_cutoff"));
    }
    // An invalid batch appends nothing.
    assert_eq!(j.head(&space), cutoff + 1);
}

#[test]
fn append_replays_and_mismatches() {
    let (_labd, j) = start("append-replay");
    let space = j.child(&j.root, "s");
    let a = b64(&fact("a", vec![]));
    let b = b64(&fact("b", vec![]));
    let request = json!({ "space": space, "facts": [a, b], "operation_id": "batch-1" });
    let response = j.post("append", &request);
    assert_eq!(response.status, 201);
    let original = response.json();
    assert_eq!(original["first"], 1);
    j.append(&space, &[fact("c", vec![])]);

    // The replay answers the original bounds, even after later appends.
    let replay = j.post("append", &request);
    assert_eq!(replay.status, 200, "{}", text_of(&replay));
    assert_eq!(
        replay.json(),
        json!({ "space": space, "first": 1, "last": 2, "cutoff": 2, "replayed": true })
    );
    let mut with_null = request.clone();
    with_null["expected_cutoff"] = Value::Null;
    assert_eq!(j.post("append", &with_null).status, 200);
    let spaced = format!(
        " {{\"facts\" : [ \"{a}\" , \"{b}\" ], \"operation_id\":\"batch-1\", \"space\":{{\"space_id\":{},\"root_id\":{}}}}}\r\n",
        space["space_id"], space["root_id"]
    );
    assert_eq!(j.raw("append", &spaced).status, 200);
    assert_eq!(j.head(&space), 3);

    // Mismatches: order, content, count, precondition. Nothing is appended.
    for facts in [json!([b, a]), json!([a]), json!([a, b, b]), json!([a, a])] {
        let mut body = request.clone();
        body["facts"] = facts;
        j.post("append", &body)
            .assert_error(409, "idempotency_mismatch");
    }
    for expected in [json!(0), json!(2), json!(3)] {
        let mut body = request.clone();
        body["expected_cutoff"] = expected;
        j.post("append", &body)
            .assert_error(409, "idempotency_mismatch");
    }
    assert_eq!(j.head(&space), 3);

    // Absent, null and zero: an explicit 0 is its own request.
    let other = j.child(&j.root, "t");
    let zero = json!({ "space": other, "facts": [a], "operation_id": "z", "expected_cutoff": 0 });
    assert_eq!(j.post("append", &zero).status, 201);
    let replay = j.post("append", &zero);
    assert_eq!(
        replay.status, 200,
        "receipts replay before the precondition"
    );
    assert_eq!(replay.json()["first"], 1);
    let mut absent = zero.clone();
    absent.as_object_mut().unwrap().remove("expected_cutoff");
    j.post("append", &absent)
        .assert_error(409, "idempotency_mismatch");
    let mut null = zero.clone();
    null["expected_cutoff"] = Value::Null;
    j.post("append", &null)
        .assert_error(409, "idempotency_mismatch");
    assert_eq!(j.head(&other), 1);

    // The scope includes the space: the same ID elsewhere is a new append.
    let elsewhere = json!({ "space": other, "facts": [a, b], "operation_id": "batch-1" });
    let response = j.post("append", &elsewhere);
    assert_eq!(response.status, 201);
    assert_eq!(response.json()["first"], 2);
    // So is a create with the same operation ID: kinds are scoped apart.
    let create = json!({ "parent": space, "key": "k", "operation_id": "batch-1" });
    assert_eq!(j.post("create", &create).status, 201);

    // A refused append reserves nothing.
    let mut refused =
        json!({ "space": space, "facts": [a], "operation_id": "retry", "expected_cutoff": 99 });
    j.post("append", &refused).assert_error(409, "conflict");
    refused["facts"] = json!([b]);
    refused.as_object_mut().unwrap().remove("expected_cutoff");
    let response = j.post("append", &refused);
    assert_eq!(response.status, 201, "{}", text_of(&response));
    let invalid = json!({ "space": space, "facts": [], "operation_id": "retry-2" });
    assert_invalid(&j.post("append", &invalid), Some("facts"));
    let valid = json!({ "space": space, "facts": [a], "operation_id": "retry-2" });
    assert_eq!(j.post("append", &valid).status, 201);
}

/// A space with batches of 3, 2 and 4 facts: cutoffs 3, 5 and 9.
fn three_batches(j: &Journal, key: &str) -> (Value, Vec<Vec<u8>>) {
    let space = j.child(&j.root, key);
    let facts: Vec<Vec<u8>> = (0..9).map(|i| fact("r", vec![V::Int(i)])).collect();
    j.append(&space, &facts[0..3]);
    j.append(&space, &facts[3..5]);
    j.append(&space, &facts[5..9]);
    (space, facts)
}

#[test]
fn read_pages_through_a_fixed_prefix() {
    let (_labd, j) = start("read");
    let (space, facts) = three_batches(&j, "s");
    let read = |body: Value| j.ok("read", &body);

    let whole = read(json!({ "space": space }));
    assert_eq!(whole["through"], 9);
    assert_eq!(whole["scanned_through"], 9);
    assert!(whole.get("next_after").is_none());
    assert_eq!(
        facts_of(whole["entries"].as_array().unwrap()),
        encoded(&facts)
    );

    // Paging with a limit; the prefix stays fixed while the journal grows.
    let first = read(json!({ "space": space, "limit": 4 }));
    assert_eq!(
        positions(first["entries"].as_array().unwrap()),
        [1, 2, 3, 4]
    );
    assert_eq!(first["scanned_through"], 4);
    assert_eq!(first["next_after"], 4);
    assert_eq!(first["through"], 9);
    assert_eq!(
        first["entries"][3]["batch"],
        json!({ "first": 4, "last": 5 })
    );
    j.append(&space, &[fact("later", vec![])]);
    let second = read(json!({ "space": space, "after": 4, "through": 9, "limit": 4 }));
    assert_eq!(
        positions(second["entries"].as_array().unwrap()),
        [5, 6, 7, 8]
    );
    assert_eq!(second["next_after"], 8);
    let third = read(json!({ "space": space, "after": 8, "through": 9, "limit": 4 }));
    assert_eq!(positions(third["entries"].as_array().unwrap()), [9]);
    assert_eq!(third["scanned_through"], 9);
    assert!(third.get("next_after").is_none());
    let (through, all) = j.read_all(&space, None, Some(3));
    assert_eq!((through, all.len()), (10, 10));
    let (_, one_by_one) = j.read_all(&space, None, Some(1));
    assert_eq!(one_by_one, all);

    // `through`: 0 or a batch end, never interior or future.
    let empty = read(json!({ "space": space, "through": 0 }));
    assert_eq!(empty["entries"], json!([]));
    assert_eq!(empty["through"], 0);
    assert_eq!(empty["scanned_through"], 0);
    assert!(empty.get("next_after").is_none());
    let upto5 = read(json!({ "space": space, "through": 5 }));
    assert_eq!(
        positions(upto5["entries"].as_array().unwrap()),
        [1, 2, 3, 4, 5]
    );
    for through in [1, 2, 4, 6, 8, 11, 100, MAX_POSITION] {
        assert_invalid(
            &j.post("read", &json!({ "space": space, "through": through })),
            Some("through"),
        );
    }
    // `after` may be interior; it may not pass `through`.
    let interior = read(json!({ "space": space, "after": 1, "through": 3 }));
    assert_eq!(positions(interior["entries"].as_array().unwrap()), [2, 3]);
    assert!(interior.get("next_after").is_none());
    assert_invalid(
        &j.post("read", &json!({ "space": space, "after": 6, "through": 5 })),
        Some("after"),
    );
    // A continuation must resend `through`.
    assert_invalid(
        &j.post("read", &json!({ "space": space, "after": 3 })),
        Some("through"),
    );
    // after == through: an empty final page.
    for at in [3, 9] {
        let page = read(json!({ "space": space, "after": at, "through": at }));
        assert_eq!(page["entries"], json!([]));
        assert_eq!(page["scanned_through"], at);
        assert!(page.get("next_after").is_none());
    }
    // An empty journal.
    let fresh = j.child(&j.root, "fresh");
    let page = read(json!({ "space": fresh }));
    assert_eq!(
        page,
        json!({ "space": fresh, "through": 0, "entries": [], "scanned_through": 0 })
    );

    // Refusals.
    let unknown =
        json!({ "root_id": space["root_id"], "space_id": format!("spc_{}", "c".repeat(32)) });
    j.post("read", &json!({ "space": unknown }))
        .assert_error(404, "not_found");
    j.post("read", &json!({ "space": space, "limit": 129 }))
        .assert_error(413, "limit_exceeded");
    assert_eq!(
        read(json!({ "space": space, "limit": 128 }))["entries"]
            .as_array()
            .unwrap()
            .len(),
        10
    );
    for (member, raw) in [
        ("limit", "\"4\""),
        ("limit", "4.0"),
        ("limit", "-1"),
        ("after", "1e0"),
        ("after", "-0"),
        ("through", "9.0"),
        ("through", "\"9\""),
    ] {
        let text = format!(r#"{{"space":{space},"{member}":{raw}}}"#);
        assert_invalid(&j.raw("read", &text), Some(member));
    }
}

#[test]
fn read_pages_are_bounded_by_fact_bytes() {
    let (_labd, j) = start("read-bytes");
    let space = j.child(&j.root, "big");
    let four: Vec<Vec<u8>> = (0..4).map(|i| fact_of_size(MIB, i)).collect();
    j.append(&space, &four);
    j.append(&space, &[fact_of_size(MIB, 9)]);
    // 4 MiB of facts fill a page; the fifth is delivered on the next one.
    let first = j.ok("read", &json!({ "space": space }));
    assert_eq!(
        positions(first["entries"].as_array().unwrap()),
        [1, 2, 3, 4]
    );
    assert_eq!(first["next_after"], 4);
    assert_eq!(first["scanned_through"], 4);
    let second = j.ok("read", &json!({ "space": space, "after": 4, "through": 5 }));
    assert_eq!(positions(second["entries"].as_array().unwrap()), [5]);
    assert_eq!(second["entries"][0]["fact"], b64(&fact_of_size(MIB, 9)));
    assert!(second.get("next_after").is_none());
}

#[test]
fn filters_keep_references_and_batches() {
    let (_labd, j) = start("filters");
    let space = j.child(&j.root, "s");
    let facts = [
        fact("p1", vec![text("x"), V::Int(1)]),          // 1
        fact("p2", vec![text("x"), V::Int(2)]),          // 2
        fact("p1", vec![text("y"), V::Int(1)]),          // 3
        encode(&V::Tuple(vec![text("p1"), text("x")])),  // 4: text, not a label
        fact("p1", vec![]),                              // 5
        fact("p1", vec![text("x"), V::Int(1), V::Null]), // 6
    ];
    j.append(&space, &facts[0..2]);
    j.append(&space, &facts[2..5]);
    let child = j.create(&space, "kid"); // 6
    j.append(&space, &facts[5..6]); // 7
    let (through, all) = j.read_all(&space, None, None);
    assert_eq!(through, 7);
    let by_position: HashMap<u64, Value> = all
        .iter()
        .map(|e| (e["ref"]["position"].as_u64().unwrap(), e.clone()))
        .collect();
    let select = |filter: Value| -> Vec<u64> {
        let (t, entries) = j.read_all(&space, Some(&filter), None);
        assert_eq!(t, 7);
        for entry in &entries {
            // Filtered entries are the original entries, batches included.
            assert_eq!(
                *entry,
                by_position[&entry["ref"]["position"].as_u64().unwrap()]
            );
        }
        let (_, paged) = j.read_all(&space, Some(&filter), Some(1));
        assert_eq!(paged, entries);
        positions(&entries)
    };
    let p1 = b64(&encode(&label("p1")));
    assert_eq!(select(json!({})), [1, 2, 3, 4, 5, 6, 7]);
    assert_eq!(select(json!({ "predicate": p1 })), [1, 3, 5, 7]);
    assert_eq!(
        select(json!({ "predicate": b64(&encode(&text("p1"))) })),
        [4]
    );
    assert_eq!(
        select(json!({ "predicate": b64(&encode(&label(CREATION_PREDICATE))) })),
        [6]
    );
    let x = b64(&encode(&text("x")));
    let one = b64(&encode(&V::Int(1)));
    assert_eq!(
        select(json!({ "arguments": [{ "index": 0, "equals": x }] })),
        [1, 2, 4, 7]
    );
    assert_eq!(
        select(
            json!({ "predicate": p1, "arguments": [{ "index": 1, "equals": one }, { "index": 0, "equals": x }] })
        ),
        [1, 7]
    );
    assert_eq!(
        select(json!({ "arguments": [{ "index": 2, "equals": b64(&[0xf6]) }] })),
        [7]
    );
    assert_eq!(
        select(json!({ "arguments": [{ "index": 65_535, "equals": x }] })),
        Vec::<u64>::new()
    );
    // Contradictory conditions match nothing; identical ones collapse.
    assert_eq!(
        select(
            json!({ "arguments": [{ "index": 0, "equals": x }, { "index": 0, "equals": b64(&encode(&text("y"))) }] })
        ),
        Vec::<u64>::new()
    );
    assert_eq!(
        select(json!({ "arguments": [{ "index": 0, "equals": x }, { "index": 0, "equals": x }] })),
        [1, 2, 4, 7]
    );
    // The creation entry's arguments are the key and the space ID.
    let kid_id = child["child"]["space_id"].as_str().unwrap();
    assert_eq!(
        select(json!({ "arguments": [{ "index": 1, "equals": b64(&encode(&text(kid_id))) }] })),
        [6]
    );
    assert_eq!(select(json!({ "origin": "create" })), [6]);
    assert_eq!(select(json!({ "origin": "append" })), [1, 2, 3, 4, 5, 7]);
    assert_eq!(
        select(json!({ "origin": "append", "predicate": p1 })),
        [1, 3, 5, 7]
    );
    assert_eq!(
        select(json!({ "positions": { "after": 2, "through": 5 } })),
        [3, 4, 5]
    );
    assert_eq!(select(json!({ "positions": { "after": 4 } })), [5, 6, 7]);
    assert_eq!(select(json!({ "positions": { "through": 2 } })), [1, 2]);
    assert_eq!(
        select(json!({ "positions": { "after": null, "through": null } })),
        [1, 2, 3, 4, 5, 6, 7]
    );
    assert_eq!(select(json!({ "positions": null })), [1, 2, 3, 4, 5, 6, 7]);
    assert_eq!(
        select(json!({ "predicate": p1, "positions": { "after": 1, "through": 6 } })),
        [3, 5]
    );
    let filtered = j.ok(
        "read",
        &json!({ "space": space, "filter": { "predicate": p1 }, "after": 1, "through": 5 }),
    );
    assert_eq!(positions(filtered["entries"].as_array().unwrap()), [3, 5]);
    assert_eq!(
        filtered["entries"][0]["batch"],
        json!({ "first": 3, "last": 5 })
    );

    // A filtered page with a limit stops after its last match.
    let page = j.ok(
        "read",
        &json!({ "space": space, "filter": { "predicate": p1 }, "limit": 2 }),
    );
    assert_eq!(positions(page["entries"].as_array().unwrap()), [1, 3]);
    let scanned = page["scanned_through"].as_u64().unwrap();
    assert!((3..5).contains(&scanned), "{page}");
    assert_eq!(page["next_after"], scanned);

    // Refusals: shapes and encodings of filter members.
    let bad = |filter: Value, field: &str| {
        assert_invalid(
            &j.post("read", &json!({ "space": space, "filter": filter })),
            Some(field),
        );
    };
    bad(
        json!({ "predicate": b64(&fact("p", vec![])) }),
        "filter.predicate",
    );
    bad(
        json!({ "predicate": b64(&encode(&V::Map(vec![]))) }),
        "filter.predicate",
    );
    bad(json!({ "predicate": "gdgnQA" }), "filter.predicate");
    bad(
        json!({ "predicate": b64(&hex("1801")) }),
        "filter.predicate",
    );
    bad(
        json!({ "arguments": [{ "index": 65_536, "equals": x }] }),
        "filter.arguments[0].index",
    );
    bad(
        json!({ "arguments": [{ "index": -1, "equals": x }] }),
        "filter.arguments[0].index",
    );
    bad(
        json!({ "arguments": [{ "index": 0, "equals": "eA" }] }),
        "filter.arguments[0].equals",
    );
    bad(
        json!({ "arguments": [{ "index": 0, "equals": b64(&hex("9f00ff")) }] }),
        "filter.arguments[0].equals",
    );
    bad(
        json!({ "arguments": [{ "index": 0 }] }),
        "filter.arguments[0].equals",
    );
    bad(
        json!({ "arguments": [{ "index": 0, "equals": x, "not": true }] }),
        "filter.arguments[0].not",
    );
    bad(json!({ "origin": "other" }), "filter.origin");
    bad(json!({ "origin": "Create" }), "filter.origin");
    bad(
        json!({ "positions": { "after": 1.5 } }),
        "filter.positions.after",
    );
    bad(
        json!({ "positions": { "before": 1 } }),
        "filter.positions.before",
    );
    bad(json!({ "Predicate": p1 }), "filter.Predicate");
    bad(json!([]), "filter");
    j.post(
        "read",
        &json!({ "space": space, "filter": { "arguments": [{ "index": 0, "equals": b64(&fact_with_atom_at_depth(257)) }] } }),
    )
    .assert_error(413, "limit_exceeded");
}

#[test]
fn filtered_reads_advance_over_many_nonmatches() {
    let (_labd, j) = start("nonmatches");
    let space = j.child(&j.root, "s");
    for batch in 0..40 {
        let facts: Vec<Vec<u8>> = (0..125)
            .map(|i| fact("noise", vec![V::Int(batch * 125 + i)]))
            .collect();
        j.append(&space, &facts);
    }
    j.append(&space, &[fact("needle", vec![])]);
    let filter = json!({ "predicate": b64(&encode(&label("needle"))) });
    let (through, entries) = j.read_all(&space, Some(&filter), None);
    assert_eq!(through, 5001);
    assert_eq!(positions(&entries), [5001]);
    assert_eq!(entries[0]["batch"], json!({ "first": 5001, "last": 5001 }));
    let origin = json!({ "origin": "create" });
    let (_, none) = j.read_all(&space, Some(&origin), None);
    assert!(none.is_empty());
}

/// The argument index setting: `PREDICATE:INDEX` items for `pairs`.
fn argument_index(pairs: &[(&str, u16)]) -> String {
    let items: Vec<String> = pairs
        .iter()
        .map(|(p, i)| format!("{}:{i}", b64(&encode(&label(p)))))
        .collect();
    items.join(",")
}

#[test]
fn declared_and_undeclared_argument_conditions_answer_alike() {
    // One journal indexing `p` arguments 0 and 1, one indexing nothing:
    // every filter answers the same entries, page by page.
    let declared = argument_index(&[("p", 0), ("p", 1)]);
    let journals: Vec<(Labd, Journal)> = [declared.as_str(), ""]
        .into_iter()
        .map(|setting| {
            let labd = Labd::start(
                "argument-index",
                &[
                    "--services",
                    "bytes,journal",
                    "--journal-argument-index",
                    setting,
                ],
            );
            let journal = Journal::new(&labd);
            (labd, journal)
        })
        .collect();
    let facts: Vec<Vec<u8>> = (0..90i128)
        .map(|n| {
            let predicate = if n % 3 == 0 { "q" } else { "p" };
            let parity = if n % 2 == 0 { "even" } else { "odd" };
            fact(predicate, vec![V::Int(n % 5), text(parity)])
        })
        .collect();
    let spaces: Vec<Value> = journals
        .iter()
        .map(|(_, j)| {
            let space = j.child(&j.root, "s");
            for batch in facts.chunks(7) {
                j.append(&space, batch);
            }
            space
        })
        .collect();
    let condition =
        |index: u16, value: &V| json!({ "index": index, "equals": b64(&encode(value)) });
    let p = b64(&encode(&label("p")));
    let q = b64(&encode(&label("q")));
    let filters = [
        // Declared pairs.
        json!({ "predicate": p, "arguments": [condition(0, &V::Int(2))] }),
        json!({ "predicate": p, "arguments": [condition(1, &text("odd")), condition(0, &V::Int(4))] }),
        json!({ "predicate": p, "origin": "append", "arguments": [condition(1, &text("even"))],
                "positions": { "after": 20, "through": 70 } }),
        // Undeclared: another predicate, or no predicate.
        json!({ "predicate": q, "arguments": [condition(0, &V::Int(2))] }),
        json!({ "arguments": [condition(0, &V::Int(2))] }),
        json!({ "arguments": [condition(1, &text("odd")), condition(0, &V::Int(3))] }),
    ];
    for filter in &filters {
        let answers: Vec<Vec<(Value, Value, Value)>> = journals
            .iter()
            .zip(&spaces)
            .map(|((_, j), space)| {
                let (through, entries) = j.read_all(space, Some(filter), Some(4));
                assert_eq!(through, 90);
                entries
                    .iter()
                    .map(|e| {
                        (
                            e["ref"]["position"].clone(),
                            e["fact"].clone(),
                            e["batch"].clone(),
                        )
                    })
                    .collect()
            })
            .collect();
        assert!(!answers[0].is_empty(), "{filter}");
        assert_eq!(answers[0], answers[1], "{filter}");
        // And what a scan of the facts by hand finds.
        let wanted: Vec<u64> = (1..=90u64)
            .filter(|&position| {
                let n = position as i128 - 1;
                let predicate = if n % 3 == 0 { &q } else { &p };
                let parity = if n % 2 == 0 { "even" } else { "odd" };
                let arguments = [b64(&encode(&V::Int(n % 5))), b64(&encode(&text(parity)))];
                let bounds = &filter["positions"];
                filter["predicate"]
                    .as_str()
                    .is_none_or(|want| want == predicate)
                    && bounds["after"].as_u64().is_none_or(|a| position > a)
                    && bounds["through"].as_u64().is_none_or(|t| position <= t)
                    && filter["arguments"].as_array().unwrap().iter().all(|c| {
                        arguments[c["index"].as_u64().unwrap() as usize]
                            == c["equals"].as_str().unwrap()
                    })
            })
            .collect();
        let found: Vec<u64> = answers[0]
            .iter()
            .map(|(p, _, _)| p.as_u64().unwrap())
            .collect();
        assert_eq!(found, wanted, "{filter}");
    }
}

#[test]
fn a_malformed_argument_index_setting_stops_labd_at_start() {
    let record = b64(&encode(&label("record")));
    let tuple = b64(&encode(&V::Tuple(vec![label("record")])));
    for (setting, item, why) in [
        (record.clone(), record.as_str(), "is not PREDICATE:INDEX"),
        (format!("{record}:4,"), "", "is not PREDICATE:INDEX"),
        (
            format!("{record}:x"),
            "2CdGcmVjb3Jk:x",
            "not a decimal integer",
        ),
        (
            format!("{record}:65536"),
            "2CdGcmVjb3Jk:65536",
            "above 65535",
        ),
        (
            "2CdGcmVjb3J:1".to_string(),
            "2CdGcmVjb3J:1",
            "canonical padded standard base64",
        ),
        (format!("{tuple}:1"), &*format!("{tuple}:1"), "not an atom"),
    ] {
        let stderr = support::refused_start(
            "argument-index-refused",
            &["--journal-argument-index".to_string(), setting.clone()],
        );
        let message =
            format!("the argument index setting (--journal-argument-index): the item {item:?}");
        assert!(
            stderr.contains(&message) && stderr.contains(why),
            "{setting}: {stderr}"
        );
    }
}

#[test]
fn children_pages_and_fixed_observations() {
    let (_labd, j) = start("children");
    let parent = j.child(&j.root, "parent");
    let mut created = Vec::new();
    for (i, key) in ["c0", "c1", "c2", "c3", "c4"].iter().enumerate() {
        // Interleave ordinary entries: they are nonmatches, never children.
        j.append(
            &parent,
            &[
                fact("noise", vec![V::Int(i as i128)]),
                fact("noise", vec![]),
            ],
        );
        created.push(j.create(&parent, key));
    }
    let expected: Vec<Value> = created
        .iter()
        .zip(["c0", "c1", "c2", "c3", "c4"])
        .map(|(c, key)| json!({ "key": key, "space": c["child"], "created_at": c["parent_entry"] }))
        .collect();
    let cutoff = j.head(&parent);
    let (through, all) = j.children_all(&parent, None);
    assert_eq!(through, cutoff);
    assert_eq!(all, expected);
    for limit in [1, 2, 3, 128] {
        let (_, paged) = j.children_all(&parent, Some(limit));
        assert_eq!(paged, expected, "limit {limit}");
    }

    // A later creation never enters an earlier observation.
    let first = j.ok("children", &json!({ "space": parent, "limit": 2 }));
    assert_eq!(first["through"], cutoff);
    let cursor = first["next_cursor"].as_str().unwrap().to_string();
    let late = j.create(&parent, "late");
    let mut body = json!({ "space": parent, "cursor": cursor, "limit": 128 });
    let mut rest = Vec::new();
    loop {
        let page = j.ok("children", &body);
        assert_eq!(page["through"], cutoff);
        rest.extend(page["children"].as_array().unwrap().iter().cloned());
        match page.get("next_cursor") {
            Some(next) => body["cursor"] = next.clone(),
            None => break,
        }
    }
    let mut observed: Vec<Value> = first["children"].as_array().unwrap().clone();
    observed.extend(rest);
    assert_eq!(observed, expected);
    // Repeating the cursor's own cutoff is fine; another one is not.
    let again = j.ok(
        "children",
        &json!({ "space": parent, "cursor": cursor, "through": cutoff }),
    );
    assert_eq!(again["through"], cutoff);
    let now = j.head(&parent);
    assert_invalid(
        &j.post(
            "children",
            &json!({ "space": parent, "cursor": cursor, "through": now }),
        ),
        Some("through"),
    );
    let (through, current) = j.children_all(&parent, None);
    assert_eq!(through, now);
    assert_eq!(current.len(), 6);
    assert_eq!(current[5]["space"], late["child"]);

    // An explicit past cutoff shows the children created by then.
    let at_c1 = created[1]["parent_cutoff"].as_u64().unwrap();
    let page = j.ok("children", &json!({ "space": parent, "through": at_c1 }));
    assert_eq!(page["through"], at_c1);
    assert_eq!(page["children"], json!(expected[..2]));
    let page = j.ok("children", &json!({ "space": parent, "through": null }));
    assert_eq!(page["through"], now);
    let page = j.ok("children", &json!({ "space": parent, "through": 0 }));
    assert_eq!(page["children"], json!([]));
    // Interior and future positions are refused, never rounded.
    let interior = at_c1 + 1; // the first of a two-fact batch
    assert_invalid(
        &j.post("children", &json!({ "space": parent, "through": interior })),
        Some("through"),
    );
    assert_invalid(
        &j.post("children", &json!({ "space": parent, "through": now + 1 })),
        Some("through"),
    );

    // Cursors are bound to their space, sealed, and bounded.
    let other = j.child(&j.root, "other");
    j.create(&other, "x");
    assert_invalid(
        &j.post("children", &json!({ "space": other, "cursor": cursor })),
        Some("cursor"),
    );
    for forged in [
        cursor[..cursor.len() - 1].to_string(),
        format!("{cursor}A"),
        flip_char(&cursor, cursor.len() / 2),
        flip_char(&cursor, 0),
        "not a cursor".to_string(),
        String::new(),
    ] {
        assert_invalid(
            &j.post("children", &json!({ "space": parent, "cursor": forged })),
            Some("cursor"),
        );
    }
    j.post(
        "children",
        &json!({ "space": parent, "cursor": "A".repeat(4097) }),
    )
    .assert_error(413, "limit_exceeded");
    assert_invalid(
        &j.post(
            "children",
            &json!({ "space": parent, "cursor": "A".repeat(4096) }),
        ),
        Some("cursor"),
    );
    j.post("children", &json!({ "space": parent, "limit": 129 }))
        .assert_error(413, "limit_exceeded");

    // A childless space: an empty list with its cutoff.
    let leaf = sref(&created[0]["child"]);
    j.append(&leaf, &[fact("only", vec![])]);
    let page = j.ok("children", &json!({ "space": leaf }));
    assert_eq!(page, json!({ "space": leaf, "through": 1, "children": [] }));
    let unknown =
        json!({ "root_id": leaf["root_id"], "space_id": format!("spc_{}", "b".repeat(32)) });
    j.post("children", &json!({ "space": unknown }))
        .assert_error(404, "not_found");
    assert_invalid(
        &j.post("children", &json!({ "space": leaf, "limit": "1" })),
        Some("limit"),
    );
    assert_invalid(
        &j.post("children", &json!({ "space": leaf, "through": -1 })),
        Some("through"),
    );
}

/// `s` with the character at `index` replaced by another one of the
/// URL-safe base64 alphabet.
fn flip_char(s: &str, index: usize) -> String {
    let mut chars: Vec<char> = s.chars().collect();
    chars[index] = if chars[index] == 'A' { 'B' } else { 'A' };
    chars.into_iter().collect()
}

#[test]
fn a_cursor_from_another_instance_is_foreign() {
    let (_labd_a, a) = start("foreign-a");
    let (_labd_b, b) = start("foreign-b");
    assert_ne!(
        a.identity["journal_instance_id"],
        b.identity["journal_instance_id"]
    );
    for j in [&a, &b] {
        for key in ["x", "y"] {
            j.create(&j.root, key);
        }
    }
    let page = a.ok("children", &json!({ "space": a.root, "limit": 1 }));
    let cursor = page["next_cursor"].clone();
    assert!(cursor.is_string());
    assert_invalid(
        &b.post("children", &json!({ "space": b.root, "cursor": cursor })),
        Some("cursor"),
    );
    // The query cursor of one instance is foreign to the other, too.
    let query = a.ok("query", &json!({ "space": a.root, "limit": 1 }));
    let query_cursor = query["next_cursor"].clone();
    assert!(query_cursor.is_string());
    let b_query = b.ok("query", &json!({ "space": b.root, "limit": 1 }));
    assert_invalid(
        &b.post("query", &json!({ "space": b.root, "snapshot": b_query["snapshot"], "cursor": query_cursor, "limit": 1 })),
        Some("cursor"),
    );
    // A children cursor is no query cursor.
    assert_invalid(
        &a.post(
            "query",
            &json!({ "space": a.root, "snapshot": query["snapshot"], "cursor": cursor }),
        ),
        Some("cursor"),
    );
}

#[test]
fn resolve_forms() {
    let (_labd, j) = start("resolve");
    let root_id = j.root["root_id"].clone();
    let a = j.create(&j.root, "a");
    let b = j.create(&sref(&a["child"]), "b");
    let path = |p: Value| j.ok("resolve", &json!({ "root_id": root_id, "path": p }));
    assert_eq!(path(json!(["a"]))["space"], a["child"]);
    assert_eq!(path(json!(["a", "b"]))["space"], b["child"]);
    assert_eq!(path(json!(["b"])), json!({ "space": null }));
    assert_eq!(path(json!(["a", "b", "c"])), json!({ "space": null }));
    assert_eq!(path(json!(["missing", "b"])), json!({ "space": null }));
    assert_eq!(path(json!(["A"])), json!({ "space": null }));
    // Resolution never creates: the path is still free.
    let c = j.create(&sref(&b["child"]), "c");
    assert_eq!(path(json!(["a", "b", "c"]))["space"], c["child"]);
    assert_eq!(
        j.ok("resolve", &json!({ "space": sref(&c["child"]) }))["space"],
        c["child"]
    );

    let unknown_root = format!("rt_{}", "a".repeat(32));
    j.post("resolve", &json!({ "root_id": unknown_root, "path": [] }))
        .assert_error(404, "not_found");
    j.post(
        "resolve",
        &json!({ "root_id": unknown_root, "path": ["a"] }),
    )
    .assert_error(404, "not_found");
    let unknown = json!({ "root_id": root_id, "space_id": format!("spc_{}", "a".repeat(32)) });
    j.post("resolve", &json!({ "space": unknown }))
        .assert_error(404, "not_found");
    let wrong_root = json!({ "root_id": unknown_root, "space_id": a["child"]["space_id"] });
    j.post("resolve", &json!({ "space": wrong_root }))
        .assert_error(404, "not_found");

    // Exactly one form.
    for body in [
        json!({}),
        json!({ "space": j.root, "root_id": root_id, "path": [] }),
        json!({ "space": j.root, "path": [] }),
        json!({ "space": j.root, "root_id": root_id }),
        json!({ "root_id": root_id }),
        json!({ "path": [] }),
    ] {
        assert_invalid(&j.post("resolve", &body), None);
    }
    assert_invalid(
        &j.post("resolve", &json!({ "root_id": root_id, "path": "a" })),
        Some("path"),
    );
    assert_invalid(
        &j.post("resolve", &json!({ "root_id": root_id, "path": null })),
        Some("path"),
    );
    assert_invalid(
        &j.post("resolve", &json!({ "root_id": root_id, "path": ["a/b"] })),
        Some("path[0]"),
    );
    assert_invalid(
        &j.post("resolve", &json!({ "root_id": root_id, "path": ["a", ""] })),
        Some("path[1]"),
    );
    assert_invalid(
        &j.post("resolve", &json!({ "root_id": root_id, "path": ["a", 1] })),
        Some("path[1]"),
    );
    assert_invalid(
        &j.post("resolve", &json!({ "root_id": "rt_x", "path": [] })),
        Some("root_id"),
    );
}

/// The subtree used by the query tests:
/// scope → a → a1 → a1x, scope → b; created in the order a, b, a1, a1x.
struct Tree {
    scope: Value,
    spaces: Vec<Value>, // Space objects in depth-first preorder
}

fn build_tree(j: &Journal) -> Tree {
    let scope = j.create(&j.root, "scope")["child"].clone();
    j.append(
        &sref(&scope),
        &[fact("s", vec![V::Int(1)]), fact("s", vec![V::Int(2)])],
    );
    let a = j.create(&sref(&scope), "a")["child"].clone();
    j.append(&sref(&a), &[fact("a", vec![V::Int(1)])]);
    let b = j.create(&sref(&scope), "b")["child"].clone();
    j.append(
        &sref(&b),
        &[fact("b", vec![V::Int(1)]), fact("b", vec![V::Int(2)])],
    );
    j.append(&sref(&scope), &[fact("s", vec![V::Int(3)])]);
    let a1 = j.create(&sref(&a), "a1")["child"].clone();
    j.append(&sref(&a1), &[fact("a1", vec![V::Int(1)])]);
    let a1x = j.create(&sref(&a1), "x")["child"].clone();
    // a1x stays empty.
    Tree {
        scope: sref(&scope),
        spaces: vec![scope, a, a1, a1x, b],
    }
}

#[test]
fn query_captures_a_preorder_manifest_and_pages_over_it() {
    let (_labd, j) = start("query");
    let tree = build_tree(&j);
    let cutoffs: Vec<u64> = tree.spaces.iter().map(|s| j.head(&sref(s))).collect();
    let manifest_spaces: Vec<Value> = tree
        .spaces
        .iter()
        .zip(&cutoffs)
        .map(|(s, c)| json!({ "space": s, "through": c }))
        .collect();

    let first = j.ok("query", &json!({ "space": tree.scope }));
    let snapshot = first["snapshot"].clone();
    assert_eq!(
        snapshot,
        json!({ "scope": tree.scope, "max_depth": MAX_POSITION, "spaces": manifest_spaces })
    );
    assert!(first.get("next_cursor").is_none());
    let entries = first["entries"].as_array().unwrap().clone();
    // Manifest order, then position order, every entry of every prefix.
    let mut expected = Vec::new();
    for (space, cutoff) in tree.spaces.iter().zip(&cutoffs) {
        let (through, all) = j.read_all(&sref(space), None, None);
        assert_eq!(through, *cutoff);
        expected.extend(all);
    }
    assert_eq!(entries, expected);

    // Paged, with the returned snapshot and cursor.
    for limit in [1, 2, 5] {
        let (paged_snapshot, paged, pages) =
            j.query_all(json!({ "space": tree.scope, "limit": limit }));
        assert_eq!(paged_snapshot, snapshot);
        assert_eq!(paged, expected, "limit {limit}");
        assert!(pages as u64 >= expected.len() as u64 / limit);
    }

    // Growth after the capture stays out of the snapshot.
    let page = j.ok("query", &json!({ "space": tree.scope, "limit": 3 }));
    let cursor = page["next_cursor"].clone();
    j.append(&sref(&tree.spaces[1]), &[fact("late", vec![])]);
    let late_child = j.create(&tree.scope, "late");
    let mut rest = page["entries"].as_array().unwrap().clone();
    let mut body =
        json!({ "space": tree.scope, "snapshot": snapshot, "cursor": cursor, "limit": 3 });
    loop {
        let page = j.ok("query", &body);
        assert_eq!(page["snapshot"], snapshot);
        rest.extend(page["entries"].as_array().unwrap().iter().cloned());
        match page.get("next_cursor") {
            Some(next) => body["cursor"] = next.clone(),
            None => break,
        }
    }
    assert_eq!(rest, expected);
    // A retained manifest restarts without a cursor, with the same results.
    let (_, again, _) = j.query_all(json!({ "space": tree.scope, "snapshot": snapshot }));
    assert_eq!(again, expected);
    // An explicit max_depth equal to the manifest's is accepted.
    let (_, again, _) = j.query_all(
        json!({ "space": tree.scope, "snapshot": snapshot, "max_depth": MAX_POSITION, "limit": 4 }),
    );
    assert_eq!(again, expected);
    // A fresh capture sees the growth.
    let fresh = j.ok("query", &json!({ "space": tree.scope, "max_depth": null }));
    let spaces = fresh["snapshot"]["spaces"].as_array().unwrap();
    assert_eq!(spaces.len(), 6);
    assert_eq!(spaces[5]["space"], late_child["child"]);
    assert_eq!(spaces[0]["through"], late_child["parent_cutoff"]);

    // Depth bounds.
    let depth = |d: u64| -> Vec<Value> {
        let result = j.ok("query", &json!({ "space": tree.scope, "max_depth": d }));
        assert_eq!(result["snapshot"]["max_depth"], d);
        result["snapshot"]["spaces"]
            .as_array()
            .unwrap()
            .iter()
            .map(|s| s["space"]["space_id"].clone())
            .collect()
    };
    let id = |i: usize| tree.spaces[i]["space_id"].clone();
    assert_eq!(depth(0), [id(0)]);
    assert_eq!(
        depth(1),
        [id(0), id(1), id(4), late_child["child"]["space_id"].clone()]
    );
    assert_eq!(
        depth(2),
        [
            id(0),
            id(1),
            id(2),
            id(4),
            late_child["child"]["space_id"].clone()
        ]
    );
    let shallow = j.ok("query", &json!({ "space": tree.scope, "max_depth": 0 }));
    let scope_entries = shallow["entries"].as_array().unwrap();
    assert!(scope_entries
        .iter()
        .all(|e| e["ref"]["space_id"] == tree.scope["space_id"]));
    assert_eq!(scope_entries.len() as u64, j.head(&tree.scope));
    // A query over a leaf, and over an empty leaf.
    let leaf = j.ok("query", &json!({ "space": sref(&tree.spaces[3]) }));
    assert_eq!(leaf["entries"], json!([]));
    assert_eq!(
        leaf["snapshot"]["spaces"],
        json!([{ "space": tree.spaces[3], "through": 0 }])
    );
    assert!(leaf.get("next_cursor").is_none());
}

#[test]
fn query_filters_and_continuation_rules() {
    let (_labd, j) = start("query-rules");
    let tree = build_tree(&j);
    let creations = json!({ "origin": "create" });
    let (snapshot, entries, _) =
        j.query_all(json!({ "space": tree.scope, "filter": creations, "limit": 1 }));
    // The creation entries: in the scope (a, b), in a (a1), in a1 (x); in manifest order.
    let keys: Vec<(Value, u64)> = entries
        .iter()
        .map(|e| {
            assert_eq!(e["origin"], "create");
            assert_eq!(e["batch"]["first"], e["ref"]["position"]);
            (
                e["ref"]["space_id"].clone(),
                e["ref"]["position"].as_u64().unwrap(),
            )
        })
        .collect();
    let id = |i: usize| tree.spaces[i]["space_id"].clone();
    assert_eq!(
        keys.iter().map(|k| k.0.clone()).collect::<Vec<_>>(),
        [id(0), id(0), id(1), id(2)]
    );
    let s1 = json!({ "predicate": b64(&encode(&label("s"))) , "arguments": [{ "index": 0, "equals": b64(&encode(&V::Int(3))) }] });
    let (_, only, _) =
        j.query_all(json!({ "space": tree.scope, "filter": s1, "snapshot": snapshot }));
    assert_eq!(only.len(), 1);
    assert_eq!(only[0]["fact"], b64(&fact("s", vec![V::Int(3)])));

    // Continuations.
    let page = j.ok(
        "query",
        &json!({ "space": tree.scope, "filter": creations, "limit": 1 }),
    );
    let snapshot = page["snapshot"].clone();
    let cursor = page["next_cursor"].clone();
    assert!(cursor.is_string());
    let continue_with = |changes: Value| -> Response {
        let mut body = json!({ "space": tree.scope, "filter": creations, "snapshot": snapshot, "cursor": cursor, "limit": 1 });
        for (k, v) in changes.as_object().unwrap() {
            if v.is_null() && k != "max_depth" {
                body.as_object_mut().unwrap().remove(k);
            } else {
                body[k] = v.clone();
            }
        }
        j.post("query", &body)
    };
    assert_eq!(continue_with(json!({})).status, 200);
    // The same filter spelled with its defaults has the same digest.
    let spelled = continue_with(
        json!({ "filter": { "origin": "create", "positions": { "after": 0, "through": null } } }),
    );
    assert_eq!(spelled.status, 200, "{}", text_of(&spelled));
    assert_eq!(
        spelled.json()["entries"],
        continue_with(json!({})).json()["entries"]
    );
    assert_eq!(continue_with(json!({ "max_depth": null })).status, 200);
    // Disagreements are invalid.
    assert_invalid(
        &continue_with(json!({ "filter": { "origin": "append" } })),
        None,
    );
    assert_invalid(&continue_with(json!({ "filter": null })), None);
    assert_invalid(&continue_with(json!({ "max_depth": 1 })), None);
    assert_invalid(&continue_with(json!({ "snapshot": null })), None);
    assert_invalid(
        &continue_with(json!({ "space": sref(&tree.spaces[1]) })),
        None,
    );
    let cursor_text = cursor.as_str().unwrap();
    for forged in [
        flip_char(cursor_text, cursor_text.len() / 2),
        cursor_text[..cursor_text.len() / 2].to_string(),
        format!("{cursor_text}AAAA"),
    ] {
        assert_invalid(&continue_with(json!({ "cursor": forged })), Some("cursor"));
    }
    continue_with(json!({ "cursor": "A".repeat(4097) })).assert_error(413, "limit_exceeded");
    // A cursor of another snapshot of the same scope does not fit this one.
    j.append(&tree.scope, &[fact("grow", vec![])]);
    let newer = j.ok(
        "query",
        &json!({ "space": tree.scope, "filter": creations, "limit": 1 }),
    );
    assert_ne!(newer["snapshot"], snapshot);
    assert_invalid(
        &continue_with(json!({ "snapshot": newer["snapshot"] })),
        None,
    );
    assert_invalid(
        &j.post(
            "query",
            &json!({ "space": tree.scope, "filter": creations, "cursor": cursor }),
        ),
        None,
    );

    // Submitted manifests are validated.
    let spaces = snapshot["spaces"].as_array().unwrap().clone();
    let with_spaces = |list: Vec<Value>| json!({ "scope": tree.scope, "max_depth": MAX_POSITION, "spaces": list });
    let mut missing_child = spaces.clone();
    missing_child.remove(4);
    let mut swapped = spaces.clone();
    swapped.swap(1, 4);
    let mut duplicated = spaces.clone();
    duplicated.push(spaces[4].clone());
    let mut wrong_path = spaces.clone();
    wrong_path[1]["space"]["path"] = json!(["elsewhere"]);
    let mut interior = spaces.clone();
    interior[4]["through"] = json!(1); // b's first batch is positions 1..2
    let mut future = spaces.clone();
    future[1]["through"] = json!(1000);
    let mut scope_missing = spaces.clone();
    scope_missing.remove(0);
    let outsider = j.create(&j.root, "outsider")["child"].clone();
    let mut out_of_scope = spaces.clone();
    out_of_scope.push(json!({ "space": outsider, "through": 0 }));
    for bad in [
        with_spaces(missing_child),
        with_spaces(swapped),
        with_spaces(duplicated),
        with_spaces(wrong_path),
        with_spaces(interior),
        with_spaces(future),
        with_spaces(scope_missing),
        with_spaces(out_of_scope),
        with_spaces(vec![]),
        json!({ "scope": tree.scope, "max_depth": 0, "spaces": spaces }),
        json!({ "scope": tree.scope, "spaces": spaces }),
        json!({ "scope": tree.scope, "max_depth": MAX_POSITION, "spaces": spaces, "digest": "x" }),
    ] {
        assert_invalid(
            &j.post("query", &json!({ "space": tree.scope, "snapshot": bad })),
            None,
        );
    }
    // A consistent manifest with older cutoffs is accepted: the scope before
    // its last append (b's creation was then visible, a1 not yet in a).
    let mut older = spaces.clone();
    let scope_cutoff_before = older[0]["through"].as_u64().unwrap() - 1;
    older[0]["through"] = json!(scope_cutoff_before);
    let older = with_spaces(older);
    let result = j.ok("query", &json!({ "space": tree.scope, "snapshot": older }));
    assert_eq!(result["snapshot"], older);
    assert!(result["entries"]
        .as_array()
        .unwrap()
        .iter()
        .all(|e| e["ref"]["space_id"] != tree.scope["space_id"]
            || e["ref"]["position"].as_u64().unwrap() <= scope_cutoff_before));

    // Unknown scope; limits.
    let unknown =
        json!({ "root_id": tree.scope["root_id"], "space_id": format!("spc_{}", "9".repeat(32)) });
    j.post("query", &json!({ "space": unknown }))
        .assert_error(404, "not_found");
    j.post("query", &json!({ "space": tree.scope, "limit": 129 }))
        .assert_error(413, "limit_exceeded");
    for (member, raw) in [
        ("max_depth", "-1"),
        ("max_depth", "1.5"),
        ("limit", "1e1"),
        ("max_depth", "\"0\""),
    ] {
        let text = format!(r#"{{"space":{},"{member}":{raw}}}"#, tree.scope);
        assert_invalid(&j.raw("query", &text), Some(member));
    }
}

#[test]
fn json_bodies_are_strict() {
    let (_labd, j) = start("strict");
    let root = j.root.to_string();
    let head = |body: &[u8]| {
        let response = j.client.post("/v1/head", Some("application/json"), body);
        assert_identity(&response);
        response
    };
    let good = format!(r#"{{"space":{root}}}"#);
    assert_eq!(head(good.as_bytes()).status, 200);
    assert_eq!(
        head(format!(" \r\n\t{good} \n\t\r ").as_bytes()).status,
        200
    );
    let space_id = j.root["space_id"].as_str().unwrap();
    let root_id = j.root["root_id"].as_str().unwrap();
    let bad_bodies = [
        String::new(),
        " ".to_string(),
        "null".to_string(),
        "[]".to_string(),
        format!("[{good}]"),
        "\"x\"".to_string(),
        format!("{good} x"),
        format!("{good}{{}}"),
        format!("{good},"),
        format!(r#"{{"space":{root},"space":{root}}}"#),
        format!(
            r#"{{"space":{{"root_id":"{root_id}","space_id":"{space_id}","space_id":"{space_id}"}}}}"#
        ),
        format!(r#"{{"Space":{root}}}"#),
        format!(r#"{{"SPACE":{root}}}"#),
        format!(r#"{{"space":{{"Root_id":"{root_id}","space_id":"{space_id}"}}}}"#),
        format!(r#"{{"space":{root},"extra":null}}"#),
        format!(r#"{{"space":{root}"#),
        format!(r#"{{"space":{root},}}"#),
        format!(r#"{{'space':{root}}}"#),
        format!(r#"{{"space":{{"root_id":"{root_id}","space_id":"{space_id}\ud800"}}}}"#),
        format!(r#"{{"space":{{"root_id":"{root_id}","space_id":"\udc00{space_id}"}}}}"#),
    ];
    for body in &bad_bodies {
        assert_invalid(&head(body.as_bytes()), None);
    }
    // Malformed UTF-8 inside a string and outside one.
    let mut bytes =
        format!(r#"{{"parent":{root},"operation_id":"{}","key":"a"#, op_id()).into_bytes();
    bytes.extend(b"\xff\xfeb\"}");
    let response = j
        .client
        .post("/v1/create", Some("application/json"), &bytes);
    assert_identity(&response);
    assert_invalid(&response, None);
    assert_invalid(&head(b"{\xff}"), None);
    // A lone surrogate in a create key, and an escaped valid pair.
    let create = |key_json: &str| {
        let body = format!(
            r#"{{"parent":{root},"key":{key_json},"operation_id":"{}"}}"#,
            op_id()
        );
        j.raw("create", &body)
    };
    assert_invalid(&create(r#""\ud83d""#), None);
    assert_invalid(&create(r#""a\ude00""#), None);
    let pair = create(r#""\ud83d\ude00""#);
    assert_eq!(pair.status, 201, "{}", text_of(&pair));
    assert_eq!(pair.json()["child"]["path"], json!(["\u{1F600}"]));
    // Duplicate members deeper in a body, and case variants of every member.
    let fact_text = b64(&fact("p", vec![]));
    let append = format!(
        r#"{{"space":{root},"facts":["{fact_text}"],"operation_id":"o","operation_id":"p"}}"#
    );
    assert_invalid(&j.raw("append", &append), None);
    for member in [
        "Space",
        "Facts",
        "Operation_id",
        "OPERATION_ID",
        "Expected_cutoff",
    ] {
        let mut body = json!({ "space": j.root, "facts": [fact_text], "operation_id": op_id() });
        let lower = member.to_lowercase();
        let value = body
            .as_object_mut()
            .unwrap()
            .remove(&lower)
            .unwrap_or(json!(0));
        body[member] = value;
        assert_invalid(&j.post("append", &body), None);
    }
    let deep = format!(r#"{{"space":{root},"filter":{{"origin":"append","origin":"create"}}}}"#);
    assert_invalid(&j.raw("read", &deep), None);

    // Content-Type: absent, or application/json with an optional UTF-8 charset.
    for content_type in [
        None,
        Some("application/json"),
        Some("application/json; charset=utf-8"),
        Some("application/json;charset=UTF-8"),
    ] {
        let response = j.client.post("/v1/head", content_type, good.as_bytes());
        assert_identity(&response);
        assert_eq!(response.status, 200, "{content_type:?}");
    }
    for content_type in [
        "text/plain",
        "application/x-www-form-urlencoded",
        "application/json; charset=latin1",
        "application/json; charset=utf-16",
        "application/json; boundary=x",
        "application/json; charset=utf-8; q=1",
        "application/json-patch+json",
        "application/jsonx",
        "json",
        "application/json\ncontent-type: application/json",
    ] {
        let response = j
            .client
            .post("/v1/head", Some(content_type), good.as_bytes());
        assert_identity(&response);
        assert_invalid(&response, None);
    }
}

#[test]
fn envelopes_over_eight_mebibytes_are_413_invalid() {
    let (_labd, j) = start("envelope");
    let mut body = format!(r#"{{"space":{}}}"#, j.root);
    body.push_str(&" ".repeat(8 * MIB - body.len()));
    assert_eq!(body.len(), 8 * MIB);
    let response = j.client.post_json("/v1/head", &body);
    assert_identity(&response);
    assert_eq!(response.status, 200, "{}", text_of(&response));
    body.push(' ');
    for operation in ["head", "append", "create", "query"] {
        let response = j.client.post_json(&format!("/v1/{operation}"), &body);
        assert_identity(&response);
        response.assert_error(413, "invalid");
    }
    // A large append inside the envelope is judged by its own bounds.
    let facts: Vec<Vec<u8>> = (0..5).map(|i| fact_of_size(MIB, i)).collect();
    let request =
        json!({ "space": j.root, "facts": encoded(&facts), "operation_id": op_id() }).to_string();
    assert!(request.len() < 8 * MIB);
    j.raw("append", &request)
        .assert_error(413, "limit_exceeded");
}

#[test]
fn concurrent_appends_occupy_contiguous_ranges() {
    let (_labd, j) = start("race-append");
    let space = j.child(&j.root, "race");
    const THREADS: i128 = 16;
    const ROUNDS: i128 = 10;
    let results: Vec<(u64, u64, Vec<String>)> = std::thread::scope(|scope| {
        let workers: Vec<_> = (0..THREADS)
            .map(|t| {
                let j = &j;
                let space = &space;
                scope.spawn(move || {
                    (0..ROUNDS)
                        .map(|r| {
                            let size = ((t + r) % 5 + 1) as usize;
                            let facts: Vec<Vec<u8>> = (0..size)
                                .map(|k| {
                                    fact("race", vec![V::Int(t), V::Int(r), V::Int(k as i128)])
                                })
                                .collect();
                            let result = j.append(space, &facts);
                            let first = result["first"].as_u64().unwrap();
                            let last = result["last"].as_u64().unwrap();
                            assert_eq!(last - first + 1, size as u64);
                            assert_eq!(result["cutoff"], last);
                            (first, last, encoded(&facts))
                        })
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        workers
            .into_iter()
            .flat_map(|w| w.join().unwrap())
            .collect()
    });
    let mut ranges: Vec<(u64, u64)> = results.iter().map(|(f, l, _)| (*f, *l)).collect();
    ranges.sort_unstable();
    let mut next = 1;
    for (first, last) in &ranges {
        assert_eq!(*first, next, "ranges overlap or leave a gap: {ranges:?}");
        next = last + 1;
    }
    assert_eq!(j.head(&space), next - 1);
    let (_, entries) = j.read_all(&space, None, Some(128));
    for (first, last, facts) in &results {
        let batch = &entries[*first as usize - 1..*last as usize];
        assert_eq!(facts_of(batch), *facts);
        for entry in batch {
            assert_eq!(entry["batch"], json!({ "first": first, "last": last }));
        }
    }
}

#[test]
fn conditional_appends_race_without_lost_updates() {
    let (_labd, j) = start("race-conditional");
    let space = j.child(&j.root, "race");
    const THREADS: u64 = 8;
    const WINS: u64 = 5;
    let results: Vec<(u64, u64, u64)> = std::thread::scope(|scope| {
        let workers: Vec<_> = (0..THREADS)
            .map(|t| {
                let j = &j;
                let space = &space;
                scope.spawn(move || {
                    let mut wins = Vec::new();
                    let mut expected = j.head(space);
                    let mut attempts = 0;
                    while (wins.len() as u64) < WINS {
                        attempts += 1;
                        assert!(attempts < 10_000, "no progress");
                        let facts = vec![fact(
                            "cas",
                            vec![V::Int(t.into()), V::Int(wins.len() as i128)],
                        )];
                        let body = json!({
                            "space": space, "facts": encoded(&facts),
                            "operation_id": op_id(), "expected_cutoff": expected,
                        });
                        let response = j.post("append", &body);
                        match response.status {
                            201 => {
                                let result = response.json();
                                assert_eq!(result["first"], expected + 1);
                                wins.push((expected, result["first"].as_u64().unwrap(), t));
                                expected = result["cutoff"].as_u64().unwrap();
                            }
                            409 => {
                                let error = response.json();
                                assert_eq!(error["error"], "conflict", "{error}");
                                assert_eq!(error["details"]["expected_cutoff"], expected);
                                let actual = error["details"]["actual_cutoff"].as_u64().unwrap();
                                assert!(actual > expected, "the cutoff only grows");
                                expected = actual;
                            }
                            other => panic!("unexpected {other}: {}", text_of(&response)),
                        }
                    }
                    wins
                })
            })
            .collect();
        workers
            .into_iter()
            .flat_map(|w| w.join().unwrap())
            .collect()
    });
    let mut firsts: Vec<u64> = results.iter().map(|(_, first, _)| *first).collect();
    firsts.sort_unstable();
    assert_eq!(firsts, (1..=THREADS * WINS).collect::<Vec<_>>());
    assert_eq!(j.head(&space), THREADS * WINS);
}

#[test]
fn racing_creates_of_one_key_have_one_winner() {
    let (_labd, j) = start("race-create");
    let parent = j.child(&j.root, "parent");
    const THREADS: usize = 16;
    let outcomes: Vec<(u16, Value)> = std::thread::scope(|scope| {
        let workers: Vec<_> = (0..THREADS)
            .map(|t| {
                let j = &j;
                let parent = &parent;
                scope.spawn(move || {
                    // Half the racers retry one operation; the rest are distinct.
                    let id = if t % 2 == 0 {
                        "shared".to_string()
                    } else {
                        format!("own-{t}")
                    };
                    let response = j.post(
                        "create",
                        &json!({ "parent": parent, "key": "contested", "operation_id": id }),
                    );
                    (response.status, response.json())
                })
            })
            .collect();
        workers.into_iter().map(|w| w.join().unwrap()).collect()
    });
    let winners: Vec<&Value> = outcomes
        .iter()
        .filter(|(s, _)| *s == 201)
        .map(|(_, b)| b)
        .collect();
    assert_eq!(winners.len(), 1, "{outcomes:?}");
    let winner = winners[0];
    for (status, body) in &outcomes {
        match status {
            201 => {}
            200 => {
                assert_eq!(body["replayed"], true);
                assert_eq!(body["child"], winner["child"]);
                assert_eq!(body["parent_entry"], winner["parent_entry"]);
            }
            409 => assert_eq!(body["error"], "exists", "{body}"),
            other => panic!("unexpected {other}: {body}"),
        }
    }
    let (_, children) = j.children_all(&parent, None);
    assert_eq!(children.len(), 1);
    assert_eq!(children[0]["space"], winner["child"]);
    assert_eq!(j.head(&parent), 1);
}

/// One append a crash client sent: its request and, when acknowledged, its
/// bounds.
struct Sent {
    body: Value,
    facts: Vec<String>,
    acknowledged: Option<(u64, u64)>,
    in_flight: bool,
}

#[test]
fn kill_9_keeps_every_acknowledged_batch() {
    a_crash_keeps_every_acknowledged_batch(Crash::Kill9);
}

#[test]
fn a_power_cut_keeps_every_acknowledged_batch() {
    a_crash_keeps_every_acknowledged_batch(Crash::PowerCut);
}

fn a_crash_keeps_every_acknowledged_batch(crash: Crash) {
    until_one_in_flight("append", || crash_under_appends(crash));
}

/// Clients appending batches until the crash; after it the journal is a
/// sequence of whole batches holding every acknowledged one, and a retry
/// settles each batch once. Answers whether an append was in flight.
fn crash_under_appends(crash: Crash) -> bool {
    let mut labd = Crashable::start("crash", &[], crash);
    let j = Journal::new(&labd);
    let space = j.child(&j.root, "crash");
    let kept = j.create(&j.root, "kept");
    let address = j.client.address;
    const CLIENTS: u64 = 8;
    let sent: Mutex<Vec<Sent>> = Mutex::new(Vec::new());
    let acknowledged = AtomicUsize::new(0);
    let threshold = random_threshold(40, 200);
    let watch = labd.watch();
    std::thread::scope(|scope| {
        for c in 0..CLIENTS {
            let (sent, acknowledged, space, watch) = (&sent, &acknowledged, &space, &watch);
            scope.spawn(move || {
                for n in 0u64.. {
                    let size = (n % 4 + 1) as i128;
                    let facts: Vec<String> = (0..size)
                        .map(|k| b64(&fact("crash", vec![V::Int(c.into()), V::Int(n.into()), V::Int(k), V::Int(size)])))
                        .collect();
                    let body = json!({ "space": space, "facts": facts, "operation_id": format!("c{c}-{n}") });
                    let request = post_bytes("/v1/append", Some("application/json"), body.to_string().as_bytes());
                    let exchange = watch.exchange(address, &request);
                    let acked = exchange.answered(201).map(|response| {
                        let result = response.json();
                        (result["first"].as_u64().unwrap(), result["last"].as_u64().unwrap())
                    });
                    let in_flight = exchange.in_flight(201);
                    sent.lock().unwrap().push(Sent { body, facts, acknowledged: acked, in_flight });
                    if acked.is_none() {
                        // The service went away (or refused): this client stops.
                        return;
                    }
                    acknowledged.fetch_add(1, Ordering::SeqCst);
                }
            });
        }
        crash_under_load(&mut labd, &acknowledged, threshold);
    });
    labd.restart();
    let j = Journal::new(&labd);
    let sent = sent.into_inner().unwrap();
    assert!(sent.iter().filter(|s| s.acknowledged.is_some()).count() >= threshold);
    let caught = sent.iter().any(|s| s.in_flight);

    // The identity, the hierarchy and the creation survive.
    assert_eq!(
        j.ok(
            "resolve",
            &json!({ "root_id": j.root["root_id"], "path": ["kept"] })
        )["space"],
        kept["child"]
    );

    // The journal is a sequence of whole batches, each one request's facts.
    let (cutoff, entries) = j.read_all(&space, None, Some(128));
    assert_eq!(cutoff, j.head(&space));
    assert_eq!(positions(&entries), (1..=cutoff).collect::<Vec<_>>());
    let by_first_fact: HashMap<&str, &Sent> =
        sent.iter().map(|s| (s.facts[0].as_str(), s)).collect();
    let mut found: BTreeMap<String, (u64, u64)> = BTreeMap::new();
    let mut position = 1;
    while position <= cutoff {
        let entry = &entries[position as usize - 1];
        let first = entry["batch"]["first"].as_u64().unwrap();
        let last = entry["batch"]["last"].as_u64().unwrap();
        assert_eq!(
            first, position,
            "batches start where the previous one ended"
        );
        let batch = &entries[first as usize - 1..last as usize];
        let request = by_first_fact
            .get(batch[0]["fact"].as_str().unwrap())
            .unwrap_or_else(|| panic!("an entry no client sent: {}", batch[0]));
        assert_eq!(facts_of(batch), request.facts, "a partial or mixed batch");
        for entry in batch {
            assert_eq!(entry["batch"], json!({ "first": first, "last": last }));
            assert_eq!(entry["origin"], "append");
        }
        let id = request.body["operation_id"].as_str().unwrap().to_string();
        assert!(
            found.insert(id, (first, last)).is_none(),
            "a batch committed twice"
        );
        position = last + 1;
    }
    // Every acknowledged batch is there, at its positions, with its receipt.
    for s in &sent {
        let id = s.body["operation_id"].as_str().unwrap();
        let replay = j.post("append", &s.body);
        if let Some((first, last)) = s.acknowledged {
            assert_eq!(found.get(id), Some(&(first, last)), "{id} lost");
            assert_eq!(replay.status, 200, "{id}: {}", text_of(&replay));
            let result = replay.json();
            assert_eq!(result["replayed"], true);
            assert_eq!(
                (result["first"].as_u64(), result["last"].as_u64()),
                (Some(first), Some(last))
            );
        } else {
            // Unacknowledged: retrying the same operation ID settles it once.
            let result = replay.json();
            match replay.status {
                200 => {
                    let bounds = (
                        result["first"].as_u64().unwrap(),
                        result["last"].as_u64().unwrap(),
                    );
                    assert_eq!(found.get(id), Some(&bounds));
                }
                201 => assert!(
                    !found.contains_key(id),
                    "{id} was committed but not replayed"
                ),
                other => panic!("{id}: unexpected {other}: {}", text_of(&replay)),
            }
        }
    }
    // After the retries, each request is in the journal exactly once.
    let (_, entries) = j.read_all(&space, None, Some(128));
    let mut seen = HashSet::new();
    for entry in &entries {
        if entry["batch"]["first"] == entry["ref"]["position"] {
            assert!(
                seen.insert(entry["fact"].as_str().unwrap().to_string()),
                "a duplicated batch"
            );
        }
    }
    assert_eq!(seen.len(), sent.len());
    caught
}

#[test]
fn hot_swap_under_load_keeps_every_append() {
    let files = SwapFiles::new("journal");
    let labd = Labd::start(
        "journal-swap",
        &[
            "--services",
            "bytes,journal",
            "--journal-component",
            files.arg(),
        ],
    );
    let j = Journal::new(&labd);
    // The component this host serves (another host on its store, under
    // LAB_TEST_HOSTS=2, is not reloaded).
    let this_host = Client::of(j.client.address);
    let before = this_host.get("/describe").json()["component"].clone();
    let space = j.child(&j.root, "swap");
    // An append open across the reload: half its body is sent before.
    let held_facts = encoded(&[fact("held", vec![V::Int(0)])]);
    let held_body =
        json!({ "space": space, "facts": held_facts, "operation_id": op_id() }).to_string();
    let held = HalfSent::start(
        j.client.address,
        &post_bytes("/v1/append", Some("application/json"), held_body.as_bytes()),
        held_body.len(),
    );
    let appended = AtomicUsize::new(0);
    let across = across_reload(
        4,
        |w, n| {
            let facts = [fact("swap", vec![V::Int(w as i128), V::Int(n as i128)])];
            let result = j.append(&space, &facts);
            assert_eq!(result["first"], result["last"]);
            appended.fetch_add(1, Ordering::SeqCst);
        },
        || files.swap(labd.journal_management()),
    );
    assert!(across.overlapping > 0 && across.after > 0, "{across:?}");
    let finished = held.finish();
    assert_eq!(
        finished.status,
        201,
        "the append held across the reload: {}",
        text_of(&finished)
    );
    let after = this_host.get("/describe").json()["component"].clone();
    assert_eq!(after, name_of(&files.swapped));
    assert_ne!(before, after);
    // Every append is there once, each a whole batch, the held one too.
    let (cutoff, entries) = j.read_all(&space, None, Some(128));
    assert_eq!(positions(&entries), (1..=cutoff).collect::<Vec<_>>());
    let mut facts = facts_of(&entries);
    assert!(facts.contains(&held_facts[0]));
    let count = facts.len();
    facts.sort();
    facts.dedup();
    assert_eq!(facts.len(), count, "an append committed twice");
    assert_eq!(count, appended.into_inner() + 1);
}
