//! Identifiers: a prefix and 32 lowercase hex digits of 16 random octets.

use std::fmt;

macro_rules! identifier {
    ($name:ident, $prefix:literal, $doc:literal) => {
        #[doc = $doc]
        #[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
        pub struct $name(pub [u8; 16]);

        impl $name {
            pub const PREFIX: &'static str = $prefix;

            /// The identifier a text names, if it is well formed.
            pub fn parse(text: &str) -> Option<Self> {
                let hex: &[u8; 32] = text.strip_prefix($prefix)?.as_bytes().try_into().ok()?;
                Some($name(parse_hex_digits(hex)?))
            }

            /// The text's length: the prefix and 32 digits.
            pub const TEXT_LEN: usize = $prefix.len() + 32;

            /// The text: `prefix` and 32 lowercase hex digits.
            pub fn text(&self) -> [u8; Self::TEXT_LEN] {
                let mut text = [0; Self::TEXT_LEN];
                let (prefix, digits) = text.split_at_mut($prefix.len());
                prefix.copy_from_slice($prefix.as_bytes());
                digits.copy_from_slice(&hex_digits(&self.0));
                text
            }

            /// Appends [`Self::text`].
            pub fn write_to(&self, out: &mut Vec<u8>) {
                out.extend_from_slice(&self.text());
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(std::str::from_utf8(&self.text()).expect("identifier text is ASCII"))
            }
        }

        impl fmt::Debug for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                fmt::Display::fmt(self, f)
            }
        }
    };
}

/// The 32 lowercase hex digits of 16 octets.
fn hex_digits(octets: &[u8; 16]) -> [u8; 32] {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut out = [0; 32];
    for (pair, byte) in out.chunks_exact_mut(2).zip(octets) {
        pair[0] = DIGITS[usize::from(byte >> 4)];
        pair[1] = DIGITS[usize::from(byte & 15)];
    }
    out
}

/// The 16 octets 32 lowercase hex digits name, if they are that.
fn parse_hex_digits(digits: &[u8; 32]) -> Option<[u8; 16]> {
    fn nibble(digit: u8) -> Option<u8> {
        match digit {
            b'0'..=b'9' => Some(digit - b'0'),
            b'a'..=b'f' => Some(digit - b'a' + 10),
            _ => None,
        }
    }
    let mut out = [0; 16];
    for (byte, pair) in out.iter_mut().zip(digits.chunks_exact(2)) {
        *byte = nibble(pair[0])? << 4 | nibble(pair[1])?;
    }
    Some(out)
}

identifier!(RootId, "rt_", "Names the logical hierarchy.");
identifier!(SpaceId, "spc_", "One space and its journal.");
identifier!(InstanceId, "jinst_", "The store lineage.");

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_strictness() {
        let text = "spc_00112233445566778899aabbccddeeff";
        let id = SpaceId::parse(text).unwrap();
        assert_eq!(id.to_string(), text);
        let mut written = Vec::new();
        id.write_to(&mut written);
        assert_eq!(written, text.as_bytes());
        assert_eq!(SpaceId::TEXT_LEN, text.len());
        assert_eq!(RootId::TEXT_LEN, "rt_".len() + 32);
        assert_eq!(RootId::parse(text), None);
        assert_eq!(SpaceId::parse(&text.to_uppercase()), None);
        assert_eq!(SpaceId::parse("spc_00112233445566778899aabbccddeef"), None);
        assert_eq!(
            SpaceId::parse("spc_00112233445566778899aabbccddeeff0"),
            None
        );
        assert_eq!(SpaceId::parse("spc_0011223344556677889gaabbccddeeff"), None);
    }
}
