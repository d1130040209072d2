//! The declared argument index: the (predicate, argument index) pairs whose
//! values a store indexes, fixed when the store is provisioned
//! (`docs/journal.md`, "The argument index").
//!
//! The deployment names them in the setting `argument-index`
//! (`--journal-argument-index`): comma-separated `PREDICATE:INDEX` items,
//! PREDICATE the canonical padded standard base64 of a canonical atom (a
//! filter's `predicate`), INDEX 0..=65535; the empty text declares none.
//! The store keeps them as `meta/argument-index`: each pair as its
//! predicate's index key (16 octets) and the index (u16 big-endian), sorted,
//! none twice.

use crate::store::index_key;

/// One stored pair: the predicate's index key and the argument index.
pub type Pair = ([u8; 16], u16);

/// Octets of one stored pair.
const PAIR_BYTES: usize = 18;

/// The pairs a store indexes. Invariant: sorted, none twice.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ArgumentIndex(Vec<Pair>);

impl ArgumentIndex {
    /// The pairs the setting's text names; a message naming the first
    /// malformed item otherwise.
    pub fn parse(text: &str) -> Result<ArgumentIndex, String> {
        if text.is_empty() {
            return Ok(ArgumentIndex::default());
        }
        let pairs = text
            .split(',')
            .map(|item| parse_item(item).map_err(|why| format!("the item {item:?} {why}")))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(ArgumentIndex::from_pairs(pairs))
    }

    fn from_pairs(mut pairs: Vec<Pair>) -> ArgumentIndex {
        pairs.sort_unstable();
        pairs.dedup();
        ArgumentIndex(pairs)
    }

    /// The stored form; none when `meta/argument-index` is malformed.
    pub fn decode(bytes: &[u8]) -> Option<ArgumentIndex> {
        if !bytes.len().is_multiple_of(PAIR_BYTES) {
            return None;
        }
        let pairs: Vec<Pair> = bytes
            .chunks_exact(PAIR_BYTES)
            .map(|pair| {
                let (key, index) = pair.split_at(16);
                (
                    key.try_into().expect("16 octets"),
                    u16::from_be_bytes([index[0], index[1]]),
                )
            })
            .collect();
        let stored = ArgumentIndex::from_pairs(pairs.clone());
        (stored.0 == pairs).then_some(stored)
    }

    pub fn encode(&self) -> Vec<u8> {
        self.0
            .iter()
            .flat_map(|(key, index)| key.iter().copied().chain(index.to_be_bytes()))
            .collect()
    }

    /// Whether argument `index` of facts with this predicate key is indexed.
    pub fn declares(&self, predicate: &[u8; 16], index: u16) -> bool {
        self.0.binary_search(&(*predicate, index)).is_ok()
    }

    /// The argument indexes declared for this predicate key, ascending.
    pub fn indexes_of<'a>(&'a self, predicate: &'a [u8; 16]) -> impl Iterator<Item = u16> + 'a {
        self.0
            .iter()
            .filter(move |(key, _)| key == predicate)
            .map(|(_, index)| *index)
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

/// `PREDICATE:INDEX`; the reason it is malformed otherwise.
fn parse_item(item: &str) -> Result<Pair, String> {
    let (predicate, index) = item.rsplit_once(':').ok_or("is not PREDICATE:INDEX")?;
    let bytes = lab_strict_json::decode_canonical_base64(predicate)
        .ok_or("does not begin with canonical padded standard base64")?;
    let value = lab_values::decode_bounded(&bytes, lab_values::MAX_FACT)
        .map_err(|e| format!("does not name a canonical value: {e}"))?;
    if !value.is_atom() {
        return Err("names a predicate that is not an atom".into());
    }
    if index.is_empty() || !index.bytes().all(|b| b.is_ascii_digit()) {
        return Err("has an index that is not a decimal integer".into());
    }
    let index: u16 = index
        .parse()
        .map_err(|_| format!("has an index above {}", u16::MAX))?;
    Ok((index_key(&bytes), index))
}

#[cfg(test)]
mod tests {
    use super::*;
    use lab_values::Value;

    fn b64(value: &Value) -> String {
        use base64::Engine as _;
        base64::engine::general_purpose::STANDARD.encode(lab_values::encode(value))
    }

    #[test]
    fn the_setting_names_sorted_pairs_stored_alike() {
        let record = b64(&Value::label("record"));
        assert_eq!(record, "2CdGcmVjb3Jk");
        let declared =
            ArgumentIndex::parse(&format!("{record}:4,{record}:1,{record}:4,Bw==:65535")).unwrap();
        let record_key = index_key(&lab_values::encode(&Value::label("record")));
        let seven = index_key(&lab_values::encode(&Value::int(7u64)));
        assert!(declared.declares(&record_key, 4));
        assert!(declared.declares(&record_key, 1));
        assert!(!declared.declares(&record_key, 0));
        assert!(declared.declares(&seven, 65535));
        assert_eq!(declared.indexes_of(&record_key).collect::<Vec<_>>(), [1, 4]);
        assert_eq!(declared.encode().len(), 3 * PAIR_BYTES);
        assert_eq!(ArgumentIndex::decode(&declared.encode()), Some(declared));
        assert_eq!(ArgumentIndex::parse("").unwrap(), ArgumentIndex::default());
        assert_eq!(ArgumentIndex::decode(b""), Some(ArgumentIndex::default()));
        assert_eq!(ArgumentIndex::decode(&[0; 17]), None);
        let mut unsorted = [1u8; 18].to_vec();
        unsorted.extend([0u8; 18]);
        assert_eq!(ArgumentIndex::decode(&unsorted), None);
    }

    #[test]
    fn a_malformed_item_is_named() {
        let record = b64(&Value::label("record"));
        let tuple = b64(&Value::Tuple(vec![Value::label("record")]));
        for (text, why) in [
            (",".to_string(), "is not PREDICATE:INDEX"),
            (record.to_string(), "is not PREDICATE:INDEX"),
            (format!("{record}:4,"), "is not PREDICATE:INDEX"),
            (format!("{record}:"), "not a decimal integer"),
            (format!("{record}:+4"), "not a decimal integer"),
            (format!("{record}:65536"), "above 65535"),
            (
                "2CdGcmVjb3Jk=:1".to_string(),
                "canonical padded standard base64",
            ),
            (
                "2CdGcmVjb3J:1".to_string(),
                "canonical padded standard base64",
            ),
            ("GAE=:1".to_string(), "canonical value"),
            (format!("{tuple}:1"), "not an atom"),
        ] {
            let message = ArgumentIndex::parse(&text).unwrap_err();
            assert!(message.contains(why), "{text}: {message}");
        }
    }
}
