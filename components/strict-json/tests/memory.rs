//! Peak heap use of canonicalization on ~60 MiB records, counted by a global
//! allocator: it is bounded by the input's size whatever the number of
//! values, where a parsed tree costs tens of bytes per value.
//!
//! `cargo test --release -p lab-strict-json --test memory -- --ignored
//! --nocapture` also prints time and peak of the tree path beside it.

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::Instant;

use lab_strict_json::{canonicalize, object_members, parse};

struct Counting;

static CURRENT: AtomicUsize = AtomicUsize::new(0);
static PEAK: AtomicUsize = AtomicUsize::new(0);

unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let ptr = unsafe { System.alloc(layout) };
        if !ptr.is_null() {
            let now = CURRENT.fetch_add(layout.size(), Ordering::SeqCst) + layout.size();
            PEAK.fetch_max(now, Ordering::SeqCst);
        }
        ptr
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        unsafe { System.dealloc(ptr, layout) };
        CURRENT.fetch_sub(layout.size(), Ordering::SeqCst);
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // Counted as a fresh allocation before the old one is released:
        // the worst case of a moving reallocation.
        let new = unsafe { System.realloc(ptr, layout, new_size) };
        if !new.is_null() {
            let now = CURRENT.fetch_add(new_size, Ordering::SeqCst) + new_size;
            PEAK.fetch_max(now, Ordering::SeqCst);
            CURRENT.fetch_sub(layout.size(), Ordering::SeqCst);
        }
        new
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

/// Tests measure one at a time.
static MEASURING: Mutex<()> = Mutex::new(());

const MIB: usize = 1 << 20;
const SIZE: usize = 60 * MIB;

/// What `run` allocated at its peak beyond what was live before it, with
/// its result and duration.
fn measure<T>(run: impl FnOnce() -> T) -> (T, usize, f64) {
    let before = CURRENT.load(Ordering::SeqCst);
    PEAK.store(before, Ordering::SeqCst);
    let start = Instant::now();
    let result = run();
    let seconds = start.elapsed().as_secs_f64();
    (result, PEAK.load(Ordering::SeqCst) - before, seconds)
}

/// `[1,1,…,1]` of about `SIZE` bytes: 31 million values.
fn array_of_ones() -> Vec<u8> {
    let mut input = Vec::with_capacity(SIZE + 2);
    input.push(b'[');
    while input.len() < SIZE {
        input.extend_from_slice(b"1,");
    }
    input.pop();
    input.push(b']');
    input
}

/// One string of about `SIZE` bytes, every 64th character escaped.
fn long_string() -> Vec<u8> {
    let mut input = Vec::with_capacity(SIZE + 2);
    input.push(b'"');
    while input.len() < SIZE {
        input.extend_from_slice(&[b'x'; 58]);
        input.extend_from_slice(b"\\u00e9");
    }
    input.push(b'"');
    input
}

/// Members of [`reversed_object`]: 14 bytes each.
const MEMBERS: usize = SIZE / 14;

/// An object of about `SIZE` bytes whose members arrive in reverse order:
/// 4.5 million members, each with an array value.
fn reversed_object() -> Vec<u8> {
    let count = MEMBERS;
    let mut input = Vec::with_capacity(SIZE + MIB);
    input.push(b'{');
    for i in (0..count).rev() {
        input.extend_from_slice(format!("\"{i:07}\":[0],").as_bytes());
    }
    input.pop();
    input.push(b'}');
    input
}

/// An object whose first member, `z`, holds [`array_of_ones`] and must move
/// behind the small members that follow it.
fn object_with_one_large_member() -> Vec<u8> {
    let mut input = br#"{"z":"#.to_vec();
    input.extend_from_slice(&array_of_ones());
    input.extend_from_slice(br#","b":{"y":2,"x":1},"a":"s"}"#);
    input
}

/// A request body whose `record` member is `record`, after small members.
fn body_around(record: &[u8]) -> Vec<u8> {
    let mut body = br#"{"operation_id":"op-1","path":["p"],"record":"#.to_vec();
    body.extend_from_slice(record);
    body.push(b'}');
    body
}

/// Asserts that canonicalizing `input` peaks under `bound` bytes and
/// returns the output.
fn canonical_within(input: &[u8], bound: usize) -> Vec<u8> {
    let (output, peak, _) = measure(|| canonicalize(input));
    let output = output.expect("the record is strict JSON");
    assert!(
        peak <= bound,
        "peak {} MiB over {} MiB for {} MiB in, {} MiB out",
        peak / MIB,
        bound / MIB,
        input.len() / MIB,
        output.len() / MIB
    );
    output
}

#[test]
fn array_of_small_numbers_costs_one_output() {
    let _one = MEASURING
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    let input = array_of_ones();
    // The output is sized to the input up front and never grows.
    let output = canonical_within(&input, input.len() + MIB);
    assert_eq!(output, input);
}

#[test]
fn long_string_costs_one_output() {
    let _one = MEASURING
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    let input = long_string();
    let output = canonical_within(&input, input.len() + MIB);
    assert!(output.len() < input.len() && output.starts_with(b"\"xx"));
    assert_eq!(&output[59..61], "é".as_bytes());
}

#[test]
fn reordered_object_with_one_large_member_costs_one_output() {
    let _one = MEASURING
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    let input = object_with_one_large_member();
    // The large member moves within the output; only the small ones are
    // set aside.
    let output = canonical_within(&input, input.len() + MIB);
    assert!(output.starts_with(br#"{"a":"s","b":{"x":1,"y":2},"z":[1,1,"#));
    assert!(output.ends_with(b",1,1]}"));
    assert_eq!(output.len(), input.len());
}

/// Member offsets are one word each, in a vector that grows by doubling: up
/// to twice the words it uses, three times while a reallocation moves it.
const OFFSETS: usize = 3 * MEMBERS * std::mem::size_of::<usize>();

#[test]
fn reordered_object_costs_two_outputs_and_its_member_offsets() {
    let _one = MEASURING
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    let input = reversed_object();
    // The output, the copy the members are reordered from, the offsets.
    let bound = 2 * input.len() + OFFSETS + MIB;
    let output = canonical_within(&input, bound);
    assert!(output.starts_with(b"{\"0000000\":[0],\"0000001\":[0],"));
    assert_eq!(output.len(), input.len());
}

#[test]
fn members_of_a_large_body_cost_no_copy_of_it() {
    let _one = MEASURING
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    let body = body_around(&reversed_object());
    let mut members = Vec::new();
    let (object, peak, _) = measure(|| {
        object_members(&body, &mut |name, span| {
            members.push((name.to_owned(), span))
        })
    });
    assert_eq!(object, Ok(true));
    assert_eq!(members.len(), 3);
    let (name, record) = members[2].clone();
    assert_eq!(name, "record");
    assert_eq!(record.end, body.len() - 1);
    assert_eq!(&body[record.start..record.start + 11], b"{\"4493896\":");
    // The record's member offsets are all that grows with it.
    let bound = OFFSETS + MIB;
    assert!(peak <= bound, "peak {} MiB", peak / MIB);
}

/// Time and peak of the tree path (parse, `serde_json::Value`,
/// `serde_json_canonicalizer`) and of [`canonicalize`], for the report.
#[test]
#[ignore = "a measurement; run in release with --nocapture"]
fn measure_tree_and_canonical() {
    let _one = MEASURING
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    for (name, input) in [
        ("array of 1s", array_of_ones()),
        ("string", long_string()),
        ("reversed object", reversed_object()),
        (
            "object with one large member",
            object_with_one_large_member(),
        ),
    ] {
        let (tree, tree_peak, tree_seconds) = measure(|| {
            let json = parse(&input).unwrap();
            let value = serde_json::to_value(&json).unwrap();
            drop(json);
            serde_json_canonicalizer::to_vec(&value).unwrap()
        });
        let (new, new_peak, new_seconds) = measure(|| canonicalize(&input).unwrap());
        assert_eq!(tree, new);
        let body = body_around(&input);
        let (_, spans_peak, spans_seconds) =
            measure(|| object_members(&body, &mut |_, _| {}).unwrap());
        println!(
            "{name}: {} MiB in; tree {tree_seconds:.2} s, peak {} MiB; \
             canonicalize {new_seconds:.2} s, peak {} MiB; \
             object_members of a body around it {spans_seconds:.2} s, peak {} MiB",
            input.len() / MIB,
            tree_peak / MIB,
            new_peak / MIB,
            spans_peak / MIB,
        );
    }
}
