//! `labctl` against a real `labd`, reached directly over http: a worker
//! holding a grant delegated by a lead acts within it, through the
//! `LAB_*` environment, and is refused beyond it with the exit code of
//! each refusal.
//!
//! A test of the `labctl` package: it runs `labd` from the workspace's
//! target directory (`cargo test --workspace` builds it; alone, `cargo
//! build -p labd` first).

#[path = "support/deployment.rs"]
mod deployment;
mod support;
#[path = "support/tls.rs"]
mod tls;

use deployment::{code, command, json_out, labctl, ok, p, stderr, Deployment};
use serde_json::{json, Value};
use std::path::{Path, PathBuf};
use std::process::Output;

/// A key file made by `labctl keygen`, and its principal.
fn keygen(d: &Deployment, name: &str) -> (PathBuf, String) {
    let key = d.dir.join(format!("{name}.key"));
    let out = ok(labctl(&["keygen", "--out", p(&key)]));
    (
        key,
        String::from_utf8(out.stdout).unwrap().trim().to_string(),
    )
}

/// labctl `args` as `key` holding `grants`, from the `LAB_*` environment.
fn as_holder(d: &Deployment, key: &Path, grants: &Path, args: &[&str]) -> Output {
    command(args)
        .env("LAB_KEY", key)
        .env("LAB_GRANTS", grants)
        .env("LAB_ENDPOINT", &d.base)
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap()
}

/// Asserts a refusal: its exit code, and the summary line naming its code.
fn assert_refused(out: &Output, exit: i32, error: &str, http: u16) {
    assert_eq!(code(out), exit, "{}", stderr(out));
    assert!(out.stdout.is_empty());
    let err = stderr(out);
    let summary = err.lines().next().unwrap();
    assert!(
        summary.starts_with(&format!("labctl: refused: {error} (HTTP {http}): ")),
        "{err}"
    );
}

fn publish_body(d: &Deployment, name: &str, id: &str, path: &[&str]) -> PathBuf {
    let body = json!({ "operation_id": id, "path": path, "profile": "lab/finding/1", "record": { "id": id } });
    d.file(name, body.to_string().as_bytes())
}

#[test]
fn a_delegated_worker_acts_within_its_grant_and_is_refused_beyond_it() {
    let d = Deployment::start_plain("labctl-labd");
    let project = d.file(
        "project.json",
        br#"{"operation_id":"p-alpha","label":"alpha"}"#,
    );
    ok(d.call(&["call", "create_project", "--body", p(&project)]));

    // The root grants a lead publish on the project; the lead delegates
    // publish on its snapshots only to a worker.
    let (lead_key, lead) = keygen(&d, "lead");
    let (worker_key, worker) = keygen(&d, "worker");
    let lead_grants = d.dir.join("lead.grants");
    let worker_grants = d.dir.join("worker.grants");
    ok(labctl(&[
        "grant",
        "--key",
        p(&d.root_key),
        "--to",
        &lead,
        "--kind",
        "publish",
        "--path",
        "projects",
        "--path",
        "alpha",
        "--valid-for",
        "1h",
        "--append-to",
        p(&lead_grants),
    ]));
    ok(labctl(&[
        "grant",
        "--key",
        p(&lead_key),
        "--to",
        &worker,
        "--kind",
        "publish",
        "--path",
        "projects",
        "--path",
        "alpha",
        "--path",
        "snapshots",
        "--valid-for",
        "30m",
        "--parent",
        p(&lead_grants),
        "--append-to",
        p(&worker_grants),
    ]));

    // Within the delegated grant: published, by the worker.
    let within = publish_body(
        &d,
        "within.json",
        "w-1",
        &["projects", "alpha", "snapshots", "s1"],
    );
    let published = json_out(&ok(as_holder(
        &d,
        &worker_key,
        &worker_grants,
        &["call", "publish", "--body", p(&within)],
    )));
    assert_eq!(published["replayed"], false, "{published}");
    assert_eq!(
        published["record"]["publisher"],
        worker.as_str(),
        "{published}"
    );
    // Its replay answers the same record.
    let replayed = json_out(&ok(as_holder(
        &d,
        &worker_key,
        &worker_grants,
        &["call", "publish", "--body", p(&within)],
    )));
    assert_eq!(replayed["replayed"], true);
    assert_eq!(replayed["record"], published["record"]);

    // Beyond it, though within the lead's grant: denied, nothing written.
    let beyond_path = ["projects", "alpha", "notes", "n1"];
    let beyond = publish_body(&d, "beyond.json", "w-2", &beyond_path);
    let out = as_holder(
        &d,
        &worker_key,
        &worker_grants,
        &["call", "publish", "--body", p(&beyond)],
    );
    assert_refused(&out, 6, "denied", 403);
    let resolved = json_out(&ok(d.call(&[
        "call", "resolve", "--path", "projects", "--path", "alpha", "--path", "notes",
    ])));
    assert_eq!(resolved["space"], Value::Null, "{resolved}");
    // A read needs a read grant, which the worker does not hold.
    let out = as_holder(
        &d,
        &worker_key,
        &worker_grants,
        &[
            "call",
            "entries",
            "--path",
            "projects",
            "--path",
            "alpha",
            "--path",
            "snapshots",
            "--path",
            "s1",
        ],
    );
    assert_refused(&out, 6, "denied", 403);
    // The worker's grant without its parent does not verify.
    let alone = d.dir.join("alone.grants");
    let chain: Vec<Value> =
        serde_json::from_slice(&std::fs::read(&worker_grants).unwrap()).unwrap();
    std::fs::write(&alone, serde_json::to_vec(&chain[1..]).unwrap()).unwrap();
    let again = publish_body(
        &d,
        "again.json",
        "w-3",
        &["projects", "alpha", "snapshots", "s1"],
    );
    let out = as_holder(
        &d,
        &worker_key,
        &alone,
        &["call", "publish", "--body", p(&again)],
    );
    assert_refused(&out, 6, "denied", 403);
    // The same operation ID with another record: a mismatch, exit 4.
    let other = json!({ "operation_id": "w-1", "path": ["projects", "alpha", "snapshots", "s1"], "profile": "lab/finding/1", "record": { "other": true } });
    let other = d.file("other.json", other.to_string().as_bytes());
    let out = as_holder(
        &d,
        &worker_key,
        &worker_grants,
        &["call", "publish", "--body", p(&other)],
    );
    assert_refused(&out, 4, "idempotency_mismatch", 409);

    // The root reads what the worker published, and only that.
    let entries = json_out(&ok(d.call(&[
        "call",
        "entries",
        "--path",
        "projects",
        "--path",
        "alpha",
        "--path",
        "snapshots",
        "--path",
        "s1",
    ])));
    let records: Vec<&Value> = entries["entries"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|e| e.get("record"))
        .collect();
    assert_eq!(records.len(), 1, "{entries}");
    // A leaf that does not exist: not found, exit 3.
    let out = d.call(&[
        "call",
        "entries",
        "--path",
        "projects",
        "--path",
        "alpha",
        "--path",
        "snapshots",
        "--path",
        "none",
    ]);
    assert_refused(&out, 3, "not_found", 404);
}
