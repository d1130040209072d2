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
