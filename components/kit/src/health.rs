//! The health envelope and the build facts it and `describe` report.

use lab_guest::lab::platform::runtime;
use serde_json::{json, Value};

/// One health check's outcome.
pub struct Check {
    pub name: &'static str,
    pub failure: Option<String>,
}

/// The `storage` check every service reports: the host's storage has
/// headroom (the key-value map below its alarm share of the ceiling, free
/// disk above its alarm bound). It fails before writes do.
pub fn storage() -> Check {
    Check {
        name: "storage",
        failure: runtime::storage_headroom().err(),
    }
}

/// `{revision, dirty, go}`: the build of the running host. The member named
/// `go` carries the toolchain that built it.
pub fn build() -> Value {
    let build = runtime::build();
    json!({ "revision": build.revision, "dirty": build.dirty, "go": build.toolchain })
}

/// The envelope and whether every check passed. `extra` members (such as
/// `identity`) are added as given.
pub fn envelope(
    service: &str,
    contract: &str,
    checks: &[Check],
    extra: &[(&str, Value)],
) -> (bool, Value) {
    let ok = checks.iter().all(|c| c.failure.is_none());
    let checks: Vec<Value> = checks
        .iter()
        .map(|c| {
            json!({
                "name": c.name,
                "status": if c.failure.is_none() { "ok" } else { "failing" },
                "detail": c.failure.clone().unwrap_or_default(),
            })
        })
        .collect();
    let mut body = json!({
        "status": if ok { "ok" } else { "failing" },
        "service": service,
        "contract": contract,
        "build": build(),
        "time": crate::time::now_rfc3339(),
        "checks": checks,
    });
    for (name, value) in extra {
        body[*name] = value.clone();
    }
    (ok, body)
}
