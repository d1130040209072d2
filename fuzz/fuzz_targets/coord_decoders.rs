//! The coordination service's network-facing decoders on arbitrary input:
//! query parameters and request bodies of every operation, journal facts
//! and their JSON forms, and export cursors answer a value or a refusal,
//! never a panic; a refusal's code and status are a row of the refusal
//! table; a fact that decodes re-encodes to the same bytes; only a sealed
//! cursor opens.

#![no_main]

use lab_coord::fuzzing;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    fuzzing::check_params(data);
    fuzzing::check_requests(data);
    fuzzing::check_facts(data);
    fuzzing::check_fact_json(data);
    fuzzing::check_cursor(data);
});
