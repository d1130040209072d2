//! Called from a component's `build.rs`:
//! - [`contract_files`] writes `contract_files.rs` into `OUT_DIR`, a
//!   constant `FILES: &[(&str, &[u8])]` holding every file under the given
//!   contract directory, sorted by name (relative, `/`-separated), so
//!   `describe/{file}` serves exactly those files and nothing else;
//! - [`initial_memory`] sets the component's initial linear memory.

use std::path::{Path, PathBuf};

/// Embeds every file under `dir` (relative to the crate's manifest).
pub fn contract_files(dir: &str) {
    let root =
        PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").expect("run from build.rs")).join(dir);
    println!("cargo:rerun-if-changed={}", root.display());
    let mut files = Vec::new();
    collect(&root, &root, &mut files);
    files.sort();
    let mut out = String::from("/// Served contract files: (name, contents), sorted by name.\npub const FILES: &[(&str, &[u8])] = &[\n");
    for (name, path) in files {
        out.push_str(&format!(
            "    ({name:?}, include_bytes!({:?})),\n",
            path.display().to_string()
        ));
    }
    out.push_str("];\n");
    let out_dir = PathBuf::from(std::env::var("OUT_DIR").expect("run from build.rs"));
    std::fs::write(out_dir.join("contract_files.rs"), out).expect("write contract_files.rs");
}

/// Links the component (when built for WebAssembly) with `bytes` of initial
/// linear memory, a multiple of 64 KiB.
///
/// The linker's default is the stack (1 MiB), the data and almost no heap,
/// so a request's first allocations grow the memory: an `mprotect` of the
/// new pages, and its reversal when the pool resets the slot after the
/// request. Memory an instance starts with costs nothing until touched, and
/// up to the host's `--instance-base-memory-mib` (4 MiB by default) it is
/// not charged. Linking fails if `bytes` does not hold the stack and data.
pub fn initial_memory(bytes: u32) {
    assert!(
        bytes.is_multiple_of(65536),
        "initial memory must be whole 64 KiB pages"
    );
    if std::env::var("TARGET").is_ok_and(|target| target.starts_with("wasm32")) {
        println!("cargo:rustc-link-arg=--initial-memory={bytes}");
    }
}

fn collect(root: &Path, dir: &Path, files: &mut Vec<(String, PathBuf)>) {
    let entries = std::fs::read_dir(dir).unwrap_or_else(|e| panic!("read {}: {e}", dir.display()));
    for entry in entries {
        let path = entry.expect("a directory entry").path();
        if path.is_dir() {
            collect(root, &path, files);
        } else {
            let name = path
                .strip_prefix(root)
                .unwrap()
                .to_string_lossy()
                .replace('\\', "/");
            files.push((name, path.canonicalize().unwrap()));
        }
    }
}
