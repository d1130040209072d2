//! Text grammars of the profile's identifiers, principals and instants.
//!
//! Each check is exact: a text either is in the grammar or it is refused;
//! nothing is trimmed, case-folded or normalized.

/// Greatest occurrence position, 2^53 - 1.
pub const MAX_POSITION: u64 = (1 << 53) - 1;

/// Greatest length of an assertion ID, in Unicode scalar values.
pub const MAX_ASSERTION_ID_CHARS: usize = 128;

/// Whether `text` is `rt_` followed by 32 lowercase hex digits.
pub fn is_root_id(text: &str) -> bool {
    prefixed_hex(text, "rt_", 32)
}

/// Whether `text` is `spc_` followed by 32 lowercase hex digits.
pub fn is_space_id(text: &str) -> bool {
    prefixed_hex(text, "spc_", 32)
}

/// Whether `text` is a principal: `ed25519:` followed by 64 lowercase hex
/// digits.
pub fn is_publisher(text: &str) -> bool {
    prefixed_hex(text, "ed25519:", 64)
}

/// Whether `text` is a request ID: `req_` followed by 64 lowercase hex
/// digits.
pub fn is_request_id(text: &str) -> bool {
    prefixed_hex(text, "req_", 64)
}

/// Whether `text` is an assertion ID: 1 to 128 Unicode scalar values.
pub fn is_assertion_id(text: &str) -> bool {
    !text.is_empty() && text.chars().count() <= MAX_ASSERTION_ID_CHARS
}

/// Whether `text` is an acceptance instant: RFC 3339 in UTC with exactly six
/// fractional digits and `Z`, `YYYY-MM-DDTHH:MM:SS.ffffffZ`, naming a real
/// calendar day (proleptic Gregorian), hours 00-23, minutes and seconds
/// 00-59 (no leap second).
pub fn is_accepted_at(text: &str) -> bool {
    let b = text.as_bytes();
    if b.len() != 27 {
        return false;
    }
    let punctuation = [
        (4, b'-'),
        (7, b'-'),
        (10, b'T'),
        (13, b':'),
        (16, b':'),
        (19, b'.'),
        (26, b'Z'),
    ];
    if punctuation.iter().any(|&(at, c)| b[at] != c) {
        return false;
    }
    let digits = |from: usize, to: usize| -> Option<u32> {
        b[from..to].iter().try_fold(0u32, |n, &d| {
            d.is_ascii_digit().then(|| n * 10 + u32::from(d - b'0'))
        })
    };
    let (Some(year), Some(month), Some(day), Some(hour), Some(minute), Some(second), Some(_)) = (
        digits(0, 4),
        digits(5, 7),
        digits(8, 10),
        digits(11, 13),
        digits(14, 16),
        digits(17, 19),
        digits(20, 26),
    ) else {
        return false;
    };
    (1..=12).contains(&month)
        && (1..=days_in_month(year, month)).contains(&day)
        && hour <= 23
        && minute <= 59
        && second <= 59
}

fn days_in_month(year: u32, month: u32) -> u32 {
    match month {
        2 if year.is_multiple_of(4) && (!year.is_multiple_of(100) || year.is_multiple_of(400)) => {
            29
        }
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    }
}

fn prefixed_hex(text: &str, prefix: &str, digits: usize) -> bool {
    text.strip_prefix(prefix).is_some_and(|rest| {
        rest.len() == digits
            && rest
                .bytes()
                .all(|d| d.is_ascii_digit() || (b'a'..=b'f').contains(&d))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accepted_at_grammar() {
        for good in [
            "2026-11-22T14:10:10.123456Z",
            "2024-02-29T00:00:00.000000Z",
            "2000-02-29T23:59:59.999999Z",
            "0000-01-01T00:00:00.000000Z",
            "9999-12-31T23:59:59.999999Z",
        ] {
            assert!(is_accepted_at(good), "{good}");
        }
        for bad in [
            "",
            "2026-11-22T14:10:10Z",
            "2026-11-22T14:10:10.123Z",
            "2026-11-22T14:10:10.1234567Z",
            "2026-11-22t14:10:10.123456Z",
            "2026-11-22T14:10:10.123456z",
            "2026-11-22T14:10:10.123456+00:00",
            "2026-11-22 14:10:10.123456Z",
            "2026-13-22T14:10:10.123456Z",
            "2026-00-22T14:10:10.123456Z",
            "2026-11-00T14:10:10.123456Z",
            "2026-11-31T14:10:10.123456Z",
            "2023-02-29T14:10:10.123456Z",
            "1900-02-29T14:10:10.123456Z",
            "2026-11-22T24:00:00.000000Z",
            "2026-11-22T14:60:10.123456Z",
            "2026-11-22T14:10:60.123456Z",
            "2026-11-22T14:10:10.12345aZ",
            "+026-11-22T14:10:10.123456Z",
            "2026-11-22T14:10:10.12345\u{0660}Z",
        ] {
            assert!(!is_accepted_at(bad), "{bad}");
        }
    }

    #[test]
    fn the_clock_writes_the_grammar() {
        for (seconds, nanoseconds) in [
            (0, 0),
            (1_795_356_610, 123_456_789),
            (951_782_400, 999_999_999),
            (4_107_542_399, 999_999),
        ] {
            let text = lab_kit::time::rfc3339_micros(seconds, nanoseconds);
            assert!(is_accepted_at(&text), "{text}");
        }
    }

    #[test]
    fn identifiers() {
        let hex32 = "0123456789abcdef0123456789abcdef";
        assert!(is_root_id(&format!("rt_{hex32}")));
        assert!(!is_root_id(&format!("rt_{}", hex32.to_uppercase())));
        assert!(!is_root_id(&format!("rt_{hex32}0")));
        assert!(!is_root_id(&format!("spc_{hex32}")));
        assert!(is_space_id(&format!("spc_{hex32}")));
        assert!(!is_space_id(&format!("spc_{}", &hex32[1..])));
        assert!(is_publisher(&format!("ed25519:{hex32}{hex32}")));
        assert!(!is_publisher(&format!("ed25519:{hex32}")));
        assert!(is_request_id(&format!("req_{hex32}{hex32}")));
        assert!(!is_request_id(&format!("req_{hex32}{hex32}g")));
        assert!(is_assertion_id("a"));
        assert!(is_assertion_id(&"é".repeat(128)));
        assert!(!is_assertion_id(""));
        assert!(!is_assertion_id(&"a".repeat(129)));
    }
}
