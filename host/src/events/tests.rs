//! The hub's rules: scope matching, coalescing, per-journal order, the
//! pending table's bound and its gap, the per-connection limit, expiry,
//! revocation, unsubscribe, shutdown and the end of a connection.

use super::subscription::PENDING_JOURNALS;
use super::*;
use serde_json::Value;

const ROOT: &str = "rt_00000000000000000000000000000001";
const WORLD_SPACE: &str = "spc_00000000000000000000000000000001";

fn labels(path: &str) -> Vec<String> {
    path.split('/')
        .filter(|l| !l.is_empty())
        .map(String::from)
        .collect()
}

/// A scope at `path` below the world `/worlds/lab`.
fn scope(path: &str, depth: Option<u32>) -> Scope {
    let mut prefix = labels("worlds/lab");
    prefix.extend(labels(path));
    Scope {
        prefix,
        depth,
        hidden: 2,
        root_id: ROOT.into(),
        space_id: WORLD_SPACE.into(),
    }
}

fn advance(path: &str, space: u32, cutoff: u64) -> Advance {
    let mut full = labels("worlds/lab");
    full.extend(labels(path));
    Advance {
        journal: Journal {
            root_id: ROOT.into(),
            space_id: format!("spc_{space:032x}"),
            path: full,
        },
        cutoff,
    }
}

fn parsed<'a>(frames: impl IntoIterator<Item = &'a str>) -> Vec<Value> {
    frames
        .into_iter()
        .map(|f| serde_json::from_str(f).expect("a frame is JSON"))
        .collect()
}

fn cutoffs(frames: &[Value]) -> Vec<(String, u64)> {
    frames
        .iter()
        .filter(|f| f.get("event").is_some())
        .map(|f| {
            (
                f["event"]["space"]["space_id"]
                    .as_str()
                    .unwrap()
                    .to_string(),
                f["event"]["cutoff"].as_u64().unwrap(),
            )
        })
        .collect()
}

async fn open(hub: &Arc<Hub>, connection: &Connection, id: &str, scope: Scope) {
    hub.open(
        connection.id(),
        id.into(),
        scope,
        u64::MAX,
        vec!["grant-a".into()],
    )
    .await
    .expect("the subscription opens");
}

#[tokio::test]
async fn nothing_listens_until_a_subscription_opens() {
    let hub = Hub::new(Source::Local);
    let connection = hub.connect();
    assert!(!hub.listening());
    open(&hub, &connection, "sub_a", scope("", None)).await;
    assert!(hub.listening());
    assert!(hub.close(connection.id(), "sub_a"));
    assert!(!hub.listening());
}

#[tokio::test]
async fn an_advance_is_one_event_carrying_the_path_below_the_world() {
    let hub = Hub::new(Source::Local);
    let connection = hub.connect();
    open(&hub, &connection, "sub_a", scope("", None)).await;
    hub.announce(&[advance("projects/p", 7, 3)]);
    let frames = parsed(&connection.take_frames());
    assert_eq!(frames.len(), 1, "{frames:?}");
    assert_eq!(
        frames[0],
        serde_json::json!({
            "subscription": "sub_a",
            "contract": "2026-09-19",
            "event": {
                "space": {
                    "root_id": ROOT,
                    "space_id": format!("spc_{:032x}", 7),
                    "path": ["projects", "p"],
                },
                "cutoff": 3,
            },
        })
    );
    assert!(connection.take_frames().is_empty(), "drained");
}

#[tokio::test]
async fn advances_of_one_journal_coalesce_to_the_latest_cutoff() {
    let hub = Hub::new(Source::Local);
    let connection = hub.connect();
    open(&hub, &connection, "sub_a", scope("", None)).await;
    for cutoff in 1..=100 {
        hub.announce(&[advance("projects/p", 1, cutoff)]);
    }
    hub.announce(&[advance("projects/q", 2, 5)]);
    let mut events = cutoffs(&parsed(&connection.take_frames()));
    events.sort();
    assert_eq!(
        events,
        vec![
            (format!("spc_{:032x}", 1), 100),
            (format!("spc_{:032x}", 2), 5)
        ]
    );
}

#[tokio::test]
async fn cutoffs_of_one_journal_only_increase() {
    let hub = Hub::new(Source::Local);
    let connection = hub.connect();
    open(&hub, &connection, "sub_a", scope("", None)).await;
    // A later commit announced before an earlier one: the earlier is
    // superseded, pending or delivered.
    hub.announce(&[advance("p", 1, 5)]);
    hub.announce(&[advance("p", 1, 3)]);
    assert_eq!(cutoffs(&parsed(&connection.take_frames()))[0].1, 5);
    hub.announce(&[advance("p", 1, 4)]);
    hub.announce(&[advance("p", 1, 5)]);
    assert!(connection.take_frames().is_empty());
    hub.announce(&[advance("p", 1, 6)]);
    assert_eq!(cutoffs(&parsed(&connection.take_frames()))[0].1, 6);
}

#[tokio::test]
async fn a_full_pending_table_keeps_its_journals_and_queues_one_gap() {
    let hub = Hub::new(Source::Local);
    let connection = hub.connect();
    open(&hub, &connection, "sub_a", scope("", None)).await;
    for space in 0..PENDING_JOURNALS as u32 {
        hub.announce(&[advance(&format!("s{space}"), space, 1)]);
    }
    // A pending journal still coalesces when the table is full.
    hub.announce(&[advance("s0", 0, 2)]);
    // Two journals that do not fit: one gap.
    hub.announce(&[advance("x", 5000, 1)]);
    hub.announce(&[advance("y", 5001, 1)]);
    let frames = parsed(&connection.take_frames());
    assert_eq!(frames.len(), PENDING_JOURNALS + 1);
    let gaps: Vec<&Value> = frames.iter().filter(|f| f.get("gap").is_some()).collect();
    assert_eq!(gaps.len(), 1);
    assert_eq!(
        gaps[0]["gap"]["space"],
        serde_json::json!({ "root_id": ROOT, "space_id": WORLD_SPACE, "path": [] })
    );
    assert_eq!(frames.last(), Some(gaps[0]), "the gap follows the events");
    assert!(cutoffs(&frames).contains(&(format!("spc_{:032x}", 0), 2)));
    // Drained: room again.
    hub.announce(&[advance("x", 5000, 2)]);
    assert_eq!(cutoffs(&parsed(&connection.take_frames())).len(), 1);
    // `delivered` counts the events, not the gap.
    assert!(hub.close(connection.id(), "sub_a"));
    let closed = parsed(&connection.take_frames());
    assert_eq!(
        closed[0]["closed"],
        serde_json::json!({ "reason": "unsubscribed", "delivered": PENDING_JOURNALS + 1 })
    );
}

#[tokio::test]
async fn a_scope_covers_its_prefix_within_its_depth() {
    let hub = Hub::new(Source::Local);
    let connection = hub.connect();
    open(&hub, &connection, "sub_all", scope("projects", None)).await;
    open(&hub, &connection, "sub_own", scope("projects", Some(0))).await;
    open(&hub, &connection, "sub_one", scope("projects", Some(1))).await;
    let mut foreign = advance("projects/p", 9, 1);
    foreign.journal.root_id = "rt_00000000000000000000000000000002".into();
    hub.announce(&[
        advance("projects", 1, 1),
        advance("projects/p", 2, 1),
        // A space created after the subscriptions opened is covered.
        advance("projects/p/artifacts/a", 3, 1),
        advance("projectsx", 4, 1),
        advance("", 5, 1),
        foreign,
    ]);
    let frames = parsed(&connection.take_frames());
    let seen = |id: &str| -> Vec<u64> {
        let mut spaces: Vec<u64> = frames
            .iter()
            .filter(|f| f["subscription"] == id)
            .map(|f| {
                let id = f["event"]["space"]["space_id"].as_str().unwrap();
                u64::from_str_radix(&id[4..], 16).unwrap()
            })
            .collect();
        spaces.sort();
        spaces
    };
    assert_eq!(seen("sub_all"), vec![1, 2, 3]);
    assert_eq!(seen("sub_own"), vec![1]);
    assert_eq!(seen("sub_one"), vec![1, 2]);
}

#[tokio::test]
async fn equal_scopes_are_shared_and_each_still_tested_for_its_own_advances() {
    let hub = Hub::new(Source::Local);
    let (first, second) = (hub.connect(), hub.connect());
    // Interleaved on two connections: two scopes that differ only in
    // depth, and one equal to the first.
    open(&hub, &first, "sub_all", scope("projects", None)).await;
    open(&hub, &first, "sub_own", scope("projects", Some(0))).await;
    open(&hub, &second, "sub_all_too", scope("projects", None)).await;
    open(&hub, &second, "sub_own_too", scope("projects", Some(0))).await;
    {
        let state = hub.lock();
        let scopes = |c: &Connection| -> Vec<*const Scope> {
            state.connections[&c.id()]
                .subscriptions
                .iter()
                .map(|s| Arc::as_ptr(&s.scope))
                .collect()
        };
        let (a, b) = (scopes(&first), scopes(&second));
        assert_eq!(a, b, "equal scopes share one copy");
        assert_ne!(a[0], a[1], "scopes of other depths do not");
    }
    hub.announce(&[advance("projects/p", 2, 1), advance("projects", 1, 1)]);
    for (connection, all, own) in [
        (&first, "sub_all", "sub_own"),
        (&second, "sub_all_too", "sub_own_too"),
    ] {
        let frames = parsed(&connection.take_frames());
        let of = |id: &str| frames.iter().filter(|f| f["subscription"] == id).count();
        assert_eq!((of(all), of(own)), (2, 1));
    }
}

#[tokio::test]
async fn scopes_no_subscription_holds_are_purged() {
    let hub = Hub::new(Source::Local);
    let connection = hub.connect();
    for i in 0..200 {
        let id = format!("sub_{i}");
        open(&hub, &connection, &id, scope(&format!("p{i}"), None)).await;
        assert!(hub.close(connection.id(), &id));
    }
    let remembered = hub.lock().scopes.len();
    assert!(remembered <= 64, "{remembered} scopes remembered");
}

#[tokio::test]
async fn the_watched_spaces_follow_every_way_a_subscription_ends() {
    let hub = Hub::new(Source::Local);
    let watched =
        |hub: &Hub, path: &str| hub.lock().watched.may_cover(&advance(path, 1, 1).journal);
    let connection = hub.connect();
    open(&hub, &connection, "sub_a", scope("a", Some(0))).await;
    open(&hub, &connection, "sub_b", scope("b/c", None)).await;
    // At or below a scope's space, not beside or above it.
    assert!(watched(&hub, "a") && watched(&hub, "a/x") && watched(&hub, "b/c/d"));
    assert!(!watched(&hub, "b") && !watched(&hub, "ab") && !watched(&hub, ""));
    assert!(hub.close(connection.id(), "sub_a"));
    assert!(!watched(&hub, "a"));
    let other = hub.connect();
    open(&hub, &other, "sub_c", scope("c", None)).await;
    drop(other);
    assert!(!watched(&hub, "c"));
    open(&hub, &connection, "sub_d", scope("d", None)).await;
    hub.close_where(Reason::Expired, |s| s.id == "sub_d");
    assert!(!watched(&hub, "d"));
    let _ = connection.shut();
    assert!(!watched(&hub, "b/c") && hub.lock().watched.spaces.is_empty());
}

#[tokio::test]
async fn a_connection_holds_at_most_sixteen_subscriptions() {
    let hub = Hub::new(Source::Local);
    let connection = hub.connect();
    for i in 0..SUBSCRIPTIONS_PER_CONNECTION {
        open(&hub, &connection, &format!("sub_{i}"), scope("", None)).await;
    }
    let refused = hub
        .open(
            connection.id(),
            "sub_x".into(),
            scope("", None),
            u64::MAX,
            vec![],
        )
        .await;
    assert_eq!(refused, Err(OpenError::LimitExceeded));
    // Another connection has its own sixteen.
    let other = hub.connect();
    open(&hub, &other, "sub_x", scope("", None)).await;
    // One closed makes room.
    assert!(hub.close(connection.id(), "sub_0"));
    open(&hub, &connection, "sub_y", scope("", None)).await;
}

#[tokio::test]
async fn a_subscription_expires_at_its_instant() {
    let hub = Hub::new(Source::Local);
    let connection = hub.connect();
    let id = connection.id();
    for (name, at) in [("sub_early", 100), ("sub_late", 200)] {
        hub.open(id, name.into(), scope("", None), at, vec![])
            .await
            .unwrap();
    }
    hub.announce(&[advance("p", 1, 1)]);
    assert_eq!(hub.expire(99), Some(100));
    assert_eq!(hub.expire(100), Some(200));
    let frames = parsed(&connection.take_frames());
    // The late one's event; the early one's end (its pending event is
    // dropped with it).
    let closed: Vec<&Value> = frames
        .iter()
        .filter(|f| f.get("closed").is_some())
        .collect();
    assert_eq!(closed.len(), 1);
    assert_eq!(closed[0]["subscription"], "sub_early");
    assert_eq!(
        closed[0]["closed"],
        serde_json::json!({ "reason": "expired", "delivered": 0 })
    );
    assert_eq!(hub.expire(200), None);
    assert!(!hub.listening());
}

#[tokio::test]
async fn the_sweep_closes_a_subscription_once_the_clock_reaches_it() {
    let hub = Hub::new(Source::Local);
    let connection = hub.connect();
    // An instant beyond the clock's range does not stop the sweep.
    open(&hub, &connection, "sub_never", scope("", None)).await;
    tokio::task::yield_now().await;
    hub.open(
        connection.id(),
        "sub_a".into(),
        scope("", None),
        crate::clock::unix_now() + 1,
        vec![],
    )
    .await
    .unwrap();
    let frames = tokio::time::timeout(Duration::from_secs(10), connection.frames())
        .await
        .expect("the sweep closed it");
    let frames = parsed(&frames);
    assert_eq!(frames.len(), 1, "{frames:?}");
    assert_eq!(frames[0]["subscription"], "sub_a");
    assert_eq!(frames[0]["closed"]["reason"], "expired");
    assert!(hub.listening(), "sub_never is open");
}

#[tokio::test]
async fn revoking_a_grant_closes_the_subscriptions_it_authorized() {
    let hub = Hub::new(Source::Local);
    let connection = hub.connect();
    let id = connection.id();
    hub.open(
        id,
        "sub_a".into(),
        scope("", None),
        u64::MAX,
        vec!["g1".into(), "g2".into()],
    )
    .await
    .unwrap();
    hub.open(
        id,
        "sub_b".into(),
        scope("", None),
        u64::MAX,
        vec!["g3".into()],
    )
    .await
    .unwrap();
    hub.revoke(&["g2".into(), "g9".into()]);
    let frames = parsed(&connection.take_frames());
    assert_eq!(frames.len(), 1);
    assert_eq!(frames[0]["subscription"], "sub_a");
    assert_eq!(frames[0]["closed"]["reason"], "expired");
    hub.announce(&[advance("p", 1, 1)]);
    let frames = parsed(&connection.take_frames());
    assert_eq!(frames.len(), 1);
    assert_eq!(frames[0]["subscription"], "sub_b");
}

#[tokio::test]
async fn unsubscribe_queues_the_closed_frame_and_only_for_its_connection() {
    let hub = Hub::new(Source::Local);
    let connection = hub.connect();
    let other = hub.connect();
    open(&hub, &connection, "sub_a", scope("", None)).await;
    assert!(!hub.close(other.id(), "sub_a"), "not the other's");
    assert!(!hub.close(connection.id(), "sub_b"), "no such subscription");
    hub.announce(&[advance("p", 1, 1)]);
    assert_eq!(cutoffs(&parsed(&connection.take_frames())).len(), 1);
    assert!(hub.close(connection.id(), "sub_a"));
    hub.announce(&[advance("p", 1, 2)]);
    let frames = parsed(&connection.take_frames());
    assert_eq!(
        frames,
        vec![serde_json::json!({
            "subscription": "sub_a",
            "contract": "2026-09-19",
            "closed": { "reason": "unsubscribed", "delivered": 1 },
        })]
    );
    assert!(!hub.close(connection.id(), "sub_a"), "closed once");
}

#[tokio::test]
async fn a_subscription_in_a_freed_slot_inherits_nothing_and_neighbours_keep_theirs() {
    let hub = Hub::new(Source::Local);
    let connection = hub.connect();
    open(&hub, &connection, "sub_a", scope("a", None)).await;
    open(&hub, &connection, "sub_b", scope("", None)).await;
    hub.announce(&[advance("a/x", 1, 3), advance("b", 2, 1)]);
    assert!(hub.close(connection.id(), "sub_a"));
    // The freed slot goes to the next subscription, with nothing pending.
    open(&hub, &connection, "sub_c", scope("a", None)).await;
    let frames = parsed(&connection.take_frames());
    let of = |id: &str| -> Vec<(String, u64)> {
        let mine: Vec<Value> = frames
            .iter()
            .filter(|f| f["subscription"] == id)
            .cloned()
            .collect();
        cutoffs(&mine)
    };
    assert!(of("sub_c").is_empty(), "{frames:?}");
    assert_eq!(
        of("sub_b"),
        [
            (format!("spc_{:032x}", 1), 3),
            (format!("spc_{:032x}", 2), 1)
        ]
    );
    let closed: Vec<&Value> = frames
        .iter()
        .filter(|f| f.get("closed").is_some())
        .collect();
    assert_eq!(closed.len(), 1);
    assert_eq!(
        closed[0]["closed"]["delivered"], 0,
        "sub_a's event was dropped"
    );
    // Later advances reach the new subscription.
    hub.announce(&[advance("a/x", 1, 4)]);
    let frames = parsed(&connection.take_frames());
    let subscribers: Vec<&Value> = frames.iter().map(|f| &f["subscription"]).collect();
    assert_eq!(subscribers, ["sub_b", "sub_c"]);
    assert_eq!(cutoffs(&frames), vec![(format!("spc_{:032x}", 1), 4); 2]);
}

#[tokio::test]
async fn shut_closes_every_subscription_and_refuses_later_opens() {
    let hub = Hub::new(Source::Local);
    let connection = hub.connect();
    open(&hub, &connection, "sub_a", scope("", None)).await;
    open(&hub, &connection, "sub_b", scope("", None)).await;
    let frames = parsed(
        connection
            .shut()
            .iter()
            .map(String::as_str)
            .collect::<Vec<_>>(),
    );
    let mut ended: Vec<(&str, &str)> = frames
        .iter()
        .map(|f| {
            (
                f["subscription"].as_str().unwrap(),
                f["closed"]["reason"].as_str().unwrap(),
            )
        })
        .collect();
    ended.sort();
    assert_eq!(ended, vec![("sub_a", "shutdown"), ("sub_b", "shutdown")]);
    let refused = hub
        .open(
            connection.id(),
            "sub_c".into(),
            scope("", None),
            u64::MAX,
            vec![],
        )
        .await;
    assert_eq!(refused, Err(OpenError::Closed));
    assert!(!hub.listening());
}

#[tokio::test]
async fn a_dropped_connection_ends_its_subscriptions_silently() {
    let hub = Hub::new(Source::Local);
    let connection = hub.connect();
    let id = connection.id();
    open(&hub, &connection, "sub_a", scope("", None)).await;
    drop(connection);
    assert!(!hub.listening());
    let refused = hub
        .open(id, "sub_b".into(), scope("", None), u64::MAX, vec![])
        .await;
    assert_eq!(refused, Err(OpenError::Closed));
}

#[tokio::test]
async fn frames_wakes_on_an_advance() {
    let hub = Hub::new(Source::Local);
    let connection = hub.connect();
    open(&hub, &connection, "sub_a", scope("", None)).await;
    let waiting = {
        let hub = Arc::clone(&hub);
        tokio::spawn(async move {
            tokio::task::yield_now().await;
            hub.announce(&[advance("p", 1, 1)]);
        })
    };
    let frames = tokio::time::timeout(Duration::from_secs(10), connection.frames())
        .await
        .expect("woken");
    waiting.await.unwrap();
    assert_eq!(frames.len(), 1);
    assert!(connection.take_frames().is_empty(), "taken once");
}

#[tokio::test]
async fn lost_advances_give_every_subscription_one_gap() {
    let hub = Hub::new(Source::Local);
    let connection = hub.connect();
    open(&hub, &connection, "sub_a", scope("", None)).await;
    open(&hub, &connection, "sub_b", scope("projects", None)).await;
    hub.lose_all();
    hub.lose_all();
    let frames = parsed(&connection.take_frames());
    assert_eq!(frames.len(), 2);
    assert!(frames.iter().all(|f| f.get("gap").is_some()));
}

#[tokio::test]
async fn without_a_source_nothing_opens() {
    let hub = Hub::new(Source::Absent("no stream".into()));
    let connection = hub.connect();
    let refused = hub
        .open(
            connection.id(),
            "sub_a".into(),
            scope("", None),
            u64::MAX,
            vec![],
        )
        .await;
    assert_eq!(refused, Err(OpenError::Unavailable("no stream".into())));
    assert!(!hub.listening());
}

#[tokio::test]
async fn a_remote_journal_that_cannot_be_reached_is_unavailable() {
    // A port nothing listens on: bind one, then let it go.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let follower = follow::Follower::parse(&format!("http://127.0.0.1:{port}")).unwrap();
    let hub = Hub::new(Source::Remote(follower));
    let connection = hub.connect();
    let refused = hub
        .open(
            connection.id(),
            "sub_a".into(),
            scope("", None),
            u64::MAX,
            vec![],
        )
        .await;
    assert!(
        matches!(refused, Err(OpenError::Unavailable(_))),
        "{refused:?}"
    );
    assert!(!hub.listening());
}
