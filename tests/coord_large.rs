//! Large JSON bodies through the coordination service: a record of most of
//! the 64 MiB bound is admitted, and concurrent bodies of that size are held
//! within the host's memory budget (503 `unavailable` with `Retry-After`
//! past it, never a 500).

use crate::support;
use crate::support::coord::{Coord, Holder, Req};
use crate::support::Labd;
use serde_json::Value;

/// A publish body whose record is an array of `1`s, `record_len` bytes of
/// JSON already in canonical form; returns (body, record).
fn publish_body(operation_id: &str, leaf: &str, record_len: usize) -> (Vec<u8>, Vec<u8>) {
    let mut record = Vec::with_capacity(record_len);
    record.push(b'[');
    while record.len() + 3 < record_len {
        record.extend_from_slice(b"1,");
    }
    record.extend_from_slice(b"1]");
    let mut body = format!(
        "{{\"operation_id\":\"{operation_id}\",\"path\":[\"projects\",\"alpha\",\"snapshots\",\"{leaf}\"],\"profile\":\"lab/finding/1\",\"record\":"
    )
    .into_bytes();
    body.extend_from_slice(&record);
    body.push(b'}');
    (body, record)
}

/// The coordination service of `labd`, its root holding grants on the
/// world, and the project `alpha`.
fn alpha(labd: &Labd) -> (Coord, Holder) {
    let coord = Coord::new(labd);
    let admin = coord.admin();
    let body = br#"{"operation_id":"project-alpha","label":"alpha"}"#;
    coord.ok(&admin, &Req::raw("create_project", body.to_vec()), 201);
    (coord, admin)
}

/// A record of 60 MiB, an array of thirty million values, is admitted and
/// retained whole: its canonical form is computed without a value tree.
#[test]
fn a_publish_of_a_60_mib_record_succeeds() {
    let labd = Labd::start("coord-large", &[]);
    let (coord, admin) = alpha(&labd);
    let (body, record) = publish_body("big-1", "big", 60 << 20);
    assert!(body.len() < 64 << 20);
    let publish = Req::raw("publish", body);
    let answer: Value = coord.ok(&admin, &publish, 201);
    // The record is canonical already, so its hash is its own digest.
    let hash = answer["record"]["hash"].as_str().unwrap().to_string();
    assert_eq!(hash, support::name_of(&record));
    let stat = labd.bytes().stat(&[&hash]);
    assert_eq!(stat[&hash], record.len() as u64);
    // A replay with a fresh proof finds the same admission.
    let replay = coord.ok(&admin, &publish, 200);
    assert_eq!(replay["record"], answer["record"]);
}

/// Eight clients each publish a body of nearly 64 MiB at once. The memory
/// instances may grow into is bounded by `--memory-budget-mib`: a request
/// that cannot get its memory in time is 503 `unavailable` with
/// `Retry-After`, never a 500, and a client that honours `Retry-After`
/// gets every record admitted. labd's peak resident memory stays within
/// the budget plus the bodies in flight between services (the copy of a
/// payload the bytes service is handed).
#[test]
fn concurrent_64_mib_bodies_stay_within_the_memory_budget() {
    const BUDGET_MIB: u64 = 384;
    const CLIENTS: usize = 8;
    let budget = BUDGET_MIB.to_string();
    let labd = Labd::start("coord-large-many", &["--memory-budget-mib", &budget]);
    let (coord, admin) = alpha(&labd);
    let pid = labd.child.id();
    support::reset_peak_rss(pid);
    let before = support::peak_rss_kib(pid);
    let outcomes: Vec<(u32, u32)> = std::thread::scope(|scope| {
        let workers: Vec<_> = (0..CLIENTS)
            .map(|i| {
                let (coord, admin) = (&coord, &admin);
                scope.spawn(move || {
                    let (body, _) = publish_body(&format!("many-{i}"), &format!("m{i}"), 63 << 20);
                    let publish = Req::raw("publish", body);
                    let mut refused = 0;
                    for _ in 0..60 {
                        let response = coord.send(admin, &publish);
                        match response.status {
                            201 => return (1, refused),
                            503 => {
                                response.assert_error(503, "unavailable");
                                let wait: u64 = response
                                    .header("retry-after")
                                    .expect("a 503 says when to retry")
                                    .parse()
                                    .unwrap();
                                refused += 1;
                                std::thread::sleep(std::time::Duration::from_secs(wait));
                            }
                            status => panic!(
                                "client {i}: {status} {}",
                                String::from_utf8_lossy(&response.body)
                            ),
                        }
                    }
                    (0, refused)
                })
            })
            .collect();
        workers.into_iter().map(|w| w.join().unwrap()).collect()
    });
    let admitted: u32 = outcomes.iter().map(|o| o.0).sum();
    let refused: u32 = outcomes.iter().map(|o| o.1).sum();
    let grown_mib = (support::peak_rss_kib(pid).saturating_sub(before)) / 1024;
    eprintln!("admitted {admitted}, refused {refused} times, peak RSS grew {grown_mib} MiB");
    assert_eq!(admitted as usize, CLIENTS, "every client got its record in");
    // Instances grow by at most the budget beyond their resident base. What
    // the budget does not charge is host memory: the copy of a payload a
    // publish hands the bytes service (64 MiB, one per publish holding its
    // memory, and the budget admits at most three at once), counted twice
    // for the allocator's slack.
    let bound = BUDGET_MIB + 2 * 3 * 64;
    assert!(
        grown_mib <= bound,
        "peak RSS grew {grown_mib} MiB, over {bound} MiB"
    );
}
