//! "An object with exactly these members": the shape checks every service
//! applies to a parsed request body.
//!
//! Decoding takes each documented member out of the [`Object`] with a typed
//! getter, then calls [`Object::finish`], which refuses whatever is left.
//! Member names are compared exactly, so a case variant of a documented name
//! is an unknown member.
//!
//! ```
//! use lab_strict_json::{expect_object, parse, ShapeError};
//!
//! let mut body = expect_object(parse(br#"{"names":["a"],"limit":null}"#).unwrap())?;
//! let names = body.take_required_array("names")?;
//! let limit = body.take_optional_u64("limit")?;
//! body.finish()?;
//! assert_eq!((names.len(), limit), (1, None));
//! # Ok::<(), ShapeError>(())
//! ```

use std::fmt;

use crate::value::{Json, Number, Object};

/// A body or member that does not have the documented shape.
///
/// [`ShapeError::field`] is the name a refusal reports as `details.field`.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum ShapeError {
    /// The body is not a JSON object.
    NotAnObject,
    /// A required member is absent.
    Missing { field: String },
    /// A member is present with the wrong type; for required members this
    /// includes `null`.
    WrongType { field: String, expected: Expected },
    /// A member that is not documented, reported once the documented members
    /// have been taken.
    UnknownMember { name: String },
}

/// The type a member was expected to have.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Expected {
    /// Any value except `null`.
    NonNull,
    Boolean,
    /// A canonical non-negative integer: [`Number::Unsigned`].
    UnsignedInteger,
    String,
    Array,
    Object,
}

impl ShapeError {
    /// The offending member, if the error concerns one.
    pub fn field(&self) -> Option<&str> {
        match self {
            ShapeError::NotAnObject => None,
            ShapeError::Missing { field } | ShapeError::WrongType { field, .. } => Some(field),
            ShapeError::UnknownMember { name } => Some(name),
        }
    }

    /// Re-roots an error found inside the member `parent`: the field becomes
    /// `parent.field`, and a non-object where an object was expected becomes
    /// a wrong type for `parent`.
    pub fn within(self, parent: &str) -> ShapeError {
        let nest = |field: String| format!("{parent}.{field}");
        match self {
            ShapeError::NotAnObject => ShapeError::WrongType {
                field: parent.to_owned(),
                expected: Expected::Object,
            },
            ShapeError::Missing { field } => ShapeError::Missing { field: nest(field) },
            ShapeError::WrongType { field, expected } => ShapeError::WrongType {
                field: nest(field),
                expected,
            },
            ShapeError::UnknownMember { name } => ShapeError::UnknownMember { name: nest(name) },
        }
    }
}

impl fmt::Display for Expected {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Expected::NonNull => "a value other than null",
            Expected::Boolean => "a boolean",
            Expected::UnsignedInteger => "a non-negative integer",
            Expected::String => "a string",
            Expected::Array => "an array",
            Expected::Object => "an object",
        })
    }
}

impl fmt::Display for ShapeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ShapeError::NotAnObject => f.write_str("the body must be a JSON object"),
            ShapeError::Missing { field } => write!(f, "missing required member {field:?}"),
            ShapeError::WrongType { field, expected } => {
                write!(f, "member {field:?} must be {expected}")
            }
            ShapeError::UnknownMember { name } => write!(f, "unknown member {name:?}"),
        }
    }
}

impl std::error::Error for ShapeError {}

/// The body as an object, or [`ShapeError::NotAnObject`].
pub fn expect_object(json: Json) -> Result<Object, ShapeError> {
    match json {
        Json::Object(object) => Ok(object),
        _ => Err(ShapeError::NotAnObject),
    }
}

fn wrong_type(field: &str, expected: Expected) -> ShapeError {
    ShapeError::WrongType {
        field: field.to_owned(),
        expected,
    }
}

/// Conversions of a member's value; `field` names the member in the error.
/// Useful for array elements too, e.g. `item.into_string("names")`.
impl Json {
    pub fn into_bool(self, field: &str) -> Result<bool, ShapeError> {
        match self {
            Json::Bool(b) => Ok(b),
            _ => Err(wrong_type(field, Expected::Boolean)),
        }
    }

    /// Accepts only [`Number::Unsigned`]: no sign, fraction or exponent.
    pub fn into_u64(self, field: &str) -> Result<u64, ShapeError> {
        match self {
            Json::Number(Number::Unsigned(n)) => Ok(n),
            _ => Err(wrong_type(field, Expected::UnsignedInteger)),
        }
    }

    pub fn into_string(self, field: &str) -> Result<String, ShapeError> {
        match self {
            Json::String(s) => Ok(s),
            _ => Err(wrong_type(field, Expected::String)),
        }
    }

    pub fn into_array(self, field: &str) -> Result<Vec<Json>, ShapeError> {
        match self {
            Json::Array(items) => Ok(items),
            _ => Err(wrong_type(field, Expected::Array)),
        }
    }

    pub fn into_object(self, field: &str) -> Result<Object, ShapeError> {
        match self {
            Json::Object(object) => Ok(object),
            _ => Err(wrong_type(field, Expected::Object)),
        }
    }
}

/// Taking members out. `required` getters refuse an absent member as
/// [`ShapeError::Missing`] and `null` as [`ShapeError::WrongType`];
/// `optional` getters give `None` for both.
impl Object {
    /// Removes and returns the member called exactly `name`.
    pub fn take(&mut self, name: &str) -> Option<Json> {
        let index = self.members.iter().position(|(member, _)| member == name)?;
        Some(self.members.remove(index).1)
    }

    /// Succeeds if every member has been taken; otherwise names the first
    /// remaining member in document order.
    pub fn finish(self) -> Result<(), ShapeError> {
        match self.members.into_iter().next() {
            None => Ok(()),
            Some((name, _)) => Err(ShapeError::UnknownMember { name }),
        }
    }

    pub fn take_required(&mut self, name: &str) -> Result<Json, ShapeError> {
        match self.take(name) {
            None => Err(ShapeError::Missing {
                field: name.to_owned(),
            }),
            Some(Json::Null) => Err(wrong_type(name, Expected::NonNull)),
            Some(value) => Ok(value),
        }
    }

    pub fn take_optional(&mut self, name: &str) -> Option<Json> {
        self.take(name).filter(|value| !value.is_null())
    }

    fn take_required_as<T>(
        &mut self,
        name: &str,
        convert: fn(Json, &str) -> Result<T, ShapeError>,
    ) -> Result<T, ShapeError> {
        match self.take(name) {
            None => Err(ShapeError::Missing {
                field: name.to_owned(),
            }),
            Some(value) => convert(value, name),
        }
    }

    fn take_optional_as<T>(
        &mut self,
        name: &str,
        convert: fn(Json, &str) -> Result<T, ShapeError>,
    ) -> Result<Option<T>, ShapeError> {
        self.take_optional(name)
            .map(|value| convert(value, name))
            .transpose()
    }

    pub fn take_required_bool(&mut self, name: &str) -> Result<bool, ShapeError> {
        self.take_required_as(name, Json::into_bool)
    }

    pub fn take_optional_bool(&mut self, name: &str) -> Result<Option<bool>, ShapeError> {
        self.take_optional_as(name, Json::into_bool)
    }

    /// Accepts only [`Number::Unsigned`]; range checks are the caller's.
    pub fn take_required_u64(&mut self, name: &str) -> Result<u64, ShapeError> {
        self.take_required_as(name, Json::into_u64)
    }

    /// Accepts only [`Number::Unsigned`]; range checks are the caller's.
    pub fn take_optional_u64(&mut self, name: &str) -> Result<Option<u64>, ShapeError> {
        self.take_optional_as(name, Json::into_u64)
    }

    pub fn take_required_str(&mut self, name: &str) -> Result<String, ShapeError> {
        self.take_required_as(name, Json::into_string)
    }

    pub fn take_optional_str(&mut self, name: &str) -> Result<Option<String>, ShapeError> {
        self.take_optional_as(name, Json::into_string)
    }

    pub fn take_required_array(&mut self, name: &str) -> Result<Vec<Json>, ShapeError> {
        self.take_required_as(name, Json::into_array)
    }

    pub fn take_optional_array(&mut self, name: &str) -> Result<Option<Vec<Json>>, ShapeError> {
        self.take_optional_as(name, Json::into_array)
    }

    pub fn take_required_object(&mut self, name: &str) -> Result<Object, ShapeError> {
        self.take_required_as(name, Json::into_object)
    }

    pub fn take_optional_object(&mut self, name: &str) -> Result<Option<Object>, ShapeError> {
        self.take_optional_as(name, Json::into_object)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::parse;

    fn object(text: &str) -> Object {
        expect_object(parse(text.as_bytes()).unwrap()).unwrap()
    }

    fn wrong(field: &str, expected: Expected) -> ShapeError {
        wrong_type(field, expected)
    }

    #[test]
    fn expect_object_refuses_other_values() {
        for text in ["[]", "null", "1", "\"{}\"", "true"] {
            assert_eq!(
                expect_object(parse(text.as_bytes()).unwrap()),
                Err(ShapeError::NotAnObject),
                "{text}"
            );
        }
    }

    #[test]
    fn exact_members_accepted() {
        let mut body = object(r#"{"names":["a","b"]}"#);
        let names: Vec<String> = body
            .take_required_array("names")
            .unwrap()
            .into_iter()
            .map(|item| item.into_string("names"))
            .collect::<Result<_, _>>()
            .unwrap();
        assert_eq!(names, ["a", "b"]);
        assert_eq!(body.finish(), Ok(()));
    }

    #[test]
    fn unknown_and_case_variant_members_refused() {
        let mut body = object(r#"{"names":[],"Names":[]}"#);
        body.take_required_array("names").unwrap();
        assert_eq!(
            body.finish(),
            Err(ShapeError::UnknownMember {
                name: "Names".into()
            })
        );

        let mut body = object(r#"{"Names":[]}"#);
        assert_eq!(
            body.take_required_array("names"),
            Err(ShapeError::Missing {
                field: "names".into()
            })
        );
    }

    #[test]
    fn finish_reports_first_leftover_in_document_order() {
        let mut body = object(r#"{"z":1,"keep":2,"a":3}"#);
        body.take("keep");
        assert_eq!(
            body.finish(),
            Err(ShapeError::UnknownMember { name: "z".into() })
        );
    }

    #[test]
    fn take_removes() {
        let mut body = object(r#"{"a":1}"#);
        assert_eq!(body.take("a").and_then(|v| v.as_u64()), Some(1));
        assert_eq!(body.take("a"), None);
        assert!(body.is_empty());
    }

    #[test]
    fn required_getters() {
        let mut body =
            object(r#"{"s":"x","n":5,"b":false,"a":[1],"o":{"k":null},"v":0.5,"z":null}"#);
        assert_eq!(body.take_required_str("s"), Ok("x".into()));
        assert_eq!(body.take_required_u64("n"), Ok(5));
        assert_eq!(body.take_required_bool("b"), Ok(false));
        assert_eq!(body.take_required_array("a").map(|a| a.len()), Ok(1));
        assert_eq!(body.take_required_object("o").map(|o| o.len()), Ok(1));
        assert_eq!(
            body.take_required("v"),
            Ok(Json::Number(Number::Other(0.5)))
        );
        assert_eq!(body.take_required("z"), Err(wrong("z", Expected::NonNull)));
        assert_eq!(
            body.take_required_str("s"),
            Err(ShapeError::Missing { field: "s".into() })
        );
        assert_eq!(body.finish(), Ok(()));
    }

    #[test]
    fn required_getters_refuse_null_and_wrong_types() {
        let mut body = object(r#"{"s":null,"n":"5","b":0,"a":{},"o":[]}"#);
        assert_eq!(
            body.take_required_str("s"),
            Err(wrong("s", Expected::String))
        );
        assert_eq!(
            body.take_required_u64("n"),
            Err(wrong("n", Expected::UnsignedInteger))
        );
        assert_eq!(
            body.take_required_bool("b"),
            Err(wrong("b", Expected::Boolean))
        );
        assert_eq!(
            body.take_required_array("a"),
            Err(wrong("a", Expected::Array))
        );
        assert_eq!(
            body.take_required_object("o"),
            Err(wrong("o", Expected::Object))
        );
    }

    #[test]
    fn optional_getters_treat_null_and_absent_alike() {
        let mut body = object(r#"{"n":null,"s":"x"}"#);
        assert_eq!(body.take_optional_u64("n"), Ok(None));
        assert_eq!(body.take_optional_u64("absent"), Ok(None));
        assert_eq!(body.take_optional_str("s"), Ok(Some("x".into())));
        assert_eq!(body.take_optional_bool("b"), Ok(None));
        assert_eq!(body.take_optional_array("a"), Ok(None));
        assert_eq!(body.take_optional_object("o"), Ok(None));
        assert_eq!(body.take_optional("n"), None);
        assert_eq!(body.finish(), Ok(()));
    }

    #[test]
    fn only_canonical_non_negative_integers_are_u64() {
        for text in [
            "1.0",
            "1e0",
            "-1",
            "-0",
            "18446744073709551616",
            "\"1\"",
            "true",
        ] {
            let mut body = object(&format!(r#"{{"n":{text}}}"#));
            assert_eq!(
                body.take_optional_u64("n"),
                Err(wrong("n", Expected::UnsignedInteger)),
                "{text}"
            );
        }
        let mut body = object(r#"{"n":9007199254740991}"#);
        assert_eq!(body.take_required_u64("n"), Ok(9_007_199_254_740_991));
    }

    #[test]
    fn field_names_for_details() {
        assert_eq!(ShapeError::NotAnObject.field(), None);
        assert_eq!(
            wrong("limit", Expected::UnsignedInteger).field(),
            Some("limit")
        );
        assert_eq!(
            ShapeError::UnknownMember { name: "x".into() }.field(),
            Some("x")
        );
        assert_eq!(ShapeError::Missing { field: "m".into() }.field(), Some("m"));
    }

    #[test]
    fn nested_errors_are_re_rooted() {
        let mut filter = object(r#"{"positions":{"after":1,"extra":2}}"#);
        let mut positions = filter.take_optional_object("positions").unwrap().unwrap();
        positions.take_optional_u64("after").unwrap();
        let error = positions.finish().unwrap_err().within("positions");
        assert_eq!(error.field(), Some("positions.extra"));
        assert_eq!(
            ShapeError::NotAnObject.within("scope"),
            wrong("scope", Expected::Object)
        );
        assert_eq!(
            wrong("after", Expected::UnsignedInteger)
                .within("positions")
                .within("filter")
                .field(),
            Some("filter.positions.after")
        );
    }

    #[test]
    fn display() {
        assert_eq!(
            wrong("limit", Expected::UnsignedInteger).to_string(),
            "member \"limit\" must be a non-negative integer"
        );
        assert_eq!(
            ShapeError::UnknownMember {
                name: "Names".into()
            }
            .to_string(),
            "unknown member \"Names\""
        );
        assert!(ShapeError::NotAnObject.to_string().contains("object"));
        assert!(ShapeError::Missing {
            field: "names".into()
        }
        .to_string()
        .contains("\"names\""));
    }
}
