fn main() {
    lab_embed::contract_files("../../contracts/bytes");
    // About 870 KiB of heap beside the stack and the data (130 KiB), where
    // the linker left 1 KiB and every request grew the memory.
    lab_embed::initial_memory(2 << 20);
}
