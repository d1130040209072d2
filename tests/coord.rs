//! The coordination service over the wire: operational routes, the
//! authentication matrix, the request rules, and the operations of part 1.

use crate::crash::{crash_under_load, random_threshold, until_one_in_flight, Crash, Crashable};
use crate::support;
use crate::support::coord::{
    key, labels, nonce, now, request_bytes, send_half, start, Coord, Holder, Req, DAY, WORLD,
};
use crate::support::{name_of, Labd, Response};
use crate::swap::{across_reload, HalfSent, SwapFiles};
use lab_coord_auth::{
    issue_grant, issue_grant_unchecked, Grant, GrantFields, GrantKind, Principal,
};
use serde_json::{json, Value};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;

impl Coord {
    /// Retains `bytes` under a retained descriptor; returns (bytes, type).
    fn retain(&self, who: &Holder, path: &str, bytes: &[u8]) -> (String, String) {
        let descriptor = self.retain_typed(who, path, b"{\"interpretation\":\"text\"}", None);
        let artifact = self.retain_typed(who, path, bytes, Some(&descriptor));
        (artifact, descriptor)
    }

    /// Retains `bytes` under the type `kind`; a descriptor may name itself
    /// (it is retained by the time its type is checked).
    fn retain_typed(&self, who: &Holder, path: &str, bytes: &[u8], kind: Option<&str>) -> String {
        let kind = kind
            .map(String::from)
            .unwrap_or_else(|| support::name_of(bytes));
        let req = Req::raw("retain", bytes.to_vec())
            .path(path)
            .string("type", &kind);
        let answer = self.ok(who, &req, 200);
        assert_eq!(answer["type"], kind);
        answer["bytes"].as_str().unwrap().to_string()
    }
}

fn assert_service_headers(response: &Response) {
    assert_eq!(response.header("lab-service"), Some("coord"));
    assert_eq!(response.header("lab-contract"), Some("2026-09-19"));
}

fn project(coord: &Coord, who: &Holder, label: &str) -> Value {
    let body = json!({ "operation_id": format!("project-{label}"), "label": label });
    coord.ok(who, &Req::json("create_project", &body), 201)
}

fn publish_body(op: &str, path: &str, record: Value) -> Value {
    json!({ "operation_id": op, "path": labels(path), "profile": "lab/finding/1", "record": record })
}

#[test]
fn operational_routes_report_the_world() {
    let (labd, coord) = start("coord-operational");
    let livez = coord.client.get("/livez");
    assert_eq!(livez.status, 200);
    assert_service_headers(&livez);
    let identity = &livez.json()["identity"];
    assert!(identity["root_id"].as_str().unwrap().starts_with("rt_"));
    assert!(identity["world_space_id"]
        .as_str()
        .unwrap()
        .starts_with("spc_"));
    assert!(identity["journal_instance_id"]
        .as_str()
        .unwrap()
        .starts_with("jinst_"));
    assert_eq!(identity["world"], WORLD);

    let health = coord.client.get("/healthz");
    assert_eq!(
        health.status,
        200,
        "{}",
        String::from_utf8_lossy(&health.body)
    );
    let health = health.json();
    let checks: Vec<&str> = health["checks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["name"].as_str().unwrap())
        .collect();
    assert_eq!(checks, ["journal", "bytes", "storage"]);

    // A header on an operational route is ignored.
    let describe = coord
        .client
        .send("GET /describe HTTP/1.1\nsvc-auth: garbage", None);
    assert_eq!(describe.status, 200);
    let describe = describe.json();
    assert_eq!(describe["service"], "coord");
    assert_eq!(describe["contract"], "2026-09-19");
    assert_eq!(describe["identity"], *identity);
    assert_eq!(describe["bindings"]["ws"]["subprotocol"], "coord");
    let files = describe["files"].as_array().unwrap();
    for file in files {
        let served = coord
            .client
            .get(&format!("/describe/{}", file.as_str().unwrap()));
        assert_eq!(served.status, 200);
    }
    for needed in [
        "SURFACE.md",
        "HTTP.md",
        "WS.md",
        "TOOLS.md",
        "operations.json",
        "openapi.json",
    ] {
        assert!(files.iter().any(|f| f == needed), "{needed} is served");
    }
    coord
        .client
        .get("/describe/nope.md")
        .assert_error(404, "not_found");

    // The journal holds the world at /worlds/<world> with its organizers.
    let journal = labd.journal();
    let root_id = identity["root_id"].as_str().unwrap();
    for path in [
        json!(["worlds", WORLD]),
        json!(["worlds", WORLD, "projects"]),
        json!(["worlds", WORLD, "tools"]),
        json!(["worlds", WORLD, "campaigns"]),
    ] {
        let resolved = journal.post_json(
            "/v1/resolve",
            &json!({ "root_id": root_id, "path": path }).to_string(),
        );
        assert!(resolved.json()["space"].is_object(), "{path}");
    }
}

#[test]
fn routes_methods_and_removed_verbs() {
    let (_labd, coord) = start("coord-routes");
    for removed in [
        "/v1/fork",
        "/v1/list",
        "/v1/history",
        "/v1/view",
        "/v1/nope",
        "/v1//entries",
        "/v1/../livez",
    ] {
        let response = coord.client.get(removed);
        response.assert_error(404, "not_found");
        assert_service_headers(&response);
    }
    let wrong = coord.client.post_json("/v1/entries", "{}");
    assert_eq!(wrong.status, 405);
    assert_eq!(wrong.header("allow"), Some("GET"));
    let wrong = coord.client.get("/v1/publish");
    assert_eq!(wrong.status, 405);
    assert_eq!(wrong.header("allow"), Some("POST"));
}

#[test]
fn parameters_and_bodies_are_validated_before_the_proof() {
    let (_labd, coord) = start("coord-rules");
    let field = |r: &Response| r.json()["details"]["field"].as_str().map(String::from);
    // Rule 5 and the written form of what the signing record carries come
    // before the proof: these are 400 without one.
    for (target, want) in [
        ("/v1/entries", Some("path")),
        ("/v1/entries?path=", Some("path")),
        ("/v1/entries?path=a&nope=1", Some("nope")),
        ("/v1/entries?path=a&limit=1&limit=1", Some("limit")),
        ("/v1/entries?path=a&after=01", Some("after")),
        ("/v1/entries?path=a&limit=ten", Some("limit")),
        ("/v1/entries?path=a&after=9007199254740992", Some("after")),
        (
            "/v1/get?root_id=rt_x&space_id=spc_00000000000000000000000000000000&position=1",
            Some("root_id"),
        ),
        ("/v1/fetch?path=a&bytes=sha256:xyz", Some("bytes")),
    ] {
        let response = coord.client.get(target);
        response.assert_error(400, "invalid");
        assert_eq!(field(&response).as_deref(), want, "{target}");
    }
    // Read selectors are not parameters of writes.
    coord
        .client
        .post_json("/v1/publish?through=1", "{}")
        .assert_error(400, "invalid");
    coord
        .client
        .post(
            "/v1/projects",
            Some("text/plain"),
            br#"{"operation_id":"a","label":"p"}"#,
        )
        .assert_error(400, "invalid");
    // A body over 64 MiB is 413 with an `invalid` envelope.
    let huge = coord.client.send(
        "POST /v1/publish HTTP/1.1\ncontent-type: application/json\ncontent-length: 67108865",
        None,
    );
    huge.assert_error(413, "invalid");
    // Well-formed and unsigned: now the proof is missing.
    coord
        .client
        .post_json("/v1/projects", r#"{"operation_id":"a","label":"p"}"#)
        .assert_error(401, "unverified");
}

/// A failed proof evaluates nothing: the domain rules of the parameters
/// (rules 6 to 8), the body's decoding and the layout follow verification,
/// so the same request is 401 without a valid proof and 400 with one.
#[test]
fn domain_rules_and_bodies_follow_the_proof() {
    let (_labd, coord) = start("coord-order");
    let admin = coord.admin();
    let field = |r: &Response| r.json()["details"]["field"].as_str().map(String::from);
    let root_id = "rt_00000000000000000000000000000000";
    let space_id = "spc_00000000000000000000000000000000";
    let reads = [
        (Req::read("entries").path("a").int("limit", 129), "limit"),
        (Req::read("entries").path("a").int("after", -1), "after"),
        (
            Req::read("entries")
                .path("a")
                .int("after", 3)
                .int("through", 2),
            "after",
        ),
        (Req::read("children").int("through", -4), "through"),
        (
            Req::read("get")
                .string("root_id", root_id)
                .string("space_id", space_id)
                .int("position", 0),
            "position",
        ),
    ];
    let raw = |op: &str, body: &str| Req::raw(op, body);
    let bodies = [
        (
            raw(
                "create_project",
                r#"{"operation_id":"a","label":"p","extra":1}"#,
            ),
            Some("extra"),
        ),
        (
            raw("create_project", r#"{"operation_id":"a","label":"p"} x"#),
            None,
        ),
        (
            raw(
                "create_project",
                r#"{"operation_id":"a","operation_id":"b","label":"p"}"#,
            ),
            Some("operation_id"),
        ),
        (
            raw(
                "create_artifact",
                r#"{"operation_id":"a","path":["projects","p","artifacts","x"],"artifact":{"bytes":"sha256:00","bytes":"sha256:00","type":"x"}}"#,
            ),
            Some("artifact.bytes"),
        ),
        (
            raw("create_project", r#"{"operation_id":"a b","label":"p"}"#),
            Some("operation_id"),
        ),
        (
            raw("create_project", r#"{"operation_id":"a"}"#),
            Some("label"),
        ),
        (raw("create_project", "not json"), None),
    ];
    for (req, want) in &reads {
        // Unsigned, forged: 401 and nothing else.
        coord
            .send_with_header(req, None)
            .assert_error(401, "unverified");
        let mut forged = coord.header(&admin, req, now(), &nonce());
        forged.replace_range(forged.len() - 8.., "AAAAAAA=");
        coord
            .send_with_header(req, Some(&forged))
            .assert_error(401, "unverified");
        // Signed: the domain rule answers, naming the parameter.
        let response = coord.send(&admin, req);
        response.assert_error(400, "invalid");
        assert_eq!(field(&response).as_deref(), Some(*want), "{}", req.query());
    }
    for (req, want) in &bodies {
        coord
            .send_with_header(req, None)
            .assert_error(401, "unverified");
        let response = coord.send(&admin, req);
        response.assert_error(400, "invalid");
        assert_eq!(
            field(&response).as_deref(),
            *want,
            "{}",
            String::from_utf8_lossy(&req.body())
        );
    }
    // Structural labels and layout positions: 401 unsigned, 400 signed.
    let structural = Req::json(
        "create_project",
        &json!({ "operation_id": "a", "label": "artifacts" }),
    );
    coord
        .send_with_header(&structural, None)
        .assert_error(401, "unverified");
    let response = coord.send(&admin, &structural);
    response.assert_error(400, "structural");
    assert_eq!(response.json()["details"]["label"], "artifacts");
    project(&coord, &admin, "alpha");
    let protected = Req::json(
        "publish",
        &publish_body("p-1", "projects/alpha/views/v", json!({"x": 1})),
    );
    coord
        .send_with_header(&protected, None)
        .assert_error(401, "unverified");
    coord
        .send(&admin, &protected)
        .assert_error(400, "structural");
    let catalog = Req::json(
        "publish",
        &json!({ "operation_id": "p-2", "path": labels("projects/alpha/snapshots/s"),
                 "profile": "coord/worker-state/1", "record": {} }),
    );
    coord
        .send_with_header(&catalog, None)
        .assert_error(401, "unverified");
    coord
        .send(&admin, &catalog)
        .assert_error(400, "invalid_record");
    // A holder of a narrower grant learns nothing of the layout either:
    // its missing chain answers before the layout is looked at.
    let reader = coord.holder(40, &[GrantKind::Read], "projects/alpha");
    coord.send(&reader, &protected).assert_error(403, "denied");
}

#[test]
fn the_authentication_matrix() {
    let (labd, coord) = start("coord-auth");
    let admin = coord.admin();
    project(&coord, &admin, "alpha");
    let reader = coord.holder(7, &[GrantKind::Read], "projects/alpha");
    let req = Req::read("children").path("projects/alpha");
    assert_eq!(
        coord.ok(&reader, &req, 200)["space"]["path"],
        json!(["projects", "alpha"])
    );

    let unverified = |r: Response| {
        r.assert_error(401, "unverified");
        assert!(r.json().get("details").is_none());
    };
    // Missing and malformed headers.
    unverified(coord.send_with_header(&req, None));
    unverified(coord.send_with_header(&req, Some("*")));
    unverified(coord.send_with_header(&req, Some("e30=")));
    // A signature by another key over the same record.
    let mut forged = req
        .built()
        .carriage(
            &key(99),
            reader.grants.clone(),
            &nonce(),
            now(),
            &coord.audience,
        )
        .unwrap();
    forged.proof.principal = Principal::of(&reader.key);
    unverified(coord.send_with_header(&req, Some(&forged.to_header())));
    // Parameters changed after signing.
    let header = coord.header(&reader, &req, now(), &nonce());
    let changed = req.clone().int("limit", 5);
    unverified(coord.send_with_header(&changed, Some(&header)));
    // Wrong audience.
    let other = Coord {
        client: coord.client,
        audience: "http://elsewhere".into(),
        root: coord.root.clone(),
    };
    unverified(other.send(&reader, &req));
    // Stale and future proofs.
    unverified(coord.send_with_header(
        &req,
        Some(&coord.header(&reader, &req, now() - 400, &nonce())),
    ));
    unverified(coord.send_with_header(
        &req,
        Some(&coord.header(&reader, &req, now() + 400, &nonce())),
    ));
    // A replayed nonce, then the same after a restart.
    let header = coord.header(&reader, &req, now(), &nonce());
    assert_eq!(coord.send_with_header(&req, Some(&header)).status, 200);
    unverified(coord.send_with_header(&req, Some(&header)));
    // A proof from a clock ahead is remembered durably before it is
    // accepted: only the cache can refuse it after a restart.
    let ahead = coord.header(&reader, &req, now() + 120, &nonce());
    assert_eq!(coord.send_with_header(&req, Some(&ahead)).status, 200);
    let labd = labd.kill_and_restart();
    let coord = Coord::new(&labd);
    unverified(coord.send_with_header(&req, Some(&header)));
    unverified(coord.send_with_header(&req, Some(&ahead)));
    // A proof signed now, after the restart, is fresh.
    assert_eq!(coord.send(&reader, &req).status, 200);

    // Body changed after signing.
    let body = publish_body("op-1", "projects/alpha/snapshots/s", json!({"x": 1}));
    let publish = Req::json("publish", &body);
    let header = coord.header(&admin, &publish, now(), &nonce());
    let tampered = Req::json(
        "publish",
        &publish_body("op-1", "projects/alpha/snapshots/s", json!({"x": 2})),
    );
    unverified(coord.send_with_header(&tampered, Some(&header)));

    let denied = |r: Response| {
        r.assert_error(403, "denied");
        assert!(r.json().get("details").is_none());
    };
    // An expired grant.
    let expired = Holder {
        key: key(8),
        grants: vec![coord.grant(&key(8), GrantKind::Read, "", now() - 1)],
    };
    denied(coord.send(&expired, &req));
    // A sibling path, another kind.
    let sibling = coord.holder(9, &[GrantKind::Read], "projects/beta");
    denied(coord.send(&sibling, &req));
    let publisher = coord.holder(10, &[GrantKind::Publish], "projects/alpha");
    denied(coord.send(&publisher, &req));
    // A delegated chain: valid, broken (parent not carried), widened.
    let delegate = coord.holder(11, &[GrantKind::Read], "projects/alpha");
    let worker = key(12);
    let child = issue_grant(
        &delegate.key,
        WORLD,
        GrantFields {
            principal: Principal::of(&worker),
            kind: GrantKind::Read,
            path: labels("projects/alpha"),
            valid_until: now() + 3600,
        },
        Some(&delegate.grants[0]),
    )
    .unwrap();
    let chained = Holder {
        key: worker.clone(),
        grants: vec![delegate.grants[0].clone(), child.clone()],
    };
    assert_eq!(coord.send(&chained, &req).status, 200);
    let broken = Holder {
        key: worker.clone(),
        grants: vec![child],
    };
    denied(coord.send(&broken, &req));
    let widened = issue_grant_unchecked(
        &delegate.key,
        WORLD,
        GrantFields {
            principal: Principal::of(&worker),
            kind: GrantKind::Read,
            path: vec![],
            valid_until: now() + 3600,
        },
        Some(&delegate.grants[0].digest()),
    )
    .unwrap();
    let widened = Holder {
        key: worker,
        grants: vec![delegate.grants[0].clone(), widened],
    };
    let world_req = Req::read("children");
    denied(coord.send(&widened, &world_req));

    // Denied never reveals existence: the same answer for a path that
    // exists and one that does not.
    denied(coord.send(&sibling, &Req::read("entries").path("projects/alpha")));
    denied(coord.send(&sibling, &Req::read("entries").path("projects/nowhere")));
    // A caller who may read the world learns not_found.
    let world_reader = coord.holder(13, &[GrantKind::Read], "");
    coord
        .send(
            &world_reader,
            &Req::read("entries").path("projects/nowhere"),
        )
        .assert_error(404, "not_found");
    // Coordinates: unknown space is not_found for a world reader, denied for
    // a reader of one project.
    let unknown = Req::read("get")
        .string("root_id", "rt_00000000000000000000000000000000")
        .string("space_id", "spc_00000000000000000000000000000000")
        .int("position", 1);
    coord
        .send(&world_reader, &unknown)
        .assert_error(404, "not_found");
    denied(coord.send(&reader, &unknown));
}

/// The coordination service's value of metric `name` (labelled by the
/// service alone).
fn coord_metric(labd: &Labd, name: &str) -> u64 {
    let text = String::from_utf8(labd.coord_management().get("/metrics").body).unwrap();
    let prefix = format!("{name}{{service=\"coord\"}} ");
    text.lines()
        .find_map(|line| line.strip_prefix(&prefix))
        .unwrap_or_else(|| panic!("no {name} in the metrics:\n{text}"))
        .parse()
        .unwrap()
}

#[test]
fn a_replay_across_a_component_reload_is_refused() {
    let files = SwapFiles::new("coord");
    let labd = Labd::start("coord-replay-reload", &["--coord-component", files.arg()]);
    let coord = Coord::new(&labd);
    let admin = coord.admin();
    let req = Req::read("children");
    let header = coord.header(&admin, &req, now(), &nonce());
    assert_eq!(coord.send_with_header(&req, Some(&header)).status, 200);
    let ahead = coord.header(&admin, &req, now() + 120, &nonce());
    assert_eq!(coord.send_with_header(&req, Some(&ahead)).status, 200);
    files.swap(labd.coord_management());
    // The reload kept both pairs: the one kept in memory alone, and the
    // one from a clock ahead.
    coord
        .send_with_header(&req, Some(&header))
        .assert_error(401, "unverified");
    coord
        .send_with_header(&req, Some(&ahead))
        .assert_error(401, "unverified");
    // The reload refuses nothing signed since the start.
    assert_eq!(coord.send(&admin, &req).status, 200);
}

#[test]
fn a_full_replay_table_remembers_pairs_in_the_store() {
    // The table is one host's memory: on a shared store every pair goes to
    // the store (tests/shared_store.rs), so this runs on LMDB.
    let labd = Labd::start(
        "coord-replay-full",
        &["--replay-table-pairs", "2", "--store", "lmdb"],
    );
    let coord = Coord::new(&labd);
    let admin = coord.admin();
    let req = Req::read("children");
    assert_eq!(coord_metric(&labd, "lab_replay_table_bound"), 2);
    let headers: Vec<String> = (0..4)
        .map(|_| coord.header(&admin, &req, now(), &nonce()))
        .collect();
    for header in &headers {
        assert_eq!(coord.send_with_header(&req, Some(header)).status, 200);
    }
    // The table held its bound, and the pairs past it were left to the
    // store.
    assert_eq!(coord_metric(&labd, "lab_replay_table_pairs"), 2);
    assert!(coord_metric(&labd, "lab_replay_table_full_total") >= 2);
    // Every pair is refused again, the ones kept in the table and the ones
    // in the store alike.
    for header in &headers {
        coord
            .send_with_header(&req, Some(header))
            .assert_error(401, "unverified");
    }
    // A proof from a clock ahead, left to the store by the full table, is
    // refused after a restart too (the start rule does not cover it).
    let full_before = coord_metric(&labd, "lab_replay_table_full_total");
    let ahead = coord.header(&admin, &req, now() + 120, &nonce());
    assert_eq!(coord.send_with_header(&req, Some(&ahead)).status, 200);
    assert_eq!(
        coord_metric(&labd, "lab_replay_table_full_total"),
        full_before + 1
    );
    let labd = labd.kill_and_restart();
    let coord = Coord::new(&labd);
    coord
        .send_with_header(&req, Some(&ahead))
        .assert_error(401, "unverified");
    assert_eq!(coord.send(&admin, &req).status, 200);
}

#[test]
fn projects_artifacts_and_content() {
    let (labd, coord) = start("coord-artifacts");
    let admin = coord.admin();
    let created = project(&coord, &admin, "alpha");
    assert_eq!(created["space"]["path"], json!(["projects", "alpha"]));
    assert_eq!(created["replayed"], false);
    // Replay, mismatch, taken label.
    let body = json!({ "operation_id": "project-alpha", "label": "alpha" });
    let replay = coord.ok(&admin, &Req::json("create_project", &body), 200);
    assert_eq!(replay["space"], created["space"]);
    assert_eq!(replay["replayed"], true);
    let other = json!({ "operation_id": "project-alpha", "label": "beta" });
    coord
        .send(&admin, &Req::json("create_project", &other))
        .assert_error(409, "idempotency_mismatch");
    let taken = json!({ "operation_id": "another", "label": "alpha" });
    coord
        .send(&admin, &Req::json("create_project", &taken))
        .assert_error(409, "exists");
    // The project's organizers.
    let children = coord.ok(&admin, &Req::read("children").path("projects/alpha"), 200);
    let keys: Vec<&str> = children["children"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["key"].as_str().unwrap())
        .collect();
    assert_eq!(
        keys,
        [
            "artifacts",
            "applications",
            "snapshots",
            "inventories",
            "views",
            "workers"
        ]
    );

    // Retain, then name the content as an artifact.
    let content = b"measured: 42\n".repeat(1000);
    let (bytes, kind) = coord.retain(&admin, "projects/alpha", &content);
    assert_eq!(bytes, support::name_of(&content));
    let artifact = json!({ "bytes": bytes, "type": kind });
    let body = json!({ "operation_id": "a1", "path": labels("projects/alpha/artifacts/a1"), "artifact": artifact });
    let req = Req::json("create_artifact", &body);
    let made = coord.ok(&admin, &req, 201);
    assert_eq!(made["content"]["entry"]["position"], 1);
    assert_eq!(made["content"]["artifact"], artifact);
    assert_eq!(
        made["declarations"]["path"],
        json!(["projects", "alpha", "artifacts", "a1", "declarations"])
    );
    let again = coord.ok(&admin, &req, 200);
    assert_eq!(again["replayed"], true);
    assert_eq!(again["content"], made["content"]);
    let changed = json!({ "operation_id": "a1", "path": labels("projects/alpha/artifacts/a1"), "artifact": { "bytes": kind, "type": kind } });
    coord
        .send(&admin, &Req::json("create_artifact", &changed))
        .assert_error(409, "idempotency_mismatch");
    let taken = json!({ "operation_id": "a1-other", "path": labels("projects/alpha/artifacts/a1"), "artifact": artifact });
    coord
        .send(&admin, &Req::json("create_artifact", &taken))
        .assert_error(409, "exists");
    let missing = json!({ "operation_id": "a2", "path": labels("projects/alpha/artifacts/a2"), "artifact": { "bytes": support::name_of(b"never"), "type": kind } });
    coord
        .send(&admin, &Req::json("create_artifact", &missing))
        .assert_error(409, "unresolved");
    let no_project = json!({ "operation_id": "a3", "path": labels("projects/nope/artifacts/a3"), "artifact": artifact });
    coord
        .send(&admin, &Req::json("create_artifact", &no_project))
        .assert_error(404, "not_found");

    // Entries decode the content fact.
    let entries = coord.entries_as(&admin, "projects/alpha/artifacts/a1");
    assert_eq!(entries.len(), 2, "content, then the declarations child");
    assert_eq!(entries[0]["content"]["artifact"], artifact);
    assert_eq!(entries[0]["content"]["entry"], made["content"]["entry"]);
    assert_eq!(entries[1]["origin"], "create");
    assert_eq!(entries[1]["child"]["key"], "declarations");

    // Fetch streams the named bytes; unnamed bytes do not resolve.
    let fetch = Req::read("fetch")
        .path("projects/alpha/artifacts/a1")
        .string("bytes", &bytes);
    let response = coord.send(&admin, &fetch);
    assert_eq!(response.status, 200);
    assert_eq!(
        response.header("content-type"),
        Some("application/octet-stream")
    );
    assert_eq!(response.body, content);
    let unnamed = Req::read("fetch")
        .path("projects/alpha/artifacts/a1")
        .string("bytes", &kind);
    coord.send(&admin, &unnamed).assert_error(409, "unresolved");

    // Publish may not write an artifact space.
    let body = publish_body("p1", "projects/alpha/artifacts/a1", json!({}));
    coord
        .send(&admin, &Req::json("publish", &body))
        .assert_error(400, "structural");
    // Retain under a type that is not retained.
    let req = Req::raw("retain", b"x".to_vec())
        .with_content_type(None)
        .path("projects/alpha")
        .string("type", &support::name_of(b"no such descriptor"));
    let before = labd.committed_blobs();
    coord.send(&admin, &req).assert_error(400, "invalid_record");
    assert_eq!(
        labd.committed_blobs(),
        before,
        "a refused retain retains nothing"
    );
}

/// A body past the per-object limit (`--blob-cap`) is refused while it is
/// staged, and leaves nothing behind.
#[test]
fn a_retain_over_the_per_object_limit_stages_nothing() {
    let labd = Labd::start("coord-retain-cap", &["--blob-cap", "65536"]);
    let coord = Coord::new(&labd);
    let admin = coord.admin();
    project(&coord, &admin, "alpha");
    let descriptor = coord.retain_typed(&admin, "projects/alpha", b"{\"kind\":\"raw\"}", None);
    let retain = |body: Vec<u8>| {
        Req::raw("retain", body)
            .path("projects/alpha")
            .string("type", &descriptor)
    };
    let before = labd.committed_blobs();
    let over = support::pseudo_random(65_537, 3);
    coord
        .send(&admin, &retain(over))
        .assert_error(413, "limit_exceeded");
    assert_eq!(labd.committed_blobs(), before);
    support::eventually("no staging file is left", || labd.staging_files() == 0);
    // At the limit it is retained.
    let at = support::pseudo_random(65_536, 4);
    let answer = coord.ok(&admin, &retain(at.clone()), 200);
    assert_eq!(answer["bytes"], support::name_of(&at));
}

/// A retain is judged by the digest of its staged body before anything is
/// named: whoever saw a carriage's grants cannot store bytes with a forged
/// signature.
#[test]
fn a_retain_with_a_failed_proof_retains_nothing() {
    let (labd, coord) = start("coord-forged-retain");
    let admin = coord.admin();
    project(&coord, &admin, "alpha");
    let worker = coord.holder(21, &[GrantKind::Publish], "projects/alpha");
    let descriptor = coord.retain_typed(&worker, "projects/alpha", b"{\"kind\":\"raw\"}", None);
    let retain = |body: Vec<u8>| {
        Req::raw("retain", body)
            .path("projects/alpha")
            .string("type", &descriptor)
    };
    let big = support::pseudo_random(4 << 20, 7);
    let before = labd.committed_blobs();
    assert!(before >= 1, "the descriptor is retained");
    // Signed over other bytes than those sent: the grants would authorize.
    let signed = retain(b"what the signer meant".to_vec());
    let header = coord.header(&worker, &signed, now(), &nonce());
    let sent = retain(big.clone());
    coord
        .send_with_header(&sent, Some(&header))
        .assert_error(401, "unverified");
    // A stale proof over the very bytes sent.
    let header = coord.header(&worker, &sent, now() - 3_600, &nonce());
    coord
        .send_with_header(&sent, Some(&header))
        .assert_error(401, "unverified");
    // Another principal's key signing with the worker's grants.
    let thief = Holder {
        key: key(99),
        grants: worker.grants.clone(),
    };
    coord.send(&thief, &sent).assert_error(403, "denied");
    assert_eq!(labd.committed_blobs(), before, "nothing was named");
    support::eventually("staging files are gone", || labd.staging_files() == 0);
    let stat = labd.bytes().stat(&[&support::name_of(&big)]);
    assert!(stat.is_empty(), "{stat:?}");
    // The same bytes, signed: retained once, under their digest.
    let answer = coord.ok(&worker, &sent, 200);
    assert_eq!(answer["bytes"], support::name_of(&big));
    assert_eq!(labd.committed_blobs(), before + 1);
}

#[test]
fn publish_follows_the_writer_protocol() {
    let (_labd, coord) = start("coord-publish");
    let admin = coord.admin();
    project(&coord, &admin, "alpha");
    let worker = coord.holder(20, &[GrantKind::Publish, GrantKind::Read], "projects/alpha");
    let body = publish_body(
        "f-1",
        "projects/alpha/snapshots/s1",
        json!({ "finding": "ok", "n": 3 }),
    );
    let req = Req::json("publish", &body);
    let first = coord.ok(&worker, &req, 201);
    assert_eq!(first["space_created"], true);
    assert_eq!(first["replayed"], false);
    let record = &first["record"];
    assert_eq!(record["publisher"], Principal::of(&worker.key).to_string());
    assert_eq!(record["profile"], "lab/finding/1");
    assert!(record["request_id"].as_str().unwrap().starts_with("req_"));
    assert!(record["accepted_at"].as_str().unwrap().ends_with('Z'));
    // The payload is retained as canonical JSON under the record's hash.
    let fetch = Req::read("fetch")
        .path("projects/alpha/snapshots/s1")
        .string("bytes", record["hash"].as_str().unwrap());
    assert_eq!(
        coord.send(&worker, &fetch).body,
        br#"{"finding":"ok","n":3}"#
    );

    // A retry with a fresh proof replays the same occurrence and instant.
    let replay = coord.ok(&worker, &req, 200);
    assert_eq!(replay["record"], *record);
    assert_eq!(replay["replayed"], true);
    assert_eq!(replay["space_created"], false);
    // Another publisher's equal operation ID is another request.
    let other = coord.ok(&admin, &req, 201);
    assert_ne!(other["record"]["request_id"], record["request_id"]);
    // Same ID, other content.
    let changed = publish_body(
        "f-1",
        "projects/alpha/snapshots/s1",
        json!({ "finding": "no" }),
    );
    coord
        .send(&worker, &Req::json("publish", &changed))
        .assert_error(409, "idempotency_mismatch");
    // A stale precondition.
    let mut stale = publish_body("f-2", "projects/alpha/snapshots/s1", json!(1));
    stale["expected_cutoff"] = json!(1);
    let refused = coord.send(&worker, &Req::json("publish", &stale));
    refused.assert_error(409, "conflict");
    assert_eq!(
        refused.json()["details"],
        json!({ "expected_cutoff": 1, "actual_cutoff": 2 })
    );
    stale["expected_cutoff"] = json!(2);
    coord.ok(&worker, &Req::json("publish", &stale), 201);
    // Entries decode the records; the current record is the last one.
    let entries = coord.entries_as(&worker, "projects/alpha/snapshots/s1");
    assert_eq!(entries.len(), 3);
    assert_eq!(entries[0]["record"], *record);
    // get by coordinates returns the same entry.
    let entry = &record["entry"];
    let get = Req::read("get")
        .string("root_id", entry["root_id"].as_str().unwrap())
        .string("space_id", entry["space_id"].as_str().unwrap())
        .int("position", 1);
    let got = coord.ok(&worker, &get, 200);
    assert_eq!(got["entry"]["record"], *record);
    assert_eq!(
        got["space"]["path"],
        json!(["projects", "alpha", "snapshots", "s1"])
    );
    let beyond = Req::read("get")
        .string("root_id", entry["root_id"].as_str().unwrap())
        .string("space_id", entry["space_id"].as_str().unwrap())
        .int("position", 99);
    coord.send(&worker, &beyond).assert_error(404, "not_found");
    // Refusals of the destination.
    for (path, code) in [
        ("projects/alpha/workers/w/state", 400),
        ("projects/alpha/views/v", 400),
        ("projects/alpha/misc/x", 400),
        ("projects/nope/snapshots/s", 404),
    ] {
        let body = publish_body("f-9", path, json!(1));
        assert_eq!(
            coord.send(&admin, &Req::json("publish", &body)).status,
            code,
            "{path}"
        );
    }
    let reserved = json!({ "operation_id": "f-10", "path": labels("projects/alpha/snapshots/s2"), "profile": "coord/worker-state/1", "record": {} });
    coord
        .send(&admin, &Req::json("publish", &reserved))
        .assert_error(400, "invalid_record");
    let target = json!({ "operation_id": "f-11", "path": labels("projects/alpha/snapshots/s2"), "profile": "coord/acquisition-target/1", "record": { "locator": "https://example.org/x", "type": "csv", "expected": { "algorithm": "sha256", "hex": "00" } } });
    let refused = coord.send(&admin, &Req::json("publish", &target));
    refused.assert_error(400, "invalid_record");
    assert_eq!(refused.json()["details"]["field"], "record.expected");
}

#[test]
fn concurrent_identical_publishes_admit_one_record() {
    let (_labd, coord) = start("coord-race");
    let admin = coord.admin();
    project(&coord, &admin, "alpha");
    let body = publish_body("race-1", "projects/alpha/snapshots/race", json!({ "n": 1 }));
    let req = Req::json("publish", &body);
    let answers: Vec<Value> = coord.send_together(&admin, &req, 8);
    let created = answers.iter().filter(|a| a["replayed"] == false).count();
    assert_eq!(created, 1, "one admission: {answers:?}");
    for answer in &answers {
        assert_eq!(answer["record"], answers[0]["record"]);
    }
    assert_eq!(
        coord
            .entries_as(&admin, "projects/alpha/snapshots/race")
            .len(),
        1
    );
}

#[test]
fn a_retry_after_kill_9_recovers_the_original_result() {
    a_retry_after_a_crash_recovers_the_original_result(Crash::Kill9);
}

#[test]
fn a_retry_after_a_power_cut_recovers_the_original_result() {
    a_retry_after_a_crash_recovers_the_original_result(Crash::PowerCut);
}

/// One signed request a crash client sent, and what became of it.
struct Sent {
    req: Req,
    acknowledged: Option<Value>,
    in_flight: bool,
}

fn a_retry_after_a_crash_recovers_the_original_result(crash: Crash) {
    until_one_in_flight("publish or artifact", || crash_under_requests(crash));
}

/// Publishers and artifact creators until the crash; after it a retry of
/// each request answers its original result, or settles it once. Answers
/// whether one was in flight.
fn crash_under_requests(crash: Crash) -> bool {
    let mut labd = Crashable::start("coord-crash", &[], crash);
    let coord = Coord::new(&labd);
    let admin = coord.admin();
    project(&coord, &admin, "alpha");
    let (bytes, kind) = coord.retain(&admin, "projects/alpha", b"payload");
    let artifact = json!({ "bytes": bytes, "type": kind });
    let request = |c: usize, n: usize| {
        let id = format!("k-{c}-{n}");
        if n.is_multiple_of(2) {
            Req::json(
                "publish",
                &publish_body(
                    &id,
                    &format!("projects/alpha/snapshots/s{}", c % 3),
                    json!({ "c": c, "n": n }),
                ),
            )
        } else {
            let body = json!({ "operation_id": id, "path": labels(&format!("projects/alpha/artifacts/{id}")), "artifact": artifact });
            Req::json("create_artifact", &body)
        }
    };
    // A publish certainly cut off: its body is half sent at the crash.
    let cut_off = request(99, 0);
    let header = coord.header(&admin, &cut_off, now(), &nonce());
    let half_sent = send_half(coord.client.address, &cut_off, &header);
    // Publishers and artifact creators until the crash.
    let sent = Mutex::new(Vec::new());
    let acknowledged = AtomicUsize::new(0);
    let threshold = random_threshold(10, 60);
    let watch = labd.watch();
    std::thread::scope(|scope| {
        for c in 0..6 {
            let (coord, admin, sent, acknowledged, watch, request) =
                (&coord, &admin, &sent, &acknowledged, &watch, &request);
            scope.spawn(move || {
                for n in 0.. {
                    let req = request(c, n);
                    let header = coord.header(admin, &req, now(), &nonce());
                    let exchange =
                        watch.exchange(coord.client.address, &request_bytes(&req, &header));
                    let acked = exchange.answered(201).map(Response::json);
                    let in_flight = exchange.in_flight(201);
                    let stop = acked.is_none();
                    sent.lock().unwrap().push(Sent {
                        req,
                        acknowledged: acked,
                        in_flight,
                    });
                    if stop {
                        return;
                    }
                    acknowledged.fetch_add(1, Ordering::SeqCst);
                }
            });
        }
        crash_under_load(&mut labd, &acknowledged, threshold);
    });
    drop(half_sent);
    let sent = sent.into_inner().unwrap();
    assert!(
        sent.iter().filter(|s| s.acknowledged.is_some()).count() >= threshold,
        "requests were acknowledged before the crash"
    );
    let caught = sent.iter().any(|s| s.in_flight);
    labd.restart();
    let coord = Coord::new(&labd);
    for s in &sent {
        let retried = coord.send(&admin, &s.req);
        assert!(
            retried.status == 200 || retried.status == 201,
            "{}",
            String::from_utf8_lossy(&retried.body)
        );
        let retried = retried.json();
        if let Some(acked) = &s.acknowledged {
            assert_eq!(retried["replayed"], true, "{} lost", s.req.op());
            let member = if s.req.op() == "publish" {
                "record"
            } else {
                "content"
            };
            assert_eq!(retried[member], acked[member]);
        }
    }
    let retried = coord.send(&admin, &cut_off);
    assert_eq!(retried.status, 201, "the cut-off request left no trace");
    // One record per operation ID, whatever was cut off.
    for leaf in 0..3 {
        let entries = coord.entries_as(&admin, &format!("projects/alpha/snapshots/s{leaf}"));
        let expected = sent
            .iter()
            .map(|s| &s.req)
            .chain([&cut_off])
            .filter(|r| {
                r.op() == "publish"
                    && String::from_utf8_lossy(&r.body())
                        .contains(&format!("snapshots\",\"s{leaf}\""))
            })
            .count();
        assert_eq!(entries.len(), expected, "leaf s{leaf}");
    }
    caught
}

#[test]
fn provisioning_workers_campaigns_and_assignments() {
    let (_labd, coord) = start("coord-provision");
    let admin = coord.admin();
    project(&coord, &admin, "alpha");
    let worker_key = key(30);
    let valid_until = now() + 3600;
    let body = json!({
        "operation_id": "w-1",
        "project": "alpha",
        "worker": "w1",
        "principal": Principal::of(&worker_key).to_string(),
        "permissions": [
            { "kind": "read", "path": ["projects", "alpha"] },
            { "kind": "publish", "path": ["projects", "alpha", "workers", "w1"] },
        ],
        "valid_until": valid_until,
    });
    let req = Req::json("provision_worker", &body);
    let provisioned = coord.ok(&admin, &req, 201);
    assert_eq!(
        provisioned["space"]["path"],
        json!(["projects", "alpha", "workers", "w1"])
    );
    assert_eq!(provisioned["state"]["profile"], "coord/worker-state/1");
    assert_eq!(provisioned["workspace"]["audience"], coord.audience);
    assert_eq!(
        provisioned["workspace"]["principal"],
        Principal::of(&worker_key).to_string()
    );
    let replay = coord.ok(&admin, &req, 200);
    assert_eq!(replay["state"], provisioned["state"]);
    assert_eq!(replay["grants"], provisioned["grants"]);

    // The worker starts from what it was given: its grants work, within
    // their scope only.
    let grants: Vec<Grant> = provisioned["grants"]
        .as_array()
        .unwrap()
        .iter()
        .map(|g| Grant::from_json_bytes(g.to_string().as_bytes()).unwrap())
        .collect();
    let worker = Holder {
        key: worker_key,
        grants,
    };
    let note = publish_body(
        "n-1",
        "projects/alpha/workers/w1/notes/n1",
        json!({ "seen": true }),
    );
    assert_eq!(
        coord.ok(&worker, &Req::json("publish", &note), 201)["space_created"],
        true
    );
    let elsewhere = publish_body("n-2", "projects/alpha/snapshots/s", json!(1));
    coord
        .send(&worker, &Req::json("publish", &elsewhere))
        .assert_error(403, "denied");
    coord.ok(
        &worker,
        &Req::read("entries").path("projects/alpha/workers/w1/state"),
        200,
    );

    // Refusals: outside the project, a provision grant, beyond the
    // provisioner's authority, a taken worker label, an unknown project.
    let mut outside = body.clone();
    outside["operation_id"] = json!("w-2");
    outside["worker"] = json!("w2");
    outside["permissions"] = json!([{ "kind": "read", "path": [] }]);
    coord
        .send(&admin, &Req::json("provision_worker", &outside))
        .assert_error(400, "invalid");
    outside["permissions"] = json!([{ "kind": "provision", "path": ["projects", "alpha"] }]);
    coord
        .send(&admin, &Req::json("provision_worker", &outside))
        .assert_error(400, "invalid");
    outside["permissions"] = json!([]);
    outside["valid_until"] = json!(now() + 2 * DAY);
    coord
        .send(&admin, &Req::json("provision_worker", &outside))
        .assert_error(400, "invalid");
    let mut taken = body.clone();
    taken["operation_id"] = json!("w-3");
    coord
        .send(&admin, &Req::json("provision_worker", &taken))
        .assert_error(409, "exists");
    let mut nowhere = body.clone();
    nowhere["operation_id"] = json!("w-4");
    nowhere["project"] = json!("nope");
    nowhere["permissions"] = json!([]);
    coord
        .send(&admin, &Req::json("provision_worker", &nowhere))
        .assert_error(404, "not_found");

    // A campaign and an assignment with pinned inputs.
    let campaign = json!({ "operation_id": "c-1", "label": "survey", "project": "alpha" });
    let made = coord.ok(&admin, &Req::json("create_campaign", &campaign), 201);
    assert_eq!(made["record"]["profile"], "coord/campaign-state/1");
    assert_eq!(
        coord.ok(&admin, &Req::json("create_campaign", &campaign), 200)["replayed"],
        true
    );
    let input = provisioned["state"]["entry"].clone();
    let assignment = json!({
        "operation_id": "as-1", "campaign": "survey", "assignment": "first", "worker": "w1",
        "inputs": [input], "outputs": [["projects", "alpha", "workers", "w1", "notes", "result"]],
        "brief": "look closely",
    });
    let assigned = coord.ok(&admin, &Req::json("assign", &assignment), 201);
    assert_eq!(assigned["record"]["profile"], "coord/assignment/1");
    assert_eq!(assigned["space_created"], true);
    let mut dangling = assignment.clone();
    dangling["operation_id"] = json!("as-2");
    dangling["assignment"] = json!("second");
    dangling["inputs"] =
        json!([{ "root_id": input["root_id"], "space_id": input["space_id"], "position": 99 }]);
    coord
        .send(&admin, &Req::json("assign", &dangling))
        .assert_error(409, "unresolved");
    dangling["inputs"] = json!([]);
    dangling["worker"] = json!("ghost");
    coord
        .send(&admin, &Req::json("assign", &dangling))
        .assert_error(409, "unresolved");
    dangling["worker"] = json!("w1");
    dangling["outputs"] = json!([["projects", "alpha", "snapshots", "x"]]);
    coord
        .send(&admin, &Req::json("assign", &dangling))
        .assert_error(400, "invalid");
    dangling["outputs"] = json!([]);
    dangling["campaign"] = json!("nope");
    coord
        .send(&admin, &Req::json("assign", &dangling))
        .assert_error(404, "not_found");

    // Retirement is the worker's current state record.
    let retire = json!({ "operation_id": "r-1", "project": "alpha", "worker": "w1" });
    let retired = coord.ok(&admin, &Req::json("retire_worker", &retire), 201);
    assert_eq!(retired["record"]["entry"]["position"], 2);
    let ghost = json!({ "operation_id": "r-2", "project": "alpha", "worker": "ghost" });
    coord
        .send(&admin, &Req::json("retire_worker", &ghost))
        .assert_error(404, "not_found");

    // A snapshot of the project, cited by the digest of its retained
    // manifest.
    let snapshot = coord.ok(&admin, &Req::read("snapshot").path("projects/alpha"), 200);
    assert!(snapshot["manifest"]
        .as_str()
        .unwrap()
        .starts_with("sha256:"));
    assert!(snapshot["spaces"].as_u64().unwrap() > 8);
    let shallow = coord.ok(
        &admin,
        &Req::read("snapshot").path("projects/alpha").int("depth", 0),
        200,
    );
    assert_eq!(shallow["spaces"], 1);
}

#[test]
fn part_two_operations_are_served() {
    let (_labd, coord) = start("coord-part-two");
    // `apply` is served: without a carriage it is unverified, not missing.
    let response = coord.client.post_json("/v1/applications", "{}");
    response.assert_error(401, "unverified");
    // So is the socket: a GET that is no upgrade is refused as such
    // (`coord_ws` covers the binding).
    coord.client.get("/v1/ws").assert_error(400, "invalid");
}

#[test]
fn export_traverses_the_world_and_resumes_by_cursor() {
    let (labd, coord) = start("coord-export");
    let admin = coord.admin();
    // 40 projects of 7 spaces each, and a record: more than one call's
    // 256 spaces.
    for i in 0..40 {
        project(&coord, &admin, &format!("p{i:02}"));
    }
    let body = publish_body("e-1", "projects/p00/snapshots/s", json!({ "x": 1 }));
    coord.ok(&admin, &Req::json("publish", &body), 201);
    let reader = coord.holder(40, &[GrantKind::Read], "");
    coord
        .send(&reader, &Req::read("export"))
        .assert_error(403, "denied");

    let mut seen = Vec::new();
    let mut entries = 0;
    let mut cursor: Option<String> = None;
    let mut calls = 0;
    loop {
        let mut req = Req::read("export");
        if let Some(c) = &cursor {
            req = req.string("cursor", c);
        }
        let page = coord.ok(&admin, &req, 200);
        calls += 1;
        entries += page["entries"].as_u64().unwrap();
        // The manifest names the chunks and the covered prefixes.
        let manifest = labd
            .bytes()
            .get(&format!("/v1/blobs/{}", page["manifest"].as_str().unwrap()));
        let manifest: Value = serde_json::from_slice(&manifest.body).unwrap();
        assert_eq!(manifest["chunks"], page["chunks"]);
        for covered in manifest["spaces"].as_array().unwrap() {
            seen.push(covered["space"]["path"].clone());
        }
        for chunk in page["chunks"].as_array().unwrap() {
            let text = labd
                .bytes()
                .get(&format!("/v1/blobs/{}", chunk.as_str().unwrap()))
                .body;
            for line in String::from_utf8(text).unwrap().lines() {
                let stretch: Value = serde_json::from_str(line).unwrap();
                assert!(stretch["entries"].is_array());
            }
        }
        if page["complete"] == true {
            assert!(page.get("next_cursor").is_none());
            assert_eq!(page["incomplete"], json!([]));
            break;
        }
        assert!(!page["incomplete"].as_array().unwrap().is_empty());
        let next = page["next_cursor"].as_str().unwrap().to_string();
        // A tampered cursor, or one for another scope, is refused.
        let mut forged = next.clone().into_bytes();
        forged[5] = if forged[5] == b'A' { b'B' } else { b'A' };
        let forged = String::from_utf8(forged).unwrap();
        coord
            .send(&admin, &Req::read("export").string("cursor", &forged))
            .assert_error(400, "invalid_cursor");
        coord
            .send(
                &admin,
                &Req::read("export")
                    .path("projects/p00")
                    .string("cursor", &next),
            )
            .assert_error(400, "invalid_cursor");
        cursor = Some(next);
    }
    assert!(calls >= 2, "the traversal took {calls} calls");
    // World, 3 organizers, 40 projects of 7, one record leaf: each once,
    // in depth-first preorder (the world first).
    assert_eq!(seen.len(), 1 + 3 + 40 * 7 + 1);
    assert_eq!(seen[0], json!([]));
    let unique: std::collections::HashSet<String> = seen.iter().map(|p| p.to_string()).collect();
    assert_eq!(unique.len(), seen.len());
    // Every creation entry and the record: one per non-world space, plus 1.
    assert_eq!(entries as usize, seen.len() - 1 + 1);
}

/// The check named `name` among `checks`: whether it held, and its detail.
fn check_of<'a>(checks: &'a [lab_coord_client::Check], name: &str) -> &'a lab_coord_client::Check {
    checks
        .iter()
        .find(|c| c.name == name)
        .unwrap_or_else(|| panic!("no check {name} in {checks:?}"))
}

/// `value` as RFC 8785 bytes, and their name.
fn retained(value: &Value) -> (String, Vec<u8>) {
    let bytes = lab_coord_auth::canonical_json(value);
    (support::name_of(&bytes), bytes)
}

#[test]
fn export_verifies_offline_and_tampering_is_refused() {
    let (labd, coord) = start("coord-export-verify");
    let admin = coord.admin();
    project(&coord, &admin, "alpha");
    let body = publish_body("v-1", "projects/alpha/snapshots/s", json!({ "x": 1 }));
    coord.ok(&admin, &Req::json("publish", &body), 201);
    let page = coord.ok(&admin, &Req::read("export"), 200);
    assert_eq!(page["complete"], true, "{page}");
    let manifest = page["manifest"].as_str().unwrap().to_string();
    let chunks: Vec<String> = page["chunks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c.as_str().unwrap().to_string())
        .collect();
    assert_eq!(chunks.len(), 1, "a small world fits one chunk");
    let bytes = labd.bytes();
    let mut served = std::collections::HashMap::new();
    let mut from_service = |name: &str| {
        let response = bytes.get(&format!("/v1/blobs/{name}"));
        served.insert(name.to_string(), ());
        (response.status == 200).then_some(response.body)
    };

    // The export as retained: every check holds, each blob fetched.
    let checks = lab_coord_client::verify_export(&[&manifest], &mut from_service);
    assert_eq!(checks.len(), 6, "{checks:?}");
    assert!(checks.iter().all(|c| c.passed), "{checks:?}");
    assert!(served.contains_key(&manifest) && served.contains_key(&chunks[0]));

    let chunk = bytes.get(&format!("/v1/blobs/{}", chunks[0])).body;
    let manifest_bytes = bytes.get(&format!("/v1/blobs/{manifest}")).body;
    let manifest_value: Value = serde_json::from_slice(&manifest_bytes).unwrap();

    // A chunk altered in transit: its digest is not its name.
    let mut altered = chunk.clone();
    let at = altered.iter().position(|&b| b == b'"').unwrap() + 1;
    altered[at] ^= 1;
    let mut tampered = |name: &str| {
        if name == chunks[0] {
            Some(altered.clone())
        } else if name == manifest {
            Some(manifest_bytes.clone())
        } else {
            None
        }
    };
    let checks = lab_coord_client::verify_export(&[&manifest], &mut tampered);
    let failed = check_of(&checks, "chunks");
    assert!(
        !failed.passed && failed.detail.contains("hash"),
        "{checks:?}"
    );

    // A forged export, consistent digests but the record left out of the
    // leaf's stretch: the leaf's prefix is short of its `through`.
    let leaf = json!(["projects", "alpha", "snapshots", "s"]);
    let mut lines: Vec<Value> = String::from_utf8(chunk.clone())
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let stretch = lines
        .iter_mut()
        .find(|l| l["space"]["path"] == leaf)
        .expect("the leaf's stretch");
    assert!(stretch["through"].as_u64().unwrap() >= 1, "{stretch}");
    stretch["entries"].as_array_mut().unwrap().pop();
    let forged_chunk: Vec<u8> = lines
        .iter()
        .flat_map(|l| format!("{l}\n").into_bytes())
        .collect();
    let forged_name = support::name_of(&forged_chunk);
    let mut forged_manifest = manifest_value.clone();
    forged_manifest["chunks"] = json!([forged_name]);
    let (forged_manifest_name, forged_manifest_bytes) = retained(&forged_manifest);
    let mut forged = |name: &str| {
        if name == forged_name {
            Some(forged_chunk.clone())
        } else if name == forged_manifest_name {
            Some(forged_manifest_bytes.clone())
        } else {
            None
        }
    };
    let checks = lab_coord_client::verify_export(&[&forged_manifest_name], &mut forged);
    assert!(check_of(&checks, "chunks").passed, "{checks:?}");
    let failed = check_of(&checks, "positions");
    assert!(
        !failed.passed && failed.detail.contains("snapshots"),
        "{checks:?}"
    );

    // A manifest that drops the leaf from its covered spaces while calling
    // itself complete: its parent's creation entry names an uncovered child.
    let mut dropped = manifest_value.clone();
    let spaces = dropped["spaces"].as_array_mut().unwrap();
    let before = spaces.len();
    spaces.retain(|s| s["space"]["path"] != leaf);
    assert_eq!(spaces.len(), before - 1);
    let (dropped_name, dropped_bytes) = retained(&dropped);
    let mut dropping = |name: &str| {
        if name == dropped_name {
            Some(dropped_bytes.clone())
        } else if name == chunks[0] {
            Some(chunk.clone())
        } else {
            None
        }
    };
    let checks = lab_coord_client::verify_export(&[&dropped_name], &mut dropping);
    assert!(check_of(&checks, "positions").passed, "{checks:?}");
    let failed = check_of(&checks, "children");
    assert!(
        !failed.passed && failed.detail.contains("does not cover"),
        "{checks:?}"
    );
}

#[test]
fn read_selectors_cursors_and_preconditions_are_checked() {
    let (_labd, coord) = start("coord-selectors");
    let admin = coord.admin();
    project(&coord, &admin, "alpha");
    let mut batch = publish_body("b-1", "projects/alpha/snapshots/s", json!(1));
    coord.ok(&admin, &Req::json("publish", &batch), 201);
    batch["operation_id"] = json!("b-2");
    coord.ok(&admin, &Req::json("publish", &batch), 201);
    let entries = |through: i64| {
        Req::read("entries")
            .path("projects/alpha/snapshots/s")
            .int("through", through)
    };
    coord.ok(&admin, &entries(2), 200);
    let beyond = coord.send(&admin, &entries(3));
    beyond.assert_error(400, "invalid");
    // A continuation must resend its first page's `through`.
    let continuation = Req::read("entries")
        .path("projects/alpha/snapshots/s")
        .int("after", 1);
    coord
        .send(&admin, &continuation)
        .assert_error(400, "invalid");
    let children = Req::read("children")
        .path("projects/alpha")
        .string("cursor", "bm90IGEgY3Vyc29y");
    coord
        .send(&admin, &children)
        .assert_error(400, "invalid_cursor");
    // A continuation resends its first page's `through`; another is invalid.
    let first = coord.ok(
        &admin,
        &Req::read("children").path("projects/alpha").int("limit", 2),
        200,
    );
    let cursor = first["next_cursor"].as_str().unwrap();
    let through = first["through"].as_i64().unwrap();
    let next = Req::read("children")
        .path("projects/alpha")
        .string("cursor", cursor);
    coord.ok(&admin, &next.clone().int("through", through), 200);
    let disagreeing = next.int("through", through - 1);
    coord
        .send(&admin, &disagreeing)
        .assert_error(400, "invalid");
    // retain takes raw bytes only.
    let mut json_retain = Req::raw("retain", b"x".to_vec())
        .with_content_type(Some("application/json"))
        .path("projects/alpha")
        .string("type", &support::name_of(b"x"));
    coord
        .send(&admin, &json_retain)
        .assert_error(400, "invalid");
    json_retain.content_type = None;
    coord.ok(&admin, &json_retain, 200);
    // A stale precondition on a provisioning record.
    let campaign = json!({ "operation_id": "c-1", "label": "survey", "project": "alpha" });
    coord.ok(&admin, &Req::json("create_campaign", &campaign), 201);
    let assignment = json!({
        "operation_id": "as-1", "campaign": "survey", "assignment": "first", "worker": "w1",
        "inputs": [], "outputs": [], "expected_cutoff": 5,
    });
    let body = json!({ "operation_id": "w-1", "project": "alpha", "worker": "w1", "principal": Principal::of(&key(50)).to_string(), "permissions": [], "valid_until": now() + 60 });
    coord.ok(&admin, &Req::json("provision_worker", &body), 201);
    let refused = coord.send(&admin, &Req::json("assign", &assignment));
    refused.assert_error(409, "conflict");
    assert_eq!(refused.json()["details"]["actual_cutoff"], 0);
    // A carriage with the most grants it may hold fits in one header.
    let mut crowded = coord.holder(51, &[GrantKind::Read], "projects/alpha");
    while crowded.grants.len() < 16 {
        let extra = coord.grant(
            &crowded.key,
            GrantKind::Read,
            "projects/alpha/snapshots",
            now() + DAY,
        );
        crowded.grants.push(extra);
    }
    coord.ok(&crowded, &Req::read("children").path("projects/alpha"), 200);
}

#[test]
fn fetch_cuts_a_body_that_does_not_match_its_hash() {
    use std::io::{Read, Write};
    let (labd, coord) = start("coord-fetch-cut");
    let admin = coord.admin();
    project(&coord, &admin, "alpha");
    let content = support::pseudo_random(1 << 20, 7);
    let (bytes, kind) = coord.retain(&admin, "projects/alpha", &content);
    let body = json!({ "operation_id": "a1", "path": labels("projects/alpha/artifacts/a1"), "artifact": { "bytes": bytes, "type": kind } });
    coord.ok(&admin, &Req::json("create_artifact", &body), 201);
    // The blob rots where it is kept: same length, one byte changed.
    let file = labd.blob_file(&bytes);
    let mut rotten = std::fs::OpenOptions::new().write(true).open(&file).unwrap();
    std::io::Seek::seek(&mut rotten, std::io::SeekFrom::Start(1000)).unwrap();
    rotten.write_all(&[content[1000] ^ 0xff]).unwrap();
    rotten.sync_all().unwrap();

    let fetch = Req::read("fetch")
        .path("projects/alpha/artifacts/a1")
        .string("bytes", &bytes);
    let header = coord.header(&admin, &fetch, now(), &nonce());
    let mut stream = std::net::TcpStream::connect(coord.client.address).unwrap();
    write!(
        stream,
        "GET /v1/fetch{} HTTP/1.1\r\nhost: test\r\nsvc-auth: {header}\r\n\r\n",
        fetch.query()
    )
    .unwrap();
    let mut received = Vec::new();
    let _ = stream.read_to_end(&mut received);
    let split = received.windows(4).position(|w| w == b"\r\n\r\n").unwrap() + 4;
    let head = String::from_utf8_lossy(&received[..split]).to_ascii_lowercase();
    assert!(head.starts_with("http/1.1 200"), "{head}");
    assert!(
        head.contains(&format!("content-length: {}", content.len())),
        "{head}"
    );
    let got = received.len() - split;
    assert!(
        got < content.len(),
        "the connection was cut before the last byte ({got} bytes)"
    );
}

#[test]
fn an_unreachable_journal_is_unavailable_never_absent() {
    // A coordination service alone, its journal nowhere.
    let labd = Labd::start(
        "coord-unavailable",
        &[
            "--services",
            "coord",
            "--remote",
            "journal=http://127.0.0.1:9",
            "--remote",
            "bytes=http://127.0.0.1:9",
        ],
    );
    let coord = Coord::new(&labd);
    let health = coord.client.get("/healthz");
    assert_eq!(health.status, 503);
    assert_eq!(health.json()["status"], "failing");
    assert_eq!(coord.client.get("/livez").status, 200);
    let admin = coord.admin();
    coord
        .send(&admin, &Req::read("children"))
        .assert_error(503, "unavailable");
}

const ECHO_TOOL: &str = r#"{"name": "echo", "version": "1.0.0", "class": "transform",
  "inputs": [{"role": "source", "required": true}], "outputs": [{"role": "result"}],
  "effects": [], "deterministic": true, "egress": [], "configuration": {"repeat": 2}}"#;

#[test]
fn configured_tool_releases_are_artifact_spaces() {
    let dir = support::temp_dir("coord-tool-files");
    let description = dir.join("echo.json");
    std::fs::write(&description, ECHO_TOOL).unwrap();
    let component = support::built_component("tool_upper");
    let tool = format!("{}={}", description.display(), component.display());
    let labd = Labd::start("coord-tools", &["--coord-tool", &tool]);
    let coord = Coord::new(&labd);
    let admin = coord.admin();
    let releases = coord.ok(
        &admin,
        &Req::read("children").path("tools/echo/releases"),
        200,
    );
    let releases = releases["children"].as_array().unwrap().clone();
    assert_eq!(releases.len(), 1);
    let label = releases[0]["key"].as_str().unwrap().to_string();
    let release_path = format!("tools/echo/releases/{label}");
    let entries = coord.entries_as(&admin, &release_path);
    assert_eq!(entries.len(), 2, "the content, then the declarations child");
    let artifact = &entries[0]["content"]["artifact"];
    assert_eq!(artifact["bytes"], label);
    let descriptor = br#"{"profile":"coord/tool-release/1","purpose":"coord.record-profile.v1"}"#;
    assert_eq!(artifact["type"], support::name_of(descriptor));
    assert_eq!(entries[1]["child"]["key"], "declarations");
    // The content is the description with its executable.
    let fetch = Req::read("fetch")
        .path(&release_path)
        .string("bytes", &label);
    let content: Value = serde_json::from_slice(&coord.send(&admin, &fetch).body).unwrap();
    let wasm = std::fs::read(&component).unwrap();
    assert_eq!(
        content["executable"]["service_binary"],
        support::name_of(&wasm)
    );
    assert_eq!(
        content["executable"]["configuration"],
        json!({ "repeat": 2 })
    );
    assert_eq!(
        content["inputs"],
        json!([{ "role": "source", "required": true }])
    );
    // The component itself is retained.
    assert_eq!(labd.bytes().stat(&[&support::name_of(&wasm)]).len(), 1);
    // A restart provisions nothing twice.
    let labd = labd.kill_and_restart();
    let coord = Coord::new(&labd);
    assert_eq!(coord.entries_as(&admin, &release_path).len(), 2);
    let again = coord.ok(
        &admin,
        &Req::read("children").path("tools/echo/releases"),
        200,
    );
    assert_eq!(again["children"].as_array().unwrap().len(), 1);
}

#[test]
fn a_malformed_tool_description_stops_the_start() {
    let dir = support::temp_dir("coord-bad-tool");
    let description = dir.join("bad.json");
    std::fs::write(&description, ECHO_TOOL.replace("\"class\"", "\"klass\"")).unwrap();
    let component = support::built_component("tool_upper");
    let status = std::process::Command::new(env!("CARGO_BIN_EXE_labd"))
        .arg("--data-dir")
        .arg(dir.join("state"))
        .args([
            "--bytes-listen",
            "127.0.0.1:0",
            "--bytes-management-listen",
            "127.0.0.1:0",
        ])
        .args([
            "--journal-listen",
            "127.0.0.1:0",
            "--journal-management-listen",
            "127.0.0.1:0",
        ])
        .args([
            "--coord-listen",
            "127.0.0.1:0",
            "--coord-management-listen",
            "127.0.0.1:0",
        ])
        .args(["--log", "error", "--coord-tool"])
        .arg(format!("{}={}", description.display(), component.display()))
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .status()
        .unwrap();
    assert!(!status.success());
}

#[test]
fn more_refusals_of_the_operation_table() {
    let (_labd, coord) = start("coord-refusals");
    let admin = coord.admin();
    project(&coord, &admin, "alpha");
    // Absent paths, for a caller who may read (and provision) the world.
    let fetch = Req::read("fetch")
        .path("projects/nowhere")
        .string("bytes", &support::name_of(b"x"));
    coord.send(&admin, &fetch).assert_error(404, "not_found");
    coord
        .send(&admin, &Req::read("snapshot").path("projects/nowhere"))
        .assert_error(404, "not_found");
    coord
        .send(&admin, &Req::read("export").path("projects/nowhere"))
        .assert_error(404, "not_found");
    coord
        .send(&admin, &Req::read("children").path("projects/nowhere"))
        .assert_error(404, "not_found");
    let resolved = coord.ok(&admin, &Req::read("resolve").path("projects/nowhere"), 200);
    assert_eq!(resolved["space"], Value::Null);
    // Campaigns: an unknown project, a taken label.
    let campaign = json!({ "operation_id": "c-1", "label": "survey", "project": "nope" });
    coord
        .send(&admin, &Req::json("create_campaign", &campaign))
        .assert_error(404, "not_found");
    let campaign = json!({ "operation_id": "c-2", "label": "survey", "project": "alpha" });
    coord.ok(&admin, &Req::json("create_campaign", &campaign), 201);
    let taken = json!({ "operation_id": "c-3", "label": "survey", "project": "alpha" });
    coord
        .send(&admin, &Req::json("create_campaign", &taken))
        .assert_error(409, "exists");
    // A structural label where a user names an artifact or a leaf.
    let (bytes, kind) = coord.retain(&admin, "projects/alpha", b"content");
    let body = json!({ "operation_id": "a-1", "path": labels("projects/alpha/artifacts/state"), "artifact": { "bytes": bytes, "type": kind } });
    let refused = coord.send(&admin, &Req::json("create_artifact", &body));
    refused.assert_error(400, "structural");
    assert_eq!(refused.json()["details"]["label"], "state");
    let body = publish_body("p-1", "projects/alpha/snapshots/views", json!(1));
    coord
        .send(&admin, &Req::json("publish", &body))
        .assert_error(400, "structural");
    // A record whose fact (its metadata) would exceed 1 MiB.
    let mut big = publish_body("p-2", "projects/alpha/snapshots/s", json!(1));
    big["metadata"] = json!({ "note": "x".repeat((1 << 20) + 1) });
    coord
        .send(&admin, &Req::json("publish", &big))
        .assert_error(413, "limit_exceeded");
}

#[test]
fn hot_swap_under_load_keeps_every_publish() {
    let files = SwapFiles::new("coord");
    let labd = Labd::start("coord-swap", &["--coord-component", files.arg()]);
    let coord = Coord::new(&labd);
    let management = labd.coord_management();
    let before = management.get("/component").json()["digest"].clone();
    let admin = coord.admin();
    project(&coord, &admin, "alpha");
    // A publish open across the reload: half its body is sent before.
    let held_req = Req::json(
        "publish",
        &publish_body(
            "held",
            "projects/alpha/snapshots/held",
            json!({ "held": true }),
        ),
    );
    let header = coord.header(&admin, &held_req, now(), &nonce());
    let held = HalfSent::start(
        coord.client.address,
        &request_bytes(&held_req, &header),
        held_req.body().len(),
    );
    let published = AtomicUsize::new(0);
    let across = across_reload(
        4,
        |w, n| {
            let body = publish_body(
                &format!("swap-{w}-{n}"),
                &format!("projects/alpha/snapshots/s{w}"),
                json!({ "n": n }),
            );
            coord.ok(&admin, &Req::json("publish", &body), 201);
            published.fetch_add(1, Ordering::SeqCst);
        },
        || files.swap(management),
    );
    assert!(across.overlapping > 0 && across.after > 0, "{across:?}");
    let finished = held.finish();
    assert_eq!(
        finished.status,
        201,
        "the publish held across the reload: {}",
        String::from_utf8_lossy(&finished.body)
    );
    assert_eq!(
        management.get("/component").json()["digest"],
        name_of(&files.swapped)
    );
    assert_ne!(before, name_of(&files.swapped));
    // Every publish is there once.
    let mut records = coord
        .entries_as(&admin, "projects/alpha/snapshots/held")
        .len();
    for w in 0..4 {
        records += coord
            .entries_as(&admin, &format!("projects/alpha/snapshots/s{w}"))
            .len();
    }
    assert_eq!(records, published.into_inner() + 1);
}
