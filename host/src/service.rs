//! A hosted service: its loaded component (swappable while requests run),
//! its shared environment and its instance budget.

use crate::bindings::{ServiceIdentity, ServiceIndices, ServicePre};
use crate::capabilities::{RequestState, ServiceEnv};
use crate::engine::{self, EPOCH_TICK, MAX_INSTANCE_MEMORY};
use crate::memory::MemoryLimiter;
use crate::metrics::Metrics;
use std::path::PathBuf;
use std::sync::{Arc, RwLock};
use std::time::{Duration, Instant};
use tokio::sync::{Semaphore, SemaphorePermit};
use wasmtime::component::{ComponentExportIndex, Linker};
use wasmtime::error::Context;
use wasmtime::Result;
use wasmtime::{Engine, Store, UpdateDeadline};

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
    /// The component's exports, resolved once so that a request's instance
    /// is bound to them without looking them up by name.
    indices: ServiceIndices,
    pub digest: Arc<str>,
    pub identity: ServiceIdentity,
    /// The component's `socket.call`, when it exports `socket`.
    pub socket: Option<ComponentExportIndex>,
}

/// The export name of the socket interface (`wit/`, `socket`).
const SOCKET_EXPORT: &str = "lab:platform/socket@0.1.0";

/// `socket.call` of a component, when it exports the interface.
fn socket_export(pre: &ServicePre<RequestState>) -> Option<ComponentExportIndex> {
    let component = pre.instance_pre().component();
    let interface = component.get_export_index(None, SOCKET_EXPORT)?;
    component.get_export_index(Some(&interface), "call")
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
    budget: InstanceBudget,
    /// One reload at a time: the pool holds one prepare's instances per
    /// service (design.md, "Limits" 3).
    reloading: tokio::sync::Mutex<()>,
}

/// How many instances of one service may run at once, and how long a
/// request waits for one (design.md, "Limits" 3).
#[derive(Debug, Clone, Copy)]
pub struct InstanceLimits {
    /// Instances for requests of any route.
    pub requests: u32,
    /// Instances kept for the operational routes beyond `requests`.
    pub operational: u32,
    pub wait: Duration,
}

impl InstanceLimits {
    /// Pool slots one service needs: each admitted request's instance and
    /// the instance of another service it may be calling, and the same for
    /// one `prepare`.
    pub fn pool_slots(&self) -> u32 {
        (self.requests + self.operational + 1) * 2
    }
}

/// A top-level request's hold while it is served: its budget's permit, and
/// its place among the requests the store's writer may wait for.
pub struct Admitted<'a> {
    _permit: SemaphorePermit<'a>,
    _serving: Option<crate::kv::Serving<'a>>,
}

struct InstanceBudget {
    requests: Semaphore,
    operational: Semaphore,
    wait: Duration,
}

/// What a request is admitted as.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Admission {
    /// A request of the service's listener: one of its budget's instances.
    Request,
    /// `GET /livez` or `GET /healthz`: one of the budget's instances if one
    /// is free at once, else one kept for these routes.
    Operational,
    /// A call from another service's instance, which holds an admission
    /// that covers it (a calling instance makes one call at a time, and an
    /// instance answering a call makes none).
    Nested,
}

/// The message of a request refused for want of an instance.
pub const NO_INSTANCE: &str = "every instance of the service is busy";
/// The message of a request refused for want of memory.
pub const NO_MEMORY: &str = "the host's memory for requests is in use";

/// Why no instance was made.
#[derive(Debug)]
pub enum InstanceError {
    /// No instance of the budget, or no memory for one, came free in time:
    /// [`NO_INSTANCE`] or [`NO_MEMORY`].
    Unavailable(&'static str),
    Failed(wasmtime::Error),
}

impl std::fmt::Display for InstanceError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            InstanceError::Unavailable(why) => f.write_str(why),
            InstanceError::Failed(e) => write!(f, "{e:#}"),
        }
    }
}

impl std::error::Error for InstanceError {}

/// An instantiated component with its per-request store.
pub struct Instance {
    pub store: Store<RequestState>,
    pub service: crate::bindings::Service,
    /// The instance itself, for exports looked up by name.
    pub instance: wasmtime::component::Instance,
    /// Its component's `socket.call`, if any.
    pub socket: Option<ComponentExportIndex>,
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
        limits: InstanceLimits,
    ) -> Result<Service> {
        let wasm = read_source(&source)?;
        let prepared = engine::prepare(&engine, &linker, &wasm, cache.as_deref())?;
        let digest: Arc<str> = prepared.digest.into();
        let identity = identify_and_prepare(&engine, &env, &prepared.pre, &digest).await?;
        let loaded = Loaded {
            socket: socket_export(&prepared.pre),
            indices: ServiceIndices::new(prepared.pre.instance_pre())?,
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
            budget: InstanceBudget {
                requests: Semaphore::new(limits.requests as usize),
                operational: Semaphore::new(limits.operational as usize),
                wait: limits.wait,
            },
            reloading: tokio::sync::Mutex::new(()),
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
        let _one_reload = self.reloading.lock().await;
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
        self.install(Loaded {
            socket: socket_export(&prepared.pre),
            indices: ServiceIndices::new(prepared.pre.instance_pre())?,
            pre: prepared.pre,
            digest: Arc::clone(&digest),
            identity,
        });
        Ok(digest.to_string())
    }

    /// A fresh instance of the current component, admitted as `admission`;
    /// the admission (none for a nested call) is the request's for as long as
    /// the instance lives.
    pub async fn instantiate(
        &self,
        admission: Admission,
    ) -> Result<(Instance, Option<Admitted<'_>>), InstanceError> {
        let permit = match admission {
            Admission::Nested => None,
            Admission::Request => Some(self.admit(&self.budget.requests).await?),
            Admission::Operational => Some(match self.budget.requests.try_acquire() {
                Ok(permit) => permit,
                Err(_) => self.admit(&self.budget.operational).await?,
            }),
        };
        let permit = permit.map(|permit| Admitted {
            _permit: permit,
            _serving: self.env.kv.serve(),
        });
        let loaded = self.loaded();
        let started = Instant::now();
        let nested = admission == Admission::Nested;
        let mut store = new_store(&self.engine, &self.env, Arc::clone(&loaded.digest), nested);
        let instance = loaded
            .pre
            .instance_pre()
            .instantiate_async(&mut store)
            .await
            .map_err(|e| {
                if store.data().limits.denied() {
                    InstanceError::Unavailable(NO_MEMORY)
                } else {
                    InstanceError::Failed(e)
                }
            })?;
        let service = loaded
            .indices
            .load(&mut store, &instance)
            .map_err(InstanceError::Failed)?;
        self.metrics.observe_instantiation(started.elapsed());
        let instance = Instance {
            store,
            service,
            instance,
            socket: loaded.socket,
        };
        Ok((instance, permit))
    }

    /// A permit of `pool`, waited for at most the budget's wait.
    async fn admit<'a>(&self, pool: &'a Semaphore) -> Result<SemaphorePermit<'a>, InstanceError> {
        // A free permit is taken without arming the wait's timer.
        if let Ok(permit) = pool.try_acquire() {
            return Ok(permit);
        }
        match tokio::time::timeout(self.budget.wait, pool.acquire()).await {
            Ok(Ok(permit)) => Ok(permit),
            Ok(Err(closed)) => Err(InstanceError::Failed(closed.into())),
            Err(_) => Err(InstanceError::Unavailable(NO_INSTANCE)),
        }
    }
}

/// A store for one instance, limited like every request's.
fn new_store(
    engine: &Engine,
    env: &Arc<ServiceEnv>,
    digest: Arc<str>,
    nested: bool,
) -> Store<RequestState> {
    let limits = MemoryLimiter::new(Arc::clone(&env.memory), MAX_INSTANCE_MEMORY);
    let state = RequestState::new(Arc::clone(env), digest, limits, nested);
    let mut store = Store::new(engine, state);
    store.limiter_async(|s| &mut s.limits);
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
/// Invariant: no component serves a request in the clock second its
/// process started in (the start waits here after its last `prepare`), so
/// a component may refuse whatever is timestamped at or before that second
/// (the coordination service's `host-started`) without refusing anything
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
