//! Tests of dmkv's deployment files, run by `cargo test --workspace`.
//!
//! The Helm chart (`helm/dmkv`) is tested in Python (`helm/tests`), because the real Helm
//! library and the Kubernetes schemas are available there as PyPI packages
//! (`helm-python-sdk`, `kubernetes-validate`). `tests/helm.rs` runs those tests with
//! pytest, handing them the `memnode` and `metadata` binaries whose flags the chart's
//! container arguments are checked against; `tests/readme_quickstart.rs` runs the
//! README's quick start and `tests/cli_walkthrough.rs` the walkthrough of docs/cli.md, both
//! with [`doc_script`]. What they need — where the workspace is, whether missing tools
//! fail the run, fresh binaries, and the runner of documentation scripts — is here.

pub mod doc_script;
pub mod image;

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::SystemTime;

/// The workspace root.
pub fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("the crate lives in the workspace root")
        .to_path_buf()
}

/// Whether `DMKV_REQUIRE_INTEROP=1`: a missing outside tool then fails the test
/// instead of skipping it.
pub fn interop_required() -> bool {
    std::env::var("DMKV_REQUIRE_INTEROP").is_ok_and(|v| v == "1")
}

fn modified(path: &Path) -> Option<SystemTime> {
    path.metadata().and_then(|m| m.modified()).ok()
}

/// The newest modification time of the Rust sources and manifests under `dir`, skipping
/// build output and version control.
fn newest_source(dir: &Path) -> Option<SystemTime> {
    std::fs::read_dir(dir)
        .ok()?
        .flatten()
        .filter_map(|e| {
            let path = e.path();
            let name = e.file_name();
            let name = name.to_string_lossy();
            if path.is_dir() {
                if name == "target" || name.starts_with('.') {
                    None
                } else {
                    newest_source(&path)
                }
            } else if name.ends_with(".rs") || name == "Cargo.toml" || name == "Cargo.lock" {
                modified(&path)
            } else {
                None
            }
        })
        .max()
}

/// The profile directory the running test was built into (`target/debug`).
fn own_profile_dir() -> Option<PathBuf> {
    let exe = std::env::current_exe().ok()?;
    Some(exe.parent()?.parent()?.to_path_buf())
}

/// A directory holding the workspace's `binaries`, each newer than every source file of
/// the workspace: the running test's own profile directory when `cargo test
/// --workspace` built them there, else `target/deploy-tests/debug` after building them
/// with cargo (a separate target directory, so as not to wait on this build's lock).
pub fn fresh_binaries(binaries: &[&str]) -> PathBuf {
    let sources = newest_source(&root());
    let fresh = |dir: &Path| {
        sources.is_some_and(|s| {
            binaries
                .iter()
                .all(|b| modified(&dir.join(b)).is_some_and(|t| t >= s))
        })
    };
    if let Some(dir) = own_profile_dir().filter(|d| fresh(d)) {
        return dir;
    }
    let target = root().join("target").join("deploy-tests");
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_owned());
    let mut cmd = Command::new(cargo);
    cmd.current_dir(root())
        .args(["build", "--locked", "--target-dir"])
        .arg(&target);
    for b in binaries {
        cmd.args(["--bin", b]);
    }
    let status = cmd.stdin(Stdio::null()).status().expect("cargo runs");
    assert!(status.success(), "cargo build of {binaries:?} failed");
    target.join("debug")
}
