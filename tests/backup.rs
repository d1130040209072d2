//! Backup, restore and the integrity check (`docs/operations.md`): a backup
//! taken while every service writes, restored into a fresh directory; the
//! incremental copy of blobs; the refusals of restore; the check on a clean
//! store and on copies with one corruption each.

use crate::support;
use crate::support::coord::{Coord, Req};
use crate::support::{eventually, labd_binary, pseudo_random, temp_dir, Client, Labd};
use serde_json::{json, Value};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::atomic::{AtomicBool, AtomicU8, Ordering};
use std::sync::Mutex;

/// Runs `labd` with `args` to its end.
fn run_labd(args: &[&str]) -> Output {
    Command::new(labd_binary())
        .args(args)
        .output()
        .expect("run labd")
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// `labd backup`; asserts success and answers its report.
fn backup(data_dir: &Path, to: &Path) -> Value {
    let out = run_labd(&[
        "backup",
        "--data-dir",
        data_dir.to_str().unwrap(),
        "--to",
        to.to_str().unwrap(),
    ]);
    assert!(out.status.success(), "backup: {}", text(&out.stderr));
    serde_json::from_slice(&out.stdout).expect("the backup reports JSON")
}

fn restore(from: &Path, data_dir: &Path) -> Output {
    run_labd(&[
        "restore",
        "--from",
        from.to_str().unwrap(),
        "--data-dir",
        data_dir.to_str().unwrap(),
    ])
}

fn check(data_dir: &Path, extra: &[&str]) -> Output {
    let mut args = vec!["check", "--data-dir", data_dir.to_str().unwrap()];
    args.extend(extra);
    run_labd(&args)
}

/// A canonical fact `[label p, text]`.
fn fact(text: &str) -> Vec<u8> {
    use lab_values::Value as V;
    lab_values::encode(&V::Tuple(vec![V::label("p"), V::text(text)]))
}

fn b64(bytes: &[u8]) -> String {
    use base64::Engine as _;
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

/// Blob files under a `blobs/sha256` tree.
fn blob_files(committed: &Path) -> Vec<PathBuf> {
    let Ok(fan_outs) = std::fs::read_dir(committed) else {
        return Vec::new();
    };
    let mut files: Vec<PathBuf> = fan_outs
        .flat_map(|d| std::fs::read_dir(d.unwrap().path()).unwrap())
        .map(|f| f.unwrap().path())
        .collect();
    files.sort();
    files
}

/// When a write happened relative to the backup.
const BEFORE: u8 = 0;
const DURING: u8 = 1;
const AFTER: u8 = 2;

/// One acknowledged write: what was sent, what came back, the phase
/// when it was sent and the phase when its answer had arrived.
struct Acked<T> {
    what: T,
    answer: Value,
    sent: u8,
    answered: u8,
}

/// A journal space of its own, created through the journal.
fn journal_space(journal: &Client, key: &str) -> Value {
    let describe = journal.get("/describe").json();
    let identity = &describe["identity"];
    let root = json!({ "root_id": identity["root_id"], "space_id": identity["root_space_id"] });
    let body = json!({ "parent": root, "key": key, "operation_id": format!("create-{key}") });
    let created = journal.post_json("/v1/create", &body.to_string());
    assert_eq!(created.status, 201, "{}", text(&created.body));
    let child = &created.json()["child"];
    json!({ "root_id": child["root_id"], "space_id": child["space_id"] })
}

fn publish_req(op: &str, leaf: &str, i: usize) -> Req {
    let body = json!({
        "operation_id": op,
        "path": support::coord::labels(&format!("projects/alpha/snapshots/{leaf}")),
        "profile": "lab/finding/1",
        "record": { "i": i },
    });
    Req::json("publish", &body)
}

#[test]
fn a_backup_under_load_restores_every_write_acknowledged_before_it() {
    let labd = Labd::start("backup-load", &[]);
    let coord = Coord::new(&labd);
    let admin = coord.admin();
    coord.project("alpha");
    let journal = labd.journal();
    let spaces: Vec<Value> = (0..2)
        .map(|i| journal_space(&journal, &format!("load-{i}")))
        .collect();

    let phase = AtomicU8::new(BEFORE);
    let stop = AtomicBool::new(false);
    let appends: Mutex<Vec<Acked<Value>>> = Mutex::default();
    let blobs: Mutex<Vec<Acked<Vec<u8>>>> = Mutex::default();
    let publishes: Mutex<Vec<Acked<Req>>> = Mutex::default();
    let backup_dir = temp_dir("backup-load-to");
    let counts = || {
        [
            appends.lock().unwrap().len(),
            blobs.lock().unwrap().len(),
            publishes.lock().unwrap().len(),
        ]
    };
    let report = std::thread::scope(|scope| {
        for (w, space) in spaces.iter().enumerate() {
            let (phase, stop, appends, journal) = (&phase, &stop, &appends, &journal);
            scope.spawn(move || {
                for i in 0.. {
                    if stop.load(Ordering::SeqCst) {
                        break;
                    }
                    let facts: Vec<String> = (0..1 + i % 3)
                        .map(|k| b64(&fact(&format!("w{w}-{i}-{k}"))))
                        .collect();
                    let body = json!({ "space": space, "facts": facts, "operation_id": format!("a-{w}-{i}") });
                    let sent = phase.load(Ordering::SeqCst);
                    let response = journal.post_json("/v1/append", &body.to_string());
                    let answered = phase.load(Ordering::SeqCst);
                    assert_eq!(response.status, 201, "{}", text(&response.body));
                    appends.lock().unwrap().push(Acked { what: body, answer: response.json(), sent, answered });
                }
            });
        }
        {
            let (phase, stop, blobs, bytes) = (&phase, &stop, &blobs, labd.bytes());
            scope.spawn(move || {
                for i in 0.. {
                    if stop.load(Ordering::SeqCst) {
                        break;
                    }
                    let data = pseudo_random(1000 + i * 37, i as u64);
                    let sent = phase.load(Ordering::SeqCst);
                    let name = bytes.put(&data);
                    let answered = phase.load(Ordering::SeqCst);
                    blobs.lock().unwrap().push(Acked {
                        what: data,
                        answer: json!(name),
                        sent,
                        answered,
                    });
                }
            });
        }
        {
            let (phase, stop, publishes, coord, admin) =
                (&phase, &stop, &publishes, &coord, &admin);
            scope.spawn(move || {
                for i in 0.. {
                    if stop.load(Ordering::SeqCst) {
                        break;
                    }
                    let req = publish_req(&format!("p-{i}"), &format!("s{}", i % 2), i);
                    let sent = phase.load(Ordering::SeqCst);
                    let response = coord.send(admin, &req);
                    let answered = phase.load(Ordering::SeqCst);
                    assert_eq!(response.status, 201, "{}", text(&response.body));
                    publishes.lock().unwrap().push(Acked {
                        what: req,
                        answer: response.json(),
                        sent,
                        answered,
                    });
                }
            });
        }
        eventually("writes of every kind before the backup", || {
            counts().iter().all(|&n| n >= 3)
        });
        phase.store(DURING, Ordering::SeqCst);
        let report = backup(&labd.data_dir.join("state"), &backup_dir);
        phase.store(AFTER, Ordering::SeqCst);
        let at_end = counts();
        eventually("writes of every kind after the backup", || {
            counts().iter().zip(at_end).all(|(&n, end)| n >= end + 2)
        });
        stop.store(true, Ordering::SeqCst);
        report
    });
    let appends = appends.into_inner().unwrap();
    let blobs = blobs.into_inner().unwrap();
    let publishes = publishes.into_inner().unwrap();
    let phases = |acks: &[(u8, u8)]| {
        [BEFORE, DURING, AFTER].map(|p| acks.iter().filter(|(_, a)| *a == p).count())
    };
    eprintln!(
        "answered before, during and after the backup: appends {:?}, blobs {:?}, publishes {:?}; {report}",
        phases(&appends.iter().map(|a| (a.sent, a.answered)).collect::<Vec<_>>()),
        phases(&blobs.iter().map(|a| (a.sent, a.answered)).collect::<Vec<_>>()),
        phases(&publishes.iter().map(|a| (a.sent, a.answered)).collect::<Vec<_>>()),
    );
    assert!(
        report["blobs"].as_u64().unwrap()
            >= blobs.iter().filter(|b| b.answered == BEFORE).count() as u64
    );
    assert_eq!(
        report["copied"], report["blobs"],
        "a first backup copies every blob"
    );

    let identity_before = journal.get("/livez").json()["identity"].clone();
    let coord_identity_before = coord.client.get("/livez").json()["identity"].clone();
    drop(labd);

    let restored_dir = temp_dir("backup-load-restored");
    let out = restore(&backup_dir, &restored_dir.join("state"));
    assert!(out.status.success(), "restore: {}", text(&out.stderr));
    let restored = Labd::start_in(restored_dir, Vec::new());
    let journal = restored.journal();
    assert_eq!(journal.get("/livez").json()["identity"], identity_before);
    let coord = Coord::new(&restored);
    assert_eq!(
        coord.client.get("/livez").json()["identity"],
        coord_identity_before
    );

    // Journal: what was acknowledged before the backup is there, batch by
    // batch, and its replay answers the original result; what was sent
    // after the backup ended is not.
    for space in &spaces {
        let head = journal
            .post_json("/v1/head", &json!({ "space": space }).to_string())
            .json()["cutoff"]
            .as_u64()
            .unwrap();
        let mine = appends.iter().filter(|a| a.what["space"] == *space);
        let mut boundary = head == 0;
        for acked in mine {
            let (first, last) = (
                acked.answer["first"].as_u64().unwrap(),
                acked.answer["last"].as_u64().unwrap(),
            );
            boundary |= last == head;
            if acked.sent == AFTER {
                assert!(first > head, "an append sent after the backup is in it");
            }
            if acked.answered != BEFORE {
                continue;
            }
            assert!(last <= head);
            let replay = journal.post_json("/v1/append", &acked.what.to_string());
            assert_eq!(replay.status, 200, "{}", text(&replay.body));
            let mut expected = acked.answer.clone();
            expected["replayed"] = json!(true);
            assert_eq!(replay.json(), expected);
            let read = journal.post_json(
                "/v1/read",
                &json!({ "space": space, "after": first - 1, "through": last }).to_string(),
            );
            assert_eq!(read.status, 200, "{}", text(&read.body));
            let entries = read.json()["entries"].as_array().unwrap().clone();
            let facts: Vec<Value> = entries.iter().map(|e| e["fact"].clone()).collect();
            assert_eq!(json!(facts), acked.what["facts"]);
            for entry in &entries {
                assert_eq!(entry["batch"], json!({ "first": first, "last": last }));
                assert_eq!(entry["origin"], "append");
            }
        }
        assert!(
            boundary,
            "the restored head {head} is not the end of a batch"
        );
    }
    assert!(appends.iter().any(|a| a.answered == BEFORE));
    assert!(appends.iter().any(|a| a.sent == AFTER));

    // Blobs: every one acknowledged before the backup reads back whole.
    let bytes = restored.bytes();
    let before: Vec<_> = blobs.iter().filter(|b| b.answered == BEFORE).collect();
    assert!(!before.is_empty());
    for acked in before {
        let name = acked.answer.as_str().unwrap();
        let read = bytes.get(&format!("/v1/blobs/{name}"));
        assert_eq!(read.status, 200);
        assert!(read.body == acked.what, "blob {name} differs");
    }

    // Coordination: each publish acknowledged before the backup replays
    // (a fresh proof, the same operation) to the original record.
    let before: Vec<_> = publishes.iter().filter(|p| p.answered == BEFORE).collect();
    assert!(!before.is_empty());
    for acked in before {
        let replay = coord.send(&admin, &acked.what);
        assert_eq!(replay.status, 200, "{}", text(&replay.body));
        let replay = replay.json();
        assert_eq!(replay["replayed"], true);
        // A replay creates nothing (HTTP.md: `space_created` only when new).
        let mut expected = acked.answer.clone();
        expected["replayed"] = json!(true);
        expected["space_created"] = json!(false);
        assert_eq!(replay, expected);
    }
    let data_dir = restored.kill();
    let out = check(&data_dir.join("state"), &[]);
    assert!(
        out.status.success(),
        "check of the restored store: {}",
        text(&out.stdout)
    );
    std::fs::remove_dir_all(data_dir).unwrap();
    std::fs::remove_dir_all(backup_dir).unwrap();
}

#[test]
fn a_second_backup_copies_only_the_blobs_the_first_lacks() {
    let labd = Labd::start("backup-incremental", &["--services", "bytes,journal"]);
    let state = labd.data_dir.join("state");
    let to = temp_dir("backup-incremental-to");
    let bytes = labd.bytes();
    for i in 0..3 {
        bytes.put(&pseudo_random(4096, i));
    }
    let first = backup(&state, &to);
    assert_eq!(first["blobs"], 3);
    assert_eq!(first["copied"], 3);
    let files = blob_files(&to.join("blobs/sha256"));
    assert_eq!(files.len(), 3);
    let inodes = |files: &[PathBuf]| -> Vec<u64> {
        use std::os::unix::fs::MetadataExt;
        files
            .iter()
            .map(|f| std::fs::metadata(f).unwrap().ino())
            .collect()
    };
    let first_inodes = inodes(&files);

    let new: Vec<String> = (10..12)
        .map(|i| bytes.put(&pseudo_random(8192, i)))
        .collect();
    let second = backup(&state, &to);
    assert_eq!(second["blobs"], 5);
    assert_eq!(second["copied"], 2);
    assert_eq!(second["copied_bytes"], 2 * 8192);
    let after = blob_files(&to.join("blobs/sha256"));
    assert_eq!(after.len(), 5);
    let kept: Vec<PathBuf> = after
        .iter()
        .filter(|f| files.contains(f))
        .cloned()
        .collect();
    assert_eq!(
        inodes(&kept),
        first_inodes,
        "a blob the backup held was copied again"
    );
    for name in &new {
        let hex = name.strip_prefix("sha256:").unwrap();
        assert!(after
            .iter()
            .any(|f| f.ends_with(format!("{}/{hex}", &hex[..2]))));
    }
    assert_eq!(backup(&state, &to)["copied"], 0);
    // One snapshot of the store is kept: the manifest's.
    assert_eq!(std::fs::read_dir(to.join("kv")).unwrap().count(), 1);

    // The restore refuses a target that holds anything, and changes it not.
    let occupied = temp_dir("backup-incremental-occupied");
    std::fs::write(occupied.join("keep"), b"x").unwrap();
    let out = restore(&to, &occupied);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        text(&out.stderr).contains("is not empty"),
        "{}",
        text(&out.stderr)
    );
    assert_eq!(std::fs::read_dir(&occupied).unwrap().count(), 1);

    // A backup whose blob was damaged is refused whole: no target appears.
    let damaged = &after[0];
    let mut content = std::fs::read(damaged).unwrap();
    content[7] ^= 0x10;
    std::fs::write(damaged, content).unwrap();
    let target = temp_dir("backup-incremental-damaged").join("state");
    let out = restore(&to, &target);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        text(&out.stderr).contains("does not hold the blob"),
        "{}",
        text(&out.stderr)
    );
    assert!(!target.exists());
    assert_eq!(
        std::fs::read_dir(target.parent().unwrap()).unwrap().count(),
        0,
        "a refused restore left its partial directory"
    );

    // A manifest naming a file outside the backup is refused.
    let manifest_path = to.join("manifest.json");
    let genuine = std::fs::read(&manifest_path).unwrap();
    let mut hostile: Value = serde_json::from_slice(&genuine).unwrap();
    hostile["files"] = json!([{ "path": "../../escape", "size": 1, "sha256": "00".repeat(32) }]);
    std::fs::write(&manifest_path, hostile.to_string()).unwrap();
    let target = temp_dir("backup-hostile").join("state");
    let out = restore(&to, &target);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        text(&out.stderr).contains("leaves the backup"),
        "{}",
        text(&out.stderr)
    );
    assert!(!target.exists());
    std::fs::write(&manifest_path, genuine).unwrap();

    // A second backup into a directory another backup is writing.
    let held = std::fs::File::create(to.join("lock")).unwrap();
    held.try_lock().unwrap();
    let out = run_labd(&[
        "backup",
        "--data-dir",
        state.to_str().unwrap(),
        "--to",
        to.to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        text(&out.stderr).contains("another backup is writing"),
        "{}",
        text(&out.stderr)
    );
    drop(held);

    // Not a backup, not a data directory.
    let out = restore(&occupied, &temp_dir("backup-none").join("state"));
    assert_eq!(out.status.code(), Some(2));
    assert!(
        text(&out.stderr).contains("holds no backup"),
        "{}",
        text(&out.stderr)
    );
    let out = run_labd(&[
        "backup",
        "--data-dir",
        occupied.to_str().unwrap(),
        "--to",
        to.to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        text(&out.stderr).contains("no key-value store"),
        "{}",
        text(&out.stderr)
    );
    drop(labd);
    for dir in [to, occupied] {
        std::fs::remove_dir_all(dir).unwrap();
    }
}

/// `cp -a` of a data directory.
fn copy_of(source: &Path, name: &str) -> PathBuf {
    let copy = temp_dir(name).join("state");
    let status = Command::new("cp")
        .arg("-a")
        .arg(source)
        .arg(&copy)
        .status()
        .unwrap();
    assert!(status.success());
    copy
}

fn stdout_of(out: &Output) -> String {
    text(&out.stdout)
}

#[test]
fn the_check_passes_a_clean_store_and_finds_a_flipped_bit_a_deleted_entry_and_a_wrong_cache() {
    let labd = Labd::start("check", &[]);
    let coord = Coord::new(&labd);
    coord.project("alpha");
    let journal = labd.journal();
    let space = journal_space(&journal, "checked");
    for i in 0..4 {
        let facts: Vec<String> = (0..3).map(|k| b64(&fact(&format!("{i}-{k}")))).collect();
        let body = json!({ "space": space, "facts": facts, "operation_id": format!("c-{i}") });
        assert_eq!(
            journal.post_json("/v1/append", &body.to_string()).status,
            201
        );
    }
    let blob = labd.bytes().put(&pseudo_random(5000, 3));

    // A serving labd's directory is refused, and left alone.
    let state = labd.data_dir.join("state");
    let out = check(&state, &[]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        text(&out.stderr).contains("in use by another labd"),
        "{}",
        text(&out.stderr)
    );

    let dir = labd.kill();
    let state = dir.join("state");
    let clean = check(&state, &[]);
    assert_eq!(clean.status.code(), Some(0), "{}", stdout_of(&clean));
    assert!(
        stdout_of(&clean).contains(": 0 problem(s)"),
        "{}",
        stdout_of(&clean)
    );
    assert!(!stdout_of(&clean).contains("problem: "));

    // One bit of one blob file.
    let flipped = copy_of(&state, "check-flipped");
    let hex = blob.strip_prefix("sha256:").unwrap();
    let file = flipped.join("blobs/sha256").join(&hex[..2]).join(hex);
    let mut content = std::fs::read(&file).unwrap();
    content[100] ^= 0x01;
    std::fs::write(&file, content).unwrap();
    let report = problems_of(&flipped);
    assert!(
        report.contains(&format!("problem: blob {blob}")),
        "{report}"
    );
    assert_eq!(report.matches("problem: ").count(), 1, "{report}");

    // One journal entry: position 5, inside the batch 4..6.
    let deleted = copy_of(&state, "check-deleted");
    let space_id = space["space_id"].as_str().unwrap();
    edit_store(&deleted, "journal", |txn, db| {
        let id = hex::decode(space_id.strip_prefix("spc_").unwrap()).unwrap();
        let key = [&b"entry\0"[..], &id, &5u64.to_be_bytes()].concat();
        assert!(
            db.delete(txn, &key).unwrap(),
            "the entry to delete is not stored"
        );
    });
    let report = problems_of(&deleted);
    assert!(
        report.contains(&format!(
            "problem: journal: {space_id} is missing positions 5..5"
        )),
        "{report}"
    );

    // The coordination service's cache of a path, pointed at another space.
    let cache = copy_of(&state, "check-cache");
    edit_store(&cache, "coord", |txn, db| {
        let rows: Vec<(Vec<u8>, Vec<u8>)> = db
            .prefix_iter(txn, b"resolved\0")
            .unwrap()
            .map(|r| r.map(|(k, v)| (k.to_vec(), v.to_vec())).unwrap())
            .collect();
        assert!(!rows.is_empty(), "the coordination service cached no path");
        let (key, value) = &rows[0];
        let mut cached: Value = serde_json::from_slice(value).unwrap();
        cached["space_id"] = space["space_id"].clone();
        db.put(txn, key, &serde_json::to_vec(&cached).unwrap())
            .unwrap();
    });
    let report = problems_of(&cache);
    assert!(
        report.contains("problem: coord: the resolved path"),
        "{report}"
    );
    assert_eq!(report.matches("problem: ").count(), 1, "{report}");

    // Orphaned staging files are told of, and removed only when asked.
    let orphan = state.join("blobs/staging/cut-short.part");
    std::fs::write(&orphan, b"partial").unwrap();
    let out = check(&state, &[]);
    assert_eq!(out.status.code(), Some(0), "{}", stdout_of(&out));
    assert!(
        stdout_of(&out).contains("note: orphaned staging file"),
        "{}",
        stdout_of(&out)
    );
    assert!(orphan.exists());
    let out = check(&state, &["--repair"]);
    assert_eq!(out.status.code(), Some(0), "{}", stdout_of(&out));
    assert!(stdout_of(&out).contains("note: removed the orphaned staging file"));
    assert!(!orphan.exists());
    for dir in [
        dir,
        flipped.parent().unwrap().to_path_buf(),
        deleted.parent().unwrap().to_path_buf(),
        cache.parent().unwrap().to_path_buf(),
    ] {
        std::fs::remove_dir_all(dir).unwrap();
    }
}

#[test]
fn the_argument_index_is_checked_against_the_declared_pairs_and_kept_by_the_store() {
    use sha2::Digest as _;
    let label = |name: &str| lab_values::encode(&lab_values::Value::label(name));
    let declared = format!("{}:0", b64(&label("p")));
    let labd = Labd::start(
        "check-arguments",
        &["--journal-argument-index", declared.as_str()],
    );
    let journal = labd.journal();
    let space = journal_space(&journal, "indexed");
    let append = |journal: &Client, facts: Vec<String>, operation_id: String| {
        let body = json!({ "space": space, "facts": facts, "operation_id": operation_id });
        let answer = journal.post_json("/v1/append", &body.to_string());
        assert_eq!(answer.status, 201, "{}", text(&answer.body));
    };
    for i in 0..4 {
        let facts = (0..3).map(|k| b64(&fact(&format!("{i}-{k}")))).collect();
        append(&journal, facts, format!("a-{i}"));
    }
    let state = labd.kill().join("state");
    // Started again with another setting, the store keeps its own list:
    // the new entry (13) has its row, and the check finds nothing amiss.
    let labd = Labd::start_in(
        state.parent().unwrap().to_path_buf(),
        vec!["--journal-argument-index".into(), String::new()],
    );
    append(&labd.journal(), vec![b64(&fact("1-1"))], "a-again".into());
    let dir = labd.kill();
    let clean = check(&state, &[]);
    assert_eq!(clean.status.code(), Some(0), "{}", stdout_of(&clean));
    let report = stdout_of(&clean);
    assert!(!report.contains("before the argument index"), "{report}");
    let space_id = space["space_id"].as_str().unwrap();
    let id = hex::decode(space_id.strip_prefix("spc_").unwrap()).unwrap();
    let argument_key = |predicate: &str, value: &str, position: u64| {
        let value = lab_values::encode(&lab_values::Value::text(value));
        [
            &b"argument\0"[..],
            &id,
            &sha2::Sha256::digest(label(predicate))[..16],
            &0u16.to_be_bytes(),
            &sha2::Sha256::digest(&value)[..16],
            &position.to_be_bytes(),
        ]
        .concat()
    };

    // The row of entry 5's argument ("1-1") moved to position 6, and a row
    // of a pair the store does not declare.
    let edited = copy_of(&state, "check-argument-edited");
    edit_store(&edited, "journal", |txn, db| {
        assert!(db
            .get(txn, &argument_key("p", "1-1", 13))
            .unwrap()
            .is_some());
        assert!(
            db.delete(txn, &argument_key("p", "1-1", 5)).unwrap(),
            "the row to move is not stored"
        );
        db.put(txn, &argument_key("p", "1-1", 6), b"").unwrap();
        db.put(txn, &argument_key("q", "1-2", 6), b"").unwrap();
    });
    let report = problems_of(&edited);
    assert!(
        report.contains(&format!(
            "problem: journal: the entry {space_id}@5 has no argument index row for argument 0"
        )),
        "{report}"
    );
    assert!(
        report.contains("names no entry with that argument"),
        "{report}"
    );
    assert!(
        report.contains("is for a pair the store does not declare"),
        "{report}"
    );
    assert_eq!(report.matches("problem: ").count(), 3, "{report}");

    // A store from before the argument index: no list, no rows.
    let old = copy_of(&state, "check-argument-old");
    edit_store(&old, "journal", |txn, db| {
        assert!(db.delete(txn, b"meta\0argument-index").unwrap());
        let rows: Vec<Vec<u8>> = db
            .prefix_iter(txn, b"argument\0")
            .unwrap()
            .map(|r| r.unwrap().0.to_vec())
            .collect();
        let ours = rows.iter().filter(|k| k[9..25] == id[..]).count();
        assert_eq!(ours, 13, "one row per appended fact's one argument");
        for key in rows {
            db.delete(txn, &key).unwrap();
        }
    });
    let out = check(&old, &[]);
    assert_eq!(out.status.code(), Some(0), "{}", stdout_of(&out));
    assert!(
        stdout_of(&out)
            .contains("note: journal: the store was provisioned before the argument index"),
        "{}",
        stdout_of(&out)
    );
    // Served, under the default setting: the filter finds the old entries
    // and a new one, which has no row either.
    let labd = Labd::start_in(old.parent().unwrap().to_path_buf(), Vec::new());
    let journal = labd.journal();
    append(&journal, vec![b64(&fact("1-1"))], "a-new".into());
    let equals = b64(&lab_values::encode(&lab_values::Value::text("1-1")));
    let read = json!({ "space": space, "filter": {
        "predicate": b64(&label("p")),
        "arguments": [{ "index": 0, "equals": equals }],
    } });
    let page = journal.post_json("/v1/read", &read.to_string());
    assert_eq!(page.status, 200, "{}", text(&page.body));
    let positions: Vec<u64> = page.json()["entries"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["ref"]["position"].as_u64().unwrap())
        .collect();
    assert_eq!(positions, [5, 13, 14]);
    labd.kill();
    let out = check(&old, &[]);
    assert_eq!(out.status.code(), Some(0), "{}", stdout_of(&out));
    for dir in [
        dir,
        edited.parent().unwrap().to_path_buf(),
        old.parent().unwrap().to_path_buf(),
    ] {
        std::fs::remove_dir_all(dir).unwrap();
    }
}

/// The report of `labd check` on a store with problems (exit 1).
fn problems_of(data_dir: &Path) -> String {
    let out = check(data_dir, &[]);
    let report = stdout_of(&out);
    assert_eq!(out.status.code(), Some(1), "{report}");
    report
}

type Table = heed::Database<heed::types::Bytes, heed::types::Bytes>;

/// Changes namespace `namespace` of the (stopped) store under `data_dir`
/// in one committed transaction, as a corruption would.
fn edit_store(data_dir: &Path, namespace: &str, edit: impl FnOnce(&mut heed::RwTxn, Table)) {
    // SAFETY: no other process has the copy open.
    let env = unsafe {
        heed::EnvOpenOptions::new()
            .max_dbs(8)
            .open(data_dir.join("lmdb"))
    }
    .unwrap();
    let mut txn = env.write_txn().unwrap();
    let db: Table = env.open_database(&txn, Some(namespace)).unwrap().unwrap();
    edit(&mut txn, db);
    txn.commit().unwrap();
}
