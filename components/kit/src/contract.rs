//! A service's contract files, embedded at build by `lab-embed`.

/// The embedded files of one service: (name, contents), sorted by name.
#[derive(Debug, Clone, Copy)]
pub struct Contract {
    pub files: &'static [(&'static str, &'static [u8])],
}

impl Contract {
    /// A served file by its listed name.
    pub fn file(&self, name: &str) -> Option<&'static [u8]> {
        self.files
            .iter()
            .find(|(n, _)| *n == name)
            .map(|(_, contents)| *contents)
    }

    /// The listed names, sorted.
    pub fn names(&self) -> Vec<&'static str> {
        self.files.iter().map(|(name, _)| *name).collect()
    }

    /// `operations.json`, parsed.
    pub fn operations(&self) -> serde_json::Value {
        let bytes = self
            .file("operations.json")
            .expect("operations.json is a contract file");
        serde_json::from_slice(bytes).expect("operations.json is JSON")
    }
}

/// The media type a served file is answered with.
pub fn media_type(name: &str) -> &'static str {
    if name.ends_with(".md") {
        "text/markdown"
    } else {
        "application/json"
    }
}
