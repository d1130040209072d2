//! `labctl` over https: a `labd` behind the test TLS terminator
//! (`support/tls.rs`), reached at its external mount
//! `https://127.0.0.1:<port>/api/operations`, with `labd`'s audience set
//! to that URL. The terminator's certificate is issued by the committed
//! test CA (`tests/fixtures/tls/`), valid for the IP address 127.0.0.1
//! only.
//!
//! A test of the `labctl` package: it runs `labd` from the workspace's
//! target directory (`cargo test --workspace` builds it; alone, `cargo
//! build -p labd` first).

#[path = "support/deployment.rs"]
mod deployment;
mod support;
#[path = "support/tls.rs"]
mod tls;

use deployment::{ca, code, json_out, labctl, ok, p, stderr, Deployment};
use serde_json::json;
use support::{name_of, pseudo_random};

#[test]
fn commands_work_over_https_at_the_external_mount() {
    let d = Deployment::start("tls-commands");
    // The operational routes, through the mount.
    let health = json_out(&ok(d.call(&["health"])));
    assert_eq!(health["status"], "ok", "{health}");
    let description = json_out(&ok(d.call(&["describe"])));
    assert_eq!(description["service"], "coord", "{description}");

    // A provisioning verb, signed for the external audience.
    let project = d.file(
        "project.json",
        br#"{"operation_id":"create-alpha","label":"alpha"}"#,
    );
    ok(d.call(&["call", "create_project", "--body", p(&project)]));

    // A read.
    let children = json_out(&ok(d.call(&["call", "children", "--path", "projects"])));
    let labels: Vec<&str> = children["children"]
        .as_array()
        .unwrap()
        .iter()
        .map(|child| child["key"].as_str().unwrap())
        .collect();
    assert_eq!(labels, ["alpha"], "{children}");

    // Publishing: bytes retained (a raw body of several TLS records), then
    // an artifact naming them.
    let descriptor = br#"{"interpretation":"text"}"#;
    let kind = name_of(descriptor);
    let content = pseudo_random(300_000, 11);
    let hash = name_of(&content);
    for (name, bytes) in [
        ("descriptor.json", &descriptor[..]),
        ("content.bin", &content),
    ] {
        let file = d.file(name, bytes);
        let retained = json_out(&ok(d.call(&[
            "call",
            "retain",
            "--path",
            "projects",
            "--path",
            "alpha",
            "--type",
            &kind,
            "--body",
            p(&file),
        ])));
        assert_eq!(retained["bytes"], name_of(bytes), "{retained}");
    }
    let artifact = json!({
        "operation_id": "artifact-a1",
        "path": ["projects", "alpha", "artifacts", "a1"],
        "artifact": {"bytes": hash, "type": kind},
    });
    let artifact = d.file("artifact.json", artifact.to_string().as_bytes());
    ok(d.call(&["call", "create_artifact", "--body", p(&artifact)]));

    // A fetch streams the bytes back through the terminator.
    let out = d.dir.join("a1.bin");
    ok(d.call(&[
        "call",
        "fetch",
        "--path",
        "projects",
        "--path",
        "alpha",
        "--path",
        "artifacts",
        "--path",
        "a1",
        "--param",
        &format!("bytes={hash}"),
        "--out",
        p(&out),
    ]));
    assert!(
        std::fs::read(&out).unwrap() == content,
        "fetched bytes differ"
    );
}

#[test]
fn a_refusal_arrives_through_the_terminator_with_its_code() {
    let d = Deployment::start("tls-refusal");
    // Signed for the internal audience, not the external one: unverified.
    let out = d.call(&[
        "call",
        "children",
        "--audience",
        &format!("http://{}", d.labd.coord().address),
    ]);
    assert_eq!(code(&out), 5, "{}", stderr(&out));
    assert!(
        stderr(&out).contains("refused: unverified (HTTP 401)"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn an_untrusted_certificate_is_refused_clearly() {
    let d = Deployment::start("tls-untrusted");
    // The setup is sound: with the CA, the same command succeeds.
    ok(d.call(&["health"]));
    let out = labctl(&["health", "--endpoint", &d.base]);
    assert_eq!(code(&out), 69, "{}", stderr(&out));
    let text = stderr(&out);
    assert!(
        text.contains("TLS: the certificate of 127.0.0.1 is not issued by a trusted authority")
            && text.contains("--ca-file"),
        "{text}"
    );
    assert!(!text.contains("panicked"), "{text}");
    // The same from the environment variable.
    let out = deployment::command(&["health", "--endpoint", &d.base])
        .env("LAB_CA_FILE", ca())
        .output()
        .unwrap();
    assert_eq!(code(&out), 0, "{}", stderr(&out));
}

#[test]
fn a_certificate_for_another_name_is_refused() {
    let d = Deployment::start("tls-name");
    ok(d.call(&["health"]));
    // The certificate names 127.0.0.1 only; `localhost` reaches the same
    // listener (or fails to connect on [::1] first and then reaches it).
    let by_name = d.base.replace("127.0.0.1", "localhost");
    let out = labctl(&["health", "--endpoint", &by_name, "--ca-file", p(&ca())]);
    assert_eq!(code(&out), 69, "{}", stderr(&out));
    assert!(
        stderr(&out).contains("TLS: the certificate presented is not valid for the name localhost"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn a_ca_file_that_holds_no_certificate_is_malformed_input() {
    let d = Deployment::start("tls-bad-ca");
    let not_pem = d.file("not.pem", b"hello\n");
    let out = labctl(&["health", "--endpoint", &d.base, "--ca-file", p(&not_pem)]);
    assert_eq!(code(&out), 65, "{}", stderr(&out));
    assert!(
        stderr(&out).contains("holds no PEM CERTIFICATE"),
        "{}",
        stderr(&out)
    );
    let missing = d.dir.join("missing.pem");
    let out = labctl(&["health", "--endpoint", &d.base, "--ca-file", p(&missing)]);
    assert_eq!(code(&out), 66, "{}", stderr(&out));
}

#[test]
fn outside_the_mount_the_terminator_answers_not_labd() {
    let d = Deployment::start("tls-mount");
    // Without the prefix, the terminator's own 404 has no Lab-Service:
    // labctl says the peer is not the coordination service.
    let root = d.base.trim_end_matches(tls::MOUNT).to_owned();
    let out = labctl(&["health", "--endpoint", &root, "--ca-file", p(&ca())]);
    assert_eq!(code(&out), 70, "{}", stderr(&out));
    assert!(
        stderr(&out).contains("without `Lab-Service: coord`"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn the_socket_upgrade_crosses_the_terminator_to_labd() {
    let d = Deployment::start("tls-socket");
    // `wss://127.0.0.1:<port>/api/operations/v1/ws`, through the same TLS
    // check: without the CA it is refused before any upgrade.
    let out = labctl(&["ws", "--endpoint", &d.base, "--key", p(&d.root_key)]);
    assert_eq!(code(&out), 69, "{}", stderr(&out));
    assert!(
        stderr(&out).contains("wss://127.0.0.1:"),
        "{}",
        stderr(&out)
    );
    assert!(
        stderr(&out).contains("not issued by a trusted authority"),
        "{}",
        stderr(&out)
    );
    // With it, the upgrade reaches labd's `GET /v1/ws` and its answer
    // comes back: in this source the socket is not served yet (WS.md:
    // 500 `not_implemented`, exit 9); once it is, an empty session ends
    // normally (exit 0, no frame). Either way the answer is labd's, which
    // a broken terminator, mount or TLS path would not give (69 or 70).
    let out = d.call(&["ws"]);
    match code(&out) {
        9 => assert!(
            stderr(&out).contains("refused: not_implemented (HTTP 500)"),
            "{}",
            stderr(&out)
        ),
        0 => assert!(out.stdout.is_empty()),
        other => panic!("exit {other}: {}", stderr(&out)),
    }
}
