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
//! `metadata --help`: fresh binaries from [`deploy_tests::fresh_binaries`] (those next to
//! this test when they are newer than every source of the workspace, else built with
//! cargo into `target/deploy-tests`).

use std::process::{Command, Stdio};

use deploy_tests::{fresh_binaries, interop_required, root};

/// The binaries the chart runs.
const BINARIES: [&str; 2] = ["memnode", "metadata"];

const MODULES: &str =
    "import helm_python, kubernetes_validate, pytest, yaml; helm_python.helm_sdk_version()";

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
    let bins = fresh_binaries(&BINARIES);
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
