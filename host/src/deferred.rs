//! Answers a component left to its sequenced batch's outcome
//! (`kv.submit-sequenced`; "Request lifecycle" 8 in `docs/design.md`).
//!
//! Invariants:
//! 1. The batch is applied only once the handler has returned: the
//!    request's instance never sees it, and a handler that fails applies
//!    nothing (its [`Deferred`] is dropped unpolled).
//! 2. The answer is given once the outcome is durable (the store answers
//!    a batch no sooner, "Key-value store" 7 and 10): its status and body
//!    are the ones the component gave for that outcome, its numbers filled
//!    in from the outcome alone.
//! 3. An applied batch's advance (a journal's) is announced once durable
//!    and before the answer, as the journal announces its own commits.
//! 4. Answers are checked when submitted: numbers in order and within
//!    their body, a guard's value read only for a guarded batch, no
//!    counter's value where there is none. Filling one in can then fail
//!    only on a guard's value too short for it or a number past
//!    `u64::MAX`: a 500 `internal`.

use crate::events::{Advance, Feed, Journal};
use crate::kv::{BatchOutcome, KvError};
use std::future::Future;
use std::io::Write;
use std::pin::Pin;
use std::sync::Arc;

/// Where an answer holds a number: the decimal digits of `base + addend`
/// inserted at `at` of its body, `base` the outcome's number or, with
/// `read_at`, the 8 octets big-endian at `read_at` of the guard's value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Number {
    pub at: usize,
    pub read_at: Option<usize>,
    pub addend: u64,
}

/// A status and a body with numbers to insert.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OutcomeAnswer {
    pub status: u16,
    pub body: Vec<u8>,
    pub numbers: Vec<Number>,
}

/// The answer to each outcome; for a guarded batch, the first whose prefix
/// the guard's value starts with.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BatchAnswers {
    pub applied: OutcomeAnswer,
    pub guarded: Vec<(Vec<u8>, OutcomeAnswer)>,
    pub mismatch: OutcomeAnswer,
    pub past_ceiling: OutcomeAnswer,
    pub no_counter: OutcomeAnswer,
}

/// What a number of an answer may be drawn from.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Source {
    /// The counter's value.
    Counter,
    /// The guard's value.
    Guard,
    /// Nothing: the outcome carries no number.
    Nothing,
}

impl OutcomeAnswer {
    /// Invariant 3, for an outcome whose numbers come from `source`.
    fn check(&self, source: Source) -> Result<(), String> {
        let mut last = 0;
        for number in &self.numbers {
            if number.at < last || number.at > self.body.len() {
                return Err(format!(
                    "a number at {} is out of order or past its body",
                    number.at
                ));
            }
            last = number.at;
            let drawn = match number.read_at {
                Some(_) => Source::Guard,
                None => Source::Counter,
            };
            if drawn != source {
                return Err("a number drawn from what its outcome does not carry".into());
            }
        }
        Ok(())
    }

    /// The status and the body with its numbers in, `base` the counter's
    /// value and `guard` the guard's.
    fn fill(&self, base: Option<u64>, guard: Option<&[u8]>) -> Result<(u16, Vec<u8>), String> {
        let mut body = Vec::with_capacity(self.body.len() + 20 * self.numbers.len());
        let mut from = 0;
        for number in &self.numbers {
            body.extend_from_slice(&self.body[from..number.at]);
            from = number.at;
            let base = match number.read_at {
                None => base,
                Some(at) => guard
                    .and_then(|value| value.get(at..at.checked_add(8)?))
                    .map(|octets| u64::from_be_bytes(octets.try_into().expect("8 octets"))),
            }
            .ok_or("the guard's value is too short for its answer")?;
            let value = base
                .checked_add(number.addend)
                .ok_or("a number of the answer passes the largest integer")?;
            write!(body, "{value}").expect("a Vec takes every write");
        }
        body.extend_from_slice(&self.body[from..]);
        Ok((self.status, body))
    }
}

impl BatchAnswers {
    /// Checks every answer (invariant 4).
    pub fn check(&self) -> Result<(), String> {
        self.applied.check(Source::Counter)?;
        self.mismatch.check(Source::Counter)?;
        self.past_ceiling.check(Source::Counter)?;
        self.no_counter.check(Source::Nothing)?;
        self.guarded
            .iter()
            .try_for_each(|(_, answer)| answer.check(Source::Guard))
    }

    /// The answer for `outcome`.
    fn answer(&self, outcome: &BatchOutcome) -> Result<(u16, Vec<u8>), String> {
        match outcome {
            BatchOutcome::Applied(base) => self.applied.fill(Some(*base), None),
            BatchOutcome::Mismatch(base) => self.mismatch.fill(Some(*base), None),
            BatchOutcome::PastCeiling(base) => self.past_ceiling.fill(Some(*base), None),
            BatchOutcome::NoCounter => self.no_counter.fill(None, None),
            BatchOutcome::Guarded(value) => self
                .guarded
                .iter()
                .find(|(prefix, _)| value.starts_with(prefix))
                .ok_or_else(|| "no answer for the guard's value".to_string())?
                .1
                .fill(None, Some(value)),
        }
    }
}

/// The batch's outcome, once durable.
pub type PendingOutcome = Pin<Box<dyn Future<Output = Result<BatchOutcome, KvError>> + Send>>;

/// A journal's advance to announce once an applied batch is durable.
pub struct Announce {
    pub feed: Arc<Feed>,
    pub journal: Journal,
    /// The batch's count: the cutoff is the counter's value before the
    /// batch plus this.
    pub count: u64,
}

/// A submitted batch, not yet applied, the answers its outcome picks from
/// and the advance it announces.
pub struct Deferred {
    pub outcome: PendingOutcome,
    pub answers: BatchAnswers,
    pub announce: Option<Announce>,
}

/// The request's answer: a status, a JSON body, and whether it asks the
/// client to retry later.
pub struct Answer {
    pub status: u16,
    pub body: Vec<u8>,
    pub retry_later: bool,
}

impl Deferred {
    /// Applies the batch and answers once its outcome is durable
    /// (invariants 1 and 2).
    pub async fn answer(self) -> Answer {
        let failed = |status, code, message: String| Answer {
            status,
            body: serde_json::json!({ "error": code, "message": message })
                .to_string()
                .into_bytes(),
            retry_later: status == 503,
        };
        let outcome = self.outcome.await;
        if let (Ok(BatchOutcome::Applied(base)), Some(announce)) = (&outcome, self.announce) {
            // As the journal announces its own commits: only while
            // something listens, checked once the commit is durable.
            if announce.feed.listening() {
                announce.feed.announce(&[Advance {
                    journal: announce.journal,
                    cutoff: base.saturating_add(announce.count),
                }]);
            }
        }
        match outcome {
            Ok(outcome) => match self.answers.answer(&outcome) {
                Ok((status, body)) => Answer {
                    status,
                    body,
                    retry_later: false,
                },
                Err(why) => {
                    tracing::error!(why, "an answer left to the store could not be filled in");
                    failed(500, "internal", format!("the answer failed: {why}"))
                }
            },
            Err(KvError::Unavailable(why)) => failed(503, "unavailable", why),
            Err(e) => failed(
                500,
                "internal",
                format!("the batch failed; its outcome is uncertain: {e}"),
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn counted(body: &str, numbers: &[(usize, u64)]) -> OutcomeAnswer {
        OutcomeAnswer {
            status: 201,
            body: body.as_bytes().to_vec(),
            numbers: numbers
                .iter()
                .map(|&(at, addend)| Number {
                    at,
                    read_at: None,
                    addend,
                })
                .collect(),
        }
    }

    fn fixed(status: u16, body: &str) -> OutcomeAnswer {
        OutcomeAnswer {
            status,
            body: body.as_bytes().to_vec(),
            numbers: Vec::new(),
        }
    }

    fn answers() -> BatchAnswers {
        let read = |at, read_at| Number {
            at,
            read_at: Some(read_at),
            addend: 0,
        };
        BatchAnswers {
            applied: counted("{\"first\":,\"last\":}", &[(9, 1), (17, 3)]),
            guarded: vec![
                (
                    b"ab".to_vec(),
                    OutcomeAnswer {
                        status: 200,
                        body: b"[,]".to_vec(),
                        numbers: vec![read(1, 2), read(2, 10)],
                    },
                ),
                (Vec::new(), fixed(409, "other")),
            ],
            mismatch: counted("actual ", &[(7, 0)]),
            past_ceiling: fixed(413, "full"),
            no_counter: fixed(500, "none"),
        }
    }

    fn answer(answers: &BatchAnswers, outcome: BatchOutcome) -> (u16, String) {
        let (status, body) = answers.answer(&outcome).unwrap();
        (status, String::from_utf8(body).unwrap())
    }

    #[test]
    fn each_outcome_picks_its_answer_with_its_numbers_filled_in() {
        let answers = answers();
        answers.check().unwrap();
        assert_eq!(
            answer(&answers, BatchOutcome::Applied(99)),
            (201, "{\"first\":100,\"last\":102}".into())
        );
        assert_eq!(
            answer(&answers, BatchOutcome::Mismatch(7)),
            (201, "actual 7".into())
        );
        assert_eq!(
            answer(&answers, BatchOutcome::PastCeiling(7)),
            (413, "full".into())
        );
        assert_eq!(
            answer(&answers, BatchOutcome::NoCounter),
            (500, "none".into())
        );
        let mut receipt = b"ab".to_vec();
        receipt.extend_from_slice(&5u64.to_be_bytes());
        receipt.extend_from_slice(&9u64.to_be_bytes());
        assert_eq!(
            answer(&answers, BatchOutcome::Guarded(receipt)),
            (200, "[5,9]".into())
        );
        assert_eq!(
            answer(&answers, BatchOutcome::Guarded(b"zz".to_vec())),
            (409, "other".into())
        );
    }

    #[test]
    fn a_guard_value_too_short_or_a_number_too_large_fails_to_fill() {
        let answers = answers();
        assert!(answers
            .answer(&BatchOutcome::Guarded(b"ab123".to_vec()))
            .is_err());
        assert!(answers
            .answer(&BatchOutcome::Applied(u64::MAX - 1))
            .is_err());
        let mut unmatched = answers.clone();
        unmatched.guarded.pop();
        assert!(unmatched
            .answer(&BatchOutcome::Guarded(b"zz".to_vec()))
            .is_err());
    }

    #[test]
    fn malformed_answers_are_refused_when_submitted() {
        let mut past = answers();
        past.applied.numbers[1].at = 99;
        assert!(past.check().is_err(), "past its body");
        let mut unordered = answers();
        unordered.applied.numbers.swap(0, 1);
        assert!(unordered.check().is_err(), "out of order");
        let mut guard_read = answers();
        guard_read.mismatch.numbers[0].read_at = Some(0);
        assert!(guard_read.check().is_err(), "no guard to read");
        let mut counter_read = answers();
        counter_read.guarded[0].1.numbers[0].read_at = None;
        assert!(counter_read.check().is_err(), "no counter for a guard");
        let mut nothing = answers();
        nothing.no_counter = counted("x", &[(0, 0)]);
        assert!(nothing.check().is_err(), "no number without a counter");
    }
}
