//! `labd`: the native host of the service components.
//!
//! - [`settings`]: flags and environment variables.
//! - [`engine`]: wasmtime engine, linker, compiled components and their cache.
//! - [`bindings`]: the host side of `wit/`.
//! - [`capabilities`]: what components import (bodies, blobs, clock, ids, log, runtime).
//! - [`body`], [`blobstore`]: request bodies and blob files.
//! - [`service`]: a hosted service and its swappable component.
//! - [`dispatch`]: one HTTP request through a component.
//! - [`server`]: listeners and graceful shutdown.
//! - [`management`], [`metrics`]: the management listener.

mod bindings;
mod blobstore;
mod body;
mod capabilities;
mod dispatch;
mod engine;
mod kv;
mod management;
mod metrics;
mod server;
mod service;
mod settings;

mod components {
    include!(concat!(env!("OUT_DIR"), "/components.rs"));
}

use anyhow::{Context, Result};
use capabilities::ServiceEnv;
use clap::Parser;
use service::{ComponentSource, Service};
use settings::Settings;
use std::sync::Arc;
use std::time::Duration;
use tokio::net::TcpListener;
use tokio::sync::watch;

fn main() -> Result<()> {
    let settings = Settings::parse();
    tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::try_new(&settings.log).context("--log")?)
        .with_writer(std::io::stderr)
        .init();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("start the async runtime")?;
    runtime.block_on(run(settings))
}

async fn run(settings: Settings) -> Result<()> {
    std::fs::create_dir_all(&settings.data_dir)
        .with_context(|| format!("create the data directory {}", settings.data_dir.display()))?;
    let cache = Some(
        settings
            .cache_dir
            .clone()
            .unwrap_or_else(|| settings.data_dir.join("cache")),
    );
    let engine = engine::engine(settings.max_concurrent_requests)?;
    let linker = engine::linker(&engine)?;

    let blobs = Arc::new(
        blobstore::BlobStore::open(&settings.data_dir.join("blobs"))
            .context("open the blob store")?,
    );
    let (_kv, mut namespaces) = kv::KvStore::open(
        &settings.data_dir.join("lmdb"),
        settings.lmdb_map_size,
        &["bytes"],
    )
    .map_err(|e| anyhow::anyhow!("open the key-value store: {e}"))?;
    let bytes_kv = namespaces.remove(0);
    let bytes_source = match &settings.bytes_component {
        Some(path) => ComponentSource::File(path.clone()),
        None => ComponentSource::Embedded(components::BYTES),
    };
    let bytes = Arc::new(
        Service::start(
            Arc::new(ServiceEnv {
                service: "bytes",
                blobs,
                blob_cap: settings.blob_cap,
                kv: bytes_kv,
            }),
            Arc::new(metrics::Metrics::new("bytes")),
            engine.clone(),
            linker.clone(),
            bytes_source,
            cache.clone(),
            settings.max_concurrent_requests,
        )
        .await
        .map_err(anyhow::Error::from)
        .context("load the bytes component")?,
    );

    // Everything that can fail has; now bind.
    let operations = bind(settings.bytes_listen).await?;
    let management_listener = bind(settings.bytes_management_listen).await?;
    let ready = serde_json::json!({
        "bytes": {
            "operations": operations.local_addr()?.to_string(),
            "management": management_listener.local_addr()?.to_string(),
        }
    });
    tracing::info!(%ready, digest = &*bytes.loaded().digest, "listening");
    if let Some(path) = &settings.ready_file {
        let staging = path.with_extension("tmp");
        std::fs::write(&staging, ready.to_string())?;
        std::fs::rename(&staging, path)?;
    }

    let (stop, stopped) = watch::channel(false);
    let grace = Duration::from_secs(settings.shutdown_grace);
    let service = Arc::clone(&bytes);
    let ops = tokio::spawn(server::serve(
        operations,
        move |request| dispatch::serve(Arc::clone(&service), request),
        stopped.clone(),
        grace,
    ));
    let service = Arc::clone(&bytes);
    let mgmt = tokio::spawn(server::serve(
        management_listener,
        move |request| management::serve(Arc::clone(&service), request),
        stopped,
        grace,
    ));

    shutdown_signal().await;
    tracing::info!("shutting down: finishing requests in flight");
    let _ = stop.send(true);
    let _ = tokio::join!(ops, mgmt);
    tracing::info!("stopped");
    Ok(())
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
