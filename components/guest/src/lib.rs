//! Guest bindings of `wit/`, generated once here for every service component.
//!
//! A component crate implements [`exports::lab::platform::handler::Guest`] and
//! calls [`export_service!`] on its type. A component imports only the
//! interfaces it calls.

wit_bindgen::generate!({
    path: "../../wit",
    world: "lab:platform/service",
    pub_export_macro: true,
    export_macro_name: "export_service",
    default_bindings_module: "lab_guest",
});

pub mod heap;

/// Every service component's heap (see [`heap`]); on WebAssembly without
/// threads only, where it needs no lock.
#[cfg(all(target_family = "wasm", not(target_feature = "atomics")))]
#[global_allocator]
static HEAP: heap::SizeClassHeap<std::alloc::System> = heap::SizeClassHeap::new(std::alloc::System);
