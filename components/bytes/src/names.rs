//! Blob names: `sha256:` followed by the 64 lowercase hex digits of the
//! digest. No other spelling names a blob.
//!
//! In a path segment the colon may also be percent-encoded (`%3A` or
//! `%3a`), as path encoders of HTTP clients write it. Every other character
//! of a name is unreserved (RFC 3986 section 2.3), which a URI producer does
//! not percent-encode, so no other escape is accepted.

const PREFIX: &str = "sha256:";
/// The prefix with its colon percent-encoded, in either case of hex digit.
const ENCODED_PREFIXES: [&str; 2] = ["sha256%3A", "sha256%3a"];

/// The digest a well-formed name carries.
pub fn parse(name: &str) -> Option<Vec<u8>> {
    digest_of(name.strip_prefix(PREFIX)?)
}

/// The digest named by the `{name}` segment of a path: a well-formed name,
/// or one whose colon is written `%3A` or `%3a`.
pub fn parse_path_segment(segment: &str) -> Option<Vec<u8>> {
    let hex = ENCODED_PREFIXES
        .iter()
        .find_map(|prefix| segment.strip_prefix(prefix))
        .or_else(|| segment.strip_prefix(PREFIX))?;
    digest_of(hex)
}

fn digest_of(hex: &str) -> Option<Vec<u8>> {
    if hex.len() != 64 {
        return None;
    }
    lab_kit::hex::decode_lower(hex)
}

/// The name of a digest.
pub fn format(digest: &[u8]) -> String {
    format!("{PREFIX}{}", lab_kit::hex::encode_lower(digest))
}

#[cfg(test)]
mod tests {
    use super::*;

    const EMPTY: &str = "sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855";

    #[test]
    fn round_trip() {
        let digest = parse(EMPTY).unwrap();
        assert_eq!(digest.len(), 32);
        assert_eq!(format(&digest), EMPTY);
    }

    #[test]
    fn other_spellings_refused() {
        let upper = EMPTY.replace('e', "E");
        let short = &EMPTY[..EMPTY.len() - 1];
        let long = format!("{EMPTY}0");
        let other_prefix = EMPTY.replace("sha256", "SHA256");
        for bad in [
            upper.as_str(),
            short,
            long.as_str(),
            other_prefix.as_str(),
            "",
            "sha256:",
        ] {
            assert_eq!(parse(bad), None, "{bad}");
        }
        assert_eq!(parse(&EMPTY.replace("sha256:", "sha256%3A")), None);
    }

    #[test]
    fn path_segments_may_encode_the_colon_only() {
        let digest = parse(EMPTY);
        for segment in [
            EMPTY.to_string(),
            EMPTY.replace(':', "%3A"),
            EMPTY.replace(':', "%3a"),
        ] {
            assert_eq!(parse_path_segment(&segment), digest, "{segment}");
        }
        for bad in [
            EMPTY.replace(':', "%3"),
            EMPTY.replace(':', "%253A"),
            EMPTY.replace("sha", "%73ha"),
            EMPTY.replacen('e', "%65", 1),
            EMPTY.replace(':', "%3A").to_uppercase(),
            EMPTY.replace("sha256:", "SHA256%3A"),
        ] {
            assert_eq!(parse_path_segment(&bad), None, "{bad}");
        }
    }
}
