//! Advances across hosts sharing one PostgreSQL store (`--store
//! postgresql://…`): what one host's journal commits reaches the
//! subscriptions every other host holds, through the database's
//! `LISTEN`/`NOTIFY` on one channel, [`CHANNEL`].
//!
//! - [`Publisher`]: a host hosting the journal hands each announce to it
//!   after the commit (never waiting); its task sends them with
//!   `pg_notify` on a connection of its own.
//! - [`listen`]: a host hosting the coordination service listens on the
//!   channel on a dedicated connection and announces what other hosts
//!   published to its own [`Hub`] (unless it follows a journal's stream,
//!   `--journal-advances URL`; a coordination-only host listens when told
//!   `--journal-advances store`).
//!
//! Invariants:
//! 1. **After the commit, never in the writer's way.** The journal
//!    announces once its commit returned; the publisher only merges the
//!    advances into a bounded outbox under a short lock and wakes its task.
//!    A crash between a commit and its notification loses the event on
//!    the other hosts, without a `gap`: the next advance of that journal
//!    names a later cutoff, and events are documented as carrying no
//!    backfill and no replay (a client re-reads its scope when it
//!    subscribes). Notifying inside the committing transaction would close
//!    that window but put a statement and the payload limit on every
//!    writer's path.
//! 2. **Coalesced, bounded, lost loudly.** The outbox keeps one advance per
//!    journal (the highest cutoff) and at most `capacity` journals
//!    (`--advance-stream-lines`). An advance that finds it full, a payload
//!    that cannot be sent (the server unreachable, the connection lost)
//!    and an advance too long for one notification (PostgreSQL's payload
//!    is shorter than 8,000 bytes) are lost: the publisher's next
//!    notification says `lost`, and every other host gives each of its
//!    subscriptions a `gap`.
//! 3. **Cutoffs per journal strictly increase.** Each notification names
//!    its publisher (`origin`, random per process); a listener drops its
//!    own (its hub had the advances directly), and its hub drops any
//!    advance at or below the cutoff it already took for that journal
//!    (`subscription::Highest`), so a subscriber never sees a journal's
//!    cutoff go back, whichever host committed it and in whatever order
//!    the notifications come.
//! 4. **A slow subscriber never slows a writer.** What is heard goes
//!    through [`Hub::announce`], whose pending tables are bounded and end
//!    in a `gap` (design.md, "Events" 3).
//! 5. **Nothing is polled; idle costs nothing.** The listening connection
//!    waits on its socket; the publisher's task waits on its wake. With
//!    nothing committed nothing is sent; with no subscription open here,
//!    a notification costs one atomic load and is not even parsed.
//! 6. **A lost listening connection is a `gap`.** Advances notified while
//!    a host did not listen are gone for it. A connection is lost when the
//!    server ends it or, silently gone, stops answering TCP keepalives
//!    ([`KEEPALIVE`], about a minute). The host connects again (waiting
//!    [`RETRY_FIRST`], doubling to [`RETRY_LONGEST`]), and once `LISTEN`
//!    took effect gives every subscription it holds a `gap`: a client that
//!    re-reads its scope after that frame sees every advance it missed,
//!    and every later one reaches it as an event. Subscriptions stay open
//!    meanwhile.
//! 7. **A revocation closes subscriptions on every host, lost or not.**
//!    A coordination host that revokes grants closes its own
//!    subscriptions, then ([`Revoker`]) records the grants in the store's
//!    `lab_revoked` and notifies them on [`CHANNEL`] in one statement, so
//!    both happen or neither, before the revoking request is answered;
//!    every host that hears them closes the subscriptions they authorized
//!    (`expired`). A host that (re)starts listening reads `lab_revoked`
//!    whole once `LISTEN` took effect, so what it missed while it did not
//!    listen closes then. Every coordination host on the store listens,
//!    also one that follows a journal's stream for its advances.

use super::subscription::Journal;
use super::{Advance, Hub};
use crate::kv::postgres::{describe, PgStore};
use serde::{Deserialize, Serialize};
use std::collections::HashMap;
use std::future::Future;
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;
use tokio::sync::Notify;
use tokio_postgres::types::{ToSql, Type};
use tokio_postgres::{AsyncMessage, Client, Config, NoTls};

/// The value of `--journal-advances` that says a coordination-only host
/// hears the journal's advances from the shared store.
pub const FROM_STORE: &str = "store";
/// The channel every host of one database publishes and listens on.
pub const CHANNEL: &str = "lab_advances";
/// Longest payload PostgreSQL takes (its limit: shorter than 8,000 bytes).
pub const MAX_PAYLOAD: usize = 7999;
/// First wait before connecting again after a failure.
pub const RETRY_FIRST: Duration = Duration::from_millis(100);
/// Longest wait between two attempts to connect.
pub const RETRY_LONGEST: Duration = Duration::from_secs(5);
/// Longest wait for a connection, or for `LISTEN`'s answer.
const CONNECT_WAIT: Duration = Duration::from_secs(5);
/// TCP keepalive of the listening connection: idle time before the first
/// probe, time between probes, probes unanswered before it counts as lost.
/// A server gone without closing the connection is noticed within about
/// a minute, not the system's two hours.
const KEEPALIVE: (Duration, Duration, u32) = (Duration::from_secs(30), Duration::from_secs(10), 3);

/// One notification as the channel carries it: advances, or the news that
/// some were lost, from the host `origin`.
#[derive(Debug, Serialize, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
struct Wire {
    origin: String,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    advances: Vec<WireAdvance>,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    lost: bool,
    /// Grant digests revoked (invariant 7).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    revoked: Vec<String>,
}

#[derive(Debug, Serialize, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
struct WireAdvance {
    root_id: String,
    space_id: String,
    path: Vec<String>,
    cutoff: u64,
}

/// The payloads that carry `advances` (and first the loss, when `lost`),
/// each at most [`MAX_PAYLOAD`] bytes; the second value says whether an
/// advance was too long for any payload (and so was lost).
fn payloads(origin: &str, advances: &[Advance], lost: bool) -> (Vec<String>, bool) {
    let head = format!(r#"{{"origin":{},"advances":["#, json_string(origin));
    let tail = "]}";
    let mut out = Vec::new();
    let mut too_long = false;
    let mut current = String::new();
    for advance in advances {
        let item = serde_json::to_string(&WireAdvance {
            root_id: advance.journal.root_id.clone(),
            space_id: advance.journal.space_id.clone(),
            path: advance.journal.path.clone(),
            cutoff: advance.cutoff,
        })
        .expect("an advance serializes");
        if head.len() + item.len() + tail.len() > MAX_PAYLOAD {
            too_long = true;
            continue;
        }
        if !current.is_empty()
            && head.len() + current.len() + 1 + item.len() + tail.len() > MAX_PAYLOAD
        {
            out.push(format!("{head}{current}{tail}"));
            current.clear();
        }
        if !current.is_empty() {
            current.push(',');
        }
        current.push_str(&item);
    }
    if !current.is_empty() {
        out.push(format!("{head}{current}{tail}"));
    }
    if lost || too_long {
        let loss = Wire {
            origin: origin.to_string(),
            advances: Vec::new(),
            lost: true,
            revoked: Vec::new(),
        };
        out.insert(0, serde_json::to_string(&loss).expect("a loss serializes"));
    }
    (out, too_long)
}

fn json_string(text: &str) -> String {
    serde_json::to_string(text).expect("a string serializes")
}

/// The payloads that carry the revocation of `grants`, each at most
/// [`MAX_PAYLOAD`] bytes.
fn revocation_payloads(origin: &str, grants: &[String]) -> Vec<String> {
    let payload = |revoked: Vec<String>| {
        serde_json::to_string(&Wire {
            origin: origin.to_string(),
            advances: Vec::new(),
            lost: false,
            revoked,
        })
        .expect("a revocation serializes")
    };
    let mut out = Vec::new();
    let mut current: Vec<String> = Vec::new();
    for grant in grants {
        current.push(grant.clone());
        if current.len() > 1 && payload(current.clone()).len() > MAX_PAYLOAD {
            let last = current.pop().expect("pushed above");
            out.push(payload(std::mem::replace(&mut current, vec![last])));
        }
    }
    if !current.is_empty() {
        out.push(payload(current));
    }
    out
}

/// What a notification says, once read.
#[derive(Debug, PartialEq, Eq)]
enum Heard {
    /// Published by this host: its hub had it already.
    Own,
    News {
        advances: Vec<Advance>,
        lost: bool,
        revoked: Vec<String>,
    },
    Unreadable(String),
}

fn read(origin: &str, payload: &str) -> Heard {
    let wire: Wire = match serde_json::from_str(payload) {
        Ok(wire) => wire,
        Err(e) => return Heard::Unreadable(e.to_string()),
    };
    if wire.origin == origin {
        return Heard::Own;
    }
    let advances = wire
        .advances
        .into_iter()
        .map(|a| Advance {
            journal: Journal {
                root_id: a.root_id,
                space_id: a.space_id,
                path: a.path,
            },
            cutoff: a.cutoff,
        })
        .collect();
    Heard::News {
        advances,
        lost: wire.lost,
        revoked: wire.revoked,
    }
}

/// Takes one notification into `hub`: its revocations always, its
/// advances when `advances` (the hub takes them from the store).
fn hear(hub: &Hub, origin: &str, payload: &str, advances_too: bool) {
    if !hub.listening() {
        return;
    }
    match read(origin, payload) {
        Heard::Own => {}
        Heard::News {
            advances,
            lost,
            revoked,
        } => {
            if !revoked.is_empty() {
                hub.revoke(&revoked);
            }
            if advances_too {
                hub.announce(&advances);
                if lost {
                    hub.lose_all();
                }
            }
        }
        Heard::Unreadable(why) => {
            tracing::warn!(
                error = why,
                "an unreadable notification on {CHANNEL}, ignored"
            );
        }
    }
}

/// A random name for this process's notifications.
pub fn origin() -> String {
    hex::encode(crate::blobstore::random_16())
}

/// The next wait before connecting again.
fn longer(wait: Duration) -> Duration {
    (wait * 2).min(RETRY_LONGEST)
}

/// What the publisher has yet to send.
#[derive(Default)]
struct Outbox {
    /// The highest cutoff per journal, by space ID.
    advances: HashMap<String, Advance>,
    lost: bool,
}

/// The journal's side: announces published on [`CHANNEL`] by a task of
/// their own.
pub struct Publisher {
    origin: String,
    outbox: Mutex<Outbox>,
    wake: Notify,
    /// Journals the outbox holds at most.
    capacity: usize,
}

impl Publisher {
    fn new(origin: String, capacity: usize) -> Publisher {
        Publisher {
            origin,
            outbox: Mutex::new(Outbox::default()),
            wake: Notify::new(),
            capacity: capacity.max(1),
        }
    }

    /// A publisher to the database `config` names, its task running on
    /// the current runtime.
    pub fn start(config: Config, origin: String, capacity: usize) -> Arc<Publisher> {
        let publisher = Arc::new(Publisher::new(origin, capacity));
        tokio::spawn(publishing(config, Arc::clone(&publisher)));
        publisher
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Outbox> {
        self.outbox.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Queues durable advances for the other hosts. Never waits.
    pub fn publish(&self, advances: &[Advance]) {
        let mut outbox = self.lock();
        for advance in advances {
            let space_id = &advance.journal.space_id;
            if let Some(queued) = outbox.advances.get_mut(space_id) {
                queued.cutoff = queued.cutoff.max(advance.cutoff);
            } else if outbox.advances.len() >= self.capacity {
                outbox.lost = true;
            } else {
                outbox.advances.insert(space_id.clone(), advance.clone());
            }
        }
        drop(outbox);
        self.wake.notify_one();
    }

    /// Records that what was taken could not be sent.
    fn lose(&self) {
        self.lock().lost = true;
    }

    /// What to send now, emptying the outbox; none when there is nothing.
    fn take(&self) -> Option<(Vec<Advance>, bool)> {
        let mut outbox = self.lock();
        if outbox.advances.is_empty() && !outbox.lost {
            return None;
        }
        let advances = std::mem::take(&mut outbox.advances).into_values().collect();
        Some((advances, std::mem::take(&mut outbox.lost)))
    }
}

/// What the server answered `request` (`what`), or why it did not within
/// [`CONNECT_WAIT`].
async fn answer<T>(
    what: &str,
    request: impl Future<Output = Result<T, tokio_postgres::Error>>,
) -> Result<T, String> {
    match tokio::time::timeout(CONNECT_WAIT, request).await {
        Ok(Ok(answer)) => Ok(answer),
        Ok(Err(e)) => Err(describe(&e)),
        Err(_) => Err(format!("{what}: no answer within {CONNECT_WAIT:?}")),
    }
}

/// `held`, connected first where it is not or no longer is: a connection
/// of its own to the database, driven on a task.
async fn connected<'c>(
    held: &'c mut Option<Client>,
    config: &Config,
) -> Result<&'c Client, String> {
    if held.as_ref().is_none_or(Client::is_closed) {
        let (client, connection) = answer("a connection", config.connect(NoTls)).await?;
        tokio::spawn(async move {
            let _ = connection.await;
        });
        *held = Some(client);
    }
    Ok(held.as_ref().expect("connected above"))
}

/// Sends what the publisher holds, for as long as the process lives.
async fn publishing(config: Config, publisher: Arc<Publisher>) {
    let mut client: Option<Client> = None;
    let mut wait = RETRY_FIRST;
    loop {
        let woken = publisher.wake.notified();
        let Some((advances, lost)) = publisher.take() else {
            woken.await;
            continue;
        };
        let (payloads, too_long) = payloads(&publisher.origin, &advances, lost);
        if too_long {
            tracing::warn!("an advance too long for one notification was lost to other hosts");
        }
        let sent = match connected(&mut client, &config).await {
            Ok(c) => send(c, &payloads).await,
            Err(e) => Err(e),
        };
        match sent {
            Ok(()) => wait = RETRY_FIRST,
            Err(e) => {
                tracing::warn!(
                    error = e,
                    "advances could not be published to other hosts; they will see a gap"
                );
                publisher.lose();
                client = None;
                tokio::time::sleep(wait).await;
                wait = longer(wait);
            }
        }
    }
}

/// One statement, so one transaction: its notifications are delivered on
/// its commit, in order.
async fn send(client: &Client, payloads: &[String]) -> Result<(), String> {
    let parameters: [(&(dyn ToSql + Sync), Type); 2] =
        [(&CHANNEL, Type::TEXT), (&payloads, Type::TEXT_ARRAY)];
    let sent = client.query_typed(
        "SELECT pg_notify($1, p) FROM unnest($2::text[]) AS p",
        &parameters,
    );
    answer("pg_notify", sent).await.map(drop)
}

/// A coordination host's side of revocations across hosts (invariant 7).
pub struct Revoker {
    store: Arc<PgStore>,
    origin: String,
}

impl Revoker {
    pub fn new(store: Arc<PgStore>, origin: String) -> Arc<Revoker> {
        Arc::new(Revoker { store, origin })
    }

    /// Records and notifies the revocation of `grants`, on a connection of
    /// the store's pool; a failure is tried once more (a connection found
    /// lost is not taken again).
    pub async fn publish(&self, grants: &[String]) -> Result<(), String> {
        let payloads = revocation_payloads(&self.origin, grants);
        let mut failure = String::new();
        for _ in 0..2 {
            match self.store.revoke(grants, CHANNEL, &payloads).await {
                Ok(()) => return Ok(()),
                Err(e) => failure = e.to_string(),
            }
        }
        Err(failure)
    }
}

/// Every grant ever revoked through the store.
async fn revoked(client: &Client) -> Result<Vec<String>, String> {
    let read = client.query("SELECT grant_digest FROM lab_revoked", &[]);
    let rows = answer("lab_revoked", read).await?;
    Ok(rows.iter().map(|row| row.get(0)).collect())
}

/// Listens on [`CHANNEL`] for as long as `hub` lives: revocations always
/// (invariant 7), and what other hosts publish announced to it when
/// `advances` (invariant 6 for a lost connection).
pub fn listen(mut config: Config, origin: String, hub: Weak<Hub>, advances: bool) {
    let (idle, interval, retries) = KEEPALIVE;
    config
        .keepalives(true)
        .keepalives_idle(idle)
        .keepalives_interval(interval)
        .keepalives_retries(retries);
    tokio::spawn(async move {
        let mut wait = RETRY_FIRST;
        loop {
            let why = match listen_once(&config, &origin, &hub, advances, &mut wait).await {
                Listened::HubGone => return,
                Listened::Lost(why) => why,
            };
            tracing::warn!(
                error = why,
                retry_in = ?wait,
                "not listening to other hosts' advances"
            );
            tokio::time::sleep(wait).await;
            wait = longer(wait);
        }
    });
}

enum Listened {
    HubGone,
    Lost(String),
}

/// One listening connection, from its opening to its loss.
async fn listen_once(
    config: &Config,
    origin: &str,
    hub: &Weak<Hub>,
    advances: bool,
    wait: &mut Duration,
) -> Listened {
    let (client, mut connection) = match answer("a connection", config.connect(NoTls)).await {
        Ok(pair) => pair,
        Err(e) => return Listened::Lost(e),
    };
    let heard_by = hub.clone();
    let origin = origin.to_string();
    let mut driver = tokio::spawn(async move {
        loop {
            let message = std::future::poll_fn(|cx| connection.poll_message(cx)).await;
            match message {
                Some(Ok(AsyncMessage::Notification(n))) if n.channel() == CHANNEL => {
                    let hub = heard_by.upgrade()?;
                    hear(&hub, &origin, n.payload(), advances);
                }
                Some(Ok(_)) => {}
                Some(Err(e)) => return Some(describe(&e)),
                None => return Some("the connection ended".to_string()),
            }
        }
    });
    let statement = format!("LISTEN {CHANNEL}");
    let listening = answer("LISTEN", client.batch_execute(&statement));
    tokio::select! {
        ended = &mut driver => return ended_as(ended),
        answered = listening => if let Err(e) = answered {
            driver.abort();
            return Listened::Lost(e);
        },
    }
    let Some(hub_now) = hub.upgrade() else {
        driver.abort();
        return Listened::HubGone;
    };
    // Whatever was notified before this instant may have been missed:
    // advances are a gap, revocations are read back (invariant 7).
    if advances {
        hub_now.lose_all();
    }
    if hub_now.listening() {
        match revoked(&client).await {
            Ok(grants) => hub_now.revoke(&grants),
            Err(e) => {
                driver.abort();
                return Listened::Lost(e);
            }
        }
    }
    drop(hub_now);
    *wait = RETRY_FIRST;
    tracing::info!("listening to other hosts' advances");
    // The client lives until the connection ends: dropping it would end
    // the connection.
    let ended = driver.await;
    drop(client);
    ended_as(ended)
}

fn ended_as(ended: Result<Option<String>, tokio::task::JoinError>) -> Listened {
    match ended {
        Ok(None) => Listened::HubGone,
        Ok(Some(why)) => Listened::Lost(why),
        Err(e) => Listened::Lost(e.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn advance(space: &str, path_len: usize, cutoff: u64) -> Advance {
        Advance {
            journal: Journal {
                root_id: "r".into(),
                space_id: space.into(),
                path: vec!["label".into(); path_len],
            },
            cutoff,
        }
    }

    #[test]
    fn payloads_fit_the_limit_and_read_back_in_order() {
        let advances: Vec<Advance> = (0..500).map(|i| advance(&format!("s{i}"), 3, i)).collect();
        let (payloads, too_long) = payloads("me", &advances, false);
        assert!(!too_long);
        assert!(payloads.len() > 1, "{}", payloads.len());
        let (read_back, lost, revoked) = read_all(&payloads);
        assert!(!lost && revoked.is_empty());
        assert_eq!(read_back, advances);
    }

    /// What `payloads` say together, as another host reads them; each
    /// within the limit.
    fn read_all(payloads: &[String]) -> (Vec<Advance>, bool, Vec<String>) {
        let mut all = (Vec::new(), false, Vec::new());
        for payload in payloads {
            assert!(payload.len() <= MAX_PAYLOAD, "{}", payload.len());
            match read("other", payload) {
                Heard::News {
                    advances,
                    lost,
                    revoked,
                } => {
                    all.0.extend(advances);
                    all.1 |= lost;
                    all.2.extend(revoked);
                }
                heard => panic!("{heard:?}"),
            }
        }
        all
    }

    #[test]
    fn an_advance_too_long_for_a_payload_is_sent_as_a_loss() {
        let advances = vec![advance("long", 2000, 1), advance("short", 1, 2)];
        let (payloads, too_long) = payloads("me", &advances, false);
        assert!(too_long);
        assert_eq!(payloads.len(), 2);
        assert_eq!(
            read("other", &payloads[0]),
            Heard::News {
                advances: Vec::new(),
                lost: true,
                revoked: Vec::new(),
            }
        );
        assert_eq!(
            read("other", &payloads[1]),
            Heard::News {
                advances: vec![advance("short", 1, 2)],
                lost: false,
                revoked: Vec::new(),
            }
        );
    }

    #[test]
    fn revocations_fit_the_limit_and_read_back_whole() {
        let grants: Vec<String> = (0..300).map(|i| format!("sha256:{i:064}")).collect();
        let payloads = revocation_payloads("me", &grants);
        assert!(payloads.len() > 1, "{}", payloads.len());
        let (advances, lost, read_back) = read_all(&payloads);
        assert!(advances.is_empty() && !lost);
        assert_eq!(read_back, grants);
        assert_eq!(read("me", &payloads[0]), Heard::Own);
    }

    #[test]
    fn a_host_ignores_its_own_notifications_and_unreadable_ones() {
        let (payloads, _) = payloads("me", &[advance("s", 1, 1)], true);
        for payload in &payloads {
            assert_eq!(read("me", payload), Heard::Own);
        }
        assert!(matches!(read("me", "{}"), Heard::Unreadable(_)));
        assert!(matches!(
            read("me", r#"{"origin":"x","advances":[{"root_id":"r"}]}"#),
            Heard::Unreadable(_)
        ));
        assert!(matches!(read("me", "not json"), Heard::Unreadable(_)));
    }

    #[test]
    fn the_outbox_keeps_the_highest_cutoff_per_journal_and_says_when_full() {
        let publisher = Publisher::new("me".into(), 2);
        publisher.publish(&[advance("a", 1, 5), advance("a", 1, 3), advance("b", 1, 1)]);
        publisher.publish(&[advance("a", 1, 7)]);
        let (mut advances, lost) = publisher.take().unwrap();
        advances.sort_by(|x, y| x.journal.space_id.cmp(&y.journal.space_id));
        assert_eq!(advances, vec![advance("a", 1, 7), advance("b", 1, 1)]);
        assert!(!lost);
        assert!(publisher.take().is_none());

        // Full: a third journal is lost, the queued ones still advance.
        publisher.publish(&[advance("a", 1, 8), advance("b", 1, 2), advance("c", 1, 1)]);
        let (advances, lost) = publisher.take().unwrap();
        assert_eq!(advances.len(), 2);
        assert!(lost);
        // A failed send is a loss the next payloads carry.
        publisher.lose();
        assert_eq!(publisher.take(), Some((Vec::new(), true)));
    }

    #[test]
    fn waits_between_attempts_double_up_to_the_longest() {
        let mut wait = RETRY_FIRST;
        for _ in 0..20 {
            let next = longer(wait);
            assert!(next >= wait && next <= RETRY_LONGEST);
            wait = next;
        }
        assert_eq!(wait, RETRY_LONGEST);
    }
}
