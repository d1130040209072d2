//! Host bindings of the tool world (`wit/tool/`).

wasmtime::component::bindgen!({
    path: "../wit/tool",
    world: "lab:tool/tool-with-effects",
    imports: { default: async | trappable },
    exports: { default: async },
    with: {
        "lab:tool/outputs.output": crate::run::OutputSlot,
    },
});
