//! Validation of an instance against a checked schema.

use crate::path::{self, Step};
use crate::{SchemaError, MAX_DEPTH};
use alloc::format;
use alloc::string::String;
use alloc::vec::Vec;
use serde_json::{Map, Number, Value};

/// One failed assertion.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Error {
    /// JSON pointer to the instance value that failed.
    pub instance_path: String,
    /// JSON pointer to the keyword that failed, through any `$ref`.
    pub schema_path: String,
    pub message: String,
}

/// The outcome of one validation: valid when `errors` is empty.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Report {
    pub errors: Vec<Error>,
}

impl Report {
    pub fn valid(&self) -> bool {
        self.errors.is_empty()
    }

    /// `{"valid": bool, "errors": [{instance_path, schema_path, message}]}`.
    pub fn to_json(&self) -> Value {
        let errors = self
            .errors
            .iter()
            .map(|e| {
                let mut error = Map::new();
                error.insert("instance_path".into(), e.instance_path.clone().into());
                error.insert("schema_path".into(), e.schema_path.clone().into());
                error.insert("message".into(), e.message.clone().into());
                Value::Object(error)
            })
            .collect();
        let mut report = Map::new();
        report.insert("valid".into(), self.valid().into());
        report.insert("errors".into(), Value::Array(errors));
        Value::Object(report)
    }
}

pub fn validate(root: &Value, instance: &Value) -> Result<Report, SchemaError> {
    let mut errors = Vec::new();
    let mut walk = Walk {
        root,
        instance_steps: Vec::new(),
        schema_steps: Vec::new(),
    };
    walk.schema(root, instance, Some(&mut errors), 0)?;
    Ok(Report { errors })
}

/// Where evaluation is: the instance and keyword locations as steps.
struct Walk<'a> {
    root: &'a Value,
    instance_steps: Vec<Step<'a>>,
    schema_steps: Vec<Step<'a>>,
}

/// Where failures go: collected, or (inside `anyOf`, `oneOf`, `not`) only
/// counted, which stops at the first.
type Sink<'e> = Option<&'e mut Vec<Error>>;

impl<'a> Walk<'a> {
    /// Evaluates `schema` on `instance`; true when it holds. Without a
    /// sink it answers at the first failure.
    fn schema(
        &mut self,
        schema: &'a Value,
        instance: &'a Value,
        mut sink: Sink<'_>,
        depth: usize,
    ) -> Result<bool, SchemaError> {
        if depth > MAX_DEPTH {
            return Err(SchemaError::TooDeep {
                at: path::render(&self.schema_steps),
            });
        }
        let map = match schema {
            Value::Bool(true) => return Ok(true),
            Value::Bool(false) => {
                self.fail(
                    sink,
                    String::from("no value is allowed here (schema `false`)"),
                );
                return Ok(false);
            }
            Value::Object(map) => map,
            // Unreachable for a checked schema.
            _ => return Ok(false),
        };
        let mut valid = true;
        for (keyword, value) in map {
            self.schema_steps.push(Step::Key(keyword));
            let holds = self.keyword(keyword, value, map, instance, sink.as_deref_mut(), depth)?;
            self.schema_steps.pop();
            if !holds {
                valid = false;
                if sink.is_none() {
                    return Ok(false);
                }
            }
        }
        Ok(valid)
    }

    /// Records a failure of the keyword at the current locations.
    fn fail(&self, sink: Sink<'_>, message: String) {
        if let Some(errors) = sink {
            errors.push(Error {
                instance_path: path::render(&self.instance_steps),
                schema_path: path::render(&self.schema_steps),
                message,
            });
        }
    }

    /// Evaluates `schema` on a member or item of the current instance.
    fn child(
        &mut self,
        step: Step<'a>,
        schema: &'a Value,
        instance: &'a Value,
        sink: Sink<'_>,
        depth: usize,
    ) -> Result<bool, SchemaError> {
        self.instance_steps.push(step);
        let holds = self.schema(schema, instance, sink, depth + 1);
        self.instance_steps.pop();
        holds
    }

    /// Evaluates the subschema at `step` below the current keyword.
    fn sub(
        &mut self,
        step: Step<'a>,
        schema: &'a Value,
        instance: &'a Value,
        sink: Sink<'_>,
        depth: usize,
    ) -> Result<bool, SchemaError> {
        self.schema_steps.push(step);
        let holds = self.schema(schema, instance, sink, depth + 1);
        self.schema_steps.pop();
        holds
    }

    /// Evaluates one keyword of `map` (the schema object). Keywords the
    /// check accepted that assert nothing hold.
    fn keyword(
        &mut self,
        keyword: &str,
        value: &'a Value,
        map: &'a Map<String, Value>,
        instance: &'a Value,
        mut sink: Sink<'_>,
        depth: usize,
    ) -> Result<bool, SchemaError> {
        let failure = match keyword {
            "type" => {
                let holds = match value {
                    Value::String(t) => has_type(instance, t),
                    Value::Array(ts) => ts
                        .iter()
                        .any(|t| t.as_str().is_some_and(|t| has_type(instance, t))),
                    _ => false,
                };
                (!holds).then(|| format!("expected {}, found {}", value, type_of(instance)))
            }
            "enum" => {
                let options = value.as_array().map(Vec::as_slice).unwrap_or_default();
                (!options.iter().any(|o| equal(o, instance)))
                    .then(|| format!("{instance} is not one of {value}"))
            }
            "const" => {
                (!equal(value, instance)).then(|| format!("expected {value}, found {instance}"))
            }
            "required" => {
                let Value::Object(object) = instance else {
                    return Ok(true);
                };
                let mut valid = true;
                for name in value
                    .as_array()
                    .into_iter()
                    .flatten()
                    .filter_map(Value::as_str)
                {
                    if !object.contains_key(name) {
                        valid = false;
                        if sink.is_none() {
                            return Ok(false);
                        }
                        self.fail(
                            sink.as_deref_mut(),
                            format!("required property `{name}` is missing"),
                        );
                    }
                }
                return Ok(valid);
            }
            "properties" => {
                let (Value::Object(object), Some(properties)) = (instance, value.as_object())
                else {
                    return Ok(true);
                };
                let mut valid = true;
                for (name, sub) in properties {
                    let Some(member) = object.get(name) else {
                        continue;
                    };
                    self.schema_steps.push(Step::Key(name));
                    let holds =
                        self.child(Step::Key(name), sub, member, sink.as_deref_mut(), depth);
                    self.schema_steps.pop();
                    if !holds? {
                        valid = false;
                        if sink.is_none() {
                            return Ok(false);
                        }
                    }
                }
                return Ok(valid);
            }
            "additionalProperties" => {
                let Value::Object(object) = instance else {
                    return Ok(true);
                };
                let declared = map.get("properties").and_then(Value::as_object);
                let mut valid = true;
                for (name, member) in object {
                    if declared.is_some_and(|d| d.contains_key(name)) {
                        continue;
                    }
                    if !self.child(Step::Key(name), value, member, sink.as_deref_mut(), depth)? {
                        valid = false;
                        if sink.is_none() {
                            return Ok(false);
                        }
                    }
                }
                return Ok(valid);
            }
            "prefixItems" | "items" => {
                let Value::Array(items) = instance else {
                    return Ok(true);
                };
                let prefix = map.get("prefixItems").and_then(Value::as_array);
                let prefix_len = prefix.map_or(0, Vec::len);
                let mut valid = true;
                for (i, item) in items.iter().enumerate() {
                    let schema = match (keyword, prefix) {
                        ("prefixItems", Some(prefix)) if i < prefix_len => {
                            self.schema_steps.push(Step::Index(i));
                            &prefix[i]
                        }
                        ("items", _) if i >= prefix_len => value,
                        _ => continue,
                    };
                    let holds =
                        self.child(Step::Index(i), schema, item, sink.as_deref_mut(), depth);
                    if keyword == "prefixItems" {
                        self.schema_steps.pop();
                    }
                    if !holds? {
                        valid = false;
                        if sink.is_none() {
                            return Ok(false);
                        }
                    }
                }
                return Ok(valid);
            }
            "minItems" | "maxItems" => {
                let Value::Array(items) = instance else {
                    return Ok(true);
                };
                let bound = value.as_u64().unwrap_or(0);
                let n = items.len() as u64;
                match keyword {
                    "minItems" if n < bound => Some(format!("{n} items, fewer than {bound}")),
                    "maxItems" if n > bound => Some(format!("{n} items, more than {bound}")),
                    _ => None,
                }
            }
            "uniqueItems" => {
                let Value::Array(items) = instance else {
                    return Ok(true);
                };
                if value != &Value::Bool(true) {
                    return Ok(true);
                }
                duplicate(items).map(|(i, j)| format!("items {i} and {j} are equal"))
            }
            "minimum" | "maximum" | "exclusiveMinimum" | "exclusiveMaximum" => {
                let (Value::Number(x), Value::Number(bound)) = (instance, value) else {
                    return Ok(true);
                };
                let order = compare(x, bound);
                use core::cmp::Ordering::*;
                let holds = match keyword {
                    "minimum" => order != Less,
                    "maximum" => order != Greater,
                    "exclusiveMinimum" => order == Greater,
                    _ => order == Less,
                };
                let relation = match keyword {
                    "minimum" => "at least",
                    "maximum" => "at most",
                    "exclusiveMinimum" => "greater than",
                    _ => "less than",
                };
                (!holds).then(|| format!("{x} is not {relation} {bound}"))
            }
            "multipleOf" => {
                let (Value::Number(x), Value::Number(m)) = (instance, value) else {
                    return Ok(true);
                };
                (!multiple_of(x, m)).then(|| format!("{x} is not a multiple of {m}"))
            }
            "minLength" | "maxLength" => {
                let Value::String(s) = instance else {
                    return Ok(true);
                };
                let bound = value.as_u64().unwrap_or(0);
                let n = s.chars().count() as u64;
                match keyword {
                    "minLength" if n < bound => Some(format!("{n} characters, fewer than {bound}")),
                    "maxLength" if n > bound => Some(format!("{n} characters, more than {bound}")),
                    _ => None,
                }
            }
            "allOf" => {
                let mut valid = true;
                for (i, sub) in value.as_array().into_iter().flatten().enumerate() {
                    if !self.sub(Step::Index(i), sub, instance, sink.as_deref_mut(), depth)? {
                        valid = false;
                        if sink.is_none() {
                            return Ok(false);
                        }
                    }
                }
                return Ok(valid);
            }
            "anyOf" | "oneOf" => {
                let subs = value.as_array().map(Vec::as_slice).unwrap_or_default();
                let mut matched = Vec::new();
                for (i, sub) in subs.iter().enumerate() {
                    if self.sub(Step::Index(i), sub, instance, None, depth)? {
                        matched.push(i);
                        if keyword == "anyOf" || matched.len() > 1 {
                            break;
                        }
                    }
                }
                match (keyword, matched.as_slice()) {
                    ("anyOf", []) | ("oneOf", []) => {
                        Some(format!("matches none of the {} subschemas", subs.len()))
                    }
                    ("oneOf", [first, second, ..]) => Some(format!(
                        "matches more than one subschema (at least {first} and {second})"
                    )),
                    _ => None,
                }
            }
            "not" => self
                .sub_here(value, instance, depth)?
                .then(|| String::from("matches the schema of `not`")),
            "$ref" => {
                let reference = value.as_str().unwrap_or_default();
                let Some(target) = path::resolve(self.root, reference) else {
                    // Unreachable for a checked schema.
                    return Ok(false);
                };
                return self.schema(target, instance, sink, depth + 1);
            }
            _ => None,
        };
        match failure {
            Some(message) => {
                self.fail(sink, message);
                Ok(false)
            }
            None => Ok(true),
        }
    }

    /// Whether `schema` (the current keyword's value) holds, recording
    /// nothing.
    fn sub_here(
        &mut self,
        schema: &'a Value,
        instance: &'a Value,
        depth: usize,
    ) -> Result<bool, SchemaError> {
        self.schema(schema, instance, None, depth + 1)
    }
}

fn has_type(instance: &Value, name: &str) -> bool {
    match name {
        "integer" => instance.as_number().is_some_and(is_integer),
        _ => type_of(instance) == name || (name == "number" && instance.is_number()),
    }
}

/// The instance's type name (`integer` for numbers without a fraction).
fn type_of(instance: &Value) -> &'static str {
    match instance {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(n) if is_integer(n) => "integer",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

fn is_integer(n: &Number) -> bool {
    n.is_i64()
        || n.is_u64()
        || n.as_f64()
            .is_some_and(|f| f.is_finite() && f == libm_trunc(f))
}

/// `f` without its fractional part (no `std`: `f64::trunc` is not in core).
fn libm_trunc(f: f64) -> f64 {
    if f.abs() >= 4_503_599_627_370_496.0 {
        // 2^52: every such float is already an integer.
        f
    } else {
        (f as i64) as f64
    }
}

/// Exact integer view of a number, when it has one.
fn as_i128(n: &Number) -> Option<i128> {
    n.as_i64()
        .map(i128::from)
        .or_else(|| n.as_u64().map(i128::from))
}

fn compare(a: &Number, b: &Number) -> core::cmp::Ordering {
    match (as_i128(a), as_i128(b)) {
        (Some(a), Some(b)) => a.cmp(&b),
        _ => {
            let (a, b) = (
                a.as_f64().unwrap_or(f64::NAN),
                b.as_f64().unwrap_or(f64::NAN),
            );
            a.partial_cmp(&b).unwrap_or(core::cmp::Ordering::Equal)
        }
    }
}

fn multiple_of(x: &Number, m: &Number) -> bool {
    if let (Some(x), Some(m)) = (as_i128(x), as_i128(m)) {
        return m != 0 && x % m == 0;
    }
    let (x, m) = (
        x.as_f64().unwrap_or(f64::NAN),
        m.as_f64().unwrap_or(f64::NAN),
    );
    let q = x / m;
    q.is_finite() && q == libm_trunc(q)
}

/// JSON equality with numbers compared by value (`1` equals `1.0`).
pub fn equal(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(a), Value::Number(b)) => compare(a, b).is_eq(),
        (Value::Array(a), Value::Array(b)) => {
            a.len() == b.len() && a.iter().zip(b).all(|(a, b)| equal(a, b))
        }
        (Value::Object(a), Value::Object(b)) => {
            a.len() == b.len() && a.iter().all(|(k, v)| b.get(k).is_some_and(|w| equal(v, w)))
        }
        _ => a == b,
    }
}

/// The first pair of equal items, if any.
fn duplicate(items: &[Value]) -> Option<(usize, usize)> {
    (0..items.len()).find_map(|j| {
        (0..j)
            .find(|&i| equal(&items[i], &items[j]))
            .map(|i| (i, j))
    })
}
