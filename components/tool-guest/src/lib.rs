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

/// The largest a call to `inputs::read` answers.
pub const READ_CHUNK: u32 = 1 << 20;

/// The whole input bound to `role`, read in chunks; an error names a
/// missing input or one that ended before its bound size.
pub fn read_input(role: &str) -> Result<Vec<u8>, String> {
    let size = lab::tool::inputs::bound()
        .into_iter()
        .find(|i| i.role == role)
        .map(|i| i.size)
        .ok_or_else(|| format!("no input `{role}`"))?;
    let mut bytes = Vec::with_capacity(
        usize::try_from(size).map_err(|_| format!("input `{role}` is too large"))?,
    );
    while (bytes.len() as u64) < size {
        match lab::tool::inputs::read(role, bytes.len() as u64, READ_CHUNK) {
            Some(chunk) if !chunk.is_empty() => bytes.extend_from_slice(&chunk),
            _ => {
                return Err(format!(
                    "input `{role}` ended at {} of {size} bytes",
                    bytes.len()
                ))
            }
        }
    }
    Ok(bytes)
}

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

    /// `memcmp`, which core's slice and string comparisons call: on
    /// `wasm32-wasip2` it comes from the C library, which a release without
    /// `std` does not link.
    #[export_name = "memcmp"]
    unsafe extern "C" fn memcmp(a: *const u8, b: *const u8, n: usize) -> i32 {
        for i in 0..n {
            // SAFETY: the caller passes two ranges of `n` readable bytes.
            let (x, y) = unsafe { (*a.add(i), *b.add(i)) };
            if x != y {
                return i32::from(x) - i32::from(y);
            }
        }
        0
    }

    /// `bcmp`: equality only, the same answer as `memcmp` suffices.
    #[export_name = "bcmp"]
    unsafe extern "C" fn bcmp(a: *const u8, b: *const u8, n: usize) -> i32 {
        // SAFETY: as `memcmp`.
        unsafe { memcmp(a, b, n) }
    }

    #[panic_handler]
    fn panic(_: &core::panic::PanicInfo) -> ! {
        core::arch::wasm32::unreachable()
    }
}
