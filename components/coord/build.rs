fn main() {
    lab_embed::contract_files("../../contracts/coordination");
    // About 1.2 MiB of heap beside the stack and the data (820 KiB), where
    // the linker left a few KiB and every request grew the memory.
    lab_embed::initial_memory(3 << 20);
}
