//! Reading `contracts/values/vectors.json` and its value notation.

use lab_values::{Int, Map, Value};

/// The vector file, read at compile time so the tests need no filesystem.
pub const VECTORS: &str = include_str!(concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../../contracts/values/vectors.json"
));

/// One vector.
pub struct Vector {
    pub name: String,
    pub hex: String,
    pub base64: String,
    pub valid: bool,
    pub value: Option<serde_json::Value>,
    pub error: Option<String>,
}

/// All vectors, refusing any member outside the documented format.
pub fn vectors() -> Vec<Vector> {
    let doc: serde_json::Value = serde_json::from_str(VECTORS).expect("vectors.json parses");
    let items = doc.as_array().expect("vectors.json is an array");
    items
        .iter()
        .map(|item| {
            let object = item.as_object().expect("a vector is an object");
            for member in object.keys() {
                assert!(
                    ["name", "hex", "base64", "valid", "value", "error"].contains(&member.as_str()),
                    "unknown member {member}"
                );
            }
            let text = |member: &str| {
                object
                    .get(member)
                    .and_then(|v| v.as_str())
                    .map(str::to_owned)
            };
            Vector {
                name: text("name").expect("name"),
                hex: text("hex").expect("hex"),
                base64: text("base64").expect("base64"),
                valid: object
                    .get("valid")
                    .and_then(|v| v.as_bool())
                    .expect("valid"),
                value: object.get("value").cloned(),
                error: text("error"),
            }
        })
        .collect()
}

/// The value a notation describes; map entries must be listed in canonical
/// key order.
pub fn from_notation(note: &serde_json::Value) -> Value {
    use serde_json::Value as J;
    match note {
        J::Null => Value::Null,
        J::Bool(b) => Value::Bool(*b),
        J::Array(children) => Value::Tuple(children.iter().map(from_notation).collect()),
        J::Object(object) => {
            assert_eq!(object.len(), 1, "a notation object has one member: {note}");
            let (kind, inner) = object.iter().next().unwrap();
            let text = || inner.as_str().expect("a string").to_owned();
            match kind.as_str() {
                "int" => {
                    let n: i128 = text().parse().expect("decimal int");
                    Value::Int(Int::from_i128(n).expect("int in range"))
                }
                "text" => Value::Text(text()),
                "label" => Value::Label(text().into_bytes()),
                "label_hex" => Value::Label(hex::decode(text()).expect("hex label")),
                "bytes" => Value::Bytes(hex::decode(text()).expect("hex bytes")),
                "map" => {
                    let entries: Vec<(Value, Value)> = inner
                        .as_array()
                        .expect("map entries")
                        .iter()
                        .map(|pair| match pair.as_array().map(Vec::as_slice) {
                            Some([k, v]) => (from_notation(k), from_notation(v)),
                            _ => panic!("a map entry is a [key, value] pair: {pair}"),
                        })
                        .collect();
                    let map: Map = entries.iter().cloned().collect();
                    assert_eq!(
                        map.entries(),
                        entries.as_slice(),
                        "entries in canonical order"
                    );
                    Value::Map(map)
                }
                other => panic!("unknown notation kind {other}"),
            }
        }
        J::Number(_) | J::String(_) => panic!("bare numbers and strings are not notation: {note}"),
    }
}
