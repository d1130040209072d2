//! labd's memory allocator: small blocks from mimalloc, large ones from the
//! system's allocator (`docs/performance.md`, "The allocator split by
//! size").
//!
//! A request allocates and frees many small blocks on the threads that
//! serve it and on the store's writer; mimalloc serves those from
//! per-thread pages, without the locks and the consolidation of glibc's
//! arenas. Large blocks (bodies, blob parts, buffers that grow with what
//! they hold) are few, and mimalloc would keep their pages for a while
//! after a free; the system's allocator gives them back to the kernel
//! soon, so a large transient buffer costs its memory about as long as it
//! lives.
//!
//! Invariants:
//! 1. A block's allocator follows from its size alone: [`LARGE`] octets and
//!    more, the system's; fewer, mimalloc's. Rust gives `dealloc` and
//!    `realloc` the layout the block was allocated with, so a block is
//!    always freed by the allocator that made it.
//! 2. A `realloc` across [`LARGE`] allocates in the other allocator, copies
//!    the block's octets (the smaller of its old and new sizes) and frees
//!    the old block; within one side it is that allocator's own.

use mimalloc::MiMalloc;
use std::alloc::{GlobalAlloc, Layout, System};

/// The size from which a block is the system allocator's.
const LARGE: usize = 64 << 10;

/// The allocator by size (invariant 1).
struct BySize;

#[global_allocator]
static ALLOCATOR: BySize = BySize;

fn is_large(size: usize) -> bool {
    size >= LARGE
}

// SAFETY: each method forwards to an allocator that upholds `GlobalAlloc`'s
// contract, chosen by the block's size in the same way on allocation and on
// free (invariant 1); a `realloc` across the boundary is an allocation, a
// copy within both blocks' bounds, and a free (invariant 2).
unsafe impl GlobalAlloc for BySize {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        if is_large(layout.size()) {
            unsafe { System.alloc(layout) }
        } else {
            unsafe { MiMalloc.alloc(layout) }
        }
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        if is_large(layout.size()) {
            unsafe { System.alloc_zeroed(layout) }
        } else {
            unsafe { MiMalloc.alloc_zeroed(layout) }
        }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        if is_large(layout.size()) {
            unsafe { System.dealloc(ptr, layout) }
        } else {
            unsafe { MiMalloc.dealloc(ptr, layout) }
        }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        match (is_large(layout.size()), is_large(new_size)) {
            (false, false) => unsafe { MiMalloc.realloc(ptr, layout, new_size) },
            (true, true) => unsafe { System.realloc(ptr, layout, new_size) },
            _ => {
                // The caller guarantees `new_size`, rounded up to the
                // alignment, does not overflow `isize`.
                let new_layout =
                    unsafe { Layout::from_size_align_unchecked(new_size, layout.align()) };
                let new = unsafe { self.alloc(new_layout) };
                if !new.is_null() {
                    unsafe {
                        std::ptr::copy_nonoverlapping(ptr, new, layout.size().min(new_size));
                        self.dealloc(ptr, layout);
                    }
                }
                new
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Octets that differ from one position to the next.
    fn pattern(len: usize) -> Vec<u8> {
        (0..len).map(|i| (i * 7 + i / 251) as u8).collect()
    }

    #[test]
    fn a_buffer_keeps_its_octets_as_it_grows_and_shrinks_across_the_boundary() {
        for (from, to) in [
            (LARGE - 1, LARGE),
            (100, 3 * LARGE),
            (LARGE, LARGE - 1),
            (5 * LARGE, 10),
            (LARGE + 1, 4 * LARGE),
            (10, LARGE - 8),
        ] {
            let mut grown = pattern(from);
            grown.shrink_to_fit();
            if to > from {
                grown.reserve_exact(to - from);
                assert!(grown.capacity() >= to);
                assert_eq!(grown, pattern(from), "{from} -> {to}");
            } else {
                grown.truncate(to);
                grown.shrink_to_fit();
                assert_eq!(grown, pattern(to), "{from} -> {to}");
            }
        }
    }

    #[test]
    fn blocks_on_both_sides_honour_their_alignment_and_zeroing() {
        for size in [1, 64, LARGE - 1, LARGE, 2 * LARGE + 3] {
            for align in [1, 16, 4096] {
                let layout = Layout::from_size_align(size, align).unwrap();
                // SAFETY: a non-zero size; each block is freed with the
                // layout it was allocated with.
                unsafe {
                    let block = ALLOCATOR.alloc_zeroed(layout);
                    assert!(!block.is_null());
                    assert_eq!(block as usize % align, 0, "{size} aligned to {align}");
                    let octets = std::slice::from_raw_parts(block, size);
                    assert!(octets.iter().all(|&b| b == 0), "{size} zeroed");
                    let moved = ALLOCATOR.realloc(block, layout, size * 3);
                    assert!(!moved.is_null());
                    assert_eq!(
                        moved as usize % align,
                        0,
                        "{size} realloc aligned to {align}"
                    );
                    let kept = std::slice::from_raw_parts(moved, size);
                    assert!(kept.iter().all(|&b| b == 0), "{size} kept");
                    let grown = Layout::from_size_align(size * 3, align).unwrap();
                    ALLOCATOR.dealloc(moved, grown);
                }
            }
        }
    }
}
