//! The canonical encoder.
//!
//! Heads are written in their shortest form and map entries are already in
//! canonical order ([`crate::Map`]'s invariant), so the output is the one
//! canonical encoding of the value. The walk uses an explicit stack, so
//! encoding never recurses whatever the value's depth.

use crate::value::Value;

pub const MAJOR_UNSIGNED: u8 = 0;
pub(crate) const MAJOR_NEGATIVE: u8 = 1;
pub const MAJOR_BYTES: u8 = 2;
pub const MAJOR_TEXT: u8 = 3;
pub const MAJOR_ARRAY: u8 = 4;
pub const MAJOR_MAP: u8 = 5;
pub const MAJOR_TAG: u8 = 6;
pub(crate) const MAJOR_SIMPLE: u8 = 7;

/// The one tag allowed: it marks a byte string as a label.
pub const LABEL_TAG: u64 = 39;

pub(crate) const SIMPLE_FALSE: u8 = 20;
pub(crate) const SIMPLE_TRUE: u8 = 21;
pub(crate) const SIMPLE_NULL: u8 = 22;

/// The canonical encoding of `value`.
pub fn encode(value: &Value) -> Vec<u8> {
    let mut out = Vec::new();
    encode_into(value, &mut out);
    out
}

/// Appends the canonical encoding of `value` to `out`.
pub fn encode_into(value: &Value, out: &mut Vec<u8>) {
    enum Pending<'a> {
        Children(std::slice::Iter<'a, Value>),
        // The value of the entry whose key was just written, if any.
        Entries(std::slice::Iter<'a, (Value, Value)>, Option<&'a Value>),
    }

    let mut stack: Vec<Pending<'_>> = Vec::new();
    let mut next = Some(value);
    loop {
        if let Some(value) = next.take() {
            match value {
                Value::Tuple(children) => {
                    put_head(out, MAJOR_ARRAY, children.len() as u64);
                    stack.push(Pending::Children(children.iter()));
                }
                Value::Map(map) => {
                    put_head(out, MAJOR_MAP, map.len() as u64);
                    stack.push(Pending::Entries(map.iter(), None));
                }
                atom => put_atom(out, atom),
            }
        }
        match stack.last_mut() {
            None => return,
            Some(Pending::Children(children)) => match children.next() {
                Some(child) => next = Some(child),
                None => {
                    stack.pop();
                }
            },
            Some(Pending::Entries(entries, pending_value)) => {
                if let Some(value) = pending_value.take() {
                    next = Some(value);
                } else if let Some((key, value)) = entries.next() {
                    next = Some(key);
                    *pending_value = Some(value);
                } else {
                    stack.pop();
                }
            }
        }
    }
}

fn put_atom(out: &mut Vec<u8>, atom: &Value) {
    match atom {
        Value::Label(name) => {
            put_head(out, MAJOR_TAG, LABEL_TAG);
            put_head(out, MAJOR_BYTES, name.len() as u64);
            out.extend_from_slice(name);
        }
        Value::Text(text) => {
            put_head(out, MAJOR_TEXT, text.len() as u64);
            out.extend_from_slice(text.as_bytes());
        }
        Value::Int(n) => {
            let major = if n.is_negative() {
                MAJOR_NEGATIVE
            } else {
                MAJOR_UNSIGNED
            };
            put_head(out, major, n.cbor_argument());
        }
        Value::Bytes(bytes) => {
            put_head(out, MAJOR_BYTES, bytes.len() as u64);
            out.extend_from_slice(bytes);
        }
        Value::Bool(false) => out.push(MAJOR_SIMPLE << 5 | SIMPLE_FALSE),
        Value::Bool(true) => out.push(MAJOR_SIMPLE << 5 | SIMPLE_TRUE),
        Value::Null => out.push(MAJOR_SIMPLE << 5 | SIMPLE_NULL),
        Value::Tuple(_) | Value::Map(_) => unreachable!("compounds are walked by encode_into"),
    }
}

/// Writes a head with `arg` in its shortest form: with these, a caller
/// writes the canonical encoding of a value it does not build as a
/// [`Value`] (its map keys in canonical order, which is its to keep).
pub fn put_head(out: &mut Vec<u8>, major: u8, arg: u64) {
    let initial = major << 5;
    if let Ok(small) = u8::try_from(arg) {
        if small < 24 {
            out.push(initial | small);
        } else {
            out.extend_from_slice(&[initial | 24, small]);
        }
    } else if let Ok(arg) = u16::try_from(arg) {
        out.push(initial | 25);
        out.extend_from_slice(&arg.to_be_bytes());
    } else if let Ok(arg) = u32::try_from(arg) {
        out.push(initial | 26);
        out.extend_from_slice(&arg.to_be_bytes());
    } else {
        out.push(initial | 27);
        out.extend_from_slice(&arg.to_be_bytes());
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Int, Map};

    fn hex(bytes: &[u8]) -> String {
        bytes.iter().map(|b| format!("{b:02x}")).collect()
    }

    #[test]
    fn integer_edges() {
        let cases: [(Int, &str); 12] = [
            (Int::from(0u64), "00"),
            (Int::from(23u64), "17"),
            (Int::from(24u64), "1818"),
            (Int::from(255u64), "18ff"),
            (Int::from(256u64), "190100"),
            (Int::from(65_535u64), "19ffff"),
            (Int::from(65_536u64), "1a00010000"),
            (Int::from(u64::from(u32::MAX) + 1), "1b0000000100000000"),
            (Int::MAX, "1bffffffffffffffff"),
            (Int::from(-1i64), "20"),
            (Int::from(-25i64), "3818"),
            (Int::MIN, "3bffffffffffffffff"),
        ];
        for (n, expected) in cases {
            assert_eq!(hex(&encode(&Value::Int(n))), expected, "{n}");
        }
    }

    #[test]
    fn atoms_and_compounds() {
        assert_eq!(hex(&encode(&Value::label("p"))), "d8274170");
        assert_eq!(hex(&encode(&Value::label(Vec::new()))), "d82740");
        assert_eq!(hex(&encode(&Value::text("é"))), "62c3a9");
        assert_eq!(hex(&encode(&Value::bytes(vec![1, 2]))), "420102");
        assert_eq!(hex(&encode(&Value::Bool(false))), "f4");
        assert_eq!(hex(&encode(&Value::Bool(true))), "f5");
        assert_eq!(hex(&encode(&Value::Null)), "f6");
        let nested = Value::Tuple(vec![
            Value::Tuple(vec![]),
            Value::Tuple(vec![Value::Tuple(vec![])]),
        ]);
        assert_eq!(hex(&encode(&nested)), "82808180");
        let map: Map = vec![
            (Value::text("b"), Value::int(2u64)),
            (Value::text("a"), Value::Tuple(vec![Value::Null])),
        ]
        .into_iter()
        .collect();
        assert_eq!(hex(&encode(&Value::Map(map))), "a2616181f6616202");
    }

    #[test]
    fn long_heads() {
        let text = "x".repeat(300);
        let encoded = encode(&Value::text(text.clone()));
        assert_eq!(&encoded[..3], &[0x79, 0x01, 0x2c]);
        assert_eq!(&encoded[3..], text.as_bytes());
        let tuple = Value::Tuple(vec![Value::Null; 24]);
        assert_eq!(&encode(&tuple)[..2], &[0x98, 24]);
    }

    #[test]
    fn deep_values_encode_without_recursion() {
        let mut value = Value::Null;
        for _ in 0..100_000 {
            value = Value::Tuple(vec![value]);
        }
        let encoded = encode(&value);
        assert_eq!(encoded.len(), 100_001);
        // Dismantle iteratively: the derived drop would recurse.
        let mut current = value;
        while let Value::Tuple(mut children) = current {
            current = children.pop().unwrap_or(Value::Null);
        }
    }
}
