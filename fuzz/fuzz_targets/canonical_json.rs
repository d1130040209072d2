//! Canonical JSON without a tree against the tree it replaces, on arbitrary
//! input: both accept the same inputs with byte-identical RFC 8785 output,
//! refuse the same inputs with the same refusal, and the top-level member
//! spans of an object are its members.

#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    lab_strict_json::fuzzing::check_canonical(data);
});
