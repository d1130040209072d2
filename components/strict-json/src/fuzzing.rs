//! Entry points for fuzz targets.
//!
//! Each function takes arbitrary bytes, runs a decoder on them and checks
//! what must hold of its answer. It panics only when an invariant is broken,
//! so a fuzz target is a one-line call.

use ::base64::engine::general_purpose::STANDARD;
use ::base64::Engine as _;

use crate::base64::decode_canonical_base64;
use crate::canonical::{canonicalize, canonicalize_with_max_depth, object_members};
use crate::error::Error;
use crate::parse::{parse, parse_with_max_depth, MAX_DEPTH};
use crate::value::{Json, Number};

/// Runs [`parse`] on `data` and checks its answer:
///
/// - an accepted input is UTF-8, nests at most [`MAX_DEPTH`] deep, has no
///   duplicate member names, is refused as [`Error::TooDeep`] with a bound
///   one below its depth and accepted with its exact depth, and its
///   re-encoding parses to the same value;
/// - `Empty` only for JSON whitespace, `InvalidUtf8` only for malformed
///   UTF-8 at the reported offset, and every other refusal is for valid UTF-8
///   with an offset inside the input.
pub fn check_parse(data: &[u8]) {
    let utf8 = std::str::from_utf8(data);
    match parse(data) {
        Ok(json) => {
            assert!(utf8.is_ok(), "accepted malformed UTF-8");
            let depth = depth(&json);
            assert!(depth <= MAX_DEPTH, "accepted depth {depth}");
            assert_unique_names(&json);
            assert_eq!(parse_with_max_depth(data, depth).as_ref(), Ok(&json));
            if depth > 0 {
                assert!(matches!(
                    parse_with_max_depth(data, depth - 1),
                    Err(Error::TooDeep { .. })
                ));
            }
            let encoded = serde_json::to_vec(&json).expect("a parsed value serializes");
            let reparsed = parse(&encoded).expect("a re-encoded value parses");
            assert!(same(&json, &reparsed), "{json:?} != {reparsed:?}");
        }
        Err(Error::Empty) => {
            assert!(data
                .iter()
                .all(|b| matches!(b, b' ' | b'\t' | b'\n' | b'\r')));
        }
        Err(Error::InvalidUtf8 { offset }) => match utf8 {
            Ok(_) => panic!("valid UTF-8 refused as malformed"),
            Err(err) => assert_eq!(err.valid_up_to(), offset),
        },
        Err(error) => {
            assert!(utf8.is_ok(), "malformed UTF-8 refused as {error:?}");
            let offset = error.offset().expect("refusal has an offset");
            assert!(offset <= data.len(), "{error:?} beyond {}", data.len());
            assert!(!error.to_string().is_empty());
        }
    }
}

/// Runs [`canonicalize`] and [`object_members`] on `data` and checks
/// them against the tree they replace, [`parse`] then
/// `serde_json_canonicalizer` over the `serde_json::Value` of the tree:
///
/// - both accept or both refuse, with the same refusal (for
///   [`Error::Syntax`], the same kind with an offset inside the input);
/// - accepted, the canonical bytes are identical;
/// - the same holds under depth bounds of 1 and 3;
/// - the member spans of an object are its members in order, and each span
///   parses (one level deeper) to the member's value.
pub fn check_canonical(data: &[u8]) {
    let tree = parse(data);
    let old = tree.as_ref().map(|json| {
        let value = serde_json::to_value(json).expect("strict JSON converts");
        serde_json_canonicalizer::to_vec(&value).expect("a value canonicalizes")
    });
    let new = canonicalize(data);
    match (&old, &new) {
        (Ok(old), Ok(new)) => assert!(
            old == new,
            "{:?} canonicalized as {:?}, not {:?}",
            String::from_utf8_lossy(data),
            String::from_utf8_lossy(new),
            String::from_utf8_lossy(old)
        ),
        (Err(old), Err(new)) => assert_same_refusal(data, old, new),
        _ => panic!(
            "{:?}: tree {old:?}, canonical {new:?}",
            String::from_utf8_lossy(data)
        ),
    }
    // A lower bound brings depth refusals, and their order against
    // duplicate names, into reach of small inputs.
    for limit in [1, 3] {
        match (
            parse_with_max_depth(data, limit),
            canonicalize_with_max_depth(data, limit),
        ) {
            (Ok(_), Ok(bytes)) => assert_eq!(Ok(&bytes), old.as_ref()),
            (Err(old), Err(new)) => assert_same_refusal(data, &old, &new),
            (old, new) => panic!("limit {limit}: tree {old:?}, canonical {new:?}"),
        }
    }
    let mut members = Vec::new();
    let object = object_members(data, &mut |name, span| {
        members.push((name.to_owned(), span));
    });
    match (&tree, object) {
        (Ok(Json::Object(object)), Ok(true)) => {
            assert_eq!(object.len(), members.len());
            for ((name, value), (member, span)) in object.iter().zip(&members) {
                assert_eq!(name, member);
                let span = &data[span.clone()];
                assert_eq!(
                    parse_with_max_depth(span, MAX_DEPTH - 1).as_ref(),
                    Ok(value)
                );
            }
        }
        (Ok(json), Ok(false)) => assert!(json.as_object().is_none() && members.is_empty()),
        (Err(old), Err(new)) => assert_same_refusal(data, old, &new),
        (tree, object) => panic!("tree {tree:?}, object_members {object:?}"),
    }
}

fn assert_same_refusal(data: &[u8], old: &Error, new: &Error) {
    match (old, new) {
        (Error::Syntax { .. }, Error::Syntax { offset, .. }) => assert!(*offset <= data.len()),
        _ => assert_eq!(old, new, "{:?}", String::from_utf8_lossy(data)),
    }
}

/// Runs [`decode_canonical_base64`] on `data` (if UTF-8) and checks that an
/// accepted string is exactly the standard padded encoding of its result,
/// and that the encoding of `data` itself is accepted and decodes to `data`.
pub fn check_base64(data: &[u8]) {
    if let Ok(text) = std::str::from_utf8(data) {
        if let Some(bytes) = decode_canonical_base64(text) {
            assert_eq!(STANDARD.encode(bytes), text);
        }
    }
    let encoded = STANDARD.encode(data);
    assert_eq!(decode_canonical_base64(&encoded).as_deref(), Some(data));
}

fn depth(json: &Json) -> usize {
    match json {
        Json::Array(items) => 1 + items.iter().map(depth).max().unwrap_or(0),
        Json::Object(object) => 1 + object.iter().map(|(_, v)| depth(v)).max().unwrap_or(0),
        _ => 0,
    }
}

fn assert_unique_names(json: &Json) {
    match json {
        Json::Array(items) => items.iter().for_each(assert_unique_names),
        Json::Object(object) => {
            let mut names: Vec<&str> = object.iter().map(|(name, _)| name).collect();
            names.sort_unstable();
            assert!(
                names.windows(2).all(|pair| pair[0] != pair[1]),
                "duplicate name accepted"
            );
            object.iter().for_each(|(_, v)| assert_unique_names(v));
        }
        _ => {}
    }
}

/// Structural equality where `Number::Other` may differ in the last few
/// units of precision: `serde_json` reads decimal literals with a fast path
/// that is not always correctly rounded.
fn same(a: &Json, b: &Json) -> bool {
    match (a, b) {
        (Json::Number(Number::Other(x)), Json::Number(Number::Other(y))) => {
            x == y || (x - y).abs() <= x.abs().max(y.abs()) * 8.0 * f64::EPSILON
        }
        (Json::Array(xs), Json::Array(ys)) => {
            xs.len() == ys.len() && xs.iter().zip(ys).all(|(x, y)| same(x, y))
        }
        (Json::Object(xs), Json::Object(ys)) => {
            xs.len() == ys.len()
                && xs
                    .iter()
                    .zip(ys.iter())
                    .all(|((xn, xv), (yn, yv))| xn == yn && same(xv, yv))
        }
        _ => a == b,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// xorshift64*: a fixed seed gives the same inputs on every run.
    struct Rng(u64);

    impl Rng {
        fn next(&mut self) -> u64 {
            self.0 ^= self.0 >> 12;
            self.0 ^= self.0 << 25;
            self.0 ^= self.0 >> 27;
            self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
        }

        fn below(&mut self, n: usize) -> usize {
            (self.next() % n as u64) as usize
        }
    }

    const SEEDS: &[&str] = &[
        r#"{"names":["a","b"]}"#,
        r#"{"root_id":"rt_00","space_id":"spc_11","path":["x","y"]}"#,
        r#"{"filter":{"predicate":"Zg==","positions":{"after":1,"through":null}}}"#,
        r#"[1,-2,3.5e-7,-0,18446744073709551616,true,false,null]"#,
        r#""\ud83d\ude00\u0061\n\"\\""#,
        r#"{"a":{"b":{"c":[[[{}]]]}},"\u0061b":"é"}"#,
        "[[[[[[[[[[[[[[[[1]]]]]]]]]]]]]]]]",
        " \t\r\n{} \n",
        "9007199254740991",
        "",
    ];

    /// Bytes that steer mutations toward interesting parser states.
    const TOKENS: &[&[u8]] = &[
        b"{",
        b"}",
        b"[",
        b"]",
        b":",
        b",",
        b"\"",
        b"\\",
        b"\\u",
        b"\\ud83d",
        b"\\ude00",
        b"\\u0061",
        b"0",
        b"-",
        b".",
        b"e",
        b"E+",
        b"1e400",
        b"null",
        b"true",
        b" ",
        b"\n",
        b"\xff",
        b"\xed\xa0\x80",
        b"\xc3",
        b"\xef\xbb\xbf",
        b"\x00",
        b"\"a\":1",
        b"\"a\"",
        b"=",
        b"Zg==",
        b"-_",
    ];

    fn mutate(rng: &mut Rng, input: &mut Vec<u8>) {
        match rng.below(7) {
            0 if !input.is_empty() => {
                let i = rng.below(input.len());
                input[i] ^= 1 << rng.below(8);
            }
            1 if !input.is_empty() => {
                let i = rng.below(input.len());
                input.remove(i);
            }
            2 => {
                let token = TOKENS[rng.below(TOKENS.len())];
                let at = rng.below(input.len() + 1);
                input.splice(at..at, token.iter().copied());
            }
            3 if !input.is_empty() => {
                let start = rng.below(input.len());
                let end = start + rng.below(input.len() - start + 1);
                let copy = input[start..end].to_vec();
                let at = rng.below(input.len() + 1);
                input.splice(at..at, copy);
            }
            4 => {
                let at = rng.below(input.len() + 1);
                input.truncate(at);
            }
            5 => {
                let other = SEEDS[rng.below(SEEDS.len())].as_bytes();
                let at = rng.below(input.len() + 1);
                input.splice(at..at, other.iter().copied());
            }
            _ => {
                let at = rng.below(input.len() + 1);
                input.insert(at, rng.next() as u8);
            }
        }
    }

    #[test]
    fn mutated_inputs_never_break_invariants() {
        let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
        let mut accepted = 0;
        let mut refused = 0;
        for _ in 0..5000 {
            let mut input = SEEDS[rng.below(SEEDS.len())].as_bytes().to_vec();
            for _ in 0..1 + rng.below(4) {
                mutate(&mut rng, &mut input);
            }
            check_parse(&input);
            check_base64(&input);
            if parse(&input).is_ok() {
                accepted += 1;
            } else {
                refused += 1;
            }
        }
        // Both sides of the decoder are exercised.
        assert!(accepted > 250 && refused > 250, "{accepted} / {refused}");
    }

    /// Names that sort differently by UTF-16 units and by code points, and
    /// that collide when one is written escaped and another is not.
    const NAMES: &[&str] = &[
        "a",
        "b",
        "A",
        "",
        "aa",
        "é",
        "\u{e000}",
        "\u{ffff}",
        "😀",
        "\u{10ffff}",
        "\"",
        "\n",
        "/",
    ];

    fn whitespace(rng: &mut Rng, out: &mut String) {
        for _ in 0..rng.below(3).saturating_sub(1) {
            out.push([' ', '\t', '\n', '\r'][rng.below(4)]);
        }
    }

    /// `text` as a JSON string, each character written raw or escaped at
    /// random (astral ones as surrogate pairs).
    fn string(rng: &mut Rng, text: &str, out: &mut String) {
        out.push('"');
        for c in text.chars() {
            let must = c < ' ' || c == '"' || c == '\\';
            if must || rng.below(4) == 0 {
                match rng.below(3) {
                    0 if c == '/' => out.push_str("\\/"),
                    0 if c == '\n' => out.push_str("\\n"),
                    0 if c == '"' => out.push_str("\\\""),
                    _ => {
                        let mut units = [0; 2];
                        for unit in c.encode_utf16(&mut units) {
                            out.push_str(&format!("\\u{unit:04X}"));
                        }
                    }
                }
            } else {
                out.push(c);
            }
        }
        out.push('"');
    }

    fn text(rng: &mut Rng) -> String {
        const CHARS: &[char] = &[
            'x',
            ' ',
            '\0',
            '\u{1f}',
            '\u{7f}',
            '\u{8}',
            '\t',
            '"',
            '\\',
            '/',
            'é',
            '\u{2028}',
            '\u{e000}',
            '😀',
            '\u{10ffff}',
        ];
        (0..rng.below(6))
            .map(|_| CHARS[rng.below(CHARS.len())])
            .collect()
    }

    fn number(rng: &mut Rng, out: &mut String) {
        if rng.below(2) == 0 {
            out.push('-');
        }
        let longest = if rng.below(4) == 0 { 25 } else { 4 };
        let digits = 1 + rng.below(longest);
        out.push(char::from(b'0' + rng.below(10) as u8));
        if !out.ends_with('0') {
            for _ in 1..digits {
                out.push(char::from(b'0' + rng.below(10) as u8));
            }
        }
        if rng.below(3) == 0 {
            out.push('.');
            for _ in 0..1 + rng.below(20) {
                out.push(char::from(b'0' + rng.below(10) as u8));
            }
        }
        if rng.below(3) == 0 {
            out.push(['e', 'E'][rng.below(2)]);
            out.push_str(["", "+", "-"][rng.below(3)]);
            let bound = [3, 30, 330][rng.below(3)];
            out.push_str(&rng.below(bound).to_string());
        }
    }

    /// A random JSON value; objects mostly have distinct names.
    fn value(rng: &mut Rng, depth: usize, out: &mut String) {
        whitespace(rng, out);
        let container = depth < 6 && rng.below(3) == 0;
        match (container, rng.below(6)) {
            (true, 0..=2) => {
                out.push('{');
                let mut names: Vec<&str> = NAMES.to_vec();
                for i in 0..rng.below(7) {
                    if i > 0 {
                        out.push(',');
                    }
                    let name = if rng.below(40) == 0 {
                        NAMES[rng.below(NAMES.len())]
                    } else if names.is_empty() {
                        break;
                    } else {
                        names.swap_remove(rng.below(names.len()))
                    };
                    whitespace(rng, out);
                    string(rng, name, out);
                    whitespace(rng, out);
                    out.push(':');
                    value(rng, depth + 1, out);
                }
                whitespace(rng, out);
                out.push('}');
            }
            (true, _) => {
                out.push('[');
                for i in 0..rng.below(5) {
                    if i > 0 {
                        out.push(',');
                    }
                    value(rng, depth + 1, out);
                }
                out.push(']');
            }
            (false, 0 | 1) => number(rng, out),
            (false, 2 | 3) => {
                let text = text(rng);
                string(rng, &text, out);
            }
            (false, 4) => out.push_str(["true", "false"][rng.below(2)]),
            (false, _) => out.push_str("null"),
        }
        whitespace(rng, out);
    }

    #[test]
    fn canonical_agrees_with_the_tree_on_random_documents() {
        let mut rng = Rng(0x2545_f491_4f6c_dd1d);
        let (mut accepted, mut refused) = (0, 0);
        for round in 0..6000 {
            let mut document = String::new();
            value(&mut rng, 0, &mut document);
            let mut input = document.into_bytes();
            if round % 3 == 0 {
                for _ in 0..1 + rng.below(3) {
                    mutate(&mut rng, &mut input);
                }
            }
            check_canonical(&input);
            if parse(&input).is_ok() {
                accepted += 1;
            } else {
                refused += 1;
            }
        }
        assert!(accepted > 2000 && refused > 1000, "{accepted} / {refused}");
    }

    #[test]
    fn canonical_agrees_with_the_tree_on_mutated_seeds() {
        let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
        for _ in 0..3000 {
            let mut input = SEEDS[rng.below(SEEDS.len())].as_bytes().to_vec();
            for _ in 0..1 + rng.below(4) {
                mutate(&mut rng, &mut input);
            }
            check_canonical(&input);
        }
        for seed in SEEDS {
            check_canonical(seed.as_bytes());
        }
    }

    #[test]
    fn seeds_satisfy_invariants() {
        for seed in SEEDS {
            check_parse(seed.as_bytes());
            check_base64(seed.as_bytes());
        }
        check_parse(&[b'['; 10_000]);
        check_parse(b"\xff");
    }
}
