//! Subscriptions over the coordination service's socket binding
//! (`contracts/coordination/WS.md`, "Subscriptions" and decisions 1-8):
//! events of real journal commits, coalescing, the pending table's gap,
//! expiry, unsubscribe, shutdown, spaces created inside a scope, narrower
//! grants, retirement, the per-connection limit and split deployments.

use crate::support;
use crate::support::coord::{key, labels, nonce, now, Coord, Holder};
use crate::support::subscriptions::{assert_event, event_of, refused, Journal, Socket};
use crate::support::Labd;
use lab_coord_auth::{GrantKind, Params};
use serde_json::{json, Value};
use std::time::{Duration, Instant};
use tungstenite::protocol::frame::coding::CloseCode;

/// How long a test waits for a frame it expects.
const WAIT: Duration = Duration::from_secs(30);

fn start(name: &str) -> (Labd, Coord, Journal) {
    let (labd, coord) = support::coord::start(name);
    coord.project("alpha");
    coord.project("beta");
    let journal = Journal::of(labd.journal());
    (labd, coord, journal)
}

#[test]
fn an_append_is_one_event_at_its_new_cutoff() {
    let (_labd, coord, journal) = start("subscribe-event");
    let admin = coord.admin();
    let mut socket = Socket::open(&coord);
    let reply = socket.subscribe(&admin, "projects/alpha", None);
    assert_eq!(reply["status"], "ok", "{reply}");
    let id = reply["result"]["subscription"].as_str().unwrap();
    assert!(
        id.len() == 36
            && id.starts_with("sub_")
            && id[4..]
                .bytes()
                .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b)),
        "{id}"
    );
    // The latest expiry among the grants that authorized it.
    let read_until = admin
        .grants
        .iter()
        .filter(|g| g.kind == GrantKind::Read)
        .map(|g| g.valid_until)
        .max()
        .unwrap();
    assert_eq!(reply["result"]["expires_at"], read_until);

    let alpha = journal.space("projects/alpha");
    let cutoff = journal.append_one(&alpha);
    assert_event(&socket.frame(), id, &alpha, &["projects", "alpha"], cutoff);
}

#[test]
fn appends_while_not_reading_coalesce_to_the_head() {
    let (_labd, coord, journal) = start("subscribe-coalesce");
    let admin = coord.admin();
    let mut socket = Socket::open(&coord);
    socket.subscribed(&admin, "projects/alpha", Some(0));
    let alpha = journal.space("projects/alpha");
    let mut head = 0;
    for _ in 0..100 {
        head = journal.append_one(&alpha);
    }
    let mut seen = Vec::new();
    while seen.last() != Some(&head) {
        let frame = socket.frame();
        let (_, _, cutoff) = event_of(&frame);
        seen.push(cutoff);
    }
    assert!(seen.windows(2).all(|w| w[0] < w[1]), "{seen:?}");
    assert!(seen.len() <= 100, "{}", seen.len());
}

#[test]
fn events_are_written_at_most_once_per_interval_and_coalesce_meanwhile() {
    let labd = Labd::start(
        "subscribe-interval",
        &["--socket-event-interval-ms", "2000"],
    );
    let coord = Coord::new(&labd);
    coord.project("alpha");
    let journal = Journal::of(labd.journal());
    let admin = coord.admin();
    let mut socket = Socket::open(&coord);
    let id = socket.subscribed(&admin, "projects/alpha", Some(0));
    let alpha = journal.space("projects/alpha");
    // Nothing was written for a while: the first event is not held back.
    let first = journal.append_one(&alpha);
    let frame = socket.frame();
    assert_eq!(frame["subscription"], id);
    assert_eq!(event_of(&frame).2, first);
    // Within the interval that follows, three appends become one event at
    // the last cutoff.
    let mut head = first;
    for _ in 0..3 {
        head = journal.append_one(&alpha);
    }
    let frame = socket.frame();
    assert_eq!(event_of(&frame).2, head, "{frame}");
}

#[test]
fn a_full_pending_table_yields_a_gap() {
    let (_labd, coord, journal) = start("subscribe-gap");
    let admin = coord.admin();
    let alpha = journal.space("projects/alpha");
    // 1,025 journals inside the scope, created before the subscription.
    let children: Vec<Value> = (0..1025)
        .map(|i| journal.create(&alpha, &format!("c{i}")).0)
        .collect();
    // Large replies the client does not read hold the connection's writer
    // (about 5 MB each), so the hub's pending table is what fills.
    let big = journal.create(&alpha, "big").0;
    let fact = big_fact();
    journal.append(&big, &[&fact, &fact, &fact, &fact]);

    let mut socket = Socket::open(&coord);
    let id = socket.subscribed(&admin, "projects/alpha", None);
    for _ in 0..4 {
        let params = Params::new()
            .strings("path", labels("projects/alpha/big"))
            .int("limit", 4);
        let envelope = socket.envelope(&admin, "entries", params, None);
        socket.send(&envelope);
    }
    // The first reply is being written once bytes wait unread here; it
    // alone is more than the buffers between the two ends hold.
    let mut peeked = vec![0; 64 << 10];
    support::eventually("the replies fill the socket", || {
        socket.ws.get_ref().peek(&mut peeked).unwrap() == peeked.len()
    });
    // The appends go to the host holding the socket, so that each advance
    // is in its hub before the append is answered. Through a second host
    // (`LAB_TEST_HOSTS=2`) an advance arrives by notification, possibly
    // after the client began draining the table, which then never fills:
    // events across hosts are `events_shared`'s and the other tests' here.
    let here = Journal::of(support::Client {
        peer: None,
        ..journal.client
    });
    for child in &children {
        here.append_one(child);
    }
    let mut gaps = 0;
    let mut events = 0;
    let started = Instant::now();
    while gaps == 0 {
        assert!(started.elapsed() < WAIT, "no gap after {events} events");
        let message = socket.read().expect("frames before the close");
        if message.get("id").is_some() {
            continue;
        }
        assert_eq!(message["subscription"], id);
        if message.get("gap").is_some() {
            assert_eq!(
                message["gap"]["space"],
                json!({
                    "root_id": alpha["root_id"],
                    "space_id": alpha["space_id"],
                    "path": ["projects", "alpha"],
                })
            );
            gaps += 1;
        } else {
            events += 1;
        }
    }
    assert!(events <= 1024, "{events}");
}

/// A fact of one atom of a million bytes: `["p", "aaa…"]` in canonical
/// CBOR, base64.
fn big_fact() -> String {
    use base64::Engine as _;
    let text = vec![b'a'; 1_000_000];
    let mut fact = vec![0x82, 0x61, b'p', 0x7a];
    fact.extend_from_slice(&(text.len() as u32).to_be_bytes());
    fact.extend_from_slice(&text);
    base64::engine::general_purpose::STANDARD.encode(fact)
}

#[test]
fn a_subscription_expires_with_the_grant_that_authorized_it() {
    let (_labd, coord, journal) = start("subscribe-expiry");
    let reader_key = key(41);
    let until = now() + 3;
    let reader = Holder {
        grants: vec![coord.grant(&reader_key, GrantKind::Read, "projects/alpha", until)],
        key: reader_key,
    };
    let mut socket = Socket::open(&coord);
    let reply = socket.subscribe(&reader, "projects/alpha", None);
    assert_eq!(reply["result"]["expires_at"], until, "{reply}");
    let alpha = journal.space("projects/alpha");
    journal.append_one(&alpha);
    assert!(socket.frame().get("event").is_some());
    let closed = socket.frame();
    assert!(now() >= until, "closed before its instant");
    assert_eq!(
        closed["closed"],
        json!({ "reason": "expired", "delivered": 1 })
    );
    // Nothing follows the last frame.
    let admin = coord.admin();
    journal.append_one(&alpha);
    let probe = socket.subscribed(&admin, "projects/alpha", Some(0));
    journal.append_one(&alpha);
    assert_eq!(socket.frame()["subscription"], probe);
}

#[test]
fn unsubscribe_sends_the_closed_frame_before_its_reply() {
    let (_labd, coord, journal) = start("subscribe-unsubscribe");
    let admin = coord.admin();
    let mut socket = Socket::open(&coord);
    let id = socket.subscribed(&admin, "projects/alpha", None);
    let alpha = journal.space("projects/alpha");
    journal.append_one(&alpha);
    assert_eq!(socket.frame()["subscription"], id);

    // Another connection cannot name it.
    let mut other = Socket::open(&coord);
    let reply = other.call(
        &admin,
        "unsubscribe",
        Params::new().string("subscription", &id),
        None,
    );
    refused(&reply, "not_found");

    // A forged proof changes nothing.
    let mut forged = socket.envelope(
        &admin,
        "unsubscribe",
        Params::new().string("subscription", &id),
        None,
    );
    forged["auth"]["proof"]["nonce"] = json!(nonce());
    socket.send(&forged);
    let reply = socket.read().unwrap();
    refused(&reply, "unverified");

    // Ownership is the authority, not a grant: a key with none at all,
    // calling on the connection that opened it, closes it.
    let stranger = Holder {
        key: key(42),
        grants: Vec::new(),
    };
    let envelope = socket.envelope(
        &stranger,
        "unsubscribe",
        Params::new().string("subscription", &id),
        None,
    );
    socket.send(&envelope);
    let closed = socket.read().unwrap();
    assert_eq!(
        closed["subscription"], id,
        "the frame comes first: {closed}"
    );
    assert_eq!(
        closed["closed"],
        json!({ "reason": "unsubscribed", "delivered": 1 })
    );
    let reply = socket.read().unwrap();
    assert_eq!(reply["id"], envelope["id"]);
    assert_eq!(reply["status"], "ok");
    assert_eq!(reply["result"], json!({ "subscription": id }));

    let reply = socket.call(
        &admin,
        "unsubscribe",
        Params::new().string("subscription", &id),
        None,
    );
    refused(&reply, "not_found");
    let reply = socket.call(
        &stranger,
        "unsubscribe",
        Params::new().string("subscription", "sub_00000000000000000000000000000000"),
        None,
    );
    refused(&reply, "not_found");
}

#[test]
fn shutdown_closes_every_subscription_then_the_socket() {
    let (labd, coord, _journal) = start("subscribe-shutdown");
    let admin = coord.admin();
    let mut socket = Socket::open(&coord);
    let a = socket.subscribed(&admin, "projects/alpha", None);
    let b = socket.subscribed(&admin, "projects/beta", None);
    labd.terminate();
    let mut ended = Vec::new();
    loop {
        match socket.read() {
            Ok(frame) => {
                assert_eq!(frame["closed"]["reason"], "shutdown", "{frame}");
                ended.push(frame["subscription"].as_str().unwrap().to_string());
            }
            Err(code) => {
                assert_eq!(code, u16::from(CloseCode::Away));
                break;
            }
        }
    }
    ended.sort();
    let mut expected = vec![a, b];
    expected.sort();
    assert_eq!(ended, expected);
}

#[test]
fn spaces_created_inside_a_scope_are_watched_from_their_creation() {
    let (_labd, coord, journal) = start("subscribe-new-spaces");
    let admin = coord.admin();
    let mut socket = Socket::open(&coord);
    socket.subscribed(&admin, "projects/alpha", None);
    let alpha = journal.space("projects/alpha");
    // The creation is an advance of the parent's journal.
    let (child, parent_cutoff) = journal.create(&alpha, "fresh");
    let (space, path, cutoff) = {
        let frame = socket.frame();
        let (s, p, c) = event_of(&frame);
        (s.to_string(), p.clone(), c)
    };
    assert_eq!(
        (space.as_str(), &path, cutoff),
        (
            alpha["space_id"].as_str().unwrap(),
            &json!(["projects", "alpha"]),
            parent_cutoff
        )
    );
    let cutoff = journal.append_one(&child);
    let frame = socket.frame();
    let (space, path, got) = event_of(&frame);
    assert_eq!(space, child["space_id"].as_str().unwrap());
    assert_eq!(path, &json!(["projects", "alpha", "fresh"]));
    assert_eq!(got, cutoff);
}

#[test]
fn depth_bounds_the_journals_watched() {
    let (_labd, coord, journal) = start("subscribe-depth");
    let admin = coord.admin();
    let alpha = journal.space("projects/alpha");
    let (child, _) = journal.create(&alpha, "below");
    let mut socket = Socket::open(&coord);
    let own = socket.subscribed(&admin, "projects/alpha", Some(0));
    journal.append_one(&child);
    let cutoff = journal.append_one(&alpha);
    let frame = socket.frame();
    assert_eq!(frame["subscription"], own);
    assert_eq!(event_of(&frame).0, alpha["space_id"].as_str().unwrap());
    assert_eq!(event_of(&frame).2, cutoff);
}

#[test]
fn a_narrower_grant_watches_only_what_it_may_read() {
    let (_labd, coord, journal) = start("subscribe-narrow");
    let reader = coord.holder(43, &[GrantKind::Read], "projects/alpha");
    let mut socket = Socket::open(&coord);
    for outside in ["projects/beta", "", "projects", "projects/ghost"] {
        let reply = socket.subscribe(&reader, outside, None);
        refused(&reply, "denied");
    }
    // A publish grant is not read.
    let publisher = coord.holder(44, &[GrantKind::Publish], "projects/alpha");
    refused(
        &socket.subscribe(&publisher, "projects/alpha", None),
        "denied",
    );
    // An unoccupied path inside what it may read is absent.
    refused(
        &socket.subscribe(&reader, "projects/alpha/ghost", None),
        "not_found",
    );
    let admin = coord.admin();
    refused(
        &socket.subscribe(&admin, "projects/ghost", None),
        "not_found",
    );
    // A body outside SubscribeRequest is invalid.
    let reply = socket.call(
        &reader,
        "subscribe",
        Params::new(),
        Some(json!({ "path": ["projects", "alpha"], "deep": 1 })),
    );
    refused(&reply, "invalid");

    let id = socket.subscribed(&reader, "projects/alpha", None);
    let beta = journal.space("projects/beta");
    let world = journal.space("");
    journal.append_one(&beta);
    journal.append_one(&world);
    let alpha = journal.space("projects/alpha");
    let cutoff = journal.append_one(&alpha);
    // The first frame it sees is alpha's: nothing of beta or the world.
    let frame = socket.frame();
    assert_eq!(frame["subscription"], id);
    assert_eq!(event_of(&frame).0, alpha["space_id"].as_str().unwrap());
    assert_eq!(event_of(&frame).2, cutoff);
}

#[test]
fn a_connection_holds_at_most_sixteen_subscriptions() {
    let (_labd, coord, _journal) = start("subscribe-limit");
    let admin = coord.admin();
    let mut socket = Socket::open(&coord);
    for _ in 0..16 {
        socket.subscribed(&admin, "projects/alpha", None);
    }
    refused(
        &socket.subscribe(&admin, "projects/alpha", None),
        "limit_exceeded",
    );
    // Another connection has its own.
    let mut other = Socket::open(&coord);
    other.subscribed(&admin, "projects/alpha", None);
}

#[test]
fn retiring_a_worker_closes_its_subscriptions() {
    let (_labd, coord, journal) = start("subscribe-retire");
    let admin = coord.admin();
    let worker = coord.provision_worker("alpha", "w1", 45);
    let mut socket = Socket::open(&coord);
    let id = socket.subscribed(&worker, "projects/alpha", None);
    let watcher = socket.subscribed(&admin, "projects/alpha", Some(0));

    coord.retire_worker("alpha", "w1");
    // The retirement's own record is an advance inside the worker's scope:
    // events may precede the close.
    let mut closed = None;
    while closed.is_none() {
        let frame = socket.frame();
        if frame["subscription"] == id {
            if frame.get("closed").is_some() {
                closed = Some(frame);
            } else {
                assert!(frame.get("event").is_some(), "{frame}");
            }
        } else {
            assert_eq!(frame["subscription"], watcher);
        }
    }
    assert_eq!(closed.unwrap()["closed"]["reason"], "expired");
    // The admin's subscription, authorized by other grants, stays open.
    let alpha = journal.space("projects/alpha");
    let cutoff = journal.append_one(&alpha);
    loop {
        let frame = socket.frame();
        assert_eq!(frame["subscription"], watcher);
        if event_of(&frame).2 == cutoff {
            break;
        }
    }
}

#[test]
fn a_split_deployment_follows_the_journal_only_when_told_where() {
    let journal_host = Labd::start("subscribe-split-journal", &["--services", "bytes,journal"]);
    let remotes = [
        "--services".to_string(),
        "coord".to_string(),
        "--remote".to_string(),
        format!("journal=http://{}", journal_host.journal().address),
        "--remote".to_string(),
        format!("bytes=http://{}", journal_host.bytes().address),
    ];
    // Without the stream's address, nothing can be followed.
    let unaware = Labd::start(
        "subscribe-split-unaware",
        &remotes.iter().map(String::as_str).collect::<Vec<_>>(),
    );
    let coord = Coord::new(&unaware);
    let admin = coord.admin();
    let mut socket = Socket::open(&coord);
    refused(&socket.subscribe(&admin, "", None), "unavailable");
    drop(socket);
    drop(unaware);

    let mut args = remotes.to_vec();
    args.push("--journal-advances".into());
    args.push(format!(
        "http://{}",
        journal_host.journal_management().address
    ));
    let aware = Labd::start(
        "subscribe-split-aware",
        &args.iter().map(String::as_str).collect::<Vec<_>>(),
    );
    let coord = Coord::new(&aware);
    coord.project("alpha");
    let admin = coord.admin();
    // The stream followed is the journal host's own commits: the append
    // goes to it, not to a peer.
    let journal = Journal::of(support::Client::of(journal_host.journal().address));
    let mut socket = Socket::open(&coord);
    let id = socket.subscribed(&admin, "projects/alpha", None);
    let alpha = journal.space("projects/alpha");
    let cutoff = journal.append_one(&alpha);
    let frame = socket.frame();
    assert_eq!(frame["subscription"], id);
    assert_eq!(event_of(&frame).2, cutoff);

    // The stream breaks: the scope can no longer be watched.
    support::discard(&journal_host.kill());
    let frame = socket.frame();
    assert_eq!(frame["subscription"], id);
    assert_eq!(frame["closed"]["reason"], "scope_unavailable");
}
