//! The unpacker's logic natively, on archives built here.

use crate::source::{crc32, Slice};
use crate::unpack::{unpack, Sink};
use serde_json::{json, Value};
use std::vec::Vec;

/// A 512-byte ustar header for `path` of `size` bytes and type `flag`.
pub fn header(path: &str, size: u64, flag: u8, link: &str) -> Vec<u8> {
    let mut h = vec![0u8; 512];
    h[..path.len()].copy_from_slice(path.as_bytes());
    h[100..107].copy_from_slice(b"0000644");
    h[124..135].copy_from_slice(format!("{size:011o}").as_bytes());
    h[156] = flag;
    h[157..157 + link.len()].copy_from_slice(link.as_bytes());
    h[257..263].copy_from_slice(b"ustar\0");
    h[263..265].copy_from_slice(b"00");
    h[148..156].copy_from_slice(b"        ");
    let sum: u32 = h.iter().map(|&b| u32::from(b)).sum();
    h[148..155].copy_from_slice(format!("{sum:06o}\0").as_bytes());
    h
}

/// A tar of `members` (path, type flag, data, link), ended by two zero
/// blocks.
pub fn tar(members: &[(&str, u8, &[u8], &str)]) -> Vec<u8> {
    let mut out = Vec::new();
    for (path, flag, data, link) in members {
        out.extend(header(path, data.len() as u64, *flag, link));
        out.extend_from_slice(data);
        out.resize(out.len().div_ceil(512) * 512, 0);
    }
    out.extend([0u8; 1024]);
    out
}

/// `data` as one gzip member.
pub fn gzip(data: &[u8]) -> Vec<u8> {
    let mut out = vec![0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 0, 255];
    out.extend(miniz_oxide::deflate::compress_to_vec(data, 6));
    out.extend(crc32(0, data).to_le_bytes());
    out.extend((data.len() as u32).to_le_bytes());
    out
}

#[derive(Default)]
struct Collect(Vec<Vec<u8>>);

impl Sink for Collect {
    fn begin(&mut self) {
        self.0.push(Vec::new());
    }
    fn write(&mut self, bytes: &[u8]) {
        self.0.last_mut().unwrap().extend_from_slice(bytes);
    }
}

fn run(archive: &[u8]) -> Result<(Value, Vec<Vec<u8>>), String> {
    let mut sink = Collect::default();
    let index = unpack(Slice(archive), &mut sink)?;
    Ok((index, sink.0))
}

fn sample() -> Vec<u8> {
    let long = "d/".repeat(60) + "long.txt";
    let mut archive = Vec::new();
    // A GNU long name, then its member (whose own name field is cut).
    archive.extend(header("././@LongLink", long.len() as u64 + 1, b'L', ""));
    let mut name = long.clone().into_bytes();
    name.push(0);
    name.resize(512, 0);
    archive.extend(name);
    archive.extend(header(&long[..99], 3, b'0', ""));
    archive.extend(b"abc");
    archive.resize(archive.len().div_ceil(512) * 512, 0);
    let rest = tar(&[
        ("./a.txt", b'0', b"hello\n", ""),
        ("dir/", b'5', b"", ""),
        ("link", b'2', b"", "a.txt"),
        ("/etc/passwd", b'0', b"x", ""),
        ("a/../../escape", b'0', b"y", ""),
        ("dev", b'3', b"", ""),
        ("empty", b'0', b"", ""),
    ]);
    archive.extend(rest);
    archive
}

fn sha(bytes: &[u8]) -> String {
    use sha2::Digest;
    sha2::Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

#[test]
fn unpacks_files_and_indexes_every_member() {
    let (index, members) = run(&sample()).unwrap();
    assert_eq!(
        members,
        vec![b"abc".to_vec(), b"hello\n".to_vec(), Vec::new()]
    );
    let long = "d/".repeat(60) + "long.txt";
    assert_eq!(
        index,
        json!({"members": [
            {"path": long, "type": "file", "size": 3, "mode": "0644", "ordinal": 0, "sha256": sha(b"abc")},
            {"path": "a.txt", "type": "file", "size": 6, "mode": "0644", "ordinal": 1, "sha256": sha(b"hello\n")},
            {"path": "dir/", "type": "directory", "size": 0, "mode": "0644", "skipped": "directory"},
            {"path": "link", "type": "symlink", "size": 0, "mode": "0644", "skipped": "link to `a.txt`"},
            {"path": "/etc/passwd", "type": "file", "size": 1, "mode": "0644", "skipped": "absolute path"},
            {"path": "a/../../escape", "type": "file", "size": 1, "mode": "0644", "skipped": "`..` in path"},
            {"path": "dev", "type": "char-device", "size": 0, "mode": "0644", "skipped": "device"},
            {"path": "empty", "type": "file", "size": 0, "mode": "0644", "ordinal": 2, "sha256": sha(b"")},
        ]})
    );
}

#[test]
fn gzip_is_detected_by_its_magic_and_gives_the_same_result() {
    let plain = run(&sample()).unwrap();
    assert_eq!(run(&gzip(&sample())).unwrap(), plain);
}

#[test]
fn pax_path_and_ustar_prefix_name_members() {
    let record = "29 path=pax/named/member.txt\n";
    assert_eq!(record.len(), 29);
    let mut archive = header("PaxHeaders/x", record.len() as u64, b'x', "");
    archive.extend(record.as_bytes());
    archive.resize(1024, 0);
    archive.extend(header("short", 1, b'0', ""));
    archive.extend(b"p");
    archive.resize(2048, 0);
    let mut prefixed = header("name.txt", 1, b'0', "");
    prefixed[345..351].copy_from_slice(b"prefix");
    prefixed[148..156].copy_from_slice(b"        ");
    let sum: u32 = prefixed.iter().map(|&b| u32::from(b)).sum();
    prefixed[148..155].copy_from_slice(format!("{sum:06o}\0").as_bytes());
    archive.extend(prefixed);
    archive.extend(b"q");
    archive.resize(3072, 0);
    let (index, members) = run(&archive).unwrap();
    assert_eq!(members, vec![b"p".to_vec(), b"q".to_vec()]);
    assert_eq!(index["members"][0]["path"], "pax/named/member.txt");
    assert_eq!(index["members"][1]["path"], "prefix/name.txt");
}

#[test]
fn malformed_archives_are_refused_with_the_reason() {
    let err = |archive: &[u8]| run(archive).unwrap_err();
    assert_eq!(
        err(
            b"this is not a tar archive, only some text that is long enough to be a header"
                .repeat(8)
                .as_slice()
        ),
        "member 1: header checksum is not a number"
    );
    let mut flipped = sample();
    flipped[1030] ^= 1;
    assert_eq!(
        err(&flipped),
        "member 2: header checksum mismatch (not a tar archive, or a corrupt one)"
    );
    assert_eq!(err(&sample()[..100]), "archive: truncated header");
    let whole = tar(&[("a", b'0', &[7u8; 2000], "")]);
    assert_eq!(err(&whole[..1200]), "member 1: truncated data");
    let mut bad_size = header("a", 0, b'0', "");
    bad_size[124..135].copy_from_slice(b"0000000009x");
    bad_size[148..156].copy_from_slice(b"        ");
    let sum: u32 = bad_size.iter().map(|&b| u32::from(b)).sum();
    bad_size[148..155].copy_from_slice(format!("{sum:06o}\0").as_bytes());
    assert_eq!(err(&bad_size), "member 1: size is not an octal number");
    let zipped = gzip(&sample());
    assert_eq!(
        err(&zipped[..zipped.len() / 2]),
        "gzip: truncated deflate stream"
    );
    let mut corrupt = zipped.clone();
    let n = corrupt.len();
    corrupt[n - 6] ^= 1;
    assert_eq!(err(&corrupt), "gzip: CRC-32 mismatch");
    assert_eq!(err(&[0x1f, 0x8b, 9]), "gzip: truncated header");
}

#[test]
fn an_empty_input_is_an_empty_archive() {
    assert_eq!(run(b"").unwrap(), (json!({"members": []}), Vec::new()));
}

#[test]
fn crc32_matches_the_check_value() {
    assert_eq!(crc32(0, b"123456789"), 0xcbf4_3926);
}
