//! The host-wide budget of instance memory (design.md, "Limits" 5).
//!
//! Every instance may use its base of linear memory without charge; growth
//! beyond it is charged, in 64 KiB pages, against one budget shared by every
//! service, and stays charged until the instance's store drops. A growth that
//! cannot be charged within the wait is denied (the instance's `memory.grow`
//! fails), and the store remembers it so its request is refused as
//! unavailable rather than failed.

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use wasmtime::ResourceLimiterAsync;

/// A WebAssembly page: the unit memory grows and is charged in.
const PAGE: usize = 64 << 10;

/// Core instances one component instance may create.
const INSTANCES_PER_STORE: usize = 64;

/// Memory beyond each instance's base, shared by every instance of the host.
pub struct MemoryBudget {
    pages: Arc<Semaphore>,
    total_pages: usize,
    base: usize,
    wait: Duration,
    /// Growths of a memory after its creation, each an `mprotect` of the
    /// new pages and its reversal when the pool resets the slot: a
    /// component whose requests grow their memory starts too small.
    growths: AtomicU64,
}

impl MemoryBudget {
    /// `budget` bytes beyond a free `base` per instance; a growth waits at
    /// most `wait` for budget to be released.
    pub fn new(budget: u64, base: u64, wait: Duration) -> Arc<MemoryBudget> {
        let total_pages = usize::try_from(budget / PAGE as u64).unwrap_or(usize::MAX >> 4);
        let total_pages = total_pages.min(Semaphore::MAX_PERMITS);
        Arc::new(MemoryBudget {
            pages: Arc::new(Semaphore::new(total_pages)),
            total_pages,
            base: usize::try_from(base).unwrap_or(usize::MAX),
            wait,
            growths: AtomicU64::new(0),
        })
    }

    /// Bytes the budget holds in all.
    pub fn budget_bytes(&self) -> u64 {
        (self.total_pages * PAGE) as u64
    }

    /// Bytes charged to instances now.
    pub fn charged_bytes(&self) -> u64 {
        ((self.total_pages - self.pages.available_permits()) * PAGE) as u64
    }

    /// Growths of instance memories after their creation, so far.
    pub fn growths(&self) -> u64 {
        self.growths.load(Relaxed)
    }

    /// Bytes an instance uses without charge.
    pub fn base(&self) -> usize {
        self.base
    }

    /// Pages beyond the base that `bytes` of memory occupy.
    fn charged_pages(&self, bytes: usize) -> usize {
        bytes.saturating_sub(self.base).div_ceil(PAGE)
    }
}

/// The limiter of one store: its memories together may grow to `max`, and
/// what they hold beyond the base is charged to the budget.
pub struct MemoryLimiter {
    budget: Arc<MemoryBudget>,
    max: usize,
    /// Bytes of linear memory the store's memories hold together.
    total: usize,
    /// What the store holds of the budget; released when it drops.
    charged: Option<OwnedSemaphorePermit>,
    denied: bool,
}

impl MemoryLimiter {
    pub fn new(budget: Arc<MemoryBudget>, max: usize) -> MemoryLimiter {
        MemoryLimiter {
            budget,
            max,
            total: 0,
            charged: None,
            denied: false,
        }
    }

    /// Whether a growth was denied for want of budget.
    pub fn denied(&self) -> bool {
        self.denied
    }

    /// A memory of the store grows from `current` to `desired` bytes (from
    /// 0 to its initial size when it is created).
    async fn grow(&mut self, current: usize, desired: usize) -> bool {
        if current > 0 {
            self.budget.growths.fetch_add(1, Relaxed);
        }
        let total = self.total + desired.saturating_sub(current);
        if total > self.max {
            return false;
        }
        let extra = self.budget.charged_pages(total) - self.budget.charged_pages(self.total);
        if extra > 0 {
            let Some(permit) = self.charge(extra).await else {
                self.denied = true;
                return false;
            };
            match &mut self.charged {
                Some(charged) => charged.merge(permit),
                None => self.charged = Some(permit),
            }
        }
        self.total = total;
        true
    }

    async fn charge(&self, pages: usize) -> Option<OwnedSemaphorePermit> {
        if pages > self.budget.total_pages {
            return None;
        }
        let pages = u32::try_from(pages).ok()?;
        let acquire = Arc::clone(&self.budget.pages).acquire_many_owned(pages);
        match tokio::time::timeout(self.budget.wait, acquire).await {
            Ok(Ok(permit)) => Some(permit),
            _ => None,
        }
    }
}

type Growing<'a> = Pin<Box<dyn Future<Output = wasmtime::Result<bool>> + Send + 'a>>;

impl ResourceLimiterAsync for MemoryLimiter {
    fn memory_growing<'life, 'grow>(
        &'life mut self,
        current: usize,
        desired: usize,
        _maximum: Option<usize>,
    ) -> Growing<'grow>
    where
        'life: 'grow,
        Self: 'grow,
    {
        Box::pin(async move { Ok(self.grow(current, desired).await) })
    }

    fn table_growing<'life, 'grow>(
        &'life mut self,
        _current: usize,
        _desired: usize,
        _maximum: Option<usize>,
    ) -> Growing<'grow>
    where
        'life: 'grow,
        Self: 'grow,
    {
        // Tables are bounded by the pool's slots.
        Box::pin(async { Ok(true) })
    }

    fn instances(&self) -> usize {
        INSTANCES_PER_STORE
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MIB: usize = 1 << 20;

    #[tokio::test]
    async fn growth_beyond_the_base_is_charged_until_the_store_drops() {
        let budget = MemoryBudget::new(8 << 20, 4 << 20, Duration::from_millis(10));
        let mut first = MemoryLimiter::new(Arc::clone(&budget), 64 * MIB);
        assert!(first.grow(0, 4 * MIB).await, "the base is free");
        assert_eq!(budget.pages.available_permits(), 128);
        assert!(first.grow(4 * MIB, 10 * MIB).await);
        assert_eq!(budget.pages.available_permits(), 32);

        let mut second = MemoryLimiter::new(Arc::clone(&budget), 64 * MIB);
        assert!(second.grow(0, 6 * MIB).await);
        assert!(!second.grow(6 * MIB, 7 * MIB).await, "the budget is spent");
        assert!(second.denied());

        drop(first);
        assert_eq!(budget.pages.available_permits(), 128 - 32);
        let mut third = MemoryLimiter::new(Arc::clone(&budget), 64 * MIB);
        assert!(third.grow(0, 10 * MIB).await);
        assert!(!third.denied());
        assert_eq!(budget.growths(), 2, "creations are not growths");
    }

    #[tokio::test]
    async fn growth_past_the_instance_maximum_is_refused_without_charge() {
        let budget = MemoryBudget::new(64 << 20, 0, Duration::from_millis(10));
        let mut limiter = MemoryLimiter::new(Arc::clone(&budget), 16 * MIB);
        assert!(!limiter.grow(0, 17 * MIB).await);
        assert!(!limiter.denied(), "a maximum is not a budget refusal");
        assert_eq!(budget.pages.available_permits(), 1024);
    }
}
