//! `promtool check metrics` on an exposition: the Prometheus project's own parser and
//! linter, which the services' tests run on their `/metrics` answers.

use std::io::Write as _;
use std::process::{Command, Stdio};

/// The variable that turns a missing `promtool` from a skip into a failure.
pub const REQUIRE_VAR: &str = "DMKV_REQUIRE_INTEROP";

/// What `promtool check metrics` said.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Check {
    /// It accepted the text without a lint problem.
    Passed,
    /// `promtool` is not installed (and [`REQUIRE_VAR`] is not `1`): why nothing was checked.
    Skipped(String),
}

/// Runs `promtool check metrics` on `text`. `Err` carries promtool's complaint, or says
/// that promtool is missing while [`REQUIRE_VAR`]`=1` requires it.
pub fn check_metrics(text: &str) -> Result<Check, String> {
    let child = Command::new("promtool")
        .args(["check", "metrics"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn();
    let mut child = match child {
        Ok(c) => c,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            let why = "promtool is not installed (apt-get install prometheus)".to_owned();
            if std::env::var(REQUIRE_VAR).is_ok_and(|v| v == "1") {
                return Err(format!("{why}, and {REQUIRE_VAR}=1 requires it"));
            }
            return Ok(Check::Skipped(why));
        }
        Err(e) => return Err(format!("cannot run promtool: {e}")),
    };
    if let Some(mut stdin) = child.stdin.take() {
        stdin
            .write_all(text.as_bytes())
            .map_err(|e| format!("cannot feed promtool: {e}"))?;
    }
    let out = child
        .wait_with_output()
        .map_err(|e| format!("promtool did not finish: {e}"))?;
    let said = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    if out.status.success() && said.trim().is_empty() {
        Ok(Check::Passed)
    } else {
        Err(format!("promtool check metrics ({}): {said}", out.status))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accepts_good_text_and_reports_lint_problems() {
        let good = "# HELP a_total A.\n# TYPE a_total counter\na_total 1\n";
        match check_metrics(good).unwrap() {
            Check::Passed => {}
            Check::Skipped(why) => {
                eprintln!("SKIPPED: {why}");
                return;
            }
        }
        // A counter without the _total suffix is a lint problem.
        let bad = "# HELP a A.\n# TYPE a counter\na 1\n";
        assert!(check_metrics(bad).is_err());
        assert!(check_metrics("garbage{\n").is_err());
    }
}
