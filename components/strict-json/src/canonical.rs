//! RFC 8785 canonical JSON of strict JSON input, without a value tree.
//!
//! [`canonicalize`] gives, for every input [`parse`](crate::parse()) accepts,
//! the bytes `serde_json_canonicalizer` writes for the parsed value after
//! its conversion to a `serde_json::Value`, and refuses every input `parse`
//! refuses with the same kind of [`Error`]. Its memory is the input, the
//! output, a copy of the largest object whose members it reorders, and one
//! offset per member of the objects open at once: nothing per array element
//! or scalar.
//!
//! [`object_members`] validates a request body the same way and locates
//! its top-level members, so a decoder can parse small members into
//! [`Json`](crate::Json) and canonicalize a large one from its span.

use std::ops::Range;

use crate::error::Error;
use crate::parse::MAX_DEPTH;
use crate::scan::Scanner;

/// The canonical JSON of the one strict JSON value in `input`, nesting at
/// most [`MAX_DEPTH`] deep.
pub fn canonicalize(input: &[u8]) -> Result<Vec<u8>, Error> {
    canonicalize_with_max_depth(input, MAX_DEPTH)
}

/// [`canonicalize`] with a nesting bound of `max_depth`, itself at most
/// [`MAX_DEPTH`] (a larger one is treated as [`MAX_DEPTH`]). A value found
/// `d` containers deep in a body is canonicalized with `MAX_DEPTH - d`.
pub fn canonicalize_with_max_depth(input: &[u8], max_depth: usize) -> Result<Vec<u8>, Error> {
    let mut scanner = Scanner::new(checked(input)?, max_depth.min(MAX_DEPTH), true);
    scanner.document()?;
    Ok(scanner.into_output())
}

/// Validates `body` as [`parse`](crate::parse()) does and, if it is an
/// object, tells `on_member` the unescaped name and the value span of each
/// of its members, in document order. `Ok(true)` for an object, `Ok(false)`
/// for any other strict JSON value.
///
/// `on_member` is called while the rest of the body is still unchecked:
/// what it learns counts only once this returns `Ok`. Each span is a valid
/// value nested one level deep, so `parse_with_max_depth(&body[span],
/// MAX_DEPTH - 1)` and `canonicalize_with_max_depth(&body[span], MAX_DEPTH -
/// 1)` succeed on it. Memory: one offset per member of each object open at
/// once, whatever `on_member` keeps aside.
///
/// ```
/// use lab_strict_json::{canonicalize_with_max_depth, object_members, MAX_DEPTH};
///
/// let body = br#"{"profile":"a/b/1","record":{"b":[1.0,2],"a":"\u00e9"}}"#;
/// let mut record = None;
/// let object = object_members(body, &mut |name, span| {
///     if name == "record" {
///         record = Some(span);
///     }
/// })?;
/// assert!(object);
/// let canonical = canonicalize_with_max_depth(&body[record.unwrap()], MAX_DEPTH - 1)?;
/// assert_eq!(canonical, "{\"a\":\"é\",\"b\":[1,2]}".as_bytes());
/// # Ok::<(), lab_strict_json::Error>(())
/// ```
pub fn object_members(
    body: &[u8],
    on_member: &mut dyn FnMut(&str, Range<usize>),
) -> Result<bool, Error> {
    let mut scanner = Scanner::new(checked(body)?, MAX_DEPTH, false);
    scanner.on_top_member(on_member);
    scanner.document()?;
    Ok(body
        .iter()
        .find(|b| !matches!(b, b' ' | b'\t' | b'\n' | b'\r'))
        == Some(&b'{'))
}

/// `input` if it is UTF-8 with something besides JSON whitespace: the checks
/// [`parse`](crate::parse()) makes before parsing.
fn checked(input: &[u8]) -> Result<&[u8], Error> {
    std::str::from_utf8(input).map_err(|err| Error::InvalidUtf8 {
        offset: err.valid_up_to(),
    })?;
    if input
        .iter()
        .all(|b| matches!(b, b' ' | b'\t' | b'\n' | b'\r'))
    {
        return Err(Error::Empty);
    }
    Ok(input)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::parse::{parse, parse_with_max_depth};

    /// What the service wrote before this module: a parsed tree, converted
    /// to `serde_json::Value`, canonicalized.
    fn through_tree(input: &[u8]) -> Result<Vec<u8>, Error> {
        let json = parse(input)?;
        let value = serde_json::to_value(&json).unwrap();
        Ok(serde_json_canonicalizer::to_vec(&value).unwrap())
    }

    fn canonical_text(input: &str) -> String {
        let bytes = canonicalize(input.as_bytes()).unwrap_or_else(|e| panic!("{input}: {e}"));
        assert_eq!(
            Ok(&bytes),
            through_tree(input.as_bytes()).as_ref(),
            "{input}"
        );
        String::from_utf8(bytes).unwrap()
    }

    fn same_refusal(input: &[u8]) -> Error {
        let old = parse(input).expect_err("old path refuses");
        let new = canonicalize(input).expect_err("new path refuses");
        match (&old, &new) {
            (Error::Syntax { .. }, Error::Syntax { offset, .. }) => {
                assert!(*offset <= input.len())
            }
            _ => assert_eq!(old, new, "{:?}", String::from_utf8_lossy(input)),
        }
        new
    }

    #[test]
    fn scalars_and_empty_containers() {
        assert_eq!(canonical_text(" null "), "null");
        assert_eq!(canonical_text("true"), "true");
        assert_eq!(canonical_text("false"), "false");
        assert_eq!(canonical_text("[ ]"), "[]");
        assert_eq!(canonical_text("{ }"), "{}");
        assert_eq!(canonical_text("[{},[],{\"a\":{}}]"), "[{},[],{\"a\":{}}]");
        assert_eq!(canonical_text("\"\""), "\"\"");
    }

    #[test]
    fn members_sort_by_utf16_code_units() {
        // U+E000 and U+FFFF sort after U+1F600, whose first UTF-16 unit
        // is a surrogate; by code point they would sort before it.
        let text = canonical_text(
            "{\"\u{ffff}\":1,\"\u{e000}\":2,\"\u{1f600}\":3,\"\u{d7ff}\":4,\"b\":5,\"a\":6,\"\":7,\"aa\":8,\"A\":9}",
        );
        assert_eq!(
            text,
            "{\"\":7,\"A\":9,\"a\":6,\"aa\":8,\"b\":5,\"\u{d7ff}\":4,\"\u{1f600}\":3,\"\u{e000}\":2,\"\u{ffff}\":1}"
        );
        // Escaped names sort by what they stand for.
        assert_eq!(
            canonical_text(r#"{"\u0062":1,"\"":2,"\n":3,"\\":4}"#),
            r#"{"\n":3,"\"":2,"\\":4,"b":1}"#
        );
        canonical_text(r#"{"\ud83d\ude00":1,"\uffff":2,"\ue000":3}"#);
    }

    #[test]
    fn nested_objects_sort_at_every_level() {
        assert_eq!(
            canonical_text(r#"{"z":{"y":[{"b":1,"a":[2,{"d":3,"c":4}]}],"x":"s"},"a":0}"#),
            r#"{"a":0,"z":{"x":"s","y":[{"a":[2,{"c":4,"d":3}],"b":1}]}}"#
        );
    }

    #[test]
    fn strings_escape_as_jcs_does() {
        assert_eq!(
            canonical_text(r#""\/\u0041\u00e9\ud83d\ude00\b\f\n\r\t\u0000\u001F\u007f\"\\""#),
            "\"/A\u{e9}\u{1f600}\\b\\f\\n\\r\\t\\u0000\\u001f\u{7f}\\\"\\\\\""
        );
        canonical_text("\"raw é 😀 \u{7f} \u{e000}\"");
    }

    #[test]
    fn numbers_are_written_as_jcs_writes_their_values() {
        for (input, expected) in [
            ("0", "0"),
            ("-0", "0"),
            ("-0.0", "0"),
            ("1.0", "1"),
            ("1e2", "100"),
            ("1E+2", "100"),
            ("1e20", "100000000000000000000"),
            ("1e21", "1e+21"),
            ("1e-7", "1e-7"),
            ("1.5e-6", "0.0000015"),
            ("123456789012345", "123456789012345"),
            ("9007199254740993", "9007199254740992"),
            ("18446744073709551615", "18446744073709552000"),
            ("18446744073709551616", "18446744073709552000"),
            ("-9223372036854775808", "-9223372036854776000"),
            ("-9223372036854775809", "-9223372036854776000"),
            ("0.1", "0.1"),
            ("1.7976931348623157e308", "1.7976931348623157e+308"),
            ("5e-324", "5e-324"),
            ("1e-400", "0"),
        ] {
            assert_eq!(canonical_text(input), expected, "{input}");
        }
        let long = "1".repeat(400);
        assert!(matches!(
            same_refusal(long.as_bytes()),
            Error::Syntax { .. }
        ));
        assert!(matches!(same_refusal(b"[1e400]"), Error::Syntax { .. }));
    }

    #[test]
    fn depth_limit_is_the_parsers() {
        let at_limit = "[".repeat(MAX_DEPTH) + &"]".repeat(MAX_DEPTH);
        canonical_text(&at_limit);
        let objects = "{\"a\":".repeat(MAX_DEPTH) + "1" + &"}".repeat(MAX_DEPTH);
        canonical_text(&objects);
        for input in [
            "[".repeat(MAX_DEPTH + 1) + &"]".repeat(MAX_DEPTH + 1),
            "[".repeat(MAX_DEPTH + 1),
            "{\"a\":".repeat(MAX_DEPTH + 1) + "1" + &"}".repeat(MAX_DEPTH + 1),
            "[{\"a\":".repeat(200_000),
        ] {
            assert!(matches!(
                same_refusal(input.as_bytes()),
                Error::TooDeep {
                    limit: MAX_DEPTH,
                    ..
                }
            ));
        }
        assert!(canonicalize_with_max_depth(b"[[1]]", 2).is_ok());
        assert_eq!(
            canonicalize_with_max_depth(b"[[ ]]", 1),
            parse_with_max_depth(b"[[ ]]", 1).map(|_| Vec::new())
        );
    }

    #[test]
    fn max_depth_fits_a_small_stack() {
        // As for `parse`: half the 1 MiB default stack of wasm32 targets.
        let text = "[{\"b\":0,\"a\":".repeat(MAX_DEPTH / 2) + "1" + &"}]".repeat(MAX_DEPTH / 2);
        let handle = std::thread::Builder::new()
            .stack_size(512 * 1024)
            .spawn(move || {
                let canonical = canonicalize(text.as_bytes()).is_ok();
                let members = object_members(text.as_bytes(), &mut |_, _| {}).is_ok();
                canonical && members
            })
            .unwrap();
        assert!(handle.join().unwrap());
    }

    #[test]
    fn duplicates_are_refused_at_any_depth_after_unescaping() {
        for input in [
            r#"{"a":1,"a":2}"#,
            r#"{"a":1, "a" :2}"#,
            "{\"a\":1,\n\"a\"\n:2}",
            r#"{"a":1,"\u0061":2}"#,
            r#"{"😀":1,"\ud83d\ude00":2}"#,
            r#"{"x":[1,{"y":{"z":0,"w":[{"k":1,"q":2,"k":3}]}}]}"#,
            r#"{"b":1,"a":2,"c":3,"a":4,"b":5}"#,
            // The duplicate comes first in the document: it wins over a
            // later syntax error, depth error or duplicate inside a member.
            r#"{"a":1,"a":2,"#,
            r#"{"a":1,"a""#,
            r#"{"a":1,"a":[{"b":1,"b":2}]}"#,
            r#"{"a":1,"a":[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[["#,
            r#"[{"a":{"b":1,"b":2,"c":3,"c":4},"a":0}]"#,
        ] {
            assert!(
                matches!(
                    same_refusal(input.as_bytes()),
                    Error::DuplicateMember { .. }
                ),
                "{input}"
            );
        }
        let members: Vec<String> = (0..1000).map(|i| format!("\"m{i}\":{i}")).collect();
        for early in [0, 15, 16, 999] {
            let text = format!("{{{},\"m{early}\":0}}", members.join(","));
            same_refusal(text.as_bytes());
        }
    }

    #[test]
    fn other_refusals_match_the_parser() {
        for input in [
            &b""[..],
            b" \n",
            b"\xff",
            b"[\"a\xc3\"]",
            b"{} x",
            b"1 2",
            b"[1]]",
            b"truex",
            b"\xef\xbb\xbf{}",
            b"[1,]",
            b"{\"a\":1,}",
            b"{a:1}",
            b"[01]",
            b"01",
            b"-",
            b"1.",
            b".5",
            b"1e",
            b"tru",
            b"[truex]",
            b"\"\\ud83d\"",
            b"\"\\ude00\"",
            b"\"\\ud83d\\u0041\"",
            b"\"a\nb\"",
            b"\"\\x\"",
            b"\"\\u00g0\"",
            b"{\"a\" 1}",
            b"[1 2]",
            b"{\"a\":1 \"b\":2}",
            b"{\"a\"",
            b"\"abc",
            b"{}\0",
        ] {
            same_refusal(input);
        }
    }

    /// Names and value spans, in document order.
    type Members = Vec<(String, Range<usize>)>;

    /// The members `object_members` reports, or `None` for a non-object.
    fn members(body: &[u8]) -> Result<Option<Members>, Error> {
        let mut members = Vec::new();
        let object = object_members(body, &mut |name, span| {
            members.push((name.to_owned(), span));
        })?;
        Ok(object.then_some(members))
    }

    #[test]
    fn member_spans_locate_each_value() {
        let body = br#" { "b" : [1, {"x":2}] , "\u0061":"s" ,"c":{}} "#;
        let members = members(body).unwrap().unwrap();
        let names: Vec<&str> = members.iter().map(|(name, _)| name.as_str()).collect();
        assert_eq!(names, ["b", "a", "c"]);
        let values: Vec<&[u8]> = members
            .iter()
            .map(|(_, span)| &body[span.clone()])
            .collect();
        assert_eq!(values, [&br#"[1, {"x":2}]"#[..], br#""s""#, b"{}"]);
        assert_eq!(self::members(b"[{\"a\":1}]"), Ok(None));
        assert_eq!(self::members(b" 7 "), Ok(None));
        assert_eq!(self::members(b"{}"), Ok(Some(vec![])));
    }

    #[test]
    fn member_spans_validate_the_whole_body() {
        for input in [
            &br#"{"a":1,"record":{"x":1,"x":2}}"#[..],
            br#"{"a":1,"a":2}"#,
            br#"{"record":[1,]}"#,
            br#"{"record":1} x"#,
            b"{\"record\":\"\xff\"}",
        ] {
            let old = parse(input).expect_err("refused");
            let new = members(input).expect_err("refused");
            assert_eq!(
                std::mem::discriminant(&old),
                std::mem::discriminant(&new),
                "{:?}",
                String::from_utf8_lossy(input)
            );
        }
        let deep = format!(
            "{{\"record\":{}{}}}",
            "[".repeat(MAX_DEPTH),
            "]".repeat(MAX_DEPTH)
        );
        assert!(matches!(
            members(deep.as_bytes()),
            Err(Error::TooDeep { .. })
        ));
        let fits = format!(
            "{{\"record\":{}{}}}",
            "[".repeat(MAX_DEPTH - 1),
            "]".repeat(MAX_DEPTH - 1)
        );
        let members = members(fits.as_bytes()).unwrap().unwrap();
        let span = &fits.as_bytes()[members[0].1.clone()];
        assert!(canonicalize_with_max_depth(span, MAX_DEPTH - 1).is_ok());
    }
}
