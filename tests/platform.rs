//! Host behaviour no service exposes, through the probe component standing in
//! for the bytes service: traps, the key-value store, its durability.

use crate::crash::{
    crash_under_load, post_bytes, random_threshold, until_one_in_flight, Crash, Crashable,
};
use crate::support;
use crate::support::Labd;
use std::io::Write;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;

/// The probe's call of the journal's `head`.
const HEAD_CALL: &str = "/call?key=journal&value=/v1/head";

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
fn a_heap_of_many_chunks_keeps_every_block() {
    // 96 MiB of blocks of up to 1 KiB: the guest heap's chunks double to
    // their largest and go on past its sixteenth, where a chunk's size
    // would overflow 32 bits if it kept doubling.
    let labd = start_probe("heap");
    let response = labd.bytes().get("/heap?key=96");
    let body = String::from_utf8_lossy(&response.body);
    assert_eq!(response.status, 200, "{body}");
    assert!(body.starts_with("intact "), "{body}");
    assert_eq!(labd.bytes().get("/ok").status, 200);
}

#[test]
fn committed_writes_survive_kill_9() {
    committed_writes_survive_a_crash(Crash::Kill9);
}

#[test]
fn committed_writes_survive_a_power_cut() {
    committed_writes_survive_a_crash(Crash::PowerCut);
}

fn committed_writes_survive_a_crash(crash: Crash) {
    until_one_in_flight("write", || crash_under_writes(crash));
}

/// Clients each writing their own keys, one transaction a key, until the
/// crash; after it every acknowledged write reads back, and a write in
/// flight is there whole or not at all. Answers whether one was in flight.
fn crash_under_writes(crash: Crash) -> bool {
    let probe = support::built_component("probe");
    let mut labd = Crashable::start(
        "kv-crash",
        &["--bytes-component", probe.to_str().unwrap()],
        crash,
    );
    let address = labd.bytes().address;
    let acknowledged = AtomicUsize::new(0);
    let threshold = random_threshold(40, 200);
    let watch = labd.watch();
    let writes = Mutex::new(Vec::new());
    std::thread::scope(|scope| {
        for c in 0..8 {
            let (acknowledged, watch, writes) = (&acknowledged, &watch, &writes);
            scope.spawn(move || {
                for n in 0.. {
                    let key = format!("c{c}-{n}");
                    let target = format!("/kv/put?key={key}&value=v{key}");
                    let exchange = watch.exchange(address, &post_bytes(&target, None, b""));
                    let acked = exchange.answered(200).is_some();
                    writes.lock().unwrap().push((key, exchange));
                    if !acked {
                        return;
                    }
                    acknowledged.fetch_add(1, Ordering::SeqCst);
                }
            });
        }
        crash_under_load(&mut labd, &acknowledged, threshold);
    });
    let writes = writes.into_inner().unwrap();
    let acked = writes
        .iter()
        .filter(|(_, e)| e.answered(200).is_some())
        .count();
    assert!(acked >= threshold);
    let caught = writes.iter().any(|(_, e)| e.in_flight(200));
    labd.restart();
    let client = labd.bytes();
    for (key, exchange) in &writes {
        let read = client.get(&format!("/kv/get?key={key}"));
        if exchange.answered(200).is_some() {
            assert_eq!(read.status, 200, "{key} lost");
        }
        if read.status == 200 {
            assert_eq!(read.body, format!("v{key}").as_bytes());
        } else {
            assert_eq!(read.status, 404, "{key}");
        }
    }
    assert_eq!(client.get("/kv/get?key=never").status, 404);
    caught
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
    // Each commit that wrote flushed one log record, and was timed.
    assert_eq!(after.2 - before.2, commits);
    eprintln!("256 transactions in {commits} commits");
}

/// (commits, transactions, log flushes timed) of the key-value store so
/// far.
fn kv_counters(labd: &Labd) -> (u64, u64, u64) {
    let metrics = String::from_utf8(labd.bytes_management().get("/metrics").body).unwrap();
    let counter = |name: &str| -> u64 {
        let line = metrics.lines().find(|l| l.starts_with(name)).unwrap();
        line.rsplit(' ').next().unwrap().parse().unwrap()
    };
    (
        counter("lab_kv_commits_total"),
        counter("lab_kv_transactions_total"),
        counter("lab_kv_log_flush_seconds_count"),
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
fn a_request_holding_a_write_transaction_cannot_apply_a_sequenced_batch() {
    let labd = start_probe("kv-batch-open");
    let text = |r: &support::Response| String::from_utf8_lossy(&r.body).into_owned();
    // Setup: the store takes writes.
    let counter = labd.bytes().post("/kv/increment", None, b"");
    assert_eq!((counter.status, text(&counter)), (200, "1".to_string()));
    // Without the refusal the batch would wait for the open transaction to
    // reach its idle limit, then be answered (200).
    let response = labd.bytes().post("/kv/batch-while-writing", None, b"");
    assert_eq!(response.status, 409, "{}", text(&response));
    assert!(
        text(&response).contains("cannot be applied while the request holds a write transaction"),
        "{}",
        text(&response)
    );
    // Nothing was written and the store is free.
    let counter = labd.bytes().post("/kv/increment", None, b"");
    assert_eq!((counter.status, text(&counter)), (200, "2".to_string()));
}

#[test]
fn a_submitted_batch_is_answered_by_its_outcome_once_the_handler_returned() {
    let labd = start_probe("kv-submit");
    let client = labd.bytes();
    let submit = |mode: &str, guard: &str| {
        let response = client.post(&format!("/kv/submit?key={mode}&value={guard}"), None, b"");
        let body = String::from_utf8_lossy(&response.body).into_owned();
        (response, body)
    };
    let answered = |mode: &str, guard: &str| {
        let (response, body) = submit(mode, guard);
        (response.status, body)
    };
    // Every outcome answers what the component gave for it, with the
    // handler's headers; the handler's own status and body are set aside.
    assert_eq!(answered("ok", "a"), (404, "no counter".into()));
    assert_eq!(client.get("/kv/get?key=a").status, 404, "nothing written");
    assert_eq!(client.post("/kv/counter", None, b"").status, 200);
    let (applied, body) = submit("ok", "a");
    assert_eq!((applied.status, body.as_str()), (201, "applied 1"));
    assert_eq!(applied.header("lab-service"), Some("bytes"));
    assert_eq!(applied.header("content-type"), Some("text/plain"));
    assert_eq!(answered("ok", "a"), (200, "guarded 1".into()));
    assert_eq!(answered("expect-5", "b"), (409, "mismatch 1".into()));
    assert_eq!(answered("ceiling", "c"), (413, "past 1".into()));
    // A handler that fails after submitting applies nothing.
    let (trapped, _) = submit("trap", "d");
    trapped.assert_error(500, "internal");
    assert_eq!(answered("ok", "e"), (201, "applied 2".into()));
    // One batch a request: the second is refused and applies nothing.
    assert_eq!(answered("twice", "f"), (201, "applied 3".into()));
    assert_eq!(answered("ok", "g"), (201, "applied 4".into()));
    // Refused, nothing submitted: the handler answers.
    let (status, body) = answered("writing", "h");
    assert_eq!(status, 409, "{body}");
    assert!(
        body.contains("cannot be submitted while the request holds a write transaction"),
        "{body}"
    );
    let (status, body) = answered("malformed", "i");
    assert_eq!(status, 409, "{body}");
    assert!(body.contains("malformed answers"), "{body}");
    assert_eq!(answered("ok", "j"), (201, "applied 5".into()));
}

#[test]
fn a_batch_submitted_in_a_call_answers_the_caller() {
    let probe = support::built_component("probe");
    let probe = probe.to_str().unwrap();
    let labd = Labd::start(
        "kv-submit-call",
        &["--bytes-component", probe, "--coord-component", probe],
    );
    assert_eq!(labd.bytes().post("/kv/counter", None, b"").status, 200);
    let call = |mode: &str| {
        let response = labd.coord().post(
            &format!("/call?key=bytes&value=/kv/submit?key={mode}"),
            None,
            b"{}",
        );
        (
            response.status,
            String::from_utf8_lossy(&response.body).into_owned(),
        )
    };
    assert_eq!(call("ok"), (201, "applied 1".into()));
    assert_eq!(call("ok"), (200, "guarded 1".into()));
    assert_eq!(call("expect-5"), (409, "mismatch 1".into()));
}

#[test]
fn a_batch_read_of_a_snapshot_answers_in_order_up_to_its_bound() {
    let labd = start_probe("kv-get-all");
    let client = labd.bytes();
    let text = |r: &support::Response| String::from_utf8_lossy(&r.body).into_owned();
    let put = client.post("/kv/put?key=a&value=1", None, b"");
    assert_eq!(put.status, 200, "{}", text(&put));
    let found = client.get("/kv/get-all?key=a&len=1024");
    assert_eq!((found.status, text(&found)), (200, "1024 of 1024".into()));
    let absent = client.get("/kv/get-all?key=b&len=3");
    assert_eq!((absent.status, text(&absent)), (200, "0 of 3".into()));
    // One key past the bound a scan's answer has.
    let over = client.get("/kv/get-all?key=a&len=1025");
    assert_eq!(
        (over.status, text(&over)),
        (413, "KvError::TooLarge".into())
    );
}

#[test]
fn a_service_calls_a_cohosted_service_in_process() {
    // Without the coordination service, which calls the journal itself.
    let probe = support::built_component("probe");
    let labd = Labd::start(
        "calls",
        &[
            "--services",
            "bytes,journal",
            "--bytes-component",
            probe.to_str().unwrap(),
        ],
    );
    let probe = labd.bytes();
    let root = support::root_head_request(&labd);
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
    let root = support::root_head_request(&journal_host);
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
    let body = support::root_head_request(&labd);
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

/// A labd hosting the probe as the coordination service, next to the real
/// bytes and journal services (or, with `remote_bytes`, calling a bytes
/// service of another labd).
fn start_probe_as_coord(name: &str, remote_bytes: Option<&Labd>) -> Labd {
    let probe = support::built_component("probe");
    let mut args = vec![
        "--coord-component".to_string(),
        probe.to_str().unwrap().to_string(),
    ];
    if let Some(bytes_host) = remote_bytes {
        args.extend([
            "--services".to_string(),
            "coord".to_string(),
            "--remote".to_string(),
            format!("bytes=http://{}", bytes_host.bytes().address),
        ]);
    }
    Labd::start_in(support::temp_dir(name), args)
}

/// 64 MiB: more than any buffer on the way may hold.
fn large_body() -> Vec<u8> {
    support::pseudo_random(1 << 20, 64).repeat(64)
}

/// The probe forwards its own body to the bytes service's `put` and answers
/// what the bytes service answered.
fn forward_and_check(probe: support::Client, bytes: support::Client) {
    let data = large_body();
    let answer = probe.post("/forward?key=bytes&value=/v1/blobs", None, &data);
    assert_eq!(
        answer.status,
        200,
        "{}",
        String::from_utf8_lossy(&answer.body)
    );
    let name = support::name_of(&data);
    assert_eq!(answer.json()["name"], name.as_str());
    assert_eq!(answer.json()["size"], data.len() as u64);
    assert_eq!(bytes.stat(&[&name])[&name], data.len() as u64);

    // A body of unknown length is forwarded as it comes, too.
    let data = support::pseudo_random(3 << 20, 65);
    let mut stream = probe.connect();
    stream
        .write_all(
            b"POST /forward?key=bytes&value=/v1/blobs HTTP/1.1\r\nhost: t\r\n\
              transfer-encoding: chunked\r\nconnection: close\r\n\r\n",
        )
        .unwrap();
    for chunk in data.chunks(100_000) {
        write!(stream, "{:x}\r\n", chunk.len()).unwrap();
        stream.write_all(chunk).unwrap();
        stream.write_all(b"\r\n").unwrap();
    }
    stream.write_all(b"0\r\n\r\n").unwrap();
    let answer = support::read_response(&mut stream);
    assert_eq!(answer.status, 200);
    assert_eq!(answer.json()["name"], support::name_of(&data).as_str());
}

#[test]
fn a_forwarded_body_streams_into_a_cohosted_service() {
    let labd = start_probe_as_coord("forward-local", None);
    forward_and_check(labd.coord(), labd.bytes());
}

#[test]
fn a_forwarded_body_streams_to_a_service_hosted_elsewhere() {
    let bytes_host = Labd::start("forward-bytes", &["--services", "bytes"]);
    let caller = start_probe_as_coord("forward-remote", Some(&bytes_host));
    forward_and_check(caller.coord(), bytes_host.bytes());
}

/// A client sends part of a large body through the probe's forward, waits
/// until the bytes service is staging it, and goes away: nothing commits.
fn break_off_forward(probe: support::Client, bytes_host: &Labd) {
    let mut stream = probe.connect();
    let head = format!(
        "POST /forward?key=bytes&value=/v1/blobs HTTP/1.1\r\nhost: t\r\ncontent-length: {}\r\n\r\n",
        64 << 20
    );
    stream.write_all(head.as_bytes()).unwrap();
    stream
        .write_all(&support::pseudo_random(4 << 20, 9))
        .unwrap();
    support::eventually("the bytes service stages the forwarded body", || {
        bytes_host.staging_files() == 1
    });
    drop(stream);
    support::eventually("the staged body is removed", || {
        bytes_host.staging_files() == 0
    });
    assert_eq!(bytes_host.committed_blobs(), 0);
    assert_eq!(probe.get("/ok").status, 200);
}

#[test]
fn a_client_that_breaks_off_a_forwarded_body_leaves_no_blob() {
    let labd = start_probe_as_coord("forward-abort-local", None);
    break_off_forward(labd.coord(), &labd);

    let bytes_host = Labd::start("forward-abort-bytes", &["--services", "bytes"]);
    let caller = start_probe_as_coord("forward-abort-remote", Some(&bytes_host));
    break_off_forward(caller.coord(), &bytes_host);
}

/// Fetches `target` and reads until the server closes: (status, declared
/// length, body bytes received).
fn fetch_until_closed(client: support::Client, target: &str) -> (u16, usize, Vec<u8>) {
    use std::io::Read;
    let mut stream = client.connect();
    let request = format!("GET {target} HTTP/1.1\r\nhost: t\r\nconnection: close\r\n\r\n");
    stream.write_all(request.as_bytes()).unwrap();
    let mut received = Vec::new();
    let mut buf = vec![0u8; 64 << 10];
    loop {
        match stream.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => received.extend_from_slice(&buf[..n]),
        }
    }
    let end = received
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .expect("a response head");
    let head = String::from_utf8(received[..end].to_vec()).unwrap();
    let status = head.split(' ').nth(1).unwrap().parse().unwrap();
    let length = head
        .lines()
        .find_map(|l| {
            let (name, value) = l.split_once(':')?;
            name.eq_ignore_ascii_case("content-length")
                .then(|| value.trim().parse().unwrap())
        })
        .expect("a content-length");
    (status, length, received[end + 4..].to_vec())
}

/// The probe relays a blob of the bytes service, verified against a
/// digest and length: the right ones give the whole body, wrong ones cut
/// the connection before the last byte.
fn relay_and_check(probe: support::Client, bytes: support::Client) {
    let data = support::pseudo_random((1 << 20) + 12_345, 5);
    let name = bytes.put(&data);
    let sha = name.trim_start_matches("sha256:");
    let n = data.len();
    let relay = |sha: &str, len: usize| {
        format!("/relay?key=bytes&value=/v1/blobs/{name}&sha={sha}&len={len}")
    };

    let (status, length, body) = fetch_until_closed(probe, &relay(sha, n));
    assert_eq!((status, length), (200, n));
    assert!(body == data, "the relayed body differs");

    let wrong = support::name_of(b"something else");
    let wrong = wrong.trim_start_matches("sha256:");
    let (status, length, body) = fetch_until_closed(probe, &relay(wrong, n));
    assert_eq!((status, length), (200, n));
    assert!(
        body.len() < n,
        "a wrong digest still delivered the whole body"
    );
    assert_eq!(body[..], data[..body.len()]);

    // The right digest, a longer announced length: the body ends short.
    let (status, length, body) = fetch_until_closed(probe, &relay(sha, n + 1));
    assert_eq!((status, length), (200, n + 1));
    assert!(body.len() < n, "the whole body went out unverified");

    // An empty relay is checked before the response starts.
    let empty = bytes.put(b"");
    let empty_sha = empty.trim_start_matches("sha256:");
    let relay_empty =
        |sha: &str| format!("/relay?key=bytes&value=/v1/blobs/{empty}&sha={sha}&len=0");
    let answer = probe.get(&relay_empty(empty_sha));
    assert_eq!((answer.status, answer.body.len()), (200, 0));
    probe.get(&relay_empty(wrong)).assert_error(500, "internal");
}

#[test]
fn a_relay_reaches_the_client_only_when_verified() {
    let labd = start_probe_as_coord("relay-local", None);
    relay_and_check(labd.coord(), labd.bytes());
}

#[test]
fn a_relay_from_a_service_hosted_elsewhere_is_verified_too() {
    let bytes_host = Labd::start("relay-bytes", &["--services", "bytes"]);
    let caller = start_probe_as_coord("relay-remote", Some(&bytes_host));
    relay_and_check(caller.coord(), bytes_host.bytes());
}

#[test]
fn the_coordination_service_gets_its_settings_and_a_development_root_key() {
    let labd = start_probe_as_coord("coord-key", None);
    let key = labd.data_dir.join("state/coord/root.key");
    let text = std::fs::read_to_string(&key).unwrap();
    let seed = text
        .strip_prefix("ed25519-secret:")
        .and_then(|t| t.strip_suffix('\n'))
        .unwrap();
    assert_eq!(seed.len(), 64);
    assert_eq!(
        hex::encode(hex::decode(seed).unwrap()),
        seed,
        "lowercase hex"
    );
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(&key).unwrap().permissions().mode();
    assert_eq!(mode & 0o777, 0o600);

    let seed_bytes: [u8; 32] = hex::decode(seed).unwrap().try_into().unwrap();
    let public = ed25519_dalek::SigningKey::from_bytes(&seed_bytes).verifying_key();
    let principal = format!("ed25519:{}", hex::encode(public.as_bytes()));
    let setting = |labd: &Labd, name: &str| {
        let answer = labd.coord().get(&format!("/config?key={name}"));
        (answer.status == 200).then(|| String::from_utf8(answer.body).unwrap())
    };
    assert_eq!(setting(&labd, "service").as_deref(), Some("coord"));
    assert_eq!(setting(&labd, "world").as_deref(), Some("lab"));
    assert_eq!(setting(&labd, "root-key"), Some(principal.clone()));
    assert_eq!(setting(&labd, "issuer-key").as_deref(), Some(seed));
    let audience = format!("http://{}", labd.coord().address);
    assert_eq!(setting(&labd, "audience"), Some(audience));

    // A restart keeps the key.
    let labd = labd.kill_and_restart();
    assert_eq!(std::fs::read_to_string(&key).unwrap(), text);
    assert_eq!(setting(&labd, "root-key"), Some(principal.clone()));

    // A configured root key replaces the development key; the issuer key
    // is then only what is configured.
    let probe = support::built_component("probe");
    let configured = Labd::start(
        "coord-configured",
        &[
            "--coord-component",
            probe.to_str().unwrap(),
            "--coord-root-key",
            &principal,
            "--coord-world",
            "elsewhere",
            "--coord-audience",
            "https://coord.example",
        ],
    );
    assert_eq!(setting(&configured, "root-key"), Some(principal));
    assert_eq!(setting(&configured, "issuer-key"), None);
    assert_eq!(setting(&configured, "world").as_deref(), Some("elsewhere"));
    assert_eq!(
        setting(&configured, "audience").as_deref(),
        Some("https://coord.example")
    );
    assert!(!configured.data_dir.join("state/coord/root.key").exists());
}

#[test]
fn a_malformed_root_key_stops_labd_before_it_listens() {
    let dir = support::temp_dir("coord-bad-key");
    let status = std::process::Command::new(env!("CARGO_BIN_EXE_labd"))
        .arg("--data-dir")
        .arg(dir.join("state"))
        .args(["--coord-root-key", "ed25519:ABCD", "--log", "off"])
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
        .status()
        .unwrap();
    assert!(!status.success());
    let _ = std::fs::remove_dir_all(dir);
}

/// `--guest-profiler perfmap` writes the map `perf` reads to name guest
/// functions, as the components are loaded; by default nothing is written,
/// and a profiler the host does not offer is refused at start.
#[test]
fn the_guest_profiler_writes_the_perf_map_only_when_asked() {
    let map_of =
        |labd: &Labd| std::path::PathBuf::from(format!("/tmp/perf-{}.map", labd.child.id()));
    let quiet = Labd::start("guest-profiler-none", &[]);
    assert_eq!(quiet.journal().get("/livez").status, 200);
    assert!(
        !map_of(&quiet).exists(),
        "a map written without the setting"
    );

    let profiled = Labd::start("guest-profiler-perfmap", &["--guest-profiler", "perfmap"]);
    assert_eq!(profiled.journal().get("/livez").status, 200);
    let map = map_of(&profiled);
    let text = std::fs::read_to_string(&map).expect("the perf map of the profiled labd");
    let _ = std::fs::remove_file(&map);
    // Each line is `<address> <size> <name>`; the journal's own code is named.
    assert!(
        text.lines().any(|line| line
            .split(' ')
            .nth(2)
            .is_some_and(|name| name.contains("lab_journal"))),
        "no function of the journal component in the perf map"
    );

    let refused = support::refused_start(
        "guest-profiler-unknown",
        &["--guest-profiler".into(), "vtune-ish".into()],
    );
    assert!(refused.contains("--guest-profiler"), "{refused}");
}
