fn main() {
    lab_embed::contract_files("../../contracts/journal");
    // The component starts with 2 MiB of linear memory (1 MiB of stack, the
    // data, about 770 KiB of heap) instead of the linker's 1.25 MiB, which
    // left 32 KiB of heap: a page of entries (its scan and its reply, about
    // 100 KiB) then grew the memory on every request, each growth an
    // mprotect and its reversal when the slot was reset. 2 MiB is within
    // the base every instance may use without charge (4 MiB by default).
    if std::env::var("TARGET").is_ok_and(|target| target.starts_with("wasm32")) {
        println!("cargo:rustc-link-arg=--initial-memory=2097152");
    }
}
