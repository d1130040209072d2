//! Entry points for fuzz targets.
//!
//! Each function takes arbitrary bytes, runs a decoder on them and checks
//! what must hold of its answer. It panics only when an invariant is broken,
//! so a fuzz target is a one-line call.

use ::base64::engine::general_purpose::STANDARD;
use ::base64::Engine as _;

use crate::base64::decode_canonical_base64;
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
