//! `lab:platform/kv`: the service's namespace of the transactional store.

use super::{AnswerSlot, RequestState};
use crate::bindings::kv;
use crate::deferred::{self, Announce, BatchAnswers, Deferred, OutcomeAnswer};
use crate::events::Journal;
use crate::kv::{
    full_keys, BatchOutcome, CounterSlot, Durability, KvError, Range, ReadTxn, SequencedBatch,
    SequencedWrite, WriteTxn,
};
use std::sync::Arc;
use wasmtime::component::Resource;
use wasmtime::Result;

fn wit_error(error: KvError) -> kv::KvError {
    match error {
        KvError::BadTable(table) => kv::KvError::NoSuchTable(table),
        KvError::TooLarge => kv::KvError::TooLarge,
        KvError::Finished => kv::KvError::Finished,
        KvError::Storage(e) => kv::KvError::Storage(e),
        KvError::Unavailable(e) => kv::KvError::Unavailable(e),
        e @ KvError::BadBatch(_) => kv::KvError::Storage(e.to_string()),
    }
}

fn sequenced_batch(batch: kv::SequencedBatch) -> SequencedBatch {
    SequencedBatch {
        guard: (batch.guard.table, batch.guard.key),
        counter: (batch.counter.table, batch.counter.key),
        expected: batch.expected,
        count: batch.count,
        ceiling: batch.ceiling,
        writes: batch
            .writes
            .into_iter()
            .map(|w| SequencedWrite {
                table: w.table,
                key: w.key,
                value: w.value,
                slots: w
                    .slots
                    .into_iter()
                    .map(|s| CounterSlot {
                        in_key: s.in_key,
                        offset: s.offset,
                        addend: s.addend,
                    })
                    .collect(),
            })
            .collect(),
    }
}

fn batch_outcome(outcome: BatchOutcome) -> kv::BatchOutcome {
    match outcome {
        BatchOutcome::Applied(base) => kv::BatchOutcome::Applied(base),
        BatchOutcome::Guarded(value) => kv::BatchOutcome::Guarded(value),
        BatchOutcome::Mismatch(base) => kv::BatchOutcome::Mismatch(base),
        BatchOutcome::PastCeiling(base) => kv::BatchOutcome::PastCeiling(base),
        BatchOutcome::NoCounter => kv::BatchOutcome::NoCounter,
    }
}

fn outcome_answer(answer: kv::OutcomeAnswer) -> OutcomeAnswer {
    OutcomeAnswer {
        status: answer.status,
        body: answer.body,
        numbers: answer
            .numbers
            .into_iter()
            .map(|n| deferred::Number {
                at: n.at as usize,
                read_at: n.read_at.map(|at| at as usize),
                addend: n.addend,
            })
            .collect(),
    }
}

fn batch_answers(answers: kv::BatchAnswers) -> BatchAnswers {
    BatchAnswers {
        applied: outcome_answer(answers.applied),
        guarded: answers
            .guarded
            .into_iter()
            .map(|g| (g.prefix, outcome_answer(g.answer)))
            .collect(),
        mismatch: outcome_answer(answers.mismatch),
        past_ceiling: outcome_answer(answers.past_ceiling),
        no_counter: outcome_answer(answers.no_counter),
    }
}

fn entries(found: Vec<(Vec<u8>, Vec<u8>)>) -> Vec<kv::Entry> {
    found
        .into_iter()
        .map(|(key, value)| kv::Entry { key, value })
        .collect()
}

/// Most entries one scan answers, whatever limit it asks for, and most keys
/// one batch read (`read-all`, a read transaction's `get-all`) reads: the
/// answer is held whole in the host, then copied into the instance's memory.
pub const MAX_SCAN_ENTRIES: u32 = 1024;

/// The values of `keys` in `txn`, in order; more keys than a scan's bound
/// are refused whole, nothing read.
fn batch_keys(keys: Vec<kv::TableKey>) -> Result<Vec<Vec<u8>>, kv::KvError> {
    if keys.len() > MAX_SCAN_ENTRIES as usize {
        return Err(kv::KvError::TooLarge);
    }
    full_keys(keys.into_iter().map(|k| (k.table, k.key)).collect()).map_err(wit_error)
}

fn range(range: kv::Range) -> Range {
    Range {
        start: range.start,
        end: range.end,
        reverse: range.reverse,
        limit: range.limit.min(MAX_SCAN_ENTRIES),
    }
}

impl kv::Host for RequestState {
    async fn begin_read(&mut self) -> Result<Result<Resource<ReadTxn>, kv::KvError>> {
        Ok(match self.env.kv.read().await {
            Ok(txn) => Ok(self.table.push(txn)?),
            Err(e) => Err(wit_error(e)),
        })
    }

    async fn read_all(
        &mut self,
        keys: Vec<kv::TableKey>,
    ) -> Result<Result<Vec<Option<Vec<u8>>>, kv::KvError>> {
        let keys = match batch_keys(keys) {
            Ok(keys) => keys,
            Err(e) => return Ok(Err(e)),
        };
        Ok(self.env.kv.read_all(&keys).await.map_err(wit_error))
    }

    async fn begin_write(&mut self) -> Result<Result<Resource<WriteTxn>, kv::KvError>> {
        if self.open_writes > 0 {
            return Ok(Err(kv::KvError::Storage(
                "a request holds at most one write transaction at a time".into(),
            )));
        }
        Ok(match self.env.kv.write().await {
            Ok(txn) => {
                self.open_writes += 1;
                Ok(self.table.push(txn)?)
            }
            Err(e) => Err(wit_error(e)),
        })
    }

    async fn apply_sequenced(
        &mut self,
        batch: kv::SequencedBatch,
    ) -> Result<Result<kv::BatchOutcome, kv::KvError>> {
        // The writer would serve the open transaction first, which waits
        // on this request: invariant 4 of the store.
        if self.open_writes > 0 {
            return Ok(Err(kv::KvError::Storage(
                "a sequenced batch cannot be applied while the request holds a write transaction"
                    .into(),
            )));
        }
        Ok(self
            .env
            .kv
            .apply_sequenced(sequenced_batch(batch))
            .await
            .map(batch_outcome)
            .map_err(wit_error))
    }

    async fn submit_sequenced(
        &mut self,
        batch: kv::SequencedBatch,
        answers: kv::BatchAnswers,
        advance: Option<kv::Advance>,
    ) -> Result<Result<(), kv::KvError>> {
        let refused = |why: &str| Ok(Err(kv::KvError::Storage(why.into())));
        match self.answer {
            AnswerSlot::Open => {}
            AnswerSlot::Immediate => {
                return refused("this call's answer cannot be left to a batch")
            }
            AnswerSlot::Deferred(_) => return refused("a request submits one batch at most"),
        }
        // As for `apply-sequenced`: invariant 4 of the store.
        if self.open_writes > 0 {
            return refused(
                "a sequenced batch cannot be submitted while the request holds a write transaction",
            );
        }
        let answers = batch_answers(answers);
        if let Err(why) = answers.check() {
            return refused(&format!("malformed answers: {why}"));
        }
        let count = batch.count;
        let batch = match sequenced_batch(batch).ready() {
            Ok(batch) => batch,
            Err(e) => return Ok(Err(wit_error(e))),
        };
        let announce = self
            .env
            .feed
            .as_ref()
            .zip(advance)
            .map(|(feed, a)| Announce {
                feed: Arc::clone(feed),
                journal: Journal {
                    root_id: a.root_id,
                    space_id: a.space_id,
                    path: a.path,
                },
                count,
            });
        let kv = self.env.kv.clone();
        self.answer = AnswerSlot::Deferred(Box::new(Deferred {
            outcome: Box::pin(async move { kv.apply_ready(batch).await }),
            answers,
            announce,
        }));
        Ok(Ok(()))
    }
}

impl kv::HostReadTxn for RequestState {
    async fn get(
        &mut self,
        this: Resource<ReadTxn>,
        table: String,
        key: Vec<u8>,
    ) -> Result<Result<Option<Vec<u8>>, kv::KvError>> {
        let txn = self.table.get_mut(&this)?;
        Ok(txn.get(&table, &key).await.map_err(wit_error))
    }

    async fn get_all(
        &mut self,
        this: Resource<ReadTxn>,
        keys: Vec<kv::TableKey>,
    ) -> Result<Result<Vec<Option<Vec<u8>>>, kv::KvError>> {
        let keys = match batch_keys(keys) {
            Ok(keys) => keys,
            Err(e) => return Ok(Err(e)),
        };
        let txn = self.table.get_mut(&this)?;
        Ok(txn.get_all(&keys).await.map_err(wit_error))
    }

    async fn scan(
        &mut self,
        this: Resource<ReadTxn>,
        table: String,
        bounds: kv::Range,
    ) -> Result<Result<Vec<kv::Entry>, kv::KvError>> {
        let txn = self.table.get_mut(&this)?;
        Ok(txn
            .scan(&table, &range(bounds))
            .await
            .map(entries)
            .map_err(wit_error))
    }

    async fn drop(&mut self, this: Resource<ReadTxn>) -> Result<()> {
        self.table.delete(this)?;
        Ok(())
    }
}

impl RequestState {
    /// Marks the request's write transaction finished (committed, aborted or
    /// dropped), once.
    fn close_write(&mut self, this: &Resource<WriteTxn>) -> Result<bool> {
        let txn = self.table.get(this)?;
        let open = txn.is_open();
        if open {
            self.open_writes -= 1;
        }
        Ok(open)
    }

    /// `writes`, then the commit, of a transaction still open.
    async fn finish_write(
        &mut self,
        this: Resource<WriteTxn>,
        writes: Vec<kv::TableWrite>,
        durability: Durability,
    ) -> Result<Result<(), kv::KvError>> {
        if !self.close_write(&this)? {
            return Ok(Err(kv::KvError::Finished));
        }
        let txn = self.table.get_mut(&this)?;
        let writes = writes
            .into_iter()
            .map(|w| (w.table, w.key, w.value))
            .collect();
        Ok(txn.finish(writes, durability).await.map_err(wit_error))
    }
}

impl kv::HostWriteTxn for RequestState {
    async fn get(
        &mut self,
        this: Resource<WriteTxn>,
        table: String,
        key: Vec<u8>,
    ) -> Result<Result<Option<Vec<u8>>, kv::KvError>> {
        let txn = self.table.get(&this)?;
        Ok(txn.get(&table, &key).await.map_err(wit_error))
    }

    async fn scan(
        &mut self,
        this: Resource<WriteTxn>,
        table: String,
        bounds: kv::Range,
    ) -> Result<Result<Vec<kv::Entry>, kv::KvError>> {
        let txn = self.table.get(&this)?;
        Ok(txn
            .scan(&table, range(bounds))
            .await
            .map(entries)
            .map_err(wit_error))
    }

    async fn put(
        &mut self,
        this: Resource<WriteTxn>,
        table: String,
        key: Vec<u8>,
        value: Vec<u8>,
    ) -> Result<Result<(), kv::KvError>> {
        let txn = self.table.get(&this)?;
        Ok(txn.put(&table, &key, value).await.map_err(wit_error))
    }

    async fn get_all(
        &mut self,
        this: Resource<WriteTxn>,
        keys: Vec<kv::TableKey>,
    ) -> Result<Result<Vec<Option<Vec<u8>>>, kv::KvError>> {
        let txn = self.table.get(&this)?;
        let keys = keys.into_iter().map(|k| (k.table, k.key)).collect();
        Ok(txn.get_all(keys).await.map_err(wit_error))
    }

    async fn put_all(
        &mut self,
        this: Resource<WriteTxn>,
        writes: Vec<kv::TableWrite>,
    ) -> Result<Result<(), kv::KvError>> {
        let txn = self.table.get(&this)?;
        let writes = writes
            .into_iter()
            .map(|w| (w.table, w.key, w.value))
            .collect();
        Ok(txn.put_all(writes).await.map_err(wit_error))
    }

    async fn delete(
        &mut self,
        this: Resource<WriteTxn>,
        table: String,
        key: Vec<u8>,
    ) -> Result<Result<bool, kv::KvError>> {
        let txn = self.table.get(&this)?;
        Ok(txn.delete(&table, &key).await.map_err(wit_error))
    }

    async fn commit(&mut self, this: Resource<WriteTxn>) -> Result<Result<(), kv::KvError>> {
        if !self.close_write(&this)? {
            return Ok(Err(kv::KvError::Finished));
        }
        let txn = self.table.get_mut(&this)?;
        Ok(txn.commit().await.map_err(wit_error))
    }

    async fn commit_with(
        &mut self,
        this: Resource<WriteTxn>,
        writes: Vec<kv::TableWrite>,
    ) -> Result<Result<(), kv::KvError>> {
        self.finish_write(this, writes, Durability::Wait).await
    }

    async fn commit_detached(
        &mut self,
        this: Resource<WriteTxn>,
        writes: Vec<kv::TableWrite>,
    ) -> Result<Result<(), kv::KvError>> {
        self.finish_write(this, writes, Durability::Detached).await
    }

    async fn abort(&mut self, this: Resource<WriteTxn>) -> Result<()> {
        if self.close_write(&this)? {
            self.table.get_mut(&this)?.abort();
        }
        Ok(())
    }

    async fn drop(&mut self, this: Resource<WriteTxn>) -> Result<()> {
        self.close_write(&this)?;
        self.table.delete(this)?;
        Ok(())
    }
}
