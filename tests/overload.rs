//! The host's limits under load: slow clients, full instance budgets, the
//! memory budget, connection limits, clamps on what a guest asks for, and
//! a data directory one labd at a time.

use crate::support;
use crate::support::{Client, Labd};
use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

fn probe_args<'a>(probe: &'a str, extra: &[&'a str]) -> Vec<&'a str> {
    let mut args = vec!["--bytes-component", probe];
    args.extend_from_slice(extra);
    args
}

/// Sends a request head announcing `length` body bytes and the first
/// `sent` of them, and leaves the connection open.
fn start_slow(
    client: Client,
    target: &str,
    extra_headers: &str,
    length: usize,
    sent: usize,
) -> TcpStream {
    let mut stream = client.connect();
    let head = format!(
        "POST {target} HTTP/1.1\r\nhost: test\r\ncontent-type: application/json\r\n\
         {extra_headers}content-length: {length}\r\n\r\n"
    );
    stream.write_all(head.as_bytes()).unwrap();
    stream.write_all(&vec![b'{'; sent]).unwrap();
    stream
}

/// The value of `series`, 0 while it has none.
fn metric(client: Client, series: &str) -> u64 {
    client.metric(series).unwrap_or(0)
}

/// Instances the service made so far.
fn instantiations(labd: &Labd) -> u64 {
    metric(
        labd.bytes_management(),
        "lab_instantiation_duration_seconds_count",
    )
}

/// Requests of the bytes service the host refused itself.
const REFUSED: &str = "lab_requests_total{service=\"bytes\",operation=\"none\",status=\"503\"}";

fn assert_unavailable(response: &support::Response, service: &str) {
    response.assert_error(503, "unavailable");
    assert_eq!(response.header("retry-after"), Some("1"), "{response:?}");
    assert_eq!(response.header("lab-service"), Some(service));
}

#[test]
fn past_a_services_budget_a_request_is_refused_and_operational_routes_answer() {
    let probe = support::built_component("probe");
    let labd = Labd::start(
        "budget",
        &probe_args(
            probe.to_str().unwrap(),
            &[
                "--max-concurrent-requests",
                "2",
                "--operational-instances",
                "1",
                "--instance-wait-ms",
                "300",
            ],
        ),
    );
    let bytes = labd.bytes();
    assert_eq!(bytes.get("/ok").status, 200);

    // Two requests hold the budget's two instances, waiting on their bodies.
    let before = instantiations(&labd);
    let mut held: Vec<TcpStream> = (0..2)
        .map(|_| start_slow(bytes, "/hold?key=0", "", 2, 1))
        .collect();
    support::eventually("both instances are taken", || {
        instantiations(&labd) == before + 2
    });

    let refused = bytes.get("/ok");
    assert_unavailable(&refused, "bytes");
    assert_eq!(
        refused.json()["message"],
        "every instance of the service is busy"
    );
    let refused = bytes.post("/kv/put?key=k&value=v", None, b"");
    assert_unavailable(&refused, "bytes");
    // The operational routes have an instance kept for them, and the other
    // services have budgets of their own.
    assert_eq!(bytes.get("/livez").status, 200);
    assert_eq!(bytes.get("/healthz").status, 200);
    assert_eq!(labd.bytes_management().get("/healthz").status, 200);
    assert_eq!(labd.journal().get("/healthz").status, 200);
    assert_eq!(labd.journal().get("/livez").status, 200);

    for stream in &mut held {
        stream.write_all(b"}").unwrap();
        let answer = support::read_response(stream);
        assert_eq!(answer.status, 200);
        assert_eq!(answer.body, b"2");
    }
    assert_eq!(bytes.get("/ok").status, 200);
    // The refused write changed nothing.
    assert_eq!(bytes.get("/kv/get?key=k").status, 404);
    let metrics = String::from_utf8(labd.bytes_management().get("/metrics").body).unwrap();
    assert!(
        !metrics.contains("status=\"500\""),
        "no request of the test failed: {metrics}"
    );
}

/// An answer left to a batch keeps its place in the budget until the
/// batch is durable, though its instance is gone: the budget bounds the
/// requests waiting on the store as it bounds instances.
#[test]
fn an_answer_waiting_on_its_batch_keeps_its_place_in_the_budget() {
    let probe = support::built_component("probe");
    let labd = Labd::start(
        "budget-deferred",
        &probe_args(
            probe.to_str().unwrap(),
            &[
                "--max-concurrent-requests",
                "2",
                "--instance-wait-ms",
                "300",
            ],
        ),
    );
    let bytes = labd.bytes();
    assert_eq!(bytes.post("/kv/counter", None, b"").status, 200);

    // One request holds the store's writer, waiting on its body; a second
    // submits a batch, which waits behind it for the writer.
    let before = instantiations(&labd);
    let mut holder = start_slow(bytes, "/kv/hold-writer", "", 2, 1);
    support::eventually("the writer is held", || instantiations(&labd) == before + 1);
    let submitted = std::thread::spawn(move || bytes.post("/kv/submit?key=ok&value=a", None, b""));
    support::eventually("the batch is submitted", || {
        instantiations(&labd) == before + 2
    });

    let refused = bytes.get("/ok");
    assert_unavailable(&refused, "bytes");

    holder.write_all(b"}").unwrap();
    let held = support::read_response(&mut holder);
    assert_eq!((held.status, held.body), (200, b"2".to_vec()));
    let answered = submitted.join().unwrap();
    assert_eq!(
        (
            answered.status,
            String::from_utf8_lossy(&answered.body).into_owned()
        ),
        (201, "applied 1".to_string())
    );
    assert_eq!(bytes.get("/ok").status, 200);
}

#[test]
fn a_flood_of_slow_clients_leaves_every_service_live_and_ends_by_itself() {
    let labd = Labd::start(
        "flood",
        &[
            "--body-read-timeout-ms",
            "2000",
            "--header-read-timeout-ms",
            "2000",
            "--instance-wait-ms",
            "1000",
        ],
    );
    for client in [labd.bytes(), labd.journal(), labd.coord()] {
        assert_eq!(client.get("/livez").status, 200);
    }
    let mut flood = Vec::new();
    for i in 0..300 {
        let (client, target) = match i % 10 {
            0 => (labd.bytes(), "/v1/blobs"),
            1 => (labd.journal(), "/v1/append"),
            _ => (labd.coord(), "/v1/publish"),
        };
        flood.push(start_slow(client, target, "", 100, 1));
    }
    // Clients that never finish their request head.
    for _ in 0..10 {
        let mut stream = labd.journal().connect();
        stream
            .write_all(b"POST /v1/append HTTP/1.1\r\nhost: te")
            .unwrap();
        flood.push(stream);
    }

    // Every service stays live while the flood holds its connections: a
    // liveness bound, generous for an answer that takes milliseconds.
    let bound = Duration::from_secs(1);
    for client in [labd.bytes(), labd.journal(), labd.coord()] {
        for _ in 0..3 {
            let started = Instant::now();
            let response = client.get("/livez");
            assert_eq!(response.status, 200, "{response:?}");
            assert!(
                started.elapsed() < bound,
                "livez took {:?}",
                started.elapsed()
            );
        }
    }
    let put = labd.bytes().post("/v1/blobs", None, b"during the flood");
    assert!(
        put.status == 200 || put.status == 503,
        "a put during the flood: {put:?}"
    );
    if put.status == 503 {
        assert_unavailable(&put, "bytes");
    }
    assert_eq!(labd.journal().get("/healthz").status, 200);

    // The server closes every slow connection by itself: each sees an
    // answer or the end of the connection, never a 500.
    let mut answered = 0;
    for mut stream in flood {
        let mut seen = Vec::new();
        let _ = stream.read_to_end(&mut seen);
        let text = String::from_utf8_lossy(&seen);
        assert!(!text.starts_with("HTTP/1.1 500"), "{text}");
        if !seen.is_empty() {
            answered += 1;
        }
    }
    assert!(answered > 0, "no slow request was answered");
    for client in [labd.bytes(), labd.journal(), labd.coord()] {
        assert_eq!(client.get("/livez").status, 200);
    }
}

#[test]
fn past_the_connection_limit_a_connection_is_refused() {
    let labd = Labd::start(
        "connections",
        &[
            "--max-connections",
            "3",
            "--header-read-timeout-ms",
            "60000",
        ],
    );
    let bytes = labd.bytes();
    assert_eq!(bytes.get("/livez").status, 200);
    let idle: Vec<TcpStream> = (0..3).map(|_| bytes.connect()).collect();
    let refused = bytes.get("/livez");
    assert_unavailable(&refused, "bytes");
    assert_eq!(refused.header("connection"), Some("close"));
    // Another listener is not affected.
    assert_eq!(labd.journal().get("/livez").status, 200);
    drop(idle);
    support::eventually("a closed connection frees its place", || {
        bytes.get("/livez").status == 200
    });
}

/// Peak resident memory of `pid` since the last reset, and resets it.
#[test]
fn instances_grow_within_the_memory_budget_or_are_refused() {
    const BUDGET_MIB: u64 = 64;
    const BASE_MIB: u64 = 4;
    const EACH_MIB: u64 = 24;
    const REQUESTS: usize = 8;
    let probe = support::built_component("probe");
    let labd = Labd::start(
        "memory",
        &probe_args(
            probe.to_str().unwrap(),
            &[
                "--memory-budget-mib",
                "64",
                "--instance-base-memory-mib",
                "4",
                "--instance-wait-ms",
                "500",
            ],
        ),
    );
    let bytes = labd.bytes();
    let hold = format!("/hold?key={EACH_MIB}");
    // Alone, one request fits.
    assert_eq!(bytes.post(&hold, None, b"x").body, b"1");

    let pid = labd.child.id();
    support::reset_peak_rss(pid);
    let baseline = support::peak_rss_kib(pid);
    // Dropping `release` lets every request send its body.
    let (release, released) = std::sync::mpsc::channel::<()>();
    let released = std::sync::Mutex::new(released);
    let answers: Vec<support::Response> = std::thread::scope(|scope| {
        let (wrote_head, heads) = std::sync::mpsc::channel();
        let workers: Vec<_> = (0..REQUESTS)
            .map(|_| {
                let wrote_head = wrote_head.clone();
                let hold = &hold;
                let released = &released;
                scope.spawn(move || {
                    let mut stream = start_slow(bytes, hold, "", 1, 0);
                    wrote_head.send(()).unwrap();
                    let _ = released.lock().unwrap().recv();
                    // A refused request's connection is closed already.
                    let _ = stream.write_all(b"}");
                    support::read_response(&mut stream)
                })
            })
            .collect();
        for _ in 0..REQUESTS {
            heads.recv().unwrap();
        }
        // Past the wait every request either holds its memory or was
        // refused.
        // Each request holding its memory has at least EACH - BASE charged.
        let per_request = (EACH_MIB - BASE_MIB) << 20;
        support::eventually("every request grew or was refused", || {
            let management = labd.bytes_management();
            let refused = metric(management, REFUSED);
            let holding = metric(management, "lab_memory_charged_bytes") / per_request;
            refused + holding >= REQUESTS as u64
        });
        drop(release);
        workers.into_iter().map(|w| w.join().unwrap()).collect()
    });
    let peak = support::peak_rss_kib(pid);
    let refused = answers.iter().filter(|a| a.status == 503).count();
    for answer in &answers {
        match answer.status {
            200 => assert_eq!(answer.body, b"1"),
            _ => {
                assert_unavailable(answer, "bytes");
                assert_eq!(
                    answer.json()["message"],
                    "the host's memory for requests is in use"
                );
            }
        }
    }
    assert!(
        refused > 0,
        "{REQUESTS} × {EACH_MIB} MiB fit in {BUDGET_MIB} MiB"
    );
    let bound_kib = (BUDGET_MIB + REQUESTS as u64 * BASE_MIB + 16) << 10;
    eprintln!(
        "{refused} of {REQUESTS} refused; resident memory grew by {} KiB (bound {bound_kib} KiB)",
        peak.saturating_sub(baseline)
    );
    assert!(
        peak.saturating_sub(baseline) < bound_kib,
        "resident memory grew by {} KiB",
        peak - baseline
    );
    // The budget came back with the instances.
    assert_eq!(bytes.post(&hold, None, b"x").body, b"1");
}

#[test]
fn a_call_while_holding_a_write_transaction_is_refused() {
    let probe = support::built_component("probe");
    let labd = Labd::start("call-writing", &probe_args(probe.to_str().unwrap(), &[]));
    let bytes = labd.bytes();
    // Without a transaction the probe reaches the journal.
    let plain = bytes.get("/get?key=journal&value=/livez");
    assert_eq!(plain.status, 200, "{plain:?}");

    let refused = bytes.post("/call-writing?key=journal&value=/livez", None, b"");
    assert_eq!(refused.status, 409, "{refused:?}");
    let refusals = String::from_utf8(refused.body).unwrap();
    let lines: Vec<&str> = refusals.lines().collect();
    assert_eq!(lines.len(), 2, "{refusals}");
    for line in lines {
        assert_eq!(line, "a service holding a write transaction makes no calls");
    }
    // The transaction itself went on and committed, and writers still write.
    assert_eq!(bytes.get("/kv/get?key=writing").body, b"yes");
    assert_eq!(bytes.post("/kv/put?key=k&value=v", None, b"").status, 200);
    assert_eq!(bytes.get("/kv/get?key=k").body, b"v");
}

#[test]
fn the_host_clamps_what_a_guest_asks_for() {
    let probe = support::built_component("probe");
    let labd = Labd::start(
        "clamps",
        &[
            "--coord-component",
            probe.to_str().unwrap(),
            "--blob-cap",
            "100000",
            "--max-call-answer-bytes",
            "65536",
        ],
    );
    let coord = labd.coord();

    // A scan answers at most 1024 entries, whatever it asks for.
    assert_eq!(coord.post("/kv/fill?key=1500", None, b"").status, 200);
    assert_eq!(coord.get("/kv/scan?key=10").body, b"10");
    assert_eq!(coord.get("/kv/scan?key=1024").body, b"1024");
    assert_eq!(coord.get("/kv/scan?key=4000000000").body, b"1024");
    // A `read-all` reads at most 1024 keys; past them it reads nothing.
    assert_eq!(coord.get("/kv/read-all?key=3").body, b"3 of 3");
    assert_eq!(coord.get("/kv/read-all?key=1024").body, b"1024 of 1024");
    let refused = coord.get("/kv/read-all?key=1025");
    assert_eq!((refused.status, refused.body), (413, b"too-large".to_vec()));

    // A guest's blob cap is never above --blob-cap.
    let fits = coord.post("/blob/put", None, &vec![1; 100_000]);
    assert_eq!((fits.status, fits.body), (200, b"100000".to_vec()));
    let over = coord.post("/blob/put", None, &vec![1; 100_001]);
    assert_eq!((over.status, over.body), (413, b"too-large".to_vec()));
    let fits = coord.post("/blob/write?key=100000", None, b"");
    assert_eq!((fits.status, fits.body), (200, b"100000".to_vec()));
    let over = coord.post("/blob/write?key=100001", None, b"");
    assert_eq!((over.status, over.body), (413, b"too-large".to_vec()));

    // A co-hosted service's answer read whole is bounded like a remote one.
    let at_bound = support::pseudo_random(65536, 1);
    let name = labd.bytes().put(&at_bound);
    let answer = coord.get(&format!("/get?key=bytes&value=/v1/blobs/{name}"));
    assert_eq!(answer.status, 200);
    assert_eq!(answer.body, at_bound);
    let past_bound = support::pseudo_random(65537, 2);
    let name = labd.bytes().put(&past_bound);
    let answer = coord.get(&format!("/get?key=bytes&value=/v1/blobs/{name}"));
    assert_eq!(answer.status, 502, "{answer:?}");
    let message = String::from_utf8(answer.body).unwrap();
    assert_eq!(message, "the answer of bytes passes 65536 bytes");
}

#[test]
fn a_second_labd_on_one_data_directory_exits_at_start() {
    let labd = Labd::start("locked", &[]);
    assert_eq!(labd.bytes().get("/livez").status, 200);
    // A write of the first labd in progress.
    let staging = labd.blobs_dir().join("staging/in-progress.part");
    std::fs::write(&staging, b"partial").unwrap();

    let stderr = support::refused_start_on(&labd.data_dir.join("state"), &[]);
    assert!(
        stderr.contains("is in use by another labd"),
        "stderr: {stderr}"
    );
    assert!(staging.exists(), "the second labd removed a staging file");
    assert_eq!(labd.bytes().get("/livez").status, 200);

    // Once the first has gone, the directory is free again.
    let dir = labd.kill();
    let labd = Labd::start_in(dir, Vec::new());
    assert_eq!(labd.bytes().get("/livez").status, 200);
    assert!(
        !staging.exists(),
        "a start removes what a crash left behind"
    );
}

/// The services' common requests fit in their components' initial memory:
/// none grows an instance's memory, a growth being an `mprotect` of the new
/// pages and its reversal when the pool resets the slot, paid by every
/// request that grows.
#[test]
fn common_requests_run_within_the_components_initial_memory() {
    use crate::support::coord::{labels, Req};
    use lab_coord_auth::GrantKind;
    use serde_json::json;
    let (labd, coord) = support::coord::start("initial-memory");
    coord.project("alpha");
    let worker = coord.holder(20, &[GrantKind::Publish, GrantKind::Read], "projects/alpha");
    let blob = labd.bytes().put(&[7u8; 4096]);
    let head = support::root_head_request(&labd);
    let publish = |operation: &str, finding: &str| {
        let body = json!({
            "operation_id": operation,
            "path": labels("projects/alpha/snapshots/s1"),
            "profile": "lab/finding/1",
            "record": { "finding": finding, "n": 0 },
        });
        Req::json("publish", &body)
    };
    // The leaf exists from here on: what follows is the steady path.
    coord.ok(&worker, &publish("finding-0", "ok"), 201);

    let growths = || {
        labd.bytes_management()
            .metric("lab_memory_growths_total")
            .expect("the growths are counted")
    };
    let before = growths();
    for n in 1..=4 {
        assert_eq!(labd.bytes().get(&format!("/v1/blobs/{blob}")).status, 200);
        assert_eq!(labd.journal().post_json("/v1/head", &head).status, 200);
        coord.ok(
            &worker,
            &Req::read("resolve").path("projects/alpha/snapshots/s1"),
            200,
        );
        coord.ok(&worker, &publish(&format!("finding-{n}"), "ok"), 201);
        let page = coord.entries_as(&worker, "projects/alpha/snapshots/s1");
        assert_eq!(page.len(), n as usize + 1);
    }
    assert_eq!(growths(), before, "a request grew its instance's memory");
    // A request that needs more does grow, and is counted.
    coord.send(&worker, &publish("finding-large", &"x".repeat(3 << 20)));
    assert!(growths() > before, "a large body grew no memory");
}

#[test]
fn a_heap_past_the_memory_budget_is_refused_and_the_next_request_served() {
    // 16 MiB beyond the 4 MiB base: the heap's chunks outgrow it long
    // before 96 MiB of small blocks, and the refusal is the budget's.
    let probe = support::built_component("probe");
    let labd = Labd::start(
        "heap-budget",
        &probe_args(
            probe.to_str().unwrap(),
            &[
                "--memory-budget-mib",
                "16",
                "--instance-base-memory-mib",
                "4",
                "--instance-wait-ms",
                "100",
            ],
        ),
    );
    let bytes = labd.bytes();
    let refused = bytes.get("/heap?key=96");
    assert_unavailable(&refused, "bytes");
    let within = bytes.get("/heap?key=8");
    assert_eq!(within.status, 200, "{within:?}");
    assert!(within.body.starts_with(b"intact "));
}
