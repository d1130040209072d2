//! Socket call envelopes (`contracts/coordination/WS.md`, "Call
//! envelope") from the lines `labctl ws` reads: `{"op", "params"?,
//! "body"?, "id"?}`, checked against the socket's operation table before
//! anything is signed.
//!
//! The signing record's body digest is the SHA-256 of the RFC 8785 text
//! of `body`, or of the empty string without one (WS.md decision 10).

use lab_coord_auth::record::MAX_SAFE_INTEGER;
use lab_coord_auth::{canonical_json, Carriage, ParamValue, Params};
use lab_coord_client::{BodyKind, ParamKind, ParamSpec};
use serde_json::{Map, Value};

/// One call, checked and typed, ready to sign.
#[derive(Debug, Clone, PartialEq)]
pub struct Call {
    pub id: String,
    pub op: &'static str,
    pub params: Params,
    pub body: Option<Value>,
}

/// What the socket's table says of one operation.
struct Row {
    name: &'static str,
    params: &'static [ParamSpec],
    body: bool,
}

/// `unsubscribe`'s parameters; `subscribe` has none and a body.
const UNSUBSCRIBE: &[ParamSpec] = &[ParamSpec {
    name: "subscription",
    kind: ParamKind::String,
    required: true,
}];

/// The longest correlation ID the service accepts.
const MAX_ID: usize = 128;

fn row(op: &str) -> Result<Row, String> {
    match op {
        "subscribe" => Ok(Row {
            name: "subscribe",
            params: &[],
            body: true,
        }),
        "unsubscribe" => Ok(Row {
            name: "unsubscribe",
            params: UNSUBSCRIBE,
            body: false,
        }),
        "retain" | "fetch" => Err(format!(
            "{op} is not carried by the socket; use labctl call {op}"
        )),
        _ => lab_coord_client::find(op)
            .map(|row| Row {
                name: row.name,
                params: row.params,
                body: row.body != BodyKind::None,
            })
            .ok_or_else(|| format!("no socket operation {op:?}")),
    }
}

/// Reads one input line; `default_id` is the correlation ID when the line
/// names none.
pub fn parse_line(text: &str, default_id: String) -> Result<Call, String> {
    let value: Value =
        serde_json::from_str(text).map_err(|err| format!("the line is not JSON: {err}"))?;
    let Value::Object(mut members) = value else {
        return Err("a line is one JSON object: {\"op\", \"params\"?, \"body\"?, \"id\"?}".into());
    };
    if let Some(name) = members
        .keys()
        .find(|name| !["op", "params", "body", "id"].contains(&name.as_str()))
    {
        return Err(format!(
            "unknown member {name:?}; a line has op, params, body and id"
        ));
    }
    let op = match members.remove("op") {
        Some(Value::String(op)) => op,
        _ => return Err("op (a string) is required".into()),
    };
    let id = match members.remove("id") {
        None => default_id,
        Some(Value::String(id)) if (1..=MAX_ID).contains(&id.chars().count()) => id,
        Some(_) => return Err(format!("id is a string of 1 to {MAX_ID} characters")),
    };
    let row = row(&op)?;
    let params = match members.remove("params") {
        None => Params::new(),
        Some(Value::Object(given)) => typed_params(&row, given)?,
        Some(_) => return Err("params is an object".into()),
    };
    if let Some(spec) = row
        .params
        .iter()
        .find(|spec| spec.required && params.get(spec.name).is_none())
    {
        return Err(format!("{} needs the parameter {}", row.name, spec.name));
    }
    let body = members.remove("body");
    match (row.body, &body) {
        (true, None) => return Err(format!("{} needs a body", row.name)),
        (false, Some(_)) => return Err(format!("{} takes no body", row.name)),
        _ => {}
    }
    Ok(Call {
        id,
        op: row.name,
        params,
        body,
    })
}

/// The parameters typed by the row: `string` as strings, `int` as
/// integers, `strings` as arrays of strings.
fn typed_params(row: &Row, given: Map<String, Value>) -> Result<Params, String> {
    let mut params = Params::new();
    for (name, value) in given {
        let Some(spec) = row.params.iter().find(|spec| spec.name == name) else {
            let names: Vec<&str> = row.params.iter().map(|spec| spec.name).collect();
            return Err(format!(
                "{} takes no parameter {name:?} (it takes: {})",
                row.name,
                if names.is_empty() {
                    "none".into()
                } else {
                    names.join(", ")
                }
            ));
        };
        let typed = match (spec.kind, value) {
            (ParamKind::String, Value::String(text)) => ParamValue::String(text),
            (ParamKind::Int, Value::Number(number)) => match number.as_i64() {
                Some(n) if n.unsigned_abs() <= MAX_SAFE_INTEGER => ParamValue::Int(n),
                _ => return Err(format!("parameter {name} is an integer within ±(2^53-1)")),
            },
            (ParamKind::Strings, Value::Array(items)) => ParamValue::Strings(
                items
                    .into_iter()
                    .map(|item| match item {
                        Value::String(label) => Ok(label),
                        _ => Err(format!("parameter {name} is an array of strings")),
                    })
                    .collect::<Result<_, _>>()?,
            ),
            (kind, _) => {
                let shape = match kind {
                    ParamKind::String => "a string",
                    ParamKind::Int => "an integer",
                    ParamKind::Strings => "an array of strings",
                };
                return Err(format!("parameter {name} is {shape}"));
            }
        };
        params.insert(name, typed);
    }
    Ok(params)
}

impl Call {
    /// The bytes whose SHA-256 is the signed body digest.
    pub fn digested(&self) -> Vec<u8> {
        self.body.as_ref().map(canonical_json).unwrap_or_default()
    }

    /// The envelope carrying this call with `auth`.
    pub fn envelope(&self, auth: &Carriage) -> Value {
        lab_coord_client::envelope(&self.id, self.op, &self.params, self.body.clone(), auth)
            .expect("integers were bounded when the line was read")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use lab_coord_auth::{sign_request, Principal, SigningKey};
    use serde_json::json;

    fn call(text: &str) -> Result<Call, String> {
        parse_line(text, "line-1".into())
    }

    #[test]
    fn params_are_typed_by_the_row() {
        let c = call(r#"{"op":"entries","params":{"path":["projects","a"],"after":3,"limit":10}}"#)
            .unwrap();
        assert_eq!(c.id, "line-1");
        assert_eq!(c.op, "entries");
        assert_eq!(
            c.params,
            Params::new()
                .strings("path", ["projects", "a"])
                .int("after", 3)
                .int("limit", 10)
        );
        assert_eq!(c.body, None);
        assert_eq!(c.digested(), b"");
        let c = call(r#"{"op":"unsubscribe","id":"u","params":{"subscription":"sub_1"}}"#).unwrap();
        assert_eq!(c.id, "u");
        assert_eq!(c.params, Params::new().string("subscription", "sub_1"));
    }

    #[test]
    fn bodies_digest_their_canonical_text() {
        let c = call(r#"{"op":"subscribe","body":{"path":["p"],"depth":1}}"#).unwrap();
        assert_eq!(c.digested(), br#"{"depth":1,"path":["p"]}"#);
        let c = call(r#"{"id":"q","op":"query","body":{"z":"\u00e9","a":[1,2]}}"#).unwrap();
        assert_eq!(c.digested(), "{\"a\":[1,2],\"z\":\"é\"}".as_bytes());
    }

    #[test]
    fn the_envelope_carries_what_was_signed() {
        let key = SigningKey::from_bytes(&[7; 32]);
        let c = call(r#"{"op":"children","params":{"path":["w"],"limit":2}}"#).unwrap();
        let nonce = "A".repeat(22);
        let proof = sign_request(&key, c.op, &c.params, &c.digested(), &nonce, 5, "aud").unwrap();
        let carriage = Carriage::new(proof, Vec::new());
        let envelope = c.envelope(&carriage);
        assert_eq!(
            envelope,
            json!({
                "id": "line-1",
                "op": "children",
                "params": {"path": ["w"], "limit": 2},
                "auth": carriage.to_json(),
            })
        );
        assert_eq!(
            envelope["auth"]["proof"]["principal"],
            Principal::of(&key).to_string()
        );
        let c = call(r#"{"op":"subscribe","body":{"path":[]}}"#).unwrap();
        let envelope = c.envelope(&carriage);
        assert_eq!(envelope["body"], json!({"path": []}));
        assert_eq!(envelope["params"], json!({}));
    }

    #[test]
    fn refused_lines() {
        for (line, why) in [
            ("not json", "not JSON"),
            ("[1]", "one JSON object"),
            (r#"{"params":{}}"#, "op (a string) is required"),
            (r#"{"op":"nope"}"#, "no socket operation"),
            (r#"{"op":"fetch"}"#, "not carried by the socket"),
            (r#"{"op":"retain"}"#, "not carried by the socket"),
            (r#"{"op":"resolve","extra":1}"#, "unknown member"),
            (r#"{"op":"resolve","id":""}"#, "id is a string"),
            (r#"{"op":"resolve","id":7}"#, "id is a string"),
            (r#"{"op":"resolve"}"#, "needs the parameter path"),
            (
                r#"{"op":"resolve","params":{"path":"a"}}"#,
                "array of strings",
            ),
            (
                r#"{"op":"resolve","params":{"path":["a",1]}}"#,
                "array of strings",
            ),
            (
                r#"{"op":"entries","params":{"path":["a"],"limit":"1"}}"#,
                "an integer",
            ),
            (
                r#"{"op":"entries","params":{"path":["a"],"limit":1.5}}"#,
                "an integer",
            ),
            (
                r#"{"op":"entries","params":{"path":["a"],"limit":9007199254740992}}"#,
                "within",
            ),
            (r#"{"op":"children","params":{"depth":1}}"#, "no parameter"),
            (r#"{"op":"children","params":[]}"#, "params is an object"),
            (r#"{"op":"subscribe"}"#, "needs a body"),
            (r#"{"op":"publish"}"#, "needs a body"),
            (r#"{"op":"children","body":{}}"#, "takes no body"),
            (
                r#"{"op":"unsubscribe"}"#,
                "needs the parameter subscription",
            ),
        ] {
            let err = call(line).unwrap_err();
            assert!(err.contains(why), "{line}: {err}");
        }
        let long = format!(r#"{{"op":"children","id":"{}"}}"#, "x".repeat(129));
        assert!(call(&long).unwrap_err().contains("id is a string"));
        let longest = format!(r#"{{"op":"children","id":"{}"}}"#, "x".repeat(128));
        assert!(call(&longest).is_ok());
    }
}
