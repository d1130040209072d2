//! A coordination hub following a journal's advance stream: the stream is
//! opened by the first subscription, carries advances and losses into it,
//! closes when the last subscription ends, and, when it breaks, closes
//! every subscription with `scope_unavailable`.

use super::*;
use crate::dispatch::ResponseBody;
use hyper::service::service_fn;
use serde_json::Value;
use std::convert::Infallible;
use tokio::net::TcpListener;
use tokio::sync::watch;

/// A journal's side in-process: `GET /advances` served from `feed` on a
/// loopback port, until `stop` turns true (which cuts every stream).
async fn serve(feed: Arc<Feed>, mut stop: watch::Receiver<bool>) -> std::net::SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    tokio::spawn(async move {
        let mut connections = tokio::task::JoinSet::new();
        loop {
            let (stream, _) = tokio::select! {
                accepted = listener.accept() => accepted.unwrap(),
                _ = stop.wait_for(|s| *s) => break,
            };
            let feed = Arc::clone(&feed);
            connections.spawn(async move {
                let service = service_fn(move |_request| {
                    let mut response = hyper::Response::new(ResponseBody::Streamed(feed.follow()));
                    response
                        .headers_mut()
                        .insert("lab-service", "journal".parse().unwrap());
                    async move { Ok::<_, Infallible>(response) }
                });
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(hyper_util::rt::TokioIo::new(stream), service)
                    .await;
            });
        }
        // Cut: the connections go without ending their bodies.
        connections.abort_all();
    });
    address
}

fn scope() -> Scope {
    Scope {
        prefix: vec!["a".into()],
        depth: None,
        hidden: 0,
        root_id: "rt_1".into(),
        space_id: "spc_a".into(),
    }
}

fn advance(cutoff: u64) -> Advance {
    Advance {
        journal: Journal {
            root_id: "rt_1".into(),
            space_id: "spc_a".into(),
            path: vec!["a".into()],
        },
        cutoff,
    }
}

async fn next_frames(connection: &Connection) -> Vec<Value> {
    tokio::time::timeout(Duration::from_secs(10), connection.frames())
        .await
        .expect("a frame came")
        .iter()
        .map(|f| serde_json::from_str(f).unwrap())
        .collect()
}

/// Waits until the feed has `n` followers.
async fn followers(feed: &Feed, n: usize) {
    let started = std::time::Instant::now();
    while feed.followers() != n {
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "followers != {n}"
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

#[tokio::test]
async fn a_followed_stream_lives_as_long_as_its_subscriptions() {
    let journal_hub = Hub::new(Source::Local);
    let feed = Feed::new(journal_hub, 2);
    let (_stop, stopped) = watch::channel(false);
    let address = serve(Arc::clone(&feed), stopped).await;
    let follower = follow::Follower::parse(&format!("http://{address}")).unwrap();
    let hub = Hub::new(Source::Remote(follower));
    let connection = hub.connect();
    assert!(!feed.listening(), "nothing follows before a subscription");

    for id in ["sub_a", "sub_b"] {
        hub.open(connection.id(), id.into(), scope(), u64::MAX, vec![])
            .await
            .unwrap();
    }
    // One stream for both, registered before the first open returned.
    assert!(feed.listening());
    followers(&feed, 1).await;

    feed.announce(&[advance(4)]);
    let frames = next_frames(&connection).await;
    assert_eq!(frames.len(), 2, "{frames:?}");
    assert!(frames.iter().all(|f| f["event"]["cutoff"] == 4));

    // Past the stream's bound, advances are lost: a gap for each.
    hub.close(connection.id(), "sub_b");
    let _ = connection.take_frames();
    feed.announce(&[advance(5), advance(6), advance(7)]);
    let mut frames = Vec::new();
    while !frames.iter().any(|f: &Value| f.get("gap").is_some()) {
        frames.extend(next_frames(&connection).await);
    }
    assert!(frames.iter().all(|f| f["subscription"] == "sub_a"));

    // The last subscription ends: the stream closes.
    hub.close(connection.id(), "sub_a");
    let frames = next_frames(&connection).await;
    assert_eq!(frames.last().unwrap()["closed"]["reason"], "unsubscribed");
    followers(&feed, 0).await;
    assert!(!feed.listening());

    // The next subscription opens it again.
    hub.open(connection.id(), "sub_c".into(), scope(), u64::MAX, vec![])
        .await
        .unwrap();
    followers(&feed, 1).await;
    feed.announce(&[advance(8)]);
    let frames = next_frames(&connection).await;
    assert_eq!(frames[0]["event"]["cutoff"], 8);
}

#[tokio::test]
async fn a_broken_stream_closes_every_subscription_as_scope_unavailable() {
    let journal_hub = Hub::new(Source::Local);
    let feed = Feed::new(journal_hub, 16);
    let (stop, stopped) = watch::channel(false);
    let address = serve(Arc::clone(&feed), stopped).await;
    let follower = follow::Follower::parse(&format!("http://{address}")).unwrap();
    let hub = Hub::new(Source::Remote(follower));
    let connection = hub.connect();
    let other = hub.connect();
    hub.open(connection.id(), "sub_a".into(), scope(), u64::MAX, vec![])
        .await
        .unwrap();
    hub.open(other.id(), "sub_b".into(), scope(), u64::MAX, vec![])
        .await
        .unwrap();
    stop.send(true).unwrap();
    for (connection, id) in [(&connection, "sub_a"), (&other, "sub_b")] {
        let frames = next_frames(connection).await;
        assert_eq!(
            frames,
            vec![serde_json::json!({
                "subscription": id,
                "contract": "2026-09-19",
                "closed": { "reason": "scope_unavailable", "delivered": 0 },
            })]
        );
    }
    assert!(!hub.listening());
    // With the journal's host gone, a new subscription is unavailable.
    let refused = hub
        .open(connection.id(), "sub_c".into(), scope(), u64::MAX, vec![])
        .await;
    assert!(
        matches!(refused, Err(OpenError::Unavailable(_))),
        "{refused:?}"
    );
}
