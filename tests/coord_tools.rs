//! The shipped tool releases over the wire: each configured with
//! `--coord-tool` from its own `release.json`, applied to artifacts created
//! with `retain` and `create_artifact`, its outputs fetched and checked;
//! malformed inputs end `failed` with the tool's reason, and the runner's
//! limits still hold them. One `labd` serves every check of this file.

mod support;

use lab_coord_auth::GrantKind;
use serde_json::{json, Value};
use support::coord::{labels, Coord, Holder};
use support::Labd;

/// (name `apply` calls it by, crate directory, component stem)
const TOOLS: &[(&str, &str, &str)] = &[("jsonschema", "tool-jsonschema", "tool_jsonschema")];

fn start() -> (Labd, Coord) {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../components");
    let mut args: Vec<String> = Vec::new();
    for (name, dir, stem) in TOOLS {
        let description = root.join(dir).join("release.json");
        let text = std::fs::read_to_string(&description).unwrap();
        let parsed: Value = serde_json::from_str(&text).unwrap();
        assert_eq!(parsed["name"], *name, "the description names the tool");
        args.push("--coord-tool".into());
        args.push(format!(
            "{}={}",
            description.display(),
            support::built_component(stem).display()
        ));
    }
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let labd = Labd::start("coord-tools", &args);
    let coord = Coord::new(&labd);
    coord.project("alpha");
    (labd, coord)
}

/// One application of `tool` at `projects/alpha/applications/<name>`.
struct Run {
    name: String,
    answer: Value,
}

impl Run {
    fn apply(
        coord: &Coord,
        who: &Holder,
        name: &str,
        tool: &str,
        inputs: Value,
        recipe: Value,
    ) -> Run {
        let path = format!("projects/alpha/applications/{name}");
        let body = json!({ "operation_id": name, "path": labels(&path), "tool": tool,
            "inputs": inputs, "recipe": recipe });
        let response = coord.apply(who, &body);
        assert_eq!(
            response.status,
            201,
            "{}",
            String::from_utf8_lossy(&response.body)
        );
        Run {
            name: name.into(),
            answer: response.json(),
        }
    }

    fn completed(&self) -> &Self {
        assert_eq!(self.answer["outcome"], "completed", "{}", self.answer);
        self
    }

    /// The reason of a failed run.
    fn failed(&self) -> &str {
        assert_eq!(self.answer["outcome"], "failed", "{}", self.answer);
        self.answer["reason"].as_str().unwrap()
    }

    /// The bytes of output `ordinal` of the role at `role_index`.
    fn output(&self, coord: &Coord, role_index: usize, ordinal: usize) -> Vec<u8> {
        let space = format!(
            "projects/alpha/artifacts/{}:{role_index}.{ordinal}",
            self.name
        );
        let entries = coord.ok(
            &coord.admin(),
            &support::coord::Req::read("entries").path(&space),
            200,
        );
        let hash = entries["entries"][1]["content"]["artifact"]["bytes"]
            .as_str()
            .unwrap_or_else(|| panic!("no output at {space}: {entries}"))
            .to_string();
        let response = coord.fetch(&space, &hash);
        assert_eq!(response.status, 200);
        assert_eq!(support::name_of(&response.body), hash);
        response.body
    }
}

fn publisher(coord: &Coord) -> Holder {
    coord.holder(20, &[GrantKind::Publish, GrantKind::Read], "projects/alpha")
}

#[test]
fn the_shipped_tools_run_their_inputs_and_refuse_malformed_ones() {
    let (_labd, coord) = start();
    let who = publisher(&coord);
    jsonschema(&coord, &who);
}

fn jsonschema(coord: &Coord, who: &Holder) {
    let schema = coord.artifact(
        "projects/alpha/artifacts/schema",
        br##"{"type": "object", "required": ["id", "tags"],
              "properties": {"id": {"type": "integer", "minimum": 1},
                             "tags": {"type": "array", "items": {"$ref": "#/$defs/tag"}}},
              "additionalProperties": false,
              "$defs": {"tag": {"type": "string", "maxLength": 3}}}"##,
    );
    let good = coord.artifact(
        "projects/alpha/artifacts/good",
        br#"{"id": 7, "tags": ["a", "bc"]}"#,
    );
    let bad = coord.artifact(
        "projects/alpha/artifacts/bad",
        br#"{"id": 0, "tags": ["ok", "long"], "x": null}"#,
    );

    let run = Run::apply(
        coord,
        who,
        "valid",
        "jsonschema",
        json!({ "document": good, "schema": schema }),
        json!({}),
    );
    let report = run.completed().output(coord, 0, 0);
    assert_eq!(report, br#"{"errors":[],"valid":true}"#);

    let run = Run::apply(
        coord,
        who,
        "invalid",
        "jsonschema",
        json!({ "document": bad, "schema": schema }),
        json!({}),
    );
    let report: Value = serde_json::from_slice(&run.completed().output(coord, 0, 0)).unwrap();
    assert_eq!(report["valid"], false);
    let mut found: Vec<(String, String)> = report["errors"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| {
            assert!(e["message"].as_str().is_some_and(|m| !m.is_empty()), "{e}");
            (
                e["instance_path"].as_str().unwrap().into(),
                e["schema_path"].as_str().unwrap().into(),
            )
        })
        .collect();
    found.sort();
    let expected = [
        ("/id", "/properties/id/minimum"),
        ("/tags/1", "/properties/tags/items/$ref/maxLength"),
        ("/x", "/additionalProperties"),
    ];
    assert_eq!(found, expected.map(|(i, s)| (i.to_string(), s.to_string())));

    // Not JSON, and a keyword outside the subset: the tool's own failure.
    let garbage = coord.artifact("projects/alpha/artifacts/garbage", b"{\"id\": ");
    let run = Run::apply(
        coord,
        who,
        "garbage",
        "jsonschema",
        json!({ "document": garbage, "schema": schema }),
        json!({}),
    );
    let reason = run.failed();
    assert!(reason.starts_with("tool: document is not JSON"), "{reason}");
    let pattern = coord.artifact(
        "projects/alpha/artifacts/pattern",
        br#"{"properties": {"id": {"pattern": "^a"}}}"#,
    );
    let run = Run::apply(
        coord,
        who,
        "pattern",
        "jsonschema",
        json!({ "document": good, "schema": pattern }),
        json!({}),
    );
    assert_eq!(
        run.failed(),
        "tool: schema: unsupported keyword `pattern` at `/properties/id`"
    );
    assert!(!coord.exists("projects/alpha/artifacts/pattern:0.0"));
}
