//! JSON pointers (RFC 6901): rendering locations and resolving local `$ref`.

use alloc::string::String;
use core::fmt::Write;
use serde_json::Value;

/// One step of a location: a member name or an array index.
#[derive(Clone, Copy, Debug)]
pub enum Step<'a> {
    Key(&'a str),
    Index(usize),
}

/// `steps` as a JSON pointer (`""` for the root).
pub fn render(steps: &[Step<'_>]) -> String {
    let mut out = String::new();
    for step in steps {
        out.push('/');
        match step {
            Step::Key(key) => {
                for c in key.chars() {
                    match c {
                        '~' => out.push_str("~0"),
                        '/' => out.push_str("~1"),
                        c => out.push(c),
                    }
                }
            }
            Step::Index(i) => {
                let _ = write!(out, "{i}");
            }
        }
    }
    out
}

/// The value a local reference (`#` followed by a JSON pointer, its
/// tokens percent-decoding nothing) names inside `root`, if any.
pub fn resolve<'a>(root: &'a Value, reference: &str) -> Option<&'a Value> {
    let pointer = reference.strip_prefix('#')?;
    if pointer.is_empty() {
        return Some(root);
    }
    let pointer = pointer.strip_prefix('/')?;
    let mut at = root;
    for token in pointer.split('/') {
        let token = token.replace("~1", "/").replace("~0", "~");
        at = match at {
            Value::Object(map) => map.get(&token)?,
            Value::Array(items) => {
                if token.len() > 1 && token.starts_with('0') {
                    return None;
                }
                items.get(token.parse::<usize>().ok()?)?
            }
            _ => return None,
        };
    }
    Some(at)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn renders_escaped_pointers() {
        assert_eq!(render(&[]), "");
        let steps = [Step::Key("a/b~c"), Step::Index(3)];
        assert_eq!(render(&steps), "/a~1b~0c/3");
    }

    #[test]
    fn resolves_local_references_only() {
        let root = json!({"$defs": {"a/b": {"x": [1, 2]}}});
        assert_eq!(resolve(&root, "#"), Some(&root));
        assert_eq!(resolve(&root, "#/$defs/a~1b/x/1"), Some(&json!(2)));
        assert_eq!(resolve(&root, "#/$defs/missing"), None);
        assert_eq!(resolve(&root, "#/$defs/a~1b/x/01"), None);
        assert_eq!(resolve(&root, "other.json#/$defs"), None);
        assert_eq!(resolve(&root, "#foo"), None);
    }
}
