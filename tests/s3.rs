//! Blobs on S3 (`--blobs s3://BUCKET`), against an S3 server each test
//! starts itself (support/s3.rs): what the bytes suite cannot see from
//! the wire alone (`LAB_TEST_BLOBS=s3` runs that suite on S3 too).

use crate::support;
use crate::support::s3::S3Server;
use crate::support::{eventually, name_of, pseudo_random, refused_start, temp_dir, Labd};
use std::io::{Read, Write};
use std::path::PathBuf;
use std::time::Duration;

/// A labd whose blobs are in `server`'s bucket, with `args` added.
fn labd_on(name: &str, server: &S3Server, args: &[&str]) -> Labd {
    let mut all = vec!["--blobs".to_string(), server.blobs_setting()];
    all.extend(args.iter().map(|a| a.to_string()));
    Labd::start_in_env(temp_dir(name), all, server.env())
}

fn server(name: &str) -> (S3Server, PathBuf) {
    let dir = temp_dir(name);
    (support::s3::start(&dir.join("s3")), dir)
}

fn object_of(name: &str) -> String {
    format!("sha256/{}", name.strip_prefix("sha256:").unwrap())
}

#[test]
fn small_and_multipart_blobs_are_published_whole_under_their_names() {
    let (s3, _dir) = server("s3-publish");
    let labd = labd_on("s3-publish-labd", &s3, &[]);
    let client = labd.bytes();
    let small = pseudo_random(100_000, 1);
    // Past one part (8 MiB): a multipart upload, copied under its name.
    let large = pseudo_random(19 << 20, 2);
    for bytes in [&small, &large] {
        let name = client.put(bytes);
        assert_eq!(name, name_of(bytes));
        assert!(std::fs::read(s3.object_file(&object_of(&name))).unwrap() == **bytes);
        let read = client.get(&format!("/v1/blobs/{name}"));
        assert_eq!(read.status, 200);
        assert!(read.body == **bytes);
        // Equal bytes again: the same name, the object left as it is.
        assert_eq!(client.put(bytes), name);
    }
    assert_eq!(s3.objects_under("sha256"), 2);
    eventually("no staging object is left", || {
        s3.objects_under("staging") == 0 && s3.pending_parts() == 0
    });
}

#[test]
fn ranged_reads_answer_exactly_their_range() {
    let (s3, _dir) = server("s3-ranges");
    let labd = labd_on("s3-ranges-labd", &s3, &[]);
    let client = labd.bytes();
    let bytes = pseudo_random(3 << 20, 3);
    let name = client.put(&bytes);
    for (offset, length) in [(0, 1), (1, 1000), (1 << 20, 1 << 20), ((3 << 20) - 5, 100)] {
        let read = client.get(&format!("/v1/blobs/{name}?offset={offset}&length={length}"));
        assert_eq!(read.status, 200);
        let end = (offset + length).min(bytes.len());
        assert!(read.body == bytes[offset..end], "{offset}+{length}");
    }
    let past = client.get(&format!("/v1/blobs/{name}?offset={}", 4 << 20));
    assert_eq!(past.status, 200);
    assert!(past.body.is_empty());
}

#[test]
fn an_abandoned_multipart_upload_publishes_nothing_and_leaves_nothing() {
    let (s3, _dir) = server("s3-abandon");
    let labd = labd_on("s3-abandon-labd", &s3, &[]);
    let client = labd.bytes();
    let bytes = pseudo_random(20 << 20, 4);
    let mut stream = client.connect();
    let head = format!(
        "POST /v1/blobs HTTP/1.1\r\nhost: t\r\ncontent-length: {}\r\n\r\n",
        bytes.len()
    );
    stream.write_all(head.as_bytes()).unwrap();
    stream.write_all(&bytes[..12 << 20]).unwrap();
    eventually("a part is uploaded", || s3.pending_parts() >= 1);
    drop(stream);
    eventually("the upload is aborted", || s3.pending_parts() == 0);
    assert_eq!(s3.objects_under("staging"), 0);
    assert_eq!(s3.objects_under("sha256"), 0);
    assert!(client.stat(&[&name_of(&bytes)]).is_empty());
}

#[test]
fn a_blob_past_the_cap_mid_stream_publishes_nothing_and_leaves_nothing() {
    let (s3, _dir) = server("s3-cap");
    let cap = (10 << 20).to_string();
    let labd = labd_on("s3-cap-labd", &s3, &["--blob-cap", &cap]);
    let client = labd.bytes();
    // Chunked, so the cap is found only once a part was sent.
    let bytes = pseudo_random(12 << 20, 5);
    let mut stream = client.connect();
    stream
        .write_all(b"POST /v1/blobs HTTP/1.1\r\nhost: t\r\ntransfer-encoding: chunked\r\n\r\n")
        .unwrap();
    for chunk in bytes.chunks(1 << 20) {
        let framed = [format!("{:x}\r\n", chunk.len()).as_bytes(), chunk, b"\r\n"].concat();
        if stream.write_all(&framed).is_err() {
            break;
        }
    }
    let _ = stream.write_all(b"0\r\n\r\n");
    let response = support::read_response(&mut stream);
    response.assert_error(413, "too_large");
    eventually("the upload is aborted", || s3.pending_parts() == 0);
    assert_eq!(s3.objects_under("staging"), 0);
    assert_eq!(s3.objects_under("sha256"), 0);
}

#[test]
fn writes_past_the_upload_memory_are_refused_with_503_until_it_is_released() {
    let (s3, _dir) = server("s3-memory");
    // The least memory there is: one part, which one large write fills.
    let labd = labd_on(
        "s3-memory-labd",
        &s3,
        &["--blob-upload-memory-mib", "8", "--instance-wait-ms", "300"],
    );
    let client = labd.bytes();
    let management = labd.bytes_management();
    let charged = || {
        management
            .metric("lab_blob_upload_memory_charged_bytes")
            .unwrap()
    };
    assert_eq!(
        management.metric("lab_blob_upload_memory_bytes"),
        Some(8 << 20)
    );
    assert_eq!(charged(), 0);

    let large = pseudo_random(9 << 20, 6);
    let mut holder = client.connect();
    let head = format!(
        "POST /v1/blobs HTTP/1.1\r\nhost: t\r\ncontent-length: {}\r\n\r\n",
        large.len()
    );
    holder.write_all(head.as_bytes()).unwrap();
    // Just short of a part: its buffer has grown to the whole part.
    let held = (8 << 20) - 4096;
    holder.write_all(&large[..held]).unwrap();
    eventually("the write holds a part's memory", || charged() == 8 << 20);

    let small = b"a small blob, refused while the memory is held";
    let refused = client.post("/v1/blobs", None, small);
    refused.assert_error(503, "unavailable");
    assert!(refused.header("retry-after").is_some());
    assert!(String::from_utf8_lossy(&refused.body).contains("--blob-upload-memory-mib"));
    assert!(client.stat(&[&name_of(small)]).is_empty());

    // The large write goes on (its first part sent, its memory released)
    // and ends published; then there is room again.
    holder.write_all(&large[held..]).unwrap();
    let response = support::read_response(&mut holder);
    assert_eq!(
        response.status,
        200,
        "{}",
        String::from_utf8_lossy(&response.body)
    );
    assert_eq!(client.stat(&[&name_of(&large)]).len(), 1);
    eventually("every write released its memory", || charged() == 0);
    assert_eq!(client.put(small), name_of(small));
    assert_eq!(s3.objects_under("sha256"), 2);
}

/// Reads a whole response to the connection's end: its head and as much of
/// its body as came.
fn get_raw(client: &support::Client, target: &str) -> (String, Vec<u8>) {
    let mut stream = client.connect();
    stream
        .write_all(
            format!("GET {target} HTTP/1.1\r\nhost: t\r\nconnection: close\r\n\r\n").as_bytes(),
        )
        .unwrap();
    let mut all = Vec::new();
    let _ = stream.read_to_end(&mut all);
    let split = all.windows(4).position(|w| w == b"\r\n\r\n").unwrap() + 4;
    let body = all.split_off(split);
    (String::from_utf8(all).unwrap(), body)
}

#[test]
fn an_object_altered_in_the_bucket_is_refused_on_a_whole_read() {
    let (s3, _dir) = server("s3-altered");
    let labd = labd_on("s3-altered-labd", &s3, &[]);
    let client = labd.bytes();
    let bytes = pseudo_random(1 << 20, 6);
    let name = client.put(&bytes);
    let (head, body) = get_raw(&client, &format!("/v1/blobs/{name}"));
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    assert!(body == bytes);
    // The same length, one byte changed, behind the host's back.
    let mut altered = bytes.clone();
    altered[700_000] ^= 1;
    std::fs::write(s3.object_file(&object_of(&name)), &altered).unwrap();
    let (head, body) = get_raw(&client, &format!("/v1/blobs/{name}"));
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    assert!(
        body.len() < bytes.len(),
        "the altered blob was served whole ({} bytes)",
        body.len()
    );
    assert!(body[..] == altered[..body.len()]);
}

#[test]
fn two_hosts_on_one_bucket_read_each_others_blobs() {
    let (s3, _dir) = server("s3-two");
    let first = labd_on("s3-two-a", &s3, &[]);
    let second = labd_on("s3-two-b", &s3, &[]);
    let a = first.bytes().put(b"written by the first host");
    let b = second.bytes().put(&pseudo_random(9 << 20, 7));
    let read = second.bytes().get(&format!("/v1/blobs/{a}"));
    assert_eq!(read.status, 200);
    assert_eq!(read.body, b"written by the first host");
    assert_eq!(first.bytes().stat(&[&b])[&b], 9 << 20);
    // A second host's start leaves the first one's blobs and writes alone.
    drop(second);
    let _third = labd_on("s3-two-c", &s3, &[]);
    assert_eq!(first.bytes().get(&format!("/v1/blobs/{a}")).status, 200);
}

#[test]
fn a_stopped_server_refuses_writes_and_reads_with_503_and_service_resumes() {
    let (mut s3, _dir) = server("s3-down");
    let labd = labd_on("s3-down-labd", &s3, &[]);
    let client = labd.bytes();
    let before = client.put(b"before the outage");
    s3.stop();
    let started = std::time::Instant::now();
    let refused = client.post("/v1/blobs", None, b"during the outage");
    refused.assert_error(503, "unavailable");
    assert!(refused.header("retry-after").is_some());
    assert!(
        started.elapsed() < Duration::from_secs(20),
        "the refusal took {:?}",
        started.elapsed()
    );
    // Reads too: the bucket cannot answer now, which is no server fault.
    for read in [
        client.get(&format!("/v1/blobs/{before}")),
        client.post_json("/v1/stat", &format!(r#"{{"names":["{before}"]}}"#)),
    ] {
        read.assert_error(503, "unavailable");
        assert!(read.header("retry-after").is_some());
    }
    let failing = labd.bytes_management().get("/healthz");
    assert_eq!(failing.status, 503);
    s3.restart().unwrap();
    let during = client.put(b"during the outage");
    assert_eq!(during, name_of(b"during the outage"));
    let read = client.get(&format!("/v1/blobs/{before}"));
    assert_eq!(read.status, 200);
    assert_eq!(read.body, b"before the outage");
    assert_eq!(labd.bytes_management().get("/healthz").status, 200);
}

#[test]
fn bad_blobs_settings_stop_the_start_naming_the_setting() {
    for bad in [
        "s3://",
        "s3://Upper",
        "s3://lab/prefix",
        "gs://lab-blobs",
        "disk",
    ] {
        let stderr = refused_start("s3-bad", &["--blobs".into(), bad.into()]);
        assert!(stderr.contains("--blobs"), "{bad}: {stderr}");
    }
}

#[test]
fn an_unreachable_bucket_stops_the_start_naming_the_setting() {
    let (mut s3, dir) = server("s3-unreachable");
    s3.stop();
    let mut child = std::process::Command::new(support::labd_binary())
        .arg("--data-dir")
        .arg(dir.join("state"))
        .args(["--log", "error", "--blobs", &s3.blobs_setting()])
        .args(support::LOOPBACK_LISTENERS)
        .envs(s3.env())
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let status = child.wait().unwrap();
    let mut stderr = String::new();
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut stderr)
        .unwrap();
    assert!(!status.success());
    assert!(stderr.contains("--blobs s3://lab-blobs"), "{stderr}");
}
