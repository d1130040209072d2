//! Sequenced batches: a write set prepared outside the store, applied by
//! the writer in one step against the live state of its group ("Key-value
//! store" 10 in `docs/design.md`).
//!
//! The batch carries the keys that decide it (a guard that settles it when
//! present, a counter it advances) and writes whose keys and values hold
//! numbers drawn from the counter. The writer reads the two keys, checks
//! them and applies the writes in the same step, so no request's computing
//! happens while the writer waits, and concurrent batches on one counter
//! never conflict: each draws the numbers after the one before it.

use super::{table_key, Entries, KvError};
use heed::types::Bytes;
use heed::{Database, RwTxn};

/// Where a write holds a number drawn from the counter: the 8 octets at
/// `offset` of its key (or value) become `base + addend`, big-endian.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CounterSlot {
    pub in_key: bool,
    pub offset: u32,
    pub addend: u64,
}

/// One write, as the request names it.
#[derive(Debug, Clone)]
pub struct SequencedWrite {
    pub table: String,
    pub key: Vec<u8>,
    pub value: Vec<u8>,
    pub slots: Vec<CounterSlot>,
}

/// A batch as the request names it.
#[derive(Debug, Clone)]
pub struct SequencedBatch {
    pub guard: (String, Vec<u8>),
    pub counter: (String, Vec<u8>),
    pub expected: Option<u64>,
    pub count: u64,
    pub ceiling: u64,
    pub writes: Vec<SequencedWrite>,
}

/// What a batch met. Only [`BatchOutcome::Applied`] wrote anything.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BatchOutcome {
    /// Written; the counter's value before the batch.
    Applied(u64),
    /// The guard's value.
    Guarded(Vec<u8>),
    /// The counter's value, other than the expected one.
    Mismatch(u64),
    /// The counter's value, past which `count` would cross the ceiling.
    PastCeiling(u64),
    /// No counter under its key.
    NoCounter,
}

/// A write with its full key, slots checked to lie inside it.
struct Prepared {
    key: Vec<u8>,
    value: Vec<u8>,
    slots: Vec<CounterSlot>,
}

/// A batch checked and with its keys prefixed by their tables, ready for
/// the writer; everything that can be refused without the store's state
/// was refused here, on the request's side.
pub struct ReadyBatch {
    guard: Vec<u8>,
    counter: Vec<u8>,
    expected: Option<u64>,
    count: u64,
    ceiling: u64,
    writes: Vec<Prepared>,
    /// The counter's value after the batch, once decided to apply.
    advanced: Option<[u8; 8]>,
}

impl SequencedBatch {
    /// Prefixes the keys and checks every slot lies inside its write (a
    /// filled key must stay within the key bound, which prefixing checks).
    pub fn ready(self) -> Result<ReadyBatch, KvError> {
        let writes = self
            .writes
            .into_iter()
            .map(|w| {
                for slot in &w.slots {
                    let within = if slot.in_key { &w.key } else { &w.value };
                    let end = slot.offset as usize + 8;
                    if end > within.len() {
                        return Err(KvError::BadBatch(format!(
                            "a counter slot at {} passes the end of its {}",
                            slot.offset,
                            if slot.in_key { "key" } else { "value" }
                        )));
                    }
                }
                let key = table_key(&w.table, &w.key)?;
                // Key slots count from the key as named, before its prefix.
                let prefix = (key.len() - w.key.len()) as u32;
                let slots = w
                    .slots
                    .into_iter()
                    .map(|s| CounterSlot {
                        offset: if s.in_key {
                            s.offset + prefix
                        } else {
                            s.offset
                        },
                        ..s
                    })
                    .collect();
                Ok(Prepared {
                    key,
                    value: w.value,
                    slots,
                })
            })
            .collect::<Result<Vec<_>, KvError>>()?;
        Ok(ReadyBatch {
            guard: table_key(&self.guard.0, &self.guard.1)?,
            counter: table_key(&self.counter.0, &self.counter.1)?,
            expected: self.expected,
            count: self.count,
            ceiling: self.ceiling,
            writes,
            advanced: None,
        })
    }
}

impl ReadyBatch {
    /// The keys the batch is decided on: its guard and its counter.
    pub fn decided_on(&self) -> [&[u8]; 2] {
        [&self.guard, &self.counter]
    }

    /// Decides the batch on the values its guard and counter hold now and,
    /// when it applies, fills every slot of its writes in place; deciding
    /// again overwrites them. [`ReadyBatch::written`] answers the writes
    /// this decision made.
    pub fn settle(&mut self, guard: Option<&[u8]>, counter: Option<&[u8]>) -> BatchOutcome {
        self.advanced = None;
        if let Some(value) = guard {
            return BatchOutcome::Guarded(value.to_vec());
        }
        let Some(base) = counter
            .and_then(|v| v.get(..8))
            .map(|v| u64::from_be_bytes(v.try_into().expect("8 octets")))
        else {
            return BatchOutcome::NoCounter;
        };
        if self.expected.is_some_and(|e| e != base) {
            return BatchOutcome::Mismatch(base);
        }
        let Some(advanced) = base.checked_add(self.count).filter(|a| *a <= self.ceiling) else {
            return BatchOutcome::PastCeiling(base);
        };
        for write in &mut self.writes {
            for slot in &write.slots {
                let number = base.wrapping_add(slot.addend).to_be_bytes();
                let within = if slot.in_key {
                    &mut write.key
                } else {
                    &mut write.value
                };
                let at = slot.offset as usize;
                within[at..at + 8].copy_from_slice(&number);
            }
        }
        self.advanced = Some(advanced.to_be_bytes());
        BatchOutcome::Applied(base)
    }

    /// The writes of the last decision: none unless the batch applied,
    /// else every write with its slots filled and the counter's advance
    /// last.
    pub fn written(&self) -> impl Iterator<Item = (&[u8], &[u8])> {
        let writes = match self.advanced {
            Some(_) => &self.writes[..],
            None => &[],
        };
        writes
            .iter()
            .map(|w| (&w.key[..], &w.value[..]))
            .chain(self.advanced.as_ref().map(|a| (&self.counter[..], &a[..])))
    }

    /// [`ReadyBatch::settle`], answering the writes it made as owned
    /// entries.
    pub fn decide(
        mut self,
        guard: Option<&[u8]>,
        counter: Option<&[u8]>,
    ) -> (BatchOutcome, Entries) {
        let outcome = self.settle(guard, counter);
        let Some(advanced) = self.advanced else {
            return (outcome, Vec::new());
        };
        let mut writes: Entries = self.writes.into_iter().map(|w| (w.key, w.value)).collect();
        writes.push((self.counter, advanced.to_vec()));
        (outcome, writes)
    }

    /// Decides the batch on the live state of `txn` and, when it applies,
    /// writes it there. On an error some writes may be in `txn`: the
    /// caller aborts it.
    pub fn apply(
        &mut self,
        txn: &mut RwTxn<'_>,
        db: Database<Bytes, Bytes>,
    ) -> heed::Result<BatchOutcome> {
        let outcome = {
            let guard = db.get(txn, &self.guard)?;
            let counter = db.get(txn, &self.counter)?;
            self.settle(guard, counter)
        };
        for (key, value) in self.written() {
            db.put(txn, key, value)?;
        }
        Ok(outcome)
    }
}
