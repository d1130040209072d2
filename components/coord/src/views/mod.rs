//! Views: what `compose` evaluates once and retains, and what `query` and
//! `explain` read back.
//!
//! - [`evaluation`]: claims, keys, relations and states of the selected
//!   occurrences, as pure functions of the selections and the rules.
//! - [`index`]: the retained view index (item pages, assertion table,
//!   root) and the searches over it that read only what they answer.

pub mod evaluation;
pub mod index;
