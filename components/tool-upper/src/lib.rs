//! A test release: copies its input `text` to its output `text` in ASCII
//! upper case, streaming it in chunks.
#![cfg_attr(target_arch = "wasm32", no_std)]

use lab_tool_guest::lab::tool::{inputs, outputs};
use lab_tool_guest::{format, String};

const CHUNK: u32 = 64 << 10;

struct Upper;

impl lab_tool_guest::exports::lab::tool::run::Guest for Upper {
    fn run() -> Result<(), String> {
        let bound = inputs::bound();
        let input = bound
            .iter()
            .find(|i| i.role == "text")
            .ok_or_else(|| String::from("no input `text`"))?;
        let output = outputs::create("text", &input.type_);
        let mut offset = 0u64;
        loop {
            let Some(mut chunk) = inputs::read("text", offset, CHUNK) else {
                return Err(format!("input `text` vanished at {offset}"));
            };
            if chunk.is_empty() {
                return Ok(());
            }
            offset += chunk.len() as u64;
            chunk.make_ascii_uppercase();
            output.write(&chunk);
        }
    }
}

lab_tool_guest::export_tool!(Upper);
