//! A service's contract files, embedded at build by `lab-embed`.

use crate::reply::Replier;
use crate::{BodyPart, Response};

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

    /// `GET /describe/{file}`: the listed file verbatim, or 404 `not_found`.
    pub fn serve(&self, replier: &Replier, request_path: &str) -> Response {
        const OP: Option<&str> = Some("describe_file");
        let name = request_path.strip_prefix("/describe/").unwrap_or_default();
        match self.file(name) {
            Some(contents) => replier.raw(
                200,
                vec![("content-type", media_type(name).as_bytes().to_vec())],
                vec![BodyPart::Bytes(contents.to_vec())],
                OP,
            ),
            None => replier.error(404, "not_found", "no such contract file", None, OP),
        }
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
