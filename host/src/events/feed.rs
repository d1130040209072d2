//! The journal's side of events: where its announces go.
//!
//! An announce reaches this process's [`Hub`] and every follower of the
//! journal's advance stream (management `GET /advances`, one JSON line per
//! advance: `{"root_id", "space_id", "path", "cutoff"}`). A follower's
//! queue is bounded: past `lines` unsent advances, further ones are dropped
//! and the stream writes one line `{"lost": true}` after what it kept, so a
//! slow follower costs the journal nothing but memory up to that bound.
//! On a shared PostgreSQL store, announces also go to the other hosts
//! through a [`Publisher`] (see [`super::shared`]).

use super::shared::Publisher;
use super::{Advance, Hub};
use crate::parts::{self, Streamed};
use bytes::Bytes;
use serde_json::json;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use tokio::sync::Notify;

/// The line that says advances were dropped.
pub const LOST_LINE: &str = "{\"lost\":true}\n";

/// Where the journal's announces go.
pub struct Feed {
    hub: Arc<Hub>,
    outlets: Mutex<Vec<Arc<Outlet>>>,
    /// Open streams, read without the lock by `listening`.
    streaming: AtomicUsize,
    /// Unsent advances one stream may hold.
    lines: usize,
    closed: AtomicBool,
    /// The other hosts of a shared store, when there are any.
    publisher: Option<Arc<Publisher>>,
}

/// One follower's stream.
pub struct Outlet {
    queue: Mutex<Queue>,
    notify: Notify,
    lines: usize,
}

#[derive(Default)]
struct Queue {
    text: String,
    count: usize,
    lost: bool,
    closed: bool,
}

impl Outlet {
    fn new(lines: usize) -> Self {
        Outlet {
            queue: Mutex::new(Queue::default()),
            notify: Notify::new(),
            lines,
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Queue> {
        self.queue.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Queues `lines` (each one advance), dropping those past the bound.
    fn push(&self, lines: &[String]) {
        let mut queue = self.lock();
        for line in lines {
            if queue.count >= self.lines {
                queue.lost = true;
                break;
            }
            queue.text.push_str(line);
            queue.count += 1;
        }
        drop(queue);
        self.notify.notify_one();
    }

    fn close(&self) {
        self.lock().closed = true;
        self.notify.notify_one();
    }

    /// What to send now: the queued lines, then the loss line when some
    /// were dropped; none once closed and drained.
    fn take(&self) -> Option<String> {
        let mut queue = self.lock();
        let mut text = std::mem::take(&mut queue.text);
        queue.count = 0;
        if std::mem::take(&mut queue.lost) {
            text.push_str(LOST_LINE);
        }
        if text.is_empty() && queue.closed {
            return None;
        }
        Some(text)
    }
}

impl Feed {
    #[cfg(test)]
    pub fn new(hub: Arc<Hub>, lines: usize) -> Arc<Feed> {
        Feed::publishing(hub, lines, None)
    }

    /// A feed whose announces also go to `publisher`, when given.
    pub fn publishing(hub: Arc<Hub>, lines: usize, publisher: Option<Arc<Publisher>>) -> Arc<Feed> {
        Arc::new(Feed {
            publisher,
            hub,
            outlets: Mutex::new(Vec::new()),
            streaming: AtomicUsize::new(0),
            lines: lines.max(1),
            closed: AtomicBool::new(false),
        })
    }

    /// Streams open now.
    #[cfg(test)]
    pub fn followers(&self) -> usize {
        self.streaming.load(Ordering::Relaxed)
    }

    /// Whether anything listens (two atomic loads). With a publisher, the
    /// other hosts always may: whether they hold subscriptions is not
    /// known here.
    pub fn listening(&self) -> bool {
        self.publisher.is_some()
            || self.hub.listening()
            || self.streaming.load(Ordering::Relaxed) > 0
    }

    /// Hands durable advances to the hub and to every stream. Never waits
    /// on a reader.
    pub fn announce(&self, advances: &[Advance]) {
        self.hub.announce(advances);
        if let Some(publisher) = &self.publisher {
            publisher.publish(advances);
        }
        if self.streaming.load(Ordering::Relaxed) == 0 {
            return;
        }
        let lines: Vec<String> = advances.iter().map(line).collect();
        for outlet in self
            .outlets
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .iter()
        {
            outlet.push(&lines);
        }
    }

    /// A new follower: its stream carries every advance announced from now
    /// on (it is registered before its response starts).
    pub fn follow(self: &Arc<Self>) -> Streamed {
        let outlet = Arc::new(Outlet::new(self.lines));
        if self.closed.load(Ordering::Relaxed) {
            outlet.close();
        }
        self.outlets
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(Arc::clone(&outlet));
        self.streaming.fetch_add(1, Ordering::Relaxed);
        let (tx, body) = parts::channel(1);
        tokio::spawn(Arc::clone(self).pump(outlet, tx));
        body
    }

    /// Moves an outlet's lines into its response until the follower goes
    /// away or the feed closes.
    async fn pump(self: Arc<Self>, outlet: Arc<Outlet>, tx: parts::Sender) {
        loop {
            let notified = outlet.notify.notified();
            let Some(text) = outlet.take() else { break };
            if !text.is_empty() && tx.send(Ok(Bytes::from(text))).await.is_err() {
                break;
            }
            tokio::select! {
                _ = notified => {}
                _ = tx.closed() => break,
            }
        }
        self.outlets
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .retain(|o| !Arc::ptr_eq(o, &outlet));
        self.streaming.fetch_sub(1, Ordering::Relaxed);
    }

    /// Shutdown: every stream ends once it has sent what it holds.
    pub fn close(&self) {
        self.closed.store(true, Ordering::Relaxed);
        for outlet in self
            .outlets
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .iter()
        {
            outlet.close();
        }
    }
}

/// One advance as a line of the stream.
pub fn line(advance: &Advance) -> String {
    let mut line = json!({
        "root_id": advance.journal.root_id,
        "space_id": advance.journal.space_id,
        "path": advance.journal.path,
        "cutoff": advance.cutoff,
    })
    .to_string();
    line.push('\n');
    line
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_full_outlet_keeps_what_fits_then_says_the_rest_was_lost() {
        let outlet = Outlet::new(2);
        outlet.push(&["a\n".into(), "b\n".into(), "c\n".into()]);
        assert_eq!(
            outlet.take().as_deref(),
            Some(format!("a\nb\n{LOST_LINE}").as_str())
        );
        // Drained: room again, and no loss pending.
        outlet.push(&["d\n".into()]);
        assert_eq!(outlet.take().as_deref(), Some("d\n"));
        outlet.close();
        assert_eq!(outlet.take(), None);
    }
}
