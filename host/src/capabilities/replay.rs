//! `lab:platform/replay`: the service's replay table, kept by the host so
//! that it outlives every instance and every reload of the component.

use super::RequestState;
use crate::bindings::replay::{self, InsertOutcome};
use crate::clock::unix_now as now;
use crate::replay::Insert;
use wasmtime::Result;

impl replay::Host for RequestState {
    async fn check_and_insert(
        &mut self,
        pair: Vec<u8>,
        expires_at: u64,
    ) -> Result<Result<InsertOutcome, String>> {
        let outcome = self
            .env
            .replay
            .check_and_insert(&pair, expires_at, now())
            .await;
        Ok(outcome.map(|insert| match insert {
            Insert::Inserted => InsertOutcome::Inserted,
            Insert::Present => InsertOutcome::Present,
            Insert::Full => InsertOutcome::Full,
        }))
    }

    async fn contains(&mut self, pair: Vec<u8>) -> Result<Result<bool, String>> {
        Ok(self.env.replay.contains(&pair, now()).await)
    }
}
