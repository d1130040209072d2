//! Blob names: `sha256:` followed by the 64 lowercase hex digits of the
//! digest. No other spelling names a blob.

const PREFIX: &str = "sha256:";

/// The digest a well-formed name carries.
pub fn parse(name: &str) -> Option<Vec<u8>> {
    let hex = name.strip_prefix(PREFIX)?.as_bytes();
    if hex.len() != 64 {
        return None;
    }
    hex.chunks(2)
        .map(|pair| Some(nibble(pair[0])? << 4 | nibble(pair[1])?))
        .collect()
}

/// The name of a digest.
pub fn format(digest: &[u8]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut name = String::with_capacity(PREFIX.len() + 2 * digest.len());
    name.push_str(PREFIX);
    for byte in digest {
        name.push(DIGITS[usize::from(byte >> 4)] as char);
        name.push(DIGITS[usize::from(byte & 15)] as char);
    }
    name
}

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
