//! Strict decoding of JSON request bodies, shared by every service.
//!
//! A body is accepted only if it is exactly one RFC 8259 JSON value followed
//! by nothing but JSON whitespace, is valid UTF-8, has no unpaired UTF-16
//! surrogate escapes, no object with two members of the same (unescaped) name
//! at any depth, and nests no deeper than [`MAX_DEPTH`] arrays and objects.
//!
//! Map of the modules:
//!
//! - [`parse`](mod@parse): [`parse()`] and [`parse_with_max_depth`], built on
//!   `serde_json`'s deserializer with a visitor that refuses duplicates and
//!   excess depth while parsing.
//! - [`value`]: the data model, [`Json`], [`Number`] and [`Object`].
//! - [`error`]: [`Error`], why a body is not strict JSON.
//! - [`shape`]: [`expect_object`], [`ShapeError`] and the typed member
//!   getters on [`Object`] used for "an object with exactly these members".
//! - [`canonical`]: [`canonicalize`], RFC 8785 canonical JSON of strict
//!   input without building a [`Json`], and [`object_members`], the
//!   top-level members of a body located without a tree; both on
//!   `scan`, a tree-less strict scanner, and `jcs`, the canonical encoding.
//! - [`base64`](mod@base64): [`decode_canonical_base64`].
//! - [`fuzzing`]: invariant checks a fuzz target can call with arbitrary bytes.
//!
//! Callers map [`Error`] and [`ShapeError`] to their own refusal codes; the
//! field named by [`ShapeError::field`] is what a refusal reports as
//! `details.field`.

pub mod base64;
pub mod canonical;
pub mod error;
pub mod fuzzing;
mod jcs;
pub mod parse;
mod scan;
pub mod shape;
pub mod value;

pub use crate::base64::decode_canonical_base64;
pub use crate::canonical::{canonicalize, canonicalize_with_max_depth, object_members};
pub use crate::error::Error;
pub use crate::parse::{parse, parse_with_max_depth, MAX_DEPTH};
pub use crate::shape::{expect_object, Expected, ShapeError};
pub use crate::value::{Json, Number, Object};
