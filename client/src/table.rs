//! The coordination service's HTTP operations, as the specification's
//! Operation table and `operations.json` give them: every operation with
//! an HTTP route, in the table's order. The component's own table
//! (`lab_coord::table`) is checked row by row against this one.

use lab_coord_auth::GrantKind;

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
pub enum BodyKind {
    None,
    /// A JSON object, sent as given with `Content-Type: application/json`.
    Json,
    /// Raw bytes with `Content-Type: application/octet-stream` (`retain`).
    Raw,
}

impl BodyKind {
    /// The `Content-Type` a body of this kind is sent with.
    pub fn content_type(self) -> Option<&'static str> {
        match self {
            BodyKind::None => None,
            BodyKind::Json => Some("application/json"),
            BodyKind::Raw => Some("application/octet-stream"),
        }
    }
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
    pub body: BodyKind,
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
    body: BodyKind,
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

use BodyKind::{Json, None as NoBody, Raw};
use GrantKind::{Declare, Provision, Publish, Read};
use ParamKind::{Int, Strings};

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
        Raw,
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

impl Operation {
    /// The parameter `name` of this row.
    pub fn param(&self, name: &str) -> Option<&'static ParamSpec> {
        self.params.iter().find(|spec| spec.name == name)
    }
}

/// The names of every HTTP operation, for messages and help.
pub fn names() -> String {
    OPERATIONS
        .iter()
        .map(|op| op.name)
        .collect::<Vec<_>>()
        .join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;

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
            let has_body = op.body != BodyKind::None;
            assert_eq!(has_body, op.method != "GET", "{}", op.name);
            // Only the GET routes take query parameters.
            assert!(op.method == "GET" || op.name == "retain" || op.params.is_empty());
        }
        assert_eq!(find("fetch").unwrap().answer, Answer::Bytes);
        assert_eq!(find("retain").unwrap().body, BodyKind::Raw);
        assert_eq!(find("export").unwrap().grant, GrantKind::Provision);
        assert_eq!(find("declare").unwrap().grant, GrantKind::Declare);
    }
}
