//! The data model produced by [`parse`](crate::parse()).

use serde::ser::{Serialize, SerializeMap, SerializeSeq, Serializer};

/// One JSON value.
#[derive(Debug, Clone, PartialEq)]
pub enum Json {
    Null,
    Bool(bool),
    Number(Number),
    String(String),
    Array(Vec<Json>),
    Object(Object),
}

/// A JSON number, classified by how its literal was written.
///
/// - `Unsigned(n)`: a literal of digits only — no sign, fraction or exponent —
///   whose value fits in `u64`. "A canonical non-negative integer" in the
///   service specifications is exactly this variant.
/// - `Negative(n)`: `-` followed by digits only, no fraction or exponent, with
///   a value in `i64::MIN..=-1`. Always negative.
/// - `Other(x)`: everything else, as the nearest `f64`: any literal with a
///   fraction or exponent (`1.0`, `1e2`), `-0`, and integers outside the two
///   ranges above (`18446744073709551616`). Always finite: literals beyond the
///   range of `f64` are refused by the parser.
///
/// So `1` is `Unsigned(1)` while `1.0` and `1e0` are `Other(1.0)`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Number {
    Unsigned(u64),
    Negative(i64),
    Other(f64),
}

/// A JSON object: its members in document order.
///
/// Invariant: an `Object` produced by [`parse`](crate::parse()) never holds
/// two members with the same name. Names are compared as exact bytes after
/// unescaping: case-sensitive and never Unicode-normalized.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Object {
    pub(crate) members: Vec<(String, Json)>,
}

impl Json {
    /// A short name of the value's type, for messages.
    pub fn kind(&self) -> &'static str {
        match self {
            Json::Null => "null",
            Json::Bool(_) => "boolean",
            Json::Number(_) => "number",
            Json::String(_) => "string",
            Json::Array(_) => "array",
            Json::Object(_) => "object",
        }
    }

    pub fn is_null(&self) -> bool {
        matches!(self, Json::Null)
    }

    pub fn as_bool(&self) -> Option<bool> {
        match self {
            Json::Bool(b) => Some(*b),
            _ => None,
        }
    }

    /// The value if it is a canonical non-negative integer
    /// ([`Number::Unsigned`]).
    pub fn as_u64(&self) -> Option<u64> {
        match self {
            Json::Number(Number::Unsigned(n)) => Some(*n),
            _ => None,
        }
    }

    pub fn as_str(&self) -> Option<&str> {
        match self {
            Json::String(s) => Some(s),
            _ => None,
        }
    }

    pub fn as_array(&self) -> Option<&[Json]> {
        match self {
            Json::Array(items) => Some(items),
            _ => None,
        }
    }

    pub fn as_object(&self) -> Option<&Object> {
        match self {
            Json::Object(object) => Some(object),
            _ => None,
        }
    }
}

impl Object {
    /// The member called exactly `name`.
    pub fn get(&self, name: &str) -> Option<&Json> {
        self.members
            .iter()
            .find(|(member, _)| member == name)
            .map(|(_, value)| value)
    }

    pub fn contains(&self, name: &str) -> bool {
        self.get(name).is_some()
    }

    pub fn len(&self) -> usize {
        self.members.len()
    }

    pub fn is_empty(&self) -> bool {
        self.members.is_empty()
    }

    /// Members in document order.
    pub fn members(&self) -> &[(String, Json)] {
        &self.members
    }

    pub fn iter(&self) -> impl Iterator<Item = (&str, &Json)> {
        self.members
            .iter()
            .map(|(name, value)| (name.as_str(), value))
    }

    /// Members in document order.
    pub fn into_members(self) -> Vec<(String, Json)> {
        self.members
    }
}

impl Serialize for Number {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match *self {
            Number::Unsigned(n) => serializer.serialize_u64(n),
            Number::Negative(n) => serializer.serialize_i64(n),
            Number::Other(x) => serializer.serialize_f64(x),
        }
    }
}

/// Serializes members in document order.
impl Serialize for Object {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut map = serializer.serialize_map(Some(self.members.len()))?;
        for (name, value) in &self.members {
            map.serialize_entry(name, value)?;
        }
        map.end()
    }
}

impl Serialize for Json {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match self {
            Json::Null => serializer.serialize_unit(),
            Json::Bool(b) => serializer.serialize_bool(*b),
            Json::Number(n) => n.serialize(serializer),
            Json::String(s) => serializer.serialize_str(s),
            Json::Array(items) => {
                let mut seq = serializer.serialize_seq(Some(items.len()))?;
                for item in items {
                    seq.serialize_element(item)?;
                }
                seq.end()
            }
            Json::Object(object) => object.serialize(serializer),
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::parse;

    #[test]
    fn object_keeps_document_order_and_exact_names() {
        let json = parse(br#"{"b":1,"a":2,"A":3}"#).unwrap();
        let object = json.as_object().unwrap();
        let names: Vec<&str> = object.iter().map(|(name, _)| name).collect();
        assert_eq!(names, ["b", "a", "A"]);
        assert_eq!(object.get("A").and_then(|v| v.as_u64()), Some(3));
        assert!(!object.contains("B"));
        assert_eq!(object.len(), 3);
    }

    #[test]
    fn accessors() {
        let json = parse(br#"[null,true,7,"s",[],{}]"#).unwrap();
        let items = json.as_array().unwrap();
        assert!(items[0].is_null());
        assert_eq!(items[1].as_bool(), Some(true));
        assert_eq!(items[2].as_u64(), Some(7));
        assert_eq!(items[3].as_str(), Some("s"));
        assert_eq!(items[4].as_array().map(<[_]>::len), Some(0));
        assert!(items[5].as_object().unwrap().is_empty());
        let kinds: Vec<&str> = items.iter().map(|v| v.kind()).collect();
        assert_eq!(
            kinds,
            ["null", "boolean", "number", "string", "array", "object"]
        );
    }

    #[test]
    fn serializes_back_in_document_order() {
        let text = r#"{"z":[1,-2,0.5,"\u00e9",null,false],"a":{}}"#;
        let json = parse(text.as_bytes()).unwrap();
        assert_eq!(
            serde_json::to_string(&json).unwrap(),
            r#"{"z":[1,-2,0.5,"é",null,false],"a":{}}"#
        );
    }
}
