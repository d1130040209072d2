//! Guest bindings of the tool world (`wit/tool/`), generated once for every
//! release, and the runtime a release needs without the standard library.
//!
//! A release crate is `#![no_std]` on `wasm32`, implements
//! [`exports::lab::tool::run::Guest`] and calls [`export_tool!`] on its type.
//! Built on the standard library it would import WASI interfaces (stderr,
//! for panic messages), which the host refuses when the release is
//! configured.
#![cfg_attr(target_arch = "wasm32", no_std)]

extern crate alloc;

wit_bindgen::generate!({
    path: "../../wit/tool",
    world: "lab:tool/tool-with-effects",
    pub_export_macro: true,
    export_macro_name: "export_tool",
    default_bindings_module: "lab_tool_guest",
});

pub use alloc::{format, string::String, vec, vec::Vec};

#[cfg(target_arch = "wasm32")]
mod bare {
    use core::alloc::{GlobalAlloc, Layout};
    use core::sync::atomic::{AtomicUsize, Ordering};

    const PAGE: usize = 64 << 10;

    /// Hands out memory upwards from the end of the initial memory and
    /// never reuses it: a run is one short-lived instance.
    struct Bump {
        next: AtomicUsize,
        end: AtomicUsize,
    }

    // SAFETY: a component instance is single-threaded; `alloc` returns
    // disjoint, aligned ranges inside the linear memory, or null when the
    // memory cannot grow (the host's memory limit).
    unsafe impl GlobalAlloc for Bump {
        unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
            let mut end = self.end.load(Ordering::Relaxed);
            if end == 0 {
                end = core::arch::wasm32::memory_size(0) * PAGE;
                self.next.store(end, Ordering::Relaxed);
            }
            let next = self.next.load(Ordering::Relaxed);
            let start = (next + layout.align() - 1) & !(layout.align() - 1);
            let Some(stop) = start.checked_add(layout.size()) else {
                return core::ptr::null_mut();
            };
            if stop > end {
                let pages = (stop - end).div_ceil(PAGE);
                if core::arch::wasm32::memory_grow(0, pages) == usize::MAX {
                    return core::ptr::null_mut();
                }
                end += pages * PAGE;
            }
            self.end.store(end, Ordering::Relaxed);
            self.next.store(stop, Ordering::Relaxed);
            start as *mut u8
        }

        unsafe fn dealloc(&self, _ptr: *mut u8, _layout: Layout) {}
    }

    #[global_allocator]
    static ALLOCATOR: Bump = Bump {
        next: AtomicUsize::new(0),
        end: AtomicUsize::new(0),
    };

    /// The canonical ABI's allocator export (on `wasm32-wasip2` it comes
    /// from the C library, which a release without `std` does not link).
    /// Traps when the memory cannot grow.
    #[export_name = "cabi_realloc"]
    unsafe extern "C" fn cabi_realloc(
        old: *mut u8,
        old_len: usize,
        align: usize,
        new_len: usize,
    ) -> *mut u8 {
        if new_len == 0 {
            return align as *mut u8;
        }
        // SAFETY: the canonical ABI passes a power-of-two `align` and, when
        // `old_len` is not zero, a block it got from this function.
        let block = unsafe {
            if old_len == 0 {
                alloc::alloc::alloc(Layout::from_size_align_unchecked(new_len, align))
            } else {
                let layout = Layout::from_size_align_unchecked(old_len, align);
                alloc::alloc::realloc(old, layout, new_len)
            }
        };
        if block.is_null() {
            core::arch::wasm32::unreachable()
        }
        block
    }

    #[panic_handler]
    fn panic(_: &core::panic::PanicInfo) -> ! {
        core::arch::wasm32::unreachable()
    }
}
