//! The JSON Schema validator release: inputs `document` and `schema` (JSON
//! text), output `report` (`application/json`): `{"valid", "errors":
//! [{"instance_path", "schema_path", "message"}]}`. The subset of draft
//! 2020-12 is `lab-jsonschema`'s; a schema outside it, or an input that is
//! not JSON, ends the run `failed` with the reason.
#![cfg_attr(target_arch = "wasm32", no_std)]

use lab_jsonschema::Schema;
use lab_tool_guest::lab::tool::outputs;
use lab_tool_guest::{format, String};

struct Validator;

impl lab_tool_guest::exports::lab::tool::run::Guest for Validator {
    fn run() -> Result<(), String> {
        let document = read_json("document")?;
        let schema = read_json("schema")?;
        let schema = Schema::new(&schema).map_err(|e| format!("schema: {e}"))?;
        let report = schema
            .validate(&document)
            .map_err(|e| format!("schema: {e}"))?;
        let text = serde_json::to_vec(&report.to_json()).map_err(|e| format!("report: {e}"))?;
        outputs::create("report", "application/json").write(&text);
        Ok(())
    }
}

/// The input bound to `role`, parsed as JSON.
fn read_json(role: &str) -> Result<serde_json::Value, String> {
    let bytes = lab_tool_guest::read_input(role)?;
    serde_json::from_slice(&bytes).map_err(|e| format!("{role} is not JSON: {e}"))
}

lab_tool_guest::export_tool!(Validator);
