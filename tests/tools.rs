//! Tool releases at start: `labd` configures a release only when the
//! deployment grants what its description declares and its component
//! imports nothing beyond that (contracts/coordination/TOOLS.md).

use crate::support;
use crate::support::Labd;
use sha2::{Digest, Sha256};
use std::path::Path;

fn description(effects: &str, egress: &str) -> String {
    named("t", effects, egress)
}

fn named(name: &str, effects: &str, egress: &str) -> String {
    format!(
        r#"{{"name": "{name}", "version": "1.0.0", "class": "test",
  "inputs": [{{"role": "text", "required": true}}], "outputs": [{{"role": "text"}}, {{"role": "out"}}],
  "effects": {effects}, "deterministic": true, "egress": {egress}}}"#
    )
}

/// `--coord-tool` for `release` (a built `lab_tool_*` component) with
/// `description`, written in `dir`.
fn tool(dir: &Path, release: &str, description: &str) -> String {
    let path = dir.join(format!(
        "{release}-{}.json",
        hex::encode(&Sha256::digest(description)[..4])
    ));
    std::fs::write(&path, description).unwrap();
    let component = support::built_component(&format!("tool_{release}"));
    format!("{}={}", path.display(), component.display())
}

fn digest_of(release: &str) -> String {
    let wasm = std::fs::read(support::built_component(&format!("tool_{release}"))).unwrap();
    format!("sha256:{}", hex::encode(Sha256::digest(&wasm)))
}

fn assert_names(stderr: &str, words: &[&str]) {
    for word in words {
        assert!(stderr.contains(word), "`{word}` missing from: {stderr}");
    }
}

#[test]
fn a_release_reaching_beyond_the_tool_world_stops_the_start() {
    let dir = support::temp_dir("tool-reach-files");
    let reach = tool(&dir, "reach", &description("[]", "[]"));
    let stderr = support::refused_start("tool-reach", &["--coord-tool".into(), reach]);
    assert_names(
        &stderr,
        &[
            &digest_of("reach"),
            "imports `wasi:",
            "outside the tool world",
        ],
    );
}

#[test]
fn an_effect_neither_declared_nor_allowed_stops_the_start() {
    let dir = support::temp_dir("tool-effect-files");
    let effects = digest_of("effects");
    // The component imports the clock; the description declares nothing.
    let undeclared = tool(&dir, "effects", &description("[]", "[]"));
    let stderr = support::refused_start(
        "tool-undeclared",
        &[
            "--coord-tool".into(),
            undeclared,
            "--tool-effects".into(),
            "clock,random".into(),
        ],
    );
    assert_names(
        &stderr,
        &[
            &effects,
            "lab:tool/clock",
            "effect `clock`",
            "does not declare",
        ],
    );
    // Declared, but the deployment allows only the clock.
    let declared = tool(
        &dir,
        "effects",
        &description(r#"["clock", "random"]"#, "[]"),
    );
    let stderr = support::refused_start(
        "tool-not-allowed",
        &[
            "--coord-tool".into(),
            declared,
            "--tool-effects".into(),
            "clock".into(),
        ],
    );
    assert_names(&stderr, &[&effects, "effect `random`", "does not allow"]);
    // An effect this host does not know.
    let unknown = tool(&dir, "upper", &description(r#"["network"]"#, "[]"));
    let stderr = support::refused_start("tool-unknown-effect", &["--coord-tool".into(), unknown]);
    assert_names(
        &stderr,
        &[&digest_of("upper"), "effect `network`", "does not know"],
    );
    // A deployment setting naming an unknown effect.
    let stderr = support::refused_start(
        "tool-unknown-allowed",
        &["--tool-effects".into(), "network".into()],
    );
    assert_names(&stderr, &["--tool-effects", "`network`"]);
}

#[test]
fn a_release_declaring_egress_stops_the_start() {
    let dir = support::temp_dir("tool-egress-files");
    let egress = tool(&dir, "upper", &description("[]", r#"["example.org:443"]"#));
    let stderr = support::refused_start("tool-egress", &["--coord-tool".into(), egress]);
    assert_names(
        &stderr,
        &[
            &digest_of("upper"),
            "egress",
            "example.org:443",
            "no network",
        ],
    );
}

#[test]
fn granted_releases_start_and_serve() {
    let dir = support::temp_dir("tool-granted-files");
    let upper = tool(&dir, "upper", &named("upper", "[]", "[]"));
    let effects = tool(
        &dir,
        "effects",
        &named("effects", r#"["clock", "random"]"#, "[]"),
    );
    let labd = Labd::start(
        "tool-granted",
        &[
            "--coord-tool",
            &upper,
            "--coord-tool",
            &effects,
            "--tool-effects",
            "clock,random",
        ],
    );
    // Both components are retained; the services answer.
    assert_eq!(
        labd.bytes()
            .stat(&[&digest_of("upper"), &digest_of("effects")])
            .len(),
        2
    );
}

/// The text report of the probe's `POST /tool/run`.
fn run(
    client: &support::Client,
    release: &str,
    recipe: &str,
    inputs: &[(&str, &str, &[u8])],
) -> (u16, String) {
    let mut body = format!("{recipe}\n");
    for (role, type_, bytes) in inputs {
        body.push_str(&format!(
            "{role} {type_} {}\n",
            hex::encode(Sha256::digest(bytes))
        ));
    }
    let response = client.post(&format!("/tool/run?key={release}"), None, body.as_bytes());
    (response.status, String::from_utf8(response.body).unwrap())
}

/// Runs go through the platform interface (the probe stands in for the
/// coordination service); each hostile run ends `failed` with its limit
/// named, other requests are served while one runs, and the next run
/// completes.
#[test]
fn hostile_runs_fail_at_their_limit_and_leave_the_host_serving() {
    let dir = support::temp_dir("tool-runs-files");
    let upper = tool(&dir, "upper", &named("upper", "[]", "[]"));
    let hostile = tool(&dir, "hostile", &named("hostile", "[]", "[]"));
    let probe = support::built_component("probe");
    let probe = probe.to_str().unwrap();
    let labd = Labd::start(
        "tool-runs",
        &[
            "--coord-component",
            probe,
            "--bytes-component",
            probe,
            "--coord-tool",
            &upper,
            "--coord-tool",
            &hostile,
            "--tool-memory-mib",
            "16",
            "--tool-fuel",
            "1000000000000000",
            "--tool-wall-ms",
            "3000",
            "--tool-max-outputs",
            "4",
            "--tool-max-output-bytes",
            "1048576",
            "--tool-concurrent-runs",
            "1",
            "--tool-run-wait-ms",
            "100",
        ],
    );
    let (coord, bytes) = (labd.coord(), labd.bytes());
    let (upper, hostile) = (digest_of("upper"), digest_of("hostile"));
    let text = b"hello, tools";
    assert_eq!(bytes.post("/blob/put", None, text).status, 200);
    let completes = || {
        let (status, report) = run(&coord, &upper, "{}", &[("text", "text/plain", text)]);
        assert_eq!(status, 200, "{report}");
        let mut lines = report.lines();
        assert_eq!(lines.next(), Some("completed"), "{report}");
        let output = hex::encode(Sha256::digest(b"HELLO, TOOLS"));
        assert_eq!(
            lines.next().unwrap(),
            format!("output text 0 text/plain {output} 12")
        );
        let stored = labd
            .blobs_dir()
            .join("sha256")
            .join(&output[..2])
            .join(&output);
        assert_eq!(std::fs::read(stored).unwrap(), b"HELLO, TOOLS");
        let used: Vec<u64> = lines
            .next()
            .unwrap()
            .split(' ')
            .skip(1)
            .map(|n| n.parse().unwrap())
            .collect();
        assert!(used.iter().all(|n| *n > 0), "{report}");
        assert_eq!(
            lines.next(),
            Some("limits 1000000000000000 16777216 3000 4 1048576")
        );
    };
    completes();

    for (recipe, limit) in [
        ("\"memory\"", "memory"),
        ("\"outputs\"", "outputs"),
        ("\"output-bytes\"", "output-bytes"),
    ] {
        let committed = labd.committed_blobs();
        let (status, report) = run(&coord, &hostile, recipe, &[]);
        assert_eq!(status, 200, "{report}");
        assert_eq!(
            report.lines().next(),
            Some(format!("failed: limit: {limit}").as_str())
        );
        assert_eq!(
            (labd.committed_blobs(), labd.staging_files()),
            (committed, 0)
        );
        completes();
    }

    // An endless loop holds the only run slot until its wall-clock limit.
    let looping = {
        let coord = labd.coord();
        let hostile = hostile.clone();
        std::thread::spawn(move || run(&coord, &hostile, "\"loop\"", &[]))
    };
    support::eventually("the loop holds the run slot", || {
        let (status, report) = run(&coord, &hostile, "\"fail\"", &[]);
        assert!(status == 200 || status == 503, "{status} {report}");
        status == 503 && report == "unavailable"
    });
    // Meanwhile other requests are served.
    assert_eq!(coord.get("/ok").status, 200);
    assert_eq!(bytes.post("/blob/put", None, b"meanwhile").status, 200);
    assert!(!looping.is_finished());
    let (status, report) = looping.join().unwrap();
    assert_eq!(
        (status, report.lines().next()),
        (200, Some("failed: limit: wall-time"))
    );
    completes();

    // Only the coordination service may run tools.
    let (status, report) = run(&bytes, &upper, "{}", &[("text", "text/plain", text)]);
    assert_eq!(
        (status, report.as_str()),
        (403, "the bytes service may not run tools")
    );
    // Runs that cannot start.
    let (status, report) = run(&coord, &format!("sha256:{}", "0".repeat(64)), "{}", &[]);
    assert_eq!((status, report.as_str()), (404, "unknown-release"));
    let (status, report) = run(
        &coord,
        &upper,
        "{}",
        &[("text", "text/plain", b"never stored")],
    );
    assert_eq!((status, report.as_str()), (400, "missing-input text"));
}
