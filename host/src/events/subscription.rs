//! Subscriptions, the pending table of a connection's subscriptions and
//! their frames (`contracts/coordination/WS.md`, "Subscriptions",
//! decisions 4 and 7).

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

/// Subscriptions one connection may hold at once (WS.md decision 8): one
/// bit each of a [`Slots`] mask.
pub const SLOTS: usize = 16;

/// A set of a connection's subscriptions, by slot.
pub type Slots = u16;

const _: () = assert!(SLOTS <= Slots::BITS as usize);

/// The mask holding `slot` alone.
pub fn bit(slot: u8) -> Slots {
    1 << slot
}

/// What one subscription's frames are made of, fixed when it opens.
pub struct Written {
    /// Its bit in the connection's [`Pending`] masks.
    slot: u8,
    /// `{"subscription":…,"contract":…,"event":{"space":`.
    head: String,
    /// Leading path labels its frames leave out.
    hidden: usize,
    /// Its whole `gap` frame.
    gap: String,
}

/// Bytes an event frame takes beyond its head: the space's IDs, a short
/// path and the cutoff (a guess for the buffer's first size).
const EVENT_BYTES: usize = 160;

/// One connection's pending events: one entry per journal, with the
/// subscriptions it is pending for as a mask, so that an announce writes
/// one entry per connection, not one per subscription, and a take moves
/// one table.
///
/// Invariants: a journal has at most one entry; an entry's slots are open
/// subscriptions' (never empty, but between a `release` and the next
/// take); `counts[s]` is the number of entries holding slot `s`, at most
/// [`PENDING_JOURNALS`]; every subscription pending for a journal is
/// pending at the entry's cutoff, the latest announced since the last
/// take (a subscription open at an earlier advance since then was open at
/// the latest too, and scopes do not change).
#[derive(Default)]
pub struct Pending {
    journals: Vec<Entry>,
    /// Index of `journals` by space ID, kept once it holds more than
    /// [`SCANNED`] journals (below that a scan is cheaper than hashing).
    at: HashMap<String, usize>,
    counts: [u16; SLOTS],
    /// Slots with a `gap` pending.
    gaps: Slots,
    /// Events taken, by slot, since the slot's subscription opened.
    delivered: [u64; SLOTS],
    /// Slots of open subscriptions.
    open: Slots,
}

struct Entry {
    named: Arc<Named>,
    cutoff: u64,
    slots: Slots,
}

/// Pending journals looked up by scanning rather than by `at`.
const SCANNED: usize = 16;

impl Pending {
    /// A free slot for a subscription that opens, with nothing pending;
    /// none when all [`SLOTS`] are held.
    pub fn admit(&mut self) -> Option<u8> {
        let slot = (!self.open).trailing_zeros();
        if slot as usize >= SLOTS {
            return None;
        }
        let slot = slot as u8;
        self.open |= bit(slot);
        self.counts[slot as usize] = 0;
        self.delivered[slot as usize] = 0;
        self.gaps &= !bit(slot);
        Some(slot)
    }

    /// Frees `slot`, dropping what was pending for it (the client re-reads
    /// the scope anyway once the subscription ends); answers the events it
    /// had delivered.
    pub fn release(&mut self, slot: u8) -> u64 {
        let gone = bit(slot);
        self.open &= !gone;
        self.gaps &= !gone;
        if self.counts[slot as usize] > 0 {
            self.counts[slot as usize] = 0;
            for entry in &mut self.journals {
                entry.slots &= !gone;
            }
            self.journals.retain(|entry| entry.slots != 0);
            self.reindex();
        }
        self.delivered[slot as usize]
    }

    /// Takes the advance of `named`'s journal to `cutoff` for the open
    /// subscriptions `covering` (whose scopes cover it); a subscription
    /// whose table is full gets a `gap` instead. True when a frame became
    /// due.
    pub fn offer(&mut self, named: &Arc<Named>, cutoff: u64, covering: Slots) -> bool {
        let covering = covering & self.open;
        let found = self.position(named);
        let held = found.map_or(0, |i| self.journals[i].slots);
        let mut due = false;
        let mut joining: Slots = 0;
        let mut new = covering & !held;
        while new != 0 {
            let slot = new.trailing_zeros() as u8;
            let one = bit(slot);
            new &= !one;
            let count = &mut self.counts[usize::from(slot)];
            if usize::from(*count) >= PENDING_JOURNALS {
                due |= self.gaps & one == 0;
                self.gaps |= one;
            } else {
                *count += 1;
                joining |= one;
            }
        }
        match found {
            Some(i) => {
                let entry = &mut self.journals[i];
                if cutoff > entry.cutoff {
                    entry.cutoff = cutoff;
                    due |= entry.slots & covering != 0;
                }
                entry.slots |= joining;
            }
            None if joining != 0 => {
                self.journals.push(Entry {
                    named: Arc::clone(named),
                    cutoff,
                    slots: joining,
                });
                if self.journals.len() > SCANNED {
                    if self.at.is_empty() {
                        self.reindex();
                    } else {
                        self.at
                            .insert(named.journal.space_id.clone(), self.journals.len() - 1);
                    }
                }
            }
            None => {}
        }
        due | (joining != 0)
    }

    /// Where `named`'s journal is in `journals`, if it is. The hub hands
    /// out one `Named` per journal while it remembers the journal
    /// (`Highest`), so the pointer test nearly always settles it; the
    /// names are compared only when no pointer matches.
    fn position(&self, named: &Arc<Named>) -> Option<usize> {
        let space_id = named.journal.space_id.as_str();
        if self.journals.len() > SCANNED {
            return self.at.get(space_id).copied();
        }
        self.journals
            .iter()
            .position(|entry| Arc::ptr_eq(&entry.named, named))
            .or_else(|| {
                self.journals
                    .iter()
                    .position(|entry| entry.named.journal.space_id == space_id)
            })
    }

    fn reindex(&mut self) {
        self.at.clear();
        if self.journals.len() > SCANNED {
            for (i, entry) in self.journals.iter().enumerate() {
                self.at.insert(entry.named.journal.space_id.clone(), i);
            }
        }
    }

    /// Records that advances in scope were not kept: one `gap` pending for
    /// every open subscription. True when one was not pending already.
    pub fn lose_all(&mut self) -> bool {
        let due = self.open & !self.gaps != 0;
        self.gaps |= self.open;
        due
    }

    /// Takes everything pending, emptying the table (events taken count as
    /// delivered). The table keeps room for [`SCANNED`] journals, so a
    /// connection that keeps receiving events does not allocate one every
    /// take.
    pub fn take(&mut self, written: Arc<[Arc<Written>]>) -> Option<Taken> {
        if self.journals.is_empty() && self.gaps == 0 {
            return None;
        }
        for (delivered, count) in self.delivered.iter_mut().zip(&mut self.counts) {
            *delivered += u64::from(std::mem::take(count));
        }
        self.at.clear();
        let journals = std::mem::replace(&mut self.journals, Vec::with_capacity(SCANNED));
        Some(Taken {
            written,
            journals,
            gaps: std::mem::take(&mut self.gaps),
        })
    }
}

/// What a connection's subscriptions had pending, taken under the hub's
/// lock; [`Taken::write`] makes the frames after it is released.
pub struct Taken {
    /// The connection's subscriptions at the take, in order.
    written: Arc<[Arc<Written>]>,
    journals: Vec<Entry>,
    gaps: Slots,
}

impl Taken {
    /// Appends the frames to `frames`: for each subscription its events,
    /// then its gap.
    pub fn write(&self, frames: &mut Frames) {
        use std::fmt::Write as _;
        for written in self.written.iter() {
            let slot = bit(written.slot);
            for entry in self.journals.iter().filter(|e| e.slots & slot != 0) {
                let space = entry.named.space_json(written.hidden);
                frames.push_with(|frame| {
                    frame.push_str(&written.head);
                    frame.push_str(&space);
                    let _ = write!(frame, r#","cutoff":{}}}}}"#, entry.cutoff);
                });
            }
            if self.gaps & slot != 0 {
                frames.push(&written.gap);
            }
        }
    }

    /// About how many frames, and bytes in all, [`Taken::write`] writes
    /// (the subscriptions' heads are of one length but for their IDs).
    pub fn size(&self) -> (usize, usize) {
        let events: u32 = self.journals.iter().map(|e| e.slots.count_ones()).sum();
        let head = self.written.first().map_or(0, |w| w.head.len());
        let frames = (events + self.gaps.count_ones()) as usize;
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

/// An open subscription; what is pending for it is in its connection's
/// [`Pending`], under its slot.
pub struct Subscription {
    pub id: String,
    pub scope: Arc<Scope>,
    /// Unix seconds at which it closes with `expired`.
    pub expires_at: u64,
    /// Digests of the grants that authorized it.
    pub grants: Vec<String>,
    /// Its frames' parts, and its slot once its connection admitted it.
    pub written: Arc<Written>,
}

impl Subscription {
    pub fn new(id: String, scope: Arc<Scope>, expires_at: u64, grants: Vec<String>) -> Self {
        let quoted = serde_json::to_string(&id).expect("a string serializes");
        let space = Journal {
            root_id: scope.root_id.clone(),
            space_id: scope.space_id.clone(),
            path: scope.prefix.clone(),
        };
        let hidden = scope.hidden as usize;
        let written = Written {
            slot: 0,
            head: format!(
                r#"{{"subscription":{quoted},"contract":"{CONTRACT}","event":{{"space":"#
            ),
            hidden,
            gap: format!(
                r#"{{"subscription":{quoted},"contract":"{CONTRACT}","gap":{{"space":{}}}}}"#,
                space_json(&space, hidden)
            ),
        };
        Subscription {
            id,
            scope,
            expires_at,
            grants,
            written: Arc::new(written),
        }
    }

    /// The subscription's slot on its connection.
    pub fn slot(&self) -> u8 {
        self.written.slot
    }

    /// Gives the subscription its connection's `slot`.
    pub fn admitted(mut self, slot: u8) -> Self {
        Arc::get_mut(&mut self.written)
            .expect("not yet shared: admitted before it is written")
            .slot = slot;
        self
    }

    /// The subscription's last frame, after `delivered` events.
    pub fn closed(&self, reason: Reason, delivered: u64) -> String {
        json!({
            "subscription": self.id,
            "contract": CONTRACT,
            "closed": { "reason": reason.as_str(), "delivered": delivered },
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

    fn subscription(id: &str, slot: u8) -> Subscription {
        let scope = Arc::new(Scope {
            prefix: vec![],
            depth: None,
            hidden: 0,
            root_id: "rt_1".into(),
            space_id: "spc_0".into(),
        });
        Subscription::new(id.into(), scope, u64::MAX, vec![]).admitted(slot)
    }

    /// The frames of a take, parsed.
    fn frames_of(taken: Option<Taken>) -> Vec<serde_json::Value> {
        let mut frames = Frames::default();
        if let Some(taken) = taken {
            taken.write(&mut frames);
        }
        frames
            .iter()
            .map(|f| serde_json::from_str(f).unwrap())
            .collect()
    }

    fn events(frames: &[serde_json::Value], id: &str) -> Vec<(String, u64)> {
        frames
            .iter()
            .filter(|f| f["subscription"] == id && f.get("event").is_some())
            .map(|f| {
                let event = &f["event"];
                let space = event["space"]["space_id"].as_str().unwrap().to_string();
                (space, event["cutoff"].as_u64().unwrap())
            })
            .collect()
    }

    #[test]
    fn a_take_moves_every_event_then_the_gap_and_keeps_room_for_a_few_journals_only() {
        let mut pending = Pending::default();
        let slot = pending.admit().unwrap();
        let written: Arc<[Arc<Written>]> = Arc::new([subscription("sub_a", slot).written]);
        for i in 0..PENDING_JOURNALS {
            assert!(pending.offer(&journal(i), 1, bit(slot)));
        }
        assert!(
            pending.offer(&journal(PENDING_JOURNALS), 1, bit(slot)),
            "a gap is due"
        );
        assert!(
            !pending.offer(&journal(PENDING_JOURNALS + 1), 1, bit(slot)),
            "one gap"
        );
        let frames = frames_of(pending.take(Arc::clone(&written)));
        assert!(pending.journals.capacity() <= SCANNED && pending.at.is_empty());
        assert!(pending.take(Arc::clone(&written)).is_none(), "drained");
        assert_eq!(
            frames.len(),
            PENDING_JOURNALS + 1,
            "the events, then the gap"
        );
        for (i, frame) in frames[..PENDING_JOURNALS].iter().enumerate() {
            assert_eq!(frame["event"]["space"]["space_id"], format!("spc_{i}"));
            assert_eq!(frame["event"]["cutoff"], 1);
        }
        assert_eq!(
            frames[PENDING_JOURNALS]["gap"]["space"]["space_id"],
            "spc_0"
        );
        assert_eq!(pending.release(slot), PENDING_JOURNALS as u64, "delivered");
    }

    #[test]
    fn subscriptions_share_a_journal_entry_and_each_get_its_latest_cutoff() {
        let mut pending = Pending::default();
        let (a, b) = (pending.admit().unwrap(), pending.admit().unwrap());
        let written: Arc<[Arc<Written>]> = Arc::new([
            subscription("sub_a", a).written,
            subscription("sub_b", b).written,
        ]);
        let (x, y) = (journal(1), journal(2));
        assert!(pending.offer(&x, 1, bit(a)));
        assert!(
            pending.offer(&x, 2, bit(a) | bit(b)),
            "b joins, a's cutoff rises"
        );
        assert!(!pending.offer(&x, 2, bit(a) | bit(b)), "nothing new");
        assert!(pending.offer(&y, 5, bit(b)));
        assert_eq!(pending.journals.len(), 2, "one entry per journal");
        let frames = frames_of(pending.take(written));
        assert_eq!(events(&frames, "sub_a"), [("spc_1".to_string(), 2)]);
        assert_eq!(
            events(&frames, "sub_b"),
            [("spc_1".to_string(), 2), ("spc_2".to_string(), 5)]
        );
        assert_eq!((pending.release(a), pending.release(b)), (1, 2));
    }

    #[test]
    fn a_released_slot_drops_its_events_and_comes_back_empty() {
        let mut pending = Pending::default();
        let (a, b) = (pending.admit().unwrap(), pending.admit().unwrap());
        for i in 0..SCANNED + 4 {
            pending.offer(&journal(i), 1, bit(a));
        }
        pending.offer(&journal(0), 2, bit(b));
        assert!(pending.lose_all());
        assert_eq!(pending.release(a), 0);
        assert_eq!(pending.journals.len(), 1, "only b's journal is left");
        assert_eq!(pending.admit(), Some(a), "the lowest free slot");
        assert!(
            !pending.offer(&journal(1), 1, 1 << 15),
            "a slot not open is not offered"
        );
        let written: Arc<[Arc<Written>]> = Arc::new([
            subscription("sub_c", a).written,
            subscription("sub_b", b).written,
        ]);
        let frames = frames_of(pending.take(written));
        assert!(events(&frames, "sub_c").is_empty());
        assert_eq!(events(&frames, "sub_b"), [("spc_0".to_string(), 2)]);
        let gaps: Vec<_> = frames.iter().filter(|f| f.get("gap").is_some()).collect();
        assert_eq!(gaps.len(), 1, "the gap was b's: c opened after it");
        assert_eq!(gaps[0]["subscription"], "sub_b");
        for _ in 2..SLOTS {
            assert!(pending.admit().is_some());
        }
        assert_eq!(pending.admit(), None, "every slot is held");
    }
}
