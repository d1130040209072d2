//! Strict JSON on arbitrary input: parsing never panics; what parses has no
//! duplicate member and serializes to JSON that parses to the same value;
//! canonical base64 round-trips.

#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    lab_strict_json::fuzzing::check_parse(data);
    lab_strict_json::fuzzing::check_base64(data);
});
