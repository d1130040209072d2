//! `labd backup` of the bench's own data directory (what the other rows
//! wrote), against a plain copy of the same files in the same run:
//! `cp -a` of `lmdb/` and `blobs/`, then `sync -f` on the copy, since the
//! backup makes every file it writes durable.
//!
//! Both rates are over the same bytes: the store's `data.mdb` and every
//! blob file. The backup also hashes every blob and compacts the store.
//! Rounds alternate, each into a fresh directory (a backup into a used
//! one copies no blob; that is the last row).

use crate::client::{self, Conn};
use crate::measure::Row;
use anyhow::{ensure, Context, Result};
use std::net::SocketAddr;
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

const ROUNDS: usize = 3;
/// With `--only backup`, the blobs put first: 256 of 1 MiB.
const FILL_BLOBS: u64 = 256;
const FILL_BLOB_BYTES: usize = 1 << 20;

/// Puts [`FILL_BLOBS`] distinct blobs, so that `--only backup` has a data
/// directory worth copying.
pub async fn fill(bytes: SocketAddr) -> Result<()> {
    let head = client::post_head(
        bytes,
        "/v1/blobs",
        "application/octet-stream",
        FILL_BLOB_BYTES,
    );
    let mut conn = Conn::connect(bytes).await?;
    let mut data = vec![0x5a; FILL_BLOB_BYTES];
    for i in 0..FILL_BLOBS {
        data[..8].copy_from_slice(&i.to_be_bytes());
        let response = conn.exchange(&head, &data, false, None).await?;
        ensure!(response.status == 200, "put answered {}", response.status);
    }
    Ok(())
}

pub fn run(labd: &Path, data_dir: &Path, scratch: &Path) -> Result<Vec<Row>> {
    let bytes = source_bytes(data_dir)?;
    let mut backups = Vec::new();
    let mut copies = Vec::new();
    for round in 0..ROUNDS {
        let to = scratch.join(format!("backup-{round}"));
        backups.push(timed(|| backup(labd, data_dir, &to))?);
        std::fs::remove_dir_all(&to)?;
        let copy = scratch.join(format!("copy-{round}"));
        copies.push(timed(|| plain_copy(data_dir, &copy))?);
        std::fs::remove_dir_all(&copy)?;
    }
    let to = scratch.join("backup-again");
    backup(labd, data_dir, &to)?;
    let again = timed(|| backup(labd, data_dir, &to))?;
    std::fs::remove_dir_all(&to)?;

    let rate = |d: Duration| bytes as f64 / 1e6 / d.as_secs_f64();
    let backup = rate(median(&mut backups));
    let copy = rate(median(&mut copies));
    let size = format!("{:.1} MB", bytes as f64 / 1e6);
    Ok(vec![
        Row::new(
            format!("labd backup of the bench's data directory ({size}; median of {ROUNDS})"),
            format!("{backup:.0} MB/s"),
            format!("{copy:.0} MB/s (cp -a + sync -f)"),
            format!("{:.2}x", backup / copy),
            String::from("-"),
        ),
        Row::new(
            format!("labd backup again into the same directory ({size}, no new blob)"),
            format!("{:.0} ms", again.as_secs_f64() * 1e3),
            String::from("-"),
            String::from("-"),
            String::from("-"),
        ),
    ])
}

fn timed(f: impl FnOnce() -> Result<()>) -> Result<Duration> {
    let started = Instant::now();
    f()?;
    Ok(started.elapsed())
}

fn median(durations: &mut [Duration]) -> Duration {
    durations.sort();
    durations[durations.len() / 2]
}

fn backup(labd: &Path, data_dir: &Path, to: &Path) -> Result<()> {
    let out = Command::new(labd)
        .arg("backup")
        .arg("--data-dir")
        .arg(data_dir)
        .arg("--to")
        .arg(to)
        .output()
        .context("run labd backup")?;
    ensure!(
        out.status.success(),
        "labd backup: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    Ok(())
}

fn plain_copy(data_dir: &Path, to: &Path) -> Result<()> {
    std::fs::create_dir_all(to)?;
    let status = Command::new("cp")
        .arg("-a")
        .arg(data_dir.join("lmdb"))
        .arg(data_dir.join("blobs"))
        .arg(to)
        .status()
        .context("run cp")?;
    ensure!(status.success(), "cp -a failed");
    let status = Command::new("sync").arg("-f").arg(to).status()?;
    ensure!(status.success(), "sync -f failed");
    Ok(())
}

/// Bytes of the store's data file and of every blob file.
fn source_bytes(data_dir: &Path) -> Result<u64> {
    let mut total = std::fs::metadata(data_dir.join("lmdb/data.mdb"))?.len();
    let committed = data_dir.join("blobs/sha256");
    for fan_out in std::fs::read_dir(&committed)? {
        for blob in std::fs::read_dir(fan_out?.path())? {
            total += blob?.metadata()?.len();
        }
    }
    Ok(total)
}
