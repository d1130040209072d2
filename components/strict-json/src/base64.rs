//! Canonical padded standard base64 (RFC 4648 section 4).

use ::base64::engine::general_purpose::STANDARD;
use ::base64::Engine as _;

/// Decodes `s` if it is canonical padded standard base64: decoding and then
/// re-encoding with the standard alphabet and `=` padding reproduces `s`
/// exactly.
///
/// Refused: missing or extra padding, nonzero unused bits before the
/// padding, the URL-safe alphabet, whitespace and any other byte outside the
/// alphabet. The empty string is canonical and decodes to no bytes.
pub fn decode_canonical_base64(s: &str) -> Option<Vec<u8>> {
    // Padded base64 always has a multiple of four characters.
    if !s.len().is_multiple_of(4) {
        return None;
    }
    let bytes = STANDARD.decode(s).ok()?;
    (STANDARD.encode(&bytes) == s).then_some(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn canonical_strings_accepted() {
        for (text, bytes) in [
            ("", &b""[..]),
            ("Zg==", b"f"),
            ("Zm8=", b"fo"),
            ("Zm9v", b"foo"),
            ("Zm9vYmFy", b"foobar"),
            ("+/+/", &[0xfb, 0xff, 0xbf]),
            ("AA==", &[0]),
        ] {
            assert_eq!(
                decode_canonical_base64(text).as_deref(),
                Some(bytes),
                "{text:?}"
            );
        }
    }

    #[test]
    fn non_canonical_strings_refused() {
        for text in [
            "Zg",       // missing padding
            "Zg=",      // short padding
            "Zm8",      // missing padding
            "Zg===",    // extra padding
            "Zm9v====", // extra padding block
            "Zh==",     // nonzero unused bits
            "Zm9=",     // nonzero unused bits
            "Zm9v\n",   // trailing whitespace
            " Zm9v",    // leading whitespace
            "Zm 9v",    // inner whitespace
            "Zm9v\r\n", // line ending
            "-_==",     // URL-safe alphabet
            "Zm-v",     // URL-safe alphabet
            "Zg==Zg==", // padding inside
            "=", "====", "Zm9v!", "Zé==",
        ] {
            assert_eq!(decode_canonical_base64(text), None, "{text:?}");
        }
    }

    #[test]
    fn every_short_input_round_trips() {
        for len in 0..=5usize {
            let bytes: Vec<u8> = (0..len)
                .map(|i| (i as u8).wrapping_mul(97) ^ 0xa5)
                .collect();
            let text = STANDARD.encode(&bytes);
            assert_eq!(decode_canonical_base64(&text), Some(bytes));
        }
    }
}
