//! Checks the contract files of `contracts/coordination` against each other
//! and against the operation table the router serves: every JSON file
//! parses, `operations.json` names exactly the operations of the
//! specification's table, each HTTP row has the route, grant and parameters
//! of `lab_coord::table::OPERATIONS`, the client crate's table
//! (`lab_coord_client::OPERATIONS`, which labctl, lab-bench and the
//! black-box tests build requests from) has the same rows as both, and
//! every schema a row or a schema names exists.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use lab_coord::table::{self, ParamKind};
use serde_json::Value;

/// The operations of the specification's table, in its order.
const SPEC_OPERATIONS: [&str; 22] = [
    "resolve",
    "children",
    "entries",
    "get",
    "fetch",
    "snapshot",
    "retain",
    "publish",
    "create_artifact",
    "declare",
    "compose",
    "apply",
    "query",
    "explain",
    "create_project",
    "provision_worker",
    "retire_worker",
    "create_campaign",
    "assign",
    "export",
    "subscribe",
    "unsubscribe",
];

/// Operations the socket alone carries.
const SOCKET_ONLY: [&str; 2] = ["subscribe", "unsubscribe"];

fn dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../contracts/coordination")
}

fn files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap_or_else(|e| panic!("{dir:?}: {e}")) {
        let path = entry.unwrap().path();
        if path.is_dir() {
            files(&path, out);
        } else {
            out.push(path);
        }
    }
    out.sort();
}

fn json(path: &Path) -> Value {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{path:?}: {e}"));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{path:?} is not JSON: {e}"))
}

fn operations() -> Vec<Value> {
    let doc = json(&dir().join("operations.json"));
    assert_eq!(doc["service"], "coord");
    assert_eq!(doc["contract"], "2026-09-19");
    doc["operations"]
        .as_array()
        .expect("operations.json has an `operations` array")
        .clone()
}

fn schema_exists(name: &str) -> bool {
    dir()
        .join("schema")
        .join(format!("{name}.schema.json"))
        .is_file()
}

fn str_of<'v>(value: &'v Value, member: &str) -> &'v str {
    value[member]
        .as_str()
        .unwrap_or_else(|| panic!("`{member}` is not a string in {value}"))
}

#[test]
fn every_json_file_parses() {
    let root = dir();
    let mut all = Vec::new();
    files(&root, &mut all);
    let json_files: Vec<_> = all
        .iter()
        .filter(|p| p.extension().is_some_and(|e| e == "json"))
        .collect();
    assert!(json_files.len() > 3, "no JSON files under {root:?}");
    for path in json_files {
        json(path);
    }
    for name in [
        "SURFACE.md",
        "HTTP.md",
        "WS.md",
        "AUTH.md",
        "operations.json",
        "openapi.json",
    ] {
        assert!(root.join(name).is_file(), "{name} is missing");
    }
}

#[test]
fn operations_are_exactly_the_specification_table() {
    let names: Vec<String> = operations()
        .iter()
        .map(|row| str_of(row, "name").to_string())
        .collect();
    assert_eq!(
        names, SPEC_OPERATIONS,
        "operations.json rows, in the table's order"
    );
}

#[test]
fn http_rows_match_the_router_table() {
    let rows = operations();
    for row in &rows {
        let name = str_of(row, "name");
        let served = table::OPERATIONS.iter().find(|o| o.name == name);
        match (&row["http"], served) {
            (Value::Null, None) => {
                assert!(SOCKET_ONLY.contains(&name), "{name} has no route");
                assert_eq!(row["ws"], true, "{name} is socket-only");
            }
            (Value::Null, Some(_)) => panic!("{name} is routed but its row has no `http`"),
            (http, None) => panic!("{name} has `http` {http} but no route"),
            (http, Some(op)) => {
                let route = format!("/v1/{}", op.route.join("/"));
                assert_eq!(str_of(http, "method"), op.method, "{name} method");
                assert_eq!(str_of(http, "path"), route, "{name} path");
                assert_eq!(str_of(row, "grant"), op.grant.as_str(), "{name} grant");
                assert_eq!(contract_params(row), router_params(op), "{name} parameters");
                let carried = !matches!(name, "retain" | "fetch");
                assert_eq!(row["ws"], carried, "{name} ws");
            }
        }
    }
    for op in table::OPERATIONS {
        assert!(
            rows.iter().any(|row| row["name"] == op.name),
            "routed operation {} has no row",
            op.name
        );
    }
}

/// One HTTP row as both tables and `operations.json` can state it:
/// name, method, route, grant, params (name, kind, required), body kind.
type Row = (String, String, String, String, Params, &'static str);

/// A row's parameters as `(name, kind, required)`.
type Params = Vec<(String, String, bool)>;

fn contract_params(row: &Value) -> Params {
    let name = str_of(row, "name");
    row["params"]
        .as_array()
        .unwrap_or_else(|| panic!("{name} has no params array"))
        .iter()
        .map(|p| {
            (
                str_of(p, "name").to_string(),
                str_of(p, "kind").to_string(),
                p["required"].as_bool().expect("required is a boolean"),
            )
        })
        .collect()
}

fn router_params(op: &table::Operation) -> Params {
    op.params
        .iter()
        .map(|(name, kind, required)| {
            let kind = match kind {
                ParamKind::Str => "string",
                ParamKind::Int => "int",
                ParamKind::Strings => "strings",
            };
            (name.to_string(), kind.to_string(), *required)
        })
        .collect()
}

fn router_row(op: &table::Operation) -> Row {
    let body = match op.body {
        table::BodyKind::None => "none",
        table::BodyKind::Json => "json",
        table::BodyKind::Raw => "raw",
    };
    (
        op.name.to_string(),
        op.method.to_string(),
        format!("/v1/{}", op.route.join("/")),
        op.grant.as_str().to_string(),
        router_params(op),
        body,
    )
}

fn client_row(op: &lab_coord_client::Operation) -> Row {
    use lab_coord_client::BodyKind;
    let params = op
        .params
        .iter()
        .map(|spec| {
            (
                spec.name.to_string(),
                spec.kind.as_str().to_string(),
                spec.required,
            )
        })
        .collect();
    let body = match op.body {
        BodyKind::None => "none",
        BodyKind::Json => "json",
        BodyKind::Raw => "raw",
    };
    (
        op.name.to_string(),
        op.method.to_string(),
        op.route.to_string(),
        op.grant.as_str().to_string(),
        params,
        body,
    )
}

/// The HTTP rows of `operations.json`. Its body kind: a row naming a
/// `request` schema takes JSON; a GET takes none; any other route takes
/// raw bytes.
fn contract_rows() -> Vec<Row> {
    operations()
        .iter()
        .filter(|row| !row["http"].is_null())
        .map(|row| {
            let http = &row["http"];
            let method = str_of(http, "method");
            let body = if row.get("request").is_some() {
                "json"
            } else if method == "GET" {
                "none"
            } else {
                "raw"
            };
            (
                str_of(row, "name").to_string(),
                method.to_string(),
                str_of(http, "path").to_string(),
                str_of(row, "grant").to_string(),
                contract_params(row),
                body,
            )
        })
        .collect()
}

#[test]
fn client_rows_match_the_router_table_and_the_contract() {
    let router: Vec<Row> = table::OPERATIONS.iter().map(router_row).collect();
    let client: Vec<Row> = lab_coord_client::OPERATIONS
        .iter()
        .map(client_row)
        .collect();
    let contract = contract_rows();
    assert_eq!(router.len(), 20, "every HTTP operation is routed");
    assert_eq!(client.len(), router.len(), "one client row per route");
    assert_eq!(contract.len(), router.len(), "one contract row per route");
    for ((router, client), contract) in router.iter().zip(&client).zip(&contract) {
        assert_eq!(client, router, "client and router rows of {}", router.0);
        assert_eq!(client, contract, "client and contract rows of {}", client.0);
    }
    assert!(
        client.iter().any(|row| row.5 == "raw"),
        "retain takes raw bytes"
    );
}

#[test]
fn named_schemas_exist() {
    for row in operations() {
        for member in ["request", "response"] {
            if let Some(name) = row[member].as_str() {
                assert!(
                    schema_exists(name),
                    "{} names missing schema {name}",
                    row["name"]
                );
            }
        }
    }
    let root = dir().join("schema");
    let mut schemas = Vec::new();
    files(&root, &mut schemas);
    let mut refs = BTreeSet::new();
    for path in &schemas {
        let schema = json(path);
        let file = path.file_name().unwrap().to_str().unwrap();
        assert_eq!(schema["$id"], file, "$id of {file}");
        assert_eq!(
            schema["$schema"], "https://json-schema.org/draft/2020-12/schema",
            "$schema of {file}"
        );
        collect_refs(&schema, &mut refs);
    }
    for target in refs {
        assert!(
            root.join(&target).is_file(),
            "a schema refers to missing {target}"
        );
    }
}

fn collect_refs(value: &Value, out: &mut BTreeSet<String>) {
    match value {
        Value::Object(members) => {
            for (key, member) in members {
                match (key.as_str(), member) {
                    ("$ref", Value::String(target)) => {
                        out.insert(target.clone());
                    }
                    _ => collect_refs(member, out),
                }
            }
        }
        Value::Array(items) => items.iter().for_each(|item| collect_refs(item, out)),
        _ => {}
    }
}

/// Every refusal a row lists is a row of the refusal table, and the
/// OpenAPI operation of each routed row is described by the row's doc and
/// answers exactly the statuses its
/// refusals, the request rules (400 `invalid`, 401, 403, 405, 413 for a
/// body over the bound, 500) and its successes give.
#[test]
fn refusals_agree_with_the_refusal_table_and_openapi() {
    let openapi = json(&dir().join("openapi.json"));
    let status_of = |code: &str| {
        lab_coord::refusal::REFUSALS
            .iter()
            .find(|(name, _, _)| *name == code)
            .map(|(_, status, _)| *status)
            .unwrap_or_else(|| panic!("`{code}` is not in the refusal table"))
    };
    for row in operations() {
        let name = str_of(&row, "name");
        let errors: Vec<&str> = row["errors"]
            .as_array()
            .unwrap_or_else(|| panic!("{name} has no errors array"))
            .iter()
            .map(|e| e.as_str().expect("a refusal code"))
            .collect();
        let mut expected: BTreeSet<u16> = errors.iter().map(|e| status_of(e)).collect();
        let Value::Object(http) = &row["http"] else {
            continue;
        };
        // Every routed call can be refused by the request rules and the
        // proof; a source may fail or not implement it.
        for code in ["invalid", "unverified", "denied", "internal"] {
            expected.insert(status_of(code));
        }
        expected.insert(405);
        let method = str_of(&row["http"], "method").to_lowercase();
        let operation = &openapi["paths"][str_of(&row["http"], "path")][method.as_str()];
        assert!(
            operation.is_object(),
            "{name}: no OpenAPI operation {http:?}"
        );
        assert_eq!(
            str_of(operation, "description"),
            format!(
                "{} Grant kind: `{}`.",
                str_of(&row, "doc"),
                str_of(&row, "grant")
            ),
            "{name}: the OpenAPI description is the row's doc"
        );
        let listed: BTreeSet<u16> = operation["responses"]
            .as_object()
            .unwrap_or_else(|| panic!("{name}: no responses"))
            .keys()
            .map(|k| k.parse().unwrap_or_else(|_| panic!("{name}: status {k}")))
            .collect();
        let refusals: BTreeSet<u16> = listed.iter().copied().filter(|s| *s >= 400).collect();
        if operation["requestBody"].is_object() {
            // A body over its bound is 413 with an `invalid` envelope.
            expected.insert(413);
        }
        assert_eq!(refusals, expected, "{name}: OpenAPI refusal statuses");
        assert!(
            listed.iter().any(|s| (200..300).contains(s)),
            "{name}: no success status"
        );
    }
}
