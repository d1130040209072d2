//! The wasmtime engine, the linker and compiled components: built once at
//! start (and at hot swap), never per request.

use crate::bindings::{
    advances, blobs, body, clock, config, crypto, ids, kv, log, replay, runtime, services,
    subscriptions, tools, types, ServicePre,
};
use crate::capabilities::RequestState;
use crate::settings::GuestProfiler;
use lab_tool_runner::compile::load_or_compile;
pub use lab_tool_runner::epoch::{EpochTicker, EPOCH_TICK};
use sha2::{Digest, Sha256};
use std::path::Path;
use wasmtime::component::{Component, HasSelf, Linker};
use wasmtime::error::Context;
use wasmtime::Result;
use wasmtime::{
    Config, Enabled, Engine, InstanceAllocationStrategy, PoolingAllocationConfig, ProfilingStrategy,
};

/// Largest linear memory a service instance may grow to.
pub const MAX_INSTANCE_MEMORY: usize = 256 << 20;

/// The engine for service components, with a pool of `slots` instances,
/// each keeping `base_memory` bytes resident between requests.
pub fn engine(slots: u32, base_memory: usize, profiler: GuestProfiler) -> Result<Engine> {
    let mut pool = PoolingAllocationConfig::default();
    pool.total_component_instances(slots)
        .total_core_instances(slots * 8)
        .total_memories(slots * 2)
        .total_tables(slots * 4)
        .total_stacks(slots)
        .max_memory_size(MAX_INSTANCE_MEMORY)
        // Reusing a slot keeps its base resident and resets it in place;
        // returning it to the kernel and faulting it back costs more. Pages
        // beyond the base go back to the kernel (design.md, "Limits" 5).
        .linear_memory_keep_resident(base_memory)
        .table_keep_resident(64 << 10)
        .pagemap_scan(Enabled::Auto);
    let mut config = Config::new();
    config
        .wasm_component_model(true)
        .epoch_interruption(true)
        .allocation_strategy(InstanceAllocationStrategy::Pooling(pool))
        .profiler(match profiler {
            GuestProfiler::None => ProfilingStrategy::None,
            GuestProfiler::Perfmap => ProfilingStrategy::PerfMap,
        });
    Engine::new(&config).context("create the wasmtime engine")
}

/// The linker every service component is instantiated against: WASI (with
/// nothing granted) and every interface of `wit/`.
pub fn linker(engine: &Engine) -> Result<Linker<RequestState>> {
    let mut linker = Linker::new(engine);
    wasmtime_wasi::p2::add_to_linker_async(&mut linker)?;
    type Own = HasSelf<RequestState>;
    types::add_to_linker::<_, Own>(&mut linker, |s| s)?;
    body::add_to_linker::<_, Own>(&mut linker, |s| s)?;
    blobs::add_to_linker::<_, Own>(&mut linker, |s| s)?;
    kv::add_to_linker::<_, Own>(&mut linker, |s| s)?;
    clock::add_to_linker::<_, Own>(&mut linker, |s| s)?;
    ids::add_to_linker::<_, Own>(&mut linker, |s| s)?;
    log::add_to_linker::<_, Own>(&mut linker, |s| s)?;
    runtime::add_to_linker::<_, Own>(&mut linker, |s| s)?;
    config::add_to_linker::<_, Own>(&mut linker, |s| s)?;
    crypto::add_to_linker::<_, Own>(&mut linker, |s| s)?;
    replay::add_to_linker::<_, Own>(&mut linker, |s| s)?;
    services::add_to_linker::<_, Own>(&mut linker, |s| s)?;
    tools::add_to_linker::<_, Own>(&mut linker, |s| s)?;
    advances::add_to_linker::<_, Own>(&mut linker, |s| s)?;
    subscriptions::add_to_linker::<_, Own>(&mut linker, |s| s)?;
    Ok(linker)
}

/// A compiled, linked component and the digest of its bytes.
pub struct Prepared {
    pub pre: ServicePre<RequestState>,
    pub digest: String,
}

/// Compiles `wasm` (or loads its compiled form from `cache`) and links it.
pub fn prepare(
    engine: &Engine,
    linker: &Linker<RequestState>,
    wasm: &[u8],
    cache: Option<&Path>,
) -> Result<Prepared> {
    let digest = format!("sha256:{}", hex::encode(Sha256::digest(wasm)));
    let component = compile_cached(engine, wasm, &digest, cache)?;
    let instance_pre = linker
        .instantiate_pre(&component)
        .context("link the component against the host's interfaces")?;
    let pre = ServicePre::new(instance_pre).context("the component does not export `handler`")?;
    Ok(Prepared { pre, digest })
}

fn compile_cached(
    engine: &Engine,
    wasm: &[u8],
    digest: &str,
    cache: Option<&Path>,
) -> Result<Component> {
    load_or_compile(engine, wasm, digest, cache).map(|(component, _)| component)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A component imports only the interfaces it calls: the bytes service
    /// never sees the key-value store.
    #[test]
    fn the_bytes_component_imports_only_what_it_uses() {
        let engine = engine(4, 4 << 20, GuestProfiler::None).unwrap();
        let component = Component::new(&engine, crate::components::BYTES).unwrap();
        let ty = component.component_type();
        let imports: Vec<String> = ty
            .imports(&engine)
            .map(|(name, _)| name.to_string())
            .collect();
        assert!(
            imports.iter().any(|i| i.starts_with("lab:platform/blobs")),
            "{imports:?}"
        );
        assert!(
            !imports.iter().any(|i| i.starts_with("lab:platform/kv")),
            "{imports:?}"
        );
        assert!(
            !imports.iter().any(|i| i.starts_with("wasi:sockets")),
            "{imports:?}"
        );
        let exports: Vec<String> = ty
            .exports(&engine)
            .map(|(name, _)| name.to_string())
            .collect();
        assert!(
            exports
                .iter()
                .any(|e| e.starts_with("lab:platform/handler")),
            "{exports:?}"
        );
    }
}
