//! Running a test inside a network namespace of its own (shared by the verbs and memnode
//! tests, which include this file): the outer test re-executes
//! the test binary under `unshare --net`, after a setup script, running only the
//! inner tests (ignored otherwise, and inert without the marker variable).
#![allow(dead_code)]

use std::process::Command;

/// The variable that tells an inner test it runs inside the namespace.
pub const INNER_ENV: &str = "DMKV_NETNS_INNER";

/// Whether this process is the namespace's inner run.
pub fn inside() -> bool {
    std::env::var(INNER_ENV).is_ok()
}

/// Whether network namespaces can be made here (root, `unshare`, `ip`).
pub fn available() -> bool {
    available_for("ip link set lo up")
}

/// Whether `setup` (shell) succeeds in a new network namespace.
pub fn available_for(setup: &str) -> bool {
    Command::new("unshare")
        .args(["--net", "--", "sh", "-c", setup])
        .output()
        .is_ok_and(|o| o.status.success())
}

/// Run `setup` (shell) in a new network namespace, then the tests of this binary whose
/// names contain `filter`, ignored ones included; panics with their output unless
/// exactly `expected` passed.
pub fn run_inside(setup: &str, filter: &str, expected: usize) -> String {
    let exe = std::env::current_exe().expect("test binary");
    let script = format!(
        "{setup} && exec '{}' {filter} --ignored --nocapture --test-threads 1",
        exe.display()
    );
    let out = Command::new("unshare")
        .args(["--net", "--", "sh", "-c", &script])
        .env(INNER_ENV, "1")
        .output()
        .expect("run the namespace");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "inside the namespace:\n{text}");
    assert!(
        text.contains(&format!("{expected} passed")),
        "{expected} inner tests should have passed:\n{text}"
    );
    text
}
