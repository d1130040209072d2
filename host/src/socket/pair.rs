//! Two futures polled as one task, each with a waker of its own, so that
//! one waking the other while the task runs costs no trip through the
//! scheduler.
//!
//! A waker fired during the task's own poll makes tokio queue the task
//! again and wake an idle worker thread to take it: a futex call and a
//! thread woken for nothing each time. A connection's reader hands each
//! reply to its writer that way, once per call. Here a wake that arrives
//! while the pair is being polled only marks its future, and the same
//! poll polls it again.
//!
//! Invariants:
//! - a future is polled only when its waker fired since it was last
//!   polled (both are, first);
//! - a wake is never lost: a wake that finds the pair not being polled
//!   wakes the task, and one that finds it being polled is seen before
//!   the poll returns `Pending` (the flags are sequentially consistent);
//! - one poll of the pair polls each future at most [`PASSES`] times, so
//!   a future that wakes itself to yield (tokio's cooperative budget)
//!   makes the task yield, not spin.

use futures_util::task::AtomicWaker;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering::SeqCst};
use std::sync::Arc;
use std::task::{Context, Poll, Wake, Waker};

/// Times one poll of the pair polls either future at most.
const PASSES: usize = 8;

/// Runs `a` and `b` to completion as one task; their outputs.
pub async fn join<A: Future, B: Future>(a: A, b: B) -> (A::Output, B::Output) {
    let shared = Arc::new(Shared {
        polling: AtomicBool::new(false),
        task: AtomicWaker::new(),
    });
    let branch = || {
        let branch = Arc::new(Branch {
            woken: AtomicBool::new(true),
            shared: Arc::clone(&shared),
        });
        (Waker::from(Arc::clone(&branch)), branch)
    };
    let mut a = Side::new(Box::pin(a), branch());
    let mut b = Side::new(Box::pin(b), branch());
    std::future::poll_fn(move |cx| {
        shared.task.register(cx.waker());
        shared.polling.store(true, SeqCst);
        for _ in 0..PASSES {
            let polled = a.poll() | b.poll();
            if let (Some(_), Some(_)) = (&a.output, &b.output) {
                shared.polling.store(false, SeqCst);
                return Poll::Ready((a.output.take().unwrap(), b.output.take().unwrap()));
            }
            if !polled {
                // A wake after this store wakes the task; one before it
                // is in a flag read below.
                shared.polling.store(false, SeqCst);
                if !a.woken() && !b.woken() {
                    return Poll::Pending;
                }
                shared.polling.store(true, SeqCst);
            }
        }
        shared.polling.store(false, SeqCst);
        cx.waker().wake_by_ref();
        Poll::Pending
    })
    .await
}

/// What the two wakers share.
struct Shared {
    /// True while the pair is being polled: a wake then only marks its
    /// future.
    polling: AtomicBool,
    /// The task's waker, as of its latest poll.
    task: AtomicWaker,
}

/// One future's waker.
struct Branch {
    /// Its future is to be polled.
    woken: AtomicBool,
    shared: Arc<Shared>,
}

impl Wake for Branch {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        self.woken.store(true, SeqCst);
        if !self.shared.polling.load(SeqCst) {
            self.shared.task.wake();
        }
    }
}

/// One of the two futures, its waker and, once it is done, its output.
struct Side<F: Future> {
    future: Pin<Box<F>>,
    waker: Waker,
    branch: Arc<Branch>,
    /// Set once the future is done.
    output: Option<F::Output>,
}

impl<F: Future> Side<F> {
    fn new(future: Pin<Box<F>>, (waker, branch): (Waker, Arc<Branch>)) -> Self {
        Side {
            future,
            waker,
            branch,
            output: None,
        }
    }

    fn woken(&self) -> bool {
        self.output.is_none() && self.branch.woken.load(SeqCst)
    }

    /// Polls the future if it was woken; whether it was.
    fn poll(&mut self) -> bool {
        if self.output.is_some() || !self.branch.woken.swap(false, SeqCst) {
            return false;
        }
        if let Poll::Ready(output) = self
            .future
            .as_mut()
            .poll(&mut Context::from_waker(&self.waker))
        {
            self.output = Some(output);
        }
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicUsize;
    use tokio::sync::mpsc;

    /// Counts the wakes of the task that polls the pair.
    struct Counted(AtomicUsize);

    impl Wake for Counted {
        fn wake(self: Arc<Self>) {
            self.0.fetch_add(1, SeqCst);
        }
    }

    fn poll_once<F: Future>(future: Pin<&mut F>, task: &Arc<Counted>) -> Poll<F::Output> {
        let waker = Waker::from(Arc::clone(task));
        future.poll(&mut Context::from_waker(&waker))
    }

    #[test]
    fn a_hand_over_within_the_poll_does_not_wake_the_task() {
        let (tx, mut rx) = mpsc::channel::<u32>(4);
        let (go_tx, mut go_rx) = mpsc::channel::<()>(1);
        let sender = async move {
            go_rx.recv().await;
            tx.send(7).await.unwrap();
        };
        let receiver = async move { rx.recv().await };
        let task = Arc::new(Counted(AtomicUsize::new(0)));
        let mut pair = Box::pin(join(sender, receiver));
        assert!(poll_once(pair.as_mut(), &task).is_pending());
        // The go signal comes from outside: the task is woken once.
        go_tx.try_send(()).unwrap();
        assert_eq!(task.0.load(SeqCst), 1);
        // The send wakes the receiver inside this poll, which finishes it.
        let Poll::Ready(((), got)) = poll_once(pair.as_mut(), &task) else {
            panic!("the receiver was not polled again within the poll");
        };
        assert_eq!(got, Some(7));
        assert_eq!(task.0.load(SeqCst), 1);
    }

    #[test]
    fn a_future_that_keeps_waking_itself_makes_the_task_yield() {
        let spins = Arc::new(AtomicUsize::new(0));
        let counted = Arc::clone(&spins);
        let yielding = std::future::poll_fn(move |cx| {
            counted.fetch_add(1, SeqCst);
            cx.waker().wake_by_ref();
            Poll::<()>::Pending
        });
        let task = Arc::new(Counted(AtomicUsize::new(0)));
        let mut pair = Box::pin(join(yielding, std::future::pending::<()>()));
        assert!(poll_once(pair.as_mut(), &task).is_pending());
        assert_eq!(spins.load(SeqCst), PASSES);
        assert_eq!(task.0.load(SeqCst), 1, "the task is woken to run again");
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn wakes_from_other_threads_are_not_lost() {
        let (tx, mut rx) = mpsc::channel::<u32>(1);
        let (back_tx, mut back_rx) = mpsc::channel::<u32>(1);
        let peer = tokio::spawn(async move {
            while let Some(n) = rx.recv().await {
                if back_tx.send(n).await.is_err() {
                    break;
                }
            }
        });
        let (sent, received) = join(
            async move {
                for n in 0..10_000 {
                    tx.send(n).await.unwrap();
                }
                10_000
            },
            async move {
                let mut got = 0;
                while got < 10_000 {
                    assert_eq!(back_rx.recv().await, Some(got));
                    got += 1;
                }
                got
            },
        )
        .await;
        assert_eq!((sent, received), (10_000, 10_000));
        peer.await.unwrap();
    }
}
