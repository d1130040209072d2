//! Table parameters (request rules 5 to 7): decoded from the HTTP query
//! string ([`parse`]) or from a socket envelope's `params` ([`from_json`]),
//! checked against the operation's parameter list, and kept both typed and
//! in the form the signing record covers. Both bindings give the same
//! [`Query`] for the same parameters.
//!
//! Two stages, in the specification's order (rule 9): [`parse`] takes what
//! the signing record needs (names, repetition, empty values, an integer's
//! written form) before the proof is looked at; [`check_domains`] takes the
//! domain rules 6 and 7 (`limit` range, negative integers, `position` 0,
//! `after` beyond `through`), which follow verification.

use crate::refusal::Refusal;
use crate::table::{Operation, ParamKind};
use lab_coord_auth::{ParamValue, Params};

/// Greatest position of a journal: 2^53 - 1.
pub const MAX_POSITION: u64 = (1 << 53) - 1;
/// Page size when `limit` is omitted or 0.
pub const DEFAULT_LIMIT: u64 = 64;
/// Greatest `limit`.
pub const MAX_LIMIT: u64 = 128;

/// The parameters of one request, validated.
#[derive(Debug, Clone, Default)]
pub struct Query {
    /// What the signing record covers, exactly as received.
    pub signed: Params,
    /// `path`, one label per occurrence; empty when absent.
    pub path: Vec<String>,
    /// Whether `path` was given at all.
    pub has_path: bool,
}

impl Query {
    pub fn string(&self, name: &str) -> Option<&str> {
        match self.signed.get(name) {
            Some(ParamValue::String(s)) => Some(s),
            _ => None,
        }
    }

    /// An integer parameter. Only meaningful after [`check_domains`],
    /// which refuses the negative ones this reads as absent.
    pub fn int(&self, name: &str) -> Option<u64> {
        match self.signed.get(name) {
            Some(ParamValue::Int(n)) => u64::try_from(*n).ok(),
            _ => None,
        }
    }

    /// `limit` with its default: omitted or 0 is 64.
    pub fn limit(&self) -> u64 {
        match self.int("limit") {
            None | Some(0) => DEFAULT_LIMIT,
            Some(n) => n,
        }
    }
}

/// Decodes and checks the raw query string against `operation`'s parameter
/// list (rule 5 and the written form of integers). Refusals are `invalid`
/// naming the parameter.
pub fn parse(operation: &Operation, raw: Option<&str>) -> Result<Query, Refusal> {
    let mut query = Query::default();
    let mut path = Vec::new();
    for pair in raw
        .unwrap_or("")
        .split('&')
        .filter(|_| raw.is_some_and(|r| !r.is_empty()))
    {
        let (name, value) = pair.split_once('=').unwrap_or((pair, ""));
        let name =
            decode(name).ok_or_else(|| Refusal::invalid_request("malformed query string"))?;
        let Some(&(_, kind, _)) = operation.params.iter().find(|(n, _, _)| *n == name) else {
            return Err(if name.is_empty() {
                Refusal::invalid_request("empty query parameter")
            } else {
                Refusal::invalid(&name, format!("unknown query parameter `{name}`"))
            });
        };
        let value = decode(value)
            .ok_or_else(|| Refusal::invalid(&name, "malformed percent-encoding or UTF-8"))?;
        if value.is_empty() {
            return Err(Refusal::invalid(&name, format!("`{name}` is empty")));
        }
        if kind == ParamKind::Strings {
            path.push(value);
            continue;
        }
        if query.signed.get(&name).is_some() {
            return Err(Refusal::invalid(&name, format!("`{name}` is repeated")));
        }
        let parsed = match kind {
            ParamKind::Int => ParamValue::Int(integer(&name, &value)?),
            _ => ParamValue::String(value),
        };
        query.signed.insert(name, parsed);
    }
    for (name, kind, required) in operation.params {
        let present = match kind {
            ParamKind::Strings => !path.is_empty(),
            _ => query.signed.get(name).is_some(),
        };
        if *required && !present {
            return Err(Refusal::invalid(*name, format!("`{name}` is required")));
        }
    }
    if !path.is_empty() {
        for label in &path {
            check_label(label)?;
        }
        query
            .signed
            .insert("path", ParamValue::Strings(path.clone()));
        query.has_path = true;
        query.path = path;
    }
    Ok(query)
}

/// Decodes a socket envelope's `params` object (`None`: absent) against
/// `operation`'s parameter list: `string` kinds as JSON strings, `int`
/// kinds as JSON integers, `strings` kinds as arrays of strings. An
/// unknown name, a wrong kind, an empty string and an empty array are
/// `invalid` naming the parameter: an empty array would sign a record no
/// HTTP request can carry, and an absent path already selects the world.
pub fn from_json(
    operation: &Operation,
    params: Option<lab_strict_json::Json>,
) -> Result<Query, Refusal> {
    use lab_strict_json::{Json, Number};
    let mut query = Query::default();
    let members = match params {
        None => Vec::new(),
        Some(Json::Object(object)) => object.into_members(),
        Some(_) => {
            return Err(Refusal::invalid(
                "params",
                "`params` is an object of the table parameters by name",
            ))
        }
    };
    for (name, value) in members {
        let Some(&(_, kind, _)) = operation.params.iter().find(|(n, _, _)| *n == name) else {
            return Err(Refusal::invalid(
                &name,
                format!("unknown parameter `{name}`"),
            ));
        };
        let wrong_kind = |what: &str| Refusal::invalid(&name, format!("`{name}` is {what}"));
        let value = match (kind, value) {
            (ParamKind::Str, Json::String(text)) => ParamValue::String(text),
            (ParamKind::Int, Json::Number(Number::Unsigned(n))) if n <= MAX_POSITION => {
                ParamValue::Int(n as i64)
            }
            (ParamKind::Int, Json::Number(Number::Negative(n)))
                if n.unsigned_abs() <= MAX_POSITION =>
            {
                ParamValue::Int(n)
            }
            (ParamKind::Int, Json::Number(Number::Unsigned(_) | Number::Negative(_))) => {
                return Err(wrong_kind("beyond 2^53 - 1"))
            }
            (ParamKind::Strings, Json::Array(items)) => ParamValue::Strings(
                items
                    .into_iter()
                    .map(|item| match item {
                        Json::String(label) => Ok(label),
                        _ => Err(wrong_kind("an array of strings")),
                    })
                    .collect::<Result<_, _>>()?,
            ),
            (ParamKind::Str, _) => return Err(wrong_kind("a string")),
            (ParamKind::Int, _) => return Err(wrong_kind("an integer")),
            (ParamKind::Strings, _) => return Err(wrong_kind("an array of strings")),
        };
        match &value {
            ParamValue::String(text) if text.is_empty() => {
                return Err(Refusal::invalid(&name, format!("`{name}` is empty")))
            }
            ParamValue::Strings(labels) => {
                if labels.is_empty() {
                    return Err(Refusal::invalid(&name, format!("`{name}` is empty")));
                }
                for label in labels {
                    check_label(label)?;
                }
                query.path = labels.clone();
                query.has_path = true;
            }
            _ => {}
        }
        query.signed.insert(name, value);
    }
    for (name, _, required) in operation.params {
        if *required && query.signed.get(name).is_none() {
            return Err(Refusal::invalid(*name, format!("`{name}` is required")));
        }
    }
    Ok(query)
}

/// Rules 6 and 7 that need no journal: no negative integer, the range of
/// `limit`, `position` 0, `after` against `through`. They follow
/// verification: without a valid proof such a request is `unverified`.
pub fn check_domains(query: &Query) -> Result<(), Refusal> {
    for (name, value) in query.signed.iter() {
        if matches!(value, ParamValue::Int(n) if *n < 0) {
            return Err(Refusal::invalid(
                name,
                format!("`{name}` is a position: it is not negative"),
            ));
        }
    }
    if let Some(limit) = query.int("limit") {
        if limit > MAX_LIMIT {
            return Err(Refusal::invalid("limit", "`limit` is at most 128"));
        }
    }
    if query.int("position") == Some(0) {
        return Err(Refusal::invalid("position", "`position` starts at 1"));
    }
    if let (Some(after), Some(through)) = (query.int("after"), query.int("through")) {
        if after > through {
            return Err(Refusal::invalid("after", "`after` is beyond `through`"));
        }
    }
    Ok(())
}

/// An integer as the signing record carries it: an optional `-`, then
/// digits without a leading zero (`-0` is not written), within
/// ±(2^53 - 1). Whether it lies in its domain is [`check_domains`]'s.
fn integer(name: &str, text: &str) -> Result<i64, Refusal> {
    let digits = text.strip_prefix('-').unwrap_or(text);
    let canonical = !digits.is_empty()
        && digits.bytes().all(|b| b.is_ascii_digit())
        && (digits == "0" || !digits.starts_with('0'))
        && text != "-0";
    if !canonical {
        return Err(Refusal::invalid(
            name,
            format!("`{name}` must be an integer written with digits only"),
        ));
    }
    match digits.parse::<u64>() {
        Ok(n) if n <= MAX_POSITION => {
            let n = n as i64;
            Ok(if text.starts_with('-') { -n } else { n })
        }
        _ => Err(Refusal::invalid(
            name,
            format!("`{name}` is beyond 2^53 - 1"),
        )),
    }
}

/// A label of a path: what the journal accepts as a key (1..255 bytes of
/// UTF-8, no control character, no `/`).
pub fn check_label(label: &str) -> Result<(), Refusal> {
    let ok = !label.is_empty()
        && label.len() <= 255
        && !label.contains('/')
        && !label.chars().any(char::is_control);
    if ok {
        Ok(())
    } else {
        Err(Refusal::invalid(
            "path",
            "a path label is 1..255 bytes of UTF-8 with no control character and no `/`",
        ))
    }
}

/// Percent-decoding (RFC 3986): `%XX` is one octet, every other byte stands
/// for itself (`+` included); the result must be UTF-8.
fn decode(text: &str) -> Option<String> {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = bytes.get(i + 1..i + 3)?;
            let hex = std::str::from_utf8(hex).ok()?;
            out.push(u8::from_str_radix(hex, 16).ok()?);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8(out).ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::table;

    fn op(name: &str) -> &'static Operation {
        table::OPERATIONS.iter().find(|o| o.name == name).unwrap()
    }

    /// Both stages, as a verified request meets them.
    fn checked(op: &Operation, raw: Option<&str>) -> Result<Query, Refusal> {
        let query = parse(op, raw)?;
        check_domains(&query)?;
        Ok(query)
    }

    fn code_field(r: Result<Query, Refusal>) -> (String, Option<String>) {
        let r = r.unwrap_err();
        (
            r.code().to_string(),
            r.details()
                .and_then(|d| d["field"].as_str().map(String::from)),
        )
    }

    #[test]
    fn repeated_path_and_percent_decoding() {
        let q = parse(
            op("entries"),
            Some("path=a%20b&path=%C3%A9&path=x%2By+z&limit=5"),
        )
        .unwrap();
        assert_eq!(q.path, ["a b", "é", "x+y+z"]);
        assert_eq!(q.limit(), 5);
        let json = q.signed.to_json().unwrap();
        assert_eq!(json["path"], serde_json::json!(["a b", "é", "x+y+z"]));
        assert_eq!(json["limit"], 5);
    }

    #[test]
    fn refusals_name_the_parameter() {
        assert_eq!(
            code_field(parse(op("entries"), Some("path=a&nope=1"))),
            ("invalid".into(), Some("nope".into()))
        );
        assert_eq!(
            code_field(parse(op("entries"), Some("path="))),
            ("invalid".into(), Some("path".into()))
        );
        assert_eq!(
            code_field(parse(op("entries"), Some("path=a&limit=1&limit=2"))).1,
            Some("limit".into())
        );
        assert_eq!(
            code_field(checked(op("entries"), Some("path=a&limit=129"))).1,
            Some("limit".into())
        );
        assert_eq!(
            code_field(checked(op("entries"), Some("path=a&after=-1"))).1,
            Some("after".into())
        );
        assert_eq!(
            code_field(parse(op("entries"), Some("path=a&after=01"))).1,
            Some("after".into())
        );
        assert_eq!(
            code_field(checked(op("entries"), Some("path=a&after=5&through=4"))).1,
            Some("after".into())
        );
        assert_eq!(
            code_field(parse(op("entries"), None)).1,
            Some("path".into())
        );
        assert_eq!(
            code_field(checked(op("get"), Some("root_id=a&space_id=b&position=0"))).1,
            Some("position".into())
        );
        assert_eq!(
            code_field(parse(op("entries"), Some("path=a%2Fb"))).1,
            Some("path".into())
        );
        assert_eq!(
            code_field(parse(op("entries"), Some("path=%ZZ"))).1,
            Some("path".into())
        );
        assert!(parse(op("entries"), Some("path=a&&limit=1")).is_err());
    }

    /// The written form is checked before the proof; the domain after it.
    #[test]
    fn domain_rules_are_a_second_stage() {
        for raw in [
            "path=a&limit=129",
            "path=a&after=-1",
            "path=a&after=5&through=4",
        ] {
            assert!(parse(op("entries"), Some(raw)).is_ok(), "{raw}");
            assert!(checked(op("entries"), Some(raw)).is_err(), "{raw}");
        }
        let get = Some("root_id=a&space_id=b&position=0");
        assert!(parse(op("get"), get).is_ok());
        assert!(checked(op("get"), get).is_err());
        for raw in [
            "path=a&after=-0",
            "path=a&after=1.0",
            "path=a&after=-",
            "path=a&after=9007199254740992",
            "path=a&after=-9007199254740992",
        ] {
            assert_eq!(
                code_field(parse(op("entries"), Some(raw))).1,
                Some("after".into()),
                "{raw}"
            );
        }
        let q = parse(op("entries"), Some("path=a&after=-9007199254740991")).unwrap();
        assert_eq!(q.signed.to_json().unwrap()["after"], -9007199254740991i64);
    }

    fn from_json_text(op: &Operation, params: &str) -> Result<Query, Refusal> {
        from_json(op, Some(lab_strict_json::parse(params.as_bytes()).unwrap()))
    }

    /// The socket's parameters give the query the HTTP binding gives.
    #[test]
    fn socket_params_match_the_query_string() {
        let socket = from_json_text(
            op("entries"),
            r#"{"path":["a b","é"],"limit":5,"after":-3}"#,
        )
        .unwrap();
        let http = parse(
            op("entries"),
            Some("path=a%20b&path=%C3%A9&limit=5&after=-3"),
        )
        .unwrap();
        assert_eq!(socket.signed, http.signed);
        assert_eq!(socket.path, http.path);
        assert!(socket.has_path);
        assert!(
            from_json(op("children"), None)
                .unwrap()
                .signed
                .to_json()
                .unwrap()
                == serde_json::json!({})
        );
    }

    #[test]
    fn socket_params_are_typed() {
        for (params, field) in [
            (r#"{"path":"a"}"#, "path"),
            (r#"{"path":["a"],"limit":"5"}"#, "limit"),
            (r#"{"path":["a"],"limit":5.0}"#, "limit"),
            (r#"{"path":["a"],"limit":9007199254740992}"#, "limit"),
            (r#"{"path":["a",1]}"#, "path"),
            (r#"{"path":[]}"#, "path"),
            (r#"{"path":[""]}"#, "path"),
            (r#"{"path":["a"],"nope":1}"#, "nope"),
            (r#"{}"#, "path"),
        ] {
            assert_eq!(
                code_field(from_json_text(op("entries"), params)),
                ("invalid".into(), Some(field.into())),
                "{params}"
            );
        }
        assert_eq!(
            code_field(from_json_text(
                op("get"),
                r#"{"root_id":"","space_id":"b","position":1}"#
            ))
            .1,
            Some("root_id".into())
        );
        assert_eq!(
            code_field(from_json(op("entries"), Some(lab_strict_json::Json::Null))).1,
            Some("params".into())
        );
    }

    #[test]
    fn limit_defaults() {
        assert_eq!(parse(op("children"), None).unwrap().limit(), 64);
        assert_eq!(parse(op("children"), Some("limit=0")).unwrap().limit(), 64);
        assert_eq!(
            parse(op("children"), Some("limit=128")).unwrap().limit(),
            128
        );
    }
}
