//! Measurements of the hub, run by hand (`cargo test -p labd --bin labd
//! --release events::measure -- --ignored --nocapture`): they print,
//! they assert nothing about speed.
//!
//! - Append throughput through the journal component in-process with no
//!   subscription (nothing listens, nothing is announced) against 1,000
//!   subscriptions covering every appended journal, each connection
//!   drained as a socket writer would.
//! - Memory per subscription: resident memory before and after opening
//!   16,000 subscriptions, empty and with full pending tables.

use super::journal_tests::{call, journal};
use super::*;
use serde_json::json;
use std::time::Instant;

const WRITERS: usize = 8;
const APPENDS: usize = 100;

async fn appends_per_second(service: &Arc<crate::service::Service>, spaces: &[Value]) -> f64 {
    let started = Instant::now();
    let mut tasks = tokio::task::JoinSet::new();
    for space in spaces {
        let space = space.clone();
        let service = Arc::clone(service);
        tasks.spawn(async move {
            for _ in 0..APPENDS {
                let body = json!({
                    "space": space,
                    "facts": ["gmFwAQ=="],
                    "operation_id": hex::encode(crate::blobstore::random_16()),
                });
                let (status, _) = call(&service, "POST", "/v1/append", body).await;
                assert_eq!(status, 201);
            }
        });
    }
    while let Some(done) = tasks.join_next().await {
        done.unwrap();
    }
    (WRITERS * APPENDS) as f64 / started.elapsed().as_secs_f64()
}

use serde_json::Value;

fn scope() -> Scope {
    Scope {
        prefix: Vec::new(),
        depth: None,
        hidden: 0,
        root_id: String::new(),
        space_id: "spc_root".into(),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "a measurement, run by hand"]
async fn append_throughput_with_a_thousand_subscriptions() {
    let hub = Hub::new(Source::Local);
    let feed = Feed::new(Arc::clone(&hub), 4096);
    let (service, _kv) = journal(feed).await;
    let (_, health) = call(&service, "GET", "/healthz", Value::Null).await;
    let root_id = health["identity"]["root_id"].as_str().unwrap().to_string();
    let root = json!({ "root_id": root_id, "space_id": health["identity"]["root_space_id"] });
    let mut spaces = Vec::new();
    for i in 0..WRITERS {
        let body =
            json!({ "parent": root, "key": format!("w{i}"), "operation_id": format!("c{i}") });
        let (_, created) = call(&service, "POST", "/v1/create", body).await;
        spaces.push(json!({ "root_id": root_id, "space_id": created["child"]["space_id"] }));
    }

    // 1,000 subscriptions on 63 connections, each drained by its writer.
    let mut connections = Vec::new();
    let mut drains = Vec::new();
    let mut opened = 0;
    while opened < 1000 {
        let connection = hub.connect();
        let drain = Arc::clone(&connection);
        drains.push(tokio::spawn(async move {
            loop {
                std::hint::black_box(drain.frames().await);
            }
        }));
        connections.push(connection);
        let connection = connections.last().unwrap();
        for _ in 0..SUBSCRIPTIONS_PER_CONNECTION.min(1000 - opened) {
            let mut scope = scope();
            scope.root_id = root_id.clone();
            hub.open(
                connection.id(),
                format!("sub_{opened}"),
                scope,
                u64::MAX,
                vec![],
            )
            .await
            .unwrap();
            opened += 1;
        }
    }
    let subscriptions: Vec<(u64, String)> = (0..1000)
        .map(|i| {
            (
                connections[i / SUBSCRIPTIONS_PER_CONNECTION].id(),
                format!("sub_{i}"),
            )
        })
        .collect();

    // Rounds alternate: none open; 1,000 covering every appended journal
    // (each advance is 1,000 events); 1,000 on scopes elsewhere (matched
    // and passed over).
    let mut rounds: [Vec<f64>; 3] = Default::default();
    for _ in 0..3 {
        for (round, prefix) in [None, Some(Vec::new()), Some(vec!["elsewhere".to_string()])]
            .into_iter()
            .enumerate()
        {
            for (connection, id) in &subscriptions {
                hub.close(*connection, id);
            }
            assert!(!hub.listening());
            if let Some(prefix) = prefix {
                for (connection, id) in &subscriptions {
                    let mut scope = scope();
                    scope.root_id = root_id.clone();
                    scope.prefix = prefix.clone();
                    hub.open(*connection, id.clone(), scope, u64::MAX, vec![])
                        .await
                        .unwrap();
                }
                assert_eq!(hub.open.load(Ordering::Relaxed), 1000);
            }
            rounds[round].push(appends_per_second(&service, &spaces).await);
        }
    }
    let [none, covering, elsewhere] = rounds.map(|mut v| {
        v.sort_by(f64::total_cmp);
        v[v.len() / 2]
    });
    println!(
        "appends/s ({WRITERS} writers x {APPENDS}, median of 3): none {none:.0}; \
         1,000 subscriptions covering them {covering:.0} ({:.0}%); \
         1,000 subscriptions elsewhere {elsewhere:.0} ({:.0}%)",
        100.0 * covering / none,
        100.0 * elsewhere / none
    );
    for drain in drains {
        drain.abort();
    }
}

fn resident_bytes() -> u64 {
    let statm = std::fs::read_to_string("/proc/self/statm").unwrap();
    let pages: u64 = statm.split_whitespace().nth(1).unwrap().parse().unwrap();
    pages * 4096
}

#[tokio::test(flavor = "current_thread")]
#[ignore = "a measurement, run by hand"]
async fn memory_per_subscription() {
    const CONNECTIONS: usize = 1000;
    let hub = Hub::new(Source::Local);
    let before = resident_bytes();
    let mut connections = Vec::new();
    for c in 0..CONNECTIONS {
        let connection = hub.connect();
        for s in 0..SUBSCRIPTIONS_PER_CONNECTION {
            let mut scope = scope();
            scope.prefix = vec!["worlds".into(), "lab".into(), format!("p{c}")];
            hub.open(
                connection.id(),
                format!("sub_{c}_{s}_{:024}", 0),
                scope,
                u64::MAX,
                vec![],
            )
            .await
            .unwrap();
        }
        connections.push(connection);
    }
    let opened = resident_bytes();
    let subscriptions = (CONNECTIONS * SUBSCRIPTIONS_PER_CONNECTION) as u64;
    println!(
        "resident memory per open subscription (empty table): {} bytes",
        (opened - before) / subscriptions
    );
    // Full tables for the subscriptions of 100 connections.
    for c in 0..100 {
        for j in 0..subscription::PENDING_JOURNALS {
            hub.announce(&[Advance {
                journal: Journal {
                    root_id: String::new(),
                    space_id: format!("spc_{c:08x}{j:024x}"),
                    path: vec![
                        "worlds".into(),
                        "lab".into(),
                        format!("p{c}"),
                        format!("s{j}"),
                    ],
                },
                cutoff: 1,
            }]);
        }
    }
    let full = resident_bytes();
    println!(
        "resident memory per full pending table (1,024 journals): {} bytes",
        (full - opened) / (100 * SUBSCRIPTIONS_PER_CONNECTION as u64)
    );
}
