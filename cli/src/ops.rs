//! The coordination service's HTTP operations, as the specification's
//! Operation table gives them, and how a call's arguments become the query
//! string and the signing record's `params`.
//!
//! Both come from the same [`Arguments`], so what is sent is what is signed:
//! the service rebuilds the signing record from the query it receives.

use lab_coord_auth::{GrantKind, Params};

/// How a table parameter is written: in the query as text, in the signing
/// record as a JSON string, integer or array of strings.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ParamKind {
    String,
    Int,
    /// A path: one `path=` per label in the query, an array in the record.
    Strings,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ParamSpec {
    pub name: &'static str,
    pub kind: ParamKind,
    pub required: bool,
}

/// What the request carries.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RequestBody {
    None,
    /// A JSON object, sent as given with `Content-Type: application/json`.
    Json,
    /// Raw bytes with `Content-Type: application/octet-stream` (`retain`).
    Bytes,
}

/// What a successful answer carries.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Answer {
    Json,
    /// Raw bytes (`fetch`).
    Bytes,
}

/// One row of the Operation table.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Operation {
    pub name: &'static str,
    pub grant: GrantKind,
    pub method: &'static str,
    pub route: &'static str,
    pub params: &'static [ParamSpec],
    pub body: RequestBody,
    pub answer: Answer,
}

const fn p(name: &'static str, kind: ParamKind, required: bool) -> ParamSpec {
    ParamSpec {
        name,
        kind,
        required,
    }
}

const fn op(
    name: &'static str,
    grant: GrantKind,
    method: &'static str,
    route: &'static str,
    params: &'static [ParamSpec],
    body: RequestBody,
) -> Operation {
    Operation {
        name,
        grant,
        method,
        route,
        params,
        body,
        answer: Answer::Json,
    }
}

use GrantKind::{Declare, Provision, Publish, Read};
use ParamKind::{Int, Strings};
use RequestBody::{Bytes, Json, None as NoBody};

/// Every operation with an HTTP route, in the table's order.
pub const OPERATIONS: &[Operation] = &[
    op(
        "resolve",
        Read,
        "GET",
        "/v1/resolve",
        &[p("path", Strings, true)],
        NoBody,
    ),
    op(
        "children",
        Read,
        "GET",
        "/v1/children",
        &[
            p("path", Strings, false),
            p("through", Int, false),
            p("cursor", ParamKind::String, false),
            p("limit", Int, false),
        ],
        NoBody,
    ),
    op(
        "entries",
        Read,
        "GET",
        "/v1/entries",
        &[
            p("path", Strings, true),
            p("after", Int, false),
            p("through", Int, false),
            p("limit", Int, false),
        ],
        NoBody,
    ),
    op(
        "get",
        Read,
        "GET",
        "/v1/get",
        &[
            p("root_id", ParamKind::String, true),
            p("space_id", ParamKind::String, true),
            p("position", Int, true),
        ],
        NoBody,
    ),
    Operation {
        answer: Answer::Bytes,
        ..op(
            "fetch",
            Read,
            "GET",
            "/v1/fetch",
            &[
                p("path", Strings, true),
                p("bytes", ParamKind::String, true),
            ],
            NoBody,
        )
    },
    op(
        "snapshot",
        Read,
        "GET",
        "/v1/snapshot",
        &[p("path", Strings, false), p("depth", Int, false)],
        NoBody,
    ),
    op(
        "retain",
        Publish,
        "PUT",
        "/v1/retain",
        &[p("path", Strings, true), p("type", ParamKind::String, true)],
        Bytes,
    ),
    op("publish", Publish, "POST", "/v1/publish", &[], Json),
    op(
        "create_artifact",
        Publish,
        "POST",
        "/v1/artifacts",
        &[],
        Json,
    ),
    op("declare", Declare, "POST", "/v1/declarations", &[], Json),
    op("compose", Publish, "POST", "/v1/compose", &[], Json),
    op("apply", Publish, "POST", "/v1/applications", &[], Json),
    op("query", Read, "POST", "/v1/query", &[], Json),
    op("explain", Read, "POST", "/v1/explain", &[], Json),
    op(
        "create_project",
        Provision,
        "POST",
        "/v1/projects",
        &[],
        Json,
    ),
    op(
        "provision_worker",
        Provision,
        "POST",
        "/v1/workers",
        &[],
        Json,
    ),
    op(
        "retire_worker",
        Provision,
        "POST",
        "/v1/workers/retire",
        &[],
        Json,
    ),
    op(
        "create_campaign",
        Provision,
        "POST",
        "/v1/campaigns",
        &[],
        Json,
    ),
    op("assign", Provision, "POST", "/v1/assignments", &[], Json),
    op(
        "export",
        Provision,
        "GET",
        "/v1/export",
        &[
            p("path", Strings, false),
            p("cursor", ParamKind::String, false),
        ],
        NoBody,
    ),
];

/// Operations the service carries on its socket only.
pub const SOCKET_ONLY: &[&str] = &["subscribe", "unsubscribe"];

/// The operation named `name` (its table name).
pub fn find(name: &str) -> Option<&'static Operation> {
    OPERATIONS.iter().find(|op| op.name == name)
}

/// The names of every HTTP operation, for messages and help.
pub fn names() -> String {
    OPERATIONS
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

/// The request's parameters in both of their forms.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Built {
    /// The signing record's `params`.
    pub params: Params,
    /// The query string, with its `?`, or empty.
    pub query: String,
}

/// Splits `NAME=VALUE` at the first `=`.
pub fn split_param(text: &str) -> Result<(String, String), String> {
    match text.split_once('=') {
        Some((name, value)) if !name.is_empty() => Ok((name.to_owned(), value.to_owned())),
        _ => Err(format!("--param {text:?} is not NAME=VALUE")),
    }
}

impl Operation {
    /// Checks `args` against this operation's parameters and builds the
    /// signing params and the query string from them.
    ///
    /// Refused (with the reason): a parameter the operation does not take,
    /// a parameter given twice, an integer that does not parse, a missing
    /// required parameter.
    pub fn build(&self, args: &Arguments) -> Result<Built, String> {
        let spec = |name: &str| self.params.iter().find(|spec| spec.name == name);
        let mut params = Params::new();
        let mut query: Vec<String> = Vec::new();

        if !args.path.is_empty() {
            if spec("path").is_none() {
                return Err(format!("{} takes no --path", self.name));
            }
            params = params.strings("path", args.path.iter().cloned());
            query.extend(
                args.path
                    .iter()
                    .map(|label| format!("path={}", percent_encode(label))),
            );
        }

        // Single parameters go into the query in the table's order.
        let mut singles: Vec<(usize, String)> = Vec::new();
        for (name, value) in &args.params {
            let Some(index) = self.params.iter().position(|spec| spec.name == name) else {
                return Err(self.unknown_param(name));
            };
            let spec = self.params[index];
            if spec.kind == ParamKind::Strings {
                return Err(format!(
                    "give {} as --{name} LABEL, one per label",
                    spec.name
                ));
            }
            if params.get(name).is_some() {
                return Err(format!("parameter {name} given twice"));
            }
            let text = match spec.kind {
                ParamKind::Int => {
                    let number: i64 = value.trim().parse().map_err(|_| {
                        format!("parameter {name} must be an integer, not {value:?}")
                    })?;
                    params = params.int(name, number);
                    number.to_string()
                }
                _ => {
                    params = params.string(name, value.clone());
                    value.clone()
                }
            };
            singles.push((index, format!("{name}={}", percent_encode(&text))));
        }
        singles.sort_by_key(|(index, _)| *index);
        query.extend(singles.into_iter().map(|(_, pair)| pair));

        let missing: Vec<String> = self
            .params
            .iter()
            .filter(|spec| spec.required && params.get(spec.name).is_none())
            .map(|spec| match spec.kind {
                ParamKind::Strings => format!("--{} LABEL", spec.name),
                _ => format!("--param {}=...", spec.name),
            })
            .collect();
        if !missing.is_empty() {
            return Err(format!("{} needs {}", self.name, missing.join(" and ")));
        }

        let query = if query.is_empty() {
            String::new()
        } else {
            format!("?{}", query.join("&"))
        };
        Ok(Built { params, query })
    }

    fn unknown_param(&self, name: &str) -> String {
        let known: Vec<&str> = self
            .params
            .iter()
            .filter(|spec| spec.kind != ParamKind::Strings)
            .map(|spec| spec.name)
            .collect();
        if known.is_empty() {
            format!("{} takes no --param (its request is the body)", self.name)
        } else {
            format!(
                "{} takes no parameter {name:?}; it takes {}",
                self.name,
                known.join(", ")
            )
        }
    }
}

/// Percent-encodes every byte of `text`'s UTF-8 outside the unreserved
/// characters `A-Z a-z 0-9 - . _ ~`, as `%XX` with upper-case hex.
pub fn percent_encode(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for byte in text.bytes() {
        if byte.is_ascii_alphanumeric() || matches!(byte, b'-' | b'.' | b'_' | b'~') {
            out.push(char::from(byte));
        } else {
            out.push_str(&format!("%{byte:02X}"));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
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
        find(name).unwrap().build(&args(path, params))
    }

    #[test]
    fn table_covers_every_http_operation_once() {
        let names: Vec<&str> = OPERATIONS.iter().map(|op| op.name).collect();
        assert_eq!(names.len(), 20);
        let mut unique = names.clone();
        unique.sort_unstable();
        unique.dedup();
        assert_eq!(unique.len(), names.len());
        for name in SOCKET_ONLY {
            assert!(find(name).is_none());
        }
        for op in OPERATIONS {
            assert!(op.route.starts_with("/v1/"), "{}", op.name);
            let has_body = op.body != RequestBody::None;
            assert_eq!(has_body, op.method != "GET", "{}", op.name);
            // Only the GET routes take query parameters.
            assert!(op.method == "GET" || op.name == "retain" || op.params.is_empty());
        }
        assert_eq!(find("fetch").unwrap().answer, Answer::Bytes);
        assert_eq!(find("retain").unwrap().body, RequestBody::Bytes);
        assert_eq!(find("export").unwrap().grant, GrantKind::Provision);
        assert_eq!(find("declare").unwrap().grant, GrantKind::Declare);
    }

    #[test]
    fn odd_labels_are_percent_encoded() {
        assert_eq!(percent_encode("plain-label_1.0~x"), "plain-label_1.0~x");
        assert_eq!(percent_encode("a b"), "a%20b");
        assert_eq!(percent_encode("a&b=c"), "a%26b%3Dc");
        assert_eq!(percent_encode("a/b"), "a%2Fb");
        assert_eq!(percent_encode("a+b%"), "a%2Bb%25");
        assert_eq!(percent_encode("é"), "%C3%A9");
        assert_eq!(percent_encode("日本"), "%E6%97%A5%E6%9C%AC");
        assert_eq!(percent_encode("?#[]"), "%3F%23%5B%5D");
        let built = build("resolve", &["projects", "a b&c=d/e", "ü"], &[]).unwrap();
        assert_eq!(
            built.query,
            "?path=projects&path=a%20b%26c%3Dd%2Fe&path=%C3%BC"
        );
        // The signed path is the labels themselves.
        assert_eq!(
            built.params.to_json().unwrap(),
            json!({"path": ["projects", "a b&c=d/e", "ü"]})
        );
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
        assert_eq!(built.query, "?path=projects&path=alpha&after=3&limit=10");

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
        assert_eq!(built.query, "?root_id=r1&space_id=s%202&position=7");

        // A path and a string.
        let built = build("retain", &["projects", "p"], &[("type", "sha256:ab")]).unwrap();
        assert_eq!(
            built.params.to_json().unwrap(),
            json!({"path": ["projects", "p"], "type": "sha256:ab"})
        );
        assert_eq!(built.query, "?path=projects&path=p&type=sha256%3Aab");

        // The world: no path at all, never an empty array.
        let built = build("children", &[], &[("cursor", "c/1"), ("through", "0")]).unwrap();
        assert_eq!(
            built.params.to_json().unwrap(),
            json!({"through": 0, "cursor": "c/1"})
        );
        assert_eq!(built.query, "?through=0&cursor=c%2F1");
        let built = build("export", &[], &[]).unwrap();
        assert_eq!(built.params.to_json().unwrap(), json!({}));
        assert_eq!(built.query, "");

        let built = build("snapshot", &["projects"], &[("depth", "2")]).unwrap();
        assert_eq!(
            built.params.to_json().unwrap(),
            json!({"path": ["projects"], "depth": 2})
        );

        // JSON-body operations sign `{}`.
        for name in ["publish", "declare", "query", "provision_worker", "assign"] {
            let built = build(name, &[], &[]).unwrap();
            assert_eq!(built.params.to_json().unwrap(), json!({}), "{name}");
            assert_eq!(built.query, "");
        }
    }

    #[test]
    fn integers_are_written_as_signed() {
        // What is signed is the parsed integer; the query carries the same
        // decimal text.
        let built = build("entries", &["a"], &[("limit", "010")]).unwrap();
        assert_eq!(built.query, "?path=a&limit=10");
        assert_eq!(
            built.params.to_json().unwrap(),
            json!({"path": ["a"], "limit": 10})
        );
        let built = build("entries", &["a"], &[("after", "-1")]).unwrap();
        assert_eq!(built.query, "?path=a&after=-1");
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
