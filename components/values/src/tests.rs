//! Decoder refusals, bounds, edges and round trips.

use crate::*;

fn bytes(hex_text: &str) -> Vec<u8> {
    hex::decode(hex_text.replace(' ', "")).unwrap()
}

fn invalid(hex_text: &str) -> (Defect, usize) {
    match decode(&bytes(hex_text)) {
        Err(DecodeError::Invalid { offset, defect }) => (defect, offset),
        other => panic!("{hex_text}: expected an invalid refusal, got {other:?}"),
    }
}

fn limit(input: &[u8]) -> (Bound, usize) {
    match decode(input) {
        Err(DecodeError::Limit { offset, bound }) => (bound, offset),
        Err(other) => panic!("expected a limit refusal, got {other:?}"),
        Ok(_) => panic!("expected a limit refusal, got a value"),
    }
}

fn round_trip(input: &[u8]) -> Value {
    let value = decode(input).unwrap_or_else(|e| panic!("{}: {e}", hex::encode(input)));
    assert_eq!(encode(&value), input);
    value
}

fn nested(depth: usize, innermost: &[u8]) -> Vec<u8> {
    let mut input = vec![0x81; depth];
    input.extend_from_slice(innermost);
    input
}

#[test]
fn integer_edges_decode() {
    let cases: [(&str, i128); 14] = [
        ("00", 0),
        ("17", 23),
        ("1818", 24),
        ("18ff", 255),
        ("190100", 256),
        ("19ffff", 65_535),
        ("1a00010000", 65_536),
        ("1affffffff", 4_294_967_295),
        ("1b0000000100000000", 4_294_967_296),
        ("1bffffffffffffffff", u64::MAX as i128),
        ("20", -1),
        ("37", -24),
        ("3818", -25),
        ("3bffffffffffffffff", -(1i128 << 64)),
    ];
    for (hex_text, n) in cases {
        let value = round_trip(&bytes(hex_text));
        assert_eq!(value, Value::Int(Int::from_i128(n).unwrap()), "{hex_text}");
    }
}

#[test]
fn atoms_and_compounds_round_trip() {
    for hex_text in [
        "40",
        "43010203",
        "60",
        "6161",
        "62c3a9",
        "6365cc81",
        "64f09f9880",
        "d82740",
        "d82741ff",
        "f4",
        "f5",
        "f6",
        "80",
        "83010203",
        "82808180",
        "a0",
        "a2616101616202",
        "a40af61864f620f66161f6",
        "a2616200626161 00",
        "a1 8101 a1 d8274170 f6",
    ] {
        round_trip(&bytes(hex_text));
    }
    let long = [vec![0x58, 24], vec![7u8; 24]].concat();
    assert_eq!(round_trip(&long), Value::Bytes(vec![7u8; 24]));
}

#[test]
fn non_shortest_arguments_are_refused() {
    for hex_text in [
        "1817",
        "190017",
        "1900ff",
        "1a0000ffff",
        "1b00000000ffffffff",
        "3800",
        "5801ff",
        "78016161",
        "980100",
        "b8010000",
        "d9002740",
        "d8275800",
    ] {
        let (defect, _) = invalid(hex_text);
        assert_eq!(defect, Defect::NonShortest, "{hex_text}");
    }
    assert_eq!(invalid("d8275800"), (Defect::NonShortest, 2));
}

#[test]
fn indefinite_lengths_and_reserved_information_are_refused() {
    for hex_text in ["5fff", "5f4101ff", "7f6161ff", "9fff", "9f00ff", "bfff"] {
        assert_eq!(
            invalid(hex_text),
            (Defect::IndefiniteLength, 0),
            "{hex_text}"
        );
    }
    for hex_text in ["1c", "1d", "1e", "1f", "3f", "df", "5c", "fc"] {
        assert_eq!(invalid(hex_text), (Defect::Reserved, 0), "{hex_text}");
    }
    assert_eq!(invalid("ff"), (Defect::Break, 0));
    assert_eq!(invalid("8100ff"), (Defect::TrailingBytes, 2));
}

#[test]
fn map_order_is_enforced() {
    assert_eq!(invalid("a2616200616100"), (Defect::UnsortedKeys, 4));
    // "aa" encodes as 62 61 61, above "b" (61 62): length sorts first.
    assert_eq!(invalid("a262616100616200"), (Defect::UnsortedKeys, 5));
    assert_eq!(invalid("a201f600f6"), (Defect::UnsortedKeys, 3));
    assert_eq!(invalid("a2616100616101"), (Defect::DuplicateKey, 4));
    assert_eq!(invalid("a28100f68100f6"), (Defect::DuplicateKey, 4));
    // Compound keys are compared by their whole encoding.
    round_trip(&bytes("a2 8100 f6 8101 f6"));
    assert_eq!(invalid("a2 8101 f6 8100 f6"), (Defect::UnsortedKeys, 4));
}

#[test]
fn floats_undefined_and_simple_values_are_refused() {
    for hex_text in ["f90000", "f97e00", "fa00000000", "fb0000000000000000", "f9"] {
        assert_eq!(invalid(hex_text), (Defect::Float, 0), "{hex_text}");
    }
    assert_eq!(invalid("f7"), (Defect::Undefined, 0));
    assert_eq!(invalid("e0"), (Defect::Simple(0), 0));
    assert_eq!(invalid("f3"), (Defect::Simple(19), 0));
    assert_eq!(invalid("f817"), (Defect::Simple(23), 0));
    assert_eq!(invalid("f818"), (Defect::Simple(24), 0));
    assert_eq!(invalid("f8ff"), (Defect::Simple(255), 0));
    assert_eq!(invalid("8201f818"), (Defect::Simple(24), 2));
}

#[test]
fn tags_other_than_labels_are_refused() {
    assert_eq!(invalid("c06161"), (Defect::Tag(0), 0));
    assert_eq!(invalid("c24101"), (Defect::Tag(2), 0));
    assert_eq!(invalid("d82640"), (Defect::Tag(38), 0));
    assert_eq!(invalid("d9d9f700"), (Defect::Tag(55_799), 0));
    assert_eq!(invalid("d82760"), (Defect::LabelContent, 2));
    assert_eq!(invalid("d82700"), (Defect::LabelContent, 2));
    assert_eq!(invalid("d82780"), (Defect::LabelContent, 2));
    assert_eq!(invalid("d827d82740"), (Defect::LabelContent, 2));
    assert_eq!(invalid("d827f6"), (Defect::LabelContent, 2));
    assert_eq!(invalid("d827f7"), (Defect::Undefined, 2));
}

#[test]
fn text_must_be_utf8() {
    for hex_text in [
        "61ff",
        "62c328",
        "62c0af",
        "63eda080",
        "61 80",
        "64f8888080",
    ] {
        assert_eq!(invalid(hex_text), (Defect::InvalidUtf8, 0), "{hex_text}");
    }
    // Labels and bytes carry any octets.
    round_trip(&bytes("d82742c328"));
    round_trip(&bytes("42c328"));
}

#[test]
fn exactly_one_value() {
    assert_eq!(invalid("0000"), (Defect::TrailingBytes, 1));
    assert_eq!(invalid("80f6"), (Defect::TrailingBytes, 1));
    assert_eq!(invalid("f6f6"), (Defect::TrailingBytes, 1));
    for (hex_text, end) in [
        ("", 0),
        ("18", 1),
        ("1901", 2),
        ("1b00", 2),
        ("41", 1),
        ("6261", 2),
        ("8200", 2),
        ("a100", 2),
        ("d8", 1),
        ("d827", 2),
        ("d82741", 3),
        ("f8", 1),
        ("9a0001", 3),
    ] {
        assert_eq!(invalid(hex_text), (Defect::Truncated, end), "{hex_text}");
    }
}

#[test]
fn depth_bound() {
    let at_256 = nested(MAX_DEPTH, &[0x00]);
    let value = round_trip(&at_256);
    let mut depth = 0;
    let mut current = &value;
    while let Value::Tuple(children) = current {
        current = &children[0];
        depth += 1;
    }
    assert_eq!(depth, MAX_DEPTH);
    round_trip(&nested(MAX_DEPTH, &[0x80]));
    round_trip(&nested(MAX_DEPTH, &[0xa0]));

    assert_eq!(limit(&nested(MAX_DEPTH + 1, &[0x00])), (Bound::Depth, 257));
    assert_eq!(
        limit(&nested(MAX_DEPTH, &[0x81, 0x80])),
        (Bound::Depth, 257)
    );
    // Map keys and values add depth too.
    let mut map_keys = vec![0xa1; MAX_DEPTH];
    map_keys.push(0x00);
    map_keys.extend(vec![0x00; MAX_DEPTH]);
    round_trip(&map_keys);
    let mut map_values = vec![0xa1, 0x00];
    for _ in 1..=MAX_DEPTH {
        map_values.extend_from_slice(&[0xa1, 0x00]);
    }
    map_values.push(0x00);
    assert_eq!(limit(&map_values), (Bound::Depth, 2 * MAX_DEPTH + 1));
    // Far deeper input is refused at the bound, without exhausting the stack.
    assert_eq!(limit(&nested(1_000_000, &[0x00])).0, Bound::Depth);
}

#[test]
fn arity_bound() {
    let mut at_bound = vec![0x9a, 0x00, 0x01, 0x00, 0x00];
    at_bound.extend(vec![0xf6; MAX_ARITY]);
    let Value::Tuple(children) = round_trip(&at_bound) else {
        panic!("not a tuple")
    };
    assert_eq!(children.len(), MAX_ARITY);

    let mut over = vec![0x9a, 0x00, 0x01, 0x00, 0x01];
    over.extend(vec![0xf6; MAX_ARITY + 1]);
    assert_eq!(limit(&over), (Bound::Arity, 0));
    // The announcement alone is enough, whatever follows.
    assert_eq!(limit(&over[..5]), (Bound::Arity, 0));
    assert_eq!(limit(&bytes("9bffffffffffffffff")), (Bound::Arity, 0));
    assert_eq!(limit(&bytes("ba00010001")), (Bound::Entries, 0));
    assert_eq!(limit(&bytes("8201 9a00010001")), (Bound::Arity, 2));

    let mut map_at_bound = vec![0xba, 0x00, 0x01, 0x00, 0x00];
    for i in 0..MAX_ARITY {
        encode_into(&Value::int(i), &mut map_at_bound);
        map_at_bound.push(0xf6);
    }
    round_trip(&map_at_bound);
}

#[test]
fn announced_counts_do_not_allocate_ahead_of_input() {
    // 65,536 children announced in five bytes: refused as truncated after
    // reading what is there, with capacity bounded by the input.
    assert_eq!(invalid("9a00010000"), (Defect::Truncated, 5));
    assert_eq!(invalid("ba00010000"), (Defect::Truncated, 5));
    let mut input = nested(200, &[0x9a, 0x00, 0x01, 0x00, 0x00]);
    input.push(0x00);
    assert_eq!(decode(&input).unwrap_err().offset(), input.len());
}

#[test]
fn payload_bound() {
    let mut at_bound = vec![0x5a, 0x00, 0x10, 0x00, 0x00];
    at_bound.extend(vec![0xab; MAX_PAYLOAD]);
    round_trip(&at_bound);
    let mut text = vec![0x7a, 0x00, 0x10, 0x00, 0x00];
    text.extend(vec![b'x'; MAX_PAYLOAD]);
    round_trip(&text);
    let mut label = vec![0xd8, 0x27, 0x5a, 0x00, 0x10, 0x00, 0x00];
    label.extend(vec![0; MAX_PAYLOAD]);
    round_trip(&label);

    let mut over = vec![0x5a, 0x00, 0x10, 0x00, 0x01];
    over.extend(vec![0xab; MAX_PAYLOAD + 1]);
    assert_eq!(limit(&over), (Bound::Payload, 0));
    assert_eq!(limit(&over[..5]), (Bound::Payload, 0));
    assert_eq!(limit(&bytes("7a00100001")), (Bound::Payload, 0));
    assert_eq!(limit(&bytes("d8275a00100001")), (Bound::Payload, 2));
    assert_eq!(limit(&bytes("5bffffffffffffffff")), (Bound::Payload, 0));
}

#[test]
fn input_bound() {
    let input = bytes("83010203");
    assert!(decode_bounded(&input, 4).is_ok());
    assert_eq!(
        decode_bounded(&input, 3),
        Err(DecodeError::Limit {
            offset: 0,
            bound: Bound::Input { limit: 3 }
        })
    );
    // Oversized input is refused before its (invalid) content is read.
    assert!(decode_bounded(&bytes("ffff"), 1).unwrap_err().is_limit());
}

#[test]
fn facts() {
    let fact = bytes("82d827417001");
    let value = decode_fact(&fact).unwrap();
    assert_eq!(value.as_fact().unwrap().0, &Value::label("p"));
    assert!(decode_fact(&bytes("81f6")).is_ok());
    for not_a_fact in ["80", "8180", "81a0", "d8274170", "a0", "00"] {
        assert_eq!(
            decode_fact(&bytes(not_a_fact)),
            Err(DecodeError::Invalid {
                offset: 0,
                defect: Defect::NotAFact
            }),
            "{not_a_fact}"
        );
    }
    // A fact of MAX_FACT bytes is accepted, one byte more is a limit.
    let header = [0x82, 0xf6, 0x5a, 0x00, 0x0f, 0xff, 0xf9];
    let mut at_bound = header.to_vec();
    at_bound.resize(MAX_FACT, 0);
    assert!(decode_fact(&at_bound).is_ok());
    let mut over = [0x82, 0xf6, 0x5a, 0x00, 0x0f, 0xff, 0xfa].to_vec();
    over.resize(MAX_FACT + 1, 0);
    assert!(decode(&over).is_ok());
    assert_eq!(
        decode_fact(&over),
        Err(DecodeError::Limit {
            offset: 0,
            bound: Bound::Input { limit: MAX_FACT }
        })
    );
}

#[test]
fn creation_fact_matches_the_worked_example() {
    let space = format!("spc_{}", "0".repeat(32));
    let fact = creation_fact("a", &space);
    let mut expected = vec![0x83, 0xd8, 0x27, 0x58, 0x1c];
    expected.extend_from_slice(b"lab.journal.child_created.v1");
    expected.extend_from_slice(&[0x61, b'a', 0x78, 0x24]);
    expected.extend_from_slice(space.as_bytes());
    assert_eq!(fact, expected);
    assert_eq!(
        hex::encode(&fact),
        concat!(
            "83d827581c6c61622e6a6f75726e616c2e6368696c645f637265617465642e7631",
            "6161",
            "78247370635f3030303030303030303030303030303030303030303030303030303030303030",
        )
    );
    let value = decode_fact(&fact).unwrap();
    let (predicate, arguments) = value.as_fact().unwrap();
    assert_eq!(predicate, &Value::label(CREATION_PREDICATE));
    assert_eq!(arguments, &[Value::text("a"), Value::text(space)]);
}

#[test]
fn errors_classify_and_display() {
    let refusal = decode(&bytes("1817")).unwrap_err();
    assert!(!refusal.is_limit());
    assert_eq!(refusal.offset(), 0);
    assert_eq!(
        refusal.to_string(),
        "argument not in shortest form at byte 0"
    );
    let refusal = decode(&bytes("9a00010001")).unwrap_err();
    assert!(refusal.is_limit());
    assert_eq!(refusal.to_string(), "tuple arity above 65536 at byte 0");
}

#[test]
fn tuple_children_are_the_canonical_bytes_decode_finds() {
    let mut map = Map::new();
    map.insert(
        Value::text("k"),
        Value::Tuple(vec![Value::Null, Value::int(-3i64)]),
    );
    map.insert(Value::int(7u64), Value::Bytes(vec![1, 2, 3]));
    let deep = (0..40).fold(Value::int(1u64), |v, _| Value::Tuple(vec![v]));
    let children = vec![
        Value::label("record"),
        Value::text("é and more than twenty-three bytes of text"),
        Value::int(u64::MAX),
        Value::int(-(1i64 << 40)),
        Value::Bool(true),
        Value::Bytes(vec![0; 300]),
        Value::Map(map),
        Value::Tuple(Vec::new()),
        Value::Map(Map::new()),
        deep,
        Value::Tuple((0..30u64).map(Value::int).collect()),
    ];
    let tuple = Value::Tuple(children);
    let encoded = encode(&tuple);
    let Value::Tuple(decoded) = decode(&encoded).unwrap() else {
        panic!("a tuple decodes as a tuple");
    };
    let walked = tuple_children(&encoded).unwrap();
    assert_eq!(walked.len(), decoded.len());
    for (bytes, value) in walked.iter().zip(&decoded) {
        assert_eq!(*bytes, encode(value).as_slice());
    }
    assert_eq!(tuple_children(&bytes("80")).unwrap(), Vec::<&[u8]>::new());
    assert_eq!(
        tuple_children(&bytes("82d827417001")).unwrap(),
        [&bytes("d8274170")[..], &[0x01]]
    );
}

#[test]
fn tuple_children_refuse_what_is_not_one_whole_tuple() {
    let refusal = |hex_text: &str| match tuple_children(&bytes(hex_text)) {
        Err(DecodeError::Invalid { offset, defect }) => (defect, offset),
        other => panic!("{hex_text}: expected an invalid refusal, got {other:?}"),
    };
    for not_a_tuple in ["a0", "01", "d8274170", "f6"] {
        assert_eq!(
            refusal(not_a_tuple),
            (Defect::NotATuple, 0),
            "{not_a_tuple}"
        );
    }
    // Cut short inside a child, a payload or a nested compound.
    assert_eq!(refusal("8201").0, Defect::Truncated);
    assert_eq!(refusal("81 43 6161").0, Defect::Truncated);
    assert_eq!(refusal("81 a1 01").0, Defect::Truncated);
    assert_eq!(refusal("81 9a 00010000").0, Defect::Truncated);
    // Bytes after the tuple, a head not in shortest form, a foreign tag.
    assert_eq!(refusal("8101 01"), (Defect::TrailingBytes, 2));
    assert_eq!(refusal("81 1801"), (Defect::NonShortest, 1));
    assert_eq!(refusal("81 c1 01"), (Defect::Tag(1), 1));
    assert_eq!(refusal("81 d827 01"), (Defect::LabelContent, 3));
    // An arity over the bound is a limit, as for decode.
    assert!(matches!(
        tuple_children(&bytes("9a 00010001")),
        Err(DecodeError::Limit {
            bound: Bound::Arity,
            ..
        })
    ));
}
