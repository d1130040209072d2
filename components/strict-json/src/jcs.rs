//! RFC 8785 (JCS) output pieces: escaped strings, numbers, and reading
//! member names back.
//!
//! The functions that read bytes rely on them being valid JSON: input the
//! scanner has already checked, or output written here. [`member_end`]
//! also relies on the output having no whitespace.

use std::cmp::Ordering;

use crate::parse::parse;

/// Appends `c` as it appears inside a canonical string: `"`, `\` and the C0
/// controls escaped (the two-letter forms where JSON has them, else
/// `\u00xx` in lowercase hex), everything else as its UTF-8 bytes.
pub(crate) fn write_char(out: &mut Vec<u8>, c: char) {
    match c {
        '"' => out.extend_from_slice(b"\\\""),
        '\\' => out.extend_from_slice(b"\\\\"),
        '\u{8}' => out.extend_from_slice(b"\\b"),
        '\u{c}' => out.extend_from_slice(b"\\f"),
        '\n' => out.extend_from_slice(b"\\n"),
        '\r' => out.extend_from_slice(b"\\r"),
        '\t' => out.extend_from_slice(b"\\t"),
        '\0'..='\u{1f}' => {
            const HEX: &[u8; 16] = b"0123456789abcdef";
            let byte = c as u8;
            out.extend_from_slice(b"\\u00");
            out.push(HEX[usize::from(byte >> 4)]);
            out.push(HEX[usize::from(byte & 0xf)]);
        }
        _ => {
            let mut utf8 = [0; 4];
            out.extend_from_slice(c.encode_utf8(&mut utf8).as_bytes());
        }
    }
}

/// Integer literals of at most this many digits are exact as `f64` and
/// are written by JCS as themselves.
const VERBATIM_DIGITS: usize = 15;

/// Appends the canonical form of the number `literal`, which matches the
/// JSON number grammar. `None` if the value is outside the range of `f64`.
///
/// The value is what [`parse`] makes of the literal and its text is what
/// `serde_json_canonicalizer` writes for that value, so the bytes are those
/// of canonicalizing a parsed tree. The one shortcut: a short integer other
/// than `-0` is its own canonical form.
pub(crate) fn write_number(out: &mut Vec<u8>, literal: &[u8]) -> Option<()> {
    if is_verbatim(literal) {
        out.extend_from_slice(literal);
        return Some(());
    }
    write_number_exactly(out, literal)
}

/// Whether [`write_number`] would accept `literal`, without writing it.
pub(crate) fn number_in_range(literal: &[u8]) -> bool {
    is_verbatim(literal) || parse(literal).is_ok()
}

fn is_verbatim(literal: &[u8]) -> bool {
    let digits = literal.strip_prefix(b"-").unwrap_or(literal);
    digits.len() <= VERBATIM_DIGITS && digits.iter().all(u8::is_ascii_digit) && literal != b"-0"
}

/// [`write_number`] without the shortcut.
pub(crate) fn write_number_exactly(out: &mut Vec<u8>, literal: &[u8]) -> Option<()> {
    let crate::Json::Number(number) = parse(literal).ok()? else {
        unreachable!("a number literal parses as a number")
    };
    serde_json_canonicalizer::to_writer(&number, out).expect("a finite number canonicalizes");
    Some(())
}

/// Index just past the closing quote of the valid JSON string (canonical or
/// not) that opens at `at`.
pub(crate) fn string_end(bytes: &[u8], at: usize) -> usize {
    let mut i = at + 1;
    loop {
        match bytes[i] {
            b'"' => return i + 1,
            // `\x` or the `\u` of `\uXXXX`, whose hex digits hold no quote.
            b'\\' => i += 2,
            _ => i += 1,
        }
    }
}

/// Index of the `,` after the canonical member (or array element) that
/// starts at `at`, or `bytes.len()` if it is the last.
pub(crate) fn member_end(bytes: &[u8], mut at: usize) -> usize {
    let mut depth = 0usize;
    while at < bytes.len() {
        match bytes[at] {
            b'"' => {
                at = string_end(bytes, at);
                continue;
            }
            b'{' | b'[' => depth += 1,
            b'}' | b']' => depth -= 1,
            b',' if depth == 0 => return at,
            _ => {}
        }
        at += 1;
    }
    at
}

/// The characters of the valid JSON string (canonical or not) that opens at
/// `at`, unescaped.
fn name_chars(bytes: &[u8], at: usize) -> impl Iterator<Item = char> + '_ {
    let content = &bytes[at + 1..string_end(bytes, at) - 1];
    let mut chars = std::str::from_utf8(content)
        .expect("a valid string is UTF-8")
        .chars();
    std::iter::from_fn(move || {
        let c = chars.next()?;
        if c != '\\' {
            return Some(c);
        }
        Some(match chars.next()? {
            'b' => '\u{8}',
            'f' => '\u{c}',
            'n' => '\n',
            'r' => '\r',
            't' => '\t',
            'u' => {
                let mut code = hex4(&mut chars);
                if (0xD800..0xDC00).contains(&code) {
                    chars.nth(1); // the `\u` of the low surrogate
                    code = 0x10000 + ((code - 0xD800) << 10) + (hex4(&mut chars) - 0xDC00);
                }
                char::from_u32(code).expect("a valid escape is a scalar value")
            }
            quote_solidus_or_backslash => quote_solidus_or_backslash,
        })
    })
}

/// The four hex digits of a valid `\u` escape.
fn hex4(chars: &mut std::str::Chars) -> u32 {
    chars.by_ref().take(4).fold(0, |value, c| {
        value << 4 | c.to_digit(16).expect("a valid \\u escape")
    })
}

/// The member name written as a JSON string at `at`.
pub(crate) fn name(bytes: &[u8], at: usize) -> String {
    name_chars(bytes, at).collect()
}

/// Orders the names written as JSON strings at `a` and `b` as RFC 8785
/// orders members:
/// by their UTF-16 code units.
pub(crate) fn compare_names(bytes: &[u8], a: usize, b: usize) -> Ordering {
    name_chars(bytes, a)
        .map(utf16_rank)
        .cmp(name_chars(bytes, b).map(utf16_rank))
}

/// A key for `c` whose order is the order of the UTF-16 code units that
/// encode it. Code point order differs only in that U+E000..=U+FFFF (one
/// unit each) sort after the supplementary planes (whose first unit is a
/// surrogate, 0xD800..=0xDBFF); so those move above the rest.
fn utf16_rank(c: char) -> u32 {
    let c = u32::from(c);
    if (0xE000..=0xFFFF).contains(&c) {
        c + 0x11_0000
    } else {
        c
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn canonical_string(text: &str) -> Vec<u8> {
        let mut out = vec![b'"'];
        text.chars().for_each(|c| write_char(&mut out, c));
        out.push(b'"');
        out
    }

    #[test]
    fn escapes_only_what_jcs_escapes() {
        let text = "a\"b\\c/d\u{8}\u{c}\n\r\t\0\u{1f}\u{7f}é😀";
        let expected = serde_json_canonicalizer::to_vec(&text).unwrap();
        assert_eq!(canonical_string(text), expected);
        assert_eq!(name(&expected, 0), text);
        let escaped = br#""\/\u00E9\ud83d\uDE00\u0041\"""#;
        assert_eq!(name(escaped, 0), "/\u{e9}\u{1f600}A\"");
    }

    #[test]
    fn utf16_order_puts_astral_below_private_use() {
        let mut names = ["\u{e000}", "\u{1f600}", "\u{d7ff}", "a", "\u{ffff}", ""];
        names.sort_by(|a, b| a.encode_utf16().cmp(b.encode_utf16()));
        let bytes: Vec<Vec<u8>> = names.iter().map(|n| canonical_string(n)).collect();
        for pair in bytes.windows(2) {
            let joined = [pair[0].clone(), pair[1].clone()].concat();
            assert_eq!(
                compare_names(&joined, 0, pair[0].len()),
                Ordering::Less,
                "{:?}",
                String::from_utf8_lossy(&joined)
            );
        }
    }

    #[test]
    fn short_integers_are_verbatim_and_agree_with_the_exact_path() {
        for literal in [
            "0",
            "7",
            "-7",
            "999999999999999",
            "-999999999999999",
            "9999999999999999",
            "-0",
            "1.0",
            "1e2",
        ] {
            let mut fast = Vec::new();
            let mut exact = Vec::new();
            write_number(&mut fast, literal.as_bytes()).unwrap();
            write_number_exactly(&mut exact, literal.as_bytes()).unwrap();
            assert_eq!(fast, exact, "{literal}");
        }
        assert_eq!(write_number(&mut Vec::new(), b"1e400"), None);
    }

    #[test]
    fn member_end_skips_nested_values_and_strings() {
        let bytes = br#""a":{"b":[1,"x,]"]},"c":2"#;
        assert_eq!(member_end(bytes, 0), 19);
        assert_eq!(member_end(bytes, 20), bytes.len());
    }
}
