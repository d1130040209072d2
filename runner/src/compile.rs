//! Compiled components: shared by the tool runner and `labd`'s service
//! engine.

use std::hash::{Hash, Hasher};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use wasmtime::component::Component;
use wasmtime::error::Context;
use wasmtime::{Engine, Result};

/// Where a compiled component came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Compiled {
    /// Compiled now (and written to the cache, when there is one).
    Now,
    /// Deserialized from the cache.
    FromCache,
}
/// Loads the compiled form of `wasm` (whose digest is `digest`) from
/// `cache`, or compiles it and writes it there.
///
/// Invariant: a cache entry is named by the component's digest and the
/// engine's compatibility hash, and published by rename from a staging
/// file no other compile (of any thread or process) writes, so an entry
/// is whole and loaded only by an engine that can run it.
pub fn load_or_compile(
    engine: &Engine,
    wasm: &[u8],
    digest: &str,
    cache: Option<&Path>,
) -> Result<(Component, Compiled)> {
    let Some(dir) = cache else {
        let component = Component::new(engine, wasm).context("compile the component")?;
        return Ok((component, Compiled::Now));
    };
    let path = cache_path(engine, dir, digest);
    if path.exists() {
        // SAFETY: the file was written by `precompile_component` of an engine
        // with the same compatibility hash (part of its name), and the cache
        // directory belongs to this host.
        if let Ok(component) = unsafe { Component::deserialize_file(engine, &path) } {
            return Ok((component, Compiled::FromCache));
        }
    }
    let compiled = engine
        .precompile_component(wasm)
        .context("compile the component")?;
    std::fs::create_dir_all(dir).context("create the compile cache")?;
    static STAGED: AtomicU64 = AtomicU64::new(0);
    let staging = path.with_extension(format!(
        "{}-{}.tmp",
        std::process::id(),
        STAGED.fetch_add(1, Ordering::Relaxed)
    ));
    std::fs::write(&staging, &compiled).context("write the compile cache")?;
    std::fs::rename(&staging, &path).context("publish the compile cache entry")?;
    // SAFETY: produced just above by this engine.
    let component = unsafe { Component::deserialize(engine, &compiled) }
        .context("load the compiled component")?;
    Ok((component, Compiled::Now))
}

pub fn cache_path(engine: &Engine, dir: &Path, digest: &str) -> PathBuf {
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    engine.precompile_compatibility_hash().hash(&mut hasher);
    let hex = digest.trim_start_matches("sha256:");
    dir.join(format!("{}-{:016x}.cwasm", &hex[..32], hasher.finish()))
}
