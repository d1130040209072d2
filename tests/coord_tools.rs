//! The shipped tool releases over the wire: each configured with
//! `--coord-tool` from its own `release.json`, applied to artifacts created
//! with `retain` and `create_artifact`, its outputs fetched and checked;
//! malformed inputs end `failed` with the tool's reason, and the runner's
//! limits still hold them. One `labd` serves every check of this file.

use crate::support;
use crate::support::coord::{labels, Coord, Holder};
use crate::support::Labd;
use lab_coord_auth::GrantKind;
use serde_json::{json, Value};

/// (name `apply` calls it by, crate directory, component stem)
const TOOLS: &[(&str, &str, &str)] = &[
    ("jsonschema", "tool-jsonschema", "tool_jsonschema"),
    ("unpack", "tool-unpack", "tool_unpack"),
    ("profile", "tool-profile", "tool_profile"),
];

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
    unpack(&coord, &who);
    profile(&coord, &who);
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

/// A ustar archive of `(path, type flag, data)`, two zero blocks after.
fn tar(members: &[(&str, u8, &[u8])]) -> Vec<u8> {
    let mut out = Vec::new();
    for (path, flag, data) in members {
        let mut h = vec![0u8; 512];
        h[..path.len()].copy_from_slice(path.as_bytes());
        h[100..107].copy_from_slice(b"0000600");
        h[124..135].copy_from_slice(format!("{:011o}", data.len()).as_bytes());
        h[156] = *flag;
        h[257..265].copy_from_slice(b"ustar\x0000");
        h[148..156].copy_from_slice(b"        ");
        let sum: u32 = h.iter().map(|&b| u32::from(b)).sum();
        h[148..155].copy_from_slice(format!("{sum:06o}\0").as_bytes());
        out.extend(h);
        out.extend_from_slice(data);
        out.resize(out.len().div_ceil(512) * 512, 0);
    }
    out.extend([0u8; 1024]);
    out
}

/// `data` as gzip of stored (uncompressed) deflate blocks: what the
/// release must inflate, without a compressor in the tests.
fn gzip_stored(data: &[u8]) -> Vec<u8> {
    let mut out = vec![0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 0, 255];
    let blocks: Vec<&[u8]> = data.chunks(65_535).collect();
    for (i, block) in blocks.iter().enumerate() {
        out.push(u8::from(i + 1 == blocks.len()));
        let len = block.len() as u16;
        out.extend(len.to_le_bytes());
        out.extend((!len).to_le_bytes());
        out.extend_from_slice(block);
    }
    let mut crc = !0u32;
    for &b in data {
        crc ^= u32::from(b);
        for _ in 0..8 {
            crc = (crc >> 1) ^ (0xedb8_8320 & (crc & 1).wrapping_neg());
        }
    }
    out.extend((!crc).to_le_bytes());
    out.extend((data.len() as u32).to_le_bytes());
    out
}

fn unpack(coord: &Coord, who: &Holder) {
    let archive = gzip_stored(&tar(&[
        ("docs/a.txt", b'0', b"alpha\n"),
        ("docs", b'5', b""),
        ("link", b'2', b""),
        ("../escape", b'0', b"no"),
        ("b.bin", b'0', &[0u8, 1, 2, 255]),
    ]));
    let input = coord.artifact("projects/alpha/artifacts/archive", &archive);
    let run = Run::apply(
        coord,
        who,
        "unpack",
        "unpack",
        json!({ "archive": input }),
        json!({}),
    );
    run.completed();
    // Roles in the description's order: `index` is 0, `member` is 1.
    assert_eq!(run.output(coord, 1, 0), b"alpha\n");
    assert_eq!(run.output(coord, 1, 1), [0u8, 1, 2, 255]);
    assert!(!coord.exists("projects/alpha/artifacts/unpack:1.2"));
    let index: Value = serde_json::from_slice(&run.output(coord, 0, 0)).unwrap();
    let members = index["members"].as_array().unwrap();
    let summary: Vec<(&str, &str, Option<&str>)> = members
        .iter()
        .map(|m| {
            (
                m["path"].as_str().unwrap(),
                m["type"].as_str().unwrap(),
                m["skipped"].as_str(),
            )
        })
        .collect();
    assert_eq!(
        summary,
        [
            ("docs/a.txt", "file", None),
            ("docs", "directory", Some("directory")),
            ("link", "symlink", Some("link to ``")),
            ("../escape", "file", Some("`..` in path")),
            ("b.bin", "file", None),
        ]
    );
    let hash = support::name_of(b"alpha\n");
    assert_eq!(members[0]["sha256"], hash.trim_start_matches("sha256:"));
    assert_eq!(members[0]["mode"], "0600");
    assert_eq!(members[4]["ordinal"], 1);
    assert_eq!(members[4]["size"], 4);

    // Not an archive: the tool's reason, no output.
    let text = coord.artifact("projects/alpha/artifacts/text", &[b'x'; 600]);
    let run = Run::apply(
        coord,
        who,
        "not-tar",
        "unpack",
        json!({ "archive": text }),
        json!({}),
    );
    let reason = run.failed();
    assert!(
        reason.starts_with("tool: member 1: header checksum"),
        "{reason}"
    );
    assert!(!coord.exists("projects/alpha/artifacts/not-tar:0.0"));

    // A bomb of more members than a run may output: the runner's limit
    // ends it, naming the limit.
    let names: Vec<String> = (0..130).map(|i| format!("m{i}")).collect();
    let bomb: Vec<(&str, u8, &[u8])> = names.iter().map(|n| (n.as_str(), b'0', &b""[..])).collect();
    let bomb = coord.artifact("projects/alpha/artifacts/bomb", &tar(&bomb));
    let run = Run::apply(
        coord,
        who,
        "bomb",
        "unpack",
        json!({ "archive": bomb }),
        json!({}),
    );
    let reason = run.failed();
    assert!(reason.starts_with("limit: outputs"), "{reason}");
    assert!(!coord.exists("projects/alpha/artifacts/bomb:1.0"));
}

fn profile(coord: &Coord, who: &Holder) {
    let table = coord.artifact(
        "projects/alpha/artifacts/table",
        b"city;pop;note\r\nOslo;709000;\"cold; dark\"\r\nLima;10000000;\r\n",
    );
    let recipe = json!({ "delimiter": ";" });
    let run = Run::apply(
        coord,
        who,
        "profile",
        "profile",
        json!({ "table": table }),
        recipe,
    );
    let profile: Value = serde_json::from_slice(&run.completed().output(coord, 0, 0)).unwrap();
    assert_eq!(
        profile,
        json!({"rows": 2, "columns": [
            {"name": "city", "count": 2, "nulls": 0, "distinct": 2, "distinct_exact": true,
             "type": "text", "min_length": 4, "max_length": 4},
            {"name": "pop", "count": 2, "nulls": 0, "distinct": 2, "distinct_exact": true,
             "type": "integer", "min": 709000, "max": 10000000, "mean": 5354500.0},
            {"name": "note", "count": 1, "nulls": 1, "distinct": 1, "distinct_exact": true,
             "type": "text", "min_length": 10, "max_length": 10},
        ]})
    );

    // An unclosed quote, a recipe member it does not know: the tool's reason.
    let broken = coord.artifact("projects/alpha/artifacts/broken", b"a,b\n1,\"open\n");
    let run = Run::apply(
        coord,
        who,
        "broken",
        "profile",
        json!({ "table": broken }),
        json!({}),
    );
    assert_eq!(run.failed(), "tool: line 2: a quoted field is not closed");
    let run = Run::apply(
        coord,
        who,
        "quote",
        "profile",
        json!({ "table": table }),
        json!({ "quote": "'" }),
    );
    assert_eq!(run.failed(), "tool: recipe: unknown member `quote`");
    assert!(!coord.exists("projects/alpha/artifacts/quote:0.0"));
}
