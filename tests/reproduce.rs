//! `labctl reproduce-application` against a real `labd`: an application
//! applied over the wire, then verified, its release fetched at its
//! release space, its inputs at theirs, run again locally in the same
//! sandbox and every output compared with the attested one. A
//! non-deterministic release reports its mismatch; an attestation that
//! does not verify, or a component that is not the attested executable,
//! stops before anything runs; a narrower grant cannot read the release.
//!
//! `labctl` is the binary built beside `labd` (`cargo test --workspace`
//! builds both; alone, `cargo build -p labctl` first).

use crate::support;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use crate::support::coord::{labels, Coord, Holder, Req};
use crate::support::Labd;
use lab_coord_auth::{GrantKind, Principal};
use serde_json::{json, Value};

const UPPER: &str = r#"{"name": "upper", "version": "1.0.0", "class": "transform",
  "inputs": [{"role": "text", "required": true}], "outputs": [{"role": "text"}],
  "effects": [], "deterministic": true, "egress": []}"#;

const EFFECTS: &str = r#"{"name": "effects", "version": "1.0.0", "class": "test",
  "inputs": [], "outputs": [{"role": "out"}], "effects": ["clock", "random"],
  "deterministic": false, "egress": []}"#;

/// `labd` with `upper`, `effects` and the shipped JSON Schema validator,
/// and a project `alpha`.
fn start(name: &str) -> (Labd, Coord, PathBuf) {
    let dir = support::temp_dir(&format!("{name}-files"));
    let mut args: Vec<String> = vec!["--tool-effects".into(), "clock,random".into()];
    let shipped = Path::new(env!("CARGO_MANIFEST_DIR")).join("../components/tool-jsonschema");
    for (tool, description, component) in [
        ("upper", dir.join("upper.json"), "tool_upper"),
        ("effects", dir.join("effects.json"), "tool_effects"),
        (
            "jsonschema",
            shipped.join("release.json"),
            "tool_jsonschema",
        ),
    ] {
        match tool {
            "upper" => std::fs::write(&description, UPPER).unwrap(),
            "effects" => std::fs::write(&description, EFFECTS).unwrap(),
            _ => {}
        }
        args.push("--coord-tool".into());
        args.push(format!(
            "{}={}",
            description.display(),
            support::built_component(component).display()
        ));
    }
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let labd = Labd::start(name, &args);
    let coord = Coord::new(&labd);
    coord.project("alpha");
    (labd, coord, dir)
}

/// `labctl` as built beside `labd`.
fn labctl_binary() -> PathBuf {
    let binary = Path::new(env!("CARGO_BIN_EXE_labd")).with_file_name("labctl");
    assert!(
        binary.exists(),
        "{} is not built: cargo build -p labctl",
        binary.display()
    );
    binary
}

/// A key file and grant file for `who`, as labctl reads them.
fn credentials(dir: &Path, name: &str, who: &Holder) -> (PathBuf, PathBuf) {
    let key = dir.join(format!("{name}.key"));
    let grants = dir.join(format!("{name}.grants.json"));
    std::fs::write(
        &key,
        format!("ed25519-secret:{}\n", hex(&who.key.to_bytes())),
    )
    .unwrap();
    let wire: Vec<Value> = who.grants.iter().map(|g| g.to_json()).collect();
    std::fs::write(&grants, serde_json::to_vec(&wire).unwrap()).unwrap();
    (key, grants)
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// `labctl reproduce-application` of the application at `path`, signed by
/// the holder whose files `credentials` wrote, trusting `root`.
fn reproduce(
    coord: &Coord,
    (key, grants): &(PathBuf, PathBuf),
    path: &str,
    root: &str,
    extra: &[&str],
) -> (i32, String) {
    let mut command = Command::new(labctl_binary());
    for var in [
        "LAB_KEY",
        "LAB_GRANTS",
        "LAB_ENDPOINT",
        "LAB_AUDIENCE",
        "LAB_WORLD",
    ] {
        command.env_remove(var);
    }
    command
        .arg("reproduce-application")
        .args(["--root", root])
        .arg("--key")
        .arg(key)
        .arg("--grants")
        .arg(grants)
        .args(["--endpoint", &coord.audience])
        .args(extra);
    for label in labels(path) {
        command.args(["--path", &label]);
    }
    let output: Output = command.output().expect("run labctl");
    let stdout = String::from_utf8(output.stdout).unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    (
        output.status.code().expect("labctl exited by a signal"),
        format!("{stdout}{stderr}"),
    )
}

/// Applies `tool` at `projects/alpha/applications/<name>`; answers the
/// completed answer.
fn apply(coord: &Coord, name: &str, tool: &str, inputs: Value, recipe: Value) -> Value {
    let path = format!("projects/alpha/applications/{name}");
    let body = json!({ "operation_id": name, "path": labels(&path), "tool": tool,
                       "inputs": inputs, "recipe": recipe });
    let response = coord.apply(&coord.admin(), &body);
    assert_eq!(
        response.status,
        201,
        "{}",
        String::from_utf8_lossy(&response.body)
    );
    let answer = response.json();
    assert_eq!(answer["outcome"], "completed", "{answer}");
    answer
}

/// The lines of a report that start with `prefix`.
fn lines<'a>(report: &'a str, prefix: &str) -> Vec<&'a str> {
    report.lines().filter(|l| l.starts_with(prefix)).collect()
}

/// The type (descriptor) of the artifact whose content occurrence is
/// `entry`.
fn text_type(coord: &Coord, entry: &Value) -> String {
    let get = Req::read("get")
        .string("root_id", entry["root_id"].as_str().unwrap())
        .string("space_id", entry["space_id"].as_str().unwrap())
        .int("position", entry["position"].as_i64().unwrap());
    let read = coord.ok(&coord.admin(), &get, 200);
    read["entry"]["content"]["artifact"]["type"]
        .as_str()
        .unwrap()
        .to_string()
}

fn root_of(coord: &Coord) -> String {
    Principal::of(&coord.root).to_string()
}

#[test]
fn a_deterministic_application_reproduces_byte_for_byte() {
    let (_labd, coord, dir) = start("reproduce-same");
    let admin = credentials(&dir, "admin", &coord.admin());
    let root = root_of(&coord);

    let text = coord.artifact("projects/alpha/artifacts/a1", b"hello, world\n");
    let answer = apply(
        &coord,
        "upper-1",
        "upper",
        json!({ "text": text }),
        json!({ "mode": "all" }),
    );
    let (code, report) = reproduce(
        &coord,
        &admin,
        "projects/alpha/applications/upper-1",
        &root,
        &[],
    );
    assert_eq!(code, 0, "{report}");
    let output = support::name_of(b"HELLO, WORLD\n");
    assert_eq!(answer["outputs"]["text"]["bytes"], output);
    assert!(report.contains("ok    signature\n"), "{report}");
    assert!(report.contains("ok    executable\n"), "{report}");
    assert!(
        report.contains("ok    release: deterministic: every output must match\n"),
        "{report}"
    );
    assert!(report.contains("ok    outcome\n"), "{report}");
    // Upper gives its output its input's type: the artifact's descriptor.
    let output_line = format!(
        "ok    output text/0: match {output} (13 bytes, {})",
        text_type(&coord, &text)
    );
    assert_eq!(lines(&report, "ok    output "), [output_line], "{report}");
    assert!(lines(&report, "FAIL").is_empty(), "{report}");

    // A shipped release, two inputs and a JSON report, byte for byte too.
    let schema = coord.artifact(
        "projects/alpha/artifacts/schema",
        br#"{"type": "object", "required": ["id"], "properties": {"id": {"type": "integer"}}}"#,
    );
    let document = coord.artifact("projects/alpha/artifacts/doc", br#"{"id": "seven"}"#);
    let answer = apply(
        &coord,
        "schema-1",
        "jsonschema",
        json!({ "document": document, "schema": schema }),
        json!({}),
    );
    let (code, report) = reproduce(
        &coord,
        &admin,
        "projects/alpha/applications/schema-1",
        &root,
        &[],
    );
    assert_eq!(code, 0, "{report}");
    let matched = lines(&report, "ok    output report/0: match ");
    assert_eq!(matched.len(), 1, "{report}");
    assert!(
        matched[0].contains(answer["outputs"]["report"]["bytes"].as_str().unwrap()),
        "{report}"
    );
}

#[test]
fn a_non_deterministic_release_reproduces_with_its_mismatch_reported() {
    let (_labd, coord, dir) = start("reproduce-random");
    let admin = credentials(&dir, "admin", &coord.admin());
    let answer = apply(&coord, "effects-1", "effects", json!({}), json!(null));
    let attested = answer["outputs"]["out"]["bytes"].as_str().unwrap();
    let (code, report) = reproduce(
        &coord,
        &admin,
        "projects/alpha/applications/effects-1",
        &root_of(&coord),
        &[],
    );
    assert_eq!(code, 5, "{report}");
    assert!(
        report.contains("ok    release: not deterministic"),
        "{report}"
    );
    assert!(report.contains("ok    outcome\n"), "{report}");
    let mismatch = lines(
        &report,
        "FAIL  output out/0: mismatch (possible: the release is not deterministic): attested ",
    );
    assert_eq!(mismatch.len(), 1, "{report}");
    assert!(mismatch[0].contains(attested), "{report}");
    assert!(
        report.contains("1 of 5 checks of the reproduction failed"),
        "{report}"
    );
}

#[test]
fn what_does_not_verify_or_is_not_the_attested_executable_never_runs() {
    let (labd, coord, dir) = start("reproduce-refused");
    let admin = credentials(&dir, "admin", &coord.admin());
    let root = root_of(&coord);
    let text = coord.artifact("projects/alpha/artifacts/a1", b"hello\n");
    apply(
        &coord,
        "upper-1",
        "upper",
        json!({ "text": text }),
        json!({}),
    );
    let app = "projects/alpha/applications/upper-1";
    let (code, report) = reproduce(&coord, &admin, app, &root, &[]);
    assert_eq!(code, 0, "the setup reproduces: {report}");

    // Another component than the attested executable: refused, not run.
    let other = support::built_component("tool_hostile");
    let (code, report) = reproduce(
        &coord,
        &admin,
        app,
        &root,
        &["--component", other.to_str().unwrap()],
    );
    assert_eq!(code, 5, "{report}");
    assert!(report.contains("ok    resolution\n"), "{report}");
    let refused = lines(&report, "FAIL  executable: the component is sha256:");
    assert_eq!(refused.len(), 1, "{report}");
    assert!(refused[0].contains(", not the attested executable sha256:"));
    assert!(!report.contains("outcome"), "{report}");
    // The attested component given as a file runs as the fetched one does.
    let own = support::built_component("tool_upper");
    let (code, report) = reproduce(
        &coord,
        &admin,
        app,
        &root,
        &["--component", own.to_str().unwrap()],
    );
    assert_eq!(code, 0, "{report}");

    // An attestation under another root does not verify: nothing runs.
    let stranger = Principal::of(&support::coord::key(99)).to_string();
    let (code, report) = reproduce(&coord, &admin, app, &stranger, &[]);
    assert_eq!(code, 5, "{report}");
    assert!(report.contains("FAIL  signature"), "{report}");
    assert!(!report.contains("executable"), "{report}");

    // A reader of the project only cannot read the release's executable:
    // `get` of the release occurrence is denied, before anything runs.
    let reader = coord.holder(30, &[GrantKind::Read], "projects/alpha");
    let narrow = credentials(&dir, "reader", &reader);
    let (code, report) = reproduce(&coord, &narrow, app, &root, &[]);
    assert_eq!(code, 6, "{report}");
    assert!(report.contains("denied"), "{report}");
    assert!(!report.contains("executable"), "{report}");

    // The attestation's bytes altered where labd keeps them: the service
    // will not serve them whole, so verification fails and nothing runs.
    let entries = coord.ok(
        &coord.admin(),
        &Req::read("entries").path(app).int("limit", 128),
        200,
    );
    let attestation = entries["entries"]
        .as_array()
        .unwrap()
        .iter()
        .find_map(|e| e["result"]["attestation"].as_str())
        .unwrap()
        .to_string();
    let file = labd.blob_file(&attestation);
    let mut bytes = std::fs::read(&file).unwrap();
    bytes[10] ^= 1;
    let mut permissions = std::fs::metadata(&file).unwrap().permissions();
    #[allow(clippy::permissions_set_readonly_false)]
    permissions.set_readonly(false);
    std::fs::set_permissions(&file, permissions).unwrap();
    std::fs::write(&file, &bytes).unwrap();
    let (code, report) = reproduce(&coord, &admin, app, &root, &[]);
    assert_eq!(code, 5, "{report}");
    assert!(
        report.contains(&format!(
            "FAIL  signature: the attestation {attestation} could not be fetched"
        )),
        "{report}"
    );
    assert!(!report.contains("executable"), "{report}");
}

#[test]
fn fetch_at_a_release_space_serves_its_executable_to_its_readers_only() {
    let (_labd, coord, _dir) = start("reproduce-fetch");
    let text = coord.artifact("projects/alpha/artifacts/a1", b"x\n");
    let answer = apply(
        &coord,
        "upper-1",
        "upper",
        json!({ "text": text }),
        json!({}),
    );
    let release = &answer["release"];
    let get = Req::read("get")
        .string("root_id", release["root_id"].as_str().unwrap())
        .string("space_id", release["space_id"].as_str().unwrap())
        .int("position", release["position"].as_i64().unwrap());
    let space = coord.ok(&coord.admin(), &get, 200)["space"].clone();
    let path: Vec<&str> = space["path"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| l.as_str().unwrap())
        .collect();
    assert_eq!(path[..3], ["tools", "upper", "releases"]);
    let path = path.join("/");
    let wasm = std::fs::read(support::built_component("tool_upper")).unwrap();
    let executable = support::name_of(&wasm);

    let served = coord.fetch(&path, &executable);
    assert_eq!(served.status, 200);
    assert_eq!(served.body, wasm);
    // Nothing else: another release's component is not named here.
    let hostile = std::fs::read(support::built_component("tool_effects")).unwrap();
    coord
        .fetch(&path, &support::name_of(&hostile))
        .assert_error(409, "unresolved");
    // A reader of the project alone may not read the release space.
    let reader = coord.holder(30, &[GrantKind::Read], "projects/alpha");
    coord
        .send(
            &reader,
            &Req::read("fetch").path(&path).string("bytes", &executable),
        )
        .assert_error(403, "denied");
}
