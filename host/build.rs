//! Builds the service components for `wasm32-wasip2` and records the build's
//! revision, so that `labd` embeds both.
//!
//! The components are built by a nested cargo into their own target directory
//! (`target/components`), so the outer build's lock is never contended.

use std::path::{Path, PathBuf};
use std::process::Command;

/// (package, file stem of the built component, name the host embeds it
/// under; none for components only tests load from disk)
const COMPONENTS: &[(&str, &str, Option<&str>)] = &[
    ("lab-bytes", "lab_bytes", Some("bytes")),
    ("lab-journal", "lab_journal", Some("journal")),
    ("lab-coord", "lab_coord", Some("coord")),
    ("lab-probe", "lab_probe", None),
    ("lab-tool-upper", "lab_tool_upper", None),
    ("lab-tool-hostile", "lab_tool_hostile", None),
    ("lab-tool-effects", "lab_tool_effects", None),
    ("lab-tool-reach", "lab_tool_reach", None),
    ("lab-tool-jsonschema", "lab_tool_jsonschema", None),
    ("lab-tool-unpack", "lab_tool_unpack", None),
    ("lab-tool-profile", "lab_tool_profile", None),
];

/// The components built with whole-program optimization (fat LTO, one
/// codegen unit): the services and the probe that stands in for them.
/// Tool releases are built as any crate is, so that the bench compares a
/// release with the same code built natively under the same profile.
const WHOLE_PROGRAM: &[&str] = &["lab-bytes", "lab-journal", "lab-coord", "lab-probe"];

fn main() {
    let manifest_dir = PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").unwrap());
    let workspace = manifest_dir.parent().unwrap().to_path_buf();
    let out_dir = PathBuf::from(std::env::var("OUT_DIR").unwrap());

    for dir in ["components", "wit", "contracts"] {
        println!("cargo:rerun-if-changed={}", workspace.join(dir).display());
    }
    build_components(&workspace, &out_dir);
    record_revision(&workspace);
}

/// The rustc wrapper of the components' own crates, if any: `make test`
/// names `scripts/clippy-rustc`, so that their build is their lint. Cargo
/// keeps a wrapped build's artifacts apart from a plain one's.
const COMPONENTS_WRAPPER: &str = "LAB_COMPONENTS_RUSTC_WRAPPER";

fn build_components(workspace: &Path, out_dir: &Path) {
    println!("cargo:rerun-if-env-changed={COMPONENTS_WRAPPER}");
    let wrapper = std::env::var_os(COMPONENTS_WRAPPER).filter(|w| !w.is_empty());
    let target_dir = workspace.join("target").join("components");
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    for (package, _, _) in COMPONENTS {
        let mut cmd = Command::new(&cargo);
        cmd.current_dir(workspace)
            .args(["rustc", "--lib", "--crate-type", "cdylib", "--release"])
            .args(["--target", "wasm32-wasip2", "-p", package])
            .arg("--target-dir")
            .arg(&target_dir);
        // The outer build's flags and wrappers (clippy's included) are for
        // the host, not for the guests.
        for var in [
            "CARGO_ENCODED_RUSTFLAGS",
            "RUSTFLAGS",
            "RUSTC_WRAPPER",
            "RUSTC_WORKSPACE_WRAPPER",
            "CARGO_TARGET_DIR",
            "CARGO_BUILD_TARGET",
            "CARGO_MAKEFLAGS",
            "MAKEFLAGS",
            "MFLAGS",
        ] {
            cmd.env_remove(var);
        }
        if let Some(wrapper) = &wrapper {
            cmd.env("RUSTC_WORKSPACE_WRAPPER", wrapper);
        }
        // Guests ship without debug info: smaller to compile at every start.
        cmd.env("CARGO_PROFILE_RELEASE_DEBUG", "false")
            .env("CARGO_PROFILE_RELEASE_STRIP", "debuginfo");
        if WHOLE_PROGRAM.contains(package) {
            cmd.env("CARGO_PROFILE_RELEASE_LTO", "fat")
                .env("CARGO_PROFILE_RELEASE_CODEGEN_UNITS", "1");
        }
        let status = cmd.status().expect("run cargo for the components");
        assert!(status.success(), "building the component {package} failed");
    }

    let mut consts = String::new();
    for (_, stem, name) in COMPONENTS {
        let Some(name) = name else { continue };
        let built = target_dir
            .join("wasm32-wasip2/release")
            .join(format!("{stem}.wasm"));
        let embedded = out_dir.join(format!("{name}.wasm"));
        std::fs::copy(&built, &embedded).expect("copy the built component");
        consts.push_str(&format!(
            "pub const {}: &[u8] = include_bytes!({:?});\n",
            name.to_uppercase(),
            embedded.display().to_string()
        ));
    }
    std::fs::write(out_dir.join("components.rs"), consts).unwrap();
}

fn record_revision(workspace: &Path) {
    let git = |args: &[&str]| {
        Command::new("git")
            .current_dir(workspace)
            .args(args)
            .output()
            .ok()
            .filter(|o| o.status.success())
            .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
    };
    let revision = git(&["rev-parse", "HEAD"]);
    let dirty = match (
        &revision,
        // Without the optional lock, status leaves the index as it is: a
        // rewrite (as git makes of a fresh clone's) would rerun this script
        // in the next build, and rebuild labd for nothing.
        git(&[
            "--no-optional-locks",
            "status",
            "--porcelain",
            "--untracked-files=no",
        ]),
    ) {
        (Some(_), Some(status)) if status.is_empty() => "false",
        _ => "true",
    };
    println!(
        "cargo:rustc-env=LAB_BUILD_REVISION={}",
        revision.unwrap_or_else(|| "unknown".into())
    );
    println!("cargo:rustc-env=LAB_BUILD_DIRTY={dirty}");
    let rustc = std::env::var("RUSTC").unwrap_or_else(|_| "rustc".into());
    let toolchain = Command::new(rustc)
        .arg("--version")
        .output()
        .ok()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
        .unwrap_or_else(|| "unknown".into());
    println!("cargo:rustc-env=LAB_BUILD_TOOLCHAIN={toolchain}");
    // Revision and dirtiness change with the repository's state.
    let git_dir = workspace.join(".git");
    for file in ["HEAD", "index"] {
        println!("cargo:rerun-if-changed={}", git_dir.join(file).display());
    }
}
