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
                let hex = text.strip_prefix($prefix)?.as_bytes();
                if hex.len() != 32 {
                    return None;
                }
                let mut octets = [0u8; 16];
                for (i, pair) in hex.chunks(2).enumerate() {
                    octets[i] = nibble(pair[0])? << 4 | nibble(pair[1])?;
                }
                Some($name(octets))
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str($prefix)?;
                for byte in self.0 {
                    write!(f, "{byte:02x}")?;
                }
                Ok(())
            }
        }

        impl fmt::Debug for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                fmt::Display::fmt(self, f)
            }
        }
    };
}

identifier!(RootId, "rt_", "Names the logical hierarchy.");
identifier!(SpaceId, "spc_", "One space and its journal.");
identifier!(InstanceId, "jinst_", "The store lineage.");

fn nibble(digit: u8) -> Option<u8> {
    match digit {
        b'0'..=b'9' => Some(digit - b'0'),
        b'a'..=b'f' => Some(digit - b'a' + 10),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_strictness() {
        let text = "spc_00112233445566778899aabbccddeeff";
        let id = SpaceId::parse(text).unwrap();
        assert_eq!(id.to_string(), text);
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
