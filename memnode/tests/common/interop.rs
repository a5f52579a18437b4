//! Finding the external tools of the interop tests (tshark, python3 with scapy), under the
//! rule of `verbs/tests/support/interop.rs`: a missing tool is a loud skip, unless
//! `DMKV_REQUIRE_INTEROP=1`, in which case it is a failure.
#![allow(dead_code)]

use std::process::{Command, Stdio};

#[path = "../../../verbs/tests/support/interop.rs"]
mod rule;

#[allow(unused_imports)]
pub use rule::{interop_required, tool_available};

fn runs(program: &str, args: &[&str]) -> bool {
    Command::new(program)
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// The first interpreter that can import scapy's RoCE module: `DMKV_PYTHON` if set, else
/// `python3` on the PATH, else the system `/usr/bin/python3` (where Debian's
/// python3-scapy lives even when another python3 comes first on the PATH).
pub fn python_with_scapy() -> Option<String> {
    let candidates: Vec<String> = match std::env::var("DMKV_PYTHON") {
        Ok(python) => vec![python],
        Err(_) => vec!["python3".to_owned(), "/usr/bin/python3".to_owned()],
    };
    candidates
        .into_iter()
        .find(|python| runs(python, &["-c", "import scapy.contrib.roce"]))
}

/// [`python_with_scapy`], skipping loudly (or failing under `DMKV_REQUIRE_INTEROP=1`)
/// when there is none.
pub fn require_python_with_scapy() -> Option<String> {
    let mut found = None;
    let available = tool_available(
        || {
            found = python_with_scapy();
            found.is_some()
        },
        "python3 with scapy (scapy.contrib.roce; Debian python3-scapy, or set DMKV_PYTHON)",
    );
    if available { found } else { None }
}

/// The tshark to run: `DMKV_TSHARK` if set, else `tshark` on the PATH.
pub fn tshark_program() -> String {
    std::env::var("DMKV_TSHARK").unwrap_or_else(|_| "tshark".to_owned())
}

/// Whether tshark runs and has the InfiniBand (RoCE) dissector.
pub fn tshark_with_infiniband() -> Option<String> {
    let tshark = tshark_program();
    let out = Command::new(&tshark)
        .args(["-G", "protocols"])
        .stdin(Stdio::null())
        .stderr(Stdio::null())
        .output()
        .ok()?;
    let text = String::from_utf8_lossy(&out.stdout);
    let has_ib = text
        .lines()
        .any(|l| l.split('\t').nth(2) == Some("infiniband"));
    (out.status.success() && has_ib).then_some(tshark)
}

/// [`tshark_with_infiniband`], skipping loudly (or failing under
/// `DMKV_REQUIRE_INTEROP=1`) when it is absent.
pub fn require_tshark() -> Option<String> {
    let mut found = None;
    let available = tool_available(
        || {
            found = tshark_with_infiniband();
            found.is_some()
        },
        "tshark with the InfiniBand dissector (Debian tshark, or set DMKV_TSHARK)",
    );
    if available { found } else { None }
}

/// Print a line to the real stderr (the test harness captures `eprintln!`).
pub fn note(msg: &str) {
    use std::io::Write;
    let _ = writeln!(std::io::stderr(), "{msg}");
}
