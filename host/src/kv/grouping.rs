//! When the writer waits for more members before it commits a group
//! ("Key-value store" 2 in `docs/design.md`).
//!
//! A group costs one log flush and one LMDB commit however many members it
//! holds, so under concurrent writers a larger group costs each member
//! less CPU and fewer device writes. That saving is throughput only while
//! the CPU is the bound: then requests wait for a core anyway, and waiting
//! at the writer instead costs nothing. With a core to spare, a wait only
//! adds to every member's latency.
//!
//! Invariants:
//! 1. `serving` counts the requests being served now (top-level, of every
//!    service): each [`Serving`] adds one for as long as it lives.
//! 2. The writer pauses, a [`SLICE`] at a time, only while its group holds
//!    two members or more and more than [`BUSY_PER_CORE`] requests a core
//!    are being served outside it: enough to keep every core busy through
//!    the pause. A group's first pause also needs the writer to have found
//!    the cores busy: its mean wait for one ([`Cores`]) at or past
//!    [`SATURATED`]. A lone writer (one client) never pauses.
//! 3. Its pauses for one group, timed as they are slept, stop once they
//!    add up to the configured wait, so no member waits longer than that
//!    (and one sleep's lateness) beyond its group's own work.

use std::fs::File;
use std::os::unix::fs::FileExt;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::Duration;

/// The writer's mean wait for a core, per time it was put on one, at and
/// past which the cores count as saturated. Measured on 2 virtual cores:
/// about 10 µs with a core idle, 33 to 50 µs with 8 to 64 appenders.
pub const SATURATED: Duration = Duration::from_micros(20);
/// One pause of the writer: short, so that the group's commit follows
/// soon after the requests outside it have thinned.
pub const SLICE: Duration = Duration::from_micros(100);
/// Requests served outside the group, per core, past which a pause leaves
/// the cores work to do.
pub const BUSY_PER_CORE: usize = 4;

/// The requests being served and the writer's longest wait for late
/// members; shared by a store, its namespaces and its writer.
pub struct Grouping {
    serving: AtomicUsize,
    cores: usize,
    wait_us: AtomicU64,
    /// Requests served outside a group past which it may pause.
    busy: usize,
    /// [`SATURATED`], but for tests; zero asks nothing of the cores.
    saturated_ns: AtomicU64,
}

impl Default for Grouping {
    fn default() -> Grouping {
        Grouping::with_cores(std::thread::available_parallelism().map_or(1, |n| n.get()))
    }
}

/// One request being served (invariant 1).
pub struct Serving<'a>(&'a AtomicUsize);

impl Drop for Serving<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::Relaxed);
    }
}

impl Grouping {
    fn with_cores(cores: usize) -> Grouping {
        Grouping {
            serving: AtomicUsize::new(0),
            cores,
            wait_us: AtomicU64::new(0),
            busy: cores.saturating_mul(BUSY_PER_CORE),
            saturated_ns: AtomicU64::new(SATURATED.as_nanos() as u64),
        }
    }

    /// Counts a request as served until the answer drops.
    pub fn serve(&self) -> Serving<'_> {
        self.serving.fetch_add(1, Ordering::Relaxed);
        Serving(&self.serving)
    }

    /// Whether fewer requests are being served than there are cores, so
    /// that one request thread held by a commit leaves the others a core
    /// each.
    pub fn cores_to_spare(&self) -> bool {
        self.serving.load(Ordering::Relaxed) < self.cores
    }

    /// Sets the longest a group's pauses for late members may add up to;
    /// zero for none.
    pub fn set_wait(&self, wait: Duration) {
        let micros = u64::try_from(wait.as_micros()).unwrap_or(u64::MAX);
        self.wait_us.store(micros, Ordering::Relaxed);
    }

    /// How long a group of `members`, `waiting` of them for its commit,
    /// pauses next for late members, having paused `paused` already;
    /// `None` when it commits now (invariants 2 and 3). `core_wait`, the
    /// writer's recent wait for a core, is asked last, and only before the
    /// group's first pause.
    pub fn pause(
        &self,
        members: usize,
        waiting: usize,
        paused: Duration,
        core_wait: impl FnOnce() -> Option<Duration>,
    ) -> Option<Duration> {
        let left =
            Duration::from_micros(self.wait_us.load(Ordering::Relaxed)).saturating_sub(paused);
        let outside = self.serving.load(Ordering::Relaxed).saturating_sub(waiting);
        let saturated = || match self.saturated_ns.load(Ordering::Relaxed) {
            0 => true,
            at => !paused.is_zero() || core_wait().is_some_and(|w| w >= Duration::from_nanos(at)),
        };
        (!left.is_zero() && members >= 2 && outside > self.busy && saturated())
            .then(|| left.min(SLICE))
    }

    /// Takes the cores as saturated whatever the writer waited for one.
    #[cfg(test)]
    pub fn assume_saturated(&self) {
        self.saturated_ns.store(0, Ordering::Relaxed);
    }
}

/// The calling thread's wait for a core, from the kernel's scheduler
/// statistics (`/proc/thread-self/schedstat`: time on a core, time
/// runnable but waiting for one, and times put on one).
pub struct Cores {
    file: Option<File>,
    last: (u64, u64),
    /// Mean wait per time put on a core, in nanoseconds, over the recent
    /// samples (each weighs an eighth).
    mean: Option<u64>,
}

impl Cores {
    /// Reads the statistics of the thread that calls this, and of no other
    /// (the file is opened now); [`Cores::sample`] answers `None` where the
    /// kernel keeps none.
    pub fn of_this_thread() -> Cores {
        let mut cores = Cores {
            file: File::open("/proc/thread-self/schedstat").ok(),
            last: (0, 0),
            mean: None,
        };
        if let Some(now) = cores.read() {
            cores.last = now;
        }
        cores
    }

    /// The thread's recent mean wait for a core, per time put on one.
    pub fn sample(&mut self) -> Option<Duration> {
        let (waited, put_on) = self.read()?;
        let (last_waited, last_put_on) = std::mem::replace(&mut self.last, (waited, put_on));
        if let Some(times) = put_on.checked_sub(last_put_on).filter(|n| *n > 0) {
            let wait = waited.saturating_sub(last_waited) / times;
            self.mean = Some(self.mean.map_or(wait, |mean| mean - mean / 8 + wait / 8));
        }
        self.mean.map(Duration::from_nanos)
    }

    /// Nanoseconds waited for a core and times put on one, so far.
    fn read(&self) -> Option<(u64, u64)> {
        let mut text = [0u8; 96];
        let read = self.file.as_ref()?.read_at(&mut text, 0).ok()?;
        parse_schedstat(&text[..read])
    }
}

/// `<ns on a core> <ns waiting for one> <times put on one>`.
fn parse_schedstat(text: &[u8]) -> Option<(u64, u64)> {
    let text = std::str::from_utf8(text).ok()?;
    let mut fields = text.split_ascii_whitespace().skip(1);
    let waited = fields.next()?.parse().ok()?;
    let slices = fields.next()?.parse().ok()?;
    Some((waited, slices))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn busy() -> Option<Duration> {
        Some(SATURATED)
    }

    fn spare() -> Option<Duration> {
        Some(Duration::from_micros(10))
    }

    #[test]
    fn cores_are_to_spare_while_fewer_requests_are_served_than_there_are_cores() {
        let grouping = Grouping::with_cores(2);
        assert!(grouping.cores_to_spare());
        let first = grouping.serve();
        assert!(grouping.cores_to_spare());
        let second = grouping.serve();
        assert!(!grouping.cores_to_spare());
        drop(second);
        assert!(grouping.cores_to_spare());
        drop(first);
    }

    #[test]
    fn pauses_only_for_a_shared_group_with_enough_outside_and_busy_cores() {
        let grouping = Grouping::with_cores(1);
        let outside = |n: usize| (0..n).map(|_| grouping.serve()).collect::<Vec<_>>();
        let none = Duration::ZERO;
        let mut served = outside(2 + BUSY_PER_CORE + 1);
        assert_eq!(grouping.pause(2, 2, none, busy), None, "no wait set");
        grouping.set_wait(Duration::from_micros(250));
        assert_eq!(
            grouping.pause(2, 2, none, busy),
            Some(SLICE),
            "enough outside"
        );
        assert_eq!(
            grouping.pause(2, 2, SLICE * 2, spare),
            Some(Duration::from_micros(50))
        );
        assert_eq!(
            grouping.pause(2, 2, Duration::from_micros(250), busy),
            None,
            "waited"
        );
        assert_eq!(grouping.pause(2, 2, none, spare), None, "a core to spare");
        assert_eq!(grouping.pause(2, 2, none, || None), None, "cores unknown");
        assert_eq!(grouping.pause(1, 1, none, busy), None, "a lone member");
        assert_eq!(grouping.pause(3, 3, none, busy), None, "too few outside");
        served.pop();
        assert_eq!(grouping.pause(2, 2, none, busy), None, "too few outside");
        drop(served);
        assert_eq!(grouping.pause(2, 0, none, busy), None, "none served");
    }

    #[test]
    fn the_wait_for_a_core_is_read_from_the_scheduler() {
        assert_eq!(parse_schedstat(b"737887 52000 4\n"), Some((52000, 4)));
        assert_eq!(parse_schedstat(b"737887\n"), None);
        let mut cores = Cores::of_this_thread();
        if cores.file.is_none() {
            return; // a kernel without scheduler statistics: never saturated
        }
        // A sleep puts the thread back on a core.
        std::thread::sleep(Duration::from_millis(1));
        assert!(cores.sample().is_some());
    }
}
