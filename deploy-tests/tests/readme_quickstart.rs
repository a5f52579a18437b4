//! Runs the README's quick start verbatim.
//!
//! The `sh` blocks under `## Quick start` in README.md are run in order, as one script, with
//! `bash -euo pipefail` in a fresh temporary directory (also its `TMPDIR`), with the
//! workspace's `metadata`, `memnode` and `dmkv` binaries first on `PATH`. A block that runs
//! `cargo` is the README's build step: the test does it itself instead — it uses the
//! binaries next to this test (built by `cargo test --workspace`) when they are newer than
//! every source file of the workspace, and otherwise builds them with cargo into
//! `target/deploy-tests` (a separate directory, so as not to wait on this build's lock).
//! The `text` block after the script is its expected output: each of its lines must appear,
//! in order, in what the script prints (runs of whitespace compare equal).
//!
//! The script runs in its own process group, which is killed when it ends or after
//! [`TIMEOUT`], so no server outlives the test. The quick start needs `curl`: without it the
//! test prints `SKIPPED: …` and passes, unless `DMKV_REQUIRE_INTEROP=1`, when it fails.
//! The running is [`deploy_tests::doc_script::run`].

use std::time::Duration;

use deploy_tests::doc_script::{DocScript, Label, normalize, run};
use deploy_tests::root;

/// The heading of the README section that is run.
const SECTION: &str = "## Quick start";
/// The binaries the quick start runs.
const BINARIES: [&str; 3] = ["metadata", "memnode", "dmkv"];
/// How long the script may run.
const TIMEOUT: Duration = Duration::from_secs(120);

/// Extracts the fenced blocks of the section headed [`SECTION`] from a README: the quick
/// start's `sh` blocks without the build step, and its expected output.
fn quick_start(readme: &str) -> DocScript {
    let mut in_section = false;
    let mut fence: Option<String> = None;
    let mut block = String::new();
    let mut scripts = Vec::new();
    let mut expected = Vec::new();
    for line in readme.lines() {
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
        "README: unterminated code block in {SECTION}"
    );
    let runs_cargo = |s: &String| s.lines().any(|l| l.trim_start().starts_with("cargo "));
    let script: Vec<String> = scripts.into_iter().filter(|s| !runs_cargo(s)).collect();
    assert!(
        !script.is_empty(),
        "README has no ```sh block to run under {SECTION}"
    );
    DocScript {
        script: script.concat(),
        expected,
    }
}

#[test]
fn readme_quick_start_runs_verbatim() {
    let readme = std::fs::read_to_string(root().join("README.md")).expect("README.md");
    let label = Label {
        what: "the quick start",
        title: "README quick start",
        source: "the README's",
    };
    run(
        &quick_start(&readme),
        label,
        "readme-quickstart",
        &BINARIES,
        &[],
        TIMEOUT,
    );
}

#[test]
fn extraction_skips_the_build_step_and_other_sections() {
    let readme = "# x\n## Other\n```sh\necho no\n```\n## Quick start\ntext\n```sh\n\
                  cargo build -p a\nexport PATH=x\n```\n```sh\necho a\n```\n```text\n\
                  a  b\n\n```\n```sh\necho b\n```\n## Next\n```sh\necho no\n```\n";
    let qs = quick_start(readme);
    assert_eq!(qs.script, "echo a\necho b\n");
    assert_eq!(qs.expected, vec!["a b".to_owned()]);
}
