//! The interop-test rule shared by tests that need tools nobody here wrote
//! (python3 with scapy, tshark, ...): a missing tool is a loud skip, unless
//! `DMKV_REQUIRE_INTEROP=1`, in which case it is a failure.
#![allow(dead_code)]

/// Whether `DMKV_REQUIRE_INTEROP=1` is set.
pub fn interop_required() -> bool {
    std::env::var("DMKV_REQUIRE_INTEROP").is_ok_and(|v| v == "1")
}

/// Run `check`; if the tool `name` is available return true. Otherwise
/// print `SKIPPED: ...` to stderr and return false, or panic when interop
/// is required.
pub fn tool_available(check: impl FnOnce() -> bool, name: &str) -> bool {
    if check() {
        return true;
    }
    assert!(
        !interop_required(),
        "{name} is not available but DMKV_REQUIRE_INTEROP=1 requires it"
    );
    // Written to the real stderr rather than with `eprintln!`, which the
    // test harness captures and hides for passing tests.
    use std::io::Write;
    let _ = writeln!(
        std::io::stderr(),
        "SKIPPED: {name} is not available; this interop test did not run \
         (set DMKV_REQUIRE_INTEROP=1 to make that a failure)"
    );
    false
}
