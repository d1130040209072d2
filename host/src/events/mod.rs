//! The subscription hub: which socket connections exist, and the
//! subscription frames each has waiting.
//!
//! Placeholder of the hub's API: connections are registered and named, and
//! no subscription is ever open, so no frame is ever waiting.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// Every socket connection of the process.
#[derive(Default)]
pub struct Hub {
    next: AtomicU64,
}

/// One socket connection as the hub sees it. Created by the socket module
/// when a connection is accepted; dropped when it ends.
pub struct Connection {
    id: u64,
}

impl Hub {
    /// Registers a connection; its `id()` is passed to the component's `call`.
    pub fn connect(self: &Arc<Self>) -> Arc<Connection> {
        let id = self.next.fetch_add(1, Ordering::Relaxed) + 1;
        Arc::new(Connection { id })
    }
}

impl Connection {
    /// Unique for the life of the process.
    pub fn id(&self) -> u64 {
        self.id
    }

    /// Resolves when subscription frames are waiting (cancel-safe): never,
    /// with no subscription.
    pub async fn frames_waiting(&self) {
        std::future::pending::<()>().await
    }

    /// The subscription frames to write now.
    pub fn take_frames(&self) -> Vec<String> {
        Vec::new()
    }

    /// Shutdown: the `closed` frames of the open subscriptions.
    pub fn shut(&self) -> Vec<String> {
        Vec::new()
    }
}
