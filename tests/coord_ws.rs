//! The socket binding over the wire (`WS.md`): the upgrade and its
//! refusals, every close code, envelope strictness, per-call
//! authentication, the per-connection limits, concurrency, parity with
//! the HTTP binding, reconnection, the frame budget and shutdown.

use crate::support;
use crate::support::coord::{labels, nonce, now, Coord, Req};
use crate::support::ws::{connect, error_of, Ws};
use crate::support::Labd;
use lab_coord_auth::GrantKind;
use serde_json::{json, Value};
use tungstenite::protocol::frame::coding::CloseCode;
use tungstenite::protocol::CloseFrame;
use tungstenite::Message;

fn start(name: &str, extra: &[&str]) -> (Labd, Coord) {
    let labd = Labd::start(name, extra);
    let coord = Coord::new(&labd);
    (labd, coord)
}

fn publish_body(op: &str, path: &str, record: Value) -> Value {
    json!({ "operation_id": op, "path": labels(path), "profile": "lab/finding/1", "record": record })
}

#[test]
fn the_upgrade_and_every_close_code() {
    let (_labd, coord) = start("ws-close", &[]);

    // Not an upgrade: 400 `invalid`; another method: 405 with `Allow`.
    let plain = coord.client.get("/v1/ws");
    plain.assert_error(400, "invalid");
    assert_eq!(plain.header("lab-service"), Some("coord"));
    let post = coord.client.post_json("/v1/ws", "{}");
    post.assert_error(405, "invalid");
    assert_eq!(post.header("allow"), Some("GET"));

    // The upgrade carries the identity headers and the subprotocol.
    let mut ws = coord.socket();
    assert_eq!(ws.headers["lab-service"], "coord");
    assert_eq!(ws.headers["lab-contract"], "2026-09-19");
    assert_eq!(ws.headers["sec-websocket-protocol"], "coord");
    // A client close is echoed with its code.
    let normal = CloseFrame {
        code: CloseCode::Normal,
        reason: "done".into(),
    };
    ws.socket.close(Some(normal)).unwrap();
    assert_eq!(ws.closed().0, 1000);

    // Without the subprotocol: accepted, then 1002 naming it.
    let mut bare = connect(coord.client.address, None);
    let (code, reason) = bare.closed();
    assert_eq!(code, 1002);
    assert!(reason.contains("subprotocol"), "{reason}");

    let mut ws = coord.socket();
    ws.socket.send(Message::binary(vec![1, 2, 3])).unwrap();
    assert_eq!(ws.closed().0, 1003);

    for frame in [
        "[1]",
        "{\"op\":\"resolve\"}",
        "{\"id\":\"\"}",
        "{\"id\":7}",
        "not json",
    ] {
        let mut ws = coord.socket();
        ws.send_text(frame);
        assert_eq!(ws.closed().0, 1007, "{frame}");
    }

    // One byte over the read limit (the frame is otherwise an envelope).
    let mut ws = coord.socket();
    let over = 68_157_440 + 1;
    let mut frame = String::from("{\"id\":\"big\",\"op\":\"children\"}");
    frame.push_str(&" ".repeat(over - frame.len()));
    ws.send_text(&frame);
    assert_eq!(ws.closed().0, 1009);
    // At the limit it is a call.
    let mut ws = coord.socket();
    frame.pop();
    ws.send_text(&frame);
    let reply = ws.reply();
    assert_eq!(error_of(&reply, "big").0, "unverified");

    // A ping is answered, and the connection goes on.
    let mut ws = coord.socket();
    ws.socket
        .send(Message::Ping(b"hi".to_vec().into()))
        .unwrap();
    match ws.socket.read().unwrap() {
        Message::Pong(payload) => assert_eq!(&payload[..], b"hi"),
        other => panic!("expected a pong, got {other:?}"),
    }
    ws.send_text(r#"{"id":"after-ping","op":"children"}"#);
    assert_eq!(error_of(&ws.reply(), "after-ping").0, "unverified");
}

#[test]
fn envelopes_are_strict_and_each_call_is_authenticated() {
    let (_labd, coord) = start("ws-envelope", &[]);
    let admin = coord.admin();
    coord.project("alpha");
    let mut ws = coord.socket();
    let resolve = Req::read("resolve").path("projects/alpha");
    let good = coord.envelope(&admin, &resolve, "good");

    // The setup holds: a signed call is answered.
    ws.send_json(&good);
    let reply = ws.reply();
    assert_eq!(reply["status"], "ok", "{reply}");
    assert_eq!(reply["id"], "good");

    let refused = |ws: &mut Ws, frame: String, id: &str| -> (String, String, Value) {
        ws.send_text(&frame);
        let reply = ws.reply();
        let (code, message) = error_of(&reply, id);
        (
            code.to_string(),
            message.to_string(),
            reply["error"].clone(),
        )
    };
    let with = |change: &dyn Fn(&mut Value)| {
        let mut envelope = coord.envelope(&admin, &resolve, "e");
        change(&mut envelope);
        envelope.to_string()
    };
    let invalid_field = |(code, _, error): (String, String, Value), field: &str| {
        assert_eq!(code, "invalid", "{error}");
        assert_eq!(error["details"]["field"], field, "{error}");
    };
    invalid_field(
        refused(&mut ws, with(&|e| e["extra"] = json!(1)), "e"),
        "extra",
    );
    invalid_field(
        refused(
            &mut ws,
            with(&|e| {
                e.as_object_mut().unwrap().remove("op");
            }),
            "e",
        ),
        "op",
    );
    invalid_field(
        refused(
            &mut ws,
            with(&|e| e["params"]["path"] = json!("projects")),
            "e",
        ),
        "path",
    );
    invalid_field(
        refused(
            &mut ws,
            with(&|e| e["params"]["path"] = json!(["projects", ""])),
            "e",
        ),
        "path",
    );
    invalid_field(
        refused(&mut ws, with(&|e| e["params"]["path"] = json!([])), "e"),
        "path",
    );
    invalid_field(
        refused(&mut ws, with(&|e| e["params"]["nope"] = json!("x")), "e"),
        "nope",
    );
    invalid_field(
        refused(&mut ws, with(&|e| e["body"] = json!({})), "e"),
        "body",
    );
    // A member repeated: strict JSON.
    let duplicate = good.to_string().replacen("{", "{\"op\":\"resolve\",", 1);
    assert_eq!(refused(&mut ws, duplicate, "good").0, "invalid");
    // An id over 128 characters is refused by itself.
    let long = "x".repeat(129);
    let (code, message, _) = refused(&mut ws, with(&|e| e["id"] = json!(long)), &long);
    assert_eq!(code, "invalid");
    assert!(message.contains("128"), "{message}");

    // Operations the socket does not carry, and names that are none.
    for op in [
        "retain",
        "fetch",
        "livez",
        "healthz",
        "describe",
        "describe_file",
    ] {
        invalid_field(refused(&mut ws, with(&|e| e["op"] = json!(op)), "e"), "op");
    }
    for op in ["fork", "list", "history", "view", "nothing"] {
        let (code, message, _) = refused(&mut ws, with(&|e| e["op"] = json!(op)), "e");
        assert_eq!(
            (code.as_str(), message.as_str()),
            ("not_found", "no such operation")
        );
    }

    // Per-call authentication.
    let unverified = |r: (String, String, Value)| assert_eq!(r.0, "unverified", "{}", r.2);
    unverified(refused(
        &mut ws,
        with(&|e| {
            e.as_object_mut().unwrap().remove("auth");
        }),
        "e",
    ));
    unverified(refused(
        &mut ws,
        with(&|e| e["auth"] = json!({"proof": 1})),
        "e",
    ));
    unverified(refused(
        &mut ws,
        with(&|e| {
            let signature = e["auth"]["proof"]["signature"]
                .as_str()
                .unwrap()
                .to_string();
            let flipped = if signature.starts_with('A') { "B" } else { "A" };
            e["auth"]["proof"]["signature"] = json!(format!("{flipped}{}", &signature[1..]));
        }),
        "e",
    ));
    // Parameters that no longer match the signed record.
    unverified(refused(
        &mut ws,
        with(&|e| e["params"]["path"] = json!(["projects"])),
        "e",
    ));
    // A replayed nonce.
    let n = nonce();
    ws.send_json(&coord.envelope_at(&admin, &resolve, "first", now(), &n));
    assert_eq!(ws.reply()["status"], "ok");
    unverified(refused(
        &mut ws,
        coord
            .envelope_at(&admin, &resolve, "again", now(), &n)
            .to_string(),
        "again",
    ));
    // A grant elsewhere: `denied`.
    let elsewhere = coord.holder(30, &[GrantKind::Read], "projects/beta");
    let (code, _, _) = refused(
        &mut ws,
        coord.envelope(&elsewhere, &resolve, "d").to_string(),
        "d",
    );
    assert_eq!(code, "denied");
    // A narrower grant cannot provision over the socket either.
    let reader = coord.holder(31, &[GrantKind::Read], "");
    let project = Req::json(
        "create_project",
        &json!({"operation_id": "p-b", "label": "beta"}),
    );
    let (code, _, _) = refused(
        &mut ws,
        coord.envelope(&reader, &project, "p").to_string(),
        "p",
    );
    assert_eq!(code, "denied");
    assert!(!coord.exists("projects/beta"));
}

/// Finds an object with the members of an EntryRef anywhere in `value`.
fn entry_ref(value: &Value) -> Option<Value> {
    match value {
        Value::Object(map) => {
            if ["root_id", "space_id", "position"]
                .iter()
                .all(|k| map.contains_key(*k))
            {
                return Some(value.clone());
            }
            map.values().find_map(entry_ref)
        }
        Value::Array(items) => items.iter().find_map(entry_ref),
        _ => None,
    }
}

/// The HTTP answer of `req` and the socket reply to it, each signed for
/// its binding, must say the same: status and body.
/// A mutation (`created`) is compared by its replay: created on the
/// socket, then the same request over HTTP and the socket again.
fn same_on_both(coord: &Coord, ws: &mut Ws, req: &Req, created: bool) {
    let admin = coord.admin();
    if created {
        let first = coord.call(ws, &admin, req);
        assert_eq!(first["status"], "created", "{} {first}", req.op());
        assert_eq!(first["result"]["replayed"], false, "{first}");
    }
    let http = coord.send(&admin, req);
    let reply = coord.call(ws, &admin, req);
    let (status, body) = (http.status, http.json());
    match reply["status"].as_str().unwrap() {
        "error" => {
            assert!(status >= 400, "{} {status} {reply}", req.op());
            assert_eq!(reply["error"], body, "{}", req.op());
        }
        kind => {
            assert_eq!(kind, "ok", "{} {reply}", req.op());
            assert_eq!(status, 200, "{} {body}", req.op());
            assert_eq!(reply["result"], body, "{}", req.op());
        }
    }
}

#[test]
fn every_operation_answers_as_over_http() {
    let (_labd, coord) = start("ws-parity", &[]);
    let admin = coord.admin();
    let mut ws = coord.socket();
    // Mutations: the socket's first call is `created`; the same request
    // again, over HTTP then over the socket, is the same replay.
    let project = Req::json(
        "create_project",
        &json!({"operation_id": "p-a", "label": "alpha"}),
    );
    same_on_both(&coord, &mut ws, &project, true);
    let publish = Req::json(
        "publish",
        &publish_body(
            "f-1",
            "projects/alpha/snapshots/s1",
            json!({"finding": "ok", "n": 3}),
        ),
    );
    same_on_both(&coord, &mut ws, &publish, true);
    let published = coord.ok(&admin, &publish, 200);
    let entry = entry_ref(&published).expect("a publish result names its entry");

    // Reads.
    for req in [
        Req::read("resolve").path("projects/alpha"),
        Req::read("resolve").path("projects/nowhere"),
        Req::read("children").path("projects/alpha").int("limit", 2),
        Req::read("children"),
        Req::read("entries").path("projects/alpha/snapshots/s1"),
        Req::read("entries")
            .path("projects/alpha/snapshots/s1")
            .int("limit", 129),
        Req::read("get")
            .string("root_id", entry["root_id"].as_str().unwrap())
            .string("space_id", entry["space_id"].as_str().unwrap())
            .int("position", entry["position"].as_i64().unwrap()),
        Req::read("snapshot").path("projects/alpha").int("depth", 1),
        Req::read("export").path("projects/alpha"),
    ] {
        same_on_both(&coord, &mut ws, &req, false);
    }

    // Every operation with a body: the same refusal of the same body,
    // decoded only once its proof held.
    for op in [
        "publish",
        "create_artifact",
        "declare",
        "compose",
        "apply",
        "query",
        "explain",
        "create_project",
        "provision_worker",
        "retire_worker",
        "create_campaign",
        "assign",
    ] {
        let req = Req::json(op, &json!({"operation_id": "x-1", "unknown_member": true}));
        same_on_both(&coord, &mut ws, &req, false);
    }
    // And a read refused after verification (a domain rule).
    same_on_both(
        &coord,
        &mut ws,
        &Req::read("get")
            .string("root_id", entry["root_id"].as_str().unwrap())
            .string("space_id", entry["space_id"].as_str().unwrap())
            .int("position", 0),
        false,
    );
}

#[test]
fn calls_run_concurrently_and_replies_are_matched_by_id() {
    let (_labd, coord) = start("ws-concurrent", &[]);
    let admin = coord.admin();
    coord.project("alpha");
    let mut ws = coord.socket();
    let mut expected = std::collections::BTreeMap::new();
    for i in 0..24 {
        let path = format!("projects/alpha/snapshots/c{i}");
        let req = if i % 2 == 0 {
            Req::json(
                "publish",
                &publish_body(&format!("c-{i}"), &path, json!({"n": i})),
            )
        } else {
            Req::read("resolve").path("projects/alpha")
        };
        let id = format!("call-{i}");
        ws.send_json(&coord.envelope(&admin, &req, &id));
        expected.insert(id, if i % 2 == 0 { "created" } else { "ok" });
    }
    for _ in 0..24 {
        let reply = ws.reply();
        let id = reply["id"].as_str().unwrap().to_string();
        let status = expected
            .remove(&id)
            .unwrap_or_else(|| panic!("unexpected {reply}"));
        assert_eq!(reply["status"], status, "{reply}");
    }
    assert!(expected.is_empty());
    for i in (0..24).step_by(2) {
        assert!(coord.exists(&format!("projects/alpha/snapshots/c{i}")));
    }
}

/// After a lost connection a publishing verb is resent with the same
/// operation ID and a fresh proof: the original result, replayed.
#[test]
fn a_resent_verb_after_reconnecting_is_replayed() {
    let (_labd, coord) = start("ws-reconnect", &[]);
    let admin = coord.admin();
    coord.project("alpha");
    let publish = Req::json(
        "publish",
        &publish_body(
            "r-1",
            "projects/alpha/snapshots/r",
            json!({"finding": "once"}),
        ),
    );
    let mut ws = coord.socket();
    ws.send_json(&coord.envelope(&admin, &publish, "p"));
    // The connection is lost before the reply is read.
    drop(ws);
    support::eventually("the publish is committed", || {
        coord.exists("projects/alpha/snapshots/r")
    });
    let mut ws = coord.socket();
    let reply = coord.call(&mut ws, &admin, &publish);
    assert_eq!(reply["status"], "ok", "{reply}");
    assert_eq!(reply["result"]["replayed"], true, "{reply}");
    let entries = coord.ok(
        &admin,
        &Req::read("entries").path("projects/alpha/snapshots/r"),
        200,
    );
    assert_eq!(entries["entries"].as_array().unwrap().len(), 1, "{entries}");
}

const HOSTILE: &str = r#"{"name": "hostile", "version": "1.0.0", "class": "test",
  "inputs": [{"role": "text", "required": false}], "outputs": [{"role": "out"}],
  "effects": [], "deterministic": true, "egress": []}"#;

/// `labd` with the `hostile` release (its recipe `loop` runs until the
/// wall-clock limit) and `extra` settings.
fn start_with_hostile(name: &str, extra: &[&str]) -> (Labd, Coord) {
    let dir = support::temp_dir(&format!("{name}-tools"));
    let file = dir.join("hostile.json");
    std::fs::write(&file, HOSTILE).unwrap();
    let component = support::built_component("tool_hostile");
    let tool = format!("{}={}", file.display(), component.display());
    let mut args = vec!["--coord-tool", &tool];
    args.extend_from_slice(extra);
    start(name, &args)
}

fn looping(name: &str) -> Req {
    let path = format!("projects/alpha/applications/{name}");
    Req::json(
        "apply",
        &json!({ "operation_id": name, "path": labels(&path), "tool": "hostile", "inputs": {}, "recipe": "loop" }),
    )
}

/// 32 calls in flight: the 33rd and a reused `id` are refused alone, and
/// every held call is still answered. Then a shutdown with a call in
/// flight: its reply first, then 1001.
#[test]
fn in_flight_limits_and_shutdown() {
    // One instance: while the looping run holds it, every other call of
    // the connection waits for it, in flight.
    let (labd, coord) = start_with_hostile(
        "ws-in-flight",
        &[
            "--max-concurrent-requests",
            "1",
            "--instance-wait-ms",
            "60000",
            "--tool-wall-ms",
            "3000",
        ],
    );
    let admin = coord.admin();
    coord.project("alpha");
    let mut ws = coord.socket();
    ws.send_json(&coord.envelope(&admin, &looping("run-1"), "loop"));
    support::eventually("the looping run started", || labd.tool_runs() >= 1);
    let resolve = Req::read("resolve").path("projects/alpha");
    for i in 0..31 {
        ws.send_json(&coord.envelope(&admin, &resolve, &format!("r{i}")));
    }
    ws.send_json(&coord.envelope(&admin, &resolve, "extra"));
    let reply = ws.reply();
    let (code, message) = error_of(&reply, "extra");
    assert_eq!(code, "invalid");
    assert!(message.contains("too many calls in flight"), "{message}");
    ws.send_json(&coord.envelope(&admin, &resolve, "r0"));
    let reply = ws.reply();
    let (code, message) = error_of(&reply, "r0");
    assert_eq!(code, "invalid");
    assert!(message.contains("in flight"), "{message}");
    // Every held call is answered, the looping run first.
    let first = ws.reply();
    assert_eq!(first["id"], "loop", "{first}");
    assert_eq!(first["status"], "created", "{first}");
    assert_eq!(first["result"]["outcome"], "failed", "{first}");
    let mut answered = std::collections::BTreeSet::new();
    for _ in 0..31 {
        let reply = ws.reply();
        assert_eq!(reply["status"], "ok", "{reply}");
        answered.insert(reply["id"].as_str().unwrap().to_string());
    }
    assert_eq!(answered.len(), 31);

    // Shutdown: the call in flight finishes, then 1001.
    ws.send_json(&coord.envelope(&admin, &looping("run-2"), "loop-2"));
    support::eventually("the second looping run started", || labd.tool_runs() >= 2);
    labd.terminate();
    let reply = ws.reply();
    assert_eq!(reply["id"], "loop-2", "{reply}");
    assert_eq!(reply["status"], "created", "{reply}");
    let (code, _) = ws.closed();
    assert_eq!(code, 1001);
}

/// Past the frame budget a connection is not read from until its calls
/// finish; other connections are still served.
#[test]
fn the_frame_budget_holds_back_one_connection_only() {
    let budget = 5_000;
    let (labd, coord) = start_with_hostile(
        "ws-budget",
        &[
            "--socket-frame-budget-bytes",
            "5000",
            "--tool-wall-ms",
            "5000",
        ],
    );
    let admin = coord.admin();
    coord.project("alpha");
    let resolve = Req::read("resolve").path("projects/alpha");
    let padded = |envelope: Value, size: usize| {
        let mut text = envelope.to_string();
        assert!(text.len() < size);
        text.push_str(&" ".repeat(size - text.len()));
        text
    };
    let app = Req::read("entries").path("projects/alpha/applications/run-1");
    let mut held = coord.socket();
    held.send_text(&padded(
        coord.envelope(&admin, &looping("run-1"), "loop"),
        3000,
    ));
    support::eventually("the looping run started", || labd.tool_runs() >= 1);
    let running = coord.ok(&admin, &app, 200)["entries"]
        .as_array()
        .unwrap()
        .len();
    // 3,000 + 3,000 bytes do not fit in 5,000: this frame waits, unread.
    held.send_text(&padded(coord.envelope(&admin, &resolve, "after"), 3000));
    // Another client's smaller frame fits, and is served while the
    // looping run still holds its 3,000 bytes.
    let mut other = coord.socket();
    let small = coord.envelope(&admin, &resolve, "small");
    assert!(small.to_string().len() + 3000 <= budget);
    other.send_json(&small);
    let reply = other.reply();
    assert_eq!(reply["status"], "ok", "{reply}");
    let entries = coord.ok(&admin, &app, 200)["entries"]
        .as_array()
        .unwrap()
        .len();
    assert_eq!(entries, running, "the looping run is still running");
    // The held connection's call is answered only after the looping one.
    let first = held.reply();
    assert_eq!(first["id"], "loop", "{first}");
    let second = held.reply();
    assert_eq!(second["id"], "after", "{second}");
    assert_eq!(second["status"], "ok", "{second}");
    let done = coord.ok(&admin, &app, 200)["entries"]
        .as_array()
        .unwrap()
        .len();
    assert!(done > running, "the looping run completed");
}

/// A socket keeps its place in the listener's connection limit: with one
/// connection allowed, another client is refused while the socket is open
/// and served once it closed.
#[test]
fn a_socket_counts_against_the_connection_limit() {
    let (_labd, coord) = start("ws-connections", &["--max-connections", "1"]);
    // The limit is one host's: the socket's.
    let host = support::Client::of(coord.client.address);
    let mut ws = coord.socket();
    ws.send_text(r#"{"id":"held","op":"children"}"#);
    assert_eq!(error_of(&ws.reply(), "held").0, "unverified");
    let refused = host.get("/livez");
    refused.assert_error(503, "unavailable");
    assert!(refused.header("retry-after").is_some());
    ws.socket.close(None).unwrap();
    assert!(matches!(ws.next(), Message::Close(_)));
    drop(ws);
    support::eventually("the socket's place is free again", || {
        host.get("/livez").status == 200
    });
}

/// A client that takes no frame: once a frame has waited
/// `--socket-reply-timeout-ms` for it, the connection is closed and the
/// replies still queued are dropped; another client is served meanwhile,
/// and the metrics count the socket calls and the dropped connection.
#[test]
fn a_client_that_does_not_read_is_closed_after_the_reply_timeout() {
    let (labd, coord) = start("ws-not-reading", &["--socket-reply-timeout-ms", "1000"]);
    let admin = coord.admin();
    coord.project("alpha");
    // Metadata is carried inline by every entry that reads the record.
    let mut body = publish_body("big", "projects/alpha/snapshots/big", json!({"n": 1}));
    body["metadata"] = json!({ "note": "x".repeat(900 << 10) });
    coord.ok(&admin, &Req::json("publish", &body), 201);
    let read = Req::read("entries").path("projects/alpha/snapshots/big");
    // The setup: each reply is over a mebibyte.
    let mut ws = coord.socket();
    let reply = coord.call(&mut ws, &admin, &read);
    assert!(reply.to_string().len() > 1 << 20, "the reply is small");
    drop(ws);

    // Thirty such replies are more than loopback's buffers hold.
    const CALLS: usize = 30;
    let mut slow = coord.socket();
    for i in 0..CALLS {
        slow.send_json(&coord.envelope(&admin, &read, &format!("r{i}")));
    }
    let management = labd.coord_management();
    let dropped = "lab_sockets_not_reading_total{service=\"coord\"} 1\n";
    support::eventually("the connection not read is closed", || {
        String::from_utf8(management.get("/metrics").body)
            .unwrap()
            .contains(dropped)
    });
    let mut quick = coord.socket();
    let reply = coord.call(
        &mut quick,
        &admin,
        &Req::read("resolve").path("projects/alpha"),
    );
    assert_eq!(reply["status"], "ok", "{reply}");

    // The slow client reads what reached its buffers, then the end.
    let mut replies = 0;
    loop {
        match slow.socket.read() {
            Ok(Message::Text(_)) => replies += 1,
            Ok(Message::Close(_)) => {
                panic!("a frame dropped for timing out is not followed by a close")
            }
            Ok(_) => continue,
            Err(_) => break,
        }
    }
    assert!(replies < CALLS, "all {CALLS} replies were written");

    // Every call ends, each counted once, whether its reply was written or
    // not: answered, or unavailable where a loaded machine kept it waiting
    // for an instance past its bound. The counts settle once the closed
    // connection's calls finish in tasks of their own.
    let settled = || {
        let metrics = String::from_utf8(management.get("/metrics").body).unwrap();
        let calls: u64 = metrics
            .lines()
            .filter(|line| line.starts_with("lab_socket_calls_total{service=\"coord\","))
            .filter_map(|line| line.rsplit(' ').next()?.parse::<u64>().ok())
            .sum();
        calls == CALLS as u64 + 2
            && metrics.contains("lab_sockets_total{service=\"coord\"} 3\n")
            && metrics.contains("lab_sockets_open{service=\"coord\"} 1\n")
    };
    support::eventually("every call ended and the slow socket closed", settled);
}

/// A connection remembers the grant signatures its calls had verified
/// (design.md, "Sockets" 9): the remembered signature vouches for its
/// exact grant only, never for a grant altered around it.
#[test]
fn a_grant_verified_on_a_connection_vouches_for_its_exact_bytes_only() {
    let (_labd, coord) = start("ws-verified", &[]);
    coord.project("alpha");
    coord.project("beta");
    let holder = coord.holder(40, &[GrantKind::Read], "projects/alpha");
    let alpha = Req::read("resolve").path("projects/alpha");
    let beta = Req::read("resolve").path("projects/beta");
    let mut ws = coord.socket();
    // The setup holds: the grant verifies on this connection, and reaches
    // alpha only.
    ws.send_json(&coord.envelope(&holder, &alpha, "first"));
    assert_eq!(ws.reply()["status"], "ok");
    ws.send_json(&coord.envelope(&holder, &beta, "beyond"));
    assert_eq!(error_of(&ws.reply(), "beyond").0, "denied");

    let altered = |req: &Req, id: &str, change: &dyn Fn(&mut Value)| {
        let mut envelope = coord.envelope(&holder, req, id);
        let grant = &mut envelope["auth"]["grants"][0];
        assert!(grant["signature"].is_string(), "{envelope}");
        change(grant);
        envelope.to_string()
    };
    // Each altered grant is refused here as on a connection that never
    // verified the grant: the remembered signature vouches for nothing else.
    let refused_alike = |ws: &mut Ws, frame: &dyn Fn(&str) -> String| {
        let mut fresh = coord.socket();
        fresh.send_text(&frame("fresh"));
        let unseen = error_of(&fresh.reply(), "fresh").0.to_string();
        ws.send_text(&frame("seen"));
        assert_eq!(error_of(&ws.reply(), "seen").0, unseen);
    };
    // Widened to the whole world.
    refused_alike(&mut ws, &|id| {
        altered(&beta, id, &|g| g["path"] = json!([]))
    });
    // Valid for longer.
    refused_alike(&mut ws, &|id| {
        altered(&alpha, id, &|g| {
            g["valid_until"] = json!(g["valid_until"].as_u64().unwrap() + 1)
        })
    });
    // Another signature over the same grant.
    refused_alike(&mut ws, &|id| {
        altered(&alpha, id, &|g| {
            let signature = g["signature"].as_str().unwrap().to_string();
            let flipped = if signature.starts_with('A') { "B" } else { "A" };
            g["signature"] = json!(format!("{flipped}{}", &signature[1..]));
        })
    });
    // The grant as issued still holds, and still for alpha only.
    ws.send_json(&coord.envelope(&holder, &alpha, "again"));
    assert_eq!(ws.reply()["status"], "ok");
    ws.send_json(&coord.envelope(&holder, &beta, "beyond-again"));
    assert_eq!(error_of(&ws.reply(), "beyond-again").0, "denied");
}
