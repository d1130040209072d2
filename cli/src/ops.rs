//! How a call's command-line arguments become a request of the
//! coordination service: `--path` labels and `--param NAME=VALUE` text are
//! read as the operation's row types them, then built by the client crate,
//! which writes the query and the signing record's `params` from them.

use lab_coord_client::{BuildError, Operation, ParamKind, ParamValue, Request};

/// The names of every HTTP operation, for messages and help.
pub fn names() -> String {
    lab_coord_client::OPERATIONS
        .iter()
        .map(|op| op.name)
        .collect::<Vec<_>>()
        .join(", ")
}

/// A call's parameters as given on the command line.
#[derive(Debug, Clone, Default)]
pub struct Arguments {
    /// The `--path` labels, in order; empty when none were given.
    pub path: Vec<String>,
    /// `--param NAME=VALUE` pairs (and `--type`), in order.
    pub params: Vec<(String, String)>,
}

/// Splits `NAME=VALUE` at the first `=`.
pub fn split_param(text: &str) -> Result<(String, String), String> {
    match text.split_once('=') {
        Some((name, value)) if !name.is_empty() => Ok((name.to_owned(), value.to_owned())),
        _ => Err(format!("--param {text:?} is not NAME=VALUE")),
    }
}

/// A request of `op` with `args` as its parameters, checked against the
/// row (its body comes later).
///
/// Refused (with the reason): a parameter the operation does not take,
/// a parameter given twice, an integer that does not parse, a missing
/// required parameter.
pub fn request(op: &'static Operation, args: &Arguments) -> Result<Request, String> {
    let mut request = Request::of(op);
    if !args.path.is_empty() {
        if op.param("path").is_none() {
            return Err(format!("{} takes no --path", op.name));
        }
        request = request.path(args.path.iter().cloned());
    }
    for (name, value) in &args.params {
        let Some(spec) = op.param(name) else {
            return Err(unknown_param(op, name));
        };
        let value = match spec.kind {
            ParamKind::Strings => {
                return Err(format!(
                    "give {} as --{name} LABEL, one per label",
                    spec.name
                ))
            }
            ParamKind::Int => ParamValue::Int(
                value
                    .trim()
                    .parse()
                    .map_err(|_| format!("parameter {name} must be an integer, not {value:?}"))?,
            ),
            ParamKind::String => ParamValue::String(value.clone()),
        };
        request = request.param(name, value);
    }
    request.build().map_err(|err| explain(op, err))?;
    Ok(request)
}

/// `err` in the command line's terms.
pub fn explain(op: &Operation, err: BuildError) -> String {
    match err {
        BuildError::Repeated { name, .. } => format!("parameter {name} given twice"),
        BuildError::Missing { names, .. } => {
            let missing: Vec<String> = names
                .iter()
                .map(|name| match op.param(name).map(|spec| spec.kind) {
                    Some(ParamKind::Strings) => format!("--{name} LABEL"),
                    _ => format!("--param {name}=..."),
                })
                .collect();
            format!("{} needs {}", op.name, missing.join(" and "))
        }
        BuildError::UnexpectedBody { .. } => format!("{} takes no --body", op.name),
        other => other.to_string(),
    }
}

fn unknown_param(op: &Operation, name: &str) -> String {
    let known: Vec<&str> = op
        .params
        .iter()
        .filter(|spec| spec.kind != ParamKind::Strings)
        .map(|spec| spec.name)
        .collect();
    if known.is_empty() {
        format!("{} takes no --param (its request is the body)", op.name)
    } else {
        format!(
            "{} takes no parameter {name:?}; it takes {}",
            op.name,
            known.join(", ")
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use lab_coord_client::Built;
    use serde_json::json;

    fn args(path: &[&str], params: &[(&str, &str)]) -> Arguments {
        Arguments {
            path: path.iter().map(|s| s.to_string()).collect(),
            params: params
                .iter()
                .map(|(n, v)| (n.to_string(), v.to_string()))
                .collect(),
        }
    }

    fn build(name: &str, path: &[&str], params: &[(&str, &str)]) -> Result<Built, String> {
        let op = lab_coord_client::find(name).unwrap();
        Ok(request(op, &args(path, params))?.build().unwrap())
    }

    #[test]
    fn signing_params_per_operation_kind() {
        // Path and integers; the query follows the table's order.
        let built = build(
            "entries",
            &["projects", "alpha"],
            &[("limit", "10"), ("after", "3")],
        )
        .unwrap();
        assert_eq!(
            built.params.to_json().unwrap(),
            json!({"path": ["projects", "alpha"], "after": 3, "limit": 10})
        );
        assert_eq!(built.query(), "?path=projects&path=alpha&after=3&limit=10");

        // Strings and an integer, no path.
        let built = build(
            "get",
            &[],
            &[("root_id", "r1"), ("space_id", "s 2"), ("position", "7")],
        )
        .unwrap();
        assert_eq!(
            built.params.to_json().unwrap(),
            json!({"root_id": "r1", "space_id": "s 2", "position": 7})
        );
        assert_eq!(built.query(), "?root_id=r1&space_id=s%202&position=7");

        // A path and a string.
        let built = build("retain", &["projects", "p"], &[("type", "sha256:ab")]).unwrap();
        assert_eq!(
            built.params.to_json().unwrap(),
            json!({"path": ["projects", "p"], "type": "sha256:ab"})
        );
        assert_eq!(built.query(), "?path=projects&path=p&type=sha256%3Aab");

        // The world: no path at all, never an empty array.
        let built = build("children", &[], &[("cursor", "c/1"), ("through", "0")]).unwrap();
        assert_eq!(
            built.params.to_json().unwrap(),
            json!({"through": 0, "cursor": "c/1"})
        );
        assert_eq!(built.query(), "?through=0&cursor=c%2F1");
        let built = build("export", &[], &[]).unwrap();
        assert_eq!(built.params.to_json().unwrap(), json!({}));
        assert_eq!(built.query(), "");

        let built = build("snapshot", &["projects"], &[("depth", "2")]).unwrap();
        assert_eq!(
            built.params.to_json().unwrap(),
            json!({"path": ["projects"], "depth": 2})
        );

        // JSON-body operations sign `{}`.
        for name in ["publish", "declare", "query", "provision_worker", "assign"] {
            let built = build(name, &[], &[]).unwrap();
            assert_eq!(built.params.to_json().unwrap(), json!({}), "{name}");
            assert_eq!(built.query(), "");
        }
    }

    #[test]
    fn integers_are_written_as_signed() {
        // What is signed is the parsed integer; the query carries the same
        // decimal text.
        let built = build("entries", &["a"], &[("limit", "010")]).unwrap();
        assert_eq!(built.query(), "?path=a&limit=10");
        assert_eq!(
            built.params.to_json().unwrap(),
            json!({"path": ["a"], "limit": 10})
        );
        let built = build("entries", &["a"], &[("after", "-1")]).unwrap();
        assert_eq!(built.query(), "?path=a&after=-1");
    }

    #[test]
    fn arguments_refused() {
        for (name, path, params, why) in [
            ("entries", &[][..], &[][..], "needs --path LABEL"),
            (
                "get",
                &[],
                &[("root_id", "r")],
                "needs --param space_id=...",
            ),
            ("entries", &["a"], &[("limit", "ten")], "must be an integer"),
            (
                "entries",
                &["a"],
                &[("limit", "1"), ("limit", "2")],
                "twice",
            ),
            ("entries", &["a"], &[("cursor", "c")], "takes no parameter"),
            ("entries", &["a"], &[("path", "b")], "--path LABEL"),
            ("get", &["a"], &[], "takes no --path"),
            ("publish", &[], &[("limit", "1")], "takes no --param"),
            ("retain", &["p"], &[], "needs --param type"),
            ("fetch", &["p"], &[], "needs --param bytes"),
        ] {
            let err = build(name, path, params).unwrap_err();
            assert!(err.contains(why), "{name}: {err}");
        }
    }

    #[test]
    fn param_pairs_split_at_the_first_equals() {
        assert_eq!(
            split_param("cursor=a=b").unwrap(),
            ("cursor".into(), "a=b".into())
        );
        assert_eq!(split_param("type=").unwrap(), ("type".into(), "".into()));
        assert!(split_param("=x").is_err());
        assert!(split_param("limit").is_err());
    }
}
