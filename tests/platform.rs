//! Host behaviour no service exposes, through the probe component standing in
//! for the bytes service: traps, the key-value store, its durability.

#[path = "support/mod.rs"]
mod support;

use std::io::Write;
use support::Labd;

/// The probe's call of the journal's `head`.
const HEAD_CALL: &str = "/call?key=journal&value=/v1/head";

/// A `head` request for the root space of the journal `labd` hosts.
fn root_head_request(labd: &Labd) -> String {
    let health = labd.journal().get("/healthz").json();
    serde_json::json!({
        "space": {
            "root_id": health["identity"]["root_id"],
            "space_id": health["identity"]["root_space_id"],
        }
    })
    .to_string()
}

fn start_probe(name: &str) -> Labd {
    let probe = support::built_component("probe");
    Labd::start(name, &["--bytes-component", probe.to_str().unwrap()])
}

#[test]
fn a_trap_is_a_500_and_the_host_keeps_serving() {
    let labd = start_probe("trap");
    let client = labd.bytes();
    for _ in 0..3 {
        let response = client.get("/trap");
        response.assert_error(500, "internal");
        assert_eq!(response.header("lab-service"), Some("bytes"));
        assert_eq!(client.get("/ok").status, 200);
    }
    let metrics = String::from_utf8(labd.bytes_management().get("/metrics").body).unwrap();
    assert!(
        metrics.contains("operation=\"none\",status=\"500\"} 3"),
        "{metrics}"
    );
}

#[test]
fn committed_writes_survive_kill_9() {
    let labd = start_probe("kv-kill");
    let client = labd.bytes();
    for i in 0..20 {
        let response = client.post(&format!("/kv/put?key=k{i}&value=v{i}"), None, b"");
        assert_eq!(response.status, 200);
    }
    let labd = labd.kill_and_restart();
    let client = labd.bytes();
    for i in 0..20 {
        let response = client.get(&format!("/kv/get?key=k{i}"));
        assert_eq!(response.status, 200, "k{i}");
        assert_eq!(response.body, format!("v{i}").as_bytes());
    }
    assert_eq!(client.get("/kv/get?key=never").status, 404);
}

#[test]
fn concurrent_read_modify_writes_lose_nothing_and_share_commits() {
    let labd = start_probe("kv-group");
    let client = labd.bytes();
    // The store is shared with the other services (the journal provisions
    // itself at start): count from here.
    let before = kv_counters(&labd);
    let answers: Vec<u64> = std::thread::scope(|scope| {
        let workers: Vec<_> = (0..32)
            .map(|_| {
                scope.spawn(|| {
                    (0..8)
                        .map(|_| {
                            let response = client.post("/kv/increment", None, b"");
                            assert_eq!(response.status, 200);
                            String::from_utf8(response.body)
                                .unwrap()
                                .parse::<u64>()
                                .unwrap()
                        })
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        workers
            .into_iter()
            .flat_map(|w| w.join().unwrap())
            .collect()
    });
    // Every increment saw a distinct predecessor: 1..=256, each once.
    let mut sorted = answers.clone();
    sorted.sort_unstable();
    assert_eq!(sorted, (1..=256).collect::<Vec<u64>>());
    assert_eq!(client.get("/kv/get?key=counter").body, b"256");

    let after = kv_counters(&labd);
    assert_eq!(after.1 - before.1, 256);
    let commits = after.0 - before.0;
    assert!(
        commits < 256,
        "no two of 32 concurrent transactions shared a commit"
    );
    eprintln!("256 transactions in {commits} commits");
}

/// (commits, transactions) of the key-value store so far.
fn kv_counters(labd: &Labd) -> (u64, u64) {
    let metrics = String::from_utf8(labd.bytes_management().get("/metrics").body).unwrap();
    let counter = |name: &str| -> u64 {
        let line = metrics.lines().find(|l| l.starts_with(name)).unwrap();
        line.rsplit(' ').next().unwrap().parse().unwrap()
    };
    (
        counter("lab_kv_commits_total"),
        counter("lab_kv_transactions_total"),
    )
}

#[test]
fn a_request_holds_one_write_transaction_at_a_time() {
    let labd = start_probe("kv-two");
    let response = labd.bytes().post("/kv/two-writers", None, b"");
    assert_eq!(response.status, 409);
    // The first transaction was dropped with the instance; the store is free.
    assert_eq!(
        labd.bytes().post("/kv/put?key=a&value=b", None, b"").status,
        200
    );
}

#[test]
fn a_service_calls_a_cohosted_service_in_process() {
    let labd = start_probe("calls");
    let probe = labd.bytes();
    let root = root_head_request(&labd);
    let answer = probe.post(HEAD_CALL, None, root.as_bytes());
    assert_eq!(
        answer.status,
        200,
        "{}",
        String::from_utf8_lossy(&answer.body)
    );
    assert_eq!(answer.json()["cutoff"], 0);
    // The journal's refusals come back as they are.
    let refused = probe.post(HEAD_CALL, None, b"{}");
    refused.assert_error(400, "invalid");
    // The call counts in the journal's metrics like any request.
    let metrics = String::from_utf8(labd.journal_management().get("/metrics").body).unwrap();
    assert!(
        metrics.contains("operation=\"head\",status=\"200\"} 1"),
        "{metrics}"
    );
    // Unknown services and calls to oneself are refused to the caller.
    for service in ["nowhere", "bytes"] {
        let answer = probe.post(&format!("/call?key={service}&value=/v1/head"), None, b"{}");
        assert_eq!(answer.status, 502, "{service}");
    }
}

#[test]
fn a_service_hosted_elsewhere_is_called_over_http() {
    let journal_host = Labd::start("split-journal", &["--services", "journal"]);
    let journal_url = format!("journal=http://{}", journal_host.journal().address);
    let probe = support::built_component("probe");
    let caller = Labd::start(
        "split-bytes",
        &[
            "--services",
            "bytes",
            "--bytes-component",
            probe.to_str().unwrap(),
            "--remote",
            &journal_url,
        ],
    );
    let root = root_head_request(&journal_host);
    let answer = caller.bytes().post(HEAD_CALL, None, root.as_bytes());
    assert_eq!(
        answer.status,
        200,
        "{}",
        String::from_utf8_lossy(&answer.body)
    );
    assert_eq!(answer.json()["cutoff"], 0);
    let metrics =
        String::from_utf8(journal_host.journal_management().get("/metrics").body).unwrap();
    assert!(
        metrics.contains("operation=\"head\",status=\"200\"} 1"),
        "{metrics}"
    );

    // A remote that is not the named service is a failed call, not an answer.
    let impostor = format!("journal=http://{}", caller.bytes_management().address);
    let confused = Labd::start(
        "split-wrong",
        &[
            "--services",
            "bytes",
            "--bytes-component",
            probe.to_str().unwrap(),
            "--remote",
            &impostor,
        ],
    );
    let answer = confused.bytes().post(HEAD_CALL, None, root.as_bytes());
    assert_eq!(
        answer.status,
        502,
        "{}",
        String::from_utf8_lossy(&answer.body)
    );
}

#[test]
fn compute_past_the_limit_is_a_500_but_waiting_is_free() {
    let probe = support::built_component("probe");
    let labd = Labd::start(
        "compute-limit",
        &[
            "--bytes-component",
            probe.to_str().unwrap(),
            "--compute-limit-ms",
            "300",
        ],
    );
    let client = labd.bytes();
    let started = std::time::Instant::now();
    client.get("/spin").assert_error(500, "internal");
    assert!(started.elapsed() < std::time::Duration::from_secs(30));
    assert_eq!(client.get("/ok").status, 200);

    // A client that takes longer than the limit to send its body is not cut
    // off: time the instance spends waiting on the host does not count.
    let body = root_head_request(&labd);
    let (first, rest) = body.as_bytes().split_at(10);
    let mut stream = client.connect();
    let head = format!(
        "POST {HEAD_CALL} HTTP/1.1\r\nhost: t\r\ncontent-length: {}\r\n\r\n",
        body.len()
    );
    stream.write_all(head.as_bytes()).unwrap();
    stream.write_all(first).unwrap();
    // The slow client: the pause is the behaviour under test.
    std::thread::sleep(std::time::Duration::from_millis(700));
    stream.write_all(rest).unwrap();
    let answer = support::read_response(&mut stream);
    assert_eq!(
        answer.status,
        200,
        "{}",
        String::from_utf8_lossy(&answer.body)
    );
}
