//! The journal component's announces, through the host, into the hub:
//! real commits of `create` and `append` become events of the
//! subscriptions whose scopes cover them; a replay and a refusal announce
//! nothing.

use super::*;
use crate::bindings::services::ServiceRequest;
use crate::capabilities::{Peers, ServiceConfig, ServiceEnv};
use crate::service::{ComponentSource, InstanceLimits, Service};
use serde_json::{json, Value};

/// The journal service, in-process, announcing through `feed`.
pub(super) async fn journal(feed: Arc<Feed>) -> (Arc<Service>, Arc<crate::kv::KvStore>) {
    let dir = std::env::temp_dir().join(format!(
        "events-journal-{}",
        hex::encode(crate::blobstore::random_16())
    ));
    std::fs::create_dir_all(&dir).unwrap();
    let limits = InstanceLimits {
        requests: 8,
        operational: 1,
        wait: Duration::from_secs(5),
    };
    let memory = crate::memory::MemoryBudget::new(64 << 20, 4 << 20, Duration::from_secs(5));
    let engine = crate::engine::engine(
        limits.pool_slots(),
        memory.base(),
        crate::settings::GuestProfiler::None,
    )
    .unwrap();
    let linker = crate::engine::linker(&engine).unwrap();
    let ticker = crate::engine::EpochTicker::start(&engine).unwrap();
    let map = crate::kv::MapLimits {
        initial: 1 << 30,
        ceiling: 1 << 30,
        log: 1 << 20,
    };
    let (kv, mut namespaces) =
        crate::kv::KvStore::open(&dir.join("lmdb"), map, &["journal"]).unwrap();
    let blobs = Arc::new(crate::blobstore::BlobStore::open(&dir.join("blobs")).unwrap());
    let storage = crate::storage::Storage::new(
        Some(Arc::clone(&kv)),
        Arc::clone(&blobs),
        dir.clone(),
        crate::storage::Alarms {
            map_percent: 100,
            free_bytes: 0,
        },
    );
    let env = Arc::new(ServiceEnv {
        service: "journal",
        blobs,
        blob_cap: 1 << 20,
        kv: crate::kv::Namespace::Lmdb(namespaces.remove(0)),
        replay: Arc::new(crate::replay::Replay::Memory(
            crate::replay::ReplayTable::new(16),
        )),
        storage: Arc::new(storage),
        peers: Arc::new(Peers::default()),
        config: Arc::new(ServiceConfig::new([(
            "service".to_string(),
            "journal".to_string(),
        )])),
        compute_limit: Duration::from_secs(30),
        ticker,
        memory,
        max_call_answer: 1 << 20,
        body_read_timeout: Duration::from_secs(5),
        tools: None,
        feed: Some(feed),
        hub: None,
    });
    let service = Service::start(
        env,
        Arc::new(crate::metrics::Metrics::new("journal")),
        engine,
        linker,
        ComponentSource::Embedded(crate::components::JOURNAL),
        None,
        limits,
    )
    .await
    .unwrap();
    (Arc::new(service), kv)
}

pub(super) async fn call(
    service: &Service,
    method: &str,
    target: &str,
    body: Value,
) -> (u16, Value) {
    let body = if body.is_null() {
        Vec::new()
    } else {
        body.to_string().into_bytes()
    };
    let answer = crate::dispatch::call(
        service,
        ServiceRequest {
            method: method.into(),
            target: target.into(),
            headers: Vec::new(),
            body,
        },
    )
    .await
    .unwrap();
    (answer.status, serde_json::from_slice(&answer.body).unwrap())
}

#[tokio::test]
async fn commits_of_the_journal_reach_the_subscriptions_covering_them() {
    let hub = Hub::new(Source::Local);
    let feed = Feed::new(Arc::clone(&hub), 16);
    let (journal, _kv) = journal(Arc::clone(&feed)).await;
    let (status, health) = call(&journal, "GET", "/healthz", Value::Null).await;
    assert_eq!(status, 200, "{health}");
    let root_id = health["identity"]["root_id"].as_str().unwrap().to_string();
    let root = json!({
        "root_id": root_id,
        "space_id": health["identity"]["root_space_id"],
    });

    // Before anything listens, a commit announces nothing.
    let (status, created) = call(
        &journal,
        "POST",
        "/v1/create",
        json!({ "parent": root, "key": "a", "operation_id": "c1" }),
    )
    .await;
    assert_eq!(status, 201, "{created}");
    let a = json!({ "root_id": root_id, "space_id": created["child"]["space_id"] });

    let connection = hub.connect();
    let scope = |prefix: &[&str], depth| Scope {
        prefix: prefix.iter().map(|l| l.to_string()).collect(),
        depth,
        hidden: 0,
        root_id: root_id.clone(),
        space_id: "spc_unused".into(),
    };
    for (id, prefix, depth) in [
        ("sub_root", &[][..], Some(0)),
        ("sub_a", &["a"][..], None),
        ("sub_other", &["b"][..], None),
    ] {
        hub.open(
            connection.id(),
            id.into(),
            scope(prefix, depth),
            u64::MAX,
            vec![],
        )
        .await
        .unwrap();
    }
    assert!(connection.take_frames().is_empty(), "no backfill");

    // An append: the space's journal advanced to the batch's end.
    let fact = "gmFwAQ==";
    let append = json!({ "space": a, "facts": [fact, fact], "operation_id": "a1" });
    let (status, appended) = call(&journal, "POST", "/v1/append", append.clone()).await;
    assert_eq!(status, 201, "{appended}");
    // A creation: the parent's journal advanced by its creation entry.
    let (status, child) = call(
        &journal,
        "POST",
        "/v1/create",
        json!({ "parent": a, "key": "x", "operation_id": "c2" }),
    )
    .await;
    assert_eq!(status, 201, "{child}");
    // A replay and a refusal advance nothing.
    let (status, _) = call(&journal, "POST", "/v1/append", append).await;
    assert_eq!(status, 200);
    let (status, refused) = call(
        &journal,
        "POST",
        "/v1/append",
        json!({ "space": a, "facts": [fact], "operation_id": "a2", "expected_cutoff": 1 }),
    )
    .await;
    assert_eq!((status, refused["error"].as_str()), (409, Some("conflict")));

    let frames: Vec<Value> = connection
        .take_frames()
        .iter()
        .map(|f| serde_json::from_str(f).unwrap())
        .collect();
    let events: Vec<(&str, &Value, u64)> = frames
        .iter()
        .map(|f| {
            (
                f["subscription"].as_str().unwrap(),
                &f["event"]["space"]["path"],
                f["event"]["cutoff"].as_u64().unwrap(),
            )
        })
        .collect();
    // The append (cutoff 2) and the creation (cutoff 3) of `a` coalesce
    // into one event at 3; nothing reached the root's own journal or `b`.
    assert_eq!(events, vec![("sub_a", &json!(["a"]), 3)], "{frames:?}");

    // The new child's journal is watched from its first append.
    let x = json!({ "root_id": root_id, "space_id": child["child"]["space_id"] });
    let (status, _) = call(
        &journal,
        "POST",
        "/v1/append",
        json!({ "space": x, "facts": [fact], "operation_id": "x1" }),
    )
    .await;
    assert_eq!(status, 201);
    let frames: Vec<Value> = connection
        .take_frames()
        .iter()
        .map(|f| serde_json::from_str(f).unwrap())
        .collect();
    assert_eq!(frames.len(), 1, "{frames:?}");
    assert_eq!(frames[0]["subscription"], "sub_a");
    assert_eq!(frames[0]["event"]["space"]["path"], json!(["a", "x"]));
    assert_eq!(frames[0]["event"]["cutoff"], 1);
}
