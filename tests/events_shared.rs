//! Events across hosts sharing one PostgreSQL store (design.md, "Events",
//! and scale-out.md, "Events across hosts"): a journal advance committed
//! through one host reaches the socket subscriptions another host holds,
//! over the store's `LISTEN`/`NOTIFY`; cutoffs per journal only increase
//! whichever host committed them; the store restarted is a `gap`, after
//! which events flow again; what a publisher loses (past its outbox bound,
//! or too long for one notification) is a `gap` on the other hosts; a
//! coordination-only host on the store hears the advances without
//! following any stream (`--journal-advances store`), which needs a
//! PostgreSQL store.

use crate::support;
use crate::support::coord::{nonce, second_host, second_host_in_env, Coord};
use crate::support::s3::S3Server;
use crate::support::subscriptions::{assert_event, event_of, refused, Journal, Socket};
use crate::support::{pg_cluster, refused_start, Labd};
use lab_pgcluster::Cluster;
use serde_json::{json, Value};

/// The audience both hosts' coordination services answer to.
const AUDIENCE: &str = "http://lab.test";

/// Two hosts serving every service from `store`, one world behind one
/// audience (the second is given the first one's root key), with the
/// projects `alpha` and `beta`.
fn two_hosts(name: &str, store: &Cluster) -> (Labd, Coord, Labd, Coord) {
    two_hosts_in_env(name, store, &[], Vec::new())
}

/// [`two_hosts`], their blobs too in one bucket of a test S3 server.
fn two_hosts_on_s3(name: &str, store: &Cluster) -> (Labd, Coord, Labd, Coord, S3Server) {
    let s3 = support::s3::start(&support::temp_dir(&format!("{name}-s3")));
    let blobs = s3.blobs_setting();
    let (a, coord_a, b, coord_b) = two_hosts_in_env(name, store, &["--blobs", &blobs], s3.env());
    (a, coord_a, b, coord_b, s3)
}

fn two_hosts_in_env(
    name: &str,
    store: &Cluster,
    args: &[&str],
    env: Vec<(String, String)>,
) -> (Labd, Coord, Labd, Coord) {
    let url = store.url();
    let mut shared = vec!["--store", &url, "--coord-audience", AUDIENCE];
    shared.extend(args);
    let owned: Vec<String> = shared.iter().map(|a| a.to_string()).collect();
    let a = Labd::start_in_env(support::temp_dir(&format!("{name}-a")), owned, env.clone());
    let coord_a = Coord {
        audience: AUDIENCE.into(),
        ..Coord::new(&a)
    };
    let (b, coord_b) = second_host_in_env(&format!("{name}-b"), &a, AUDIENCE, &shared, env);
    coord_a.project("alpha");
    coord_a.project("beta");
    (a, coord_a, b, coord_b)
}

#[test]
fn an_append_through_one_host_is_an_event_on_another() {
    let store = pg_cluster("events-across");
    let (a, _coord_a, _b, coord_b) = two_hosts("events-across", &store);
    let journal_a = Journal::of(a.journal());
    let admin = coord_b.admin();
    let mut socket = Socket::open(&coord_b);
    let id = socket.subscribed(&admin, "projects/alpha", None);

    let alpha = journal_a.space("projects/alpha");
    let beta = journal_a.space("projects/beta");
    // The projects' own advances may still be on their way: once this
    // one arrived, every earlier one has.
    let barrier = journal_a.append_one(&alpha);
    socket.until(&alpha, barrier);
    // Outside the scope: no event.
    journal_a.append_one(&beta);
    let cutoff = journal_a.append_one(&alpha);
    assert_event(&socket.frame(), &id, &alpha, &["projects", "alpha"], cutoff);

    // A journal created inside the scope through the other host, after
    // the subscription: its creation advances the parent, its first
    // append is an event of its own.
    let (child, parent_cutoff) = journal_a.create(&alpha, "fresh");
    let frame = socket.frame();
    assert_eq!(
        event_of(&frame),
        (
            alpha["space_id"].as_str().unwrap(),
            &json!(["projects", "alpha"]),
            parent_cutoff
        )
    );
    let cutoff = journal_a.append_one(&child);
    let frame = socket.frame();
    assert_eq!(
        event_of(&frame),
        (
            child["space_id"].as_str().unwrap(),
            &json!(["projects", "alpha", "fresh"]),
            cutoff
        )
    );
}

#[test]
fn appends_through_both_hosts_coalesce_to_the_head_on_each() {
    let store = pg_cluster("events-coalesce");
    let (a, coord_a, b, coord_b) = two_hosts("events-coalesce", &store);
    let journals = [Journal::of(a.journal()), Journal::of(b.journal())];
    let mut sockets = [Socket::open(&coord_a), Socket::open(&coord_b)];
    sockets[0].subscribed(&coord_a.admin(), "projects/alpha", None);
    sockets[1].subscribed(&coord_b.admin(), "projects/alpha", None);
    let alpha = journals[0].space("projects/alpha");
    // Each host hears its own commits directly and the other's through
    // the store: the two orders interleave, and neither goes back.
    let mut head = 0;
    for n in 0..60 {
        head = journals[n % 2].append_one(&alpha);
    }
    for socket in &mut sockets {
        let seen = socket.until(&alpha, head);
        assert!(seen.windows(2).all(|w| w[0] < w[1]), "{seen:?}");
        assert!(seen.len() <= 60, "{}", seen.len());
    }
}

#[test]
fn the_store_restarted_is_a_gap_then_events_flow_again() {
    let mut store = pg_cluster("events-restart");
    let (a, _coord_a, _b, coord_b) = two_hosts("events-restart", &store);
    let journal_a = Journal::of(a.journal());
    let mut socket = Socket::open(&coord_b);
    let id = socket.subscribed(&coord_b.admin(), "projects/alpha", None);
    let alpha = journal_a.space("projects/alpha");
    let cutoff = journal_a.append_one(&alpha);
    socket.until(&alpha, cutoff);

    store.stop();
    store.resume().unwrap();
    // Whatever was committed while the host did not listen is covered by
    // one gap, once it listens again; the subscription stays open.
    let frame = socket.frame();
    assert_eq!(frame["subscription"], id.as_str());
    assert_eq!(
        frame["gap"]["space"]["path"],
        json!(["projects", "alpha"]),
        "{frame}"
    );

    // The appending host's connections broke too: its first requests may
    // be refused while it reconnects.
    let mut cutoff = None;
    support::eventually("an append through the restarted store", || {
        let body = json!({ "space": alpha, "facts": ["gmFwAQ=="], "operation_id": nonce() });
        let response = journal_a.client.post_json("/v1/append", &body.to_string());
        if response.status == 201 {
            cutoff = response.json()["cutoff"].as_u64();
        }
        cutoff.is_some()
    });
    let cutoff = cutoff.unwrap();
    // An advance the publisher could not send while reconnecting is itself
    // a gap: frames up to the event are gaps or events of alpha.
    loop {
        let frame = socket.frame();
        if frame.get("gap").is_some() {
            continue;
        }
        let (space, _, got) = event_of(&frame);
        assert_eq!(space, alpha["space_id"]);
        if got == cutoff {
            break;
        }
        assert!(got < cutoff, "{frame}");
    }
}

#[test]
fn a_coordination_host_on_the_store_hears_the_journal_without_a_stream() {
    let store = pg_cluster("events-coord-only");
    let url = store.url();
    let shared = ["--store", &url, "--coord-audience", AUDIENCE];
    let journal_host = Labd::start(
        "events-coord-only-journal",
        &["--store", &url, "--services", "bytes,journal"],
    );
    let mut args: Vec<String> = shared.iter().map(|s| s.to_string()).collect();
    args.extend([
        "--services".into(),
        "coord".into(),
        "--remote".into(),
        format!("journal=http://{}", journal_host.journal().address),
        "--remote".into(),
        format!("bytes=http://{}", journal_host.bytes().address),
        "--journal-advances".into(),
        "store".into(),
    ]);
    let coord_host = Labd::start(
        "events-coord-only-coord",
        &args.iter().map(String::as_str).collect::<Vec<_>>(),
    );
    let coord = Coord {
        audience: AUDIENCE.into(),
        ..Coord::new(&coord_host)
    };
    coord.project("alpha");
    let journal = Journal::of(journal_host.journal());
    let mut socket = Socket::open(&coord);
    socket.subscribed(&coord.admin(), "projects/alpha", None);
    let alpha = journal.space("projects/alpha");
    let cutoff = journal.append_one(&alpha);
    let seen = socket.until(&alpha, cutoff);
    assert!(seen.windows(2).all(|w| w[0] < w[1]), "{seen:?}");
}

/// Frames until the event of `space` at `cutoff`: whether a gap came on
/// the way (every other frame must be an event).
fn gap_before(socket: &mut Socket, space: &Value, cutoff: u64) -> bool {
    let mut gap = false;
    loop {
        let frame = socket.frame();
        if frame.get("gap").is_some() {
            gap = true;
            continue;
        }
        let (id, _, got) = event_of(&frame);
        if id == space["space_id"] && got == cutoff {
            return gap;
        }
    }
}

#[test]
fn an_advance_too_long_for_a_notification_is_a_gap_on_the_other_host() {
    let store = pg_cluster("events-long");
    let (a, _coord_a, _b, coord_b) = two_hosts("events-long", &store);
    let journal_a = Journal::of(a.journal());
    let mut socket = Socket::open(&coord_b);
    socket.subscribed(&coord_b.admin(), "projects/alpha", None);
    let alpha = journal_a.space("projects/alpha");
    let barrier = journal_a.append_one(&alpha);
    assert!(!gap_before(&mut socket, &alpha, barrier));

    // Keys of 255 bytes, 32 levels down: the deepest paths no longer fit
    // in one notification (PostgreSQL's payload is under 8,000 bytes).
    let mut parent = alpha.clone();
    for level in 0..32 {
        let key = format!("{level:02}{}", "k".repeat(253));
        parent = journal_a.create(&parent, &key).0;
    }
    journal_a.append_one(&parent);
    // The loss is said, and what follows still arrives.
    let cutoff = journal_a.append_one(&alpha);
    gap_and_event(&mut socket, &alpha, cutoff);
}

/// Frames until a gap and the event of `space` at `cutoff` both came, in
/// either order: a gap heard with events not yet written is written after
/// them (for each subscription its events, then its gap). Without a gap
/// the socket's read times out and the test fails.
fn gap_and_event(socket: &mut Socket, space: &Value, cutoff: u64) {
    let (mut gap, mut event) = (false, false);
    while !(gap && event) {
        let frame = socket.frame();
        if frame.get("gap").is_some() {
            gap = true;
            continue;
        }
        let (id, _, got) = event_of(&frame);
        event |= id == space["space_id"] && got == cutoff;
    }
}

#[test]
fn a_publisher_past_its_outbox_bound_is_a_gap_on_the_other_host() {
    let store = pg_cluster("events-bound");
    let url = store.url();
    // The appending host keeps at most one journal unpublished.
    let shared = [
        "--store",
        &url,
        "--coord-audience",
        AUDIENCE,
        "--advance-stream-lines",
        "1",
    ];
    let a = Labd::start("events-bound-a", &shared);
    let coord_a = Coord {
        audience: AUDIENCE.into(),
        ..Coord::new(&a)
    };
    let (_b, coord_b) = second_host("events-bound-b", &a, AUDIENCE, &shared[..4]);
    coord_a.project("alpha");
    let journal_a = Journal::of(a.journal());
    let alpha = journal_a.space("projects/alpha");
    let spaces: Vec<Value> = (0..8)
        .map(|i| journal_a.create(&alpha, &format!("w{i}")).0)
        .collect();
    let mut socket = Socket::open(&coord_b);
    socket.subscribed(&coord_b.admin(), "projects/alpha", None);
    let barrier = journal_a.append_one(&alpha);
    assert!(!gap_before(&mut socket, &alpha, barrier));

    // Eight writers on eight journals: their advances meet in the outbox
    // while a notification is in flight, and the bound loses some.
    let mut gap = false;
    for _round in 0..10 {
        std::thread::scope(|s| {
            for space in &spaces {
                let journal = Journal::of(a.journal());
                s.spawn(move || {
                    for _ in 0..20 {
                        journal.append_one(space);
                    }
                });
            }
        });
        // Let the publisher drain, so that the barrier itself finds room.
        std::thread::sleep(std::time::Duration::from_millis(500));
        let barrier = journal_a.append_one(&alpha);
        if gap_before(&mut socket, &alpha, barrier) {
            gap = true;
            break;
        }
    }
    assert!(gap, "no gap although the outbox held one journal");
}

#[test]
fn advances_from_the_store_need_a_shared_store() {
    let refused = refused_start(
        "events-store-on-lmdb",
        &[
            "--services".into(),
            "coord".into(),
            "--journal-advances".into(),
            "store".into(),
        ],
    );
    assert!(refused.contains("--journal-advances store"), "{refused}");
    assert!(refused.contains("--store is not one"), "{refused}");
}

/// Frames of `socket` until subscription `id` closes: the reason it gives.
/// Events and gaps of its subscriptions may come first.
fn closing_reason(socket: &mut Socket, id: &str) -> String {
    loop {
        let frame = socket.frame();
        if frame["subscription"] == id {
            if let Some(closed) = frame.get("closed") {
                return closed["reason"].as_str().unwrap().to_string();
            }
        }
        assert!(
            frame.get("event").is_some() || frame.get("gap").is_some(),
            "{frame}"
        );
    }
}

/// Runs `sql` on the cluster's `template1`, which stays reachable while
/// the services' database refuses connections.
fn psql(store: &Cluster, sql: &str) {
    let out = store
        .psql()
        .args(["--dbname", "template1", "-v", "ON_ERROR_STOP=1", "-c", sql])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn a_retirement_through_one_host_closes_the_workers_subscriptions_on_another() {
    let store = pg_cluster("events-retire");
    // The retirement reads the provisioning's record, whose blob must be
    // there for both hosts.
    let (_a, coord_a, b, coord_b, _s3) = two_hosts_on_s3("events-retire", &store);
    let worker = coord_a.provision_worker("alpha", "w1", 61);
    let mut socket = Socket::open(&coord_a);
    let id = socket.subscribed(&worker, "projects/alpha", None);
    socket.subscribed(&coord_a.admin(), "projects/alpha", None);
    coord_b.retire_worker("alpha", "w1");
    assert_eq!(closing_reason(&mut socket, &id), "expired");
    // Nor can the retired worker subscribe again through the other host.
    let again = socket.subscribe(&worker, "projects/alpha", None);
    refused(&again, "denied");
    // Subscriptions through other grants stay open.
    let journal_b = Journal::of(b.journal());
    let alpha = journal_b.space("projects/alpha");
    let cutoff = journal_b.append_one(&alpha);
    socket.until(&alpha, cutoff);
}

#[test]
fn a_retirement_a_host_did_not_hear_closes_its_subscriptions_once_it_listens_again() {
    let store = pg_cluster("events-retire-unheard");
    let (_a, coord_a, _b, coord_b, _s3) = two_hosts_on_s3("events-retire-unheard", &store);
    // Host b's connections, its revocations' among them, are made.
    coord_a.provision_worker("alpha", "w0", 62);
    coord_b.retire_worker("alpha", "w0");
    let worker = coord_a.provision_worker("alpha", "w1", 63);
    let mut socket = Socket::open(&coord_a);
    let id = socket.subscribed(&worker, "projects/alpha", None);

    // No host can listen (their listening connections end, and no new
    // connection is taken) while the worker is retired through b.
    psql(
        &store,
        "ALTER DATABASE postgres WITH ALLOW_CONNECTIONS false",
    );
    psql(
        &store,
        "SELECT pg_terminate_backend(pid) FROM pg_stat_activity \
         WHERE datname = 'postgres' AND query LIKE 'LISTEN%'",
    );
    coord_b.retire_worker("alpha", "w1");
    psql(
        &store,
        "ALTER DATABASE postgres WITH ALLOW_CONNECTIONS true",
    );
    // Listening again, host a reads what was revoked meanwhile.
    assert_eq!(closing_reason(&mut socket, &id), "expired");
}
