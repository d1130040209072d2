//! `declare` over the wire: admission, replay, every refusal of its
//! order, the envelope and frame fetched and verified offline, the
//! declaration index across concurrency and `kill -9`, and the authority a
//! `declare` grant does and does not carry.

use crate::support;
use crate::support::coord::{labels, nonce, now, start, try_send, Coord, Holder, Req};
use crate::support::{Labd, Response};
use lab_coord_auth::{GrantKind, Principal};
use serde_json::{json, Value};

const ALPHA: &str = "projects/alpha/artifacts/a1";

impl Coord {
    /// Retains `bytes` under a retained descriptor; returns the Artifact.
    fn retained(&self, who: &Holder, path: &str, bytes: &[u8]) -> Value {
        let descriptor = br#"{"interpretation":"text"}"#;
        let kind = support::name_of(descriptor);
        for (body, kind) in [(&descriptor[..], &kind), (bytes, &kind)] {
            let req = Req::raw("retain", body.to_vec())
                .path(path)
                .string("type", kind);
            self.ok(who, &req, 200);
        }
        json!({ "bytes": support::name_of(bytes), "type": kind })
    }

    /// A project `alpha` with the artifact `a1` holding `measured: 42`;
    /// answers its content.
    fn measured_alpha(&self) -> Value {
        let admin = self.admin();
        let body = json!({ "operation_id": "project-alpha", "label": "alpha" });
        self.ok(&admin, &Req::json("create_project", &body), 201);
        let artifact = self.retained(&admin, "projects/alpha", b"measured: 42\n");
        let body = json!({ "operation_id": "a1", "path": labels(ALPHA), "artifact": artifact });
        self.ok(&admin, &Req::json("create_artifact", &body), 201)["content"].clone()
    }

    fn declare(&self, who: &Holder, body: &Value) -> Response {
        self.send(who, &Req::json("declare", body))
    }
}

fn declaration(op: &str, artifact: &str, statement: Value) -> Value {
    json!({ "operation_id": op, "artifact": labels(artifact), "statement": statement })
}

fn license(value: &str) -> Value {
    json!({ "subject": "pkg#core", "property": "license", "value": value })
}

fn assert_invalid(response: &Response, code: &str, field: &str) {
    response.assert_error(400, code);
    assert_eq!(response.json()["details"]["field"], field);
}

fn entry_ref(space: &Value, position: u64) -> Value {
    json!({ "root_id": space["root_id"], "space_id": space["space_id"], "position": position })
}

#[test]
fn declare_admits_replays_and_serves_its_envelope() {
    let (_labd, coord) = start("coord-declare");
    let content = coord.measured_alpha();
    let declarer = coord.holder(10, &[GrantKind::Declare, GrantKind::Read], "projects/alpha");
    let body = declaration("d-1", ALPHA, license("MIT"));
    let first = coord.declare(&declarer, &body);
    assert_eq!(
        first.status,
        201,
        "{}",
        String::from_utf8_lossy(&first.body)
    );
    let first = first.json();
    assert_eq!(first["replayed"], false);
    let id = first["assertion_id"].as_str().unwrap();
    assert!(id.starts_with("asr_") && id.len() == 68, "{id}");
    let declarations = coord.space_at(&format!("{ALPHA}/declarations"));
    assert_eq!(first["declaration"], entry_ref(&declarations, 1));

    // The journal holds the declaration fact as the batch's first entry.
    let entries = coord.entries(&format!("{ALPHA}/declarations"));
    assert_eq!(entries.len(), 1);
    let fact = &entries[0]["declaration"];
    assert_eq!(fact["assertion_id"], id);
    assert_eq!(fact["envelope"], first["envelope"]);
    assert_eq!(fact["artifact"], content["artifact"]);
    assert_eq!(fact["subject"], "pkg#core");
    assert_eq!(fact["publisher"], declarer.principal());

    // A retry, with another proof, is the same occurrence.
    let again = coord.declare(&declarer, &body);
    assert_eq!(again.status, 200);
    let again = again.json();
    assert_eq!(again["replayed"], true);
    for member in ["declaration", "assertion_id", "envelope"] {
        assert_eq!(again[member], first[member], "{member}");
    }
    // The same operation ID with another statement is refused.
    coord
        .declare(&declarer, &declaration("d-1", ALPHA, license("GPL-3.0")))
        .assert_error(409, "idempotency_mismatch");
    assert_eq!(coord.entries(&format!("{ALPHA}/declarations")).len(), 1);

    // The envelope and its frame are served at the declarations path.
    let fetch = |hash: &str| {
        let req = Req::read("fetch")
            .path(&format!("{ALPHA}/declarations"))
            .string("bytes", hash);
        coord.send(&declarer, &req)
    };
    let envelope = fetch(first["envelope"].as_str().unwrap());
    assert_eq!(envelope.status, 200);
    assert_eq!(support::name_of(&envelope.body), first["envelope"]);
    let record: Value = serde_json::from_slice(&envelope.body).unwrap();
    assert_eq!(record["purpose"], "coord.declaration-record.v1");
    assert_eq!(record["assertion_id"], id);
    assert_eq!(record["publisher"], declarer.principal());
    assert_eq!(record["content"], content);
    assert_eq!(record["statement"]["evidence"], json!([]));
    assert_eq!(record["statement"]["relations"], json!([]));
    assert_eq!(record["statement"]["value"], "MIT");
    assert_eq!(record["admission"]["policy"], "coord.declare.v1");
    assert_eq!(
        record["admission"]["path"],
        json!(labels(&format!("{ALPHA}/declarations")))
    );
    let frame = fetch(record["admission"]["frame"].as_str().unwrap());
    assert_eq!(frame.status, 200);
    let frame: Value = serde_json::from_slice(&frame.body).unwrap();
    assert_eq!(frame, record["frame"]);
    assert_eq!(frame["content"], content["artifact"]);
    // Nothing else is served there.
    let other = support::name_of(b"not named here");
    fetch(&other).assert_error(409, "unresolved");

    // Offline: the root's signature, the frame, the proof, the publisher.
    let root = Principal::of(&coord.root);
    let checks = lab_coord_client::verify_admission(&envelope.body, &root, &coord.audience);
    assert_eq!(checks.len(), 4);
    assert!(checks.iter().all(|c| c.passed), "{checks:?}");
    // Tampered: a changed acceptance time breaks the root's signature; a
    // changed request body breaks the proof; another root fails too.
    let mut tampered = record.clone();
    tampered["admission"]["accepted_at"] = json!("2020-01-01T00:00:00.000000Z");
    let checks = verify(&tampered, &root, &coord.audience);
    assert_eq!(failed(&checks), ["root signature"]);
    let mut tampered = record.clone();
    // `eyJ` is `{"`; `fyJ` decodes to other bytes.
    let sent = record["admission"]["request_body"].as_str().unwrap();
    assert!(sent.starts_with("eyJ"));
    tampered["admission"]["request_body"] = json!(format!("f{}", &sent[1..]));
    let checks = verify(&tampered, &root, &coord.audience);
    assert_eq!(failed(&checks), ["root signature", "proof"]);
    let mut tampered = record.clone();
    tampered["frame"]["evidence"] = json!([entry_ref(&declarations, 1)]);
    assert_eq!(
        failed(&verify(&tampered, &root, &coord.audience)),
        ["frame digest"]
    );
    let mut tampered = record.clone();
    tampered["publisher"] = json!(Principal::of(&support::coord::key(99)).to_string());
    assert_eq!(
        failed(&verify(&tampered, &root, &coord.audience)),
        ["publisher"]
    );
    let stranger = Principal::of(&support::coord::key(98));
    assert_eq!(
        failed(&verify(&record, &stranger, &coord.audience)),
        ["root signature"]
    );
    assert_eq!(
        failed(&verify(&record, &root, "http://elsewhere")),
        ["proof"]
    );
}

fn verify(record: &Value, root: &Principal, audience: &str) -> Vec<lab_coord_client::Check> {
    lab_coord_client::verify_admission(record.to_string().as_bytes(), root, audience)
}

fn failed(checks: &[lab_coord_client::Check]) -> Vec<String> {
    checks
        .iter()
        .filter(|c| !c.passed)
        .map(|c| c.name.to_string())
        .collect()
}

#[test]
fn every_refusal_of_declare() {
    let (labd, coord) = start("coord-declare-refusals");
    let content = coord.measured_alpha();
    let admin = coord.admin();
    let declarer = coord.holder(10, &[GrantKind::Declare, GrantKind::Read], "projects/alpha");
    let decls = format!("{ALPHA}/declarations");
    let send = |statement: Value| coord.declare(&declarer, &declaration("r", ALPHA, statement));

    // Strict decoding names the member.
    let mut unknown = license("MIT");
    unknown["extra"] = json!(1);
    assert_invalid(&send(unknown), "invalid", "statement.extra");
    for subject in ["nohash", "#x", "x#", "ab", "a#\u{1}b"] {
        let mut bad = license("MIT");
        bad["subject"] = json!(subject);
        assert_invalid(&send(bad), "invalid", "statement.subject");
    }
    assert_invalid(
        &send(json!({ "property": "", "value": 1 })),
        "invalid",
        "statement.property",
    );
    assert_invalid(
        &send(json!({ "property": "p", "value": 1, "evidence": [{ "root_id": "x" }] })),
        "invalid",
        "statement.evidence",
    );
    assert_invalid(
        &send(json!({ "relations": [{ "kind": "refutes", "target": content["entry"] }] })),
        "invalid",
        "statement.relations.kind",
    );
    assert_invalid(
        &send(
            json!({ "property": "p", "value": 1, "justifications": [{ "group": "g", "premises": [], "method": "m" }] }),
        ),
        "invalid",
        "statement.justifications.premises",
    );
    assert_invalid(
        &coord.declare(
            &declarer,
            &json!({ "operation_id": "r", "artifact": ALPHA, "statement": {} }),
        ),
        "invalid",
        "artifact",
    );
    // Semantic faults of the statement.
    assert_invalid(
        &send(json!({ "property": "license" })),
        "invalid_record",
        "statement.value",
    );
    assert_invalid(
        &send(json!({ "value": "MIT" })),
        "invalid_record",
        "statement.property",
    );
    assert_invalid(&send(json!({})), "invalid_record", "statement.relations");
    // Bounds: 129 evidence occurrences; 128 facts beside the declaration.
    let many = |n: usize| vec![content["entry"].clone(); n];
    send(json!({ "property": "p", "value": 1, "evidence": many(129) }))
        .assert_error(413, "limit_exceeded");
    let justifications = json!([{ "group": "g", "premises": many(100), "method": "m" }]);
    let relations: Vec<Value> = (0..28)
        .map(|_| json!({ "kind": "challenges", "target": content["entry"] }))
        .collect();
    send(json!({ "property": "p", "value": 1, "justifications": justifications, "relations": relations }))
        .assert_error(413, "limit_exceeded");
    // The 16 MiB original body, before any proof.
    let big = declaration(
        "big",
        ALPHA,
        json!({ "property": "p", "value": "x".repeat(16 << 20) }),
    );
    let response = coord.client.post_json("/v1/declarations", &big.to_string());
    response.assert_error(400, "invalid");
    assert!(response.json()["details"].is_null());
    // A body of exactly 16 MiB is admitted, and its envelope served.
    let mut exact = declaration("exact", ALPHA, json!({ "property": "p", "value": "" }));
    let room = (16 << 20) - exact.to_string().len();
    exact["statement"]["value"] = json!("x".repeat(room));
    assert_eq!(exact.to_string().len(), 16 << 20);
    let admitted = coord.ok(&declarer, &Req::json("declare", &exact), 201);
    let envelope = Req::read("fetch")
        .path(&decls)
        .string("bytes", admitted["envelope"].as_str().unwrap());
    let envelope = coord.send(&declarer, &envelope);
    assert_eq!(envelope.status, 200);
    let root = Principal::of(&coord.root);
    let checks = lab_coord_client::verify_admission(&envelope.body, &root, &coord.audience);
    assert!(checks.iter().all(|c| c.passed), "{checks:?}");

    // Authorization and the layout.
    let reader = coord.holder(11, &[GrantKind::Read], "");
    coord
        .declare(&reader, &declaration("r", ALPHA, license("MIT")))
        .assert_error(403, "denied");
    let blind = coord.holder(12, &[GrantKind::Declare], "projects/alpha");
    coord
        .declare(&blind, &declaration("r", ALPHA, license("MIT")))
        .assert_error(403, "denied");
    coord
        .declare(
            &declarer,
            &declaration("r", "projects/alpha", license("MIT")),
        )
        .assert_error(400, "structural");
    coord
        .declare(
            &declarer,
            &declaration("r", &format!("{ALPHA}/declarations"), license("MIT")),
        )
        .assert_error(400, "structural");
    let everywhere = coord.holder(13, &[GrantKind::Declare, GrantKind::Read], "");
    assert_invalid(
        &coord.declare(
            &everywhere,
            &declaration("r", "elsewhere/x", license("MIT")),
        ),
        "invalid",
        "artifact",
    );
    coord
        .declare(
            &declarer,
            &declaration("r", "projects/alpha/artifacts/ghost", license("MIT")),
        )
        .assert_error(404, "not_found");

    // An artifact space without content (its creation cut short): made
    // straight in the journal.
    let journal = labd.journal();
    let artifacts = coord.space_at("projects/alpha/artifacts");
    let made = journal.post_json(
        "/v1/create",
        &json!({
            "parent": { "root_id": artifacts["root_id"], "space_id": artifacts["space_id"] },
            "key": "bare", "operation_id": "bare-1",
        })
        .to_string(),
    );
    assert!(
        made.status == 200 || made.status == 201,
        "{}",
        String::from_utf8_lossy(&made.body)
    );
    let response = coord.declare(
        &declarer,
        &declaration("r", "projects/alpha/artifacts/bare", license("MIT")),
    );
    response.assert_error(409, "unresolved");
    assert_eq!(
        response.json()["details"]["reference"],
        json!({ "artifact": labels("projects/alpha/artifacts/bare") })
    );

    // Evidence: beyond the head, unreadable, outside the world.
    let artifact_space = coord.space_at(ALPHA);
    let beyond = entry_ref(&artifact_space, 99);
    let response = send(json!({ "property": "p", "value": 1, "evidence": [beyond] }));
    response.assert_error(409, "unresolved");
    assert_eq!(response.json()["details"]["reference"], beyond);
    let body = json!({ "operation_id": "project-beta", "label": "beta" });
    coord.ok(&admin, &Req::json("create_project", &body), 201);
    let beta = coord.space_at("projects/beta");
    let elsewhere = entry_ref(&beta, 1);
    send(json!({ "property": "p", "value": 1, "evidence": [elsewhere] }))
        .assert_error(403, "denied");
    let unknown = json!({ "root_id": artifact_space["root_id"], "space_id": "spc_00000000000000000000000000000000", "position": 1 });
    send(json!({ "property": "p", "value": 1, "evidence": [unknown] })).assert_error(403, "denied");
    coord
        .declare(
            &everywhere,
            &declaration(
                "r",
                ALPHA,
                json!({ "property": "p", "value": 1, "evidence": [unknown] }),
            ),
        )
        .assert_error(404, "not_found");
    // Premises follow the same rule.
    send(json!({ "property": "p", "value": 1, "justifications": [{ "group": "g", "premises": [elsewhere], "method": "m" }] }))
        .assert_error(403, "denied");
    // So do relation targets, before the relation rules.
    send(json!({ "relations": [{ "kind": "challenges", "target": elsewhere }] }))
        .assert_error(403, "denied");
    let response = send(json!({ "relations": [{ "kind": "withdraws", "target": beyond }] }));
    response.assert_error(409, "unresolved");
    assert_eq!(response.json()["details"]["reference"], beyond);

    // Relations: a target that is not a declaration of this artifact.
    let response =
        send(json!({ "relations": [{ "kind": "challenges", "target": content["entry"] }] }));
    assert_invalid(&response, "invalid_record", "statement.relations");
    assert_eq!(response.json()["details"]["reference"], content["entry"]);
    // Another publisher's declaration: challenged, never superseded or
    // withdrawn by anyone else.
    let other = coord.holder(14, &[GrantKind::Declare, GrantKind::Read], "projects/alpha");
    let theirs = coord.declare(&other, &declaration("t-1", ALPHA, license("MIT")));
    assert_eq!(theirs.status, 201);
    let target = theirs.json()["declaration"].clone();
    for kind in ["supersedes", "withdraws"] {
        let response = send(json!({ "relations": [{ "kind": kind, "target": target }] }));
        assert_invalid(&response, "invalid_record", "statement.relations");
        assert_eq!(response.json()["details"]["reference"], target);
    }
    let challenge = coord.declare(
        &declarer,
        &declaration(
            "c-1",
            ALPHA,
            json!({ "relations": [{ "kind": "challenges", "target": target }] }),
        ),
    );
    assert_eq!(
        challenge.status,
        201,
        "{}",
        String::from_utf8_lossy(&challenge.body)
    );
    // Its own declaration the publisher supersedes, with a claim, evidence
    // and justifications: one batch, in order.
    let own = coord.declare(&declarer, &declaration("o-1", ALPHA, license("MIT")));
    assert_eq!(own.status, 201);
    let own = own.json();
    let statement = json!({
        "subject": "pkg#core", "property": "license", "value": "Apache-2.0",
        "evidence": [content["entry"]],
        "justifications": [{ "group": "g", "premises": [content["entry"], own["declaration"]], "method": "read the file" }],
        "relations": [{ "kind": "supersedes", "target": own["declaration"] }, { "kind": "challenges", "target": target }],
    });
    let superseding = coord.declare(&declarer, &declaration("o-2", ALPHA, statement));
    assert_eq!(
        superseding.status,
        201,
        "{}",
        String::from_utf8_lossy(&superseding.body)
    );
    let at = superseding.json()["declaration"]["position"]
        .as_u64()
        .unwrap();
    let entries = coord.entries(&decls);
    let batch: Vec<&Value> = entries
        .iter()
        .filter(|e| e["ref"]["position"].as_u64() >= Some(at))
        .collect();
    assert_eq!(batch.len(), 5);
    assert!(batch[0]["declaration"].is_object());
    assert_eq!(batch[1]["justifies"]["premise"], content["entry"]);
    assert_eq!(batch[2]["justifies"]["premise"], own["declaration"]);
    assert_eq!(batch[3]["relation"]["kind"], "supersedes");
    assert_eq!(batch[4]["relation"]["kind"], "challenges");

    // Nothing refused was appended: exact, t-1, c-1 (and its relation),
    // o-1, o-2 (and its four facts).
    let declared = entries
        .iter()
        .filter(|e| e["declaration"].is_object())
        .count();
    assert_eq!(declared, 5);
    assert_eq!(entries.len(), 1 + 1 + 2 + 1 + 5);

    // A second content fact in the artifact space: the space violates the
    // fact profile, and no declaration is admitted.
    let first = coord.entries(ALPHA)[0]["fact"].clone();
    let appended = journal.post_json(
        "/v1/append",
        &json!({
            "space": { "root_id": artifact_space["root_id"], "space_id": artifact_space["space_id"] },
            "facts": [first], "operation_id": "second-content",
        })
        .to_string(),
    );
    assert!(
        appended.status == 200 || appended.status == 201,
        "{}",
        String::from_utf8_lossy(&appended.body)
    );
    send(license("MIT")).assert_error(503, "unavailable");
    assert_eq!(coord.entries(&decls).len(), entries.len());
}

#[test]
fn a_tool_release_takes_declarations() {
    let dir = support::temp_dir("coord-declare-tool-files");
    let description = dir.join("echo.json");
    let tool = r#"{"name": "echo", "version": "1.0.0", "class": "transform",
      "inputs": [{"role": "source", "required": true}], "outputs": [{"role": "result"}],
      "effects": [], "deterministic": true, "egress": []}"#;
    std::fs::write(&description, tool).unwrap();
    let component = support::built_component("tool_upper");
    let setting = format!("{}={}", description.display(), component.display());
    let labd = Labd::start("coord-declare-tool", &["--coord-tool", &setting]);
    let coord = Coord::new(&labd);
    let releases = coord.ok(
        &coord.admin(),
        &Req::read("children").path("tools/echo/releases"),
        200,
    );
    let digest = releases["children"][0]["key"].as_str().unwrap().to_string();
    let release = format!("tools/echo/releases/{digest}");
    let declarer = coord.holder(20, &[GrantKind::Declare, GrantKind::Read], "tools/echo");
    let response = coord.declare(&declarer, &declaration("t-1", &release, license("MIT")));
    assert_eq!(
        response.status,
        201,
        "{}",
        String::from_utf8_lossy(&response.body)
    );
    let entries = coord.entries(&format!("{release}/declarations"));
    assert_eq!(entries.len(), 1);
    assert_eq!(entries[0]["declaration"]["artifact"]["bytes"], digest);
    coord
        .declare(&declarer, &declaration("t-2", "tools/echo", license("MIT")))
        .assert_error(400, "structural");
}

#[test]
fn concurrent_identical_declares_make_one_occurrence() {
    let (_labd, coord) = start("coord-declare-race");
    coord.measured_alpha();
    let declarer = coord.holder(10, &[GrantKind::Declare, GrantKind::Read], "projects/alpha");
    let req = Req::json("declare", &declaration("same", ALPHA, license("MIT")));
    let answers: Vec<Value> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..8)
            .map(|_| {
                let header = coord.header(&declarer, &req, now(), &nonce());
                let (coord, req) = (&coord, &req);
                scope.spawn(move || coord.send_with_header(req, Some(&header)))
            })
            .collect();
        handles
            .into_iter()
            .map(|h| {
                let response = h.join().unwrap();
                assert!(
                    response.status == 200 || response.status == 201,
                    "{}",
                    String::from_utf8_lossy(&response.body)
                );
                response.json()
            })
            .collect()
    });
    for answer in &answers {
        assert_eq!(answer["declaration"], answers[0]["declaration"]);
        assert_eq!(answer["envelope"], answers[0]["envelope"]);
    }
    assert_eq!(answers.iter().filter(|a| a["replayed"] == false).count(), 1);
    assert_eq!(coord.entries(&format!("{ALPHA}/declarations")).len(), 1);
}

#[test]
fn a_retry_after_kill_9_recovers_each_declaration() {
    let (labd, coord) = start("coord-declare-kill");
    coord.measured_alpha();
    let declarer = coord.holder(10, &[GrantKind::Declare, GrantKind::Read], "projects/alpha");
    let requests: Vec<Req> = (0..40)
        .map(|i| {
            Req::json(
                "declare",
                &declaration(&format!("k-{i}"), ALPHA, license(&format!("v{i}"))),
            )
        })
        .collect();
    let address = coord.client.address;
    let (data_dir, acknowledged) = std::thread::scope(|scope| {
        let stream = scope.spawn(|| {
            let mut acknowledged = Vec::new();
            for req in &requests {
                let header = coord.header(&declarer, req, now(), &nonce());
                let answer = try_send(address, req, &header).ok();
                match answer.filter(|a| a.status == 201) {
                    Some(answer) => acknowledged.push(Some(answer.json())),
                    None => break,
                }
            }
            acknowledged
        });
        support::eventually("a first declaration", || {
            coord.entries(&format!("{ALPHA}/declarations")).len() >= 3
        });
        let data_dir = labd.kill();
        (data_dir, stream.join().unwrap())
    });
    assert!(acknowledged.len() >= 3 && acknowledged.len() < requests.len());
    let labd = Labd::start_in(data_dir, Vec::new());
    let coord = Coord::new(&labd);
    for (i, req) in requests.iter().enumerate() {
        let retried = coord.send(&declarer, req);
        assert!(
            retried.status == 200 || retried.status == 201,
            "{}",
            String::from_utf8_lossy(&retried.body)
        );
        let retried = retried.json();
        if let Some(Some(acked)) = acknowledged.get(i) {
            assert_eq!(retried["replayed"], true);
            assert_eq!(retried["declaration"], acked["declaration"]);
            assert_eq!(retried["envelope"], acked["envelope"]);
        }
    }
    // One declaration per operation, whatever was cut off.
    let entries = coord.entries(&format!("{ALPHA}/declarations"));
    let mut ids: Vec<&str> = entries
        .iter()
        .map(|e| e["declaration"]["assertion_id"].as_str().unwrap())
        .collect();
    assert_eq!(ids.len(), requests.len());
    ids.sort();
    ids.dedup();
    assert_eq!(ids.len(), requests.len());
}

/// What a `declare` grant does and does not carry: a worker holding it
/// cites only what it may read, and cannot publish; a reader cannot
/// declare.
#[test]
fn a_declare_grant_is_only_declare() {
    let (_labd, coord) = start("coord-declare-authority");
    let content = coord.measured_alpha();
    let admin = coord.admin();
    let body = json!({ "operation_id": "project-beta", "label": "beta" });
    coord.ok(&admin, &Req::json("create_project", &body), 201);
    let note = json!({
        "operation_id": "n-1", "path": labels("projects/beta/snapshots/s"),
        "profile": "lab/finding/1", "record": { "x": 1 },
    });
    let noted = coord.ok(&admin, &Req::json("publish", &note), 201);
    let evidence = noted["record"]["entry"].clone();
    // Declare and read on alpha only: beta's record cannot be cited.
    let worker = coord.holder(30, &[GrantKind::Declare, GrantKind::Read], "projects/alpha");
    let statement = json!({ "property": "p", "value": 1, "evidence": [evidence] });
    coord
        .declare(&worker, &declaration("w-1", ALPHA, statement.clone()))
        .assert_error(403, "denied");
    assert!(coord.entries(&format!("{ALPHA}/declarations")).is_empty());
    // With read on beta it may.
    let mut wider = worker.clone();
    wider.grants.push(coord.grant(
        &wider.key,
        GrantKind::Read,
        "projects/beta",
        now() + support::coord::DAY,
    ));
    let response = coord.declare(&wider, &declaration("w-1", ALPHA, statement));
    assert_eq!(
        response.status,
        201,
        "{}",
        String::from_utf8_lossy(&response.body)
    );
    // The declare grant does not publish.
    let publish = json!({
        "operation_id": "w-2", "path": labels("projects/alpha/snapshots/s"),
        "profile": "lab/finding/1", "record": { "x": 1 },
    });
    coord
        .send(&worker, &Req::json("publish", &publish))
        .assert_error(403, "denied");
    let artifact = json!({ "operation_id": "w-3", "path": labels("projects/alpha/artifacts/a2"), "artifact": content["artifact"] });
    coord
        .send(&worker, &Req::json("create_artifact", &artifact))
        .assert_error(403, "denied");
    // Compose is `publish` too: refused, or not served by this source.
    let compose = json!({
        "operation_id": "w-4", "path": labels("projects/alpha/views/v"),
        "selections": [], "rules": {}, "interpretation_profile": "coord/view/1",
    });
    let response = coord.send(&worker, &Req::json("compose", &compose));
    if response.status == 500 {
        response.assert_error(500, "not_implemented");
    } else {
        response.assert_error(403, "denied");
    }
    // A reader cannot declare.
    let reader = coord.holder(31, &[GrantKind::Read], "projects/alpha");
    coord
        .declare(&reader, &declaration("r-1", ALPHA, license("MIT")))
        .assert_error(403, "denied");
    assert_eq!(coord.entries(&format!("{ALPHA}/declarations")).len(), 1);
}

/// Without the root's signing key no admission can be signed: every
/// other check passes, and the answer is `unavailable`, appending nothing.
#[test]
fn without_the_roots_signing_key_declare_is_unavailable() {
    let root = support::coord::key(77);
    let principal = Principal::of(&root).to_string();
    let labd = Labd::start("coord-declare-no-key", &["--coord-root-key", &principal]);
    let client = labd.coord();
    let coord = Coord {
        audience: format!("http://{}", client.address),
        client,
        root,
    };
    coord.measured_alpha();
    let declarer = coord.holder(10, &[GrantKind::Declare, GrantKind::Read], "projects/alpha");
    let response = coord.declare(&declarer, &declaration("d-1", ALPHA, license("MIT")));
    response.assert_error(503, "unavailable");
    assert!(coord.entries(&format!("{ALPHA}/declarations")).is_empty());
}
