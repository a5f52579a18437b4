//! Runs a script taken from the documentation and checks what it prints.
//!
//! `tests/readme_quickstart.rs` (the README's quick start) and `tests/cli_walkthrough.rs`
//! (the walkthrough of docs/cli.md) each extract a [`DocScript`] from their page and hand
//! it to [`run`]: the script runs with `bash -euo pipefail` in a fresh temporary directory
//! (also its `TMPDIR`), with the given binaries first on `PATH`, in its own process group,
//! which is killed when it ends or after the timeout, so no server outlives the test. Each
//! expected line must then appear, in order, in what the script prints on standard output
//! and standard error (runs of whitespace compare equal). The scripts need `curl`: without
//! it the test prints `SKIPPED: …` and passes, unless `DMKV_REQUIRE_INTEROP=1`, when it
//! fails.

use std::fs::File;
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant, SystemTime};

use crate::{fresh_binaries, interop_required};

/// A script from the documentation, and the output it is documented to print.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DocScript {
    /// The script, run with `bash -euo pipefail`.
    pub script: String,
    /// The lines it must print, in order, each [`normalize`]d.
    pub expected: Vec<String>,
}

/// How a documentation script is named in messages.
#[derive(Debug, Clone, Copy)]
pub struct Label<'a> {
    /// The script, as the subject of a sentence: "the quick start".
    pub what: &'a str,
    /// The script in the `SKIPPED: …` line: "README quick start".
    pub title: &'a str,
    /// Whose output lines are expected: "the README's".
    pub source: &'a str,
}

/// `line` with its runs of whitespace replaced by one space, and no leading or trailing
/// whitespace.
pub fn normalize(line: &str) -> String {
    line.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// Whether `program` is a file in one of the directories of `PATH`.
pub fn on_path(program: &str) -> bool {
    std::env::var_os("PATH")
        .is_some_and(|paths| std::env::split_paths(&paths).any(|dir| dir.join(program).is_file()))
}

/// Kills every process left in the process group `pgid`.
pub fn kill_group(pgid: u32) {
    let _ = Command::new("kill")
        .args(["-s", "KILL", "--", &format!("-{pgid}")])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status();
}

/// Waits for `child` at most `timeout`; `None` when it is still running.
pub fn wait_timeout(child: &mut Child, timeout: Duration) -> Option<ExitStatus> {
    let deadline = Instant::now() + timeout;
    loop {
        if let Some(status) = child.try_wait().expect("waiting for the child") {
            return Some(status);
        }
        if Instant::now() >= deadline {
            return None;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// The `*.log` files below `dir`, with their contents.
fn logs(dir: &Path) -> String {
    let mut out = String::new();
    let Ok(entries) = std::fs::read_dir(dir) else {
        return out;
    };
    let mut entries: Vec<_> = entries.flatten().map(|e| e.path()).collect();
    entries.sort();
    for path in entries {
        if path.is_dir() {
            out.push_str(&logs(&path));
        } else if path.extension().is_some_and(|e| e == "log") {
            let text = std::fs::read_to_string(&path).unwrap_or_default();
            out.push_str(&format!("--- {}\n{text}", path.display()));
        }
    }
    out
}

/// Whether `expected` appears, line by line and in order, among `lines`; else the first
/// expected line that does not.
pub fn in_order(expected: &[String], lines: &[String]) -> Result<(), String> {
    let mut rest = lines.iter();
    for want in expected {
        if !rest.any(|l| l == want) {
            return Err(want.clone());
        }
    }
    Ok(())
}

/// Runs `doc` and panics unless it succeeds within `timeout` and prints its expected lines
/// in order.
///
/// It runs in a fresh directory `dmkv-<tag>-…` under the temporary directory, as
/// `<tag>.sh`, with [`fresh_binaries`]`(binaries)` first on `PATH` and without the
/// environment variables `env_remove`. A failure shows the script, its output and the
/// `*.log` files it left. Without `curl` on `PATH` it prints `SKIPPED: …` and returns,
/// unless `DMKV_REQUIRE_INTEROP=1`, when it panics.
pub fn run(
    doc: &DocScript,
    label: Label<'_>,
    tag: &str,
    binaries: &[&str],
    env_remove: &[&str],
    timeout: Duration,
) {
    let Label {
        what,
        title,
        source,
    } = label;
    if !on_path("curl") {
        assert!(
            !interop_required(),
            "DMKV_REQUIRE_INTEROP=1 but curl, which {what} uses, is not on PATH"
        );
        eprintln!("SKIPPED: {title}: curl is not on PATH");
        return;
    }
    let bins = fresh_binaries(binaries);
    let nanos = SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    let dir = std::env::temp_dir().join(format!("dmkv-{tag}-{}-{nanos}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temporary directory");
    let script = dir.join(format!("{tag}.sh"));
    std::fs::write(&script, &doc.script).expect("writing the script");
    let out_path = dir.join("output");
    let out = File::create(&out_path).expect("output file");
    let path = std::env::join_paths(
        std::iter::once(bins.clone()).chain(
            std::env::var_os("PATH")
                .map_or_else(Vec::new, |p| std::env::split_paths(&p).collect::<Vec<_>>()),
        ),
    )
    .expect("PATH");
    let mut cmd = Command::new("bash");
    cmd.args(["-euo", "pipefail"])
        .arg(&script)
        .current_dir(&dir)
        .env("PATH", path)
        .env("TMPDIR", &dir);
    for var in env_remove {
        cmd.env_remove(var);
    }
    let mut child = cmd
        .stdin(Stdio::null())
        .stdout(out.try_clone().expect("output file"))
        .stderr(out)
        .process_group(0)
        .spawn()
        .expect("bash runs");
    let pgid = child.id();
    let status = wait_timeout(&mut child, timeout);
    kill_group(pgid);
    if status.is_none() {
        let _ = child.wait();
    }
    let output = std::fs::read_to_string(&out_path).unwrap_or_default();
    let server_logs = logs(&dir);
    let _ = std::fs::remove_dir_all(&dir);
    let report = |problem: String| -> String {
        format!(
            "{problem}\n--- script (binaries from {})\n{}--- output\n{output}{server_logs}",
            bins.display(),
            doc.script
        )
    };
    match status {
        None => panic!("{}", report(format!("{what} ran longer than {timeout:?}"))),
        Some(s) if !s.success() => panic!("{}", report(format!("{what} failed ({s})"))),
        Some(_) => {}
    }
    let lines: Vec<String> = output.lines().map(normalize).collect();
    if let Err(missing) = in_order(&doc.expected, &lines) {
        panic!(
            "{}",
            report(format!(
                "{what} did not print {source} output line {missing:?} (in order)"
            ))
        );
    }
}
