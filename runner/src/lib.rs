//! The tool sandbox: runs of configured releases (`contracts/coordination/TOOLS.md`,
//! design.md "Tool runs"). `labd` runs releases with it for the
//! coordination service; `labctl reproduce-application` runs an attested
//! release with it locally, so both get the same sandbox.
//!
//! - [`release`]: what a release's description grants, and the check of
//!   its component's imports;
//! - [`limits`]: per-run limits and the memory limiter;
//! - [`run`]: the store data of a run and the tool world's host side;
//! - [`store`]: where inputs come from and outputs go;
//! - [`compile`]: compiled components, cached on disk, and the epoch;
//! - [`bindings`]: the host bindings of `wit/tool/`.
//!
//! A release is compiled once, at configuration, on the runner's own engine
//! (fuel on, no pooling), and its compiled form is cached on disk under its
//! digest and the engine's compatibility hash. Each run is a fresh instance
//! in a fresh store.

pub mod bindings;
pub mod compile;
pub mod epoch;
pub mod limits;
pub mod release;
pub mod run;
pub mod store;
#[cfg(test)]
mod tests;

pub use limits::{Limit, RunLimits};
pub use release::{Effect, ReleaseError, ReleaseTerms};
pub use run::getrandom;
pub use store::{
    Digest32, InputBytes, InputSource, MemoryStore, OutputSink, OutputWriter, WriteError,
};

use bindings::ToolWithEffectsPre;
use compile::Compiled;
use epoch::EpochTicker;
use limits::RunMemory;
use run::{BoundInput, OutputRules, RunState};
use sha2::{Digest, Sha256};
use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::sync::Semaphore;
use wasmtime::component::{HasSelf, Linker};
use wasmtime::error::Context;
use wasmtime::{Config, Engine, Store, Trap};

/// Longest `tool:` reason kept, in bytes.
const MAX_REASON: usize = 1024;

/// The deployment's settings for runs.
#[derive(Debug, Clone)]
pub struct RunnerSettings {
    pub limits: RunLimits,
    /// Runs at once.
    pub concurrent: u32,
    /// How long a run waits for a free slot before it is refused.
    pub wait: Duration,
    /// Effects releases may be granted.
    pub allowed_effects: Vec<Effect>,
    /// Where compiled releases are kept; none compiles at every start.
    pub cache: Option<PathBuf>,
    /// The deployment's blob cap (no output is larger).
    pub blob_cap: u64,
}

/// A configured release.
struct Release {
    pre: ToolWithEffectsPre<RunState>,
    output_roles: Arc<[String]>,
    digest: Arc<str>,
}

/// An input of a run: committed bytes bound to a role.
#[derive(Debug, Clone)]
pub struct RunInput {
    pub role: String,
    pub blob: Digest32,
    pub type_: String,
}

/// An output of a completed run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunOutput {
    pub role: String,
    pub ordinal: u32,
    pub type_: String,
    pub blob: Digest32,
    pub size: u64,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// Every output committed, in creation order.
    Completed(Vec<RunOutput>),
    /// Why the run failed; nothing it created was named.
    Failed(String),
}

/// What a run used.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Resources {
    pub fuel: u64,
    pub peak_memory: u64,
    pub wall: Duration,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunReport {
    pub outcome: Outcome,
    pub used: Resources,
    pub limits: RunLimits,
}

/// Why no run took place.
#[derive(Debug)]
pub enum RunError {
    UnknownRelease,
    /// The role whose bytes are absent.
    MissingInput(String),
    /// Every slot stayed busy for the deployment's wait.
    Unavailable,
    /// The host failed (reading an input, instantiating).
    Host(String),
}

impl std::fmt::Display for RunError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            RunError::UnknownRelease => f.write_str("no release with that component is configured"),
            RunError::MissingInput(role) => write!(f, "the input `{role}` names no committed blob"),
            RunError::Unavailable => f.write_str("every tool run slot is busy"),
            RunError::Host(what) => write!(f, "the host failed: {what}"),
        }
    }
}

impl std::error::Error for RunError {}

/// How often configuring a release compiled it or found it in the cache.
#[derive(Debug, Default)]
pub struct CacheCounts {
    pub compiled: AtomicU64,
    pub from_cache: AtomicU64,
}

/// Runs configured releases under the deployment's limits.
pub struct Runner {
    engine: Engine,
    ticker: EpochTicker,
    linker: Linker<RunState>,
    releases: HashMap<String, Release>,
    settings: RunnerSettings,
    slots: Semaphore,
    inputs: Arc<dyn InputSource>,
    outputs: Arc<dyn OutputSink>,
    pub cache_counts: CacheCounts,
    /// Runs that got a slot and were started.
    pub runs: AtomicU64,
}

impl Runner {
    /// The engine releases are compiled for.
    pub fn engine(&self) -> &Engine {
        &self.engine
    }

    /// Run slots free now.
    pub fn free_slots(&self) -> usize {
        self.slots.available_permits()
    }

    /// A runner with no release yet, reading inputs from `inputs` and
    /// writing outputs to `outputs`; its engine's epoch ticks from now on.
    pub fn new(
        settings: RunnerSettings,
        inputs: Arc<dyn InputSource>,
        outputs: Arc<dyn OutputSink>,
    ) -> wasmtime::Result<Runner> {
        let mut config = Config::new();
        config
            .wasm_component_model(true)
            .consume_fuel(true)
            .epoch_interruption(true);
        let engine = Engine::new(&config).context("create the tool engine")?;
        let ticker = EpochTicker::start(&engine)?;
        let mut linker = Linker::new(&engine);
        type Own = HasSelf<RunState>;
        use bindings::lab::tool::{clock, inputs, log, outputs, random};
        inputs::add_to_linker::<_, Own>(&mut linker, |s| s)?;
        outputs::add_to_linker::<_, Own>(&mut linker, |s| s)?;
        log::add_to_linker::<_, Own>(&mut linker, |s| s)?;
        // Linked for every release; only those whose description declares
        // them (and whose deployment allows them) get past `configure`.
        clock::add_to_linker::<_, Own>(&mut linker, |s| s)?;
        random::add_to_linker::<_, Own>(&mut linker, |s| s)?;
        Ok(Runner {
            engine,
            ticker,
            linker,
            releases: HashMap::new(),
            slots: Semaphore::new(settings.concurrent as usize),
            settings,
            inputs,
            outputs,
            cache_counts: CacheCounts::default(),
            runs: AtomicU64::new(0),
        })
    }

    /// Checks a release (its description's effects and egress against the
    /// deployment, its component's imports against the description),
    /// compiles it (or loads it from the cache) and keeps it under its
    /// component digest, which it returns.
    pub fn configure(&mut self, description: &str, wasm: &[u8]) -> Result<String, ReleaseError> {
        let terms = ReleaseTerms::read(description, &self.settings.allowed_effects)?;
        let digest = format!("sha256:{}", hex::encode(Sha256::digest(wasm)));
        let component_error = |e: wasmtime::Error| ReleaseError::Component(format!("{e:#}"));
        let (component, compiled) =
            compile::load_or_compile(&self.engine, wasm, &digest, self.settings.cache.as_deref())
                .map_err(component_error)?;
        let counter = match compiled {
            Compiled::Now => &self.cache_counts.compiled,
            Compiled::FromCache => &self.cache_counts.from_cache,
        };
        counter.fetch_add(1, Ordering::Relaxed);
        terms.check_imports(&self.engine, &component)?;
        let pre = self
            .linker
            .instantiate_pre(&component)
            .map_err(component_error)?;
        let pre = ToolWithEffectsPre::new(pre).map_err(component_error)?;
        self.releases.insert(
            digest.clone(),
            Release {
                pre,
                output_roles: terms.output_roles.into(),
                digest: digest.as_str().into(),
            },
        );
        Ok(digest)
    }

    /// Runs the release whose component digest is `release` once.
    pub async fn run(
        &self,
        release: &str,
        inputs: Vec<RunInput>,
        recipe: String,
    ) -> Result<RunReport, RunError> {
        let release = self.releases.get(release).ok_or(RunError::UnknownRelease)?;
        let mut bound = Vec::with_capacity(inputs.len());
        for input in inputs {
            let reader = self
                .inputs
                .open(&input.blob)
                .map_err(|e| RunError::Host(format!("open the input `{}`: {e}", input.role)))?
                .ok_or_else(|| RunError::MissingInput(input.role.clone()))?;
            bound.push(BoundInput {
                role: input.role,
                type_: input.type_,
                reader,
            });
        }
        let _slot = match tokio::time::timeout(self.settings.wait, self.slots.acquire()).await {
            Ok(Ok(slot)) => slot,
            Ok(Err(closed)) => return Err(RunError::Host(closed.to_string())),
            Err(_) => return Err(RunError::Unavailable),
        };
        self.runs.fetch_add(1, Ordering::Relaxed);
        let limits = self.settings.limits;
        let rules = OutputRules {
            roles: Arc::clone(&release.output_roles),
            max_outputs: limits.outputs,
            max_bytes: limits.output_bytes,
            sink: Arc::clone(&self.outputs),
            blob_cap: self.settings.blob_cap,
        };
        let state = RunState::new(
            RunMemory::new(limits.memory),
            bound,
            recipe,
            rules,
            Arc::clone(&release.digest),
        );
        let _ticking = self.ticker.ticking();
        let mut store = Store::new(&self.engine, state);
        store.limiter(|s| &mut s.memory);
        store
            .set_fuel(limits.fuel)
            .map_err(|e| RunError::Host(format!("{e:#}")))?;
        // Every tick yields the thread, so a busy run never holds one, and
        // the wall-clock limit below can end it.
        store.set_epoch_deadline(1);
        store.epoch_deadline_async_yield_and_update(1);
        let started = Instant::now();
        let ended = tokio::time::timeout(limits.wall, async {
            let instance = release.pre.instantiate_async(&mut store).await?;
            instance.lab_tool_run().call_run(&mut store).await
        })
        .await;
        let wall = started.elapsed();
        let fuel = limits.fuel - store.get_fuel().unwrap_or(0);
        let state = store.into_data();
        let used = Resources {
            fuel,
            peak_memory: state.memory.peak as u64,
            wall,
        };
        let outcome = match ended {
            Err(_elapsed) => Outcome::Failed(Limit::WallTime.reason()),
            Ok(Ok(Ok(()))) => commit(state),
            Ok(Ok(Err(message))) => Outcome::Failed(format!("tool: {}", clip(message))),
            Ok(Err(trap)) => Outcome::Failed(failure(&trap, &state)),
        };
        Ok(RunReport {
            outcome,
            used,
            limits,
        })
    }
}

/// Names every output of a run that completed, in creation order.
fn commit(state: RunState) -> Outcome {
    let mut committed = Vec::with_capacity(state.outputs.len());
    for output in state.outputs {
        match output.writer.commit() {
            Ok((blob, size)) => committed.push(RunOutput {
                role: output.role,
                ordinal: output.ordinal,
                type_: output.type_,
                blob,
                size,
            }),
            // The outputs committed before stay as blobs no fact names.
            Err(e) => return Outcome::Failed(format!("storage: {e}")),
        }
    }
    Outcome::Completed(committed)
}

/// The reason of a run that trapped: the limit it passed, if any.
fn failure(trap: &wasmtime::Error, state: &RunState) -> String {
    if let Some(limit) = state.passed {
        return limit.reason();
    }
    if state.memory.denied {
        return Limit::Memory.reason();
    }
    if let Some(role) = &state.undeclared_role {
        return format!("output role `{role}` is not declared by the release");
    }
    match trap.downcast_ref::<Trap>() {
        Some(Trap::OutOfFuel) => Limit::Fuel.reason(),
        Some(trap) => format!("trap: {trap}"),
        None => format!("trap: {trap:#}"),
    }
}

fn clip(mut message: String) -> String {
    if message.len() > MAX_REASON {
        let mut end = MAX_REASON;
        while !message.is_char_boundary(end) {
            end -= 1;
        }
        message.truncate(end);
    }
    message
}
