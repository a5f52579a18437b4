//! Records the compiler's `rustc --version` for the services' `*_build_info` metric.

use std::process::Command;

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    let rustc = std::env::var("RUSTC").unwrap_or_else(|_| "rustc".to_owned());
    let version = Command::new(rustc)
        .arg("--version")
        .output()
        .ok()
        .filter(|o| o.status.success())
        .and_then(|o| String::from_utf8(o.stdout).ok())
        .map(|v| v.trim().to_owned())
        .unwrap_or_default();
    if !version.is_empty() {
        println!("cargo:rustc-env=DMKV_RUSTC_VERSION={version}");
    }
}
