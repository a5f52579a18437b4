//! `ycsb`: see [`ycsb::cli`] and `ycsb --help`.

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let code = {
        // Log lines at warn; with OTEL_EXPORTER_OTLP_ENDPOINT set, the run's `kv.op`
        // spans are exported too, flushed when the guard drops (before exiting).
        let _telemetry = telemetry::init_client("ycsb");
        ycsb::cli::main_with(&args)
    };
    std::process::exit(code);
}
