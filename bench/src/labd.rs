//! `labd` as a child process: a fresh scratch directory, ports chosen by the
//! kernel, and readiness read from the ready file `labd` writes once every
//! listener is bound.
//!
//! Both guards clean up on drop, so an error or a panic anywhere in the run
//! still kills the child and removes its data.

use anyhow::{bail, Context, Result};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// How long `labd` may take to compile its components and bind.
const READY_TIMEOUT: Duration = Duration::from_secs(120);
/// How often the ready file is looked for.
const READY_POLL: Duration = Duration::from_millis(10);

/// A directory under the system's temporary directory, removed on drop.
pub struct Scratch {
    path: PathBuf,
}

impl Scratch {
    pub fn create() -> Result<Scratch> {
        let nanos = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or(0);
        let path = std::env::temp_dir().join(format!("lab-bench-{}-{nanos}", std::process::id()));
        std::fs::create_dir_all(&path).with_context(|| format!("create {}", path.display()))?;
        Ok(Scratch { path })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        if let Err(e) = std::fs::remove_dir_all(&self.path) {
            eprintln!("lab-bench: could not remove {}: {e}", self.path.display());
        }
    }
}

/// A running `labd`, killed on drop.
pub struct Labd {
    child: Child,
    /// The bytes service's operations listener.
    pub operations: SocketAddr,
    /// The journal service's operations listener.
    pub journal: SocketAddr,
    /// The journal service's management listener (its metrics).
    pub journal_management: SocketAddr,
    /// The coordination service's operations listener.
    pub coord: SocketAddr,
    /// The data directory labd was given.
    pub data_dir: PathBuf,
}

impl Labd {
    /// Starts `binary` with its data under `scratch` and `extra`
    /// arguments, and waits until its ready file names the listeners.
    pub fn start_with(binary: &Path, scratch: &Path, extra: &[std::ffi::OsString]) -> Result<Labd> {
        Labd::start_with_env(binary, scratch, extra, &[])
    }

    /// [`Labd::start_with`] with `env` added to the child's environment.
    pub fn start_with_env(
        binary: &Path,
        scratch: &Path,
        extra: &[std::ffi::OsString],
        env: &[(String, String)],
    ) -> Result<Labd> {
        let ready_file = scratch.join("ready.json");
        let data_dir = scratch.join("data");
        let child = Command::new(binary)
            .arg("--data-dir")
            .arg(&data_dir)
            .args(["--bytes-listen", "127.0.0.1:0"])
            .args(["--bytes-management-listen", "127.0.0.1:0"])
            .args(["--journal-listen", "127.0.0.1:0"])
            .args(["--journal-management-listen", "127.0.0.1:0"])
            .args(["--coord-listen", "127.0.0.1:0"])
            .args(["--coord-management-listen", "127.0.0.1:0"])
            .arg("--ready-file")
            .arg(&ready_file)
            .args(["--log", "warn"])
            .args(extra)
            .envs(env.iter().map(|(k, v)| (k, v)))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::inherit())
            .spawn()
            .with_context(|| format!("start {}", binary.display()))?;
        // From here on the guard owns the child, so every early return kills it.
        let unbound = SocketAddr::from(([127, 0, 0, 1], 0));
        let mut labd = Labd {
            child,
            operations: unbound,
            journal: unbound,
            journal_management: unbound,
            coord: unbound,
            data_dir,
        };
        let text = labd.wait_ready(&ready_file)?;
        labd.operations = address(&text, "bytes", "operations")?;
        labd.journal = address(&text, "journal", "operations")?;
        labd.journal_management = address(&text, "journal", "management")?;
        labd.coord = address(&text, "coord", "operations")?;
        Ok(labd)
    }

    /// The child's process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// The ready file's text, once there is one.
    fn wait_ready(&mut self, ready_file: &Path) -> Result<Vec<u8>> {
        let started = Instant::now();
        loop {
            // labd writes the file under another name and renames it, so a
            // file that exists is complete.
            match std::fs::read(ready_file) {
                Ok(text) => return Ok(text),
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => return Err(e).with_context(|| format!("read {}", ready_file.display())),
            }
            if let Some(status) = self.child.try_wait()? {
                bail!("labd exited before it was ready: {status}");
            }
            if started.elapsed() > READY_TIMEOUT {
                bail!("labd not ready after {READY_TIMEOUT:?}");
            }
            std::thread::sleep(READY_POLL);
        }
    }
}

impl Drop for Labd {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `{"<service>": {"<listener>": "127.0.0.1:PORT", ...}}` → the address.
fn address(text: &[u8], service: &str, listener: &str) -> Result<SocketAddr> {
    let ready: serde_json::Value =
        serde_json::from_slice(text).context("the ready file is not JSON")?;
    let address = ready[service][listener]
        .as_str()
        .with_context(|| format!("the ready file lacks {service}.{listener}"))?;
    address
        .parse()
        .with_context(|| format!("{service}.{listener} `{address}`"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_the_operations_address() {
        let text = br#"{"bytes":{"operations":"127.0.0.1:4567","management":"127.0.0.1:4568"},
            "journal":{"operations":"127.0.0.1:4569","management":"127.0.0.1:4570"},
            "coord":{"operations":"127.0.0.1:4571","management":"127.0.0.1:4572"}}"#;
        let at = |service, listener| address(text, service, listener).unwrap();
        assert_eq!(at("bytes", "operations"), "127.0.0.1:4567".parse().unwrap());
        assert_eq!(
            at("journal", "operations"),
            "127.0.0.1:4569".parse().unwrap()
        );
        assert_eq!(
            at("journal", "management"),
            "127.0.0.1:4570".parse().unwrap()
        );
        assert_eq!(at("coord", "operations"), "127.0.0.1:4571".parse().unwrap());
        assert!(address(br#"{"bytes":{}}"#, "bytes", "operations").is_err());
        assert!(address(br#"{"bytes":{}}"#, "journal", "operations").is_err());
    }
}
