//! The start-up cost of a tool run: the trivial release (`upper`, one
//! 12-byte input in, one output out), compiled and cached at start, run
//! through `tools.run` by the probe component standing in for the
//! coordination service (`POST /tool/run`).
//!
//! - figure: the run's own wall time as the runner reports it
//!   (instantiate the cached release into a fresh store, run it, until
//!   `run` returns; the outputs' commit is not in it), median;
//! - baseline: a whole request to the same probe answered without a run
//!   (`GET /ok`: HTTP on loopback and a fresh service instance), median,
//!   on the same connection in alternating rounds;
//! - and the `POST /tool/run` round trip against the same baseline: what
//!   a run adds to a request, its output's commit (an fsync) included.

use crate::client::{self, Conn};
use crate::labd::Labd;
use crate::measure::{progress, verdict, Row};
use anyhow::{ensure, Context, Result};
use sha2::{Digest, Sha256};
use std::ffi::OsString;
use std::path::Path;
use std::time::{Duration, Instant};

/// Runs per round, and rounds (alternating with the baseline).
const PER_ROUND: usize = 200;
const ROUNDS: usize = 5;
/// Target of a run's start-up, in µs.
const START_UP_TARGET_US: f64 = 1000.0;
const INPUT: &[u8] = b"hello, tools";

/// The built components next to `labd`'s release build.
fn built(binary: &Path) -> Result<std::path::PathBuf> {
    Ok(binary
        .parent()
        .context("the labd path has no directory")?
        .join("../components/wasm32-wasip2/release"))
}

/// The `--coord-tool` value configuring the deterministic `upper` release
/// (description written into `dir`), and the release's digest.
pub fn upper_tool(binary: &Path, dir: &Path) -> Result<(OsString, String)> {
    let upper = built(binary)?.join("lab_tool_upper.wasm");
    let wasm = std::fs::read(&upper).with_context(|| format!("read {}", upper.display()))?;
    let release = format!("sha256:{}", hex(&Sha256::digest(&wasm)));
    std::fs::create_dir_all(dir)?;
    let description = dir.join("upper.json");
    std::fs::write(
        &description,
        r#"{"name": "upper", "version": "1", "class": "bench",
  "inputs": [{"role": "text", "required": true}], "outputs": [{"role": "text"}],
  "effects": [], "egress": [], "deterministic": true}"#,
    )?;
    let mut tool = OsString::from(description);
    tool.push("=");
    tool.push(&upper);
    Ok((tool, release))
}

/// The releases the tools `labd` runs, by component digest.
#[derive(Debug, Clone)]
pub struct Releases {
    pub upper: String,
    pub jsonschema: String,
}

/// A `labd` whose coordination component is the probe, with `upper` and
/// the shipped `jsonschema` configured as releases.
pub fn start(binary: &Path, scratch: &Path) -> Result<(Labd, Releases)> {
    let built = built(binary)?;
    let probe = built.join("lab_probe.wasm");
    let (upper, upper_digest) = upper_tool(binary, scratch)?;
    let description = scratch.join("jsonschema.json");
    std::fs::write(&description, JSONSCHEMA_RELEASE)?;
    let component = built.join("lab_tool_jsonschema.wasm");
    let wasm =
        std::fs::read(&component).with_context(|| format!("read {}", component.display()))?;
    let mut jsonschema = OsString::from(description);
    jsonschema.push("=");
    jsonschema.push(&component);
    let extra = [
        "--coord-component".into(),
        probe.into_os_string(),
        "--coord-tool".into(),
        upper,
        "--coord-tool".into(),
        jsonschema,
    ];
    let releases = Releases {
        upper: upper_digest,
        jsonschema: format!("sha256:{}", hex(&Sha256::digest(&wasm))),
    };
    Ok((Labd::start_with(binary, scratch, &extra)?, releases))
}

/// The shipped validator's description.
const JSONSCHEMA_RELEASE: &str = include_str!("../../components/tool-jsonschema/release.json");

pub async fn run(coord: std::net::SocketAddr, release: &str) -> Result<Vec<Row>> {
    progress("tool run start-up");
    let mut conn = Conn::connect(coord).await?;
    let put = client::post_head(coord, "/blob/put", "application/octet-stream", INPUT.len());
    let stored = conn.exchange(&put, INPUT, false, None).await?;
    ensure!(
        stored.status == 200,
        "the input was not stored: {}",
        stored.status
    );
    let body = format!("{{}}\ntext text/plain {}\n", hex(&Sha256::digest(INPUT)));
    let run_head = client::post_head(
        coord,
        &format!("/tool/run?key={release}"),
        "text/plain",
        body.len(),
    );
    let ok_head = client::get_head(coord, "/ok");

    let mut wall_us = Vec::new();
    let mut run_us = Vec::new();
    let mut ok_us = Vec::new();
    // One unmeasured round warms both paths.
    for round in 0..=ROUNDS {
        let measured = round > 0;
        for _ in 0..PER_ROUND {
            let mut report = Vec::new();
            let started = Instant::now();
            let answer = conn
                .exchange(&run_head, body.as_bytes(), false, Some(&mut report))
                .await?;
            let took = started.elapsed();
            let report = String::from_utf8(report).context("the report is not text")?;
            ensure!(
                answer.status == 200 && report.starts_with("completed"),
                "the run did not complete: {} {report}",
                answer.status
            );
            if measured {
                run_us.push(micros(took));
                wall_us.push(reported_wall_us(&report)?);
            }
        }
        for _ in 0..PER_ROUND {
            let started = Instant::now();
            let answer = conn.exchange(&ok_head, &[], false, None).await?;
            let took = started.elapsed();
            ensure!(answer.status == 200, "GET /ok answered {}", answer.status);
            if measured {
                ok_us.push(micros(took));
            }
        }
    }
    let (wall, run, ok) = (
        median(&mut wall_us),
        median(&mut run_us),
        median(&mut ok_us),
    );
    let runs = PER_ROUND * ROUNDS;
    Ok(vec![
        Row::new(
            format!(
                "tool run start-up: cached release, 12 B in, instantiate + run (median of {runs})"
            ),
            format!("{wall:.0} µs"),
            format!("{ok:.0} µs (probe GET /ok round trip)"),
            format!("{:.2}x", wall / ok),
            verdict(
                &format!("< {START_UP_TARGET_US:.0} µs"),
                wall < START_UP_TARGET_US,
            ),
        ),
        Row::new(
            format!("POST /tool/run round trip, output committed (median of {runs})"),
            format!("{run:.0} µs"),
            format!("{ok:.0} µs (probe GET /ok round trip)"),
            format!("{:.2}x", run / ok),
            String::from("-"),
        ),
    ])
}

/// The `wall-us` of the report's `used FUEL PEAK-MEMORY WALL-US` line.
pub fn reported_wall_us(report: &str) -> Result<f64> {
    let used = report
        .lines()
        .find_map(|line| line.strip_prefix("used "))
        .context("the report has no `used` line")?;
    let wall = used.split(' ').nth(2).context("the `used` line is short")?;
    Ok(wall.parse::<u64>().context("wall-us")? as f64)
}

pub fn micros(d: Duration) -> f64 {
    d.as_secs_f64() * 1e6
}

pub fn median(values: &mut [f64]) -> f64 {
    values.sort_by(f64::total_cmp);
    values[values.len() / 2]
}

pub fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}
