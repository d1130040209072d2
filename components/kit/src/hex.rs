//! Lowercase hexadecimal, the only spelling identifiers and digests take.

/// The octets of `text`, if it is lowercase hex of even length.
pub fn decode_lower(text: &str) -> Option<Vec<u8>> {
    let digits = text.as_bytes();
    if !digits.len().is_multiple_of(2) {
        return None;
    }
    digits
        .chunks(2)
        .map(|pair| Some(nibble(pair[0])? << 4 | nibble(pair[1])?))
        .collect()
}

/// `octets` as lowercase hex.
pub fn encode_lower(octets: &[u8]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut text = String::with_capacity(2 * octets.len());
    for byte in octets {
        text.push(DIGITS[usize::from(byte >> 4)] as char);
        text.push(DIGITS[usize::from(byte & 15)] as char);
    }
    text
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

    #[test]
    fn round_trip_and_strictness() {
        assert_eq!(encode_lower(&[0x00, 0xab, 0xff]), "00abff");
        assert_eq!(decode_lower("00abff"), Some(vec![0x00, 0xab, 0xff]));
        assert_eq!(decode_lower(""), Some(vec![]));
        for bad in ["0", "AB", "0g", "+1"] {
            assert_eq!(decode_lower(bad), None, "{bad}");
        }
    }
}
