//! `lab:platform/replay`: the service's replay table, kept by the host so
//! that it outlives every instance and every reload of the component.

use super::RequestState;
use crate::bindings::replay::{self, InsertOutcome};
use crate::replay::Insert;
use wasmtime::Result;

/// The host's clock in Unix seconds: the clock the service's proofs are
/// judged by (`clock.now`).
fn now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default()
        .as_secs()
}

impl replay::Host for RequestState {
    async fn check_and_insert(
        &mut self,
        pair: Vec<u8>,
        expires_at: u64,
    ) -> Result<Result<InsertOutcome, String>> {
        Ok(Ok(
            match self.env.replay.check_and_insert(&pair, expires_at, now()) {
                Insert::Inserted => InsertOutcome::Inserted,
                Insert::Present => InsertOutcome::Present,
                Insert::Full => InsertOutcome::Full,
            },
        ))
    }

    async fn contains(&mut self, pair: Vec<u8>) -> Result<Result<bool, String>> {
        Ok(Ok(self.env.replay.contains(&pair, now())))
    }
}
