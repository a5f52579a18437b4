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
//! The running is [`deploy_tests::doc_script::run`].

use std::time::Duration;

use deploy_tests::doc_script::{DocScript, Label, in_order, normalize, run};
use deploy_tests::root;

/// The heading of the docs/cli.md section that is run.
const SECTION: &str = "## Walkthrough";
/// The binaries the walkthrough runs.
const BINARIES: [&str; 3] = ["metadata", "memnode", "dmkv"];
/// How long the script may run.
const TIMEOUT: Duration = Duration::from_secs(120);

/// Extracts the fenced blocks of the section headed [`SECTION`] from a Markdown page: the
/// walkthrough's `sh` blocks, and its expected output.
fn walkthrough(page: &str) -> DocScript {
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
    DocScript {
        script: scripts.concat(),
        expected,
    }
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
    let label = Label {
        what: "the walkthrough",
        title: "CLI walkthrough",
        source: "the docs'",
    };
    run(
        &w,
        label,
        "cli-walkthrough",
        &BINARIES,
        &[
            "DMKV_METADATA",
            "DMKV_TOKEN",
            "DMKV_TOKEN_FILE",
            "DMKV_CREDENTIAL",
            "DMKV_CREDENTIAL_FILE",
        ],
        TIMEOUT,
    );
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
