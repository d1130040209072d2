//! The contract files of `contracts/bytes/`, embedded at build.

include!(concat!(env!("OUT_DIR"), "/contract_files.rs"));

/// A served file by its listed name.
pub fn file(name: &str) -> Option<&'static [u8]> {
    FILES
        .iter()
        .find(|(n, _)| *n == name)
        .map(|(_, contents)| *contents)
}

/// The listed names, sorted.
pub fn names() -> Vec<&'static str> {
    FILES.iter().map(|(name, _)| *name).collect()
}

/// The media type a served file is answered with.
pub fn media_type(name: &str) -> &'static str {
    if name.ends_with(".md") {
        "text/markdown"
    } else {
        "application/json"
    }
}

/// `operations.json`: the operation and refusal tables `describe` reports.
pub fn operations() -> serde_json::Value {
    let bytes = file("operations.json").expect("operations.json is a contract file");
    serde_json::from_slice(bytes).expect("operations.json is JSON")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_required_file_is_served() {
        for name in ["SURFACE.md", "HTTP.md", "operations.json", "openapi.json"] {
            assert!(file(name).is_some(), "{name}");
        }
        assert!(names()
            .iter()
            .any(|n| n.starts_with("schema/") && n.ends_with(".schema.json")));
    }

    #[test]
    fn json_files_parse() {
        for name in names().into_iter().filter(|n| n.ends_with(".json")) {
            serde_json::from_slice::<serde_json::Value>(file(name).unwrap())
                .unwrap_or_else(|e| panic!("{name}: {e}"));
        }
    }
}
