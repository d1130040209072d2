//! The tabular profiler release: input `table` (CSV, RFC 4180, UTF-8),
//! recipe `{"delimiter": ",", "header": true}` (both optional, these the
//! defaults), output `profile` (`application/json`): the row count and,
//! per column, its name, counts, distinct values, inferred type and its
//! range (`docs/tools.md`).
#![cfg_attr(target_arch = "wasm32", no_std)]

extern crate alloc;

pub mod csv;
pub mod profile;

#[cfg(test)]
mod tests;

use lab_tool_guest::lab::tool::{inputs, outputs};
use lab_tool_guest::{format, String};

struct Profiler;

impl lab_tool_guest::exports::lab::tool::run::Guest for Profiler {
    fn run() -> Result<(), String> {
        let options = profile::Options::from_recipe(&inputs::recipe())?;
        let bytes = lab_tool_guest::read_input("table")?;
        let table = core::str::from_utf8(&bytes)
            .map_err(|e| format!("table is not UTF-8 (at byte {})", e.valid_up_to()))?;
        let profile = profile::profile(table, options)?;
        let text = serde_json::to_vec(&profile).map_err(|e| format!("profile: {e}"))?;
        outputs::create("profile", "application/json").write(&text);
        Ok(())
    }
}

lab_tool_guest::export_tool!(Profiler);
