fn main() {
    lab_embed::contract_files("../../contracts/coordination");
}
