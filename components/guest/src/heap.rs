//! The service components' global allocator: small blocks from per-size
//! free lists, everything else from the C library's allocator beneath.
//!
//! A service instance lives for one request and is then discarded whole,
//! so its heap never needs to give memory back or to merge neighbours: a
//! freed small block only waits for the next block of its size. That makes
//! the common allocation (strings, JSON nodes, small vectors) a pop or a
//! pointer bump instead of the C allocator's search, split and coalesce.
//!
//! Invariants:
//! - a small block is one of [`CLASSES`] sizes, multiples of [`GRANULE`]
//!   bytes up to [`SMALL_MAX`], aligned to [`GRANULE`]; its size is
//!   derived from the `Layout` the caller passes back, never stored;
//! - small blocks are carved from chunks of the allocator beneath (the
//!   first [`CHUNK`] bytes, each next one twice the last up to
//!   [`CHUNK_MAX`], at most [`MAX_CHUNKS`]), which are never returned;
//!   a block is this heap's exactly when its address is inside one of
//!   them; when no chunk can be had, the block itself comes from beneath;
//! - a free small block holds the address of the next free block of its
//!   class in its first word, and is on exactly one list;
//! - every other block is the allocator beneath's, and is freed and
//!   resized there. That includes blocks of any size the canonical ABI
//!   lowered into the instance: on `wasm32-wasip2` its `cabi_realloc` is
//!   the C library's, which the C library's own bindings free with
//!   `free`, so it must stay the C library's.
//!
//! The heap is not synchronized: it is the global allocator only on
//! WebAssembly without threads, where nothing runs concurrently.

use core::alloc::{GlobalAlloc, Layout};
use core::cell::UnsafeCell;
use core::ptr;

/// Size step and alignment of small blocks.
pub const GRANULE: usize = 16;
/// Number of small sizes.
pub const CLASSES: usize = 64;
/// The largest small block.
pub const SMALL_MAX: usize = GRANULE * CLASSES;
/// The first chunk's size.
pub const CHUNK: usize = 64 << 10;
/// The largest chunk: a request near its memory limit is refused one
/// chunk of at most this, not half its heap at once.
pub const CHUNK_MAX: usize = 4 << 20;
/// Chunks a heap carves from (about 236 MiB in all); past them, small
/// blocks come from beneath.
pub const MAX_CHUNKS: usize = 64;

/// Doublings from the first chunk to the largest.
const DOUBLINGS: usize = CHUNK_MAX.ilog2() as usize - CHUNK.ilog2() as usize;

/// The size of the chunk after `chunks` chunks. Halving the largest, it
/// cannot overflow a 32-bit `usize` however many chunks there are.
const fn chunk_size(chunks: usize) -> usize {
    if chunks < DOUBLINGS {
        CHUNK_MAX >> (DOUBLINGS - chunks)
    } else {
        CHUNK_MAX
    }
}

struct Lists {
    /// Head of each class's free list, null when empty.
    free: [*mut u8; CLASSES],
    /// The current chunk's part not yet carved: `[next, end)`.
    next: usize,
    end: usize,
    /// The chunks' address ranges, `[start, end)`, the first `chunks` used.
    ranges: [(usize, usize); MAX_CHUNKS],
    chunks: usize,
    /// Whether beneath refused a chunk: then no more are asked for, so a
    /// request at its memory limit waits for the limit once, not once a
    /// block.
    refused: bool,
}

/// Small blocks by size class over the allocator `A`.
pub struct SizeClassHeap<A> {
    beneath: A,
    lists: UnsafeCell<Lists>,
}

// SAFETY: only ever installed as the global allocator where there are no
// threads (see the module's documentation); tests use it from one thread.
unsafe impl<A: Sync> Sync for SizeClassHeap<A> {}

/// The small class of `layout`, if it has one.
fn class_of(layout: Layout) -> Option<usize> {
    if layout.size() > SMALL_MAX || layout.align() > GRANULE {
        return None;
    }
    Some(layout.size().max(1).div_ceil(GRANULE) - 1)
}

impl<A> SizeClassHeap<A> {
    pub const fn new(beneath: A) -> SizeClassHeap<A> {
        SizeClassHeap {
            beneath,
            lists: UnsafeCell::new(Lists {
                free: [ptr::null_mut(); CLASSES],
                next: 0,
                end: 0,
                ranges: [(0, 0); MAX_CHUNKS],
                chunks: 0,
                refused: false,
            }),
        }
    }

    /// The lists. SAFETY: no other reference to them lives (no threads,
    /// and no allocation happens while one is held).
    #[allow(clippy::mut_from_ref)]
    unsafe fn lists(&self) -> &mut Lists {
        unsafe { &mut *self.lists.get() }
    }

    /// Whether `block` is one of this heap's small blocks.
    fn owns(&self, block: *mut u8) -> bool {
        let at = block as usize;
        // SAFETY: see `lists`.
        let lists = unsafe { self.lists() };
        // The newest chunk first: most blocks freed are recent.
        lists.ranges[..lists.chunks]
            .iter()
            .rev()
            .any(|&(start, end)| start <= at && at < end)
    }
}

impl<A: GlobalAlloc> SizeClassHeap<A> {
    /// A block of `class`, from its list or carved from the chunk; from
    /// beneath once every chunk is used.
    unsafe fn take(&self, class: usize, layout: Layout) -> *mut u8 {
        // SAFETY: see `lists`.
        let lists = unsafe { self.lists() };
        let head = lists.free[class];
        if !head.is_null() {
            // SAFETY: a free block's first word is the next free block.
            lists.free[class] = unsafe { head.cast::<*mut u8>().read() };
            return head;
        }
        let bytes = (class + 1) * GRANULE;
        if lists.end - lists.next < bytes {
            if lists.chunks == MAX_CHUNKS || lists.refused {
                // SAFETY: the caller's layout, passed on.
                return unsafe { self.beneath.alloc(layout) };
            }
            let size = chunk_size(lists.chunks);
            // SAFETY: a non-zero size and a power-of-two alignment.
            let chunk = unsafe {
                self.beneath
                    .alloc(Layout::from_size_align_unchecked(size, GRANULE))
            };
            if chunk.is_null() {
                lists.refused = true;
                // A smaller block may still fit where the chunk did not.
                // SAFETY: the caller's layout, passed on.
                return unsafe { self.beneath.alloc(layout) };
            }
            let start = chunk as usize;
            lists.ranges[lists.chunks] = (start, start + size);
            lists.chunks += 1;
            lists.next = start;
            lists.end = start + size;
        }
        let block = lists.next;
        lists.next += bytes;
        block as *mut u8
    }

    /// Returns this heap's `block` to the list of `class`.
    unsafe fn give(&self, block: *mut u8, class: usize) {
        // SAFETY: see `lists`.
        let lists = unsafe { self.lists() };
        // SAFETY: every small block is at least a word long and aligned.
        unsafe { block.cast::<*mut u8>().write(lists.free[class]) };
        lists.free[class] = block;
    }
}

unsafe impl<A: GlobalAlloc> GlobalAlloc for SizeClassHeap<A> {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        match class_of(layout) {
            // SAFETY: the class is in range.
            Some(class) => unsafe { self.take(class, layout) },
            // SAFETY: the caller's layout, passed on.
            None => unsafe { self.beneath.alloc(layout) },
        }
    }

    unsafe fn dealloc(&self, block: *mut u8, layout: Layout) {
        match class_of(layout) {
            // SAFETY: this heap's block of this layout, so of this class.
            Some(class) if self.owns(block) => unsafe { self.give(block, class) },
            // SAFETY: allocated beneath with this layout.
            _ => unsafe { self.beneath.dealloc(block, layout) },
        }
    }

    unsafe fn realloc(&self, block: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        if !self.owns(block) {
            // SAFETY: allocated beneath with `layout`.
            return unsafe { self.beneath.realloc(block, layout, new_size) };
        }
        // SAFETY: the caller guarantees `new_size` is valid for the alignment.
        let grown = unsafe { Layout::from_size_align_unchecked(new_size, layout.align()) };
        // An owned block's layout has a class, so equal classes are small.
        if class_of(grown) == class_of(layout) {
            return block;
        }
        // SAFETY: `grown` has a non-zero size (a realloc's contract).
        let moved = unsafe { self.alloc(grown) };
        if !moved.is_null() {
            // SAFETY: both blocks hold at least the smaller size and are
            // distinct (the old one is still allocated).
            unsafe {
                ptr::copy_nonoverlapping(block, moved, layout.size().min(new_size));
                self.dealloc(block, layout);
            }
        }
        moved
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::alloc::System;
    use std::cell::Cell;

    /// The allocator beneath, counting what it is asked for.
    struct Counting {
        allocs: Cell<usize>,
        frees: Cell<usize>,
    }
    unsafe impl Sync for Counting {}
    unsafe impl GlobalAlloc for Counting {
        unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
            self.allocs.set(self.allocs.get() + 1);
            unsafe { System.alloc(layout) }
        }
        unsafe fn dealloc(&self, block: *mut u8, layout: Layout) {
            self.frees.set(self.frees.get() + 1);
            unsafe { System.dealloc(block, layout) }
        }
    }

    fn heap() -> SizeClassHeap<Counting> {
        SizeClassHeap::new(Counting {
            allocs: Cell::new(0),
            frees: Cell::new(0),
        })
    }

    fn layout(size: usize, align: usize) -> Layout {
        Layout::from_size_align(size, align).unwrap()
    }

    #[test]
    fn chunks_double_up_to_their_largest() {
        assert_eq!(chunk_size(0), CHUNK);
        assert_eq!(chunk_size(1), 2 * CHUNK);
        assert_eq!(chunk_size(6), CHUNK_MAX);
        assert_eq!(chunk_size(MAX_CHUNKS - 1), CHUNK_MAX);
        let all: usize = (0..MAX_CHUNKS).map(chunk_size).sum();
        assert!(all > 200 << 20, "the chunks cover an instance's memory");
    }

    #[test]
    fn classes_cover_sizes_by_granule() {
        assert_eq!(class_of(layout(1, 1)), Some(0));
        assert_eq!(class_of(layout(16, 8)), Some(0));
        assert_eq!(class_of(layout(17, 8)), Some(1));
        assert_eq!(class_of(layout(SMALL_MAX, 16)), Some(CLASSES - 1));
        assert_eq!(class_of(layout(SMALL_MAX + 1, 1)), None);
        assert_eq!(class_of(layout(8, 32)), None);
    }

    #[test]
    fn a_freed_block_is_the_next_of_its_class() {
        let heap = heap();
        unsafe {
            let a = heap.alloc(layout(24, 8));
            let b = heap.alloc(layout(30, 8));
            assert_ne!(a, b);
            heap.dealloc(a, layout(24, 8));
            // Another size of the same class takes it; another class does not.
            let c = heap.alloc(layout(100, 4));
            assert_ne!(c, a);
            assert_eq!(heap.alloc(layout(32, 16)), a);
            assert_eq!(a as usize % GRANULE, 0);
            assert_eq!(c as usize % GRANULE, 0);
        }
        assert_eq!(heap.beneath.allocs.get(), 1, "one chunk carved");
    }

    #[test]
    fn live_blocks_never_overlap_and_keep_their_bytes() {
        let heap = heap();
        let mut live: Vec<(*mut u8, Layout, u8)> = Vec::new();
        let mut seed = 0x2545_f491_u32;
        let mut next = || {
            seed ^= seed << 13;
            seed ^= seed >> 17;
            seed ^= seed << 5;
            seed
        };
        for step in 0..20_000u32 {
            let roll = next();
            if roll % 3 == 0 && !live.is_empty() {
                let (block, l, fill) = live.swap_remove(roll as usize % live.len());
                unsafe {
                    for i in 0..l.size() {
                        assert_eq!(*block.add(i), fill, "a block's bytes changed");
                    }
                    heap.dealloc(block, l);
                }
            } else if roll % 3 == 1 && !live.is_empty() {
                let at = roll as usize % live.len();
                let (block, l, fill) = live[at];
                let new_size = 1 + next() as usize % 3000;
                unsafe {
                    let moved = heap.realloc(block, l, new_size);
                    assert!(!moved.is_null());
                    for i in 0..l.size().min(new_size) {
                        assert_eq!(*moved.add(i), fill, "realloc lost bytes");
                    }
                    let grown = layout(new_size, l.align());
                    ptr::write_bytes(moved, fill, new_size);
                    live[at] = (moved, grown, fill);
                }
            } else {
                let size = 1 + next() as usize % 2500;
                let align = 1 << (next() % 6);
                let l = layout(size, align);
                let fill = step as u8;
                // One block in four comes from beneath, as the canonical
                // ABI's lowered lists do, and is freed through the heap.
                let foreign = next() % 4 == 0;
                unsafe {
                    let block = if foreign {
                        heap.beneath.alloc(l)
                    } else {
                        heap.alloc(l)
                    };
                    assert!(!block.is_null());
                    assert_eq!(block as usize % align, 0, "misaligned");
                    ptr::write_bytes(block, fill, size);
                    live.push((block, l, fill));
                }
            }
        }
        let mut spans: Vec<(usize, usize)> = live
            .iter()
            .map(|(b, l, _)| (*b as usize, *b as usize + l.size()))
            .collect();
        spans.sort();
        for pair in spans.windows(2) {
            assert!(pair[0].1 <= pair[1].0, "live blocks overlap");
        }
        for (block, l, fill) in live {
            unsafe {
                for i in 0..l.size() {
                    assert_eq!(*block.add(i), fill);
                }
                heap.dealloc(block, l);
            }
        }
    }

    #[test]
    fn large_and_overaligned_blocks_go_beneath() {
        let heap = heap();
        unsafe {
            let big = heap.alloc(layout(SMALL_MAX + 1, 8));
            let aligned = heap.alloc(layout(64, 64));
            assert_eq!(aligned as usize % 64, 0);
            heap.dealloc(big, layout(SMALL_MAX + 1, 8));
            heap.dealloc(aligned, layout(64, 64));
        }
        assert_eq!(heap.beneath.allocs.get(), 2);
        assert_eq!(heap.beneath.frees.get(), 2);
    }

    #[test]
    fn a_small_block_from_beneath_is_freed_and_resized_beneath() {
        let heap = heap();
        unsafe {
            let own = heap.alloc(layout(20, 8));
            // 20 bytes of the allocator beneath: handing it out again as a
            // 32-byte block of its class would overrun it.
            let foreign = heap.beneath.alloc(layout(20, 8));
            let chunks = heap.beneath.allocs.get();
            let grown = heap.realloc(foreign, layout(20, 8), 30);
            heap.dealloc(grown, layout(30, 8));
            assert_eq!(heap.beneath.frees.get(), 2, "resized and freed beneath");
            assert_ne!(heap.alloc(layout(30, 8)), grown);
            assert_eq!(heap.beneath.allocs.get(), chunks + 1, "only the resize's");
            heap.dealloc(own, layout(20, 8));
        }
    }

    /// The allocator beneath with room for blocks smaller than a chunk
    /// only, counting the chunks it refused.
    struct Cramped(Cell<usize>);
    unsafe impl Sync for Cramped {}
    unsafe impl GlobalAlloc for Cramped {
        unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
            if layout.size() >= CHUNK {
                self.0.set(self.0.get() + 1);
                return ptr::null_mut();
            }
            unsafe { System.alloc(layout) }
        }
        unsafe fn dealloc(&self, block: *mut u8, layout: Layout) {
            unsafe { System.dealloc(block, layout) }
        }
    }

    #[test]
    fn a_refused_chunk_leaves_small_blocks_to_beneath() {
        let heap = SizeClassHeap::new(Cramped(Cell::new(0)));
        unsafe {
            let block = heap.alloc(layout(40, 8));
            assert!(!block.is_null());
            assert!(!heap.owns(block));
            heap.dealloc(block, layout(40, 8));
            let next = heap.alloc(layout(40, 8));
            assert!(!heap.owns(next));
            heap.dealloc(next, layout(40, 8));
        }
        assert_eq!(
            heap.beneath.0.get(),
            1,
            "a refused chunk is not asked again"
        );
    }

    #[test]
    fn past_the_last_chunk_small_blocks_come_from_beneath() {
        let heap = heap();
        let block = layout(SMALL_MAX, GRANULE);
        let carved: usize = (0..MAX_CHUNKS).map(|i| chunk_size(i) / SMALL_MAX).sum();
        unsafe {
            // Carving touches no block, so the chunks stay untouched.
            for _ in 0..carved {
                assert!(!heap.alloc(block).is_null());
            }
            assert_eq!(heap.beneath.allocs.get(), MAX_CHUNKS);
            let beneath = heap.alloc(block);
            assert_eq!(heap.beneath.allocs.get(), MAX_CHUNKS + 1);
            assert!(!heap.owns(beneath));
            heap.dealloc(beneath, block);
            assert_eq!(heap.beneath.frees.get(), 1);
        }
    }

    #[test]
    fn growing_within_a_class_keeps_the_block() {
        let heap = heap();
        unsafe {
            let a = heap.alloc(layout(20, 8));
            assert_eq!(heap.realloc(a, layout(20, 8), 32), a);
            let moved = heap.realloc(a, layout(32, 8), 33);
            assert_ne!(moved, a);
            // The old block went back to its list.
            assert_eq!(heap.alloc(layout(32, 8)), a);
        }
    }
}
