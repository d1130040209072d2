//! A test release that misbehaves as its recipe (a JSON string) says:
//! `"loop"` never ends, `"memory"` grows its memory without end,
//! `"outputs"` creates outputs without end, `"output-bytes"` writes one
//! output without end, `"fail"` reports a failure, `"trap"` traps, and
//! `"partial"` writes an output, then fails.
#![cfg_attr(target_arch = "wasm32", no_std)]

use lab_tool_guest::lab::tool::{inputs, outputs};
use lab_tool_guest::{vec, String, Vec};

struct Hostile;

impl lab_tool_guest::exports::lab::tool::run::Guest for Hostile {
    fn run() -> Result<(), String> {
        match inputs::recipe().trim() {
            "\"loop\"" => {
                let mut n = 0u64;
                loop {
                    // Opaque to the optimiser, so the loop stays a loop.
                    n = core::hint::black_box(n.wrapping_add(1));
                }
            }
            "\"memory\"" => {
                let mut held: Vec<Vec<u8>> = Vec::new();
                loop {
                    held.push(vec![1u8; 1 << 20]);
                    core::hint::black_box(&held);
                }
            }
            "\"outputs\"" => loop {
                outputs::create("out", "bytes").write(b"x");
            },
            "\"output-bytes\"" => {
                let output = outputs::create("out", "bytes");
                let chunk = vec![b'x'; 64 << 10];
                loop {
                    output.write(&chunk);
                }
            }
            "\"fail\"" => Err(String::from("asked to fail")),
            "\"trap\"" => panic!("asked to trap"),
            "\"partial\"" => {
                outputs::create("out", "bytes").write(b"half of it");
                Err(String::from("failed after writing an output"))
            }
            "\"undeclared\"" => {
                outputs::create("not-a-role", "bytes").write(b"x");
                Ok(())
            }
            _ => Err(String::from("unknown recipe")),
        }
    }
}

lab_tool_guest::export_tool!(Hostile);
