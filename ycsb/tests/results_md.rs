//! `--results-md FILE` writes each phase's report as a Markdown results page.

use std::process::Command;

#[test]
fn loadrun_writes_its_results_page() {
    let dir = std::env::temp_dir().join(format!("ycsb-results-md-{}", std::process::id()));
    let page = dir.join("pages").join("ycsb.md");
    let out = Command::new(env!("CARGO_BIN_EXE_ycsb"))
        .args([
            "loadrun",
            "memory",
            "-P",
            "workloads/workloadc",
            "-p",
            "recordcount=20",
            "-p",
            "operationcount=50",
            "--no-progress",
            "--results-md",
        ])
        .arg(&page)
        .output()
        .expect("run ycsb");
    assert!(
        out.status.success(),
        "ycsb failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let md = std::fs::read_to_string(&page).expect("results page written");
    let _ = std::fs::remove_dir_all(&dir);
    assert!(md.starts_with("# Results: `ycsb`\n"), "{md}");
    assert!(md.contains("- date: "), "{md}");
    assert!(md.contains("- machine: "), "{md}");
    assert!(
        md.contains("- command: `ycsb loadrun memory -P workloads/workloadc"),
        "{md}"
    );
    assert!(md.contains("## load of workloadc on memory"), "{md}");
    assert!(md.contains("## run of workloadc on memory"), "{md}");
    assert!(md.contains("| INSERT | Operations | 20 |\n"), "{md}");
    assert!(md.contains("| READ | Operations | 50 |\n"), "{md}");
}
