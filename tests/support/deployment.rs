//! A `labd` behind the test TLS terminator (`tls.rs`), reached at its
//! external mount `https://127.0.0.1:<port>/api/operations` with `labd`'s
//! audience set to that URL, or reached directly over http; and `labctl`
//! run against it.
//!
//! For the `labctl` package's tests: `labd` comes from the workspace's
//! target directory (`support::labd_binary`).
#![allow(dead_code)]

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use serde_json::Value;

use crate::support::{temp_dir, Labd};
use crate::tls;

/// A `labd` (behind a terminator, or not), and the files `labctl` needs.
pub struct Deployment {
    terminator: Option<tls::Terminator>,
    pub labd: Labd,
    /// `https://127.0.0.1:<port>/api/operations` behind the terminator,
    /// `http://127.0.0.1:<port>` directly.
    pub base: String,
    pub dir: PathBuf,
    /// The root key `labd` made, and its grants of every kind but
    /// `declare` on the whole world, for an hour.
    pub root_key: PathBuf,
    pub grants: PathBuf,
}

pub fn p(path: &Path) -> &str {
    path.to_str().unwrap()
}

pub fn ca() -> PathBuf {
    tls::fixture("ca.pem")
}

/// A labctl command with `args` and no `LAB_*` variable from the
/// environment.
pub fn command(args: &[&str]) -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_labctl"));
    for (name, _) in std::env::vars_os() {
        if name.to_string_lossy().starts_with("LAB_") {
            command.env_remove(name);
        }
    }
    command.args(args);
    command
}

/// Runs labctl with `args` and an empty stdin.
pub fn labctl(args: &[&str]) -> Output {
    labctl_with(args, b"")
}

/// Runs labctl with `args` and `stdin`.
pub fn labctl_with(args: &[&str], stdin: &[u8]) -> Output {
    let mut child = command(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start labctl");
    child.stdin.take().unwrap().write_all(stdin).unwrap();
    child.wait_with_output().unwrap()
}

pub fn code(output: &Output) -> i32 {
    output.status.code().expect("labctl exited by a signal")
}

pub fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

pub fn ok(output: Output) -> Output {
    assert_eq!(code(&output), 0, "stderr: {}", stderr(&output));
    output
}

pub fn json_out(output: &Output) -> Value {
    serde_json::from_slice(&output.stdout).expect("labctl printed JSON")
}

impl Deployment {
    /// `labd` behind the TLS terminator.
    pub fn start(name: &str) -> Deployment {
        let bound = tls::Bound::new();
        let base = bound.base();
        let labd = Labd::start(name, &["--coord-audience", &base]);
        let terminator = bound.forward_to(labd.coord().address);
        Deployment::around(name, labd, base, Some(terminator))
    }

    /// `labd` reached directly at its operations listener over http.
    pub fn start_plain(name: &str) -> Deployment {
        let labd = Labd::start(name, &[]);
        let base = format!("http://{}", labd.coord().address);
        Deployment::around(name, labd, base, None)
    }

    fn around(
        name: &str,
        labd: Labd,
        base: String,
        terminator: Option<tls::Terminator>,
    ) -> Deployment {
        let dir = temp_dir(&format!("{name}-files"));
        let root_key = labd.data_dir.join("state/coord/root.key");
        let root = ok(labctl(&["principal", "--key", p(&root_key)]));
        let root = String::from_utf8(root.stdout).unwrap();
        let grants = dir.join("root.grants");
        for kind in ["provision", "publish", "read"] {
            ok(labctl(&[
                "grant",
                "--key",
                p(&root_key),
                "--to",
                root.trim(),
                "--kind",
                kind,
                "--valid-for",
                "1h",
                "--append-to",
                p(&grants),
            ]));
        }
        Deployment {
            terminator,
            labd,
            base,
            dir,
            root_key,
            grants,
        }
    }

    /// `args` with the deployment's endpoint, the test CA (for https),
    /// the root key and its grants.
    pub fn args(&self, args: &[&str]) -> Vec<String> {
        let mut all: Vec<String> = args.iter().map(|a| a.to_string()).collect();
        all.extend(["--endpoint".into(), self.base.clone()]);
        if self.terminator.is_some() {
            all.extend(["--ca-file".into(), p(&ca()).to_owned()]);
        }
        all.extend(["--key".into(), p(&self.root_key).to_owned()]);
        all.extend(["--grants".into(), p(&self.grants).to_owned()]);
        all
    }

    /// labctl `args` against the deployment's endpoint, signed by the root
    /// with its grants (trusting the test CA, for https).
    pub fn call(&self, args: &[&str]) -> Output {
        self.call_with(args, b"")
    }

    /// [`Deployment::call`] with `stdin`.
    pub fn call_with(&self, args: &[&str], stdin: &[u8]) -> Output {
        let all = self.args(args);
        let all: Vec<&str> = all.iter().map(String::as_str).collect();
        labctl_with(&all, stdin)
    }

    pub fn file(&self, name: &str, bytes: &[u8]) -> PathBuf {
        let path = self.dir.join(name);
        std::fs::write(&path, bytes).unwrap();
        path
    }
}
