//! The contract files of `contracts/bytes/`, embedded at build.

use lab_kit::contract::Contract;

include!(concat!(env!("OUT_DIR"), "/contract_files.rs"));

/// The bytes service's contract.
pub const CONTRACT: Contract = Contract { files: FILES };

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_required_file_is_served() {
        for name in ["SURFACE.md", "HTTP.md", "operations.json", "openapi.json"] {
            assert!(CONTRACT.file(name).is_some(), "{name}");
        }
        let names = CONTRACT.names();
        assert!(names
            .iter()
            .any(|n| n.starts_with("schema/") && n.ends_with(".schema.json")));
    }

    #[test]
    fn json_files_parse() {
        for name in CONTRACT
            .names()
            .into_iter()
            .filter(|n| n.ends_with(".json"))
        {
            serde_json::from_slice::<serde_json::Value>(CONTRACT.file(name).unwrap())
                .unwrap_or_else(|e| panic!("{name}: {e}"));
        }
    }
}
