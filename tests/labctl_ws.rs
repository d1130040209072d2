//! `labctl ws` and `labctl watch` end to end: a `labd` serving the
//! coordination socket (`contracts/coordination/WS.md`) behind the test
//! TLS terminator, reached as `wss://127.0.0.1:<port>/api/operations/v1/ws`.
//!
//! Written against WS.md before the socket is served: it is compiled only
//! once `labd` serves `GET /v1/ws` (registered as a `[[test]]` of
//! `cli/Cargo.toml`, beside `labctl_tls`).

#[path = "support/deployment.rs"]
mod deployment;
mod support;
#[path = "support/tls.rs"]
mod tls;

use std::io::{BufRead, BufReader};
use std::process::{Child, Stdio};

use deployment::{code, command, labctl_with, ok, p, stderr, Deployment};
use serde_json::{json, Value};
use support::eventually;

const CONTRACT: &str = "2026-09-19";

fn lines(stdout: &[u8]) -> Vec<Value> {
    String::from_utf8_lossy(stdout)
        .lines()
        .map(|line| serde_json::from_str(line).expect("each line is one JSON frame"))
        .collect()
}

/// The reply to call `id` among `frames`.
fn reply<'a>(frames: &'a [Value], id: &str) -> &'a Value {
    let found: Vec<&Value> = frames.iter().filter(|f| f["id"] == id).collect();
    assert_eq!(found.len(), 1, "one reply to {id}: {frames:?}");
    assert_eq!(found[0]["contract"], CONTRACT);
    found[0]
}

/// A grant file for a fresh key holding `kind` on `path` only.
fn narrow_holder(d: &Deployment, name: &str, kind: &str, path: &[&str]) -> (String, String) {
    let key = d.dir.join(format!("{name}.key"));
    let principal = ok(command(&["keygen", "--out", p(&key)]).output().unwrap());
    let principal = String::from_utf8(principal.stdout).unwrap();
    let grants = d.dir.join(format!("{name}.grants"));
    let mut args = vec![
        "grant",
        "--key",
        p(&d.root_key),
        "--to",
        principal.trim(),
        "--kind",
        kind,
        "--valid-for",
        "1h",
        "--append-to",
        p(&grants),
    ];
    for label in path {
        args.extend(["--path", label]);
    }
    ok(command(&args).output().unwrap());
    (p(&key).to_owned(), p(&grants).to_owned())
}

#[test]
fn a_ws_session_signs_each_call_for_the_external_audience() {
    let d = Deployment::start("ws-session");
    let input = [
        json!({"id": "p", "op": "create_project",
               "body": {"operation_id": "ws-alpha", "label": "alpha"}}),
        json!({"id": "r", "op": "resolve", "params": {"path": ["projects"]}}),
        json!({"op": "children", "params": {"path": ["projects"], "limit": 5}}),
    ]
    .iter()
    .map(|line| format!("{line}\n"))
    .collect::<String>();
    let out = ok(d.call_with(&["ws"], input.as_bytes()));
    let frames = lines(&out.stdout);
    assert_eq!(frames.len(), 3, "{frames:?}");
    let created = reply(&frames, "p");
    assert_eq!(created["status"], "created", "{created}");
    assert_eq!(reply(&frames, "r")["status"], "ok");
    // A line without an id is numbered.
    assert_eq!(reply(&frames, "line-3")["status"], "ok");

    // The publishing verb resent with the same operation ID replays.
    let again =
        r#"{"id":"p2","op":"create_project","body":{"operation_id":"ws-alpha","label":"alpha"}}"#;
    let out = ok(d.call_with(&["ws"], again.as_bytes()));
    let replayed = reply(&lines(&out.stdout), "p2").clone();
    assert_eq!(replayed["status"], "ok", "{replayed}");
    assert_eq!(replayed["result"]["replayed"], true, "{replayed}");
}

#[test]
fn a_refusal_on_the_socket_is_a_reply_with_its_code() {
    let d = Deployment::start("ws-refusal");
    // A legitimate but narrower grant: read on projects/beta only.
    let (key, grants) = narrow_holder(&d, "beta-reader", "read", &["projects", "beta"]);
    let line = r#"{"id":"x","op":"children","params":{"path":["projects","alpha"]}}"#;
    let ca = deployment::ca();
    let out = labctl_with(
        &[
            "ws",
            "--endpoint",
            &d.base,
            "--ca-file",
            p(&ca),
            "--key",
            &key,
            "--grants",
            &grants,
        ],
        line.as_bytes(),
    );
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    let frames = lines(&out.stdout);
    let refused = reply(&frames, "x");
    assert_eq!(refused["status"], "error");
    assert_eq!(refused["error"]["error"], "denied", "{refused}");
}

/// `labctl watch` running; its stdout read line by line.
struct Watch {
    child: Child,
    frames: std::io::Lines<BufReader<std::process::ChildStdout>>,
    /// What labctl writes to stderr after its first line.
    errors: BufReader<std::process::ChildStderr>,
}

impl Watch {
    fn start(d: &Deployment, args: &[&str]) -> Watch {
        let all = d.args(args);
        let all: Vec<&str> = all.iter().map(String::as_str).collect();
        let mut child = command(&all)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        // The subscription is open once labctl says so on stderr.
        let mut err = BufReader::new(child.stderr.take().unwrap());
        let mut line = String::new();
        err.read_line(&mut line).unwrap();
        assert!(line.contains("subscribed sub_"), "{line}");
        let frames = BufReader::new(child.stdout.take().unwrap()).lines();
        Watch {
            child,
            frames,
            errors: err,
        }
    }

    /// The rest of labctl's stderr (once it exited).
    fn errors(&mut self) -> String {
        let mut text = String::new();
        let _ = std::io::Read::read_to_string(&mut self.errors, &mut text);
        text
    }

    fn next(&mut self) -> Value {
        let line = self.frames.next().expect("a frame").unwrap();
        serde_json::from_str(&line).unwrap()
    }
}

#[test]
fn watch_prints_events_and_ends_with_the_closed_frame() {
    let d = Deployment::start("ws-watch");
    let mut watch = Watch::start(&d, &["watch", "projects", "--depth", "1"]);
    let project = d.file(
        "project.json",
        br#"{"operation_id":"watch-alpha","label":"alpha"}"#,
    );
    ok(d.call(&["call", "create_project", "--body", p(&project)]));
    let event = watch.next();
    assert!(event["subscription"].as_str().unwrap().starts_with("sub_"));
    assert_eq!(event["contract"], CONTRACT);
    assert!(event["event"]["cutoff"].as_u64().unwrap() >= 1, "{event}");
    // A shutdown closes the subscription: its last frame, then exit 0.
    // The project's creation advanced several journals: their events may
    // come first.
    d.labd.terminate();
    let closed = loop {
        let frame = watch.next();
        if frame.get("event").is_none() {
            break frame;
        }
    };
    assert_eq!(closed["closed"]["reason"], "shutdown", "{closed}");
    assert!(closed["closed"]["delivered"].as_u64().unwrap() >= 1);
    let status = watch.child.wait().unwrap();
    assert_eq!(status.code(), Some(0));
}

#[test]
fn watch_fails_when_the_connection_is_lost() {
    let d = Deployment::start("ws-watch-lost");
    let mut watch = Watch::start(&d, &["watch", "/"]);
    let pid = d.labd.child.id();
    // SIGKILL: no closed frame can be sent.
    let killed = std::process::Command::new("kill")
        .args(["-KILL", &pid.to_string()])
        .status()
        .unwrap();
    assert!(killed.success());
    let mut exited = None;
    eventually("watch exits", || {
        exited = watch.child.try_wait().unwrap();
        exited.is_some()
    });
    assert_eq!(exited.unwrap().code(), Some(69), "{}", watch.errors());
}

#[test]
fn watch_is_refused_outside_the_holders_grants() {
    let d = Deployment::start("ws-watch-denied");
    let (key, grants) = narrow_holder(&d, "beta-reader", "read", &["projects", "beta"]);
    let ca = deployment::ca();
    let out = command(&[
        "watch",
        "projects/alpha",
        "--endpoint",
        &d.base,
        "--ca-file",
        p(&ca),
        "--key",
        &key,
        "--grants",
        &grants,
    ])
    .output()
    .unwrap();
    assert_eq!(code(&out), 6, "{}", stderr(&out));
    assert!(stderr(&out).contains("refused: denied"), "{}", stderr(&out));
}
