//! Blob names: `sha256:` followed by the 64 lowercase hex digits of the
//! digest. No other spelling names a blob.

const PREFIX: &str = "sha256:";

/// The digest a well-formed name carries.
pub fn parse(name: &str) -> Option<Vec<u8>> {
    let hex = name.strip_prefix(PREFIX)?;
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
}
