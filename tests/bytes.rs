//! The bytes service over the wire: every route and refusal of its spec.

use crate::crash::{
    crash_under_load, post_bytes, random_threshold, until_one_in_flight, Crash, Crashable,
};
use crate::support;
use crate::support::{eventually, name_of, pseudo_random, read_response, Client, Labd};
use crate::swap::{across_reload, HalfSent, SwapFiles};
use std::io::Write;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;

const CONTRACT: &str = "2026-09-10";

fn assert_identity(response: &support::Response) {
    assert_eq!(response.header("lab-service"), Some("bytes"));
    assert_eq!(response.header("lab-contract"), Some(CONTRACT));
}

#[test]
fn put_then_get_whole_and_ranges() {
    let labd = Labd::start("ranges", &[]);
    let client = labd.bytes();
    let bytes = b"0123456789";
    let name = client.put(bytes);
    assert_eq!(name, name_of(bytes));

    let whole = client.get(&format!("/v1/blobs/{name}"));
    assert_eq!(whole.status, 200);
    assert_identity(&whole);
    assert_eq!(
        whole.header("content-type"),
        Some("application/octet-stream")
    );
    assert_eq!(whole.header("content-length"), Some("10"));
    assert_eq!(whole.body, bytes);

    let cases: &[(&str, &[u8])] = &[
        ("offset=2", b"23456789"),
        ("length=3", b"012"),
        ("offset=2&length=3", b"234"),
        ("length=3&offset=2", b"234"),
        ("offset=8&length=100", b"89"),
        ("offset=9&length=18446744073709551615", b"9"),
        ("offset=10", b""),
        ("offset=11", b""),
        ("offset=18446744073709551615&length=1", b""),
        ("offset=0&length=0", b""),
    ];
    for (query, expected) in cases {
        let response = client.get(&format!("/v1/blobs/{name}?{query}"));
        assert_eq!(response.status, 200, "{query}");
        assert_eq!(response.body, *expected, "{query}");
        assert_eq!(
            response.header("content-length"),
            Some(&*expected.len().to_string()),
            "{query}"
        );
    }
}

#[test]
fn empty_blob() {
    let labd = Labd::start("empty", &[]);
    let client = labd.bytes();
    let name = client.put(b"");
    assert_eq!(name, name_of(b""));
    let response = client.get(&format!("/v1/blobs/{name}"));
    assert_eq!((response.status, response.body.len()), (200, 0));
    assert_eq!(client.stat(&[&name])[&name], 0);
}

#[test]
fn get_refusals() {
    let labd = Labd::start("get-refusals", &[]);
    let client = labd.bytes();
    let name = client.put(b"abc");
    let absent = name_of(b"absent");
    client
        .get(&format!("/v1/blobs/{absent}"))
        .assert_error(404, "not_found");

    let malformed = [
        "sha256:abc".to_string(),
        name.to_uppercase(),
        name.replace("sha256:", "SHA256:"),
        name.replace("sha256:", "md5:"),
        format!("{name}0"),
    ];
    for bad in &malformed {
        client
            .get(&format!("/v1/blobs/{bad}"))
            .assert_error(400, "bad_request");
    }
    let bad_queries = [
        "offset=-1",
        "offset=1.0",
        "offset=01",
        "offset=%31",
        "offset=1e2",
        "offset=18446744073709551616",
        "offset=",
        "offset",
        "length=",
        "offset=1&offset=1",
        "length=1&length=2",
        "size=1",
        "Offset=1",
        "offset=1&",
        "&offset=1",
        "offset=1&&length=1",
    ];
    for query in bad_queries {
        let response = client.get(&format!("/v1/blobs/{name}?{query}"));
        response.assert_error(400, "bad_request");
        assert_identity(&response);
    }
}

/// In the path, `sha256%3A<hex>` (as OpenAPI clients encode a path
/// parameter) names the same blob as `sha256:<hex>`; no other escape does,
/// and inside JSON bodies a name is never percent-decoded.
#[test]
fn a_percent_encoded_colon_names_the_same_blob() {
    let labd = Labd::start("encoded-colon", &[]);
    let client = labd.bytes();
    let name = client.put(b"0123456789");
    let plain = client.get(&format!("/v1/blobs/{name}?offset=2&length=3"));
    assert_eq!((plain.status, &plain.body[..]), (200, &b"234"[..]));

    for encoded in ["%3A", "%3a"] {
        let segment = name.replace(':', encoded);
        let whole = client.get(&format!("/v1/blobs/{segment}"));
        assert_eq!(whole.status, 200, "{segment}");
        assert_identity(&whole);
        assert_eq!(whole.header("content-length"), Some("10"));
        assert_eq!(whole.body, b"0123456789");
        let range = client.get(&format!("/v1/blobs/{segment}?offset=2&length=3"));
        assert_eq!((range.status, range.body), (200, b"234".to_vec()));
        client
            .get(&format!(
                "/v1/blobs/{}",
                name_of(b"absent").replace(':', encoded)
            ))
            .assert_error(404, "not_found");
    }

    let other_escapes = [
        name.replace(':', "%253A"),
        name.replace(':', "%3"),
        name.replace("sha", "%73ha"),
        name.replace("sha256:", "sha256%3A%"),
    ];
    for bad in &other_escapes {
        client
            .get(&format!("/v1/blobs/{bad}"))
            .assert_error(400, "bad_request");
    }
    let hex_escaped = format!(
        "sha256:%{:02X}{}",
        name.as_bytes()["sha256:".len()],
        &name["sha256:".len() + 1..]
    );
    client
        .get(&format!("/v1/blobs/{hex_escaped}"))
        .assert_error(400, "bad_request");

    let in_json = format!(r#"{{"names":["{}"]}}"#, name.replace(':', "%3A"));
    for route in ["/v1/stat", "/v1/get"] {
        client
            .post_json(route, &in_json)
            .assert_error(400, "bad_request");
    }
}

/// An empty body is a valid blob, whether announced as `content-length: 0`
/// or sent without any length; an empty batch stream is an empty batch.
#[test]
fn empty_bodies_are_an_empty_blob_and_an_empty_batch() {
    let labd = Labd::start("empty-bodies", &[]);
    let client = labd.bytes();
    let empty = name_of(b"");
    assert!(client.stat(&[&empty]).is_empty());

    let no_length = client.send("POST /v1/blobs HTTP/1.1", None);
    assert_eq!(no_length.status, 200);
    assert_identity(&no_length);
    assert_eq!(
        no_length.json(),
        serde_json::json!({"name": empty, "size": 0})
    );
    let zero_length = client.send("POST /v1/blobs HTTP/1.1", Some(b""));
    assert_eq!(
        zero_length.json(),
        serde_json::json!({"name": empty, "size": 0})
    );
    assert_eq!(client.stat(&[&empty])[&empty], 0);

    for body in [None, Some(&b""[..])] {
        let batch = client.send("POST /v1/put HTTP/1.1", body);
        assert_eq!(batch.status, 200);
        assert_identity(&batch);
        assert_eq!(batch.json(), serde_json::json!({"results": []}));
    }
    assert_eq!(labd.committed_blobs(), 1);
}

#[test]
fn stat_reports_present_names_only() {
    let labd = Labd::start("stat", &[]);
    let client = labd.bytes();
    let a = client.put(b"aaa");
    let b = client.put(&[7u8; 1000]);
    let absent = name_of(b"nope");
    let sizes = client.stat(&[&a, &absent, &b, &a]);
    assert_eq!(sizes.len(), 2);
    assert_eq!(sizes[&a], 3);
    assert_eq!(sizes[&b], 1000);
    assert!(client.stat(&[]).is_empty());
}

#[test]
fn json_bodies_are_strict() {
    let labd = Labd::start("strict-json", &[]);
    let client = labd.bytes();
    let name = name_of(b"x");
    let bad_bodies = [
        String::new(),
        "null".to_string(),
        "[]".to_string(),
        "{}".to_string(),
        r#"{"names": "x"}"#.to_string(),
        r#"{"names": null}"#.to_string(),
        r#"{"names": [1]}"#.to_string(),
        r#"{"names": ["sha256:00"]}"#.to_string(),
        format!(r#"{{"names": ["{name}"], "extra": 1}}"#),
        format!(r#"{{"names": ["{name}"], "names": []}}"#),
        format!(r#"{{"Names": ["{name}"]}}"#),
        format!(r#"{{"names": ["{name}"]}} x"#),
        format!(r#"{{"names": ["{name}"]}}{{}}"#),
        r#"{"names": ["\ud800"]}"#.to_string(),
        "{\"names\": [\"\u{0}\"".to_string(),
    ];
    for route in ["/v1/stat", "/v1/get"] {
        for body in &bad_bodies {
            let response = client.post_json(route, body);
            assert_eq!(response.status, 400, "{route} {body}");
            response.assert_error(400, "bad_request");
        }
        // Invalid UTF-8 inside a string.
        client
            .post(route, Some("application/json"), b"{\"names\": [\"\xff\"]}")
            .assert_error(400, "bad_request");
        // Whitespace around the object is fine; content types are checked.
        let ok = format!(" \n{{\"names\": [\"{name}\"]}}\n\t ");
        assert_eq!(
            client.post(route, None, ok.as_bytes()).status,
            200,
            "{route}"
        );
        assert_eq!(
            client
                .post(
                    route,
                    Some("application/json; charset=utf-8"),
                    ok.as_bytes()
                )
                .status,
            200
        );
        client
            .post(route, Some("text/plain"), ok.as_bytes())
            .assert_error(400, "bad_request");
        client
            .post(
                route,
                Some("application/json\ncontent-type: application/json"),
                ok.as_bytes(),
            )
            .assert_error(400, "bad_request");
        client
            .post(
                &format!("{route}?x=1"),
                Some("application/json"),
                ok.as_bytes(),
            )
            .assert_error(400, "bad_request");
    }
}

#[test]
fn json_bodies_over_four_mebibytes_are_refused() {
    let labd = Labd::start("json-limit", &[]);
    let client = labd.bytes();
    let name = name_of(b"x");
    let mut body = format!(r#"{{"names": ["{name}"]"#);
    body.push_str(&" ".repeat(4 * 1024 * 1024 - body.len() - 1));
    body.push('}');
    assert_eq!(body.len(), 4 * 1024 * 1024);
    assert_eq!(client.post_json("/v1/stat", &body).status, 200);
    body.insert(body.len() - 1, ' ');
    client
        .post_json("/v1/stat", &body)
        .assert_error(413, "too_large");
    // Without a declared length the limit trips while reading.
    let response = send_chunked(
        &client,
        "/v1/stat",
        Some("application/json"),
        body.as_bytes(),
    );
    response.assert_error(413, "too_large");
}

#[test]
fn get_many_streams_present_blobs_once() {
    let labd = Labd::start("get-many", &[]);
    let client = labd.bytes();
    let a_bytes = pseudo_random(100_000, 1);
    let a = client.put(&a_bytes);
    let b = client.put(b"line one\nline two\n");
    let empty = client.put(b"");
    let absent = name_of(b"absent");
    let body = serde_json::json!({ "names": [a, absent, b, a, empty] }).to_string();
    let response = client.post_json("/v1/get", &body);
    assert_eq!(response.status, 200);
    assert_identity(&response);
    assert_eq!(response.header("content-type"), Some("application/x-blobs"));
    let records = parse_blob_stream(&response.body);
    let names: Vec<&str> = records.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(names, [a.as_str(), b.as_str(), empty.as_str()]);
    assert_eq!(records[0].1, a_bytes);
    assert_eq!(records[1].1, b"line one\nline two\n");
    assert!(records[2].1.is_empty());

    let none = client.post_json(
        "/v1/get",
        &serde_json::json!({ "names": [absent] }).to_string(),
    );
    assert_eq!((none.status, none.body.len()), (200, 0));
}

#[test]
fn get_many_streams_large_blobs() {
    let labd = Labd::start("get-many-large", &[]);
    let client = labd.bytes();
    let big = pseudo_random(3 << 20, 2);
    let name = client.put(&big);
    let body = serde_json::json!({ "names": [name] }).to_string();
    let response = client.post_json("/v1/get", &body);
    let records = parse_blob_stream(&response.body);
    assert_eq!(records.len(), 1);
    assert!(records[0].1 == big);
    let whole = client.get(&format!("/v1/blobs/{name}"));
    assert!(whole.body == big);
}

fn parse_blob_stream(mut stream: &[u8]) -> Vec<(String, Vec<u8>)> {
    let mut records = Vec::new();
    while !stream.is_empty() {
        let newline = stream
            .iter()
            .position(|b| *b == b'\n')
            .expect("a header line");
        let header = std::str::from_utf8(&stream[..newline]).unwrap();
        let (name, size) = header.split_once(' ').expect("`<name> <size>`");
        let size: usize = size.parse().unwrap();
        let start = newline + 1;
        records.push((name.to_string(), stream[start..start + size].to_vec()));
        stream = &stream[start + size..];
    }
    records
}

fn blob_records(records: &[&[u8]]) -> Vec<u8> {
    let mut body = Vec::new();
    for record in records {
        body.extend_from_slice(format!("{}\n", record.len()).as_bytes());
        body.extend_from_slice(record);
    }
    body
}

#[test]
fn put_many_commits_each_record() {
    let labd = Labd::start("put-many", &["--blob-cap", "1000"]);
    let client = labd.bytes();
    let big = vec![1u8; 1001];
    let at_cap = vec![2u8; 1000];
    let records: [&[u8]; 5] = [b"first", b"", &big, &at_cap, b"first"];
    let response = client.post(
        "/v1/put",
        Some("application/x-blobs"),
        &blob_records(&records),
    );
    assert_eq!(response.status, 200);
    assert_identity(&response);
    let results = response.json()["results"].as_array().unwrap().clone();
    assert_eq!(results.len(), 5);
    assert_eq!(results[0]["name"], name_of(b"first"));
    assert_eq!(results[0]["size"], 5);
    assert_eq!(results[1]["name"], name_of(b""));
    assert_eq!(results[2]["error"], "too_large");
    assert!(results[2]["message"].is_string());
    assert_eq!(results[3]["name"], name_of(&at_cap));
    assert_eq!(results[4], results[0]);
    let sizes = client.stat(&[&name_of(b"first"), &name_of(&big), &name_of(&at_cap)]);
    assert_eq!(sizes.len(), 2);
    assert!(!sizes.contains_key(&name_of(&big)));
    assert_eq!(labd.staging_files(), 0);

    // An empty batch is an empty result list; no content type is fine.
    let empty = client.post("/v1/put", None, b"");
    assert_eq!(empty.json()["results"], serde_json::json!([]));
}

#[test]
fn put_many_refuses_malformed_streams() {
    let labd = Labd::start("put-many-bad", &[]);
    let client = labd.bytes();
    for body in [
        &b"x\nabc"[..],
        b"3 \nabc",
        b"03\nabc",
        b"-1\n",
        b"3\r\nabc",
        b"99999999999999999999999\n",
    ] {
        client
            .post("/v1/put", Some("application/x-blobs"), body)
            .assert_error(400, "bad_request");
    }
    // A record that ends before its size: the whole records before it land.
    let mut body = blob_records(&[b"whole one"]);
    body.extend_from_slice(b"10\nshort");
    client
        .post("/v1/put", Some("application/x-blobs"), &body)
        .assert_error(400, "bad_request");
    assert_eq!(client.stat(&[&name_of(b"whole one")]).len(), 1);
    assert_eq!(client.stat(&[&name_of(b"short")]).len(), 0);
    client
        .post("/v1/put", Some("application/json"), &blob_records(&[b"x"]))
        .assert_error(400, "bad_request");
    client
        .post(
            "/v1/put?x=1",
            Some("application/x-blobs"),
            &blob_records(&[b"x"]),
        )
        .assert_error(400, "bad_request");
    assert_eq!(labd.staging_files(), 0);
}

#[test]
fn batch_cut_off_mid_body_commits_whole_records_only() {
    let labd = Labd::start("put-many-cut", &[]);
    let client = labd.bytes();
    let first = pseudo_random(5000, 3);
    let second = pseudo_random(7000, 4);
    let partial = pseudo_random(100_000, 5);
    let mut body = blob_records(&[&first, &second]);
    body.extend_from_slice(format!("{}\n", partial.len()).as_bytes());
    body.extend_from_slice(&partial[..50_000]);

    let mut stream = client.connect();
    let head = "POST /v1/put HTTP/1.1\r\nhost: t\r\ncontent-type: application/x-blobs\r\ncontent-length: 10000000\r\n\r\n";
    stream.write_all(head.as_bytes()).unwrap();
    stream.write_all(&body).unwrap();
    stream.flush().unwrap();
    // The server commits the second record once it has read past it.
    eventually("the whole records are committed", || {
        client.stat(&[&name_of(&second)]).len() == 1
    });
    drop(stream);
    eventually("the partial record's staging file is gone", || {
        labd.staging_files() == 0
    });
    let sizes = client.stat(&[&name_of(&first), &name_of(&second), &name_of(&partial)]);
    assert_eq!(sizes.len(), 2);
    assert!(!sizes.contains_key(&name_of(&partial)));
}

#[test]
fn put_is_idempotent_and_concurrent_puts_agree() {
    let labd = Labd::start("concurrent", &[]);
    let client = labd.bytes();
    let bytes = pseudo_random(1 << 20, 6);
    let names: Vec<String> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..16)
            .map(|_| scope.spawn(|| client.put(&bytes)))
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    assert!(names.iter().all(|n| *n == name_of(&bytes)));
    assert_eq!(client.put(&bytes), name_of(&bytes));
    assert_eq!(client.get(&format!("/v1/blobs/{}", names[0])).body, bytes);
    assert_eq!(labd.staging_files(), 0);
}

/// Sends `body` with chunked transfer encoding, in 64 KiB chunks.
fn send_chunked(
    client: &support::Client,
    target: &str,
    content_type: Option<&str>,
    body: &[u8],
) -> support::Response {
    let mut stream = client.connect();
    let mut head = format!("POST {target} HTTP/1.1\r\nhost: t\r\ntransfer-encoding: chunked\r\n");
    if let Some(ct) = content_type {
        head.push_str(&format!("content-type: {ct}\r\n"));
    }
    head.push_str("\r\n");
    stream.write_all(head.as_bytes()).unwrap();
    for chunk in body.chunks(64 * 1024) {
        let mut frame = format!("{:x}\r\n", chunk.len()).into_bytes();
        frame.extend_from_slice(chunk);
        frame.extend_from_slice(b"\r\n");
        if stream.write_all(&frame).is_err() {
            break;
        }
    }
    let _ = stream.write_all(b"0\r\n\r\n");
    read_response(&mut stream)
}

#[test]
fn chunked_put_commits_at_clean_end() {
    let labd = Labd::start("chunked", &[]);
    let client = labd.bytes();
    let bytes = pseudo_random(300_000, 7);
    let response = send_chunked(&client, "/v1/blobs", None, &bytes);
    assert_eq!(response.status, 200);
    assert_eq!(response.json()["name"], name_of(&bytes));
}

#[test]
fn cap_refuses_oversized_puts_and_commits_nothing() {
    let labd = Labd::start("cap", &["--blob-cap", "100000"]);
    let client = labd.bytes();
    let at_cap = pseudo_random(100_000, 8);
    assert_eq!(client.put(&at_cap), name_of(&at_cap));

    // Declared too large: refused before reading.
    let over = pseudo_random(100_001, 9);
    let response = client.post("/v1/blobs", None, &over);
    response.assert_error(413, "too_large");
    assert_identity(&response);

    // Undeclared: the cap trips mid-stream.
    let far_over = pseudo_random(300_000, 10);
    send_chunked(&client, "/v1/blobs", None, &far_over).assert_error(413, "too_large");
    assert!(client
        .stat(&[&name_of(&over), &name_of(&far_over)])
        .is_empty());
    eventually("no staging litter", || labd.staging_files() == 0);
}

#[test]
fn client_closing_mid_body_commits_nothing() {
    if support::skipped_on_s3("a put under 8 MiB is held in memory on S3: nothing shows it staging")
    {
        return;
    }
    let labd = Labd::start("abort", &[]);
    let client = labd.bytes();
    let bytes = pseudo_random(1 << 20, 11);
    let mut stream = client.connect();
    let head = format!(
        "POST /v1/blobs HTTP/1.1\r\nhost: t\r\ncontent-length: {}\r\n\r\n",
        bytes.len()
    );
    stream.write_all(head.as_bytes()).unwrap();
    stream.write_all(&bytes[..bytes.len() / 2]).unwrap();
    eventually("the put is staging", || labd.staging_files() == 1);
    drop(stream);
    eventually("the staging file is removed", || labd.staging_files() == 0);
    assert!(client.stat(&[&name_of(&bytes)]).is_empty());
    // The truncated prefix was not committed under its own name either.
    assert!(client
        .stat(&[&name_of(&bytes[..bytes.len() / 2])])
        .is_empty());
}

#[test]
fn kill_during_a_large_put_leaves_nothing_after_restart() {
    if support::skipped_on_s3(
        "a multipart upload a kill cut short is the bucket lifecycle rule's to abort",
    ) {
        return;
    }
    let labd = Labd::start("kill", &[]);
    let client = labd.bytes();
    let kept = client.put(b"committed before the crash");
    let bytes = pseudo_random(8 << 20, 12);
    let mut stream = client.connect();
    let head = "POST /v1/blobs HTTP/1.1\r\nhost: t\r\ncontent-length: 67108864\r\n\r\n";
    stream.write_all(head.as_bytes()).unwrap();
    stream.write_all(&bytes).unwrap();
    eventually("the put is staging", || labd.staging_files() == 1);
    let labd = labd.kill_and_restart();
    drop(stream);
    assert_eq!(
        labd.staging_files(),
        0,
        "staging litter survived the restart"
    );
    let client = labd.bytes();
    assert!(client.stat(&[&name_of(&bytes)]).is_empty());
    assert_eq!(client.stat(&[&kept]).len(), 1);
    assert_eq!(
        client.get(&format!("/v1/blobs/{kept}")).body,
        b"committed before the crash"
    );
}

#[test]
fn routing_is_exact() {
    let labd = Labd::start("routing", &[]);
    let client = labd.bytes();
    let name = client.put(b"r");
    for target in [
        "/",
        "/v1",
        "/v2/stat",
        "/v1/stat/",
        "/v1//stat",
        "//v1/stat",
        "/v1/./stat",
        "/v1/x/../stat",
        "/v1/blobs/",
        "/v1/blobs//x",
        "/describe/../SURFACE.md",
        "/describe/./SURFACE.md",
        "/metrics",
        "/LIVEZ",
    ] {
        for method in ["GET", "POST"] {
            let response = client.send(&format!("{method} {target} HTTP/1.1"), Some(b""));
            response.assert_error(404, "not_found");
            assert_identity(&response);
            assert!(response.header("location").is_none());
        }
    }
    let blob = format!("/v1/blobs/{name}");
    for (method, target, allow) in [
        ("POST", blob.as_str(), "GET"),
        ("PUT", blob.as_str(), "GET"),
        ("HEAD", blob.as_str(), "GET"),
        ("GET", "/v1/stat", "POST"),
        ("GET", "/v1/blobs", "POST"),
        ("DELETE", "/v1/get", "POST"),
        ("GET", "/v1/put", "POST"),
        ("POST", "/livez", "GET"),
        ("POST", "/healthz", "GET"),
        ("POST", "/describe", "GET"),
        ("PUT", "/describe/SURFACE.md", "GET"),
    ] {
        let response = client.send(&format!("{method} {target} HTTP/1.1"), Some(b""));
        assert_eq!(response.status, 405, "{method} {target}");
        assert_eq!(response.header("allow"), Some(allow), "{method} {target}");
        assert_identity(&response);
    }
}

#[test]
fn operational_routes() {
    let labd = Labd::start("operational", &[]);
    // This host's routes and health (not a peer's of LAB_TEST_HOSTS=2).
    let client = Client::of(labd.bytes().address);
    let livez = client.get("/livez");
    assert_eq!(livez.status, 200);
    assert_identity(&livez);
    let body = livez.json();
    assert_eq!(body["status"], "ok");
    assert_eq!(body["service"], "bytes");
    assert_eq!(body["contract"], CONTRACT);
    assert_eq!(body["checks"], serde_json::json!([]));
    assert!(body["build"]["revision"].is_string());
    assert!(body["build"]["dirty"].is_boolean());
    assert!(body["build"]["go"].is_string());
    assert!(body["time"].as_str().unwrap().ends_with('Z'));
    assert!(body.get("identity").is_none());

    let healthz = client.get("/healthz");
    assert_eq!(healthz.status, 200);
    let body = healthz.json();
    assert_eq!(body["checks"][0]["name"], "store");
    assert_eq!(body["checks"][0]["status"], "ok");

    client.get("/livez?x=1").assert_error(400, "bad_request");

    // The store check fails when a commit cannot be staged.
    std::fs::remove_dir_all(labd.blobs_dir().join("staging")).unwrap();
    let failing = client.get("/healthz");
    assert_eq!(failing.status, 503);
    let body = failing.json();
    assert_eq!(body["status"], "failing");
    assert_eq!(body["checks"][0]["name"], "store");
    assert_eq!(body["checks"][0]["status"], "failing");
    assert!(!body["checks"][0]["detail"].as_str().unwrap().is_empty());
    assert_eq!(client.get("/livez").status, 200);
}

#[test]
fn describe_and_served_files() {
    let labd = Labd::start("describe", &[]);
    let client = labd.bytes();
    let describe = client.get("/describe");
    assert_eq!(describe.status, 200);
    assert_identity(&describe);
    let body = describe.json();
    assert_eq!(body["name"], "bytes");
    assert_eq!(body["contract"], CONTRACT);
    assert!(body["component"].as_str().unwrap().starts_with("sha256:"));
    assert!(!body["operations"].as_array().unwrap().is_empty());
    let refusals: Vec<&str> = body["refusals"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["name"].as_str().unwrap())
        .collect();
    for code in ["bad_request", "not_found", "too_large"] {
        assert!(refusals.contains(&code), "{code}");
    }
    let files: Vec<String> = body["files"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f.as_str().unwrap().to_string())
        .collect();
    for required in ["SURFACE.md", "HTTP.md", "operations.json", "openapi.json"] {
        assert!(files.iter().any(|f| f == required), "{required}");
    }
    assert!(files
        .iter()
        .any(|f| f.starts_with("schema/") && f.ends_with(".schema.json")));
    let contracts = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../contracts/bytes");
    for file in &files {
        let response = client.get(&format!("/describe/{file}"));
        assert_eq!(response.status, 200, "{file}");
        assert_identity(&response);
        let expected_type = if file.ends_with(".md") {
            "text/markdown"
        } else {
            "application/json"
        };
        assert_eq!(
            response.header("content-type"),
            Some(expected_type),
            "{file}"
        );
        let on_disk = std::fs::read(contracts.join(file)).unwrap();
        assert!(response.body == on_disk, "{file} is not served verbatim");
    }
    for absent in [
        "/describe/nope.md",
        "/describe/schema/Nope.schema.json",
        "/describe/Cargo.toml",
    ] {
        client.get(absent).assert_error(404, "not_found");
    }
}

#[test]
fn management_listener_reports_metrics_and_component() {
    // The bytes service alone, so no other service's calls are counted.
    let labd = Labd::start("management", &["--services", "bytes"]);
    // Counted by this host (not by a peer of LAB_TEST_HOSTS=2).
    let this_host = Client::of(labd.bytes().address);
    this_host.put(b"m");
    this_host.get("/v1/nope");
    let management = labd.bytes_management();
    let metrics = management.get("/metrics");
    assert_eq!(metrics.status, 200);
    assert_identity(&metrics);
    let text = String::from_utf8(metrics.body).unwrap();
    assert!(
        text.contains("lab_requests_total{service=\"bytes\",operation=\"put\",status=\"200\"} 1"),
        "{text}"
    );
    assert!(
        text.contains("lab_requests_total{service=\"bytes\",operation=\"none\",status=\"404\"} 1"),
        "{text}"
    );
    assert!(text.contains(
        "lab_request_duration_seconds_bucket{service=\"bytes\",operation=\"put\",le=\"+Inf\"} 1"
    ));
    assert!(text.contains("lab_instantiation_duration_seconds_count{service=\"bytes\"}"));
    let component = management.get("/component").json();
    let described = labd.bytes().get("/describe").json();
    assert_eq!(component["digest"], described["component"]);
    assert_eq!(management.get("/livez").status, 200);
    assert_eq!(
        management.get("/healthz").json()["checks"][0]["name"],
        "store"
    );
    management.get("/nope").assert_error(404, "not_found");
    // The built-in component has no file to reload from.
    management
        .post("/reload", None, b"")
        .assert_error(409, "reload_failed");
}

#[test]
fn hot_swap_keeps_serving() {
    let files = SwapFiles::new("bytes");
    let labd = Labd::start("swap", &["--bytes-component", files.arg()]);
    let client = labd.bytes();
    // The component this host serves (another host on its storage, under
    // LAB_TEST_HOSTS=2, is not reloaded).
    let this_host = Client::of(client.address);
    let before = this_host.get("/describe").json()["component"].clone();
    let blob = client.put(b"swap");
    // A put open across the reload: half its body is sent before.
    let held_bytes = pseudo_random(64 << 10, 77);
    let held = HalfSent::start(
        client.address,
        &post_bytes("/v1/blobs", None, &held_bytes),
        held_bytes.len(),
    );
    // Gets of a blob and puts of new ones, across the reload.
    let across = across_reload(
        4,
        |w, n| {
            let response = client.get(&format!("/v1/blobs/{blob}"));
            assert_eq!(response.status, 200);
            assert_eq!(response.body, b"swap");
            client.put(&pseudo_random(1 + n % 4096, (w as u64) << 32 | n as u64));
        },
        || files.swap(labd.bytes_management()),
    );
    assert!(across.overlapping > 0 && across.after > 0, "{across:?}");
    let finished = held.finish();
    assert_eq!(finished.status, 200, "the put held across the reload");
    assert_eq!(finished.json()["name"], name_of(&held_bytes));
    assert_eq!(
        client
            .get(&format!("/v1/blobs/{}", name_of(&held_bytes)))
            .body,
        held_bytes
    );
    let after = this_host.get("/describe").json()["component"].clone();
    assert_eq!(after, name_of(&files.swapped));
    assert_ne!(before, after);

    // A file that is not a component is refused and the old one keeps serving.
    std::fs::write(&files.path, b"not wasm").unwrap();
    labd.bytes_management()
        .post("/reload", None, b"")
        .assert_error(409, "reload_failed");
    assert_eq!(
        this_host.get("/describe").json()["component"],
        name_of(&files.swapped)
    );
}

#[test]
fn sigterm_finishes_requests_in_flight() {
    if support::skipped_on_s3("a put under 8 MiB is held in memory on S3: nothing shows it staging")
    {
        return;
    }
    let labd = Labd::start("sigterm", &[]);
    let client = labd.bytes();
    let bytes = pseudo_random(200_000, 13);
    let mut stream = client.connect();
    let head = format!(
        "POST /v1/blobs HTTP/1.1\r\nhost: t\r\ncontent-length: {}\r\n\r\n",
        bytes.len()
    );
    stream.write_all(head.as_bytes()).unwrap();
    // Past the 64 KiB a put holds in memory before it stages.
    let (sent, rest) = bytes.split_at(100_000);
    stream.write_all(sent).unwrap();
    eventually("the put is staging", || labd.staging_files() == 1);
    labd.terminate();
    stream.write_all(rest).unwrap();
    let response = read_response(&mut stream);
    assert_eq!(response.status, 200);
    assert_eq!(response.json()["name"], name_of(&bytes));
    let mut labd = labd;
    let status = labd.child.wait().unwrap();
    assert!(status.success(), "{status}");
}

#[test]
fn large_blobs_stream_through_without_buffering() {
    use sha2::Digest;
    use std::io::{BufRead, BufReader, Read};
    const SIZE: u64 = 512 << 20;
    let labd = Labd::start("large", &[]);
    let client = labd.bytes();
    client.put(b"warm up");
    let pid = labd.child.id();
    // The kernel raises the peak lazily: a size it never recorded may be
    // read now and gone later, so the peak starts from here.
    support::reset_peak_rss(pid);
    let before = support::peak_rss_kib(pid);

    let mut stream = client.connect();
    let head = format!("POST /v1/blobs HTTP/1.1\r\nhost: t\r\ncontent-length: {SIZE}\r\n\r\n");
    stream.write_all(head.as_bytes()).unwrap();
    let mut hasher = sha2::Sha256::new();
    let mut sent = 0;
    let mut seed = 100;
    while sent < SIZE {
        let chunk = pseudo_random((1 << 20).min((SIZE - sent) as usize), seed);
        seed += 1;
        hasher.update(&chunk);
        stream.write_all(&chunk).unwrap();
        sent += chunk.len() as u64;
    }
    let name = format!("sha256:{}", hex::encode(hasher.finalize()));
    let response = read_response(&mut stream);
    assert_eq!(response.status, 200);
    assert_eq!(response.json()["name"], name);

    // Read it back without holding it: hash as it arrives.
    let mut stream = client.connect();
    write!(
        stream,
        "GET /v1/blobs/{name} HTTP/1.1\r\nhost: t\r\nconnection: close\r\n\r\n"
    )
    .unwrap();
    let mut reader = BufReader::new(stream);
    let mut length = None;
    loop {
        let mut line = String::new();
        reader.read_line(&mut line).unwrap();
        if line.trim_end().is_empty() {
            break;
        }
        if let Some(value) = line.to_ascii_lowercase().strip_prefix("content-length:") {
            length = Some(value.trim().parse::<u64>().unwrap());
        }
    }
    assert_eq!(length, Some(SIZE));
    let mut hasher = sha2::Sha256::new();
    let mut buf = vec![0u8; 1 << 20];
    let mut received = 0;
    loop {
        let n = reader.read(&mut buf).unwrap();
        if n == 0 {
            break;
        }
        hasher.update(&buf[..n]);
        received += n as u64;
    }
    assert_eq!(received, SIZE);
    assert_eq!(format!("sha256:{}", hex::encode(hasher.finalize())), name);

    let growth_mib = support::peak_rss_kib(pid).saturating_sub(before) / 1024;
    eprintln!(
        "labd peak RSS grew {growth_mib} MiB for a {} MiB put and get",
        SIZE >> 20
    );
    assert!(
        growth_mib < 48,
        "labd peak RSS grew {growth_mib} MiB: bodies are being buffered"
    );
}

#[test]
fn kill_9_keeps_every_acknowledged_blob() {
    a_crash_keeps_every_acknowledged_blob(Crash::Kill9);
}

#[test]
fn a_power_cut_keeps_every_acknowledged_blob() {
    a_crash_keeps_every_acknowledged_blob(Crash::PowerCut);
}

fn a_crash_keeps_every_acknowledged_blob(crash: Crash) {
    until_one_in_flight("put", || crash_under_puts(crash));
}

/// Clients putting blobs until the crash; after it, every acknowledged
/// blob reads back whole, and every blob file the store holds hashes to
/// its name. Answers whether a put was in flight.
fn crash_under_puts(crash: Crash) -> bool {
    let mut labd = Crashable::start("blob-crash", &[], crash);
    let address = labd.bytes().address;
    let acknowledged = AtomicUsize::new(0);
    let threshold = random_threshold(20, 80);
    let watch = labd.watch();
    let exchanges = Mutex::new(Vec::new());
    std::thread::scope(|scope| {
        for c in 0..8u64 {
            let (acknowledged, watch, exchanges) = (&acknowledged, &watch, &exchanges);
            scope.spawn(move || {
                for n in 0u64.. {
                    let seed = c << 32 | n;
                    let bytes = pseudo_random(1 + (seed as usize * 7919) % (128 << 10), seed);
                    let exchange = watch.exchange(address, &post_bytes("/v1/blobs", None, &bytes));
                    let acked = exchange.answered(200).is_some();
                    exchanges.lock().unwrap().push((bytes, exchange));
                    if !acked {
                        return;
                    }
                    acknowledged.fetch_add(1, Ordering::SeqCst);
                }
            });
        }
        crash_under_load(&mut labd, &acknowledged, threshold);
    });
    labd.restart();
    let exchanges = exchanges.into_inner().unwrap();
    let acked: Vec<&Vec<u8>> = exchanges
        .iter()
        .filter(|(_, e)| e.answered(200).is_some())
        .map(|(bytes, _)| bytes)
        .collect();
    assert!(acked.len() >= threshold);
    let caught = exchanges.iter().any(|(_, e)| e.in_flight(200));
    let client = labd.bytes();
    for bytes in &acked {
        let name = name_of(bytes);
        let read = client.get(&format!("/v1/blobs/{name}"));
        assert_eq!(read.status, 200, "{name} lost");
        assert!(read.body == **bytes, "{name} torn");
    }
    // No torn blob anywhere, acknowledged or not, and no staging litter.
    assert_eq!(labd.staging_files(), 0);
    let mut files = 0;
    for (name, path) in labd.blob_files() {
        assert_eq!(name_of(&std::fs::read(path).unwrap()), name, "a torn blob");
        files += 1;
    }
    let distinct: std::collections::HashSet<String> = acked.iter().map(|b| name_of(b)).collect();
    assert!(
        files >= distinct.len(),
        "{files} blob files, {} acknowledged",
        distinct.len()
    );
    caught
}
