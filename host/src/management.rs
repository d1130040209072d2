//! The management listener of a service: health, metrics and the hot swap.
//!
//! | route | answer |
//! |---|---|
//! | `GET /livez` | 200 `{status: "ok"}` while the host runs |
//! | `GET /healthz` | the service's own `healthz`, as its component answers it |
//! | `GET /metrics` | Prometheus text: the service's requests and socket calls, the key-value store's commits, storage (map, free disk, blobs), the instance memory budget |
//! | `GET /component` | `{service, digest}` of the component now loaded |
//! | `POST /reload` | reloads the component from its file; `{service, digest}` |
//! | `GET /advances` | the journal service only: its advances as they commit, one JSON line each (`events::feed`) |

use crate::dispatch::{self, host_error, HttpResponse, ResponseBody};
use crate::service::Service;
use hyper::body::Incoming;
use hyper::header::HeaderValue;
use std::convert::Infallible;
use std::sync::Arc;

pub async fn serve(
    service: Arc<Service>,
    request: hyper::Request<Incoming>,
) -> Result<HttpResponse, Infallible> {
    let method = request.method().as_str().to_string();
    let path = request.uri().path().to_string();
    let query = request.uri().query().is_some_and(|q| !q.is_empty());
    let (allow, response) = match path.as_str() {
        "/livez" => ("GET", None),
        "/healthz" => ("GET", None),
        "/metrics" => ("GET", None),
        "/component" => ("GET", None),
        "/reload" => ("POST", None),
        "/advances" if service.env.feed.is_some() => ("GET", None),
        _ => (
            "",
            Some(host_error(&service, 404, "not_found", "no such route")),
        ),
    };
    if let Some(response) = response {
        return Ok(with_surface(response));
    }
    if method != allow {
        let mut response = host_error(
            &service,
            405,
            "method_not_allowed",
            &format!("this route supports {allow} only"),
        );
        response.headers_mut().insert(
            "allow",
            HeaderValue::from_static(if allow == "GET" { "GET" } else { "POST" }),
        );
        return Ok(with_surface(response));
    }
    if query {
        return Ok(with_surface(host_error(
            &service,
            400,
            "bad_request",
            "management routes take no query parameters",
        )));
    }
    let response = match path.as_str() {
        "/livez" => json(
            &service,
            200,
            serde_json::json!({ "status": "ok", "service": service.name }),
        ),
        "/healthz" => {
            // The component's own health, answered as its operations
            // listener would.
            let mut forwarded = hyper::Request::new(request.into_body());
            *forwarded.uri_mut() = hyper::Uri::from_static("/healthz");
            return dispatch::serve(service, forwarded).await.map(with_surface);
        }
        "/metrics" => {
            let mut text = service.metrics.render(&service.loaded().digest);
            text.push_str(&kv_metrics(service.env.kv.stats()));
            text.push_str(&service.env.storage.render_metrics());
            text.push_str(&service.env.replay.render_metrics(service.name));
            text.push_str(&memory_metrics(&service.env.memory));
            if let Some(runner) = &service.env.tools {
                text.push_str(&tool_metrics(runner));
            }
            let mut response = hyper::Response::new(ResponseBody::whole(text));
            response.headers_mut().insert(
                "content-type",
                HeaderValue::from_static("text/plain; version=0.0.4; charset=utf-8"),
            );
            identity_headers(&service, response)
        }
        "/component" => json(
            &service,
            200,
            serde_json::json!({ "service": service.name, "digest": &*service.loaded().digest }),
        ),
        "/advances" => {
            let feed = service.env.feed.as_ref().expect("routed only with a feed");
            let mut response = hyper::Response::new(ResponseBody::Streamed(feed.follow()));
            response.headers_mut().insert(
                "content-type",
                HeaderValue::from_static("application/x-ndjson"),
            );
            identity_headers(&service, response)
        }
        _ => match service.reload().await {
            Ok(digest) => {
                tracing::info!(service = service.name, digest, "component reloaded");
                json(
                    &service,
                    200,
                    serde_json::json!({ "service": service.name, "digest": digest }),
                )
            }
            Err(e) => {
                tracing::warn!(
                    service = service.name,
                    error = format!("{e:#}"),
                    "reload refused"
                );
                host_error(&service, 409, "reload_failed", &format!("{e:#}"))
            }
        },
    };
    Ok(with_surface(response))
}

/// The key-value store's commit counters (shared by every service).
fn kv_metrics(stats: &crate::kv::Stats) -> String {
    use std::sync::atomic::Ordering::Relaxed;
    let mut out = format!(
        "# HELP lab_kv_commits_total Durable commits of the key-value store (one flush of its log each).\n\
         # TYPE lab_kv_commits_total counter\n\
         lab_kv_commits_total {}\n\
         # HELP lab_kv_transactions_total Write transactions made durable by those commits.\n\
         # TYPE lab_kv_transactions_total counter\n\
         lab_kv_transactions_total {}\n\
         # HELP lab_kv_lone_commits_total Of those commits, the ones a lone write made on its request's thread, without the writer thread.\n\
         # TYPE lab_kv_lone_commits_total counter\n\
         lab_kv_lone_commits_total {}\n\
         # HELP lab_kv_checkpoints_total Checkpoints of the key-value store: its data file synced, its log's epoch ended.\n\
         # TYPE lab_kv_checkpoints_total counter\n\
         lab_kv_checkpoints_total {}\n\
         # HELP lab_kv_log_flush_seconds Time to write and flush one commit's log record: the device's latency as commits wait for it.\n\
         # TYPE lab_kv_log_flush_seconds histogram\n",
        stats.groups.load(Relaxed),
        stats.transactions.load(Relaxed),
        stats.lone.load(Relaxed),
        stats.checkpoints.load(Relaxed)
    );
    stats
        .log_flush
        .render(&mut out, "lab_kv_log_flush_seconds", "");
    out
}

/// The tool runner's counters (the coordination service's only).
fn tool_metrics(runner: &crate::tools::Runner) -> String {
    use std::sync::atomic::Ordering::Relaxed;
    format!(
        "# HELP lab_tool_runs_total Tool release runs started (a slot taken).\n\
         # TYPE lab_tool_runs_total counter\n\
         lab_tool_runs_total {}\n",
        runner.runs.load(Relaxed)
    )
}

/// The budget of instance memory (shared by every service).
fn memory_metrics(memory: &crate::memory::MemoryBudget) -> String {
    format!(
        "# HELP lab_memory_budget_bytes Instance memory beyond the instances' base the host allows.\n\
         # TYPE lab_memory_budget_bytes gauge\n\
         lab_memory_budget_bytes {}\n\
         # HELP lab_memory_charged_bytes Instance memory beyond the base in use now.\n\
         # TYPE lab_memory_charged_bytes gauge\n\
         lab_memory_charged_bytes {}\n\
         # HELP lab_memory_growths_total Instance memories grown after their creation.\n\
         # TYPE lab_memory_growths_total counter\n\
         lab_memory_growths_total {}\n",
        memory.budget_bytes(),
        memory.charged_bytes(),
        memory.growths()
    )
}

fn json(service: &Service, status: u16, body: serde_json::Value) -> HttpResponse {
    let mut response = hyper::Response::new(ResponseBody::whole(body.to_string()));
    *response.status_mut() = hyper::StatusCode::from_u16(status).expect("a valid status");
    response
        .headers_mut()
        .insert("content-type", HeaderValue::from_static("application/json"));
    identity_headers(service, response)
}

fn identity_headers(service: &Service, mut response: HttpResponse) -> HttpResponse {
    let loaded = service.loaded();
    for (name, value) in [
        ("lab-service", &loaded.identity.service),
        ("lab-contract", &loaded.identity.contract),
    ] {
        if let Ok(value) = HeaderValue::from_str(value) {
            response.headers_mut().insert(name, value);
        }
    }
    response
}

fn with_surface(mut response: HttpResponse) -> HttpResponse {
    response
        .headers_mut()
        .insert("lab-surface", HeaderValue::from_static("management"));
    response
}
