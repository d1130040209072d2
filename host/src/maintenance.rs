//! `labd backup`, `labd restore` and `labd check`: commands that run beside
//! or instead of a serving labd and exit (`docs/operations.md`).

use anyhow::Result;
use clap::{Parser, Subcommand};
use std::path::PathBuf;
use std::process::ExitCode;

/// The first arguments that name a maintenance command rather than a
/// serving labd's flags.
const COMMANDS: &[&str] = &["backup", "restore", "check"];

#[derive(Debug, Parser)]
#[command(name = "labd", version)]
struct Maintenance {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Backs a data directory up while its labd keeps serving: a snapshot
    /// of the key-value store, then the blob files the backup directory
    /// lacks, then a manifest. Prints what it copied as JSON.
    Backup {
        /// The data directory to back up (a labd may be serving it).
        #[arg(long, env = "LAB_DATA_DIR", default_value = "./data")]
        data_dir: PathBuf,
        /// The backup directory; a later backup into it copies only the
        /// blobs it lacks and replaces its manifest.
        #[arg(long)]
        to: PathBuf,
    },
    /// Restores the latest backup of a backup directory into a new data
    /// directory, verifying every file against the manifest.
    Restore {
        /// The backup directory.
        #[arg(long)]
        from: PathBuf,
        /// The data directory to create: absent, or an empty directory.
        #[arg(long, env = "LAB_DATA_DIR")]
        data_dir: PathBuf,
    },
    /// Checks a data directory no labd is serving: every blob file's bytes
    /// and the store's invariants. Prints each problem; exits 1 when it
    /// found one, 2 when it could not run.
    Check {
        /// The data directory to check.
        #[arg(long, env = "LAB_DATA_DIR", default_value = "./data")]
        data_dir: PathBuf,
        /// Remove orphaned staging files (nothing else is ever changed).
        #[arg(long)]
        repair: bool,
    },
}

/// Whether the command line names a maintenance command.
pub fn requested() -> bool {
    std::env::args()
        .nth(1)
        .is_some_and(|first| COMMANDS.contains(&first.as_str()))
}

/// Runs the command the command line names; the process's exit code.
pub fn run() -> ExitCode {
    let command = Maintenance::parse().command;
    tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::new("warn"))
        .with_writer(std::io::stderr)
        .init();
    match execute(command) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("labd: {e:#}");
            ExitCode::from(2)
        }
    }
}

fn execute(command: Command) -> Result<ExitCode> {
    match command {
        Command::Backup { data_dir, to } => {
            let report = crate::backup::backup(&data_dir, &to)?;
            println!("{}", report.to_json());
            Ok(ExitCode::SUCCESS)
        }
        Command::Restore { from, data_dir } => {
            let report = crate::backup::restore(&from, &data_dir)?;
            println!(
                "{}",
                serde_json::json!({ "blobs": report.blobs, "kv_bytes": report.kv_bytes })
            );
            Ok(ExitCode::SUCCESS)
        }
        Command::Check { data_dir, repair } => {
            let findings = crate::check::check(&data_dir, repair)?;
            for note in &findings.notes {
                println!("note: {note}");
            }
            for problem in &findings.problems {
                println!("problem: {problem}");
            }
            let counts: Vec<String> = findings
                .counts
                .iter()
                .map(|(what, n)| format!("{n} {what}"))
                .collect();
            println!(
                "checked {}: {} problem(s)",
                counts.join(", "),
                findings.problems.len()
            );
            Ok(if findings.problems.is_empty() {
                ExitCode::SUCCESS
            } else {
                ExitCode::from(1)
            })
        }
    }
}
