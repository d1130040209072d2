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
}

impl Labd {
    /// Starts `binary` with its data under `scratch` and waits until its
    /// ready file names the listeners.
    pub fn start(binary: &Path, scratch: &Path) -> Result<Labd> {
        let ready_file = scratch.join("ready.json");
        let child = Command::new(binary)
            .arg("--data-dir")
            .arg(scratch.join("data"))
            .args(["--bytes-listen", "127.0.0.1:0"])
            .args(["--bytes-management-listen", "127.0.0.1:0"])
            .arg("--ready-file")
            .arg(&ready_file)
            .args(["--log", "warn"])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::inherit())
            .spawn()
            .with_context(|| format!("start {}", binary.display()))?;
        // From here on the guard owns the child, so every early return kills it.
        let mut labd = Labd {
            child,
            operations: SocketAddr::from(([127, 0, 0, 1], 0)),
        };
        labd.operations = labd.wait_ready(&ready_file)?;
        Ok(labd)
    }

    fn wait_ready(&mut self, ready_file: &Path) -> Result<SocketAddr> {
        let started = Instant::now();
        loop {
            // labd writes the file under another name and renames it, so a
            // file that exists is complete.
            match std::fs::read(ready_file) {
                Ok(text) => return operations_address(&text),
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

/// `{"bytes": {"operations": "127.0.0.1:PORT", ...}}` → the address.
fn operations_address(text: &[u8]) -> Result<SocketAddr> {
    let ready: serde_json::Value =
        serde_json::from_slice(text).context("the ready file is not JSON")?;
    let address = ready["bytes"]["operations"]
        .as_str()
        .context("the ready file lacks bytes.operations")?;
    address
        .parse()
        .with_context(|| format!("bytes.operations `{address}`"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_the_operations_address() {
        let text = br#"{"bytes":{"operations":"127.0.0.1:4567","management":"127.0.0.1:4568"}}"#;
        assert_eq!(
            operations_address(text).unwrap(),
            "127.0.0.1:4567".parse().unwrap()
        );
        assert!(operations_address(br#"{"bytes":{}}"#).is_err());
    }
}
