//! The data model: atoms, tuples and maps kept in canonical key order.

use crate::encode::encode;
use crate::int::Int;

/// One canonical value.
///
/// Every value has exactly one representation: integers have a single form
/// ([`Int`]) and [`Map`] keeps its entries in canonical key order without
/// duplicates. Derived equality is therefore equality of canonical bytes.
///
/// Any value can be built and encoded; only values within the decoding
/// bounds ([`crate::MAX_DEPTH`], [`crate::MAX_ARITY`],
/// [`crate::MAX_PAYLOAD`]) decode again.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Value {
    /// An atom naming something; any bytes, possibly empty or non-UTF-8.
    Label(Vec<u8>),
    /// Exact Unicode text, never normalized.
    Text(String),
    /// An integer in -2^64 ..= 2^64-1.
    Int(Int),
    /// Opaque octets.
    Bytes(Vec<u8>),
    /// A boolean.
    Bool(bool),
    /// Null.
    Null,
    /// Ordered children.
    Tuple(Vec<Value>),
    /// Unique keys, each mapped to a value.
    Map(Map),
}

impl Value {
    /// A label atom.
    pub fn label(name: impl Into<Vec<u8>>) -> Value {
        Value::Label(name.into())
    }

    /// A text atom.
    pub fn text(text: impl Into<String>) -> Value {
        Value::Text(text.into())
    }

    /// An integer atom.
    pub fn int(n: impl Into<Int>) -> Value {
        Value::Int(n.into())
    }

    /// A bytes atom.
    pub fn bytes(bytes: impl Into<Vec<u8>>) -> Value {
        Value::Bytes(bytes.into())
    }

    /// Whether the value is an atom (label, text, int, bytes, bool or null).
    pub fn is_atom(&self) -> bool {
        !matches!(self, Value::Tuple(_) | Value::Map(_))
    }

    /// The predicate and arguments when the value is a fact: a tuple of
    /// arity >= 1 whose first child is an atom.
    pub fn as_fact(&self) -> Option<(&Value, &[Value])> {
        match self {
            Value::Tuple(children) => match children.split_first() {
                Some((predicate, arguments)) if predicate.is_atom() => Some((predicate, arguments)),
                _ => None,
            },
            _ => None,
        }
    }

    /// The canonical encoding of the value.
    pub fn to_bytes(&self) -> Vec<u8> {
        encode(self)
    }
}

impl From<Int> for Value {
    fn from(n: Int) -> Value {
        Value::Int(n)
    }
}

impl From<bool> for Value {
    fn from(b: bool) -> Value {
        Value::Bool(b)
    }
}

impl From<&str> for Value {
    fn from(text: &str) -> Value {
        Value::Text(text.to_owned())
    }
}

impl From<String> for Value {
    fn from(text: String) -> Value {
        Value::Text(text)
    }
}

impl From<Vec<Value>> for Value {
    fn from(children: Vec<Value>) -> Value {
        Value::Tuple(children)
    }
}

impl From<Map> for Value {
    fn from(map: Map) -> Value {
        Value::Map(map)
    }
}

/// A map from values to values.
///
/// Invariant: `entries` is strictly ascending by the canonical encoding of
/// the keys, so no key occurs twice and iteration follows encoding order.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct Map {
    entries: Vec<(Value, Value)>,
}

impl Map {
    /// An empty map.
    pub fn new() -> Map {
        Map::default()
    }

    /// Wraps entries the caller guarantees are strictly ascending by
    /// encoded key.
    pub(crate) fn from_sorted(entries: Vec<(Value, Value)>) -> Map {
        Map { entries }
    }

    /// Number of entries.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether the map has no entries.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// The entries in canonical key order.
    pub fn entries(&self) -> &[(Value, Value)] {
        &self.entries
    }

    /// Iterates over the entries in canonical key order.
    pub fn iter(&self) -> std::slice::Iter<'_, (Value, Value)> {
        self.entries.iter()
    }

    /// The entries in canonical key order, consuming the map.
    pub fn into_entries(self) -> Vec<(Value, Value)> {
        self.entries
    }

    fn search(&self, key: &Value) -> Result<usize, usize> {
        let probe = encode(key);
        self.entries
            .binary_search_by(|(k, _)| encode(k).as_slice().cmp(probe.as_slice()))
    }

    /// The value under `key`, if any.
    pub fn get(&self, key: &Value) -> Option<&Value> {
        self.search(key).ok().map(|i| &self.entries[i].1)
    }

    /// Puts `value` under `key`, returning the value it replaces.
    pub fn insert(&mut self, key: Value, value: Value) -> Option<Value> {
        match self.search(&key) {
            Ok(i) => Some(std::mem::replace(&mut self.entries[i].1, value)),
            Err(i) => {
                self.entries.insert(i, (key, value));
                None
            }
        }
    }

    /// Removes `key`, returning its value.
    pub fn remove(&mut self, key: &Value) -> Option<Value> {
        self.search(key).ok().map(|i| self.entries.remove(i).1)
    }
}

/// Collects entries; a later entry replaces an earlier one with an equal key.
impl FromIterator<(Value, Value)> for Map {
    fn from_iter<I: IntoIterator<Item = (Value, Value)>>(iter: I) -> Map {
        let mut keyed: Vec<(Vec<u8>, Value, Value)> =
            iter.into_iter().map(|(k, v)| (encode(&k), k, v)).collect();
        // Stable, so among equal keys the last one collected stays last.
        keyed.sort_by(|a, b| a.0.cmp(&b.0));
        let mut entries: Vec<(Value, Value)> = Vec::with_capacity(keyed.len());
        let mut last_key: Option<Vec<u8>> = None;
        for (encoded, k, v) in keyed {
            if last_key.as_deref() == Some(encoded.as_slice()) {
                if let Some(slot) = entries.last_mut() {
                    *slot = (k, v);
                }
            } else {
                entries.push((k, v));
                last_key = Some(encoded);
            }
        }
        Map { entries }
    }
}

impl<'a> IntoIterator for &'a Map {
    type Item = &'a (Value, Value);
    type IntoIter = std::slice::Iter<'a, (Value, Value)>;
    fn into_iter(self) -> Self::IntoIter {
        self.entries.iter()
    }
}

impl IntoIterator for Map {
    type Item = (Value, Value);
    type IntoIter = std::vec::IntoIter<(Value, Value)>;
    fn into_iter(self) -> Self::IntoIter {
        self.entries.into_iter()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn map_orders_by_encoded_key() {
        // Encodings: 0a, 18 64, 20, 61 61, 62 61 61 — so 10 < 100 < -1 < "a" < "aa".
        let keys = [
            Value::text("aa"),
            Value::int(-1i64),
            Value::text("a"),
            Value::int(100u64),
            Value::int(10u64),
        ];
        let mut map = Map::new();
        for k in keys.iter().cloned() {
            assert_eq!(map.insert(k, Value::Null), None);
        }
        let order: Vec<Value> = map.iter().map(|(k, _)| k.clone()).collect();
        assert_eq!(
            order,
            vec![
                Value::int(10u64),
                Value::int(100u64),
                Value::int(-1i64),
                Value::text("a"),
                Value::text("aa"),
            ]
        );
        let collected: Map = keys.iter().cloned().map(|k| (k, Value::Null)).collect();
        assert_eq!(collected, map);
    }

    #[test]
    fn map_replaces_and_removes() {
        let mut map = Map::new();
        assert_eq!(map.insert(Value::text("k"), Value::int(1u64)), None);
        assert_eq!(
            map.insert(Value::text("k"), Value::int(2u64)),
            Some(Value::int(1u64))
        );
        assert_eq!(map.get(&Value::text("k")), Some(&Value::int(2u64)));
        assert_eq!(map.get(&Value::label("k")), None);
        assert_eq!(map.remove(&Value::text("k")), Some(Value::int(2u64)));
        assert!(map.is_empty());

        let collected: Map = vec![
            (Value::text("k"), Value::int(1u64)),
            (Value::text("j"), Value::Null),
            (Value::text("k"), Value::int(3u64)),
        ]
        .into_iter()
        .collect();
        assert_eq!(collected.len(), 2);
        assert_eq!(collected.get(&Value::text("k")), Some(&Value::int(3u64)));
    }

    #[test]
    fn atoms_and_facts() {
        assert!(Value::label("p").is_atom());
        assert!(Value::Null.is_atom());
        assert!(!Value::Tuple(vec![]).is_atom());
        assert!(!Value::Map(Map::new()).is_atom());

        let fact = Value::Tuple(vec![Value::label("p"), Value::int(1u64)]);
        let (predicate, arguments) = fact.as_fact().unwrap();
        assert_eq!(predicate, &Value::label("p"));
        assert_eq!(arguments, &[Value::int(1u64)]);
        assert!(Value::Tuple(vec![Value::text("p")]).as_fact().is_some());
        assert!(Value::Tuple(vec![]).as_fact().is_none());
        assert!(Value::Tuple(vec![Value::Tuple(vec![])]).as_fact().is_none());
        assert!(Value::label("p").as_fact().is_none());
    }
}
