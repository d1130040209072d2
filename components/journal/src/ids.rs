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
                let hex = text.strip_prefix($prefix)?;
                let octets = lab_kit::hex::decode_lower(hex)?;
                Some($name(octets.try_into().ok()?))
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str($prefix)?;
                f.write_str(&lab_kit::hex::encode_lower(&self.0))
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
