fn main() {
    lab_embed::contract_files("../../contracts/journal");
    // About 770 KiB of heap beside the stack and the data: a page of
    // entries (its scan and its reply, about 100 KiB) fits without growing.
    lab_embed::initial_memory(2 << 20);
}
