//! Authority stays inside its scope in the coordination service: what a
//! provisioner may issue, what a retirement closes, and what references
//! inside bodies reveal. Each test plays a hostile caller holding a
//! legitimate but narrower grant, and the legitimate path beside it.

use crate::support::coord::{key, now, start, Coord, Holder, Req, DAY, WORLD};
use crate::support::Response;
use lab_coord_auth::{issue_grant, Grant, GrantFields, GrantKind, Principal, SigningKey};
use serde_json::{json, Value};

impl Coord {
    /// Whether `who` may read the space at `path` (200) or is denied (403);
    /// any other answer fails the test.
    fn can_read(&self, who: &Holder, path: &str) -> bool {
        let response = self.send(who, &Req::read("resolve").path(path));
        if response.status == 403 {
            response.assert_error(403, "denied");
            return false;
        }
        assert_eq!(
            response.status,
            200,
            "{}",
            String::from_utf8_lossy(&response.body)
        );
        true
    }

    /// `get` of one occurrence by reference.
    fn get(&self, who: &Holder, entry: &Value) -> Response {
        let text = |name: &str| entry[name].as_str().unwrap().to_string();
        let position = entry["position"].as_i64().unwrap();
        let get = Req::read("get")
            .string("root_id", &text("root_id"))
            .string("space_id", &text("space_id"))
            .int("position", position);
        self.send(who, &get)
    }

    /// `provision_worker` as `who`.
    fn provision(&self, who: &Holder, body: &Value) -> Response {
        self.send(who, &Req::json("provision_worker", body))
    }

    fn retire(&self, who: &Holder, project: &str, worker: &str) -> Value {
        let body = json!({
            "operation_id": format!("retire-{worker}"), "project": project, "worker": worker,
        });
        self.ok(who, &Req::json("retire_worker", &body), 201)
    }
}

/// A provisioning request for `worker` of `project` held by `principal`.
fn provisioning(
    worker: &str,
    principal: &str,
    permissions: Value,
    project: &str,
    valid_until: u64,
) -> Value {
    json!({
        "operation_id": format!("provision-{worker}"),
        "project": project,
        "worker": worker,
        "principal": principal,
        "permissions": permissions,
        "valid_until": valid_until,
    })
}

/// The grants a provisioning answer issued.
fn issued(answer: &Value) -> Vec<Grant> {
    answer["grants"]
        .as_array()
        .unwrap()
        .iter()
        .map(|g| Grant::from_json_bytes(g.to_string().as_bytes()).unwrap())
        .collect()
}

fn assert_invalid(response: &Response, field: &str) {
    response.assert_error(400, "invalid");
    assert_eq!(response.json()["details"]["field"], field);
}

/// A grant `holder` delegates from `parent` to `to`.
fn delegate(holder: &SigningKey, parent: &Grant, to: &SigningKey, valid_until: u64) -> Grant {
    issue_grant(
        holder,
        WORLD,
        GrantFields {
            principal: Principal::of(to),
            kind: parent.kind,
            path: parent.path.clone(),
            valid_until,
        },
        Some(parent),
    )
    .unwrap()
}

/// A key holding `provision` only on one worker's path provisions that
/// worker with the root's principal, or with another worker's key: both
/// refused, nothing created. A third party's key it may provision, and
/// retiring that worker leaves the third party's own authority, and the
/// root's, as they were.
#[test]
fn retirement_cannot_lock_out_the_root_or_another_principal() {
    let (_labd, coord) = start("authority-lockout");
    coord.project("beta");
    let admin = coord.admin();
    let hostile = coord.holder(60, &[GrantKind::Provision], "projects/beta/workers/x");
    let root_principal = Principal::of(&coord.root).to_string();
    let scoped = json!([{ "kind": "read", "path": ["projects", "beta", "workers", "x"] }]);
    let until = now() + 3600;

    // The root's principal is never a worker.
    let refused = coord.provision(
        &hostile,
        &provisioning("x", &root_principal, scoped.clone(), "beta", until),
    );
    assert_invalid(&refused, "principal");
    assert_eq!(coord.space_at("projects/beta/workers/x"), Value::Null);

    // A key already provisioned for another worker is refused, active or
    // retired: one key is one worker.
    let taken = key(61);
    let first = provisioning(
        "w1",
        &Principal::of(&taken).to_string(),
        json!([]),
        "beta",
        until,
    );
    coord.ok(&admin, &Req::json("provision_worker", &first), 201);
    let again = provisioning(
        "x",
        &Principal::of(&taken).to_string(),
        scoped.clone(),
        "beta",
        until,
    );
    assert_invalid(&coord.provision(&hostile, &again), "principal");
    coord.retire(&admin, "beta", "w1");
    assert_invalid(&coord.provision(&hostile, &again), "principal");
    assert_eq!(coord.space_at("projects/beta/workers/x"), Value::Null);

    // A third party with authority of its own, provisioned as worker x
    // and retired by the hostile provisioner.
    let mut third = coord.holder(
        62,
        &[GrantKind::Read, GrantKind::Provision],
        "projects/beta",
    );
    let answer = coord.ok(
        &hostile,
        &Req::json(
            "provision_worker",
            &provisioning("x", &third.principal(), scoped, "beta", until),
        ),
        201,
    );
    let worker_grants = issued(&answer);
    assert_eq!(worker_grants.len(), 1);
    let as_worker = Holder {
        key: third.key.clone(),
        grants: worker_grants.clone(),
    };
    assert!(coord.can_read(&as_worker, "projects/beta/workers/x/state"));
    coord.retire(&hostile, "beta", "x");

    // What the provisioning opened is closed ...
    assert!(!coord.can_read(&as_worker, "projects/beta/workers/x/state"));
    // ... and nothing else: the third party's own grants, carried beside
    // the revoked one, still read and provision; the root still reads and
    // creates projects.
    third.grants.extend(worker_grants);
    assert!(coord.can_read(&third, "projects/beta/workers/x/state"));
    let next = provisioning(
        "y",
        &Principal::of(&key(63)).to_string(),
        json!([]),
        "beta",
        until,
    );
    coord.ok(&third, &Req::json("provision_worker", &next), 201);
    assert!(coord.can_read(&admin, "projects"));
    assert!(coord.can_read(&admin, "projects/beta/workers/x/state"));
    coord.project("gamma");
}

/// A worker's delegate reads while the worker is live; once the worker is
/// retired, neither the worker nor any delegate (made before or after the
/// retirement) is authorized, for reads and writes alike, and a restart
/// does not bring them back. The root and other principals are unaffected.
#[test]
fn retirement_revokes_the_worker_and_every_delegation_from_it() {
    let (labd, coord) = start("authority-delegation");
    coord.project("alpha");
    let admin = coord.admin();
    let worker_key = key(70);
    let answer = coord.ok(
        &admin,
        &Req::json(
            "provision_worker",
            &provisioning(
                "w",
                &Principal::of(&worker_key).to_string(),
                json!([
                    { "kind": "read", "path": ["projects", "alpha"] },
                    { "kind": "publish", "path": ["projects", "alpha", "workers", "w"] },
                ]),
                "alpha",
                now() + 3600,
            ),
        ),
        201,
    );
    let grants = issued(&answer);
    let worker = Holder {
        key: worker_key.clone(),
        grants: grants.clone(),
    };
    let delegate_key = key(71);
    let before = delegate(&worker_key, &grants[0], &delegate_key, now() + 1800);
    let early_delegate = Holder {
        key: delegate_key.clone(),
        grants: vec![grants[0].clone(), before],
    };
    let other = coord.holder(72, &[GrantKind::Read], "projects/alpha");
    let note = |id: &str| {
        json!({
            "operation_id": id, "path": ["projects", "alpha", "workers", "w", "notes", "n"],
            "profile": "lab/finding/1", "record": { "seen": true },
        })
    };

    assert!(coord.can_read(&worker, "projects/alpha"));
    assert!(coord.can_read(&early_delegate, "projects/alpha"));
    coord.ok(&worker, &Req::json("publish", &note("n-1")), 201);

    coord.retire(&admin, "alpha", "w");

    assert!(!coord.can_read(&worker, "projects/alpha"));
    assert!(!coord.can_read(&early_delegate, "projects/alpha"));
    let after = delegate(&worker_key, &grants[0], &key(73), now() + 1800);
    let late_delegate = Holder {
        key: key(73),
        grants: vec![grants[0].clone(), after],
    };
    assert!(!coord.can_read(&late_delegate, "projects/alpha"));
    coord
        .send(&worker, &Req::json("publish", &note("n-2")))
        .assert_error(403, "denied");
    // An occurrence by reference (request rule 10) is refused as well.
    let state = &answer["state"]["entry"];
    coord.get(&worker, state).assert_error(403, "denied");
    assert_eq!(coord.get(&other, state).status, 200);
    assert!(coord.can_read(&other, "projects/alpha"));
    assert!(coord.can_read(&admin, "projects/alpha"));

    // The revocation was durable before the retirement answered.
    let labd = labd.kill_and_restart();
    let coord = Coord::new(&labd);
    assert!(!coord.can_read(&worker, "projects/alpha"));
    assert!(!coord.can_read(&early_delegate, "projects/alpha"));
    assert!(coord.can_read(&other, "projects/alpha"));
}

/// A provisioner issues only what its own `provision` grants cover, in
/// path and in time: with `provision` on one worker it cannot hand itself
/// (or anyone) read, publish or declare on the project; with `provision`
/// on the project it issues project-wide read until that grant expires.
#[test]
fn a_provisioner_cannot_widen_its_own_authority() {
    let (_labd, coord) = start("authority-widening");
    coord.project("beta");
    let narrow = coord.holder(80, &[GrantKind::Provision], "projects/beta/workers/x");
    let until = now() + 3600;
    for (kind, path) in [
        ("read", json!(["projects", "beta"])),
        ("publish", json!(["projects", "beta", "snapshots"])),
        ("declare", json!(["projects", "beta", "artifacts"])),
        ("read", json!(["projects", "beta", "workers", "xy"])),
    ] {
        let widening = provisioning(
            "x",
            &narrow.principal(),
            json!([{ "kind": kind, "path": path }]),
            "beta",
            until,
        );
        coord
            .provision(&narrow, &widening)
            .assert_error(403, "denied");
    }
    // Within its scope, it may; the caller is denied the project still.
    let within = provisioning(
        "x",
        &narrow.principal(),
        json!([{ "kind": "read", "path": ["projects", "beta", "workers", "x"] }]),
        "beta",
        until,
    );
    let answer = coord.ok(&narrow, &Req::json("provision_worker", &within), 201);
    let mut widened = narrow.clone();
    widened.grants.extend(issued(&answer));
    assert!(coord.can_read(&widened, "projects/beta/workers/x"));
    assert!(!coord.can_read(&widened, "projects/beta"));

    // Time: `provision` on the project lasts an hour here, `provision` on
    // the worker a day; project-wide read may last the hour, no longer.
    let mut project_wide = coord.holder(81, &[GrantKind::Provision], "projects/beta/workers/z");
    project_wide.grants.push(coord.grant(
        &project_wide.key,
        GrantKind::Provision,
        "projects/beta",
        until,
    ));
    let reader = key(82);
    let beyond = provisioning(
        "z",
        &Principal::of(&reader).to_string(),
        json!([{ "kind": "read", "path": ["projects", "beta"] }]),
        "beta",
        until + 60,
    );
    coord
        .provision(&project_wide, &beyond)
        .assert_error(403, "denied");
    assert_eq!(coord.space_at("projects/beta/workers/z"), Value::Null);
    let mut lasting = beyond.clone();
    lasting["valid_until"] = json!(until);
    let answer = coord.ok(&project_wide, &Req::json("provision_worker", &lasting), 201);
    let worker = Holder {
        key: reader,
        grants: issued(&answer),
    };
    assert!(coord.can_read(&worker, "projects/beta"));
    assert!(!coord.can_read(&worker, "projects"));
}

/// References inside bodies follow request rule 10 and need `read` where
/// they are cited: a caller who may not read a project or an input learns
/// nothing from `create_campaign` or `assign` (the same `denied` whether
/// the thing exists or not); a caller who may read the world is told
/// `not_found`.
#[test]
fn references_in_bodies_do_not_reveal_what_the_caller_cannot_read() {
    let (_labd, coord) = start("authority-references");
    coord.project("alpha");
    coord.project("beta");
    let admin = coord.admin();

    // create_campaign: `read` on the project is needed.
    let campaigner = coord.holder(90, &[GrantKind::Provision], "campaigns");
    let campaign = |label: &str, project: &str| json!({ "operation_id": format!("c-{label}"), "label": label, "project": project });
    for project in ["alpha", "nope"] {
        coord
            .send(
                &campaigner,
                &Req::json("create_campaign", &campaign("c1", project)),
            )
            .assert_error(403, "denied");
    }
    assert_eq!(coord.space_at("campaigns/c1"), Value::Null);
    coord
        .send(
            &admin,
            &Req::json("create_campaign", &campaign("c2", "nope")),
        )
        .assert_error(404, "not_found");
    let mut reader = campaigner.clone();
    reader
        .grants
        .push(coord.grant(&reader.key, GrantKind::Read, "projects/alpha", now() + DAY));
    coord.ok(
        &reader,
        &Req::json("create_campaign", &campaign("c1", "alpha")),
        201,
    );

    // assign: `read` on the worker and on each input's space is needed.
    let worker_state = |worker: &str, seed: u8, project: &str| {
        let answer = coord.ok(
            &admin,
            &Req::json(
                "provision_worker",
                &provisioning(
                    worker,
                    &Principal::of(&key(seed)).to_string(),
                    json!([]),
                    project,
                    now() + 3600,
                ),
            ),
            201,
        );
        answer["state"]["entry"].clone()
    };
    let in_w = worker_state("w", 91, "alpha");
    let in_u = worker_state("u", 92, "alpha");
    let in_beta = worker_state("v", 93, "beta");
    let unknown = json!({
        "root_id": in_w["root_id"], "space_id": "spc_00000000000000000000000000000000",
        "position": 1,
    });
    let assignment = |name: &str, worker: &str, inputs: Value| {
        json!({
            "operation_id": format!("as-{name}"), "campaign": "c1", "assignment": name,
            "worker": worker, "inputs": inputs, "outputs": [],
        })
    };
    let assign = |who: &Holder, body: &Value| coord.send(who, &Req::json("assign", body));

    // Without `read` on the worker's space, whether the worker exists is
    // not told.
    let bare = coord.holder(94, &[GrantKind::Provision], "campaigns/c1");
    for worker in ["w", "ghost"] {
        assign(&bare, &assignment("a1", worker, json!([]))).assert_error(403, "denied");
    }
    assign(&admin, &assignment("a1", "ghost", json!([]))).assert_error(409, "unresolved");

    // Reading the worker does not make its neighbours' or another
    // project's journals citable; an unknown space looks the same.
    let mut assigner = bare.clone();
    assigner.grants.push(coord.grant(
        &assigner.key,
        GrantKind::Read,
        "projects/alpha/workers/w",
        now() + DAY,
    ));
    for input in [&in_u, &in_beta, &unknown] {
        assign(&assigner, &assignment("a1", "w", json!([input]))).assert_error(403, "denied");
    }
    assert_eq!(coord.space_at("campaigns/c1/assignments/a1"), Value::Null);

    // A caller who may read the world is told what is absent.
    assign(&admin, &assignment("a2", "w", json!([unknown]))).assert_error(404, "not_found");
    let mut beyond = in_w.clone();
    beyond["position"] = json!(99);
    let response = assign(&admin, &assignment("a2", "w", json!([beyond])));
    response.assert_error(409, "unresolved");
    assert_eq!(response.json()["details"]["reference"], beyond);

    let assigned = assign(&assigner, &assignment("a1", "w", json!([in_w])));
    assert_eq!(
        assigned.status,
        201,
        "{}",
        String::from_utf8_lossy(&assigned.body)
    );
}

/// Requests on one HTTP connection share the signatures they had verified
/// (design.md, "Sockets" 9): a grant checked once on the connection
/// vouches for its exact bytes only, never for a grant altered around its
/// signature, and never outlives the grant's revocation.
#[test]
fn a_grant_verified_on_a_connection_vouches_for_its_exact_bytes_only() {
    use crate::support::coord::{kept_alive_request_bytes, nonce};
    let (_labd, coord) = start("http-verified");
    coord.project("alpha");
    coord.project("beta");
    let worker = coord.provision_worker("alpha", "w1", 41);
    let mut connection = coord.client.connect();
    let mut on_connection = |who: &Holder, path: &str| {
        let req = Req::read("resolve").path(path);
        let header = coord.header(who, &req, now(), &nonce());
        std::io::Write::write_all(&mut connection, &kept_alive_request_bytes(&req, &header))
            .unwrap();
        crate::support::read_response(&mut connection)
    };
    let fresh = |who: &Holder, path: &str| coord.send(who, &Req::read("resolve").path(path));
    // The grant verifies on this connection, and reaches alpha only.
    assert_eq!(on_connection(&worker, "projects/alpha").status, 200);
    on_connection(&worker, "projects/beta").assert_error(403, "denied");

    let altered = |change: &dyn Fn(&mut Grant)| {
        let mut grants = worker.grants.clone();
        change(&mut grants[0]);
        Holder {
            key: worker.key.clone(),
            grants,
        }
    };
    let widened = altered(&|g| g.path = Vec::new());
    let longer = altered(&|g| g.valid_until += 1);
    let resigned = altered(&|g| g.signature[0] ^= 1);
    for (holder, path) in [
        (&widened, "projects/beta"),
        (&longer, "projects/alpha"),
        (&resigned, "projects/alpha"),
    ] {
        let unseen = fresh(holder, path);
        assert_ne!(unseen.status, 200);
        let seen = on_connection(holder, path);
        assert_eq!(seen.status, unseen.status);
        assert_eq!(seen.json()["error"], unseen.json()["error"]);
    }
    // The grant as issued still holds, until its worker is retired.
    assert_eq!(on_connection(&worker, "projects/alpha").status, 200);
    coord.retire_worker("alpha", "w1");
    let after = on_connection(&worker, "projects/alpha");
    assert_eq!(after.status, fresh(&worker, "projects/alpha").status);
    assert_ne!(after.status, 200, "a revoked grant outlived its retirement");
}
