//! Filters: a conjunction of structural conditions on an entry, compared by
//! canonical value equality.
//!
//! A decoded [`Filter`] is already normalized: conditions sorted by index
//! and then by the unsigned bytes of the canonical value, identical
//! conditions collapsed, absent bounds as 0 and [`MAX_POSITION`]. Two
//! requests whose filters normalize alike have the same [`Filter::digest`].

use lab_strict_json::Json;
use lab_values::Value as Datum;
use serde_json::{json, Value};

use crate::refusal::Refusal;
use crate::requests::{self, Members, MAX_POSITION};

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Filter {
    /// The predicate the fact's first child must equal.
    pub predicate: Option<Predicate>,
    /// Normalized: ascending by (`index`, `bytes`), no two equal.
    pub arguments: Vec<Condition>,
    pub origin: Option<Origin>,
    /// Matches lie in (`after`, `through`]; `after >= through` matches nothing.
    pub after: u64,
    pub through: u64,
}

/// A canonical atom.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Predicate {
    /// Canonical padded standard base64, as given; it encodes `bytes`.
    pub text: String,
    pub bytes: Vec<u8>,
}

/// The argument at `index` (0 is the first after the predicate) equals the
/// canonical value `bytes`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Condition {
    pub index: u16,
    /// Canonical padded standard base64, as given; it encodes `bytes`.
    pub text: String,
    pub bytes: Vec<u8>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Origin {
    /// Appended by a caller.
    Append,
    /// The creation entry the service wrote.
    Create,
}

impl Origin {
    pub fn as_str(self) -> &'static str {
        match self {
            Origin::Append => "append",
            Origin::Create => "create",
        }
    }

    pub fn parse(text: &str) -> Option<Origin> {
        match text {
            "append" => Some(Origin::Append),
            "create" => Some(Origin::Create),
            _ => None,
        }
    }
}

/// Decodes the filter member `json` at `field` (its dotted path) and
/// normalizes it.
///
/// Members in the spec's order: `predicate` (a canonical atom within the
/// fact value bounds), `arguments` (each `{index, equals}`), `origin`,
/// `positions` (object or null, each bound an integer or null). A value
/// over a bound is `limit_exceeded`; every other defect is `invalid`.
/// `predicate`, `arguments` and `origin` may be absent but not null.
pub fn decode(json: Json, field: &str) -> Result<Filter, Refusal> {
    let mut members = Members::nested(
        json,
        field,
        &["predicate", "arguments", "origin", "positions"],
    )?;

    let predicate = match members.optional("predicate")? {
        None => None,
        Some(json) => {
            let field = members.field("predicate");
            let (text, bytes) = requests::base64(json, &field)?;
            let value = filter_value(&bytes, &field)?;
            if !value.is_atom() {
                return Err(Refusal::invalid(
                    field.clone(),
                    format!("{field:?} must encode an atom"),
                ));
            }
            Some(Predicate { text, bytes })
        }
    };

    let mut arguments = Vec::new();
    if let Some(json) = members.optional("arguments")? {
        let field = members.field("arguments");
        for (i, item) in requests::array(json, &field)?.into_iter().enumerate() {
            arguments.push(condition(item, &format!("{field}[{i}]"))?);
        }
    }
    arguments.sort_by(|a, b| (a.index, &a.bytes).cmp(&(b.index, &b.bytes)));
    arguments.dedup_by(|a, b| a.index == b.index && a.bytes == b.bytes);

    let origin = match members.optional("origin")? {
        None => None,
        Some(json) => {
            let field = members.field("origin");
            let text = requests::string(json, &field)?;
            Some(Origin::parse(&text).ok_or_else(|| {
                Refusal::invalid(
                    field.clone(),
                    format!("{field:?} must be \"append\" or \"create\""),
                )
            })?)
        }
    };

    let (after, through) = match members.nullable("positions") {
        None => (0, MAX_POSITION),
        Some(json) => {
            let mut positions =
                Members::nested(json, &members.field("positions"), &["after", "through"])?;
            let after = positions.nullable_position("after")?;
            let through = positions.nullable_position("through")?;
            positions.finish()?;
            (after.unwrap_or(0), through.unwrap_or(MAX_POSITION))
        }
    };

    members.finish()?;
    Ok(Filter {
        predicate,
        arguments,
        origin,
        after,
        through,
    })
}

/// `{index, equals}` at `field`.
fn condition(json: Json, field: &str) -> Result<Condition, Refusal> {
    let mut members = Members::nested(json, field, &["index", "equals"])?;
    let index_field = members.field("index");
    let index = requests::position(members.required("index")?, &index_field)?;
    let index = u16::try_from(index).map_err(|_| {
        Refusal::invalid(
            index_field.clone(),
            format!("{index_field:?} must be at most {}", u16::MAX),
        )
    })?;
    let equals_field = members.field("equals");
    let (text, bytes) = requests::base64(members.required("equals")?, &equals_field)?;
    filter_value(&bytes, &equals_field)?;
    members.finish()?;
    Ok(Condition { index, text, bytes })
}

/// A filter value under the fact value bounds.
fn filter_value(bytes: &[u8], field: &str) -> Result<Datum, Refusal> {
    lab_values::decode_bounded(bytes, lab_values::MAX_FACT)
        .map_err(|e| requests::value_refusal(e, field))
}

impl Filter {
    /// The filter that selects everything: the normalization of `{}`.
    pub fn unfiltered() -> Filter {
        Filter {
            predicate: None,
            arguments: Vec::new(),
            origin: None,
            after: 0,
            through: MAX_POSITION,
        }
    }

    /// The normalized document: every member present, `predicate` and each
    /// `equals` as the base64 text of the request.
    pub fn normalized_json(&self) -> Value {
        json!({
            "predicate": self.predicate.as_ref().map(|p| p.text.as_str()),
            "arguments": self
                .arguments
                .iter()
                .map(|c| json!({ "index": c.index, "equals": c.text }))
                .collect::<Vec<_>>(),
            "origin": self.origin.map(Origin::as_str),
            "positions": { "after": self.after, "through": self.through },
        })
    }

    /// SHA-256 over the canonical encoding of
    /// `[label "lab.journal.filter.v1", data-json(normalized document)]`.
    pub fn digest(&self) -> [u8; 32] {
        lab_values::data_json_digest(lab_values::FILTER_DIGEST_TAG, &self.normalized_json())
            .expect("a normalized filter holds only integers, strings and null, four levels deep")
    }

    /// Whether the entry at `position` with `origin` and the canonical
    /// value `fact` satisfies every condition, comparing canonical bytes
    /// (equal values have equal encodings) without decoding the fact into
    /// values. A value that is not a fact, or a fact without the argument a
    /// condition names, does not match.
    pub fn matches(&self, fact: &[u8], origin: Origin, position: u64) -> bool {
        if position <= self.after || position > self.through {
            return false;
        }
        if self.origin.is_some_and(|wanted| wanted != origin) {
            return false;
        }
        let Ok(children) = lab_values::tuple_children(fact) else {
            return false;
        };
        let Some((predicate, arguments)) = children.split_first() else {
            return false;
        };
        if !is_atom(predicate) {
            return false;
        }
        if self
            .predicate
            .as_ref()
            .is_some_and(|wanted| *predicate != wanted.bytes)
        {
            return false;
        }
        self.arguments.iter().all(|condition| {
            arguments
                .get(usize::from(condition.index))
                .is_some_and(|argument| *argument == condition.bytes)
        })
    }
}

/// Whether a canonical encoding is an atom's: neither a tuple nor a map.
fn is_atom(encoded: &[u8]) -> bool {
    encoded
        .first()
        .is_some_and(|b| !matches!(b >> 5, lab_values::MAJOR_ARRAY | lab_values::MAJOR_MAP))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::requests::tests::{assert_invalid, assert_limit, b64};
    use sha2::{Digest, Sha256};

    fn filter(doc: Value) -> Result<Filter, Refusal> {
        let json = lab_strict_json::parse(&serde_json::to_vec(&doc).unwrap()).unwrap();
        decode(json, "filter")
    }

    fn hex(bytes: &[u8]) -> String {
        bytes.iter().map(|b| format!("{b:02x}")).collect()
    }

    fn label(name: &str) -> Vec<u8> {
        Datum::label(name).to_bytes()
    }

    #[test]
    fn empty_filter_normalizes_to_unfiltered() {
        assert_eq!(filter(json!({})).unwrap(), Filter::unfiltered());
        let explicit = json!({"arguments": [], "positions": null});
        assert_eq!(filter(explicit).unwrap(), Filter::unfiltered());
        let bounds = json!({"positions": {"after": null, "through": null}});
        assert_eq!(filter(bounds).unwrap(), Filter::unfiltered());
        let full = json!({"positions": {"after": 0, "through": MAX_POSITION}});
        assert_eq!(filter(full).unwrap(), Filter::unfiltered());
        assert_eq!(
            Filter::unfiltered().normalized_json(),
            json!({
                "predicate": null, "arguments": [], "origin": null,
                "positions": {"after": 0, "through": MAX_POSITION},
            })
        );
    }

    #[test]
    fn conditions_sort_and_collapse() {
        // Canonical values: 0x01 (int 1), 0x20 (int -1), 0x41 0x00 (h'00'),
        // 0x61 0x61 ("a"); sorted by unsigned bytes: 01 < 20 < 41 00 < 61 61.
        let one = b64(&[0x01]);
        let minus = b64(&[0x20]);
        let bytes = b64(&[0x41, 0x00]);
        let text = b64(&[0x61, 0x61]);
        let doc = json!({"arguments": [
            {"index": 2, "equals": one},
            {"equals": text, "index": 0},
            {"index": 0, "equals": bytes},
            {"index": 0, "equals": minus},
            {"index": 0, "equals": text},
            {"index": 0, "equals": one},
            {"index": 2, "equals": one},
        ]});
        let normalized = filter(doc).unwrap();
        let order: Vec<(u16, &str)> = normalized
            .arguments
            .iter()
            .map(|c| (c.index, c.text.as_str()))
            .collect();
        assert_eq!(
            order,
            [
                (0, one.as_str()),
                (0, &minus),
                (0, &bytes),
                (0, &text),
                (2, &one)
            ]
        );
        // Input order does not change the normalization or the digest.
        let reversed = json!({"arguments": [
            {"index": 2, "equals": one},
            {"index": 0, "equals": one},
            {"index": 0, "equals": text},
            {"index": 0, "equals": minus},
            {"index": 0, "equals": bytes},
        ]});
        let other = filter(reversed).unwrap();
        assert_eq!(other, normalized);
        assert_eq!(other.digest(), normalized.digest());
    }

    #[test]
    fn digest_is_pinned_and_independently_constructed() {
        let predicate = b64(&label("p")); // d8 27 41 70
        assert_eq!(predicate, "2CdBcA==");
        let doc = json!({
            "origin": "append",
            "predicate": predicate,
            "arguments": [
                {"index": 1, "equals": "AQ=="},
                {"index": 0, "equals": "YWE="},
                {"index": 1, "equals": "AQ=="},
            ],
            "positions": {"after": 2},
        });
        let normalized = filter(doc).unwrap();

        // [label "lab.journal.filter.v1", {origin, arguments, positions, predicate}]
        // with map keys in canonical order (shorter first, then bytewise).
        let mut cbor = vec![0x82, 0xd8, 0x27, 0x55];
        cbor.extend_from_slice(b"lab.journal.filter.v1");
        cbor.push(0xa4);
        cbor.push(0x66);
        cbor.extend_from_slice(b"origin");
        cbor.push(0x66);
        cbor.extend_from_slice(b"append");
        cbor.push(0x69);
        cbor.extend_from_slice(b"arguments");
        cbor.push(0x82);
        for (index, equals) in [(0u8, "YWE="), (1, "AQ==")] {
            cbor.extend_from_slice(&[0xa2, 0x65]);
            cbor.extend_from_slice(b"index");
            cbor.push(index);
            cbor.push(0x66);
            cbor.extend_from_slice(b"equals");
            cbor.push(0x64);
            cbor.extend_from_slice(equals.as_bytes());
        }
        cbor.push(0x69);
        cbor.extend_from_slice(b"positions");
        cbor.extend_from_slice(&[0xa2, 0x65]);
        cbor.extend_from_slice(b"after");
        cbor.push(0x02);
        cbor.push(0x67);
        cbor.extend_from_slice(b"through");
        cbor.extend_from_slice(&[0x1b, 0x00, 0x1f, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff]);
        cbor.push(0x69);
        cbor.extend_from_slice(b"predicate");
        cbor.push(0x68);
        cbor.extend_from_slice(b"2CdBcA==");
        let independent: [u8; 32] = Sha256::digest(&cbor).into();

        assert_eq!(normalized.digest(), independent);
        assert_eq!(
            hex(&normalized.digest()),
            "43f22a99e24c46d0afb90bccfdb952c1ba759bd1a4c1c08069cc3e409a13edd3"
        );
    }

    #[test]
    fn unfiltered_digest_is_pinned() {
        let mut cbor = vec![0x82, 0xd8, 0x27, 0x55];
        cbor.extend_from_slice(b"lab.journal.filter.v1");
        cbor.extend_from_slice(&[0xa4, 0x66]);
        cbor.extend_from_slice(b"origin");
        cbor.extend_from_slice(&[0xf6, 0x69]);
        cbor.extend_from_slice(b"arguments");
        cbor.extend_from_slice(&[0x80, 0x69]);
        cbor.extend_from_slice(b"positions");
        cbor.extend_from_slice(&[0xa2, 0x65]);
        cbor.extend_from_slice(b"after");
        cbor.extend_from_slice(&[0x00, 0x67]);
        cbor.extend_from_slice(b"through");
        cbor.extend_from_slice(&[0x1b, 0x00, 0x1f, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x69]);
        cbor.extend_from_slice(b"predicate");
        cbor.push(0xf6);
        let independent: [u8; 32] = Sha256::digest(&cbor).into();
        assert_eq!(Filter::unfiltered().digest(), independent);
        assert_eq!(
            hex(&Filter::unfiltered().digest()),
            "1dd6e4933a64d3224da7d208a46c551cb19805c4e86a8758fbee535f1fb2a1d7"
        );
    }

    #[test]
    fn refusals() {
        assert_invalid(filter(json!([])), "filter");
        assert_invalid(filter(json!({"Predicate": "2CdBcA=="})), "filter.Predicate");
        assert_invalid(filter(json!({"predicate": null})), "filter.predicate");
        assert_invalid(filter(json!({"predicate": 1})), "filter.predicate");
        assert_invalid(filter(json!({"predicate": "2CdBcA"})), "filter.predicate");
        // A tuple is not an atom; a map is not either.
        assert_invalid(
            filter(json!({"predicate": b64(&[0x81, 0x01])})),
            "filter.predicate",
        );
        assert_invalid(
            filter(json!({"predicate": b64(&[0xa0])})),
            "filter.predicate",
        );
        // Not canonical: non-shortest integer.
        assert_invalid(
            filter(json!({"predicate": b64(&[0x18, 0x01])})),
            "filter.predicate",
        );
        // Over 1 MiB, and an atom payload over the bound.
        let mut big = vec![0x5a, 0x00, 0x10, 0x00, 0x00];
        big.resize(big.len() + (1 << 20), 0);
        assert_limit(filter(json!({"predicate": b64(&big)})));
        assert_limit(filter(
            json!({"arguments": [{"index": 0, "equals": b64(&big)}]}),
        ));
        // Depth is a value bound.
        let mut deep = vec![0x81; 257];
        deep.push(0x01);
        assert_limit(filter(
            json!({"arguments": [{"index": 0, "equals": b64(&deep)}]}),
        ));
        let mut shallow = vec![0x81; 256];
        shallow.push(0x01);
        assert!(filter(json!({"arguments": [{"index": 0, "equals": b64(&shallow)}]})).is_ok());

        let args = |item: Value| {
            filter(
                json!({"arguments": [{"index": 0, "equals": "AQ=="}, {"index": 1, "equals": "AQ=="}, item]}),
            )
        };
        assert_invalid(
            args(json!({"index": 65536, "equals": "AQ=="})),
            "filter.arguments[2].index",
        );
        assert!(args(json!({"index": 65535, "equals": "AQ=="})).is_ok());
        assert_invalid(
            args(json!({"index": -1, "equals": "AQ=="})),
            "filter.arguments[2].index",
        );
        assert_invalid(
            args(json!({"index": 1.0, "equals": "AQ=="})),
            "filter.arguments[2].index",
        );
        assert_invalid(args(json!({"equals": "AQ=="})), "filter.arguments[2].index");
        assert_invalid(args(json!({"index": 0})), "filter.arguments[2].equals");
        assert_invalid(
            args(json!({"index": 0, "equals": null})),
            "filter.arguments[2].equals",
        );
        assert_invalid(
            args(json!({"index": 0, "equals": "AQ"})),
            "filter.arguments[2].equals",
        );
        assert_invalid(
            args(json!({"index": 0, "equals": "YQ=="})),
            "filter.arguments[2].equals",
        );
        assert_invalid(
            args(json!({"index": 0, "equals": "AQ==", "Equals": "AQ=="})),
            "filter.arguments[2].Equals",
        );
        assert_invalid(args(json!("AQ==")), "filter.arguments[2]");
        assert_invalid(filter(json!({"arguments": null})), "filter.arguments");
        assert_invalid(filter(json!({"arguments": {}})), "filter.arguments");

        assert_invalid(filter(json!({"origin": "Append"})), "filter.origin");
        assert_invalid(filter(json!({"origin": null})), "filter.origin");
        assert_invalid(filter(json!({"positions": []})), "filter.positions");
        assert_invalid(
            filter(json!({"positions": {"after": -0.0}})),
            "filter.positions.after",
        );
        assert_invalid(
            filter(json!({"positions": {"through": 9_007_199_254_740_992u64}})),
            "filter.positions.through",
        );
        assert_invalid(
            filter(json!({"positions": {"before": 1}})),
            "filter.positions.before",
        );
    }

    #[test]
    fn matching() {
        let fact = |items: Vec<Datum>| Datum::Tuple(items);
        let p = Datum::label("p");
        let entry = lab_values::encode(&fact(vec![p.clone(), Datum::text("aa"), Datum::int(1u64)]));
        let any = Filter::unfiltered();
        assert!(any.matches(&entry, Origin::Append, 1));
        assert!(any.matches(&entry, Origin::Create, MAX_POSITION));
        // Not facts: an atom, an empty tuple, a tuple led by a tuple, bytes
        // that are no value.
        for not_a_fact in [
            Datum::label("p"),
            fact(vec![]),
            fact(vec![fact(vec![]), Datum::int(1u64)]),
        ] {
            assert!(!any.matches(&lab_values::encode(&not_a_fact), Origin::Append, 1));
        }
        assert!(!any.matches(&[0x82, 0x01], Origin::Append, 1));

        let by = |doc: Value| filter(doc).unwrap();
        let predicate = by(json!({"predicate": b64(&label("p"))}));
        assert!(predicate.matches(&entry, Origin::Append, 1));
        let other = lab_values::encode(&fact(vec![Datum::text("p"), Datum::text("aa")]));
        assert!(!predicate.matches(&other, Origin::Append, 1));

        let first = by(json!({"arguments": [{"index": 0, "equals": b64(&[0x62, 0x61, 0x61])}]}));
        assert!(first.matches(&entry, Origin::Append, 1));
        let second = by(json!({"arguments": [{"index": 1, "equals": "AQ=="}]}));
        assert!(second.matches(&entry, Origin::Append, 1));
        let beyond = by(json!({"arguments": [{"index": 2, "equals": "AQ=="}]}));
        assert!(!beyond.matches(&entry, Origin::Append, 1));
        let both = by(json!({"arguments": [
            {"index": 1, "equals": "AQ=="}, {"index": 1, "equals": "Ag=="},
        ]}));
        assert!(!both.matches(&entry, Origin::Append, 1));
        let nested = lab_values::encode(&fact(vec![p.clone(), fact(vec![Datum::int(1u64)])]));
        let tuple = by(json!({"arguments": [{"index": 0, "equals": b64(&[0x81, 0x01])}]}));
        assert!(tuple.matches(&nested, Origin::Append, 1));
        assert!(!tuple.matches(&entry, Origin::Append, 1));

        let create = by(json!({"origin": "create"}));
        assert!(create.matches(&entry, Origin::Create, 1));
        assert!(!create.matches(&entry, Origin::Append, 1));

        let window = by(json!({"positions": {"after": 2, "through": 4}}));
        let hits: Vec<u64> = (0..=6)
            .filter(|&n| window.matches(&entry, Origin::Append, n))
            .collect();
        assert_eq!(hits, [3, 4]);
        let empty = by(json!({"positions": {"after": 4, "through": 2}}));
        assert!((0..=6).all(|n| !empty.matches(&entry, Origin::Append, n)));
    }
}
