//! Hosts sharing one PostgreSQL store (`--store postgresql://…`): a
//! PostgreSQL cluster started by the test from the system's binaries, and
//! `labd` processes serving the journal from it. What one host commits the
//! other serves; an operation raced through both has one result; a host
//! killed mid-append loses nothing it acknowledged and the other keeps
//! serving; the store going away is 503 `unavailable` and the service
//! comes back with it, by itself.
//!
//! The black-box suites of the services run on this backend as well, under
//! `LAB_TEST_STORE=postgres` (`tests/support/mod.rs`, and `make test`).

use crate::support;
use crate::support::coord::{nonce, now, second_host, Coord, Req};
use crate::support::{pg_cluster, refused_start, temp_dir, Client, Labd, Response};
use base64::Engine;
use lab_coord_auth::GrantKind;
use lab_pgcluster::Cluster;
use serde_json::{json, Value};
use std::io::{BufRead, Write};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

/// A `labd` serving the journal alone from `store`.
fn host(name: &str, store: &Cluster) -> Labd {
    let url = store.url();
    Labd::start(name, &["--services", "journal", "--store", &url])
}

fn op_id() -> String {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    format!(
        "op-{}-{}",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed)
    )
}

/// The fact `["p", n]` in the canonical encoding, as the wire carries it.
fn fact(n: u16) -> String {
    let mut bytes = vec![0x82, 0xd8, 0x27, 0x41, b'p'];
    match n {
        0..24 => bytes.push(n as u8),
        24..256 => bytes.extend([0x18, n as u8]),
        _ => bytes.extend([[0x19].as_slice(), &n.to_be_bytes()].concat()),
    }
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

fn post(client: &Client, operation: &str, body: &Value) -> Response {
    client.post_json(&format!("/v1/{operation}"), &body.to_string())
}

fn ok(client: &Client, operation: &str, body: &Value, status: u16) -> Value {
    let response = post(client, operation, body);
    assert_eq!(
        response.status,
        status,
        "{operation} {body}: {}",
        String::from_utf8_lossy(&response.body)
    );
    response.json()
}

/// The journal's root space, as `describe` reports it.
fn root(client: &Client) -> Value {
    let identity = client.get("/describe").json()["identity"].clone();
    json!({ "root_id": identity["root_id"], "space_id": identity["root_space_id"] })
}

/// Creates `key` under the root through `client`; the new space.
fn create(client: &Client, key: &str) -> Value {
    let body = json!({ "parent": root(client), "key": key, "operation_id": op_id() });
    let child = ok(client, "create", &body, 201)["child"].clone();
    json!({ "root_id": child["root_id"], "space_id": child["space_id"] })
}

fn append_body(space: &Value, n: u16, operation_id: &str) -> Value {
    json!({ "space": space, "facts": [fact(n)], "operation_id": operation_id })
}

/// Every fact of `space`, in order, read through `client`.
fn facts(client: &Client, space: &Value) -> Vec<String> {
    let mut found = Vec::new();
    let mut body = json!({ "space": space });
    loop {
        let page = ok(client, "read", &body, 200);
        for entry in page["entries"].as_array().unwrap() {
            found.push(entry["fact"].as_str().unwrap().to_string());
        }
        match page["next"].as_str() {
            Some(cursor) => body = json!({ "space": space, "cursor": cursor }),
            None => return found,
        }
    }
}

fn head(client: &Client, space: &Value) -> u64 {
    ok(client, "head", &json!({ "space": space }), 200)["cutoff"]
        .as_u64()
        .unwrap()
}

#[test]
fn two_hosts_serve_one_store() {
    let store = pg_cluster("two-hosts-pg");
    let a = host("two-hosts-a", &store);
    let b = host("two-hosts-b", &store);
    let (ja, jb) = (a.journal(), b.journal());
    // One provisioned root, whichever host is asked.
    assert_eq!(root(&ja), root(&jb));

    let space = create(&ja, "shared");
    for n in 0..20u16 {
        let through = if n % 2 == 0 { &ja } else { &jb };
        let result = ok(through, "append", &append_body(&space, n, &op_id()), 201);
        assert_eq!(result["first"], u64::from(n) + 1, "{result}");
    }
    let expected: Vec<String> = (0..20).map(fact).collect();
    assert_eq!(facts(&ja, &space), expected);
    assert_eq!(facts(&jb, &space), expected);

    // A key created through one host is taken through the other.
    let body = json!({ "parent": root(&jb), "key": "shared", "operation_id": op_id() });
    let taken = post(&jb, "create", &body);
    assert_eq!(
        taken.status,
        409,
        "{}",
        String::from_utf8_lossy(&taken.body)
    );
}

#[test]
fn one_operation_raced_through_two_hosts_has_one_result() {
    let store = pg_cluster("race-pg");
    let hosts = [host("race-a", &store), host("race-b", &store)];
    let space = create(&hosts[0].journal(), "raced");
    for round in 0..10u16 {
        let operation_id = op_id();
        let body = append_body(&space, round, &operation_id);
        let answers: Vec<Response> = std::thread::scope(|s| {
            let racers: Vec<_> = hosts
                .iter()
                .map(|h| {
                    let client = h.journal();
                    let body = &body;
                    s.spawn(move || post(&client, "append", body))
                })
                .collect();
            racers.into_iter().map(|r| r.join().unwrap()).collect()
        });
        let mut results: Vec<Value> = answers
            .iter()
            .map(|r| {
                assert!(
                    r.status == 200 || r.status == 201,
                    "{}: {}",
                    r.status,
                    String::from_utf8_lossy(&r.body)
                );
                r.json()
            })
            .collect();
        // One was the append, the other its replay: the same positions.
        let replays = results.iter().filter(|r| r["replayed"] == true).count();
        assert_eq!(replays, 1, "{results:?}");
        for result in &mut results {
            result.as_object_mut().unwrap().remove("replayed");
        }
        assert_eq!(results[0], results[1]);
        assert_eq!(results[0]["last"], u64::from(round) + 1);
    }
    assert_eq!(head(&hosts[1].journal(), &space), 10);
}

#[test]
fn a_host_killed_mid_append_loses_nothing_acknowledged() {
    let store = pg_cluster("kill-pg");
    let doomed = host("kill-a", &store);
    let survivor = host("kill-b", &store);
    let space = create(&survivor.journal(), "appended");
    let acknowledged = Arc::new(Mutex::new(Vec::new()));
    let stop = Arc::new(AtomicBool::new(false));
    let appenders: Vec<_> = (0..4u16)
        .map(|worker| {
            let client = doomed.journal();
            let (space, acknowledged, stop) =
                (space.clone(), Arc::clone(&acknowledged), Arc::clone(&stop));
            std::thread::spawn(move || {
                let mut n = 0u16;
                while !stop.load(Ordering::Relaxed) && n < 60 {
                    let tag = worker * 60 + n;
                    let body = append_body(&space, tag, &op_id());
                    match client.try_post_json("/v1/append", &body.to_string()) {
                        Ok(r) if r.status == 201 => acknowledged.lock().unwrap().push(fact(tag)),
                        _ => return,
                    }
                    n += 1;
                }
            })
        })
        .collect();
    support::eventually("some appends acknowledged", || {
        acknowledged.lock().unwrap().len() >= 20
    });
    let data = doomed.kill();
    stop.store(true, Ordering::Relaxed);
    for appender in appenders {
        appender.join().unwrap();
    }
    let _ = std::fs::remove_dir_all(data);

    // The other host serves every acknowledged append, and takes more.
    let client = survivor.journal();
    let served = facts(&client, &space);
    for fact in acknowledged.lock().unwrap().iter() {
        assert!(served.contains(fact), "acknowledged {fact} is gone");
    }
    // A commit the killed host had sent may still land after the read
    // above: the new append follows whatever is there by then.
    let result = ok(&client, "append", &append_body(&space, 250, &op_id()), 201);
    let first = result["first"].as_u64().unwrap();
    assert!(first > served.len() as u64, "{result}");
    assert_eq!(facts(&client, &space).len() as u64, first);
}

#[test]
fn the_store_going_away_is_unavailable_and_service_resumes() {
    let mut store = pg_cluster("outage-pg");
    let labd = host("outage", &store);
    let client = labd.journal();
    let space = create(&client, "through-an-outage");
    ok(&client, "append", &append_body(&space, 1, &op_id()), 201);

    store.stop();
    let operation_id = op_id();
    let refused = post(&client, "append", &append_body(&space, 2, &operation_id));
    assert_eq!(
        refused.status,
        503,
        "{}",
        String::from_utf8_lossy(&refused.body)
    );
    refused.assert_error(503, "unavailable");
    assert_eq!(refused.header("retry-after"), Some("1"));
    post(&client, "head", &json!({ "space": space })).assert_error(503, "unavailable");

    // Back without restarting labd; the refused append, sent again, is
    // made once.
    store.resume().unwrap();
    ok(
        &client,
        "append",
        &append_body(&space, 2, &operation_id),
        201,
    );
    let again = ok(
        &client,
        "append",
        &append_body(&space, 2, &operation_id),
        200,
    );
    assert_eq!(again["replayed"], true);
    assert_eq!(facts(&client, &space), vec![fact(1), fact(2)]);
}

#[test]
fn a_store_restarted_under_load_loses_nothing_acknowledged() {
    let mut store = pg_cluster("restart-pg");
    let labd = host("restart", &store);
    let space = create(&labd.journal(), "under-load");
    #[derive(Default)]
    struct Seen {
        acknowledged: Vec<String>,
        refused: usize,
    }
    let seen = Arc::new(Mutex::new(Seen::default()));
    let stop = Arc::new(AtomicBool::new(false));
    let appenders: Vec<_> = (0..4u16)
        .map(|worker| {
            let client = labd.journal();
            let (space, seen, stop) = (space.clone(), Arc::clone(&seen), Arc::clone(&stop));
            std::thread::spawn(move || {
                for n in 0..2_000 {
                    if stop.load(Ordering::Relaxed) {
                        return;
                    }
                    let tag = worker * 2_000 + n;
                    let answer = post(&client, "append", &append_body(&space, tag, &op_id()));
                    match answer.status {
                        201 => seen.lock().unwrap().acknowledged.push(fact(tag)),
                        // Never a success without its commit; never a 500.
                        503 => {
                            answer.assert_error(503, "unavailable");
                            seen.lock().unwrap().refused += 1;
                        }
                        _ => panic!(
                            "{}: {}",
                            answer.status,
                            String::from_utf8_lossy(&answer.body)
                        ),
                    }
                }
            })
        })
        .collect();
    let acknowledged = || seen.lock().unwrap().acknowledged.len();
    support::eventually("appends before the restart", || acknowledged() >= 20);
    store.stop();
    support::eventually("appends refused while the store is down", || {
        seen.lock().unwrap().refused >= 4
    });
    let before = acknowledged();
    store.resume().unwrap();
    support::eventually("appends after the restart", || {
        acknowledged() >= before + 20
    });
    stop.store(true, Ordering::Relaxed);
    for appender in appenders {
        appender.join().unwrap();
    }
    let served = facts(&labd.journal(), &space);
    let unique: std::collections::HashSet<_> = served.iter().collect();
    assert_eq!(unique.len(), served.len(), "a fact appended twice");
    for fact in &seen.lock().unwrap().acknowledged {
        assert!(served.contains(fact), "acknowledged {fact} is gone");
    }
}

#[test]
fn a_nonce_used_through_one_host_is_refused_through_another() {
    let mut store = pg_cluster("nonce-pg");
    let url = store.url();
    // One world behind one audience: the second host is given the first
    // one's root key.
    let audience = "http://lab.test";
    let shared = ["--store", &url, "--coord-audience", audience];
    let a = Labd::start("nonce-a", &shared);
    let coord_a = Coord {
        audience: audience.into(),
        ..Coord::new(&a)
    };
    let (_b, coord_b) = second_host("nonce-b", &a, audience, &shared);

    let reader = coord_a.holder(7, &[GrantKind::Read], "");
    let req = Req::read("children");
    for (first, then) in [(&coord_a, &coord_b), (&coord_b, &coord_a)] {
        let header = first.header(&reader, &req, now(), &nonce());
        let accepted = first.send_with_header(&req, Some(&header));
        assert_eq!(
            accepted.status,
            200,
            "{}",
            String::from_utf8_lossy(&accepted.body)
        );
        then.send_with_header(&req, Some(&header))
            .assert_error(401, "unverified");
        first
            .send_with_header(&req, Some(&header))
            .assert_error(401, "unverified");
    }
    // The pairs are the store's: without it, a signed request is neither
    // accepted nor refused as a replay, but unavailable.
    store.stop();
    coord_b.send(&reader, &req).assert_error(503, "unavailable");
}

#[test]
fn requests_past_the_connection_bound_are_refused_with_503() {
    let store = pg_cluster("connections-pg");
    let url = store.url();
    let labd = Labd::start(
        "connections",
        &[
            "--services",
            "journal",
            "--store",
            &url,
            "--store-connections",
            "1",
        ],
    );
    let client = labd.journal();
    let space = create(&client, "held");
    // Another session holds the journal's writer lock: the next append
    // waits for it, holding the host's one connection meanwhile.
    let mut holder = store
        .psql()
        .arg("-tA")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut session = holder.stdin.take().unwrap();
    writeln!(
        session,
        "BEGIN; SELECT 1 FROM lab_kv_writer WHERE namespace = 'journal' FOR UPDATE;\n\\echo locked"
    )
    .unwrap();
    let said = std::io::BufReader::new(holder.stdout.take().unwrap());
    for line in said.lines() {
        if line.unwrap() == "locked" {
            break;
        }
    }
    let waiting = std::thread::spawn({
        let client = labd.journal();
        let body = append_body(&space, 1, &op_id());
        move || post(&client, "append", &body)
    });
    support::eventually("the append to wait for the lock", || {
        let waiters = store
            .psql()
            .args([
                "-tAc",
                "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock'",
            ])
            .output()
            .unwrap();
        String::from_utf8_lossy(&waiters.stdout).trim() == "1"
    });
    let refused = post(&client, "head", &json!({ "space": space }));
    refused.assert_error(503, "unavailable");
    assert_eq!(refused.header("retry-after"), Some("1"));
    assert!(
        String::from_utf8_lossy(&refused.body).contains("--store-connections"),
        "{}",
        String::from_utf8_lossy(&refused.body)
    );
    // The lock released, the waiting append is made and the host serves.
    writeln!(session, "COMMIT;").unwrap();
    drop(session);
    holder.wait().unwrap();
    assert_eq!(waiting.join().unwrap().status, 201);
    assert_eq!(head(&client, &space), 1);
}

#[test]
fn a_store_setting_that_cannot_be_served_stops_labd_at_start() {
    let refused = refused_start("bad-store", &["--store".into(), "mysql://db/lab".into()]);
    assert!(refused.contains("--store"), "{refused}");
    let nowhere = temp_dir("no-server");
    let url = format!("postgresql://lab@/postgres?host={}", nowhere.display());
    let refused = refused_start("no-server-store", &["--store".into(), url]);
    assert!(refused.contains("open the PostgreSQL store"), "{refused}");
}
