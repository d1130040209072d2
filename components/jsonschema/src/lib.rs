//! A subset of JSON Schema draft 2020-12, checked before it is used.
//!
//! [`Schema::new`] walks the whole schema once and refuses any keyword
//! outside [`KEYWORDS`] (and every malformed keyword value or unresolvable
//! `$ref`), so no keyword is ever silently ignored. [`Schema::validate`] then
//! answers a [`Report`]: every failed assertion with its instance location,
//! its keyword location (through `$ref`, as the specification's
//! "keywordLocation") and a message.
//!
//! Decisions the subset takes (see `docs/tools.md`):
//! - numbers compare mathematically (`1` equals `1.0`), and `integer` is any
//!   number without a fractional part;
//! - `multipleOf` is exact for integers; otherwise `x / m` must be an
//!   integer in binary floating point;
//! - lengths count Unicode scalar values;
//! - `$ref` is local only: a JSON pointer into the root (`#`, `#/$defs/a`);
//!   `$id` is accepted at the root only, and changes nothing;
//! - `anyOf`, `oneOf` and `not` report one error of their own, not the
//!   errors of their subschemas;
//! - evaluation through `$ref` nests at most [`MAX_DEPTH`] deep (a schema
//!   that recurses without consuming the instance is refused then).
#![no_std]

extern crate alloc;

mod check;
mod path;
mod validate;

pub use check::SchemaError;
pub use validate::{Error, Report};

use serde_json::Value;

/// Every keyword the subset knows. Annotation keywords are accepted and
/// assert nothing.
pub const KEYWORDS: &[&str] = &[
    "type",
    "enum",
    "const",
    "properties",
    "required",
    "additionalProperties",
    "items",
    "prefixItems",
    "minItems",
    "maxItems",
    "uniqueItems",
    "minimum",
    "maximum",
    "exclusiveMinimum",
    "exclusiveMaximum",
    "multipleOf",
    "minLength",
    "maxLength",
    "allOf",
    "anyOf",
    "oneOf",
    "not",
    "$ref",
    "$defs",
    // Annotations.
    "$schema",
    "$id",
    "$comment",
    "title",
    "description",
    "default",
    "examples",
    "deprecated",
    "readOnly",
    "writeOnly",
];

/// How deep evaluation may nest through `$ref` and the applicators.
pub const MAX_DEPTH: usize = 128;

/// A schema that passed [`Schema::new`]'s checks.
#[derive(Debug)]
pub struct Schema<'a> {
    root: &'a Value,
}

impl<'a> Schema<'a> {
    /// Checks `root`: every keyword known, every value well formed, every
    /// `$ref` resolvable.
    pub fn new(root: &'a Value) -> Result<Schema<'a>, SchemaError> {
        check::check(root)?;
        Ok(Schema { root })
    }

    /// Validates `instance`. The only error is a schema that nests past
    /// [`MAX_DEPTH`] on this instance.
    pub fn validate(&self, instance: &Value) -> Result<Report, SchemaError> {
        validate::validate(self.root, instance)
    }
}

#[cfg(test)]
mod tests;
