//! Storage that fills up: the key-value map grows up to its ceiling and
//! then refuses writes by name; a full disk refuses blob puts and appends
//! and recovers once space is freed; the `storage` health check fails
//! before writes do; `/metrics` shows the map, the disk and the blobs.

use crate::support;
use crate::support::coord::{Coord, Req};
use crate::support::{pseudo_random, Client, Labd, Response};
use base64::Engine as _;
use serde_json::{json, Value};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Command;

// --------------------------------------------------------------- helpers

/// A canonical fact `[label "p", bytes]` of a `payload`-byte string, built
/// from the codec's rules (`contracts/values/VALUES.md`) by hand.
fn fact(payload: &[u8]) -> Vec<u8> {
    let mut out = vec![0x82, 0xd8, 0x27, 0x41, b'p'];
    let n = payload.len();
    match n {
        0..=23 => out.push(0x40 | n as u8),
        24..=0xff => out.extend([0x58, n as u8]),
        0x100..=0xffff => {
            out.push(0x59);
            out.extend((n as u16).to_be_bytes());
        }
        _ => {
            out.push(0x5a);
            out.extend((n as u32).to_be_bytes());
        }
    }
    out.extend_from_slice(payload);
    out
}

fn b64(bytes: &[u8]) -> String {
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

/// `count` distinct facts of `payload` bytes each, from `seed`.
fn batch(count: usize, payload: usize, seed: u64) -> Vec<String> {
    (0..count)
        .map(|i| b64(&fact(&pseudo_random(payload, seed * 1000 + i as u64))))
        .collect()
}

fn text(response: &Response) -> String {
    String::from_utf8_lossy(&response.body).into_owned()
}

/// A journal client on its root.
struct Journal {
    client: Client,
    root: Value,
}

impl Journal {
    fn new(labd: &Labd) -> Journal {
        let client = labd.journal();
        let describe = client.get("/describe");
        assert_eq!(describe.status, 200, "{}", text(&describe));
        let id = describe.json()["identity"].clone();
        assert!(id.is_object(), "not provisioned: {id}");
        Journal {
            client,
            root: json!({ "root_id": id["root_id"], "space_id": id["root_space_id"] }),
        }
    }

    fn post(&self, operation: &str, body: &Value) -> Response {
        self.client
            .post_json(&format!("/v1/{operation}"), &body.to_string())
    }

    fn child(&self, key: &str) -> Value {
        let body =
            json!({ "parent": self.root, "key": key, "operation_id": format!("create-{key}") });
        let created = self.post("create", &body);
        assert_eq!(created.status, 201, "{}", text(&created));
        let child = &created.json()["child"];
        json!({ "root_id": child["root_id"], "space_id": child["space_id"] })
    }

    fn append(&self, space: &Value, facts: &[String], operation_id: &str) -> Response {
        let body = json!({ "space": space, "facts": facts, "operation_id": operation_id });
        self.post("append", &body)
    }

    fn head(&self, space: &Value) -> u64 {
        let head = self.post("head", &json!({ "space": space }));
        assert_eq!(head.status, 200, "{}", text(&head));
        head.json()["cutoff"].as_u64().unwrap()
    }

    /// Every fact of `space`, in order, page by page.
    fn facts(&self, space: &Value) -> Vec<String> {
        let mut facts = Vec::new();
        let mut body = json!({ "space": space });
        loop {
            let page = self.post("read", &body);
            assert_eq!(page.status, 200, "{}", text(&page));
            let page = page.json();
            for entry in page["entries"].as_array().unwrap() {
                facts.push(entry["fact"].as_str().unwrap().to_string());
            }
            match page.get("next_after") {
                None => return facts,
                Some(next) => {
                    body = json!({ "space": space, "through": page["through"], "after": next })
                }
            }
        }
    }
}

/// The value of the gauge `name` in a `/metrics` text.
fn gauge(management: &Client, name: &str) -> u64 {
    management
        .metric(name)
        .unwrap_or_else(|| panic!("no gauge {name}"))
}

/// The `storage` check of a service's `healthz`: its detail when failing.
fn storage_check(client: &Client) -> Option<String> {
    let health = client.get("/healthz");
    let body = health.json();
    let check = body["checks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] == "storage")
        .unwrap_or_else(|| panic!("no storage check: {body}"))
        .clone();
    match check["status"].as_str().unwrap() {
        "ok" => None,
        "failing" => {
            assert_eq!(health.status, 503, "{body}");
            assert_eq!(body["status"], "failing");
            Some(check["detail"].as_str().unwrap().to_string())
        }
        other => panic!("check status {other}"),
    }
}

/// Asserts the refusal of a write for want of room: 503 `unavailable` with
/// `Retry-After`, a message of our own (none of LMDB's words).
fn assert_no_room(response: &Response, names: &str) {
    response.assert_error(503, "unavailable");
    assert_eq!(response.header("retry-after"), Some("1"), "{response:?}");
    let message = response.json()["message"].as_str().unwrap().to_string();
    assert!(message.contains(names), "{message}");
    for engine_word in ["MDB", "Storage(", "os error"] {
        assert!(!message.contains(engine_word), "{message}");
    }
}

// ------------------------------------------------------------- the map

#[test]
fn the_map_grows_to_its_ceiling_then_refuses_writes_by_name_and_serves_reads() {
    const INITIAL: u64 = 1 << 20;
    const CEILING: u64 = 4 << 20;
    let labd = Labd::start(
        "map-ceiling",
        &[
            "--services",
            "bytes,journal",
            "--lmdb-map-size",
            &INITIAL.to_string(),
            "--lmdb-map-ceiling",
            &CEILING.to_string(),
            "--storage-alarm-map-percent",
            "60",
            "--storage-alarm-free-bytes",
            "0",
        ],
    );
    let management = labd.journal_management();
    assert_eq!(gauge(&management, "lab_kv_map_size_bytes"), INITIAL);
    assert_eq!(gauge(&management, "lab_kv_map_ceiling_bytes"), CEILING);
    let j = Journal::new(&labd);
    assert_eq!(storage_check(&j.client), None);
    let space = j.child("filled");

    // 64 KiB batches until one is refused: the map must pass its initial
    // size on the way (it grows), and the check must fail before writes do.
    let mut accepted: Vec<String> = Vec::new();
    let mut alarm_before_refusal = None;
    let mut grown = 0;
    let refused = loop {
        assert!(accepted.len() < 4 * 400, "4 MiB never filled");
        if alarm_before_refusal.is_none() {
            alarm_before_refusal = storage_check(&j.client);
        }
        let facts = batch(4, 16 << 10, accepted.len() as u64);
        let appended = j.append(&space, &facts, &format!("fill-{}", accepted.len()));
        if appended.status != 201 {
            break appended;
        }
        accepted.extend(facts);
        grown = grown.max(gauge(&management, "lab_kv_map_size_bytes"));
    };
    assert!(
        accepted.len() * (16 << 10) > INITIAL as usize,
        "refused after {} facts: {}",
        accepted.len(),
        text(&refused)
    );
    assert!(grown > INITIAL, "the map never grew ({grown})");
    // Each growth is preceded by a checkpoint (`kv::lmdb` 8).
    assert!(gauge(&management, "lab_kv_checkpoints_total") > 0);
    assert_eq!(gauge(&management, "lab_kv_map_size_bytes"), CEILING);
    assert_no_room(&refused, "--lmdb-map-ceiling");
    assert!(
        text(&refused).contains("reached its ceiling"),
        "{}",
        text(&refused)
    );
    assert!(
        text(&refused).contains(&CEILING.to_string()),
        "{}",
        text(&refused)
    );
    let alarm = alarm_before_refusal.expect("healthz stayed ok until writes were refused");
    assert!(alarm.contains("--storage-alarm-map-percent"), "{alarm}");

    // Refused again: the ceiling holds. Nothing of the refused batches is
    // there, and every accepted fact reads back.
    let again = j.append(&space, &batch(4, 16 << 10, 999), "again");
    assert_no_room(&again, "--lmdb-map-ceiling");
    assert_eq!(j.head(&space), accepted.len() as u64);
    assert_eq!(j.facts(&space), accepted);
    assert!(gauge(&management, "lab_kv_map_used_bytes") <= CEILING);

    // A restart with a higher ceiling goes on from the same head.
    let dir = labd.kill();
    let labd = Labd::start_in(
        dir,
        ["--services", "bytes,journal", "--lmdb-map-ceiling"]
            .map(String::from)
            .into_iter()
            .chain([(2 * CEILING).to_string()])
            .collect(),
    );
    let j = Journal::new(&labd);
    let more = batch(4, 16 << 10, 1000);
    let appended = j.append(&space, &more, "after-restart");
    assert_eq!(appended.status, 201, "{}", text(&appended));
    accepted.extend(more);
    assert_eq!(j.facts(&space), accepted);
}

/// The coordination service writes into the same store: past the ceiling
/// its mutations are refused by name too, as its own answer. A mutation of
/// several journal writes may be cut after its first; sent again with its
/// operation ID once there is room, it completes (the service's recovery,
/// as after a crash).
#[test]
fn coordination_mutations_past_the_ceiling_are_unavailable_by_name() {
    const CEILING: u64 = 4 << 20;
    let map = |ceiling: u64| {
        ["--lmdb-map-size", "1048576", "--lmdb-map-ceiling"]
            .map(String::from)
            .into_iter()
            .chain([ceiling.to_string()])
            .chain(["--storage-alarm-free-bytes", "0"].map(String::from))
            .collect::<Vec<_>>()
    };
    let labd = Labd::start_in(support::temp_dir("coord-ceiling"), map(CEILING));
    let coord = Coord::new(&labd);
    let admin = coord.admin();
    coord.project("alpha");
    assert_eq!(storage_check(&coord.client), None);

    let j = Journal::new(&labd);
    let filler = j.child("filler");
    // To the brim: batches of 64 KiB, then of one 1 KiB fact, then of one
    // byte, each until refused twice in a row, so that a small write finds
    // no freed page (a refusal first checkpoints the store, which frees the
    // pages its last checkpoint pinned: `kv::log` 2).
    let mut appended = 0;
    for (facts, payload) in [(4, 16 << 10), (1, 1 << 10), (1, 1)] {
        let mut refusals = 0;
        let refused = loop {
            assert!(appended < 2000, "the map never filled");
            let response = j.append(
                &filler,
                &batch(facts, payload, appended),
                &format!("f-{appended}"),
            );
            if response.status == 201 {
                refusals = 0;
                appended += 1;
                continue;
            }
            refusals += 1;
            if refusals == 2 {
                break response;
            }
        };
        assert_no_room(&refused, "--lmdb-map-ceiling");
    }

    let beta = json!({ "operation_id": "project-beta", "label": "beta" });
    let refused = coord.send(&admin, &Req::json("create_project", &beta));
    assert_eq!(refused.header("lab-service"), Some("coord"));
    assert_no_room(&refused, "--lmdb-map-ceiling");
    let alarm = storage_check(&coord.client).expect("the coordination check stayed ok");
    assert!(alarm.contains("--storage-alarm-map-percent"), "{alarm}");
    // A signed read records its nonce: answered, or refused by name.
    let alpha = coord.send(&admin, &Req::read("resolve").path("projects/alpha"));
    if alpha.status == 200 {
        assert!(alpha.json()["space"].is_object(), "{}", text(&alpha));
    } else {
        assert_no_room(&alpha, "--lmdb-map-ceiling");
    }
    // The journal's own reads go on.
    assert_eq!(j.head(&filler), j.facts(&filler).len() as u64);

    // A higher ceiling: `beta` sent again completes, organizers and all.
    let labd = {
        let dir = labd.kill();
        Labd::start_in(dir, map(2 * CEILING))
    };
    let coord = Coord::new(&labd);
    let admin = coord.admin();
    let again = coord.send(&admin, &Req::json("create_project", &beta));
    assert!(matches!(again.status, 200 | 201), "{}", text(&again));
    for organizer in ["artifacts", "applications", "snapshots"] {
        let path = format!("projects/beta/{organizer}");
        let found = coord.ok(&admin, &Req::read("resolve").path(&path), 200);
        assert!(found["space"].is_object(), "{path}: {found}");
    }
}

// ------------------------------------------------------------ the disk

/// A tmpfs of `size` bytes mounted at `at`; unmounted on drop.
struct Tmpfs(PathBuf);

impl Tmpfs {
    fn mount(at: &Path, size: u64) -> Tmpfs {
        let uid = Command::new("id").arg("-u").output().unwrap();
        assert_eq!(
            String::from_utf8_lossy(&uid.stdout).trim(),
            "0",
            "this test mounts a small tmpfs as the data directory, which needs root"
        );
        std::fs::create_dir_all(at).unwrap();
        let mounted = Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={size}")])
            .arg("tmpfs")
            .arg(at)
            .status()
            .unwrap();
        assert!(mounted.success(), "mount a tmpfs at {}", at.display());
        Tmpfs(at.to_path_buf())
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg(&self.0).status();
        let _ = std::fs::remove_dir_all(self.0.parent().unwrap());
    }
}

/// A labd serving bytes and the journal with `extra` arguments, its
/// data directory (returned) on a tmpfs of 24 MiB, its map 8 MiB and its
/// storage alarm at 1 MiB free. Drop the labd before the tmpfs.
fn on_a_small_disk(name: &str, extra: &[&str]) -> (Tmpfs, PathBuf, Labd) {
    let dir = support::temp_dir(name);
    let state = dir.join("state");
    let tmpfs = Tmpfs::mount(&state, 24 << 20);
    let mut args = [
        "--services",
        "bytes,journal",
        "--lmdb-map-size",
        "8388608",
        "--storage-alarm-free-bytes",
        "1048576",
    ]
    .map(String::from)
    .to_vec();
    args.extend(extra.iter().map(|arg| arg.to_string()));
    (tmpfs, state, Labd::start_in(dir, args))
}

/// Fills the filesystem of `dir` with a file, leaving about `leave` bytes
/// free (none: to the last byte); returns the file.
fn fill(dir: &Path, leave: u64, name: &str) -> PathBuf {
    let path = dir.join(name);
    let mut file = std::fs::File::create(&path).unwrap();
    let chunk = vec![0u8; 4096];
    loop {
        if leave > 0 && free_bytes(dir) <= leave + chunk.len() as u64 {
            break;
        }
        match file.write_all(&chunk) {
            Ok(()) => {}
            Err(e) if e.raw_os_error() == Some(28) => break,
            Err(e) => panic!("filling {}: {e}", dir.display()),
        }
    }
    file.sync_all().ok();
    path
}

/// Free bytes on the filesystem of `dir`, as `df` reports them.
fn free_bytes(dir: &Path) -> u64 {
    let out = Command::new("df")
        .args(["--output=avail", "-B1"])
        .arg(dir)
        .output()
        .unwrap();
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .nth(1)
        .unwrap()
        .trim()
        .parse()
        .unwrap()
}

#[test]
fn a_full_disk_refuses_puts_and_appends_and_they_resume_once_space_is_freed() {
    let (_tmpfs, state, labd) = on_a_small_disk("full-disk", &[]);
    let bytes = labd.bytes();
    let management = labd.bytes_management();
    let j = Journal::new(&labd);
    assert_eq!(storage_check(&bytes), None);

    // Before: a blob and a batch.
    let earlier = pseudo_random(64 << 10, 1);
    let earlier_name = bytes.put(&earlier);
    let space = j.child("disk");
    let first = batch(4, 16 << 10, 1);
    assert_eq!(j.append(&space, &first, "first").status, 201);
    assert_eq!(gauge(&management, "lab_blobs"), 1);
    assert_eq!(gauge(&management, "lab_blob_bytes"), 64 << 10);

    // Under the alarm, not yet full: the check fails, writes still land.
    let nearly = fill(&state, 512 << 10, "filler-1");
    let alarm = storage_check(&bytes).expect("the check passed with 512 KiB free");
    assert!(alarm.contains("--storage-alarm-free-bytes"), "{alarm}");
    assert!(gauge(&management, "lab_disk_free_bytes") <= 1 << 20);
    let small = pseudo_random(4 << 10, 2);
    let small_name = bytes.put(&small);

    // Full: a put and an append are refused, leave nothing behind, and
    // reads go on.
    let full = fill(&state, 0, "filler-2");
    let blob = pseudo_random(256 << 10, 3);
    let refused = bytes.post("/v1/blobs", None, &blob);
    assert_no_room(&refused, "filesystem is full");
    assert_eq!(labd.staging_files(), 0);
    assert!(bytes.stat(&[&support::name_of(&blob)]).is_empty());
    assert_eq!(gauge(&management, "lab_blobs"), 2);
    let second = batch(8, 32 << 10, 2);
    let refused = j.append(&space, &second, "second");
    assert_no_room(&refused, "filesystem is full");
    let read = bytes.get(&format!("/v1/blobs/{earlier_name}"));
    assert_eq!(read.status, 200);
    assert_eq!(read.body, earlier);
    assert_eq!(j.head(&space), 4);
    assert_eq!(j.facts(&space), first);

    // Space freed: the same writes succeed, without a restart.
    std::fs::remove_file(full).unwrap();
    std::fs::remove_file(nearly).unwrap();
    assert_eq!(storage_check(&bytes), None);
    assert_eq!(bytes.put(&blob), support::name_of(&blob));
    assert_eq!(bytes.get(&format!("/v1/blobs/{small_name}")).body, small);
    let appended = j.append(&space, &second, "second");
    assert_eq!(appended.status, 201, "{}", text(&appended));
    assert_eq!(appended.json()["replayed"], false);
    let mut all = first;
    all.extend(second);
    assert_eq!(j.facts(&space), all);
    assert_eq!(gauge(&management, "lab_blobs"), 3);
    assert_eq!(
        gauge(&management, "lab_blob_bytes"),
        (64 << 10) + (4 << 10) + (256 << 10)
    );
    drop(labd);
}

/// An append made through a call between services, whose group finds the
/// disk full at its commit, answers the caller the store's refusal and
/// appends nothing (design.md, "Key-value store" 9). The probe relays the
/// journal's status and body, not its `Retry-After`, so the refusal is
/// checked without it.
#[test]
fn an_append_called_by_another_service_on_a_full_disk_answers_the_refusal() {
    let probe = support::built_component("probe");
    let (_tmpfs, state, labd) = on_a_small_disk(
        "full-disk-call",
        &["--bytes-component", probe.to_str().unwrap()],
    );
    let j = Journal::new(&labd);
    let space = j.child("called");
    let first = batch(2, 4 << 10, 1);
    assert_eq!(j.append(&space, &first, "first").status, 201);
    let call = |facts: &[String], operation_id: &str| {
        let body = json!({ "space": space, "facts": facts, "operation_id": operation_id });
        labd.bytes().post(
            "/call?key=journal&value=/v1/append",
            None,
            body.to_string().as_bytes(),
        )
    };

    let full = fill(&state, 0, "filler");
    let second = batch(8, 32 << 10, 2);
    let refused = call(&second, "second");
    refused.assert_error(503, "unavailable");
    let message = refused.json()["message"].as_str().unwrap().to_string();
    assert!(message.contains("filesystem is full"), "{message}");
    assert_eq!(j.head(&space), 2);

    std::fs::remove_file(full).unwrap();
    let appended = call(&second, "second");
    assert_eq!(appended.status, 201, "{}", text(&appended));
    assert_eq!(appended.json()["replayed"], false);
    assert_eq!(j.head(&space), 10);
    drop(labd);
}

// ---------------------------------------------------------- measurement

/// What the store holds per fact, per receipt and per blob, for
/// `docs/operations.md` ("Capacity planning"): the map's high-water mark
/// before and after a known load, and the blob files' blocks on disk.
/// `cargo test -p labd --test black_box storage::measure -- --ignored --nocapture`
#[test]
#[ignore = "a measurement, not a check"]
fn measure_bytes_per_fact_receipt_and_blob() {
    const N: usize = 2000;
    let labd = Labd::start(
        "measure",
        &[
            "--services",
            "bytes,journal",
            "--storage-alarm-free-bytes",
            "0",
        ],
    );
    let management = labd.journal_management();
    let j = Journal::new(&labd);
    let used = || gauge(&management, "lab_kv_map_used_bytes");
    for (payload, per_batch) in [(100, 100), (1000, 100), (16 << 10, 10)] {
        let space = j.child(&format!("facts-{payload}"));
        let before = used();
        for b in 0..N / per_batch {
            let facts = batch(per_batch, payload, b as u64);
            let appended = j.append(&space, &facts, &format!("f-{payload}-{b}"));
            assert_eq!(appended.status, 201, "{}", text(&appended));
        }
        let grown = used() - before;
        println!(
            "facts of {payload} payload bytes ({} encoded), {per_batch} a batch: {} bytes each in the map",
            fact(&vec![0; payload]).len(),
            grown / N as u64
        );
    }
    // One fact a batch against the same facts in batches of 100: the
    // difference is what a batch (its receipt, boundary and head) adds.
    let space = j.child("receipts");
    let before = used();
    for b in 0..N {
        let appended = j.append(&space, &batch(1, 100, b as u64), &format!("r-{b}"));
        assert_eq!(appended.status, 201, "{}", text(&appended));
    }
    println!(
        "facts of 100 payload bytes, one a batch: {} bytes each in the map",
        (used() - before) / N as u64
    );

    let bytes = labd.bytes();
    let blobs = labd.blobs_dir().join("sha256");
    for size in [1usize, 4096, 65536, 1 << 20] {
        let name = bytes.put(&pseudo_random(size, size as u64));
        let hex = name.strip_prefix("sha256:").unwrap();
        let path = blobs.join(&hex[..2]).join(hex);
        let du = Command::new("du")
            .args(["-B1", "--apparent-size"])
            .arg(&path)
            .output()
            .unwrap();
        let blocks = Command::new("du")
            .args(["-B1"])
            .arg(&path)
            .output()
            .unwrap();
        let first = |out: std::process::Output| {
            String::from_utf8_lossy(&out.stdout)
                .split_whitespace()
                .next()
                .unwrap()
                .to_string()
        };
        println!(
            "a blob of {size} bytes: {} bytes apparent, {} bytes of blocks",
            first(du),
            first(blocks)
        );
    }
    println!(
        "map: {} used of {} (ceiling {})",
        used(),
        gauge(&management, "lab_kv_map_size_bytes"),
        gauge(&management, "lab_kv_map_ceiling_bytes")
    );
}
