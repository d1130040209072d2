//! The canonical value codec shared by the services.
//!
//! Values are encoded as restricted deterministic CBOR (RFC 8949 section
//! 4.2.1 with definite lengths, shortest arguments, sorted unique map keys,
//! no floats, no simple values beyond false/true/null, no tag but 39 around
//! a byte string). Every value has one encoding, so equality of values is
//! equality of bytes. The format and its test vectors are documented in
//! `contracts/values/VALUES.md`.
//!
//! Modules:
//! - `int`: [`Int`], integers in -2^64 ..= 2^64-1.
//! - `value`: [`Value`] and [`Map`], the data model.
//! - `encode`: [`encode`] and [`encode_into`], the canonical encoder, and
//!   [`put_head`] for callers that write an encoding themselves.
//! - `decode`: [`decode`], [`decode_bounded`], [`decode_fact`] and their
//!   errors, the strict decoder; [`tuple_children`], a tuple's children as
//!   bytes.
//! - `data_json`: [`from_data_json`], [`data_json_digest`], [`digest_text`].
//! - this file: the bounds and the journal's creation fact.

mod data_json;
mod decode;
mod encode;
mod int;
mod value;

pub use data_json::{
    data_json_digest, digest_text, from_data_json, sha256_canonical, DataJsonError,
};
pub use decode::{decode, decode_bounded, decode_fact, tuple_children, Bound, DecodeError, Defect};
pub use encode::{
    encode, encode_into, put_head, LABEL_TAG, MAJOR_ARRAY, MAJOR_BYTES, MAJOR_MAP, MAJOR_TAG,
    MAJOR_TEXT, MAJOR_UNSIGNED,
};
pub use int::{Int, IntOutOfRange};
pub use value::{Map, Value};

/// Greatest depth of any value; the root is at 0 and each tuple-child or
/// map key/value edge adds 1.
pub const MAX_DEPTH: usize = 256;
/// Greatest tuple arity, and greatest map entry count.
pub const MAX_ARITY: usize = 65_536;
/// Greatest payload of a label, text or bytes, in bytes.
pub const MAX_PAYLOAD: usize = 1 << 20;
/// Greatest canonical size of a fact, in bytes.
pub const MAX_FACT: usize = 1 << 20;

/// Predicate of the fact the journal writes into a parent when it creates a child.
pub const CREATION_PREDICATE: &[u8] = b"lab.journal.child_created.v1";
/// Digest tag of a normalized filter.
pub const FILTER_DIGEST_TAG: &[u8] = b"lab.journal.filter.v1";
/// Digest tag of a normalized snapshot manifest.
pub const SNAPSHOT_DIGEST_TAG: &[u8] = b"lab.journal.snapshot.v1";

/// The canonical creation fact `[label CREATION_PREDICATE, text key, text space_id]`.
pub fn creation_fact(key: &str, space_id: &str) -> Vec<u8> {
    encode(&Value::Tuple(vec![
        Value::Label(CREATION_PREDICATE.to_vec()),
        Value::text(key),
        Value::text(space_id),
    ]))
}

#[cfg(test)]
mod tests;
