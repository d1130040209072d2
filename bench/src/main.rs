//! `lab-bench`: throughput and latency of `labd`'s bytes, journal and
//! coordination services on loopback, each figure printed beside a
//! baseline measured in the same run.
//!
//! - [`labd`]: `labd` as a child process with a fresh data directory.
//! - [`client`]: a minimal HTTP/1.1 keep-alive client.
//! - [`native`]: the bytes baseline server, plain hyper without a component.
//! - [`measure`]: the bytes measurements and their baselines.
//! - [`journal`]: the journal measurements; [`lmdb`] their baseline, a
//!   plain heed loop writing the same rows.
//! - [`coord`]: signed publishes and reads of the coordination service,
//!   against the journal operations underneath them and the verifier's own
//!   cost.
//! - [`socket`]: signed calls over the coordination service's socket
//!   against the same over HTTP, and the memory of an idle socket.
//! - [`events`]: subscriptions over that socket: event latency and the
//!   journal's append rate with 1,000 subscriptions open; [`fanout`] the
//!   floor under it, the same frames from a server that only sends them.
//! - [`tools`]: the start-up cost of a tool run, against a request that
//!   runs nothing.
//! - [`validator`]: the JSON Schema validator release's throughput in the
//!   sandbox, against the same validator natively.
//! - [`backup`]: `labd backup` of the data directory the other rows wrote,
//!   against a plain copy of it.
//! - [`coord::shared`]: the journal append and the signed publish through
//!   two `labd` sharing one PostgreSQL store, against one on LMDB.
//! - [`s3`]: blob puts and gets through a labd whose blobs are on an S3
//!   server of the bench's own, against the same on local files.
//!
//! Output: a header line naming the machine, then one table row per
//! measurement (`what | figure | baseline | ratio | target`). Progress goes
//! to stderr. MB is 10^6 bytes.

mod backup;
mod client;
mod coord;
mod events;
mod fanout;
mod journal;
mod labd;
mod lmdb;
mod measure;
mod native;
mod postgres;
mod s3;
mod socket;
mod tools;
mod validator;

use anyhow::{Context, Result};
use clap::Parser;
use std::path::PathBuf;
use std::time::{Duration, Instant};

/// Measures labd's bytes, journal and coordination services against
/// same-run baselines.
#[derive(Debug, Parser)]
#[command(name = "lab-bench")]
struct Args {
    /// The labd binary to measure.
    #[arg(long)]
    labd: PathBuf,

    /// Measured seconds of small gets per concurrency and per server,
    /// split into alternating rounds.
    #[arg(long, default_value_t = 3.0)]
    seconds: f64,

    /// Measure one service only [default: all].
    #[arg(long, value_enum)]
    only: Option<Service>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum Service {
    Bytes,
    Journal,
    /// The journal's read, filtered read and query rows only.
    JournalReads,
    /// The journal's append rows and their ceilings only.
    Appends,
    Coord,
    /// The coordination `publish` and `entries` rows alone.
    CoordPath,
    Socket,
    Tools,
    /// The top-level request path alone: the small-get rows and the
    /// journal `head` against the native no-op.
    Callpath,
    /// The journal `head` at 64 clients, the native no-op and the empty
    /// journal request alone.
    Head,
    /// `labd backup` against a plain copy (alone, over blobs it puts first;
    /// in a whole run, over what every other row wrote).
    Backup,
    /// The journal append and the signed publish through two labd sharing
    /// one PostgreSQL store and one S3 bucket, against one labd on LMDB.
    Shared,
    /// Blob puts and gets with the blobs on S3, beside local files.
    S3,
}

fn main() -> Result<()> {
    let args = Args::parse();
    let rps_time = Duration::try_from_secs_f64(args.seconds)
        .ok()
        .filter(|d| !d.is_zero() && *d <= Duration::from_secs(60))
        .context("--seconds must be above 0 and at most 60")?;
    let threads = std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1);
    println!(
        "machine: nproc={threads}, cpu={}, labd={}, MB=10^6 bytes",
        cpu_model(),
        args.labd.display()
    );

    let started = Instant::now();
    // Declared before labd, so dropped after it: the child dies before its
    // data directory goes.
    let scratch = labd::Scratch::create()?;
    // `upper` is configured for the coordination bench's `apply` rows.
    let (upper, _) = tools::upper_tool(&args.labd, scratch.path())?;
    let labd = labd::Labd::start_with(&args.labd, scratch.path(), &["--coord-tool".into(), upper])?;
    eprintln!(
        "lab-bench: labd ready on {} after {:.1} s",
        labd.operations,
        started.elapsed().as_secs_f64()
    );

    // Its own labd: the probe stands in for the coordination component.
    let tools_labd = match args.only {
        None | Some(Service::Tools) => {
            Some(tools::start(&args.labd, &scratch.path().join("tools"))?)
        }
        Some(_) => None,
    };

    // Its own labd, its blobs on an S3 server of the bench's.
    let s3 = match args.only {
        None | Some(Service::S3) => {
            let server = s3::start(&scratch.path().join("s3-server"))?;
            let s3_scratch = scratch.path().join("s3-labd");
            std::fs::create_dir_all(&s3_scratch)?;
            let labd = s3::labd(&server, &args.labd, &s3_scratch)?;
            Some((server, labd))
        }
        Some(_) => None,
    };
    let s3_bytes = s3
        .as_ref()
        .map(|(server, labd)| (labd.operations, s3::Endpoint::of(server)));

    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(threads)
        .enable_all()
        .build()
        .context("start the client runtime")?;
    // On a worker, not on this thread: a future that `block_on` drives
    // directly is woken across threads on every read, which would slow the
    // client's request loops.
    let measuring = runtime.spawn({
        let (bytes, journal, coord) = (
            labd.operations,
            journal::Target {
                operations: labd.journal,
                management: labd.journal_management,
                pid: labd.pid(),
                device: journal::Device::holding(&labd.data_dir)
                    .ok()
                    .filter(|device| matches!(device.written(), Ok(Some(_)))),
            },
            coord::Target {
                operations: labd.coord,
                journal: labd.journal,
                bytes: labd.operations,
                pid: labd.pid(),
                data_dir: labd.data_dir.clone(),
            },
        );
        let scratch = scratch.path().to_path_buf();
        let binary = args.labd.clone();
        let only = args.only;
        let tools = tools_labd
            .as_ref()
            .map(|(labd, release)| (labd.coord, release.clone()));
        async move {
            let mut rows = Vec::new();
            let selected = |service| only.is_none_or(|only| only == service);
            if selected(Service::Bytes) {
                rows.extend(measure::run(bytes, scratch.clone(), threads, rps_time).await?);
            }
            if only == Some(Service::Callpath) {
                rows.extend(measure::small_gets(bytes, scratch.clone(), threads, rps_time).await?);
            }
            if matches!(only, Some(Service::Callpath | Service::Head)) {
                rows.extend(journal::head_rows(&journal, threads).await?);
            }
            let part = match only {
                Some(Service::JournalReads) => Some(journal::Part::Reads),
                Some(Service::Appends) => Some(journal::Part::Appends),
                _ => selected(Service::Journal).then_some(journal::Part::All),
            };
            if let Some(part) = part {
                rows.extend(journal::run(journal, scratch.clone(), threads, part).await?);
            }
            if selected(Service::Socket) {
                let target = coord::Target {
                    operations: coord.operations,
                    journal: coord.journal,
                    bytes: coord.bytes,
                    pid: coord.pid,
                    data_dir: coord.data_dir.clone(),
                };
                rows.extend(socket::run(target.clone(), rps_time).await?);
                rows.extend(events::run(target, rps_time).await?);
            }
            if selected(Service::Coord) || only == Some(Service::CoordPath) {
                let paths_only = only == Some(Service::CoordPath);
                rows.extend(coord::run(coord, threads, paths_only).await?);
            }
            if selected(Service::Shared) {
                rows.extend(coord::shared::run(&binary, &scratch, rps_time).await?);
            }
            if only == Some(Service::Backup) {
                backup::fill(bytes).await?;
            }
            if let Some((s3_bytes, endpoint)) = s3_bytes {
                rows.extend(measure::s3_rows(bytes, s3_bytes, endpoint).await?);
            }
            if let Some((coord, releases)) = tools {
                rows.extend(tools::run(coord, &releases.upper).await?);
                rows.extend(validator::run(coord, &releases.jsonschema).await?);
            }
            anyhow::Ok(rows)
        }
    });
    let mut rows = runtime
        .block_on(measuring)
        .context("the measurements panicked")??;
    // Beside the serving labd, over what every row above wrote.
    if args.only.is_none_or(|only| only == Service::Backup) {
        rows.extend(backup::run(&args.labd, &labd.data_dir, scratch.path())?);
    }
    drop(runtime);
    drop(s3);
    drop(tools_labd);
    drop(labd);
    drop(scratch);

    print_table(&rows);
    eprintln!(
        "lab-bench: done in {:.0} s",
        started.elapsed().as_secs_f64()
    );
    Ok(())
}

/// The first `model name` of /proc/cpuinfo, if there is one.
fn cpu_model() -> String {
    std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|info| {
            info.lines()
                .find(|line| line.starts_with("model name"))
                .and_then(|line| line.split_once(':'))
                .map(|(_, model)| model.trim().to_string())
        })
        .unwrap_or_else(|| "unknown".to_string())
}

fn print_table(rows: &[measure::Row]) {
    let header = ["what", "figure", "baseline", "ratio", "target"];
    let cells: Vec<[&str; 5]> = std::iter::once(header)
        .chain(
            rows.iter()
                .map(|r| [&*r.what, &*r.figure, &*r.baseline, &*r.ratio, &*r.target]),
        )
        .collect();
    let mut widths = [0usize; 5];
    for line in &cells {
        for (width, cell) in widths.iter_mut().zip(line) {
            *width = (*width).max(cell.chars().count());
        }
    }
    for line in &cells {
        let padded: Vec<String> = line
            .iter()
            .zip(widths)
            .map(|(cell, width)| format!("{cell}{}", " ".repeat(width - cell.chars().count())))
            .collect();
        println!("{}", padded.join(" | ").trim_end());
    }
}
