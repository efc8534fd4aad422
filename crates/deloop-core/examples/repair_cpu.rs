//! `repair_json` over a file, as `deloop repair FILE` runs it, without the
//! CLI around it: `cargo run --release -p deloop-core --example repair_cpu
//! FILE` prints the repaired JSON's length. For instruction counts with
//! callgrind.

fn main() {
    let path = std::env::args().nth(1).expect("usage: repair_cpu FILE");
    let text = std::fs::read_to_string(&path).expect("readable UTF-8 file");
    let out = deloop_core::rescue::repair_json(&text).expect("repairable JSON");
    println!("{}", out.json.len());
}
