//! The journal's advance stream (`GET /advances` on its management
//! listener), which a coordination host of a split deployment follows:
//! one JSON line per durable advance, as commits happen.

use crate::support;
use crate::support::{Client, Labd};
use serde_json::{json, Value};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;

/// A follower of a journal's advance stream: the response head, then its
/// chunked body decoded line by line.
struct Follower {
    reader: BufReader<TcpStream>,
    head: String,
    lines: std::collections::VecDeque<String>,
    partial: String,
}

impl Follower {
    fn open(management: Client) -> Follower {
        let mut stream = management.connect();
        stream
            .write_all(b"GET /advances HTTP/1.1\r\nhost: test\r\n\r\n")
            .unwrap();
        let mut reader = BufReader::new(stream);
        let mut head = String::new();
        loop {
            let mut line = String::new();
            reader.read_line(&mut line).unwrap();
            if line == "\r\n" || line.is_empty() {
                break;
            }
            head.push_str(&line.to_ascii_lowercase());
        }
        Follower {
            reader,
            head,
            lines: Default::default(),
            partial: String::new(),
        }
    }

    /// The next line of the stream, as JSON.
    fn next(&mut self) -> Value {
        while self.lines.is_empty() {
            let mut size = String::new();
            self.reader.read_line(&mut size).unwrap();
            let size = usize::from_str_radix(size.trim(), 16).expect("a chunk size");
            assert!(size > 0, "the stream ended");
            let mut chunk = vec![0; size + 2];
            self.reader.read_exact(&mut chunk).unwrap();
            self.partial
                .push_str(std::str::from_utf8(&chunk[..size]).unwrap());
            while let Some(end) = self.partial.find('\n') {
                let line: String = self.partial.drain(..=end).collect();
                self.lines.push_back(line);
            }
        }
        serde_json::from_str(&self.lines.pop_front().unwrap()).unwrap()
    }
}

fn post(client: Client, route: &str, body: &Value) -> Value {
    let response = client.post_json(route, &body.to_string());
    assert!(
        response.status == 201 || response.status == 200,
        "{route}: {} {}",
        response.status,
        String::from_utf8_lossy(&response.body)
    );
    response.json()
}

#[test]
fn the_journal_streams_each_durable_advance_to_its_followers() {
    let labd = Labd::start("events-stream", &["--services", "bytes,journal"]);
    // The stream carries its own host's commits: every request goes to it
    // (across hosts, the store's channel carries them, events_shared.rs).
    let journal = Client::of(labd.journal().address);
    let identity = journal.get("/healthz").json()["identity"].clone();
    let root_id = identity["root_id"].as_str().unwrap().to_string();
    let root = json!({ "root_id": root_id, "space_id": identity["root_space_id"] });

    let mut follower = Follower::open(labd.journal_management());
    assert!(
        follower.head.starts_with("http/1.1 200"),
        "{}",
        follower.head
    );
    assert!(
        follower.head.contains("lab-service: journal"),
        "{}",
        follower.head
    );
    assert!(
        follower.head.contains("content-type: application/x-ndjson"),
        "{}",
        follower.head
    );
    let mut second = Follower::open(labd.journal_management());

    let created = post(
        journal,
        "/v1/create",
        &json!({ "parent": root, "key": "a", "operation_id": "c1" }),
    );
    let a = json!({ "root_id": root_id, "space_id": created["child"]["space_id"] });
    post(
        journal,
        "/v1/append",
        &json!({ "space": a, "facts": ["gmFwAQ==", "gmFwAQ=="], "operation_id": "a1" }),
    );
    // A replay advances nothing; the next commit's line follows directly.
    post(
        journal,
        "/v1/append",
        &json!({ "space": a, "facts": ["gmFwAQ==", "gmFwAQ=="], "operation_id": "a1" }),
    );
    post(
        journal,
        "/v1/append",
        &json!({ "space": a, "facts": ["gmFwAQ=="], "operation_id": "a2" }),
    );
    let expected = [
        json!({ "root_id": root_id, "space_id": root["space_id"], "path": [], "cutoff": 1 }),
        json!({ "root_id": root_id, "space_id": a["space_id"], "path": ["a"], "cutoff": 2 }),
        json!({ "root_id": root_id, "space_id": a["space_id"], "path": ["a"], "cutoff": 3 }),
    ];
    for follower in [&mut follower, &mut second] {
        for line in &expected {
            assert_eq!(&follower.next(), line);
        }
    }

    // A follower that goes away costs the journal nothing.
    drop(second);
    post(
        journal,
        "/v1/append",
        &json!({ "space": a, "facts": ["gmFwAQ=="], "operation_id": "a3" }),
    );
    assert_eq!(follower.next()["cutoff"], 4);
}

#[test]
fn only_the_journal_has_an_advance_stream() {
    let labd = Labd::start("events-routes", &[]);
    let response = labd.coord_management().get("/advances");
    response.assert_error(404, "not_found");
    let response = labd.bytes_management().get("/advances");
    response.assert_error(404, "not_found");
    // A stream is read, never written.
    let response = labd.journal_management().post("/advances", None, b"");
    assert_eq!(response.status, 405);
}

#[test]
fn a_coordination_host_is_told_where_a_remote_journal_streams() {
    let journal = Labd::start("events-split-journal", &["--services", "bytes,journal"]);
    let operations = format!("http://{}", journal.journal().address);
    let management = format!("http://{}", journal.journal_management().address);
    let bytes = format!("http://{}", journal.bytes().address);
    let coord = Labd::start(
        "events-split-coord",
        &[
            "--services",
            "coord",
            "--remote",
            &format!("journal={operations}"),
            "--remote",
            &format!("bytes={bytes}"),
            "--journal-advances",
            &management,
        ],
    );
    assert_eq!(coord.coord().get("/healthz").status, 200);

    // With the journal hosted here, a stream to follow is a mistake.
    let dir = support::temp_dir("events-misplaced");
    let output = std::process::Command::new(env!("CARGO_BIN_EXE_labd"))
        .arg("--data-dir")
        .arg(&dir)
        .args(support::LOOPBACK_LISTENERS)
        .args(["--journal-advances", &management])
        .output()
        .unwrap();
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("--journal-advances"), "{stderr}");
}
