//! The archive unpacker release: input `archive` (tar, or tar compressed
//! with gzip, told apart by the gzip magic); one output `member` per
//! regular file with a safe relative path (`application/octet-stream`,
//! ordinals in archive order), then one output `index`
//! (`application/json`) listing every member, written or skipped with the
//! reason. The archive is streamed: no member is held whole in memory.
#![cfg_attr(target_arch = "wasm32", no_std)]

extern crate alloc;

pub mod source;
pub mod tar;
pub mod unpack;

#[cfg(test)]
mod tests;

use lab_tool_guest::lab::tool::{inputs, outputs};
use lab_tool_guest::String;

/// The run's input `archive`, read in chunks.
struct Archive {
    offset: u64,
}

impl source::Source for Archive {
    fn read(&mut self, buf: &mut [u8]) -> Result<usize, String> {
        let want = u32::try_from(buf.len())
            .unwrap_or(u32::MAX)
            .min(lab_tool_guest::READ_CHUNK);
        let chunk = inputs::read("archive", self.offset, want)
            .ok_or_else(|| String::from("no input `archive`"))?;
        buf[..chunk.len()].copy_from_slice(&chunk);
        self.offset += chunk.len() as u64;
        Ok(chunk.len())
    }
}

/// The run's `member` outputs.
struct Members {
    current: Option<outputs::Output>,
}

impl unpack::Sink for Members {
    fn begin(&mut self) {
        self.current = Some(outputs::create("member", "application/octet-stream"));
    }

    fn write(&mut self, bytes: &[u8]) {
        if let Some(output) = &self.current {
            output.write(bytes);
        }
    }
}

struct Unpacker;

impl lab_tool_guest::exports::lab::tool::run::Guest for Unpacker {
    fn run() -> Result<(), String> {
        let mut members = Members { current: None };
        let index = unpack::unpack(Archive { offset: 0 }, &mut members)?;
        let text = serde_json::to_vec(&index).map_err(|e| alloc::format!("index: {e}"))?;
        outputs::create("index", "application/json").write(&text);
        Ok(())
    }
}

lab_tool_guest::export_tool!(Unpacker);
