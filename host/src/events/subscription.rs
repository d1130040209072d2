//! One subscription: its scope, its pending table and its frames
//! (`contracts/coordination/WS.md`, "Subscriptions", decisions 4 and 7).

use super::frames::Frames;
use serde_json::json;
use std::collections::HashMap;
use std::sync::{Arc, OnceLock};

/// The contract date every subscription frame carries (the coordination
/// service's).
pub const CONTRACT: &str = "2026-09-19";

/// Journals one subscription may have an event pending for (WS.md
/// decision 4); an advance of another journal past it queues a `gap`.
pub const PENDING_JOURNALS: usize = 1024;

/// A journal, as advances and events name it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Journal {
    pub root_id: String,
    pub space_id: String,
    /// The space's path from the journal root.
    pub path: Vec<String>,
}

/// A journal that advanced, shared by the pending entries of every
/// subscription it reached; the JSON of its space as frames show it is
/// made once, not once per subscription.
pub struct Named {
    pub journal: Journal,
    /// (hidden labels, the space's JSON with those labels left out)
    shown: OnceLock<(usize, String)>,
}

impl Named {
    pub fn new(journal: Journal) -> Arc<Named> {
        Arc::new(Named {
            journal,
            shown: OnceLock::new(),
        })
    }

    fn space_json(&self, hidden: usize) -> std::borrow::Cow<'_, str> {
        let make = || space_json(&self.journal, hidden);
        let (cached, text) = self.shown.get_or_init(|| (hidden, make()));
        if *cached == hidden {
            std::borrow::Cow::Borrowed(text)
        } else {
            std::borrow::Cow::Owned(make())
        }
    }
}

/// `{"root_id", "space_id", "path"}` with the first `hidden` labels of the
/// path left out.
fn space_json(journal: &Journal, hidden: usize) -> String {
    json!({
        "root_id": journal.root_id,
        "space_id": journal.space_id,
        "path": journal.path.get(hidden..).unwrap_or_default(),
    })
    .to_string()
}

/// What a subscription watches. Subscriptions of one hub with equal scopes
/// share one (`Hub` interns them), so that an announce tests each distinct
/// scope once.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Scope {
    /// Journal path of the scope's space, from the journal root.
    pub prefix: Vec<String>,
    /// 0: the scope's journal only; n: down to n levels below; none: all.
    pub depth: Option<u32>,
    /// Leading labels of a journal path left out of the paths frames carry
    /// (the world's own path).
    pub hidden: u32,
    /// The scope's own space, which a `gap` names.
    pub root_id: String,
    pub space_id: String,
}

impl Scope {
    /// Whether the journal at `path` of root `root_id` lies in the scope:
    /// at or below the prefix, within the depth. A space created inside
    /// the scope after the subscription opened is covered by the same
    /// test, since paths never change.
    pub fn covers(&self, root_id: &str, path: &[String]) -> bool {
        root_id == self.root_id
            && path.starts_with(&self.prefix)
            && self
                .depth
                .is_none_or(|depth| (path.len() - self.prefix.len()) as u64 <= u64::from(depth))
    }
}

/// What a connection's subscriptions had pending, taken from them under
/// the hub's lock; [`Taken::write`] makes the frames after it is released.
/// One take holds two vectors, whatever the number of subscriptions.
#[derive(Default)]
pub struct Taken {
    /// One per subscription taken, in order.
    groups: Vec<Group>,
    /// The events of every group, in order.
    events: Vec<(Arc<Named>, u64)>,
}

/// What one subscription had pending.
struct Group {
    /// The subscription's event frames up to the space (`EventHead`).
    head: Arc<str>,
    hidden: usize,
    /// Where its events end in [`Taken::events`] (they start where the
    /// group before it ends).
    events_end: usize,
    /// The subscription's ID and the scope's space, when a `gap` was
    /// pending.
    gap: Option<(String, Journal)>,
}

/// Bytes an event frame takes beyond its head: the space's IDs, a short
/// path and the cutoff (a guess for the buffer's first size).
const EVENT_BYTES: usize = 160;

impl Taken {
    /// Appends the frames to `frames`: for each subscription its events,
    /// then its gap.
    pub fn write(self, frames: &mut Frames) {
        use std::fmt::Write as _;
        let mut start = 0;
        for group in &self.groups {
            for (named, cutoff) in &self.events[start..group.events_end] {
                let space = named.space_json(group.hidden);
                frames.push_with(|frame| {
                    frame.push_str(&group.head);
                    frame.push_str(&space);
                    let _ = write!(frame, r#","cutoff":{cutoff}}}}}"#);
                });
            }
            start = group.events_end;
            if let Some((id, space)) = &group.gap {
                let id = serde_json::to_string(id).expect("a string serializes");
                frames.push_with(|frame| {
                    let _ = write!(
                        frame,
                        r#"{{"subscription":{id},"contract":"{CONTRACT}","gap":{{"space":{}}}}}"#,
                        space_json(space, group.hidden)
                    );
                });
            }
        }
    }

    /// About how many frames, and bytes in all, [`Taken::write`] writes
    /// (the subscriptions' heads are of one length but for their IDs).
    pub fn size(&self) -> (usize, usize) {
        let gaps = self.groups.iter().filter(|g| g.gap.is_some()).count();
        let head = self.groups.first().map_or(0, |g| g.head.len());
        let frames = self.events.len() + gaps;
        (frames, frames * (head + EVENT_BYTES))
    }
}

/// Why a subscription ended (`closed.reason`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reason {
    Expired,
    Unsubscribed,
    Shutdown,
    ScopeUnavailable,
}

impl Reason {
    pub fn as_str(self) -> &'static str {
        match self {
            Reason::Expired => "expired",
            Reason::Unsubscribed => "unsubscribed",
            Reason::Shutdown => "shutdown",
            Reason::ScopeUnavailable => "scope_unavailable",
        }
    }
}

/// An open subscription.
///
/// Invariants: at most [`PENDING_JOURNALS`] journals are pending, each at
/// most once (a later advance replaces its cutoff, never a lower one); at
/// most one `gap` is pending.
pub struct Subscription {
    pub id: String,
    pub scope: Arc<Scope>,
    /// Unix seconds at which it closes with `expired`.
    pub expires_at: u64,
    /// Digests of the grants that authorized it.
    pub grants: Vec<String>,
    /// `{"subscription":…,"contract":…,"event":{"space":`, made once.
    head: Arc<str>,
    pending: Vec<(Arc<Named>, u64)>,
    /// Index in `pending` by space ID, kept once `pending` holds more than
    /// [`SCANNED`] journals (below that a scan is cheaper than hashing).
    at: HashMap<String, usize>,
    gap: bool,
    delivered: u64,
}

/// Pending journals looked up by scanning rather than by `at`.
const SCANNED: usize = 16;

impl Subscription {
    pub fn new(id: String, scope: Arc<Scope>, expires_at: u64, grants: Vec<String>) -> Self {
        let quoted = serde_json::to_string(&id).expect("a string serializes");
        let head =
            format!(r#"{{"subscription":{quoted},"contract":"{CONTRACT}","event":{{"space":"#);
        Subscription {
            head: head.into(),
            id,
            scope,
            expires_at,
            grants,
            pending: Vec::new(),
            at: HashMap::new(),
            gap: false,
            delivered: 0,
        }
    }

    /// Takes the advance of `journal` to `cutoff` (which the scope covers)
    /// into the pending table; true when a frame became due.
    pub fn offer(&mut self, named: &Arc<Named>, cutoff: u64) -> bool {
        if let Some(i) = self.position(named) {
            let pending = &mut self.pending[i].1;
            if cutoff <= *pending {
                return false;
            }
            *pending = cutoff;
            return true;
        }
        if self.pending.len() >= PENDING_JOURNALS {
            return self.lose();
        }
        self.pending.push((Arc::clone(named), cutoff));
        if self.pending.len() > SCANNED {
            if self.at.is_empty() {
                for (i, (pending, _)) in self.pending.iter().enumerate() {
                    self.at.insert(pending.journal.space_id.clone(), i);
                }
            } else {
                self.at
                    .insert(named.journal.space_id.clone(), self.pending.len() - 1);
            }
        }
        true
    }

    /// Where `named`'s journal is in `pending`, if it is. The hub hands
    /// out one `Named` per journal while it remembers the journal
    /// (`Highest`), so the pointer test nearly always settles it; the
    /// names are compared only when no pointer matches.
    fn position(&self, named: &Arc<Named>) -> Option<usize> {
        let space_id = named.journal.space_id.as_str();
        if self.pending.len() > SCANNED {
            return self.at.get(space_id).copied();
        }
        self.pending
            .iter()
            .position(|(pending, _)| Arc::ptr_eq(pending, named))
            .or_else(|| {
                self.pending
                    .iter()
                    .position(|(pending, _)| pending.journal.space_id == space_id)
            })
    }

    /// Records that an advance in scope was not kept: one `gap` pending.
    /// True when it was not pending already.
    pub fn lose(&mut self) -> bool {
        !std::mem::replace(&mut self.gap, true)
    }

    pub fn has_frames(&self) -> bool {
        self.gap || !self.pending.is_empty()
    }

    /// Takes what is pending into `taken`, emptying the table (events
    /// taken count as delivered). The table keeps room for [`SCANNED`]
    /// journals, so a subscription that keeps receiving events does not
    /// allocate one every take.
    pub fn take(&mut self, taken: &mut Taken) {
        if !self.has_frames() {
            return;
        }
        self.at.clear();
        self.delivered += self.pending.len() as u64;
        taken.events.append(&mut self.pending);
        self.pending.shrink_to(SCANNED);
        let gap = std::mem::take(&mut self.gap).then(|| {
            let space = Journal {
                root_id: self.scope.root_id.clone(),
                space_id: self.scope.space_id.clone(),
                path: self.scope.prefix.clone(),
            };
            (self.id.clone(), space)
        });
        taken.groups.push(Group {
            head: Arc::clone(&self.head),
            hidden: self.scope.hidden as usize,
            events_end: taken.events.len(),
            gap,
        });
    }

    /// The subscription's last frame. What is still pending is dropped:
    /// the client re-reads the scope anyway once it ends.
    pub fn closed(self, reason: Reason) -> String {
        json!({
            "subscription": self.id,
            "contract": CONTRACT,
            "closed": { "reason": reason.as_str(), "delivered": self.delivered },
        })
        .to_string()
    }
}

/// The highest cutoff announced per journal, so that an announce that
/// arrives after a later one of the same journal (two commits racing from
/// their commit to their announce) is dropped: the later cutoff covers it.
/// It also keeps the journal's [`Named`], so that the pending tables of
/// every subscription hold one shared name per journal across announces.
///
/// Bounded: two generations of at most `capacity` journals each; a journal
/// is remembered for at least `capacity` announces of other journals,
/// far longer than any commit takes to reach its announce.
pub struct Highest {
    current: HashMap<String, (u64, Arc<Named>)>,
    previous: HashMap<String, (u64, Arc<Named>)>,
    capacity: usize,
}

impl Highest {
    pub fn new(capacity: usize) -> Self {
        Highest {
            current: HashMap::new(),
            previous: HashMap::new(),
            capacity: capacity.max(1),
        }
    }

    /// The journal's name when `cutoff` is later than every cutoff
    /// announced for it so far (and remembers it); none otherwise.
    pub fn advance(&mut self, journal: &Journal, cutoff: u64) -> Option<Arc<Named>> {
        let space_id = journal.space_id.as_str();
        if let Some((known, named)) = self.current.get_mut(space_id) {
            if cutoff <= *known {
                return None;
            }
            *known = cutoff;
            return Some(Arc::clone(named));
        }
        let named = match self.previous.get(space_id) {
            Some((known, _)) if cutoff <= *known => return None,
            Some((_, named)) => Arc::clone(named),
            None => Named::new(journal.clone()),
        };
        if self.current.len() >= self.capacity {
            self.previous = std::mem::take(&mut self.current);
        }
        self.current
            .insert(space_id.to_string(), (cutoff, Arc::clone(&named)));
        Some(named)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn journal(i: usize) -> Arc<Named> {
        Named::new(Journal {
            root_id: "rt_1".into(),
            space_id: format!("spc_{i}"),
            path: vec!["p".into(), format!("j{i}")],
        })
    }

    #[test]
    fn a_take_moves_every_event_and_keeps_room_for_a_few_journals_only() {
        let scope = Arc::new(Scope {
            prefix: vec![],
            depth: None,
            hidden: 0,
            root_id: "rt_1".into(),
            space_id: "spc_0".into(),
        });
        let mut subscription = Subscription::new("sub_a".into(), scope, u64::MAX, vec![]);
        for i in 0..100 {
            assert!(subscription.offer(&journal(i), 1));
        }
        assert!(subscription.lose());
        let mut taken = Taken::default();
        subscription.take(&mut taken);
        assert!(subscription.pending.capacity() <= SCANNED);
        assert!(!subscription.has_frames());
        let mut frames = Frames::default();
        taken.write(&mut frames);
        let frames: Vec<serde_json::Value> = frames
            .iter()
            .map(|f| serde_json::from_str(f).unwrap())
            .collect();
        assert_eq!(frames.len(), 101, "the events, then the gap");
        for (i, frame) in frames[..100].iter().enumerate() {
            assert_eq!(frame["event"]["space"]["space_id"], format!("spc_{i}"));
            assert_eq!(frame["event"]["cutoff"], 1);
        }
        assert_eq!(frames[100]["gap"]["space"]["space_id"], "spc_0");
        assert!(subscription
            .closed(Reason::Shutdown)
            .contains(r#""delivered":100"#));
    }
}
