//! The JSON Schema validator release's throughput inside the sandbox,
//! against the same validator (`lab-jsonschema`) natively in this process,
//! on the same document and schema, in alternating rounds.
//!
//! - figure: document bytes over the run's own wall time as the runner
//!   reports it (instantiate, read both inputs across the boundary, parse,
//!   check the schema, validate, write the report), median;
//! - baseline: the same steps natively (parse both, check, validate,
//!   serialize the report), median;
//! - ratio: sandbox throughput over native throughput; target at least
//!   50%.

use crate::client::{self, Conn};
use crate::measure::{progress, verdict, Row};
use crate::tools::{hex, median, micros, reported_wall_us};
use anyhow::{ensure, Context, Result};
use lab_jsonschema::Schema;
use serde_json::{json, Value};
use sha2::{Digest, Sha256};
use std::hint::black_box;
use std::time::Instant;

/// Runs per side per round, and rounds.
const PER_ROUND: usize = 5;
const ROUNDS: usize = 4;
/// Records in the document (about 1 MB of JSON).
const RECORDS: usize = 6_000;
/// Target: sandbox throughput at least this share of native.
const TARGET: f64 = 0.5;

/// A schema using most of the subset: types, bounds, lengths, enum,
/// required, additionalProperties, items, prefixItems, uniqueItems,
/// combinators and a local `$ref`.
fn schema() -> Value {
    json!({
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "type": "array",
        "items": {"$ref": "#/$defs/record"},
        "$defs": {
            "record": {
                "type": "object",
                "required": ["id", "name", "price", "tags", "state", "point"],
                "additionalProperties": false,
                "properties": {
                    "id": {"type": "integer", "minimum": 0, "multipleOf": 1},
                    "name": {"type": "string", "minLength": 1, "maxLength": 64},
                    "price": {"type": "number", "exclusiveMinimum": 0, "maximum": 1e6},
                    "tags": {"type": "array", "items": {"type": "string", "maxLength": 16},
                             "maxItems": 8, "uniqueItems": true},
                    "state": {"enum": ["new", "used", "refurbished"]},
                    "point": {"type": "array", "prefixItems": [{"type": "number"}, {"type": "number"}],
                              "minItems": 2, "maxItems": 2},
                    "note": {"anyOf": [{"type": "null"}, {"type": "string"}]},
                    "kind": {"oneOf": [{"const": "a"}, {"const": "b"}]},
                    "flags": {"allOf": [{"type": "object"}, {"not": {"required": ["forbidden"]}}]}
                }
            }
        }
    })
}

/// `RECORDS` records, every tenth with one error, so the report is not
/// empty and errors are built too.
fn document() -> Value {
    let states = ["new", "used", "refurbished"];
    let records: Vec<Value> = (0..RECORDS)
        .map(|i| {
            let mut record = json!({
                "id": i,
                "name": format!("item number {i}"),
                "price": 1.5 + i as f64,
                "tags": ["alpha", "beta", format!("t{}", i % 97)],
                "state": states[i % 3],
                "point": [i as f64 / 7.0, -(i as f64)],
                "note": if i % 2 == 0 { Value::Null } else { json!("a note") },
                "kind": if i % 2 == 0 { "a" } else { "b" },
                "flags": {"x": true},
            });
            if i % 10 == 0 {
                record["price"] = json!(-1);
            }
            record
        })
        .collect();
    Value::Array(records)
}

/// What the release does, natively: answers the report's length.
fn validate_natively(document: &[u8], schema: &[u8]) -> Result<usize> {
    let document: Value = serde_json::from_slice(document)?;
    let schema: Value = serde_json::from_slice(schema)?;
    let schema = Schema::new(&schema).map_err(|e| anyhow::anyhow!("{e}"))?;
    let report = schema
        .validate(&document)
        .map_err(|e| anyhow::anyhow!("{e}"))?;
    Ok(serde_json::to_vec(&report.to_json())?.len())
}

pub async fn run(coord: std::net::SocketAddr, release: &str) -> Result<Vec<Row>> {
    progress("JSON Schema validator throughput");
    let document = serde_json::to_vec(&document())?;
    let schema = serde_json::to_vec(&schema())?;
    let mut conn = Conn::connect(coord).await?;
    for bytes in [&document, &schema] {
        let put = client::post_head(coord, "/blob/put", "application/octet-stream", bytes.len());
        let stored = conn.exchange(&put, bytes, false, None).await?;
        ensure!(
            stored.status == 200,
            "an input was not stored: {}",
            stored.status
        );
    }
    let body = format!(
        "{{}}\ndocument application/json {}\nschema application/json {}\n",
        hex(&Sha256::digest(&document)),
        hex(&Sha256::digest(&schema))
    );
    let run_head = client::post_head(
        coord,
        &format!("/tool/run?key={release}"),
        "text/plain",
        body.len(),
    );

    // Both sides must give the same report.
    let native_report = validate_natively(&document, &schema)?;
    let mut sandbox_us = Vec::new();
    let mut native_us = Vec::new();
    // One unmeasured round warms both paths.
    for round in 0..=ROUNDS {
        let measured = round > 0;
        for _ in 0..PER_ROUND {
            let mut report = Vec::new();
            let answer = conn
                .exchange(&run_head, body.as_bytes(), false, Some(&mut report))
                .await?;
            let report = String::from_utf8(report).context("the report is not text")?;
            ensure!(
                answer.status == 200 && report.starts_with("completed"),
                "the run did not complete: {} {report}",
                answer.status
            );
            let size = report
                .lines()
                .find_map(|l| l.strip_prefix("output report 0 "))
                .and_then(|l| l.split(' ').nth(2))
                .context("the run wrote no report")?;
            ensure!(
                size == native_report.to_string(),
                "the sandbox's report ({size} B) differs from the native one ({native_report} B)"
            );
            if measured {
                sandbox_us.push(reported_wall_us(&report)?);
            }
        }
        for _ in 0..PER_ROUND {
            let started = Instant::now();
            black_box(validate_natively(black_box(&document), black_box(&schema))?);
            if measured {
                native_us.push(micros(started.elapsed()));
            }
        }
    }
    let (sandbox, native) = (median(&mut sandbox_us), median(&mut native_us));
    let mb = document.len() as f64 / 1e6;
    let (sandbox_rate, native_rate) = (mb / (sandbox / 1e6), mb / (native / 1e6));
    let ratio = sandbox_rate / native_rate;
    let runs = PER_ROUND * ROUNDS;
    Ok(vec![Row::new(
        format!(
            "JSON Schema validator in the sandbox: {:.2} MB document, {RECORDS} records (median of {runs})",
            mb
        ),
        format!("{sandbox_rate:.1} MB/s ({:.1} ms)", sandbox / 1e3),
        format!("{native_rate:.1} MB/s ({:.1} ms, same code natively)", native / 1e3),
        format!("{:.0}%", ratio * 100.0),
        verdict(&format!(">= {:.0}%", TARGET * 100.0), ratio >= TARGET),
    )])
}
