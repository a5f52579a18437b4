//! `ycsb`: see [`ycsb::cli`] and `ycsb --help`.

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    std::process::exit(ycsb::cli::main_with(&args));
}
