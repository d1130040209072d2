//! The values codec on arbitrary input: decoding never panics, and whatever
//! decodes re-encodes to exactly the input bytes.

#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let decoded = lab_values::decode(data);
    if let Ok(value) = &decoded {
        assert_eq!(lab_values::encode(value), data);
    }
    if let Ok(fact) = lab_values::decode_fact(data) {
        assert!(fact.as_fact().is_some());
        assert_eq!(Some(&fact), decoded.as_ref().ok());
    }
});
