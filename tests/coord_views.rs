//! Views over the wire: `compose`, `query` and `explain` (HTTP.md
//! decisions 28 to 31), over declarations admitted by `declare` and
//! records admitted by `publish`.

use crate::support;
use crate::support::coord::{labels, nonce, now, send_half, start, try_send, Coord, Holder, Req};
use crate::support::{Labd, Response};
use lab_coord_auth::{GrantKind, Principal};
use serde_json::{json, Value};

fn project(coord: &Coord, who: &Holder, label: &str) {
    let body = json!({ "operation_id": format!("project-{label}"), "label": label });
    coord.ok(who, &Req::json("create_project", &body), 201);
}

/// Retains `bytes` at `path` under a retained descriptor; the artifact.
fn retain(coord: &Coord, who: &Holder, path: &str, bytes: &[u8]) -> Value {
    let descriptor = br#"{"interpretation":"text"}"#;
    let kind = support::name_of(descriptor);
    let req = Req::raw("retain", descriptor.to_vec())
        .path(path)
        .string("type", &kind);
    coord.ok(who, &req, 200);
    let req = Req::raw("retain", bytes.to_vec())
        .path(path)
        .string("type", &kind);
    let answer = coord.ok(who, &req, 200);
    json!({ "bytes": answer["bytes"], "type": kind })
}

/// An artifact of project `p` named `name`; its content and its
/// declarations space.
struct Subject {
    path: String,
    artifact: Value,
    content: Value,
}

fn artifact(coord: &Coord, who: &Holder, p: &str, name: &str) -> Subject {
    let artifact = retain(coord, who, &format!("projects/{p}"), name.as_bytes());
    let body = json!({
        "operation_id": format!("artifact-{name}"),
        "path": labels(&format!("projects/{p}/artifacts/{name}")),
        "artifact": artifact,
    });
    let created = coord.ok(who, &Req::json("create_artifact", &body), 201);
    Subject {
        path: format!("projects/{p}/artifacts/{name}"),
        artifact,
        content: created["content"]["entry"].clone(),
    }
}

/// A declaration by `publisher` (who holds `declare` and `read` there)
/// about `subject`'s artifact. Returns its occurrence and assertion ID.
fn declare(
    coord: &Coord,
    subject: &Subject,
    publisher: &Holder,
    op: &str,
    statement: Value,
) -> (Value, String) {
    let body =
        json!({ "operation_id": op, "artifact": labels(&subject.path), "statement": statement });
    let answer = coord.ok(publisher, &Req::json("declare", &body), 201);
    (
        answer["declaration"].clone(),
        answer["assertion_id"].as_str().unwrap().to_string(),
    )
}

fn claim(property: &str, value: Value) -> Value {
    json!({ "property": property, "value": value })
}

fn relation(kind: &str, target: &Value) -> Value {
    json!({ "relations": [{ "kind": kind, "target": target }] })
}

fn with(mut statement: Value, member: &str, value: Value) -> Value {
    statement[member] = value;
    statement
}

fn compose_body(op: &str, view: &str, selections: &[Value], rules: Value) -> Value {
    json!({
        "operation_id": op,
        "path": labels(&format!("projects/alpha/views/{view}")),
        "selections": selections,
        "rules": rules,
        "interpretation_profile": "coord/view/1",
    })
}

fn compose(coord: &Coord, who: &Holder, body: &Value) -> Value {
    coord.ok(who, &Req::json("compose", body), 201)["record"].clone()
}

fn query(coord: &Coord, who: &Holder, view: &Value, filters: Value) -> Value {
    let body = json!({ "view": view["entry"], "filters": filters });
    coord.ok(who, &Req::json("query", &body), 200)
}

fn positions(records: &Value) -> Vec<u64> {
    records
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["selection"]["position"].as_u64().unwrap())
        .collect()
}

fn publish_record(coord: &Coord, who: &Holder, op: &str, leaf: &str, record: Value) -> Value {
    let body = json!({ "operation_id": op, "path": labels(leaf), "profile": "lab/finding/1", "record": record });
    coord.ok(who, &Req::json("publish", &body), 201)["record"].clone()
}

/// Sends `body` to `op` signed by `who`; the refusal must be `status` and
/// `code`. Returns the refusal's details.
fn refused(coord: &Coord, who: &Holder, op: &str, body: &Value, status: u16, code: &str) -> Value {
    let response: Response = coord.send(who, &Req::json(op, body));
    response.assert_error(status, code);
    response.json()["details"].clone()
}

#[test]
fn compose_follows_the_writer_protocol() {
    let (_labd, coord) = start("views-compose");
    let admin = coord.admin();
    let declarer = coord.holder(11, &[GrantKind::Declare, GrantKind::Read], "");
    project(&coord, &admin, "alpha");
    let a = artifact(&coord, &admin, "alpha", "a1");
    let (d1, _) = declare(&coord, &a, &declarer, "d1", claim("license", json!("MIT")));
    let r1 = publish_record(
        &coord,
        &admin,
        "r1",
        "projects/alpha/snapshots/s",
        json!({"n": 1}),
    );

    let body = compose_body("v-1", "main", &[d1.clone(), r1["entry"].clone()], json!({}));
    let first = coord.ok(&admin, &Req::json("compose", &body), 201);
    assert_eq!(first["space_created"], true);
    assert_eq!(first["replayed"], false);
    let view = &first["record"];
    assert_eq!(view["profile"], "coord/view/1");
    assert_eq!(view["publisher"], admin.principal());
    // The payload is the view record: selections, normalized rules, counts.
    let fetch = Req::read("fetch")
        .path("projects/alpha/views/main")
        .string("bytes", view["hash"].as_str().unwrap());
    let payload: Value = serde_json::from_slice(&coord.send(&admin, &fetch).body).unwrap();
    assert_eq!(payload["selections"], json!([d1, r1["entry"]]));
    assert_eq!(
        payload["rules"],
        json!({"conflict": "disagree", "publishers": [], "relations": "honor"})
    );
    assert_eq!(payload["interpretation_profile"], "coord/view/1");
    assert_eq!(payload["counts"]["selections"], 2);
    assert_eq!(payload["counts"]["declarations"], 1);
    assert_eq!(payload["counts"]["records"], 1);
    assert_eq!(payload["counts"]["agreed"], 1);
    assert!(payload["index"].as_str().unwrap().starts_with("sha256:"));

    // Replay, mismatch, stale precondition.
    let replay = coord.ok(&admin, &Req::json("compose", &body), 200);
    assert_eq!(replay["record"], *view);
    assert_eq!(replay["replayed"], true);
    assert_eq!(replay["space_created"], false);
    let changed = compose_body("v-1", "main", std::slice::from_ref(&d1), json!({}));
    refused(
        &coord,
        &admin,
        "compose",
        &changed,
        409,
        "idempotency_mismatch",
    );
    let mut stale = compose_body("v-2", "main", std::slice::from_ref(&d1), json!({}));
    stale["expected_cutoff"] = json!(0);
    let details = refused(&coord, &admin, "compose", &stale, 409, "conflict");
    assert_eq!(details, json!({"expected_cutoff": 0, "actual_cutoff": 1}));
    stale["expected_cutoff"] = json!(1);
    let second = compose(&coord, &admin, &stale);
    assert_eq!(second["entry"]["position"], 2, "the view's next version");
    assert_eq!(second["entry"]["space_id"], view["entry"]["space_id"]);

    // The older occurrence still answers the older view.
    let older = query(&coord, &admin, view, json!({}));
    assert_eq!(older["coverage"]["selections"], 2);
    assert_eq!(positions(&older["records"]).len(), 2);
    let newer = query(&coord, &admin, &second, json!({}));
    assert_eq!(newer["coverage"]["selections"], 1);
    assert_eq!(newer["records"][0]["selection"], d1);

    // Another name is another, independent leaf.
    let other = coord.ok(
        &admin,
        &Req::json(
            "compose",
            &compose_body("v-1", "other", std::slice::from_ref(&d1), json!({})),
        ),
        201,
    );
    assert_eq!(other["space_created"], true);
    assert_eq!(other["record"]["entry"]["position"], 1);
    assert_ne!(
        other["record"]["entry"]["space_id"],
        view["entry"]["space_id"]
    );
    // An empty view is a view.
    let empty = compose(
        &coord,
        &admin,
        &compose_body("v-3", "empty", &[], json!({})),
    );
    let answer = query(&coord, &admin, &empty, json!({}));
    assert_eq!(answer["outcome"], "none");
    assert_eq!(answer["coverage"]["complete"], true);
}

#[test]
fn compose_refusals() {
    let (_labd, coord) = start("views-compose-refusals");
    let admin = coord.admin();
    let declarer = coord.holder(11, &[GrantKind::Declare, GrantKind::Read], "");
    project(&coord, &admin, "alpha");
    project(&coord, &admin, "beta");
    let a = artifact(&coord, &admin, "alpha", "a1");
    let b = artifact(&coord, &admin, "beta", "b1");
    let (d1, _) = declare(&coord, &a, &declarer, "d1", claim("license", json!("MIT")));
    let (in_beta, _) = declare(&coord, &b, &declarer, "d2", claim("license", json!("MIT")));
    let ok = compose_body("c-1", "v", std::slice::from_ref(&d1), json!({}));

    // Decoding: every member by name.
    let mut cases: Vec<(Value, &str)> = Vec::new();
    let mut with_member = |member: &str, value: Value, field: &'static str| {
        let mut body = ok.clone();
        body[member] = value;
        cases.push((body, field));
    };
    with_member("extra", json!(1), "extra");
    with_member("selections", json!([d1, d1]), "selections");
    with_member("selections", json!([{"root_id": "x"}]), "selections");
    with_member("rules", json!([]), "rules");
    with_member("rules", json!({"conflict": "vote"}), "rules.conflict");
    with_member("rules", json!({"relations": "maybe"}), "rules.relations");
    with_member("rules", json!({"other": 1}), "rules.other");
    with_member(
        "rules",
        json!({"publishers": [admin.principal()]}),
        "rules.publishers",
    );
    with_member(
        "rules",
        json!({"conflict": "prefer_publishers"}),
        "rules.publishers",
    );
    with_member(
        "rules",
        json!({"conflict": "prefer_publishers", "publishers": []}),
        "rules.publishers",
    );
    with_member(
        "rules",
        json!({"conflict": "prefer_publishers", "publishers": ["someone"]}),
        "rules.publishers",
    );
    with_member(
        "rules",
        json!({"conflict": "prefer_publishers", "publishers": [admin.principal(), admin.principal()]}),
        "rules.publishers",
    );
    with_member(
        "interpretation_profile",
        json!("view"),
        "interpretation_profile",
    );
    with_member(
        "path",
        json!(["projects", "alpha", "views", "bad label"]),
        "path",
    );
    with_member("path", json!(["elsewhere", "v"]), "path");
    with_member("metadata", json!({"k": 1}), "metadata");
    with_member("expected_cutoff", json!(-1), "expected_cutoff");
    for (body, field) in cases {
        let details = refused(&coord, &admin, "compose", &body, 400, "invalid");
        assert_eq!(details["field"], field, "{body}");
    }
    let mut no_rules = ok.clone();
    no_rules.as_object_mut().unwrap().remove("rules");
    assert_eq!(
        refused(&coord, &admin, "compose", &no_rules, 400, "invalid")["field"],
        "rules"
    );
    // More than 16,384 selections.
    let many: Vec<Value> = (1..=16_385u64)
        .map(|p| json!({"root_id": d1["root_id"], "space_id": d1["space_id"], "position": p}))
        .collect();
    refused(
        &coord,
        &admin,
        "compose",
        &compose_body("c-2", "v", &many, json!({})),
        413,
        "limit_exceeded",
    );
    // Layout.
    let mut structural = ok.clone();
    structural["path"] = json!(labels("projects/alpha/snapshots/s"));
    refused(&coord, &admin, "compose", &structural, 400, "structural");
    let mut label = ok.clone();
    label["path"] = json!(labels("projects/alpha/views/views"));
    assert_eq!(
        refused(&coord, &admin, "compose", &label, 400, "structural")["label"],
        "views"
    );
    // Another profile.
    let mut profile = ok.clone();
    profile["interpretation_profile"] = json!("lab/view/1");
    assert_eq!(
        refused(&coord, &admin, "compose", &profile, 400, "invalid_record")["field"],
        "interpretation_profile"
    );
    // Selections that do not resolve, or resolve to something else.
    let mut beyond = d1.clone();
    beyond["position"] = json!(99);
    let details = refused(
        &coord,
        &admin,
        "compose",
        &compose_body("c-3", "v", &[beyond.clone()], json!({})),
        409,
        "unresolved",
    );
    assert_eq!(details["reference"], beyond);
    let unknown = json!({"root_id": d1["root_id"], "space_id": format!("spc_{}", "0".repeat(32)), "position": 1});
    refused(
        &coord,
        &admin,
        "compose",
        &compose_body("c-4", "v", std::slice::from_ref(&unknown), json!({})),
        404,
        "not_found",
    );
    let details = refused(
        &coord,
        &admin,
        "compose",
        &compose_body("c-5", "v", std::slice::from_ref(&a.content), json!({})),
        400,
        "invalid_record",
    );
    assert_eq!(
        details,
        json!({"field": "selections", "reference": a.content})
    );

    // Authority.
    let alpha_composer = coord.holder(30, &[GrantKind::Publish, GrantKind::Read], "projects/alpha");
    // A selection in a space it may not read; an unknown space is denied
    // too, to one who may not read the world.
    refused(
        &coord,
        &alpha_composer,
        "compose",
        &compose_body("c-6", "v", &[d1.clone(), in_beta.clone()], json!({})),
        403,
        "denied",
    );
    refused(
        &coord,
        &alpha_composer,
        "compose",
        &compose_body("c-7", "v", &[unknown], json!({})),
        403,
        "denied",
    );
    let reader = coord.holder(31, &[GrantKind::Read], "");
    refused(&coord, &reader, "compose", &ok, 403, "denied");
    let declarer = coord.holder(32, &[GrantKind::Declare, GrantKind::Read], "");
    refused(&coord, &declarer, "compose", &ok, 403, "denied");
    let elsewhere = coord.holder(33, &[GrantKind::Publish, GrantKind::Read], "projects/beta");
    refused(&coord, &elsewhere, "compose", &ok, 403, "denied");

    // A view of a project that does not exist.
    let mut missing = ok.clone();
    missing["path"] = json!(labels("projects/nope/views/v"));
    refused(&coord, &admin, "compose", &missing, 404, "not_found");
    // Nothing refused left a view behind.
    let resolve = Req::read("resolve").path("projects/alpha/views/v");
    assert_eq!(coord.ok(&admin, &resolve, 200)["space"], Value::Null);
    // The composer may compose what it may read.
    compose(&coord, &alpha_composer, &ok);
}

#[test]
fn query_outcomes_relations_and_rules() {
    let (_labd, coord) = start("views-query");
    let admin = coord.admin();
    project(&coord, &admin, "alpha");
    project(&coord, &admin, "beta");
    let a = artifact(&coord, &admin, "alpha", "a1");
    let b = artifact(&coord, &admin, "beta", "b1");
    let p1 = coord.holder(40, &[GrantKind::Declare, GrantKind::Read], "");
    let p2 = coord.holder(41, &[GrantKind::Declare, GrantKind::Read], "");
    let (lic1, lic1_id) = declare(&coord, &a, &p1, "lic1", claim("license", json!("MIT")));
    let (lic2, lic2_id) = declare(&coord, &a, &p2, "lic2", claim("license", json!("GPL")));
    let (size1, size1_id) = declare(&coord, &a, &p1, "size1", claim("size", json!(3)));
    let (size2, _) = declare(&coord, &a, &p2, "size2", claim("size", json!(3)));
    let (lic3, _) = declare(
        &coord,
        &a,
        &p2,
        "lic3",
        with(relation("withdraws", &lic2), "subject", Value::Null),
    );
    let (beta_claim, beta_id) = declare(&coord, &b, &p1, "b-lic", claim("license", json!("MIT")));
    let bytes_a = a.artifact["bytes"].clone();
    let bytes_b = b.artifact["bytes"].clone();

    let selections = [
        lic1.clone(),
        lic2.clone(),
        size1.clone(),
        size2.clone(),
        beta_claim.clone(),
    ];
    let view = compose(
        &coord,
        &admin,
        &compose_body("q-1", "plain", &selections, json!({})),
    );
    // answered: an agreed key.
    let size = query(
        &coord,
        &admin,
        &view,
        json!({"artifact": bytes_a, "subject": null, "property": "size"}),
    );
    assert_eq!(size["outcome"], "answered");
    assert_eq!(
        positions(&size["records"]),
        [
            size1["position"].as_u64().unwrap(),
            size2["position"].as_u64().unwrap()
        ]
    );
    assert_eq!(size["records"][0]["state"], "adopted");
    assert_eq!(size["records"][1]["state"], "agreeing");
    assert_eq!(
        size["records"][0]["key"],
        json!({"status": "agreed", "value": 3, "adopted_by": size1})
    );
    assert_eq!(size["limits"], json!([]));
    assert_eq!(
        size["coverage"],
        json!({"selections": 5, "inspected": 2, "matched": 2, "withheld": 0, "complete": true})
    );
    assert!(size.get("next_cursor").is_none());
    // disagreeing: two licenses.
    let license = query(
        &coord,
        &admin,
        &view,
        json!({"artifact": bytes_a, "property": "license"}),
    );
    assert_eq!(license["outcome"], "disagreeing");
    assert_eq!(license["records"].as_array().unwrap().len(), 2);
    assert!(license["records"]
        .as_array()
        .unwrap()
        .iter()
        .all(|r| r["state"] == "disagreeing"));
    // none: nothing matches.
    let nothing = query(
        &coord,
        &admin,
        &view,
        json!({"artifact": bytes_a, "property": "color"}),
    );
    assert_eq!(nothing["outcome"], "none");
    assert_eq!(nothing["records"], json!([]));
    let nothing = query(&coord, &admin, &view, json!({"kind": "record"}));
    assert_eq!(nothing["outcome"], "none");
    assert_eq!(nothing["coverage"]["inspected"], 5);
    // incomplete: a reader who may not read beta's declarations.
    let alpha_reader = coord.holder(42, &[GrantKind::Read], "projects/alpha");
    let all = query(&coord, &alpha_reader, &view, json!({"property": "license"}));
    assert_eq!(all["outcome"], "incomplete");
    assert_eq!(all["coverage"]["withheld"], 1);
    assert_eq!(all["coverage"]["matched"], 3);
    assert!(!positions(&all["records"]).is_empty());
    assert!(all["records"]
        .as_array()
        .unwrap()
        .iter()
        .all(|r| r["artifact"]["bytes"] == bytes_a));
    // The same reader, narrowed to alpha's artifact, is answered in full.
    let alpha_only = query(
        &coord,
        &alpha_reader,
        &view,
        json!({"artifact": bytes_a, "property": "size"}),
    );
    assert_eq!(alpha_only["outcome"], "answered");
    let beta_only = query(&coord, &admin, &view, json!({"artifact": bytes_b}));
    assert_eq!(beta_only["records"][0]["selection"], beta_claim);
    // Filters by publisher and state.
    let by_p2 = query(&coord, &admin, &view, json!({"publisher": p2.principal()}));
    assert_eq!(
        positions(&by_p2["records"]),
        [
            lic2["position"].as_u64().unwrap(),
            size2["position"].as_u64().unwrap()
        ]
    );
    let adopted = query(&coord, &admin, &view, json!({"state": "adopted"}));
    assert_eq!(
        adopted["records"].as_array().unwrap().len(),
        2,
        "size1 and beta's license"
    );

    // Relations honored: lic3 withdraws lic2, so MIT is agreed.
    let honoring = compose(
        &coord,
        &admin,
        &compose_body(
            "q-2",
            "honor",
            &[lic1.clone(), lic2.clone(), lic3.clone()],
            json!({"relations": "honor"}),
        ),
    );
    let answer = query(&coord, &admin, &honoring, json!({}));
    let states: Vec<&str> = answer["records"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["state"].as_str().unwrap())
        .collect();
    assert_eq!(states, ["adopted", "retired", "relation"]);
    assert_eq!(answer["outcome"], "answered");
    assert_eq!(answer["records"][1]["against"][0]["selection"], lic3);
    // Ignored: the same selections disagree.
    let ignoring = compose(
        &coord,
        &admin,
        &compose_body(
            "q-3",
            "ignore",
            &[lic1.clone(), lic2.clone(), lic3.clone()],
            json!({"relations": "ignore"}),
        ),
    );
    let answer = query(&coord, &admin, &ignoring, json!({"kind": "declaration"}));
    let states: Vec<&str> = answer["records"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["state"].as_str().unwrap())
        .collect();
    assert_eq!(states, ["disagreeing", "disagreeing", "relation"]);
    assert_eq!(answer["outcome"], "disagreeing");
    // supersedes and challenges.
    let (lic4, _) = declare(
        &coord,
        &a,
        &p1,
        "lic4",
        with(
            claim("license", json!("BSD")),
            "relations",
            json!([{"kind": "supersedes", "target": lic1}]),
        ),
    );
    let (challenge, _) = declare(&coord, &a, &p2, "challenge", relation("challenges", &size1));
    let related = compose(
        &coord,
        &admin,
        &compose_body(
            "q-4",
            "related",
            &[lic1.clone(), lic4.clone(), size1.clone(), challenge.clone()],
            json!({}),
        ),
    );
    let answer = query(&coord, &admin, &related, json!({}));
    let states: Vec<(u64, &str)> = answer["records"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            (
                r["selection"]["position"].as_u64().unwrap(),
                r["state"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        states,
        [
            (lic1["position"].as_u64().unwrap(), "retired"),
            (lic4["position"].as_u64().unwrap(), "adopted"),
            (size1["position"].as_u64().unwrap(), "disagreeing"),
            (challenge["position"].as_u64().unwrap(), "relation"),
        ]
    );
    assert_eq!(answer["outcome"], "disagreeing");

    // prefer_publishers: p2 ranks first, so GPL is adopted and MIT overruled.
    let preferring = compose(
        &coord,
        &admin,
        &compose_body(
            "q-5",
            "prefer",
            &[lic1.clone(), lic2.clone()],
            json!({"conflict": "prefer_publishers", "publishers": [p2.principal(), p1.principal()]}),
        ),
    );
    let answer = query(&coord, &admin, &preferring, json!({}));
    let states: Vec<&str> = answer["records"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["state"].as_str().unwrap())
        .collect();
    assert_eq!(states, ["overruled", "adopted"]);
    assert_eq!(
        answer["records"][0]["key"],
        json!({"status": "adopted", "value": "GPL", "adopted_by": lic2})
    );
    assert_eq!(answer["outcome"], "answered");

    // Explain.
    assert_eq!(assertion_of(&coord, &admin, &lic1), lic1_id);
    let body = json!({"view": view["entry"], "assertion": lic1_id});
    let explained = coord.ok(&admin, &Req::json("explain", &body), 200);
    assert_eq!(explained["defined_by"], lic1);
    assert_eq!(explained["adopted_by"], Value::Null);
    assert_eq!(explained["disagreeing"], json!([lic2]));
    assert_eq!(explained["record"]["selection"], lic1);
    assert_eq!(explained["view"], view["entry"]);
    let body = json!({"view": view["entry"], "assertion": size1_id});
    let explained = coord.ok(&admin, &Req::json("explain", &body), 200);
    assert_eq!(explained["adopted_by"], size1);
    assert_eq!(explained["disagreeing"], json!([]));
    // In the related view, size1 is challenged and lic1 retired.
    let body = json!({"view": related["entry"], "assertion": size1_id});
    let explained = coord.ok(&admin, &Req::json("explain", &body), 200);
    assert_eq!(explained["adopted_by"], Value::Null);
    assert_eq!(explained["disagreeing"], json!([challenge]));
    let body = json!({"view": related["entry"], "assertion": lic1_id});
    let explained = coord.ok(&admin, &Req::json("explain", &body), 200);
    assert_eq!(explained["disagreeing"], json!([lic4]));
    // Preferred: the overruled MIT disagrees with the adopted GPL.
    let body = json!({"view": preferring["entry"], "assertion": lic2_id});
    let explained = coord.ok(&admin, &Req::json("explain", &body), 200);
    assert_eq!(explained["adopted_by"], lic2);
    assert_eq!(explained["disagreeing"], json!([lic1]));
    // Not selected; selected where the caller may not read.
    let body = json!({"view": related["entry"], "assertion": lic2_id});
    refused(&coord, &admin, "explain", &body, 404, "not_found");
    let body = json!({"view": view["entry"], "assertion": beta_id});
    refused(&coord, &alpha_reader, "explain", &body, 403, "denied");
}

/// The assertion ID of the declaration at `entry`, as `get` reads it.
fn assertion_of(coord: &Coord, who: &Holder, entry: &Value) -> String {
    let get = Req::read("get")
        .string("root_id", entry["root_id"].as_str().unwrap())
        .string("space_id", entry["space_id"].as_str().unwrap())
        .int("position", entry["position"].as_i64().unwrap());
    let answer = coord.ok(who, &get, 200);
    answer["entry"]["declaration"]["assertion_id"]
        .as_str()
        .unwrap()
        .to_string()
}

#[test]
fn query_and_explain_refusals() {
    let (_labd, coord) = start("views-read-refusals");
    let admin = coord.admin();
    let declarer = coord.holder(11, &[GrantKind::Declare, GrantKind::Read], "");
    project(&coord, &admin, "alpha");
    project(&coord, &admin, "beta");
    let a = artifact(&coord, &admin, "alpha", "a1");
    let (d1, id1) = declare(&coord, &a, &declarer, "d1", claim("license", json!("MIT")));
    let view = compose(
        &coord,
        &admin,
        &compose_body("r-1", "v", std::slice::from_ref(&d1), json!({})),
    );
    let record = publish_record(
        &coord,
        &admin,
        "r-2",
        "projects/alpha/snapshots/s",
        json!(1),
    );
    let ok = json!({"view": view["entry"], "filters": {}});

    for (body, field) in [
        (json!({"view": view["entry"]}), "filters"),
        (json!({"view": {"root_id": "x"}, "filters": {}}), "view"),
        (
            json!({"view": view["entry"], "filters": {"color": 1}}),
            "filters.color",
        ),
        (
            json!({"view": view["entry"], "filters": {"kind": "other"}}),
            "filters.kind",
        ),
        (
            json!({"view": view["entry"], "filters": {"artifact": "abc"}}),
            "filters.artifact",
        ),
        (
            json!({"view": view["entry"], "filters": {"subject": 1}}),
            "filters.subject",
        ),
        (
            json!({"view": view["entry"], "filters": {"state": "happy"}}),
            "filters.state",
        ),
        (
            json!({"view": view["entry"], "filters": {"property": 1}}),
            "filters.property",
        ),
        (
            json!({"view": view["entry"], "filters": {}, "limit": 129}),
            "limit",
        ),
        (
            json!({"view": view["entry"], "filters": {}, "cursor": 5}),
            "cursor",
        ),
        (
            json!({"view": view["entry"], "filters": {}, "extra": 5}),
            "extra",
        ),
    ] {
        let details = refused(&coord, &admin, "query", &body, 400, "invalid");
        assert_eq!(details["field"], field, "{body}");
    }
    let long = json!({"view": view["entry"], "filters": {}, "cursor": "a".repeat(4097)});
    refused(&coord, &admin, "query", &long, 413, "limit_exceeded");
    for (body, field) in [
        (json!({"view": view["entry"], "assertion": ""}), "assertion"),
        (
            json!({"view": view["entry"], "assertion": "a".repeat(129)}),
            "assertion",
        ),
        (json!({"view": view["entry"]}), "assertion"),
        (json!({"assertion": id1}), "view"),
    ] {
        let details = refused(&coord, &admin, "explain", &body, 400, "invalid");
        assert_eq!(details["field"], field, "{body}");
    }
    // A view that is not one, beyond its head, in an unknown space.
    for (op, extra) in [
        ("query", json!({"filters": {}})),
        ("explain", json!({"assertion": id1})),
    ] {
        let with_view = |v: &Value| {
            let mut body = extra.clone();
            body["view"] = v.clone();
            body
        };
        refused(
            &coord,
            &admin,
            op,
            &with_view(&record["entry"]),
            404,
            "not_found",
        );
        refused(&coord, &admin, op, &with_view(&d1), 404, "not_found");
        let mut beyond = view["entry"].clone();
        beyond["position"] = json!(9);
        let details = refused(&coord, &admin, op, &with_view(&beyond), 409, "unresolved");
        assert_eq!(details["reference"], beyond);
        let unknown = json!({"root_id": d1["root_id"], "space_id": format!("spc_{}", "0".repeat(32)), "position": 1});
        refused(&coord, &admin, op, &with_view(&unknown), 404, "not_found");
        // A reader of beta only may not read the view (nor learn of it).
        let beta_reader = coord.holder(50, &[GrantKind::Read], "projects/beta");
        refused(
            &coord,
            &beta_reader,
            op,
            &with_view(&view["entry"]),
            403,
            "denied",
        );
        refused(
            &coord,
            &beta_reader,
            op,
            &with_view(&unknown),
            403,
            "denied",
        );
        // publish or declare alone is not read.
        let publisher = coord.holder(51, &[GrantKind::Publish, GrantKind::Declare], "");
        refused(
            &coord,
            &publisher,
            op,
            &with_view(&view["entry"]),
            403,
            "denied",
        );
    }
    // An explained assertion that is not selected.
    let body = json!({"view": view["entry"], "assertion": "asr_nope"});
    refused(&coord, &admin, "explain", &body, 404, "not_found");
    coord.ok(&admin, &Req::json("query", &ok), 200);
}

#[test]
fn cursors_page_through_a_large_view() {
    let (_labd, coord) = start("views-paging");
    let admin = coord.admin();
    project(&coord, &admin, "alpha");
    // 300 records in three leaves.
    let mut selections = Vec::new();
    for i in 0..300 {
        let record = publish_record(
            &coord,
            &admin,
            &format!("p-{i}"),
            &format!("projects/alpha/snapshots/s{}", i % 3),
            json!({ "i": i }),
        );
        selections.push(record["entry"].clone());
    }
    let view = compose(
        &coord,
        &admin,
        &compose_body("big", "big", &selections, json!({})),
    );
    let other = compose(
        &coord,
        &admin,
        &compose_body("big-2", "big2", &selections[..10], json!({})),
    );
    let mut seen = Vec::new();
    let mut cursor: Option<String> = None;
    let mut pages = 0;
    let mut first_cursor = None;
    loop {
        let mut body = json!({"view": view["entry"], "filters": {}, "limit": 50});
        if let Some(c) = &cursor {
            body["cursor"] = json!(c);
        }
        let page = coord.ok(&admin, &Req::json("query", &body), 200);
        pages += 1;
        seen.extend(
            page["records"]
                .as_array()
                .unwrap()
                .iter()
                .map(|r| r["selection"].clone()),
        );
        match page.get("next_cursor") {
            Some(next) => {
                assert_eq!(page["outcome"], "incomplete");
                assert_eq!(page["limits"], json!(["limit"]));
                assert_eq!(page["coverage"]["complete"], false);
                cursor = Some(next.as_str().unwrap().to_string());
                first_cursor.get_or_insert_with(|| cursor.clone().unwrap());
            }
            None => {
                assert_eq!(page["outcome"], "answered");
                assert_eq!(page["coverage"]["inspected"], 300);
                assert_eq!(page["coverage"]["matched"], 300);
                assert_eq!(page["limits"], json!([]));
                break;
            }
        }
        assert!(pages < 20, "the pages end");
    }
    assert_eq!(seen, selections, "every item once, in selection order");
    // Cursors bind the view and the filters.
    let first_cursor = first_cursor.unwrap();
    for body in [
        json!({"view": other["entry"], "filters": {}, "cursor": first_cursor}),
        json!({"view": view["entry"], "filters": {"kind": "record"}, "cursor": first_cursor}),
        json!({"view": view["entry"], "filters": {}, "cursor": format!("{first_cursor}x")}),
        json!({"view": view["entry"], "filters": {}, "cursor": &first_cursor[..first_cursor.len() - 4]}),
        json!({"view": view["entry"], "filters": {}, "cursor": "e30"}),
    ] {
        refused(&coord, &admin, "query", &body, 400, "invalid_cursor");
    }
    let mut forged = first_cursor.into_bytes();
    forged[5] = if forged[5] == b'A' { b'B' } else { b'A' };
    let body =
        json!({"view": view["entry"], "filters": {}, "cursor": String::from_utf8(forged).unwrap()});
    refused(&coord, &admin, "query", &body, 400, "invalid_cursor");
    // A later page of the same query still answers with the same cursor.
    let body =
        json!({"view": view["entry"], "filters": {}, "cursor": cursor.unwrap(), "limit": 50});
    let again = coord.ok(&admin, &Req::json("query", &body), 200);
    assert_eq!(again["records"][0]["selection"], selections[250]);
    // The default page is 64 records.
    let page = query(&coord, &admin, &view, json!({}));
    assert_eq!(page["records"].as_array().unwrap().len(), 64);
}

#[test]
fn a_retry_after_kill_9_recovers_every_acknowledged_view() {
    let (labd, coord) = start("views-kill");
    let admin = coord.admin();
    project(&coord, &admin, "alpha");
    let mut selections = Vec::new();
    for i in 0..21 {
        let record = publish_record(
            &coord,
            &admin,
            &format!("k-{i}"),
            "projects/alpha/snapshots/s",
            json!({ "i": i }),
        );
        selections.push(record["entry"].clone());
    }
    // Sixteen racing composes, and a seventeenth certainly cut off: its
    // body is half sent when labd is killed.
    let requests: Vec<Req> = (0..17)
        .map(|i| {
            Req::json(
                "compose",
                &compose_body(
                    &format!("kv-{i}"),
                    &format!("v{}", i % 4),
                    &selections[..5 + i],
                    json!({}),
                ),
            )
        })
        .collect();
    let (racing, cut_off) = requests.split_at(16);
    let header = coord.header(&admin, &cut_off[0], now(), &nonce());
    let half_sent = send_half(coord.client.address, &cut_off[0], &header);
    let (data_dir, mut acknowledged) = std::thread::scope(|scope| {
        let handles: Vec<_> = racing
            .iter()
            .map(|req| {
                let header = coord.header(&admin, req, now(), &nonce());
                let address = coord.client.address;
                scope.spawn(move || {
                    let answer = try_send(address, req, &header).ok()?;
                    (answer.status == 201).then(|| answer.json())
                })
            })
            .collect();
        support::eventually("a first view", || handles.iter().any(|h| h.is_finished()));
        let data_dir = labd.kill();
        let answers: Vec<Option<Value>> = handles.into_iter().map(|h| h.join().unwrap()).collect();
        (data_dir, answers)
    });
    assert!(
        acknowledged.iter().any(Option::is_some),
        "something was acknowledged"
    );
    drop(half_sent);
    acknowledged.push(None);
    let labd = Labd::start_in(data_dir, Vec::new());
    let coord = Coord::new(&labd);
    for (i, (req, acked)) in requests.iter().zip(&acknowledged).enumerate() {
        let retried = coord.send(&admin, req);
        assert!(
            retried.status == 200 || retried.status == 201,
            "{}",
            String::from_utf8_lossy(&retried.body)
        );
        if i == 16 {
            assert_eq!(retried.status, 201, "the cut-off request left no trace");
        }
        let retried = retried.json();
        if let Some(acked) = acked {
            assert_eq!(retried["replayed"], true);
            assert_eq!(retried["record"], acked["record"]);
        }
        // Every view answers with its own selections.
        let answer = query(&coord, &admin, &retried["record"], json!({}));
        assert_eq!(answer["coverage"]["selections"], 5 + i);
    }
    // One record per operation.
    for leaf in 0..4 {
        let entries = Req::read("entries").path(&format!("projects/alpha/views/v{leaf}"));
        let page = coord.ok(&admin, &entries, 200);
        let records = page["entries"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|e| e.get("record").is_some())
            .count();
        let expected = (0..requests.len()).filter(|i| i % 4 == leaf).count();
        assert_eq!(records, expected, "view v{leaf}");
    }
}

#[test]
fn views_of_declarations_by_a_principal_not_the_composer() {
    // The composer adopts only what it may read; a reader of the view who
    // may read every selection sees the whole answer.
    let (_labd, coord) = start("views-principals");
    let admin = coord.admin();
    project(&coord, &admin, "alpha");
    let a = artifact(&coord, &admin, "alpha", "a1");
    let worker = coord.holder(60, &[GrantKind::Declare, GrantKind::Read], "projects/alpha");
    let (d, id) = declare(
        &coord,
        &a,
        &worker,
        "w-1",
        with(claim("license", json!("MIT")), "subject", json!("file#L1")),
    );
    let view = compose(
        &coord,
        &admin,
        &compose_body("pp", "pp", std::slice::from_ref(&d), json!({})),
    );
    let answer = query(&coord, &worker, &view, json!({"subject": "file#L1"}));
    assert_eq!(answer["outcome"], "answered");
    let item = &answer["records"][0];
    assert_eq!(item["kind"], "declaration");
    assert_eq!(
        item["path"],
        json!(labels("projects/alpha/artifacts/a1/declarations"))
    );
    assert_eq!(item["assertion_id"], id);
    assert_eq!(item["publisher"], Principal::of(&worker.key).to_string());
    assert_eq!(item["artifact"], a.artifact);
    assert_eq!(item["subject"], "file#L1");
    assert_eq!(item["property"], "license");
    assert_eq!(item["value"], "MIT");
    // subject null selects declarations without subject: none here.
    let answer = query(&coord, &worker, &view, json!({"subject": null}));
    assert_eq!(answer["outcome"], "none");
}

/// `count` record facts appended straight into the leaf `space` through
/// the journal, 128 per batch: selectable records without a request each.
fn bulk_records(labd: &Labd, space: &Value, publisher: &str, count: u64) {
    use base64::Engine as _;
    use lab_coord::facts::{Fact, Hash, RecordFact};
    let b64 = base64::engine::general_purpose::STANDARD;
    let mut made = 0;
    while made < count {
        let batch: Vec<String> = (made..count.min(made + 128))
            .map(|i| {
                let fact = Fact::Record(RecordFact {
                    profile: "lab/bulk/1".into(),
                    hash: Hash::of(&i.to_be_bytes()),
                    metadata: Default::default(),
                    publisher: publisher.into(),
                    request_id: format!("req_{:064x}", i),
                    request_digest: Hash::of(b"bulk"),
                    accepted_at: "2026-01-01T00:00:00.000000Z".into(),
                });
                b64.encode(fact.encode())
            })
            .collect();
        made += batch.len() as u64;
        let body = json!({
            "space": { "root_id": space["root_id"], "space_id": space["space_id"] },
            "facts": batch,
            "operation_id": format!("bulk-{made}"),
        });
        let appended = labd.journal().post_json("/v1/append", &body.to_string());
        assert_eq!(
            appended.status,
            201,
            "{}",
            String::from_utf8_lossy(&appended.body)
        );
    }
}

#[test]
fn a_page_ends_where_its_inspection_budget_does() {
    let (labd, coord) = start("views-inspection");
    let admin = coord.admin();
    project(&coord, &admin, "alpha");
    let first = publish_record(
        &coord,
        &admin,
        "b-0",
        "projects/alpha/snapshots/bulk",
        json!(0),
    );
    let leaf = coord.ok(
        &admin,
        &Req::read("resolve").path("projects/alpha/snapshots/bulk"),
        200,
    )["space"]
        .clone();
    bulk_records(&labd, &leaf, &admin.principal(), 4200);
    let selections: Vec<Value> = (1..=4201u64)
        .map(|position| json!({"root_id": first["entry"]["root_id"], "space_id": first["entry"]["space_id"], "position": position}))
        .collect();
    let view = compose(
        &coord,
        &admin,
        &compose_body("bulk", "bulk", &selections, json!({})),
    );
    // Nothing is a declaration: the first page stops at the budget.
    let body = json!({"view": view["entry"], "filters": {"kind": "declaration"}});
    let page = coord.ok(&admin, &Req::json("query", &body), 200);
    assert_eq!(page["records"], json!([]));
    assert_eq!(page["limits"], json!(["inspection"]));
    assert_eq!(page["outcome"], "incomplete");
    assert_eq!(page["coverage"]["inspected"], 4096);
    assert_eq!(page["coverage"]["complete"], false);
    let mut body = body;
    body["cursor"] = page["next_cursor"].clone();
    let last = coord.ok(&admin, &Req::json("query", &body), 200);
    assert_eq!(last["outcome"], "none");
    assert_eq!(last["limits"], json!([]));
    assert_eq!(
        last["coverage"],
        json!({"selections": 4201, "inspected": 4201, "matched": 0, "withheld": 0, "complete": true})
    );
    assert!(last.get("next_cursor").is_none());
    // The records themselves page by 128 at most.
    let page = coord.ok(
        &admin,
        &Req::json(
            "query",
            &json!({"view": view["entry"], "filters": {"kind": "record"}, "limit": 128}),
        ),
        200,
    );
    assert_eq!(page["records"].as_array().unwrap().len(), 128);
    assert_eq!(page["records"][127]["record"]["profile"], "lab/bulk/1");
    assert_eq!(page["limits"], json!(["limit"]));
}

#[test]
fn concurrent_identical_composes_admit_one_view() {
    let (_labd, coord) = start("views-race");
    let admin = coord.admin();
    project(&coord, &admin, "alpha");
    let record = publish_record(&coord, &admin, "r", "projects/alpha/snapshots/s", json!(1));
    let req = Req::json(
        "compose",
        &compose_body("race", "race", &[record["entry"].clone()], json!({})),
    );
    let answers: Vec<Value> = coord.send_together(&admin, &req, 8);
    assert_eq!(
        answers.iter().filter(|a| a["replayed"] == false).count(),
        1,
        "one admission: {answers:?}"
    );
    assert!(answers.iter().all(|a| a["record"] == answers[0]["record"]));
    let entries = Req::read("entries").path("projects/alpha/views/race");
    let page = coord.ok(&admin, &entries, 200);
    let records = page["entries"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e.get("record").is_some())
        .count();
    assert_eq!(records, 1);
}
