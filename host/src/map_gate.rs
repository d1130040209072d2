//! The gate that lets the key-value store's writer remap LMDB's map.
//!
//! LMDB may change an open environment's map size only while no
//! transaction is open in the process: the remap moves the memory every
//! read transaction reads through. Every read transaction holds a
//! [`ReadPass`] for as long as it lives; the writer, which holds no write
//! transaction between groups, [`closes`](MapGate::close) the gate, waits
//! for the passes out to return, and remaps while it holds the gate closed.
//!
//! Invariants:
//! 1. While a [`Closed`] exists, no [`ReadPass`] does.
//! 2. A reader waits at the gate at most as long as the writer waits for
//!    the passes out: a writer that cannot drain them in time reopens the
//!    gate and gives up this remap.

use std::sync::{Arc, Condvar, Mutex};
use std::time::Duration;
use tokio::sync::Notify;

#[derive(Default)]
struct State {
    /// Passes out.
    readers: usize,
    /// Whether the writer holds the gate closed, or waits to.
    closed: bool,
}

/// See the module documentation.
#[derive(Default)]
pub struct MapGate {
    state: Mutex<State>,
    /// Signalled when the last pass returns.
    drained: Condvar,
    /// Signalled when the gate reopens.
    reopened: Notify,
}

/// A read transaction's leave to use the map; returned on drop.
pub struct ReadPass(Arc<MapGate>);

/// The gate held closed, with no pass out; reopens on drop.
pub struct Closed<'g>(&'g MapGate);

impl MapGate {
    /// A pass, once the gate is open.
    pub async fn enter(self: &Arc<Self>) -> ReadPass {
        loop {
            let reopened = {
                let mut state = self.state.lock().unwrap();
                if !state.closed {
                    state.readers += 1;
                    return ReadPass(Arc::clone(self));
                }
                // Made while the gate is seen closed, under the lock the
                // reopening takes before it notifies: that notification
                // reaches this waiter.
                self.reopened.notified()
            };
            reopened.await;
        }
    }

    /// Closes the gate to new readers and waits at most `wait` for the
    /// passes out to return; none (the gate open again) when they did not.
    pub fn close(&self, wait: Duration) -> Option<Closed<'_>> {
        let mut state = self.state.lock().unwrap();
        state.closed = true;
        let (mut state, _) = self
            .drained
            .wait_timeout_while(state, wait, |s| s.readers > 0)
            .unwrap();
        if state.readers > 0 {
            state.closed = false;
            drop(state);
            self.reopened.notify_waiters();
            return None;
        }
        Some(Closed(self))
    }
}

impl Drop for ReadPass {
    fn drop(&mut self) {
        let mut state = self.0.state.lock().unwrap();
        state.readers -= 1;
        // Only a writer that closed the gate waits for the passes out; an
        // open gate's last pass wakes no one (a notification is a syscall).
        if state.readers == 0 && state.closed {
            self.0.drained.notify_all();
        }
    }
}

impl Drop for Closed<'_> {
    fn drop(&mut self) {
        self.0.state.lock().unwrap().closed = false;
        self.0.reopened.notify_waiters();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn closing_waits_for_passes_and_holds_readers_back() {
        let gate = Arc::new(MapGate::default());
        let pass = gate.enter().await;
        // A pass out: the writer gives up in time and reopens.
        assert!(gate.close(Duration::from_millis(20)).is_none());
        let second = gate.enter().await;
        drop((pass, second));

        let closed = gate
            .close(Duration::from_millis(20))
            .expect("no pass is out");
        let held_back = tokio::time::timeout(Duration::from_millis(50), gate.enter()).await;
        assert!(held_back.is_err(), "a reader entered a closed gate");
        let waiting = tokio::spawn({
            let gate = Arc::clone(&gate);
            async move { gate.enter().await }
        });
        drop(closed);
        let pass = waiting.await.unwrap();
        // The reader that entered after the reopening holds a pass again.
        assert!(gate.close(Duration::from_millis(20)).is_none());
        drop(pass);
    }
}
