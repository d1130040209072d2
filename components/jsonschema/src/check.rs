//! The schema check: every keyword known, every value well formed, every
//! `$ref` resolvable, before any instance is validated.

use crate::path::{self, Step};
use crate::KEYWORDS;
use alloc::string::String;
use alloc::vec::Vec;
use core::fmt;
use serde_json::Value;

/// Why a schema is refused. `at` is the schema location (a JSON pointer).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SchemaError {
    /// A keyword outside the subset.
    Unsupported { keyword: String, at: String },
    /// A keyword whose value is not of the form the keyword requires.
    Invalid {
        keyword: &'static str,
        at: String,
        expected: &'static str,
    },
    /// A subschema that is neither an object nor a boolean.
    NotASchema { at: String },
    /// A `$ref` that is not local or names nothing.
    Unresolved { reference: String, at: String },
    /// Evaluation nested past `MAX_DEPTH` (a `$ref` cycle that consumes
    /// no instance).
    TooDeep { at: String },
}

impl fmt::Display for SchemaError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SchemaError::Unsupported { keyword, at } => {
                write!(f, "unsupported keyword `{keyword}` at `{at}`")
            }
            SchemaError::Invalid {
                keyword,
                at,
                expected,
            } => write!(f, "`{keyword}` at `{at}` must be {expected}"),
            SchemaError::NotASchema { at } => {
                write!(f, "the subschema at `{at}` is neither an object nor a boolean")
            }
            SchemaError::Unresolved { reference, at } => write!(
                f,
                "`$ref` `{reference}` at `{at}` names nothing in this schema (only local references are supported)"
            ),
            SchemaError::TooDeep { at } => write!(
                f,
                "evaluation nests deeper than {} at `{at}`",
                crate::MAX_DEPTH
            ),
        }
    }
}

const TYPES: &[&str] = &[
    "null", "boolean", "object", "array", "number", "string", "integer",
];

/// Checks the schema `root`.
pub fn check(root: &Value) -> Result<(), SchemaError> {
    let mut steps = Vec::new();
    Checker { root }.schema(root, &mut steps, true)
}

struct Checker<'a> {
    root: &'a Value,
}

impl<'a> Checker<'a> {
    fn schema(
        &self,
        schema: &'a Value,
        steps: &mut Vec<Step<'a>>,
        is_root: bool,
    ) -> Result<(), SchemaError> {
        let map = match schema {
            Value::Bool(_) => return Ok(()),
            Value::Object(map) => map,
            _ => {
                return Err(SchemaError::NotASchema {
                    at: path::render(steps),
                })
            }
        };
        for (keyword, value) in map {
            let Some(&known) = KEYWORDS.iter().find(|k| **k == keyword.as_str()) else {
                return Err(SchemaError::Unsupported {
                    keyword: keyword.clone(),
                    at: path::render(steps),
                });
            };
            steps.push(Step::Key(keyword));
            self.keyword(known, value, steps, is_root)?;
            steps.pop();
        }
        Ok(())
    }

    /// Checks one keyword's value; `steps` ends at the keyword.
    fn keyword(
        &self,
        keyword: &'static str,
        value: &'a Value,
        steps: &mut Vec<Step<'a>>,
        is_root: bool,
    ) -> Result<(), SchemaError> {
        let invalid = |steps: &[Step<'_>], expected| {
            Err(SchemaError::Invalid {
                keyword,
                at: parent(steps),
                expected,
            })
        };
        match keyword {
            "type" => {
                let ok = match value {
                    Value::String(t) => TYPES.contains(&t.as_str()),
                    Value::Array(ts) => {
                        !ts.is_empty()
                            && ts.iter().enumerate().all(|(i, t)| {
                                t.as_str().is_some_and(|t| TYPES.contains(&t))
                                    && !ts[..i].contains(t)
                            })
                    }
                    _ => false,
                };
                if !ok {
                    return invalid(
                        steps,
                        "a type name or a non-empty array of distinct type names",
                    );
                }
            }
            "enum" if !value.is_array() => return invalid(steps, "an array"),
            "required" => {
                let ok = value
                    .as_array()
                    .is_some_and(|names| names.iter().all(Value::is_string));
                if !ok {
                    return invalid(steps, "an array of strings");
                }
            }
            "minItems" | "maxItems" | "minLength" | "maxLength" if !value.is_u64() => {
                return invalid(steps, "a non-negative integer");
            }
            "uniqueItems" | "deprecated" | "readOnly" | "writeOnly" if !value.is_boolean() => {
                return invalid(steps, "a boolean");
            }
            "minimum" | "maximum" | "exclusiveMinimum" | "exclusiveMaximum"
                if !value.is_number() =>
            {
                return invalid(steps, "a number");
            }
            "multipleOf" if !value.as_f64().is_some_and(|m| m > 0.0) => {
                return invalid(steps, "a number greater than 0");
            }
            "$schema" | "$comment" | "title" | "description" if !value.is_string() => {
                return invalid(steps, "a string");
            }
            "$id" if !is_root => {
                return Err(SchemaError::Unsupported {
                    keyword: "$id".into(),
                    at: parent(steps),
                });
            }
            "$id" if !value.is_string() => return invalid(steps, "a string"),
            "examples" if !value.is_array() => return invalid(steps, "an array"),
            "$ref" => {
                let Some(reference) = value.as_str() else {
                    return invalid(steps, "a string");
                };
                if path::resolve(self.root, reference).is_none() {
                    return Err(SchemaError::Unresolved {
                        reference: reference.into(),
                        at: parent(steps),
                    });
                }
            }
            "properties" | "$defs" => {
                let Some(map) = value.as_object() else {
                    return invalid(steps, "an object of schemas");
                };
                for (name, sub) in map {
                    steps.push(Step::Key(name));
                    self.schema(sub, steps, false)?;
                    steps.pop();
                }
            }
            "additionalProperties" | "not" => self.schema(value, steps, false)?,
            "items" => {
                if value.is_array() {
                    return invalid(
                        steps,
                        "one schema (2020-12: an array of schemas is `prefixItems`)",
                    );
                }
                self.schema(value, steps, false)?;
            }
            "prefixItems" | "allOf" | "anyOf" | "oneOf" => {
                let Some(subs) = value.as_array().filter(|subs| !subs.is_empty()) else {
                    return invalid(steps, "a non-empty array of schemas");
                };
                for (i, sub) in subs.iter().enumerate() {
                    steps.push(Step::Index(i));
                    self.schema(sub, steps, false)?;
                    steps.pop();
                }
            }
            _ => {}
        }
        Ok(())
    }
}

/// The location of the schema holding the keyword `steps` ends at.
fn parent(steps: &[Step<'_>]) -> String {
    path::render(&steps[..steps.len().saturating_sub(1)])
}
