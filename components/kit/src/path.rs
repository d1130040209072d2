//! Request paths: the router matches raw paths and never redirects.

/// The segments of an absolute, clean path: `None` when the path is not
/// absolute or has an empty, `.` or `..` segment (which covers `//` and a
/// trailing slash). The root `/` has no segments.
pub fn clean_segments(path: &str) -> Option<Vec<&str>> {
    let rest = path.strip_prefix('/')?;
    if rest.is_empty() {
        return Some(Vec::new());
    }
    let segments: Vec<&str> = rest.split('/').collect();
    let clean = segments
        .iter()
        .all(|s| !s.is_empty() && *s != "." && *s != "..");
    clean.then_some(segments)
}

#[cfg(test)]
mod tests {
    use super::clean_segments;

    #[test]
    fn clean_paths_split() {
        assert_eq!(clean_segments("/"), Some(vec![]));
        assert_eq!(clean_segments("/v1/stat"), Some(vec!["v1", "stat"]));
        assert_eq!(
            clean_segments("/describe/schema/Error.schema.json"),
            Some(vec!["describe", "schema", "Error.schema.json"])
        );
    }

    #[test]
    fn unclean_paths_refused() {
        for path in [
            "",
            "v1",
            "//v1",
            "/v1//stat",
            "/v1/stat/",
            "/v1/../stat",
            "/./v1",
            "/v1/.",
        ] {
            assert_eq!(clean_segments(path), None, "{path}");
        }
    }
}
