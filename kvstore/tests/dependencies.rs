//! The client library pulls in no server framework, storage engine or telemetry
//! exporter: its normal dependencies are `verbs`, `dmkv-api` and small pure crates.

use std::process::Command;

/// Crates that must not be among kvstore's normal dependencies.
const FORBIDDEN: &[&str] = &["sled", "axum", "tonic", "utoipa", "hyper", "opentelemetry"];

fn cargo_tree(extra: &[&str]) -> Option<String> {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_owned());
    let out = Command::new(cargo)
        .args([
            "tree", "-p", "kvstore", "-e", "normal", "--prefix", "none", "--locked",
        ])
        .args(extra)
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .ok()?;
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).into_owned())
}

#[test]
fn kvstore_depends_on_no_server_framework_or_storage_engine() {
    let tree = cargo_tree(&["--offline"])
        .or_else(|| cargo_tree(&[]))
        .expect("cargo tree -p kvstore -e normal runs");
    let crates: Vec<&str> = tree
        .lines()
        .filter_map(|l| l.split_whitespace().next())
        .collect();
    assert!(crates.contains(&"kvstore"), "{tree}");
    let found: Vec<&str> = crates
        .iter()
        .copied()
        .filter(|c| FORBIDDEN.iter().any(|f| c.starts_with(f)))
        .collect();
    assert!(
        found.is_empty(),
        "kvstore's normal dependencies include {found:?}:\n{tree}"
    );
}
