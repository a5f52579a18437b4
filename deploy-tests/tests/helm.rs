//! Runs the Helm chart's tests (`helm/tests`, pytest) from the repository root.
//!
//! Needs a python3 with `helm-python-sdk`, `kubernetes-validate`, `pytest` and PyYAML
//! (`.ci/run` installs them; `DMKV_PYTHON` picks the interpreter). Without one the test
//! prints `SKIPPED: …` and passes, unless `DMKV_REQUIRE_INTEROP=1`, when it fails. The
//! alert rules' checks need `promtool` (Debian's `prometheus`) on the same terms; the
//! image test needs a container engine (skipped without one unless `DMKV_REQUIRE_IMAGE=1`).
//! `ycsb` and `accel-p4` are used when built (`target/debug`), else their checks are
//! noted and left out.
//! The tests compare the chart's container arguments with `memnode --help` and
//! `metadata --help`: the binaries next to this test (built by `cargo test --workspace`)
//! are used when they are newer than their sources, else they are built with cargo into
//! `target/deploy-tests` (a separate directory, so as not to wait on this build's lock).

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::SystemTime;

const MODULES: &str =
    "import helm_python, kubernetes_validate, pytest, yaml; helm_python.helm_sdk_version()";

/// The binaries the chart runs and the crates their sources live in.
const BINARIES: [&str; 2] = ["memnode", "metadata"];
const SOURCES: [&str; 6] = [
    "memnode/src",
    "memnode/Cargo.toml",
    "metadata/src",
    "metadata/Cargo.toml",
    "verbs/src",
    "verbs/Cargo.toml",
];

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("the crate lives in the workspace root")
        .to_path_buf()
}

fn interop_required() -> bool {
    std::env::var("DMKV_REQUIRE_INTEROP").is_ok_and(|v| v == "1")
}

/// The first interpreter that imports every module the tests need: `DMKV_PYTHON` if set,
/// then `python3` on the PATH, then Debian's `/usr/bin/python3`.
fn python() -> Option<String> {
    let mut candidates = Vec::new();
    if let Ok(p) = std::env::var("DMKV_PYTHON") {
        candidates.push(p);
    }
    candidates.extend(["python3".to_owned(), "/usr/bin/python3".to_owned()]);
    candidates.into_iter().find(|python| {
        Command::new(python)
            .args(["-c", MODULES])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success())
    })
}

fn modified(path: &Path) -> Option<SystemTime> {
    path.metadata().and_then(|m| m.modified()).ok()
}

/// The newest modification time of the files under `path`.
fn newest(path: &Path) -> Option<SystemTime> {
    let meta = path.metadata().ok()?;
    if !meta.is_dir() {
        return meta.modified().ok();
    }
    std::fs::read_dir(path)
        .ok()?
        .flatten()
        .filter_map(|e| newest(&e.path()))
        .max()
}

/// The profile directory this test was built into (`target/debug`).
fn own_profile_dir() -> Option<PathBuf> {
    let exe = std::env::current_exe().ok()?;
    Some(exe.parent()?.parent()?.to_path_buf())
}

/// Binaries in `dir` that exist and are newer than every source file they are built from.
fn fresh_binaries_in(dir: &Path) -> bool {
    let root = root();
    let Some(sources) = SOURCES.iter().filter_map(|s| newest(&root.join(s))).max() else {
        return false;
    };
    BINARIES
        .iter()
        .all(|b| modified(&dir.join(b)).is_some_and(|t| t >= sources))
}

/// A directory holding fresh `memnode` and `metadata` binaries.
fn binary_dir() -> PathBuf {
    if let Some(dir) = own_profile_dir().filter(|d| fresh_binaries_in(d)) {
        return dir;
    }
    let target = root().join("target").join("deploy-tests");
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_owned());
    let mut cmd = Command::new(cargo);
    cmd.current_dir(root())
        .args(["build", "--locked", "--target-dir"])
        .arg(&target);
    for b in BINARIES {
        cmd.args(["-p", b]);
    }
    let status = cmd.stdin(Stdio::null()).status().expect("cargo runs");
    assert!(
        status.success(),
        "cargo build -p memnode -p metadata failed"
    );
    target.join("debug")
}

#[test]
fn helm_chart() {
    let Some(python) = python() else {
        let what = "python3 with helm-python-sdk, kubernetes-validate, pytest and PyYAML \
                    (python3 -m pip install helm-python-sdk kubernetes-validate pytest; \
                    or set DMKV_PYTHON)";
        assert!(!interop_required(), "DMKV_REQUIRE_INTEROP=1 but no {what}");
        eprintln!("SKIPPED: helm chart tests: no {what}");
        return;
    };
    let bins = binary_dir();
    let out = Command::new(&python)
        .current_dir(root())
        .args([
            "-m",
            "pytest",
            "helm/tests",
            "-q",
            "-rs",
            "-p",
            "no:cacheprovider",
        ])
        .env("PYTHONDONTWRITEBYTECODE", "1")
        .env("DMKV_BIN_DIR", &bins)
        .env("DMKV_BIN_MEMNODE", bins.join("memnode"))
        .env("DMKV_BIN_METADATA", bins.join("metadata"))
        .stdin(Stdio::null())
        .output()
        .expect("python runs");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "helm chart tests failed ({}):\n{stdout}\n{stderr}",
        out.status
    );
    eprintln!("{python} -m pytest helm/tests: {}", stdout.trim_end());
}
