//! A hosted service: its loaded component (swappable while requests run),
//! its shared environment and its instance budget.

use crate::bindings::{ServiceIdentity, ServicePre};
use crate::capabilities::{RequestState, ServiceEnv};
use crate::engine::{self, EPOCH_TICK, MAX_INSTANCE_MEMORY};
use crate::metrics::Metrics;
use std::path::PathBuf;
use std::sync::{Arc, RwLock};
use std::time::Instant;
use tokio::sync::Semaphore;
use wasmtime::component::Linker;
use wasmtime::error::Context;
use wasmtime::Result;
use wasmtime::{Engine, Store, StoreLimitsBuilder, UpdateDeadline};

/// Where a service's component comes from.
#[derive(Debug, Clone)]
pub enum ComponentSource {
    /// Built into the host binary.
    Embedded(&'static [u8]),
    /// A file, read at start and again on every reload.
    File(PathBuf),
}

/// A component ready to serve: linked, with the identity it reported.
pub struct Loaded {
    pub pre: ServicePre<RequestState>,
    pub digest: Arc<str>,
    pub identity: ServiceIdentity,
}

/// One service as the listeners see it.
pub struct Service {
    pub name: &'static str,
    pub env: Arc<ServiceEnv>,
    pub metrics: Arc<Metrics>,
    engine: Engine,
    linker: Linker<RequestState>,
    source: ComponentSource,
    cache: Option<PathBuf>,
    /// The component new requests start on. A request holds its own `Arc`,
    /// so a swap never disturbs requests in flight.
    current: RwLock<Arc<Loaded>>,
    /// One permit per pool slot: requests beyond it wait instead of failing.
    slots: Semaphore,
}

/// An instantiated component with its per-request store.
pub struct Instance {
    pub store: Store<RequestState>,
    pub service: crate::bindings::Service,
}

impl Service {
    /// Loads the component from `source`, asks it who it is and lets it
    /// prepare; fails before any listener is bound when it is unusable.
    pub async fn start(
        env: Arc<ServiceEnv>,
        metrics: Arc<Metrics>,
        engine: Engine,
        linker: Linker<RequestState>,
        source: ComponentSource,
        cache: Option<PathBuf>,
        slots: u32,
    ) -> Result<Service> {
        let wasm = read_source(&source)?;
        let prepared = engine::prepare(&engine, &linker, &wasm, cache.as_deref())?;
        let digest: Arc<str> = prepared.digest.into();
        let identity = identify_and_prepare(&engine, &env, &prepared.pre, &digest).await?;
        let loaded = Loaded {
            pre: prepared.pre,
            digest,
            identity,
        };
        Ok(Service {
            name: env.service,
            env,
            metrics,
            engine,
            linker,
            source,
            cache,
            current: RwLock::new(Arc::new(loaded)),
            slots: Semaphore::new(slots as usize),
        })
    }

    fn install(&self, loaded: Loaded) {
        *self.current.write().unwrap() = Arc::new(loaded);
    }

    /// The component new requests start on.
    pub fn loaded(&self) -> Arc<Loaded> {
        Arc::clone(&self.current.read().unwrap())
    }

    /// Reads the component again from its source, compiles, links and
    /// identifies it, then makes it current. In-flight requests finish on
    /// the component they started on. Returns the new digest.
    pub async fn reload(self: &Arc<Self>) -> Result<String> {
        let ComponentSource::File(path) = &self.source else {
            wasmtime::bail!("this service runs its built-in component; start it with a component path to reload");
        };
        let path = path.clone();
        let this = Arc::clone(self);
        let prepared = tokio::task::spawn_blocking(move || {
            let wasm = std::fs::read(&path).with_context(|| format!("read {}", path.display()))?;
            engine::prepare(&this.engine, &this.linker, &wasm, this.cache.as_deref())
        })
        .await??;
        let digest: Arc<str> = prepared.digest.into();
        let identity =
            identify_and_prepare(&self.engine, &self.env, &prepared.pre, &digest).await?;
        into_a_later_second().await;
        self.install(Loaded {
            pre: prepared.pre,
            digest: Arc::clone(&digest),
            identity,
        });
        Ok(digest.to_string())
    }

    /// A fresh instance of the current component, once a pool slot is free.
    /// `nested`: the instance answers another service's call.
    pub async fn instantiate(
        &self,
        nested: bool,
    ) -> Result<(Instance, tokio::sync::SemaphorePermit<'_>)> {
        let permit = self
            .slots
            .acquire()
            .await
            .context("the service is shutting down")?;
        let loaded = self.loaded();
        let started = Instant::now();
        let mut store = new_store(&self.engine, &self.env, Arc::clone(&loaded.digest), nested);
        let service = loaded.pre.instantiate_async(&mut store).await?;
        self.metrics.observe_instantiation(started.elapsed());
        Ok((Instance { store, service }, permit))
    }
}

/// A store for one instance, limited like every request's.
fn new_store(
    engine: &Engine,
    env: &Arc<ServiceEnv>,
    digest: Arc<str>,
    nested: bool,
) -> Store<RequestState> {
    let limits = StoreLimitsBuilder::new()
        .memory_size(MAX_INSTANCE_MEMORY)
        .instances(64)
        .build();
    let state = RequestState::new(Arc::clone(env), digest, limits, nested);
    let mut store = Store::new(engine, state);
    store.limiter(|s| &mut s.limits);
    // Each epoch tick that finds the instance running WebAssembly counts
    // against its compute budget and yields its thread to other requests;
    // time spent waiting in host calls counts as at most one tick, so a slow
    // upload is never cut short. Past the budget the instance traps (500).
    let budget = env.compute_limit.as_millis() / EPOCH_TICK.as_millis();
    let mut ticks = 0u128;
    store.set_epoch_deadline(1);
    store.epoch_deadline_callback(move |_| {
        ticks += 1;
        Ok(if ticks > budget {
            UpdateDeadline::Interrupt
        } else {
            UpdateDeadline::Yield(1)
        })
    });
    store
}

/// Waits until the wall clock is in a later second than now.
///
/// Invariant: a component never serves a request in the clock second its
/// `prepare` ran in, so a component may refuse whatever is timestamped at
/// or before the second it recorded in `prepare` without refusing anything
/// a client signed after it started serving.
pub async fn into_a_later_second() {
    let since_epoch = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default();
    let left = std::time::Duration::from_secs(1).saturating_sub(std::time::Duration::from_nanos(
        since_epoch.subsec_nanos().into(),
    ));
    tokio::time::sleep(left + std::time::Duration::from_millis(1)).await;
}

/// Asks a freshly loaded component who it is, then lets it prepare its
/// durable state.
async fn identify_and_prepare(
    engine: &Engine,
    env: &Arc<ServiceEnv>,
    pre: &ServicePre<RequestState>,
    digest: &Arc<str>,
) -> Result<ServiceIdentity> {
    let mut store = new_store(engine, env, Arc::clone(digest), false);
    let instance = pre.instantiate_async(&mut store).await?;
    let handler = instance.lab_platform_handler();
    let identity = handler
        .call_identity(&mut store)
        .await
        .context("the component's `identity` failed")?;
    if identity.service != env.service {
        wasmtime::bail!(
            "the component serves `{}`, not `{}`",
            identity.service,
            env.service
        );
    }
    handler
        .call_prepare(&mut store)
        .await
        .context("the component's `prepare` trapped")?
        .map_err(|e| wasmtime::format_err!("the component could not prepare: {e}"))?;
    Ok(identity)
}

fn read_source(source: &ComponentSource) -> Result<Vec<u8>> {
    match source {
        ComponentSource::Embedded(bytes) => Ok(bytes.to_vec()),
        ComponentSource::File(path) => {
            std::fs::read(path).with_context(|| format!("read the component {}", path.display()))
        }
    }
}
