//! The journal's network-facing decoders on arbitrary input: every request
//! decoder and both cursor kinds answer a value or a refusal, never a panic;
//! a refusal always maps to a status the error table lists.

#![no_main]

use lab_journal::cursor::{self, CursorKey};
use lab_journal::refusal::Refusal;
use lab_journal::requests;
use libfuzzer_sys::fuzz_target;

fn check<T>(outcome: Result<T, Refusal>) {
    if let Err(refusal) = outcome {
        assert!(matches!(refusal.status(), 400 | 404 | 409 | 413 | 500 | 503));
    }
}

fuzz_target!(|data: &[u8]| {
    check(requests::decode_create(data));
    check(requests::decode_resolve(data));
    check(requests::decode_children(data));
    check(requests::decode_head(data));
    check(requests::decode_append(data));
    check(requests::decode_read(data));
    check(requests::decode_query(data));
    if let Ok(text) = std::str::from_utf8(data) {
        let key = CursorKey([7; 32]);
        check(cursor::open_children(&key, text));
        check(cursor::open_query(&key, text));
    }
});
