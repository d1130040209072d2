//! The host side of the capability interfaces a component imports.
//!
//! Every request gets a fresh [`RequestState`]; what outlives a request (the
//! blob store, the build facts, the loaded component's digest) sits in the
//! shared [`ServiceEnv`].

mod blobs;
mod body;
mod config;
mod crypto;
mod events;
mod kv;
mod replay;
mod services;
mod tools;

pub use blobs::PendingBlob;
pub use config::ServiceConfig;

use crate::bindings::{clock, ids, log, runtime, types};
use crate::blobstore::{self, BlobStore};
use std::sync::Arc;
use wasmtime::component::ResourceTable;
use wasmtime::Result;
use wasmtime_wasi::{WasiCtx, WasiCtxView, WasiView};

/// What every request of one service shares.
pub struct ServiceEnv {
    pub service: &'static str,
    pub blobs: Arc<BlobStore>,
    pub blob_cap: u64,
    /// The service's key-value namespace.
    pub kv: crate::kv::Namespace,
    /// The service's replay table (`replay`): kept across reloads.
    pub replay: Arc<crate::replay::Replay>,
    /// The deployment's storage headroom and totals (shared by every
    /// service).
    pub storage: Arc<crate::storage::Storage>,
    /// The other services of the deployment, reachable through `services`.
    pub peers: Arc<Peers>,
    /// The deployment's settings for this service (`config`).
    pub config: Arc<ServiceConfig>,
    /// WebAssembly compute one request may use before its instance traps.
    pub compute_limit: std::time::Duration,
    /// The service engine's epoch, which that limit is counted in.
    pub ticker: lab_tool_runner::epoch::EpochTicker,
    /// Instance memory beyond each instance's base, shared by every service.
    pub memory: Arc<crate::memory::MemoryBudget>,
    /// Largest answer `services.call` reads whole.
    pub max_call_answer: usize,
    /// Longest wait for the next bytes of a request body.
    pub body_read_timeout: std::time::Duration,
    /// The tool runner, for the coordination service only (`tools`).
    pub tools: Option<Arc<crate::tools::Runner>>,
    /// Where the journal service's announces go (`advances`), for the
    /// journal service only.
    pub feed: Option<Arc<crate::events::Feed>>,
    /// The process's subscriptions (`subscriptions`), for the coordination
    /// service only.
    pub hub: Option<Arc<crate::events::Hub>>,
}

/// Every service of the deployment by name: hosted here, or reached over
/// HTTP. Filled as the deployment starts: the remotes first, then each
/// hosted service once it is loaded, so a service preparing itself reaches
/// every remote and every service started before it. A name, once added,
/// keeps its peer.
#[derive(Default)]
pub struct Peers(std::sync::RwLock<std::collections::HashMap<String, Peer>>);

/// Where a service of the deployment answers.
#[derive(Clone)]
pub enum Peer {
    Local(Arc<crate::service::Service>),
    Remote(crate::remote::Remote),
}

impl Peers {
    /// Adds `peer` under `name`; false (and nothing changed) when the name
    /// is taken.
    pub fn add(&self, name: &str, peer: Peer) -> bool {
        let mut peers = self.0.write().unwrap();
        if peers.contains_key(name) {
            return false;
        }
        peers.insert(name.to_string(), peer);
        true
    }

    pub fn get(&self, name: &str) -> Option<Peer> {
        self.0.read().unwrap().get(name).cloned()
    }
}

/// The store data of one request.
pub struct RequestState {
    pub table: ResourceTable,
    pub limits: crate::memory::MemoryLimiter,
    wasi: WasiCtx,
    env: Arc<ServiceEnv>,
    digest: Arc<str>,
    /// Write transactions this request holds open (at most one: a second
    /// would wait behind the first forever).
    open_writes: u32,
    /// Whether this instance answers another service's call (it may then
    /// make none itself).
    nested: bool,
    /// Whether the handler may leave its answer to a batch's outcome, and
    /// the batch it left it to.
    answer: AnswerSlot,
    /// The signatures verified on the connection whose request (or socket
    /// call) this instance answers; none for a nested call.
    pub verified: Option<Arc<crate::verified::Verified>>,
    /// Keeps the engine's epoch advancing while this instance lives.
    _ticking: lab_tool_runner::epoch::Ticking,
}

impl RequestState {
    pub fn new(
        env: Arc<ServiceEnv>,
        digest: Arc<str>,
        limits: crate::memory::MemoryLimiter,
        nested: bool,
    ) -> Self {
        RequestState {
            table: ResourceTable::new(),
            limits,
            // No preopens, no environment, no network, no inherited stdio.
            wasi: WasiCtx::builder().build(),
            digest,
            open_writes: 0,
            nested,
            answer: AnswerSlot::Immediate,
            verified: None,
            _ticking: env.ticker.ticking(),
            env,
        }
    }
}

/// Where a handler's answer comes from.
enum AnswerSlot {
    /// From the handler alone: no handler is answering an HTTP request or
    /// a call (a socket's call, `prepare`), so nothing would take a
    /// deferred answer.
    Immediate,
    /// From the handler, which may leave it to a batch's outcome.
    Open,
    /// From the outcome of this batch (`kv.submit-sequenced`).
    Deferred(Box<crate::deferred::Deferred>),
}

impl RequestState {
    /// Lets the handler about to run leave its answer to a batch's outcome;
    /// the caller takes the batch with [`RequestState::take_deferred`]
    /// once the handler has returned.
    pub fn allow_deferred(&mut self) {
        self.answer = AnswerSlot::Open;
    }

    /// The batch the handler left its answer to, if any.
    pub fn take_deferred(&mut self) -> Option<crate::deferred::Deferred> {
        match std::mem::replace(&mut self.answer, AnswerSlot::Immediate) {
            AnswerSlot::Deferred(deferred) => Some(*deferred),
            _ => None,
        }
    }
}

impl WasiView for RequestState {
    fn ctx(&mut self) -> WasiCtxView<'_> {
        WasiCtxView {
            ctx: &mut self.wasi,
            table: &mut self.table,
        }
    }
}

impl types::Host for RequestState {}

impl clock::Host for RequestState {
    async fn now(&mut self) -> Result<types::Instant> {
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap_or_default();
        Ok(types::Instant {
            seconds: now.as_secs(),
            nanoseconds: now.subsec_nanos(),
        })
    }
}

impl ids::Host for RequestState {
    async fn random_bytes(&mut self, n: u8) -> Result<Vec<u8>> {
        let mut bytes = vec![0u8; usize::from(n.min(64))];
        blobstore::getrandom(&mut bytes);
        Ok(bytes)
    }
}

impl log::Host for RequestState {
    async fn emit(&mut self, level: log::Level, message: String) -> Result<()> {
        let service = self.env.service;
        match level {
            log::Level::Trace => tracing::trace!(target: "component", service, "{message}"),
            log::Level::Debug => tracing::debug!(target: "component", service, "{message}"),
            log::Level::Info => tracing::info!(target: "component", service, "{message}"),
            log::Level::Warn => tracing::warn!(target: "component", service, "{message}"),
            log::Level::Error => tracing::error!(target: "component", service, "{message}"),
        }
        Ok(())
    }
}

impl runtime::Host for RequestState {
    async fn build(&mut self) -> Result<runtime::BuildInfo> {
        Ok(runtime::BuildInfo {
            revision: env!("LAB_BUILD_REVISION").to_string(),
            dirty: env!("LAB_BUILD_DIRTY") == "true",
            toolchain: env!("LAB_BUILD_TOOLCHAIN").to_string(),
        })
    }

    async fn component_digest(&mut self) -> Result<String> {
        Ok(self.digest.to_string())
    }

    async fn blob_cap(&mut self) -> Result<u64> {
        Ok(self.env.blob_cap)
    }

    async fn storage_headroom(&mut self) -> Result<Result<(), String>> {
        Ok(self.env.storage.headroom())
    }
}
