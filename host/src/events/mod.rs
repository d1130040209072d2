//! Subscriptions of socket connections to journal advances
//! (`contracts/coordination/WS.md`, "Subscriptions"; design.md, "Events").
//!
//! - [`Hub`]: one per process: every open subscription, by connection;
//!   advances in, frames out.
//! - [`Connection`]: one socket connection as the hub sees it (the seam
//!   with the socket binding).
//! - [`subscription`]: a subscription, its connection's pending table
//!   and their frames.
//! - [`feed`]: the journal's side: where its announces go (this process's
//!   hub, the followers of its management `GET /advances`).
//! - [`follow`]: the coordination side of a split deployment: following a
//!   remote journal's advance stream while subscriptions are open.
//! - [`shared`]: hosts sharing a PostgreSQL store: advances published to
//!   and heard from the other hosts over `LISTEN`/`NOTIFY`.
//!
//! The hub never waits on a client: `announce` only updates bounded
//! pending tables under one short lock and wakes the connections' writers.

pub mod feed;
pub mod follow;
#[cfg(test)]
mod follow_tests;
pub mod frames;
#[cfg(test)]
mod journal_tests;
#[cfg(test)]
mod measure;
pub mod shared;
pub mod subscription;
#[cfg(test)]
mod tests;

pub use feed::Feed;
pub use frames::Frames;
pub use subscription::{Journal, Reason, Scope};

use std::collections::HashMap;
use std::hash::{Hash, Hasher};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, Weak};
use std::time::{Duration, SystemTime, UNIX_EPOCH};
use subscription::{Highest, Pending, Slots, Subscription, Written};
use tokio::sync::Notify;

/// Subscriptions one connection may hold at once (WS.md decision 8).
pub const SUBSCRIPTIONS_PER_CONNECTION: usize = subscription::SLOTS;

/// Journals whose latest announced cutoff the hub remembers (per
/// generation, see [`subscription::Highest`]).
const REMEMBERED_JOURNALS: usize = 1 << 16;

/// Distinct scopes whose test an announce remembers per advance (a short
/// list scanned by pointer; past it scopes are tested each time).
const TESTED_SCOPES: usize = 32;

/// Longest the expiry sweep sleeps without looking at the clock again (a
/// wall clock may jump).
const LONGEST_SWEEP_SLEEP: Duration = Duration::from_secs(60);

/// One journal's advance, as the journal announces it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Advance {
    pub journal: Journal,
    pub cutoff: u64,
}

/// Why a subscription could not be opened.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum OpenError {
    /// The connection holds [`SUBSCRIPTIONS_PER_CONNECTION`] already.
    LimitExceeded,
    /// The connection is gone or shut.
    Closed,
    /// Advances cannot be followed now.
    Unavailable(String),
}

/// Where this process learns of the journal's advances.
pub enum Source {
    /// The journal is hosted here: its announces reach the hub directly.
    Local,
    /// The journal is hosted elsewhere and streams its advances.
    Remote(follow::Follower),
    /// The journal is hosted by other hosts of a shared PostgreSQL store,
    /// whose advances this host hears on the store's channel
    /// ([`shared::listen`], `--journal-advances store`).
    Shared,
    /// Nothing: subscriptions cannot be opened (the message says why).
    Absent(String),
}

/// Every open subscription of this process.
pub struct Hub {
    state: Mutex<State>,
    /// Open subscriptions, read without the lock by `listening`.
    open: AtomicUsize,
    next_connection: AtomicU64,
    source: Source,
    /// Wakes the expiry sweep when a subscription opens.
    schedule: Arc<Notify>,
    /// Wakes a follower of a remote journal when the last subscription
    /// ended.
    idle: Arc<Notify>,
    /// On a shared store, where revocations go for the other hosts.
    revoker: std::sync::OnceLock<Arc<shared::Revoker>>,
}

#[derive(Default)]
struct State {
    connections: HashMap<u64, Peer>,
    /// One shared scope per distinct scope of the open subscriptions, and
    /// scopes no longer held until the next purge.
    scopes: HashMap<Scope, Weak<Scope>>,
    /// How many `scopes` held after its last purge.
    scopes_purged_to: usize,
    highest: Option<Highest>,
    /// The open subscriptions' scopes, by space, so that an advance no
    /// scope covers costs no pass over the subscriptions.
    watched: Watched,
    /// Whether a follower of the remote journal's stream runs, and which.
    following: Option<u64>,
}

/// How many open subscriptions watch each scope space (its journal root
/// and prefix), by a hash of it. A journal is covered by a scope only if
/// the scope's space is the journal's or one of its ancestors, so an
/// advance none of whose `path.len() + 1` ancestors is counted here is
/// covered by no subscription. A hash collision only costs a pass that
/// finds nothing.
#[derive(Default)]
struct Watched {
    spaces: HashMap<u64, usize>,
}

impl Watched {
    fn add(&mut self, scope: &Scope) {
        *self.spaces.entry(space_key(scope)).or_default() += 1;
    }

    fn remove(&mut self, scope: &Scope) {
        let key = space_key(scope);
        if let Some(count) = self.spaces.get_mut(&key) {
            *count -= 1;
            if *count == 0 {
                self.spaces.remove(&key);
            }
        }
    }

    /// Whether some open subscription's scope space is `journal`'s space
    /// or one of its ancestors.
    fn may_cover(&self, journal: &Journal) -> bool {
        if self.spaces.is_empty() {
            return false;
        }
        let mut hasher = space_hasher(&journal.root_id);
        for label in &journal.path {
            if self.spaces.contains_key(&hasher.finish()) {
                return true;
            }
            label.as_str().hash(&mut hasher);
        }
        self.spaces.contains_key(&hasher.finish())
    }
}

/// The hasher of a scope space below journal root `root_id`, before its
/// labels (fixed keys: the same space always hashes the same).
fn space_hasher(root_id: &str) -> std::hash::DefaultHasher {
    let mut hasher = std::hash::DefaultHasher::new();
    root_id.hash(&mut hasher);
    hasher
}

fn space_key(scope: &Scope) -> u64 {
    let mut hasher = space_hasher(&scope.root_id);
    for label in &scope.prefix {
        label.as_str().hash(&mut hasher);
    }
    hasher.finish()
}

/// A connection's side of the hub.
struct Peer {
    notify: Arc<Notify>,
    subscriptions: Vec<Subscription>,
    /// What is pending for them.
    pending: Pending,
    /// Their frames' parts, in order, and their distinct scopes with the
    /// slots holding each (both remade as they open and close): an
    /// announce tests a connection's scopes without visiting its
    /// subscriptions.
    written: Arc<[Arc<Written>]>,
    scopes: Vec<(Arc<Scope>, Slots)>,
    /// Frames of subscriptions that ended, in order.
    outbox: Vec<String>,
    shut: bool,
}

impl Peer {
    fn new(notify: Arc<Notify>) -> Peer {
        Peer {
            notify,
            subscriptions: Vec::new(),
            pending: Pending::default(),
            written: Arc::new([]),
            scopes: Vec::new(),
            outbox: Vec::new(),
            shut: false,
        }
    }

    fn add(&mut self, subscription: Subscription) {
        let slot = self
            .pending
            .admit()
            .expect("fewer subscriptions than slots");
        self.subscriptions.push(subscription.admitted(slot));
        self.rewrite();
    }

    /// Removes subscription `i`, answering its `closed` frame.
    fn remove(&mut self, i: usize, reason: Reason) -> (Subscription, String) {
        let subscription = self.subscriptions.remove(i);
        let delivered = self.pending.release(subscription.slot());
        let closed = subscription.closed(reason, delivered);
        self.rewrite();
        (subscription, closed)
    }

    fn rewrite(&mut self) {
        self.written = self
            .subscriptions
            .iter()
            .map(|s| Arc::clone(&s.written))
            .collect();
        self.scopes.clear();
        for subscription in &self.subscriptions {
            let slot = subscription::bit(subscription.slot());
            match self
                .scopes
                .iter_mut()
                .find(|(scope, _)| Arc::ptr_eq(scope, &subscription.scope))
            {
                Some((_, slots)) => *slots |= slot,
                None => self.scopes.push((Arc::clone(&subscription.scope), slot)),
            }
        }
    }
}

/// One socket connection as the hub sees it. Created by the socket module
/// when a connection is accepted; dropped when it ends (its subscriptions
/// end silently, no frame).
pub struct Connection {
    id: u64,
    hub: Arc<Hub>,
    notify: Arc<Notify>,
}

impl Hub {
    /// A hub fed by `source`, with its expiry sweep running on the current
    /// runtime for as long as the hub lives.
    pub fn new(source: Source) -> Arc<Hub> {
        let hub = Arc::new(Hub {
            state: Mutex::new(State {
                highest: Some(Highest::new(REMEMBERED_JOURNALS)),
                ..State::default()
            }),
            open: AtomicUsize::new(0),
            next_connection: AtomicU64::new(1),
            source,
            schedule: Arc::new(Notify::new()),
            idle: Arc::new(Notify::new()),
            revoker: std::sync::OnceLock::new(),
        });
        tokio::spawn(sweep(Arc::downgrade(&hub), Arc::clone(&hub.schedule)));
        hub
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Registers a connection; its `id()` is passed to the component's
    /// `call`.
    pub fn connect(self: &Arc<Self>) -> Arc<Connection> {
        let id = self.next_connection.fetch_add(1, Ordering::Relaxed);
        let notify = Arc::new(Notify::new());
        self.lock()
            .connections
            .insert(id, Peer::new(Arc::clone(&notify)));
        Arc::new(Connection {
            id,
            hub: Arc::clone(self),
            notify,
        })
    }

    /// Whether any subscription is open (one atomic load).
    pub fn listening(&self) -> bool {
        self.open.load(Ordering::Relaxed) > 0
    }

    /// Opens subscription `id` on `connection`.
    pub async fn open(
        self: &Arc<Self>,
        connection: u64,
        id: String,
        scope: Scope,
        expires_at: u64,
        grants: Vec<String>,
    ) -> Result<(), OpenError> {
        let scope = self.intern(scope);
        let subscription = Subscription::new(id, scope, expires_at, grants);
        match &self.source {
            Source::Local | Source::Shared => self.insert(connection, subscription, None),
            Source::Absent(why) => Err(OpenError::Unavailable(why.clone())),
            Source::Remote(follower) => follower.open(self, connection, subscription).await,
        }
    }

    /// The hub's shared copy of `scope`. Scopes no subscription holds any
    /// more are purged whenever the table has doubled since the last purge
    /// (amortized constant time per open).
    fn intern(&self, scope: Scope) -> Arc<Scope> {
        let mut state = self.lock();
        if let Some(shared) = state.scopes.get(&scope).and_then(Weak::upgrade) {
            return shared;
        }
        let shared = Arc::new(scope.clone());
        state.scopes.insert(scope, Arc::downgrade(&shared));
        if state.scopes.len() > 2 * state.scopes_purged_to.max(32) {
            state.scopes.retain(|_, s| s.strong_count() > 0);
            state.scopes_purged_to = state.scopes.len();
        }
        shared
    }

    /// Checks that `connection` may open one more subscription.
    fn admissible(state: &State, connection: u64) -> Result<(), OpenError> {
        match state.connections.get(&connection) {
            None => Err(OpenError::Closed),
            Some(peer) if peer.shut => Err(OpenError::Closed),
            Some(peer) if peer.subscriptions.len() >= SUBSCRIPTIONS_PER_CONNECTION => {
                Err(OpenError::LimitExceeded)
            }
            Some(_) => Ok(()),
        }
    }

    /// Adds the subscription. For a remote journal: `start` is the
    /// generation of a follower just started (recorded under the same lock
    /// that adds the subscription, so it cannot stop before); without it a
    /// follower must be running (checked under the lock it stops under).
    fn insert(
        &self,
        connection: u64,
        subscription: Subscription,
        start: Option<u64>,
    ) -> Result<(), OpenError> {
        let mut state = self.lock();
        Self::admissible(&state, connection)?;
        if state.connections[&connection]
            .subscriptions
            .iter()
            .any(|s| s.id == subscription.id)
        {
            return Err(OpenError::Unavailable(
                "the subscription ID is taken on this connection".into(),
            ));
        }
        match (&self.source, start) {
            (Source::Remote(_), Some(generation)) => state.following = Some(generation),
            (Source::Remote(_), None) if state.following.is_none() => {
                return Err(OpenError::Unavailable(
                    "the journal's advance stream ended".into(),
                ))
            }
            _ => {}
        }
        state.watched.add(&subscription.scope);
        let peer = state.connections.get_mut(&connection).expect("admissible");
        peer.add(subscription);
        self.open.fetch_add(1, Ordering::Relaxed);
        drop(state);
        self.schedule.notify_one();
        Ok(())
    }

    /// Closes `id` of `connection` with `unsubscribed`, its `closed` frame
    /// queued; false when the connection holds no such subscription.
    pub fn close(&self, connection: u64, id: &str) -> bool {
        let mut state = self.lock();
        let state = &mut *state;
        let Some(peer) = state.connections.get_mut(&connection) else {
            return false;
        };
        let Some(i) = peer.subscriptions.iter().position(|s| s.id == id) else {
            return false;
        };
        let (subscription, closed) = peer.remove(i, Reason::Unsubscribed);
        state.watched.remove(&subscription.scope);
        peer.outbox.push(closed);
        peer.notify.notify_one();
        self.ended(1);
        true
    }

    /// Closes with `expired` every open subscription authorized through one
    /// of `grants`.
    pub fn revoke(&self, grants: &[String]) {
        if grants.is_empty() {
            return;
        }
        let grants: std::collections::HashSet<&str> = grants.iter().map(String::as_str).collect();
        self.close_where(Reason::Expired, |s| {
            s.grants.iter().any(|g| grants.contains(g.as_str()))
        });
    }

    /// Revokes `grants` here and, on a shared store, on every other host
    /// (`shared`, invariant 7): answered once the other hosts can hear it.
    pub async fn revoke_everywhere(&self, grants: &[String]) -> Result<(), String> {
        self.revoke(grants);
        match self.revoker.get() {
            Some(revoker) if !grants.is_empty() => revoker.publish(grants).await,
            _ => Ok(()),
        }
    }

    /// Makes revocations reach the other hosts of a shared store.
    pub fn share_revocations(&self, revoker: Arc<shared::Revoker>) {
        let _ = self.revoker.set(revoker);
    }

    /// Closes with `expired` every subscription whose `expires_at` is at or
    /// before `now` (Unix seconds); answers the next expiry, if any.
    pub fn expire(&self, now: u64) -> Option<u64> {
        self.close_where(Reason::Expired, |s| s.expires_at <= now);
        let state = self.lock();
        state
            .connections
            .values()
            .flat_map(|peer| peer.subscriptions.iter().map(|s| s.expires_at))
            .min()
    }

    /// Closes every subscription `doomed` picks, with `reason`.
    pub(super) fn close_where(&self, reason: Reason, doomed: impl Fn(&Subscription) -> bool) {
        let mut state = self.lock();
        let state = &mut *state;
        let mut ended = 0;
        for peer in state.connections.values_mut() {
            let before = peer.subscriptions.len();
            let mut i = 0;
            while i < peer.subscriptions.len() {
                if doomed(&peer.subscriptions[i]) {
                    let (subscription, closed) = peer.remove(i, reason);
                    state.watched.remove(&subscription.scope);
                    peer.outbox.push(closed);
                } else {
                    i += 1;
                }
            }
            if peer.subscriptions.len() < before {
                ended += before - peer.subscriptions.len();
                peer.notify.notify_one();
            }
        }
        self.ended(ended);
    }

    /// Counts `n` subscriptions ended (the lock held).
    fn ended(&self, n: usize) {
        if n > 0 && self.open.fetch_sub(n, Ordering::Relaxed) == n {
            self.idle.notify_one();
        }
    }

    /// Takes durable advances into the pending tables of the subscriptions
    /// whose scopes cover them, and wakes their connections. Each distinct
    /// scope is tested once per advance (scopes are shared, see
    /// [`Hub::intern`]).
    pub fn announce(&self, advances: &[Advance]) {
        if !self.listening() {
            return;
        }
        let mut state = self.lock();
        let state = &mut *state;
        let highest = state.highest.as_mut().expect("always set");
        let mut tested: Vec<(*const Scope, bool)> = Vec::new();
        for advance in advances {
            let Some(named) = highest.advance(&advance.journal, advance.cutoff) else {
                continue;
            };
            if !state.watched.may_cover(&advance.journal) {
                continue;
            }
            let journal = &advance.journal;
            tested.clear();
            for peer in state.connections.values_mut() {
                let mut covering: Slots = 0;
                for (shared, slots) in &peer.scopes {
                    let scope = Arc::as_ptr(shared);
                    let covers = match tested.iter().find(|(s, _)| *s == scope) {
                        Some(&(_, covers)) => covers,
                        None => {
                            let covers = shared.covers(&journal.root_id, &journal.path);
                            if tested.len() < TESTED_SCOPES {
                                tested.push((scope, covers));
                            }
                            covers
                        }
                    };
                    if covers {
                        covering |= slots;
                    }
                }
                if covering != 0 && peer.pending.offer(&named, advance.cutoff, covering) {
                    peer.notify.notify_one();
                }
            }
        }
    }

    /// Advances were lost on their way here: every subscription gets a
    /// `gap`.
    pub fn lose_all(&self) {
        let mut state = self.lock();
        for peer in state.connections.values_mut() {
            if peer.pending.lose_all() {
                peer.notify.notify_one();
            }
        }
    }

    fn disconnect(&self, connection: u64) {
        let mut state = self.lock();
        if let Some(peer) = state.connections.remove(&connection) {
            for subscription in &peer.subscriptions {
                state.watched.remove(&subscription.scope);
            }
            self.ended(peer.subscriptions.len());
        }
    }

    /// Takes what the connection's subscriptions hold under the lock, and
    /// writes the frames after releasing it: a connection's writer never
    /// holds up an announce longer than the taking.
    fn take_frames(&self, connection: u64) -> Frames {
        let (taken, ended) = {
            let mut state = self.lock();
            let Some(peer) = state.connections.get_mut(&connection) else {
                return Frames::default();
            };
            let taken = peer.pending.take(Arc::clone(&peer.written));
            (taken, std::mem::take(&mut peer.outbox))
        };
        let (count, bytes) = taken.as_ref().map_or((0, 0), |t| t.size());
        let closed: usize = ended.iter().map(String::len).sum();
        let mut frames = Frames::with_capacity(count + ended.len(), bytes + closed);
        if let Some(taken) = &taken {
            taken.write(&mut frames);
        }
        for frame in &ended {
            frames.push(frame);
        }
        frames
    }

    fn shut(&self, connection: u64) -> Vec<String> {
        let mut state = self.lock();
        let state = &mut *state;
        let Some(peer) = state.connections.get_mut(&connection) else {
            return Vec::new();
        };
        peer.shut = true;
        let mut frames = std::mem::take(&mut peer.outbox);
        let ended = peer.subscriptions.len();
        while !peer.subscriptions.is_empty() {
            let (subscription, closed) = peer.remove(0, Reason::Shutdown);
            state.watched.remove(&subscription.scope);
            frames.push(closed);
        }
        self.ended(ended);
        frames
    }
}

impl Connection {
    pub fn id(&self) -> u64 {
        self.id
    }

    /// The subscription frames waiting, once there are some: the pending
    /// tables are drained as by [`Connection::take_frames`], under one
    /// lock of the hub per take. Cancel-safe: frames are taken only in the
    /// poll that returns them.
    pub async fn frames(&self) -> Frames {
        loop {
            let notified = self.notify.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            let frames = self.hub.take_frames(self.id);
            if !frames.is_empty() {
                return frames;
            }
            notified.await;
        }
    }

    /// The subscription frames to write now, draining the pending tables.
    /// Frames of one subscription are in order; a `closed` frame is its
    /// last.
    pub fn take_frames(&self) -> Frames {
        self.hub.take_frames(self.id)
    }

    /// Shutdown: closes every open subscription with `shutdown` and returns
    /// their `closed` frames (after any frame still queued); later opens
    /// answer `closed`.
    pub fn shut(&self) -> Vec<String> {
        self.hub.shut(self.id)
    }
}

impl Drop for Connection {
    fn drop(&mut self) {
        self.hub.disconnect(self.id);
    }
}

/// Closes subscriptions as their `expires_at` comes, for as long as the
/// hub lives: sleeps until the earliest expiry or until a subscription
/// opens.
async fn sweep(hub: Weak<Hub>, schedule: Arc<Notify>) {
    loop {
        let next = match hub.upgrade() {
            Some(hub) => hub.expire(crate::clock::unix_now()),
            None => return,
        };
        let wait = match next {
            None => LONGEST_SWEEP_SLEEP,
            Some(at) => {
                UNIX_EPOCH
                    .checked_add(Duration::from_secs(at))
                    .map_or(LONGEST_SWEEP_SLEEP, |at| {
                        at.duration_since(SystemTime::now())
                            .unwrap_or_default()
                            .min(LONGEST_SWEEP_SLEEP)
                    })
            }
        };
        tokio::select! {
            _ = tokio::time::sleep(wait) => {}
            _ = schedule.notified() => {}
        }
    }
}
