//! A test release with the effects `clock` and `random`: writes to its
//! output `out` the clock's seconds and eight random octets, as text.
#![cfg_attr(target_arch = "wasm32", no_std)]

use lab_tool_guest::lab::tool::{clock, outputs, random};
use lab_tool_guest::{format, String};

struct Effects;

impl lab_tool_guest::exports::lab::tool::run::Guest for Effects {
    fn run() -> Result<(), String> {
        let now = clock::now();
        let noise = random::bytes(8);
        let text = format!("{} {:?}", now.seconds, noise);
        outputs::create("out", "text").write(text.as_bytes());
        Ok(())
    }
}

lab_tool_guest::export_tool!(Effects);
