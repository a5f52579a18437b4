//! `--results-md PATH` writes the experiment's table as a Markdown results page.

use std::process::Command;

#[test]
fn align_writes_its_results_page() {
    let dir = std::env::temp_dir().join(format!("sync-bench-results-md-{}", std::process::id()));
    let page = dir.join("pages").join("align.md");
    let out = Command::new(env!("CARGO_BIN_EXE_sync-bench"))
        .arg("--out")
        .arg(&dir)
        .args([
            "align",
            "--strides",
            "64,128",
            "--threads",
            "1",
            "--latches",
            "2",
            "--duration-ms",
            "20",
            "--results-md",
        ])
        .arg(&page)
        .output()
        .expect("run sync-bench");
    assert!(
        out.status.success(),
        "sync-bench failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let md = std::fs::read_to_string(&page).expect("results page written");
    let _ = std::fs::remove_dir_all(&dir);
    assert!(md.starts_with("# Results: `sync-bench align`\n"), "{md}");
    assert!(md.contains("- date: "), "{md}");
    assert!(md.contains("- machine: "), "{md}");
    assert!(md.contains("- command: `sync-bench --out "), "{md}");
    assert!(
        md.contains(
            "| placement | stride | thr | CAS/s | collisions/CAS |\n|---|---|---|---|---|\n"
        ),
        "{md}"
    );
    // Three placements × two strides.
    let rows = md
        .lines()
        .filter(|l| {
            l.starts_with("| embedded") || l.starts_with("| padded") || l.starts_with("| separate")
        })
        .count();
    assert_eq!(rows, 6, "{md}");
}
