//! `labd`: the native host of the service components.
//!
//! - [`settings`]: flags and environment variables.
//! - [`engine`]: wasmtime engine, linker, compiled components and their cache.
//! - [`bindings`]: the host side of `wit/`.
//! - [`capabilities`]: what components import (bodies, blobs, kv, clock,
//!   ids, log, runtime, config, services).
//! - [`body`], [`blobstore`], [`kv`]: request and peer bodies, blob files,
//!   the key-value store; [`map_gate`]: read transactions held out while
//!   the store's map grows; [`storage`]: headroom, for health and metrics.
//! - [`service`]: a hosted service, its swappable component and its
//!   instance budget; [`memory`]: the budget of instance memory.
//! - [`dispatch`]: one HTTP request (or one call between services) through
//!   a component; [`parts`], [`relay`]: response bodies out.
//! - [`remote`]: services hosted by another labd.
//! - [`coord`], [`keys`]: the coordination service's settings and keys.
//! - [`tools`]: the sandbox that runs the coordination service's tool
//!   releases.
//! - [`events`]: journal advances and the subscriptions of socket
//!   connections.
//! - [`server`]: listeners and graceful shutdown.
//! - [`socket`]: the socket binding (`GET /v1/ws`) of a component that
//!   exports `socket`.
//! - [`management`], [`metrics`]: the management listener.
//! - [`maintenance`]: `labd backup`, `restore` and `check`; [`backup`],
//!   [`check`], [`kv_snapshot`]: what they do.
//! - [`allocator`]: small blocks from mimalloc, large ones from the system.

mod allocator;
mod backup;
mod bindings;
mod blobstore;
mod body;
mod capabilities;
mod check;
mod clock;
mod coord;
mod deferred;
mod dispatch;
mod durable;
mod engine;
mod events;
mod keys;
mod kv;
mod kv_snapshot;
mod maintenance;
mod management;
mod map_gate;
mod memory;
mod metrics;
mod parts;
mod relay;
mod remote;
mod replay;
mod server;
mod service;
mod settings;
mod socket;
mod storage;
mod tools;
mod verified;

mod components {
    include!(concat!(env!("OUT_DIR"), "/components.rs"));
}

use anyhow::{Context, Result};
use capabilities::{Peer, ServiceConfig, ServiceEnv};
use clap::Parser;
use service::{ComponentSource, Service};
use settings::Settings;
use std::sync::Arc;
use std::time::Duration;
use tokio::net::TcpListener;
use tokio::sync::watch;

fn main() -> Result<std::process::ExitCode> {
    if maintenance::requested() {
        return Ok(maintenance::run());
    }
    let settings = Settings::parse();
    tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::try_new(&settings.log).context("--log")?)
        .with_writer(std::io::stderr)
        .init();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("start the async runtime")?;
    runtime.block_on(run(settings))?;
    Ok(std::process::ExitCode::SUCCESS)
}

/// One service to host: its component and listeners.
struct Plan {
    name: &'static str,
    embedded: &'static [u8],
    component: Option<std::path::PathBuf>,
    listen: std::net::SocketAddr,
    management: std::net::SocketAddr,
}

async fn run(settings: Settings) -> Result<()> {
    durable::create_dir_all(&settings.data_dir)
        .with_context(|| format!("create the data directory {}", settings.data_dir.display()))?;
    let _data_dir_lock = lock_data_dir(&settings.data_dir)?;
    let cache = Some(
        settings
            .cache_dir
            .clone()
            .unwrap_or_else(|| settings.data_dir.join("cache")),
    );
    let instance_limits = service::InstanceLimits {
        requests: settings.max_concurrent_requests,
        operational: settings.operational_instances,
        wait: Duration::from_millis(settings.instance_wait_ms),
    };
    let base_memory = settings.instance_base_memory_mib << 20;
    let memory = memory::MemoryBudget::new(
        settings.memory_budget_mib << 20,
        base_memory,
        Duration::from_millis(settings.instance_wait_ms),
    );
    let max_call_answer =
        usize::try_from(settings.max_call_answer_bytes).context("--max-call-answer-bytes")?;
    let listener_limits = server::ListenerLimits {
        connections: settings.max_connections,
        header_read_timeout: Duration::from_millis(settings.header_read_timeout_ms),
    };
    // The pool holds every hosted service's budget (design.md, "Limits" 3).
    let hosted = u32::try_from(settings.services.len()).context("--services")?;
    let engine = engine::engine(
        instance_limits.pool_slots() * hosted,
        memory.base(),
        settings.guest_profiler,
    )?;
    let linker = engine::linker(&engine)?;
    let ticker = engine::EpochTicker::start(&engine)?;
    let blobs = Arc::new(
        blobstore::BlobStore::open_setting(
            &settings.blobs,
            &settings.data_dir.join("blobs"),
            blobstore::UploadMemory::new(
                settings.blob_upload_memory_mib << 20,
                Duration::from_millis(settings.instance_wait_ms),
            ),
        )
        .context("open the blob store")?,
    );
    let plans = [
        Plan {
            name: "bytes",
            embedded: components::BYTES,
            component: settings.bytes_component.clone(),
            listen: settings.bytes_listen,
            management: settings.bytes_management_listen,
        },
        Plan {
            name: "journal",
            embedded: components::JOURNAL,
            component: settings.journal_component.clone(),
            listen: settings.journal_listen,
            management: settings.journal_management_listen,
        },
        Plan {
            name: "coord",
            embedded: components::COORD,
            component: settings.coord_component.clone(),
            listen: settings.coord_listen,
            management: settings.coord_management_listen,
        },
    ];
    for name in &settings.services {
        anyhow::ensure!(
            plans.iter().any(|p| p.name == name),
            "--services: no service named `{name}`"
        );
    }
    let remotes = settings
        .remotes
        .iter()
        .map(|spec| remote::Remote::parse(spec, max_call_answer))
        .collect::<Result<Vec<_>>>()?;
    // Plan order is start order: a service may call the ones before it
    // while it prepares.
    let plans: Vec<Plan> = plans
        .into_iter()
        .filter(|p| settings.services.iter().any(|s| s == p.name))
        .collect();
    let names: Vec<&str> = plans.iter().map(|p| p.name).collect();
    let coord = if names.contains(&"coord") {
        Some(
            coord::CoordSettings::resolve(&settings, &blobs)
                .context("the coordination service's settings")?,
        )
    } else {
        None
    };
    let runner = match &coord {
        Some(coord) => Some(Arc::new(
            tool_runner(&settings, &blobs, cache.clone(), coord)
                .context("the coordination service's tool releases")?,
        )),
        None => None,
    };
    let (kv, namespaces, shared_store) = open_store(&settings, &names).await?;
    let lmdb = kv.clone();
    let storage = Arc::new(storage::Storage::new(
        kv,
        Arc::clone(&blobs),
        settings.data_dir.clone(),
        storage::Alarms {
            map_percent: settings.storage_alarm_map_percent,
            free_bytes: settings.storage_alarm_free_bytes,
        },
    ));

    // One hub of subscriptions per process; the journal's announces reach
    // it, and the followers of its advance stream, through the feed.
    let source = advance_source(&settings, &names, shared_store.is_some())?;
    // On a shared store, the journal publishes its advances to the other
    // hosts, and the coordination service listens to theirs: always for
    // revocations, and for advances unless it follows a journal's stream
    // (`events::shared`).
    let hears_advances = matches!(source, events::Source::Local | events::Source::Shared);
    let hub = events::Hub::new(source);
    let publisher = shared_store.as_ref().and_then(|store| {
        let origin = events::shared::origin();
        if names.contains(&"coord") {
            events::shared::listen(
                store.config().clone(),
                origin.clone(),
                Arc::downgrade(&hub),
                hears_advances,
            );
            hub.share_revocations(events::shared::Revoker::new(
                Arc::clone(store),
                origin.clone(),
            ));
        }
        names.contains(&"journal").then(|| {
            events::shared::Publisher::start(
                store.config().clone(),
                origin,
                settings.advance_stream_lines as usize,
            )
        })
    });
    let feed = events::Feed::publishing(
        Arc::clone(&hub),
        settings.advance_stream_lines as usize,
        publisher,
    );

    // The remotes are reachable first, then each hosted service as it
    // starts (see `capabilities::Peers`).
    let peers = Arc::new(capabilities::Peers::default());
    for remote in remotes {
        let name = remote.name().to_string();
        anyhow::ensure!(
            !names.contains(&name.as_str()),
            "--remote {name}: that service is hosted here"
        );
        anyhow::ensure!(
            peers.add(&name, Peer::Remote(remote)),
            "--remote {name}: named twice"
        );
    }
    // Every listener is bound before any service starts, so that a setting
    // derived from a bound address (the coordination service's default
    // audience) is known to `prepare`. Nothing is served (and the ready
    // file is not written) until every service has started.
    let mut bound = Vec::new();
    for plan in &plans {
        bound.push((bind(plan.listen).await?, bind(plan.management).await?));
    }

    let mut ready = serde_json::Map::new();
    let mut listeners = Vec::new();
    for ((plan, namespace), (operations, management)) in plans.iter().zip(namespaces).zip(bound) {
        let source = match &plan.component {
            Some(path) => ComponentSource::File(path.clone()),
            None => ComponentSource::Embedded(plan.embedded),
        };
        // Every service learns the name it is hosted under; the rest is
        // per service.
        let config = ServiceConfig::new([("service".to_string(), plan.name.to_string())]);
        if let (Some(coord), "coord") = (&coord, plan.name) {
            coord.configure(&config, operations.local_addr()?);
        }
        if plan.name == "journal" {
            config.set("argument-index", settings.journal_argument_index.clone());
        }
        let env = Arc::new(ServiceEnv {
            service: plan.name,
            blobs: Arc::clone(&blobs),
            blob_cap: settings.blob_cap,
            kv: namespace,
            // One host's memory cannot refuse a pair used through another:
            // on a shared store the pairs are kept in the store.
            replay: Arc::new(match &shared_store {
                Some(store) => replay::Replay::Store {
                    store: Arc::clone(store),
                    service: plan.name,
                },
                None => {
                    replay::Replay::Memory(replay::ReplayTable::new(settings.replay_table_pairs))
                }
            }),
            storage: Arc::clone(&storage),
            peers: Arc::clone(&peers),
            config: Arc::new(config),
            compute_limit: Duration::from_millis(settings.compute_limit_ms),
            ticker: ticker.clone(),
            memory: Arc::clone(&memory),
            max_call_answer,
            body_read_timeout: Duration::from_millis(settings.body_read_timeout_ms),
            tools: runner.clone().filter(|_| plan.name == "coord"),
            feed: Some(Arc::clone(&feed)).filter(|_| plan.name == "journal"),
            hub: Some(Arc::clone(&hub)).filter(|_| plan.name == "coord"),
        });
        let service = Service::start(
            env,
            Arc::new(metrics::Metrics::new(plan.name)),
            engine.clone(),
            linker.clone(),
            source,
            cache.clone(),
            instance_limits,
        )
        .await
        .map_err(anyhow::Error::from)
        .with_context(|| format!("load the {} component", plan.name))?;
        let service = Arc::new(service);
        // Reachable by the services that start after it.
        peers.add(plan.name, Peer::Local(Arc::clone(&service)));
        ready.insert(
            plan.name.to_string(),
            serde_json::json!({
                "operations": operations.local_addr()?.to_string(),
                "management": management.local_addr()?.to_string(),
            }),
        );
        tracing::info!(
            service = plan.name,
            digest = &*service.loaded().digest,
            "loaded"
        );
        listeners.push((service, operations, management));
    }
    // Every prepare has run; serving starts in a later clock second.
    service::into_a_later_second().await;
    let ready = serde_json::Value::Object(ready);
    tracing::info!(%ready, "listening");
    if let Some(path) = &settings.ready_file {
        let staging = path.with_extension("tmp");
        std::fs::write(&staging, ready.to_string())?;
        std::fs::rename(&staging, path)?;
    }

    let (stop, stopped) = watch::channel(false);
    let grace = Duration::from_secs(settings.shutdown_grace);
    let sockets = socket::Sockets::new(
        Arc::clone(&hub),
        settings.socket_frame_budget_bytes,
        socket::Writing {
            event_interval: Duration::from_millis(settings.socket_event_interval_ms),
            reply_timeout: Duration::from_millis(settings.socket_reply_timeout_ms),
        },
    );
    let mut servers = Vec::new();
    for (service, operations, management_listener) in listeners {
        let operations_service = Arc::clone(&service);
        let sockets = Arc::clone(&sockets);
        let refusing_service = Arc::clone(&service);
        let refusal = move || dispatch::unavailable(&refusing_service, "too many connections");
        servers.push(tokio::spawn(server::serve(
            operations,
            move |request| {
                let service = Arc::clone(&operations_service);
                let sockets = Arc::clone(&sockets);
                async move {
                    if socket::is_for(&service, &request) {
                        Ok(socket::answer(service, sockets, request))
                    } else {
                        dispatch::serve(service, request).await
                    }
                }
            },
            refusal.clone(),
            listener_limits,
            stopped.clone(),
            grace,
        )));
        servers.push(tokio::spawn(server::serve(
            management_listener,
            move |request| management::serve(Arc::clone(&service), request),
            refusal,
            listener_limits,
            stopped.clone(),
            grace,
        )));
    }

    shutdown_signal().await;
    tracing::info!("shutting down: finishing requests in flight");
    let _ = stop.send(true);
    // The advance streams end, so their connections can close.
    feed.close();
    for server in servers {
        let _ = server.await;
    }
    if let Some(lmdb) = lmdb {
        if let Err(e) = lmdb.checkpoint().await {
            tracing::warn!(error = %e, "the key-value store could not checkpoint at stop");
        }
    }
    tracing::info!("stopped");
    Ok(())
}

/// Where this process's hub learns of journal advances: from the journal
/// hosted here, from a remote journal's stream (`--journal-advances`),
/// from the other hosts of a shared store, or from nowhere (subscriptions
/// are then `unavailable`).
fn advance_source(
    settings: &Settings,
    hosted: &[&str],
    shared_store: bool,
) -> Result<events::Source> {
    let journal_here = hosted.contains(&"journal");
    Ok(match (settings.journal_advances.as_deref(), journal_here) {
        (Some(_), true) => anyhow::bail!(
            "--journal-advances: the journal is hosted here; its advances need no stream"
        ),
        (Some(events::shared::FROM_STORE), false) if shared_store => events::Source::Shared,
        (Some(events::shared::FROM_STORE), false) => anyhow::bail!(
            "--journal-advances store: the advances of other hosts come through a shared \
             PostgreSQL store, and --store is not one"
        ),
        (Some(url), false) => events::Source::Remote(
            events::follow::Follower::parse(url).context("--journal-advances")?,
        ),
        (None, true) => events::Source::Local,
        (None, false) => events::Source::Absent(
            "this deployment does not follow the journal's advances (--journal-advances)".into(),
        ),
    })
}

/// The tool runner with every `--coord-tool` release configured: a release
/// whose effects, egress or imports the deployment does not grant stops
/// the start, naming it.
fn tool_runner(
    settings: &Settings,
    blobs: &Arc<blobstore::BlobStore>,
    cache: Option<std::path::PathBuf>,
    coord: &coord::CoordSettings,
) -> Result<tools::Runner> {
    let mut allowed_effects = Vec::new();
    for name in &settings.tool_effects {
        let effect = tools::Effect::parse(name).with_context(|| {
            format!("--tool-effects: no effect named `{name}` (known: clock, random)")
        })?;
        allowed_effects.push(effect);
    }
    let runner_settings = tools::RunnerSettings {
        limits: tools::RunLimits {
            memory: usize::try_from(settings.tool_memory_mib << 20).context("--tool-memory-mib")?,
            fuel: settings.tool_fuel,
            wall: Duration::from_millis(settings.tool_wall_ms),
            outputs: settings.tool_max_outputs,
            output_bytes: settings.tool_max_output_bytes,
        },
        concurrent: settings.tool_concurrent_runs,
        wait: Duration::from_millis(settings.tool_run_wait_ms),
        allowed_effects,
        cache,
        blob_cap: settings.blob_cap,
    };
    let mut runner = tools::runner(runner_settings, blobs)?;
    for tool in &coord.tools {
        let wasm = read_blob(blobs, &tool.component, tool.size)
            .with_context(|| format!("--coord-tool `{}`: read its component", tool.spec))?;
        let digest = format!("sha256:{}", hex::encode(tool.component));
        runner
            .configure(&tool.description, &wasm)
            .with_context(|| format!("--coord-tool `{}`: the release {digest}", tool.spec))?;
    }
    Ok(runner)
}

/// The bytes of a committed blob.
fn read_blob(
    blobs: &blobstore::BlobStore,
    digest: &blobstore::Digest32,
    size: u64,
) -> Result<Vec<u8>> {
    let reader = blobs.open_blob(digest)?.context("the blob is gone")?;
    let mut bytes = vec![0u8; usize::try_from(size)?];
    let read = reader.read_at(0, &mut bytes)?;
    anyhow::ensure!(read as u64 == size, "the blob is shorter than recorded");
    Ok(bytes)
}

/// The key-value store `--store` names, with a namespace per service; the
/// LMDB store is returned too, for its map's gauges and health, and the
/// PostgreSQL store, for the events' channel between hosts.
async fn open_store(
    settings: &Settings,
    names: &[&str],
) -> Result<(
    Option<Arc<kv::KvStore>>,
    Vec<kv::Namespace>,
    Option<Arc<kv::postgres::PgStore>>,
)> {
    let url = settings.store.as_str();
    if url == "lmdb" {
        let map_limits = settings.map_limits().map_err(anyhow::Error::msg)?;
        let (store, namespaces) =
            kv::KvStore::open(&settings.data_dir.join("lmdb"), map_limits, names)
                .map_err(|e| anyhow::anyhow!("open the key-value store: {e}"))?;
        store.grouping().set_wait(std::time::Duration::from_micros(
            settings.lmdb_group_wait_us,
        ));
        let namespaces = namespaces.into_iter().map(kv::Namespace::Lmdb).collect();
        return Ok((Some(store), namespaces, None));
    }
    anyhow::ensure!(
        url.starts_with("postgresql://") || url.starts_with("postgres://"),
        "--store: `lmdb`, or a PostgreSQL database as a `postgresql://` URL"
    );
    let (store, namespaces) = kv::postgres::PgStore::open(url, settings.store_connections, names)
        .await
        .map_err(|e| anyhow::anyhow!("open the PostgreSQL store: {e}"))?;
    let namespaces = namespaces
        .into_iter()
        .map(kv::Namespace::Postgres)
        .collect();
    Ok((None, namespaces, Some(store)))
}

/// Locks `<data-dir>/lock` for as long as the returned file is open: two
/// labd on one data directory would remove each other's staging files and
/// share one LMDB writer's invariants (design.md, "Limits" 7).
pub(crate) fn lock_data_dir(dir: &std::path::Path) -> Result<std::fs::File> {
    let path = dir.join("lock");
    let file = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&path)
        .with_context(|| format!("open {}", path.display()))?;
    match file.try_lock() {
        Ok(()) => Ok(file),
        Err(std::fs::TryLockError::WouldBlock) => anyhow::bail!(
            "the data directory {} is in use by another labd (it holds {})",
            dir.display(),
            path.display()
        ),
        Err(std::fs::TryLockError::Error(e)) => {
            Err(e).with_context(|| format!("lock {}", path.display()))
        }
    }
}

async fn bind(address: std::net::SocketAddr) -> Result<TcpListener> {
    TcpListener::bind(address)
        .await
        .with_context(|| format!("listen on {address}"))
}

async fn shutdown_signal() {
    use tokio::signal::unix::{signal, SignalKind};
    let mut terminate = signal(SignalKind::terminate()).expect("install the SIGTERM handler");
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        _ = terminate.recv() => {}
    }
}
