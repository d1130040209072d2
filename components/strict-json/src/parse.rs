//! Strict parsing on top of `serde_json`'s deserializer.
//!
//! `serde_json` does the tokenizing and refuses malformed JSON, unpaired
//! surrogate escapes and raw control characters in strings. The visitor here
//! builds [`Json`] and adds what `serde_json` does not check: duplicate member
//! names and a depth bound reported as a typed error. UTF-8 is checked before
//! parsing so it, too, has its own error.

use std::cell::{Cell, RefCell};
use std::collections::BTreeSet;
use std::fmt;

use serde::de::{self, DeserializeSeed, Deserializer, MapAccess, SeqAccess, Visitor};

use crate::error::Error;
use crate::value::{Json, Number, Object};

/// The deepest nesting of arrays and objects [`parse`] accepts: a scalar has
/// depth 0, `[]` depth 1, `[[]]` depth 2.
///
/// It is also the ceiling for [`parse_with_max_depth`]: parsing recurses once
/// per level, so this bounds stack use whatever the input.
pub const MAX_DEPTH: usize = 128;

/// Below this many members, duplicate names are found by a linear scan;
/// from it on, by an ordered set, so a large object costs O(n log n).
const LINEAR_SCAN_MEMBERS: usize = 16;

/// Parses `input` as exactly one strict JSON value, nesting at most
/// [`MAX_DEPTH`] deep.
pub fn parse(input: &[u8]) -> Result<Json, Error> {
    parse_with_max_depth(input, MAX_DEPTH)
}

/// Parses `input` as exactly one strict JSON value, nesting at most
/// `max_depth` deep. A `max_depth` above [`MAX_DEPTH`] is treated as
/// [`MAX_DEPTH`].
pub fn parse_with_max_depth(input: &[u8], max_depth: usize) -> Result<Json, Error> {
    let text = std::str::from_utf8(input).map_err(|err| Error::InvalidUtf8 {
        offset: err.valid_up_to(),
    })?;
    if text.bytes().all(is_json_whitespace) {
        return Err(Error::Empty);
    }

    let refusal = Cell::new(None);
    let context = Context {
        limit: max_depth.min(MAX_DEPTH),
        refusal: &refusal,
        members: RefCell::new(Vec::new()),
    };
    let mut deserializer = serde_json::Deserializer::from_str(text);
    // `context.limit` bounds recursion instead; it is never above MAX_DEPTH.
    deserializer.disable_recursion_limit();

    let seed = ValueSeed {
        depth: 0,
        context: &context,
    };
    let value = seed.deserialize(&mut deserializer).map_err(|err| {
        let offset = offset_of(text, &err);
        match refusal.take() {
            Some(Refusal::Duplicate { name, field }) => Error::DuplicateMember {
                name,
                field,
                offset,
            },
            Some(Refusal::TooDeep) => Error::TooDeep {
                limit: context.limit,
                offset,
            },
            None => syntax(text, &err),
        }
    })?;
    // `end` fails only when a non-whitespace byte follows the value.
    deserializer.end().map_err(|err| Error::TrailingData {
        offset: offset_of(text, &err),
    })?;
    Ok(value)
}

/// RFC 8259 whitespace: space, horizontal tab, line feed, carriage return.
fn is_json_whitespace(byte: u8) -> bool {
    matches!(byte, b' ' | b'\t' | b'\n' | b'\r')
}

/// A refusal the visitor detected. `serde_json` only carries message
/// strings through a visitor's error, so the typed reason travels beside it.
enum Refusal {
    Duplicate { name: String, field: String },
    TooDeep,
}

struct Context<'a> {
    limit: usize,
    /// Set at most once, by the visitor that first refuses; parsing stops
    /// right after, since every visitor error is propagated unchanged.
    refusal: &'a Cell<Option<Refusal>>,
    /// The names of the members whose values are being parsed, outermost
    /// first (an array adds none): where a refusal is.
    members: RefCell<Vec<String>>,
}

impl Context<'_> {
    fn refuse<E: de::Error>(&self, refusal: Refusal) -> E {
        let message = match &refusal {
            Refusal::Duplicate { .. } => "duplicate member name",
            Refusal::TooDeep => "nesting too deep",
        };
        self.refusal.set(Some(refusal));
        E::custom(message)
    }
}

/// Deserializes one value that sits inside `depth` enclosing arrays and
/// objects.
#[derive(Clone, Copy)]
struct ValueSeed<'a> {
    depth: usize,
    context: &'a Context<'a>,
}

impl<'a> ValueSeed<'a> {
    /// The seed for the elements or member values of a container that this
    /// seed's value opens.
    fn enter<E: de::Error>(self) -> Result<ValueSeed<'a>, E> {
        let depth = self.depth + 1;
        if depth > self.context.limit {
            return Err(self.context.refuse(Refusal::TooDeep));
        }
        Ok(ValueSeed { depth, ..self })
    }
}

impl<'de> DeserializeSeed<'de> for ValueSeed<'_> {
    type Value = Json;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Json, D::Error> {
        deserializer.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for ValueSeed<'_> {
    type Value = Json;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON value")
    }

    fn visit_unit<E: de::Error>(self) -> Result<Json, E> {
        Ok(Json::Null)
    }

    fn visit_bool<E: de::Error>(self, v: bool) -> Result<Json, E> {
        Ok(Json::Bool(v))
    }

    fn visit_u64<E: de::Error>(self, v: u64) -> Result<Json, E> {
        Ok(Json::Number(Number::Unsigned(v)))
    }

    /// `serde_json` calls this only for negative integer literals; a
    /// non-negative value is still filed as `Unsigned` to keep
    /// `Number::Negative` negative.
    fn visit_i64<E: de::Error>(self, v: i64) -> Result<Json, E> {
        Ok(Json::Number(match u64::try_from(v) {
            Ok(unsigned) => Number::Unsigned(unsigned),
            Err(_) => Number::Negative(v),
        }))
    }

    fn visit_f64<E: de::Error>(self, v: f64) -> Result<Json, E> {
        Ok(Json::Number(Number::Other(v)))
    }

    fn visit_str<E: de::Error>(self, v: &str) -> Result<Json, E> {
        Ok(Json::String(v.to_owned()))
    }

    fn visit_string<E: de::Error>(self, v: String) -> Result<Json, E> {
        Ok(Json::String(v))
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Json, A::Error> {
        let element = self.enter()?;
        let mut items = Vec::new();
        while let Some(item) = seq.next_element_seed(element)? {
            items.push(item);
        }
        Ok(Json::Array(items))
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Json, A::Error> {
        let member = self.enter()?;
        let mut members: Vec<(String, Json)> = Vec::new();
        // Holds every name in `members` once `members` reaches
        // LINEAR_SCAN_MEMBERS; empty before.
        let mut names: BTreeSet<String> = BTreeSet::new();
        while let Some(name) = map.next_key::<String>()? {
            let duplicate = if members.len() < LINEAR_SCAN_MEMBERS {
                members.iter().any(|(seen, _)| *seen == name)
            } else {
                if names.is_empty() {
                    names.extend(members.iter().map(|(seen, _)| seen.clone()));
                }
                !names.insert(name.clone())
            };
            if duplicate {
                let mut path = self.context.members.borrow().clone();
                path.push(name.clone());
                let field = path.join(".");
                return Err(self.context.refuse(Refusal::Duplicate { name, field }));
            }
            self.context.members.borrow_mut().push(name);
            let value = map.next_value_seed(member);
            let name = self
                .context
                .members
                .borrow_mut()
                .pop()
                .expect("pushed above");
            members.push((name, value?));
        }
        Ok(Json::Object(Object { members }))
    }
}

/// Byte offset of the position `serde_json` reports: `line` is 1-based and
/// `column` counts the bytes of that line up to and including the one the
/// parser stopped at.
fn offset_of(text: &str, err: &serde_json::Error) -> usize {
    let line_start = if err.line() <= 1 {
        0
    } else {
        text.bytes()
            .enumerate()
            .filter(|&(_, byte)| byte == b'\n')
            .nth(err.line() - 2)
            .map_or(text.len(), |(index, _)| index + 1)
    };
    (line_start + err.column().saturating_sub(1)).min(text.len())
}

fn syntax(text: &str, err: &serde_json::Error) -> Error {
    let full = err.to_string();
    let suffix = format!(" at line {} column {}", err.line(), err.column());
    let message = full.strip_suffix(&suffix).unwrap_or(&full).to_owned();
    Error::Syntax {
        offset: offset_of(text, err),
        line: err.line(),
        column: err.column(),
        message,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn number(text: &str) -> Number {
        match parse(text.as_bytes()) {
            Ok(Json::Number(n)) => n,
            other => panic!("{text}: {other:?}"),
        }
    }

    fn nested_arrays(depth: usize) -> String {
        "[".repeat(depth) + &"]".repeat(depth)
    }

    #[test]
    fn scalars_and_containers() {
        assert_eq!(parse(b"null"), Ok(Json::Null));
        assert_eq!(parse(b"true"), Ok(Json::Bool(true)));
        assert_eq!(parse(b"\"x\""), Ok(Json::String("x".into())));
        assert_eq!(parse(b"[]"), Ok(Json::Array(vec![])));
        assert_eq!(parse(b"{}"), Ok(Json::Object(Object::default())));
    }

    #[test]
    fn number_classes() {
        assert_eq!(number("0"), Number::Unsigned(0));
        assert_eq!(
            number("9007199254740991"),
            Number::Unsigned(9_007_199_254_740_991)
        );
        assert_eq!(number("18446744073709551615"), Number::Unsigned(u64::MAX));
        assert_eq!(number("-1"), Number::Negative(-1));
        assert_eq!(number("-9223372036854775808"), Number::Negative(i64::MIN));
        for text in [
            "-0",
            "1.0",
            "1e2",
            "1E2",
            "0e0",
            "18446744073709551616",
            "-9223372036854775809",
        ] {
            assert!(matches!(number(text), Number::Other(_)), "{text}");
        }
        match number("-0") {
            Number::Other(x) => assert!(x == 0.0 && x.is_sign_negative()),
            other => panic!("{other:?}"),
        }
        assert_eq!(number("1e2"), Number::Other(100.0));
    }

    #[test]
    fn malformed_numbers_are_syntax_errors() {
        for text in [
            "01", "+1", "1.", ".5", "1e", "NaN", "Infinity", "-", "1e400",
        ] {
            assert!(
                matches!(parse(text.as_bytes()), Err(Error::Syntax { .. })),
                "{text}"
            );
        }
    }

    #[test]
    fn empty_input() {
        for text in ["", " ", "\t\r\n "] {
            assert_eq!(parse(text.as_bytes()), Err(Error::Empty), "{text:?}");
        }
    }

    #[test]
    fn non_json_whitespace_is_not_empty() {
        // Form feed and NBSP are not JSON whitespace.
        assert!(matches!(parse(b"\x0c"), Err(Error::Syntax { .. })));
        assert!(matches!(
            parse("\u{a0}".as_bytes()),
            Err(Error::Syntax { .. })
        ));
    }

    #[test]
    fn syntax_error_carries_position_and_bare_message() {
        match parse(b"{\n  \"a\": tru }") {
            Err(Error::Syntax {
                line,
                column,
                offset,
                message,
            }) => {
                assert_eq!(line, 2);
                assert!(column > 0);
                assert!(offset > 2 && offset < 14, "{offset}");
                assert!(!message.contains(" at line "), "{message}");
                assert!(!message.is_empty());
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn truncated_input_is_a_syntax_error() {
        for text in ["[", "{", "{\"a\"", "{\"a\":", "\"abc", "[1,", "tr"] {
            assert!(
                matches!(parse(text.as_bytes()), Err(Error::Syntax { .. })),
                "{text}"
            );
        }
    }

    #[test]
    fn trailing_data_refused() {
        for (text, offset) in [
            ("{} x", 3),
            ("1 2", 2),
            ("[1]]", 3),
            ("{}{}", 2),
            ("\"a\"\"b\"", 3),
            ("null\n,", 5),
            ("1x", 1),
        ] {
            assert_eq!(
                parse(text.as_bytes()),
                Err(Error::TrailingData { offset }),
                "{text:?}"
            );
        }
        // A NUL byte is data, not whitespace.
        assert!(matches!(parse(b"{}\0"), Err(Error::TrailingData { .. })));
    }

    #[test]
    fn trailing_whitespace_accepted() {
        assert_eq!(
            parse(b" \t{}\r\n \t\n"),
            Ok(Json::Object(Object::default()))
        );
        assert_eq!(parse(b"7 "), Ok(Json::Number(Number::Unsigned(7))));
    }

    #[test]
    fn duplicate_members_refused() {
        assert!(matches!(
            parse(br#"{"a":1,"a":2}"#),
            Err(Error::DuplicateMember { ref name, .. }) if name == "a"
        ));
        // The field names the member from the root; a sibling that came
        // and went before leaves no trace in it.
        assert!(matches!(
            parse(br#"{"p":{"q":1},"r":{"s":[],"s":2}}"#),
            Err(Error::DuplicateMember { ref field, .. }) if field == "r.s"
        ));
        // Equal values do not make a duplicate acceptable.
        assert!(matches!(
            parse(br#"{"a":null,"a":null}"#),
            Err(Error::DuplicateMember { .. })
        ));
    }

    #[test]
    fn duplicates_at_depth_refused() {
        let text = br#"{"x":[1,{"y":{"z":0,"w":[{"k":1,"q":2,"k":3}]}}]}"#;
        match parse(text) {
            Err(Error::DuplicateMember {
                name,
                field,
                offset,
            }) => {
                assert_eq!(name, "k");
                assert_eq!(field, "x.y.w.k");
                let second_k = 38;
                assert_eq!(&text[second_k..second_k + 3], b"\"k\"");
                assert!((second_k..=second_k + 4).contains(&offset), "{offset}");
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn escaped_duplicate_names_refused() {
        for text in [
            r#"{"a":1,"\u0061":2}"#,
            r#"{"\u0061":1,"a":2}"#,
            r#"{"é":1,"\u00e9":2}"#,
            r#"{"a/b":1,"a\/b":2}"#,
            r#"{"😀":1,"\ud83d\ude00":2}"#,
        ] {
            assert!(
                matches!(parse(text.as_bytes()), Err(Error::DuplicateMember { .. })),
                "{text}"
            );
        }
    }

    #[test]
    fn names_differing_in_case_or_normalization_are_distinct() {
        // "e" + combining acute vs precomposed "é".
        for text in [r#"{"a":1,"A":2}"#, "{\"e\u{301}\":1,\"\u{e9}\":2}"] {
            assert!(parse(text.as_bytes()).is_ok(), "{text}");
        }
    }

    #[test]
    fn duplicates_in_large_objects_refused() {
        let members: Vec<String> = (0..1000).map(|i| format!("\"m{i}\":{i}")).collect();
        let unique = format!("{{{}}}", members.join(","));
        assert_eq!(
            parse(unique.as_bytes()).unwrap().as_object().unwrap().len(),
            1000
        );
        for early in [0, 15, 16, 999] {
            let text = format!("{{{},\"m{early}\":0}}", members.join(","));
            assert!(
                matches!(
                    parse(text.as_bytes()),
                    Err(Error::DuplicateMember { ref name, .. }) if *name == format!("m{early}")
                ),
                "m{early}"
            );
        }
    }

    #[test]
    fn same_name_in_sibling_objects_is_fine() {
        assert!(parse(br#"[{"a":1},{"a":2}]"#).is_ok());
        assert!(parse(br#"{"a":{"a":{"a":1}}}"#).is_ok());
    }

    #[test]
    fn surrogate_escapes() {
        assert_eq!(
            parse(br#""\ud83d\ude00""#),
            Ok(Json::String("\u{1f600}".into()))
        );
        for text in [
            r#""\ud83d""#,
            r#""\ud83dx""#,
            r#""\ud83d\n""#,
            r#""\ud83d\u0041""#,
            r#""\ud83d\ud83d""#,
            r#""\ude00""#,
            r#""\ude00\ud83d""#,
            r#"{"\ud800":1}"#,
            r#"["\udfff"]"#,
        ] {
            assert!(
                matches!(parse(text.as_bytes()), Err(Error::Syntax { .. })),
                "{text}"
            );
        }
    }

    #[test]
    fn invalid_utf8_refused() {
        let cases: [&[u8]; 6] = [
            b"\"\xff\"",
            b"\"a\xc3\"",
            b"\"\xed\xa0\x80\"",
            b"\"\xc0\xaf\"",
            b"{\"\x80\":1}",
            b"[1]\xfe",
        ];
        for bytes in cases {
            assert!(
                matches!(parse(bytes), Err(Error::InvalidUtf8 { .. })),
                "{bytes:?}"
            );
        }
        assert_eq!(parse(b"\"a\xc3\""), Err(Error::InvalidUtf8 { offset: 2 }));
    }

    #[test]
    fn byte_order_mark_refused() {
        assert!(matches!(
            parse(b"\xef\xbb\xbf{}"),
            Err(Error::Syntax { offset: 0, .. })
        ));
    }

    #[test]
    fn raw_control_characters_in_strings_refused() {
        for bytes in [&b"\"a\nb\""[..], b"\"\x00\"", b"\"\x1f\""] {
            assert!(
                matches!(parse(bytes), Err(Error::Syntax { .. })),
                "{bytes:?}"
            );
        }
        assert!(parse(b"\"\x7f\"").is_ok());
    }

    #[test]
    fn depth_bound_is_exact() {
        assert!(parse(nested_arrays(MAX_DEPTH).as_bytes()).is_ok());
        assert!(matches!(
            parse(nested_arrays(MAX_DEPTH + 1).as_bytes()),
            Err(Error::TooDeep {
                limit: MAX_DEPTH,
                ..
            })
        ));
        let objects = "{\"a\":".repeat(MAX_DEPTH) + "1" + &"}".repeat(MAX_DEPTH);
        assert!(parse(objects.as_bytes()).is_ok());
        let objects = "{\"a\":".repeat(MAX_DEPTH + 1) + "1" + &"}".repeat(MAX_DEPTH + 1);
        assert!(matches!(
            parse(objects.as_bytes()),
            Err(Error::TooDeep { .. })
        ));
    }

    #[test]
    fn very_deep_input_is_typed_and_does_not_crash() {
        let open = "[".repeat(1_000_000);
        assert!(matches!(
            parse(open.as_bytes()),
            Err(Error::TooDeep { limit: MAX_DEPTH, offset }) if offset <= MAX_DEPTH + 1
        ));
        let mixed = "[{\"a\":".repeat(200_000);
        assert!(matches!(
            parse(mixed.as_bytes()),
            Err(Error::TooDeep { .. })
        ));
    }

    #[test]
    fn max_depth_parameter() {
        assert!(parse_with_max_depth(b"1", 0).is_ok());
        assert!(matches!(
            parse_with_max_depth(b"[]", 0),
            Err(Error::TooDeep { limit: 0, .. })
        ));
        assert!(parse_with_max_depth(b"[[1]]", 2).is_ok());
        assert!(matches!(
            parse_with_max_depth(br#"[{"a":1}]"#, 1),
            Err(Error::TooDeep { limit: 1, .. })
        ));
        // Above the ceiling the ceiling applies.
        assert!(matches!(
            parse_with_max_depth(nested_arrays(MAX_DEPTH + 1).as_bytes(), usize::MAX),
            Err(Error::TooDeep {
                limit: MAX_DEPTH,
                ..
            })
        ));
    }

    #[test]
    fn max_depth_fits_a_small_stack() {
        // Half the 1 MiB default stack of wasm32 targets; an unoptimized
        // build needs about 256 KiB at MAX_DEPTH, an optimized one under 64 KiB.
        let text = "[{\"a\":".repeat(MAX_DEPTH / 2) + "1" + &"}]".repeat(MAX_DEPTH / 2);
        let handle = std::thread::Builder::new()
            .stack_size(512 * 1024)
            .spawn(move || parse(text.as_bytes()).is_ok())
            .unwrap();
        assert!(handle.join().unwrap());
    }

    #[test]
    fn strings_with_escapes() {
        assert_eq!(
            parse(br#""a\"b\\c\/d\b\f\n\r\t\u0000""#),
            Ok(Json::String("a\"b\\c/d\u{8}\u{c}\n\r\t\0".into()))
        );
        assert!(matches!(parse(br#""\x""#), Err(Error::Syntax { .. })));
        assert!(matches!(parse(br#""\u00g0""#), Err(Error::Syntax { .. })));
    }

    #[test]
    fn non_json_extensions_refused() {
        for text in [
            "[1,]",
            "{\"a\":1,}",
            "{'a':1}",
            "{a:1}",
            "// c\n1",
            "/* c */1",
            "[1 2]",
            "{\"a\" 1}",
        ] {
            assert!(
                matches!(parse(text.as_bytes()), Err(Error::Syntax { .. })),
                "{text}"
            );
        }
    }
}
