//! Runs the CLI walkthrough of docs/cli.md verbatim.
//!
//! The `sh` blocks under `## Walkthrough` in docs/cli.md are run in order, as one script,
//! with `bash -euo pipefail` in a fresh temporary directory (also its `TMPDIR`), with the
//! workspace's `metadata`, `memnode` and `dmkv` binaries first on `PATH` (the binaries next
//! to this test when they are newer than every source file, else built with cargo into
//! `target/deploy-tests`). The `text` blocks are the expected output: each of their lines
//! must appear, in order, in what the script prints on standard output and standard error
//! (runs of whitespace compare equal).
//!
//! The script runs in its own process group, which is killed when it ends or after
//! [`TIMEOUT`], so no server outlives the test. The walkthrough needs `curl`: without it the
//! test prints `SKIPPED: …` and passes, unless `DMKV_REQUIRE_INTEROP=1`, when it fails.

use std::fs::File;
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant, SystemTime};

use deploy_tests::{fresh_binaries, interop_required, root};

/// The heading of the docs/cli.md section that is run.
const SECTION: &str = "## Walkthrough";
/// The binaries the walkthrough runs.
const BINARIES: [&str; 3] = ["metadata", "memnode", "dmkv"];
/// How long the script may run.
const TIMEOUT: Duration = Duration::from_secs(120);

/// The walkthrough: its `sh` blocks, and its expected output.
struct Walkthrough {
    script: String,
    expected: Vec<String>,
}

/// Extracts the fenced blocks of the section headed [`SECTION`] from a Markdown page.
fn walkthrough(page: &str) -> Walkthrough {
    let mut in_section = false;
    let mut fence: Option<String> = None;
    let mut block = String::new();
    let mut scripts = Vec::new();
    let mut expected = Vec::new();
    for line in page.lines() {
        if let Some(lang) = &fence {
            if line.trim_end() == "```" {
                match lang.as_str() {
                    "sh" => scripts.push(std::mem::take(&mut block)),
                    "text" => {
                        expected.extend(block.lines().map(normalize).filter(|l| !l.is_empty()));
                        block.clear();
                    }
                    _ => block.clear(),
                }
                fence = None;
            } else {
                block.push_str(line);
                block.push('\n');
            }
            continue;
        }
        if line.starts_with("## ") || line.starts_with("# ") {
            in_section = line.trim_end() == SECTION;
            continue;
        }
        if in_section && let Some(lang) = line.strip_prefix("```") {
            fence = Some(lang.trim().to_owned());
        }
    }
    assert!(
        fence.is_none(),
        "docs/cli.md: unterminated code block in {SECTION}"
    );
    assert!(
        !scripts.is_empty(),
        "docs/cli.md has no ```sh block to run under {SECTION}"
    );
    Walkthrough {
        script: scripts.concat(),
        expected,
    }
}

fn normalize(line: &str) -> String {
    line.split_whitespace().collect::<Vec<_>>().join(" ")
}

fn on_path(program: &str) -> bool {
    std::env::var_os("PATH")
        .is_some_and(|paths| std::env::split_paths(&paths).any(|dir| dir.join(program).is_file()))
}

/// Kills every process left in the process group `pgid`.
fn kill_group(pgid: u32) {
    let _ = Command::new("kill")
        .args(["-s", "KILL", "--", &format!("-{pgid}")])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status();
}

/// Waits for `child` at most `timeout`; `None` when it is still running.
fn wait_timeout(child: &mut Child, timeout: Duration) -> Option<ExitStatus> {
    let deadline = Instant::now() + timeout;
    loop {
        if let Some(status) = child.try_wait().expect("waiting for bash") {
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

/// Whether `expected` appears, line by line and in order, among `lines`.
fn in_order(expected: &[String], lines: &[String]) -> Result<(), String> {
    let mut rest = lines.iter();
    for want in expected {
        if !rest.any(|l| l == want) {
            return Err(want.clone());
        }
    }
    Ok(())
}

#[test]
fn cli_walkthrough_runs_verbatim() {
    let page = std::fs::read_to_string(root().join("docs").join("cli.md")).expect("docs/cli.md");
    let w = walkthrough(&page);
    assert!(
        w.script.contains("dmkv keys"),
        "the walkthrough shows dmkv keys"
    );
    assert!(!w.expected.is_empty(), "the walkthrough shows its output");
    if !on_path("curl") {
        assert!(
            !interop_required(),
            "DMKV_REQUIRE_INTEROP=1 but curl, which the walkthrough uses, is not on PATH"
        );
        eprintln!("SKIPPED: CLI walkthrough: curl is not on PATH");
        return;
    }
    let bins = fresh_binaries(&BINARIES);
    let nanos = SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    let dir = std::env::temp_dir().join(format!(
        "dmkv-cli-walkthrough-{}-{nanos}",
        std::process::id()
    ));
    std::fs::create_dir_all(&dir).expect("temporary directory");
    let script = dir.join("walkthrough.sh");
    std::fs::write(&script, &w.script).expect("writing the script");
    let out_path = dir.join("output");
    let out = File::create(&out_path).expect("output file");
    let path = std::env::join_paths(
        std::iter::once(bins.clone()).chain(
            std::env::var_os("PATH")
                .map_or_else(Vec::new, |p| std::env::split_paths(&p).collect::<Vec<_>>()),
        ),
    )
    .expect("PATH");
    let mut child = Command::new("bash")
        .args(["-euo", "pipefail"])
        .arg(&script)
        .current_dir(&dir)
        .env("PATH", path)
        .env("TMPDIR", &dir)
        .env_remove("DMKV_METADATA")
        .env_remove("DMKV_TOKEN")
        .stdin(Stdio::null())
        .stdout(out.try_clone().expect("output file"))
        .stderr(out)
        .process_group(0)
        .spawn()
        .expect("bash runs");
    let pgid = child.id();
    let status = wait_timeout(&mut child, TIMEOUT);
    kill_group(pgid);
    if status.is_none() {
        let _ = child.wait();
    }
    let output = std::fs::read_to_string(&out_path).unwrap_or_default();
    let server_logs = logs(&dir);
    let _ = std::fs::remove_dir_all(&dir);
    let report = |what: String| -> String {
        format!(
            "{what}\n--- script (binaries from {})\n{}--- output\n{output}{server_logs}",
            bins.display(),
            w.script
        )
    };
    match status {
        None => panic!(
            "{}",
            report(format!("the walkthrough ran longer than {TIMEOUT:?}"))
        ),
        Some(s) if !s.success() => panic!("{}", report(format!("the walkthrough failed ({s})"))),
        Some(_) => {}
    }
    let lines: Vec<String> = output.lines().map(normalize).collect();
    if let Err(missing) = in_order(&w.expected, &lines) {
        panic!(
            "{}",
            report(format!(
                "the walkthrough did not print the docs' output line {missing:?} (in order)"
            ))
        );
    }
}

#[test]
fn extraction_takes_every_block_of_the_section_only() {
    let page = "# x\n## Other\n```sh\necho no\n```\n## Walkthrough\ntext\n```sh\n\
                echo a\n```\n```text\na  b\n\n```\n```rust\nignored\n```\n```sh\necho b\n```\n\
                ```text\nc\n```\n## Next\n```sh\necho no\n```\n";
    let w = walkthrough(page);
    assert_eq!(w.script, "echo a\necho b\n");
    assert_eq!(w.expected, vec!["a b".to_owned(), "c".to_owned()]);
}

#[test]
fn expected_lines_must_appear_in_order() {
    let lines: Vec<String> = ["x", "a", "y", "b"].map(String::from).to_vec();
    assert!(in_order(&["a".into(), "b".into()], &lines).is_ok());
    assert_eq!(
        in_order(&["b".into(), "a".into()], &lines),
        Err("a".to_owned())
    );
}
