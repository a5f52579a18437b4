//! The copy experiment end to end at a small size: both engines copy every item size
//! exactly (the program checks the target byte for byte and fails otherwise), and the
//! JSON and the results page say what was measured.

use std::process::Command;

#[test]
fn a_small_copy_experiment_runs_and_writes_its_json_and_page() {
    let dir = tempfile::tempdir().expect("tempdir");
    let json = dir.path().join("copy.json");
    let page = dir.path().join("copy.md");
    let out = Command::new(env!("CARGO_BIN_EXE_zero-bench"))
        .args([
            "copy", "--items", "64,4096", "--bytes", "131072", "--repeat", "1",
        ])
        .arg("--json")
        .arg(&json)
        .arg("--results-md")
        .arg(&page)
        .output()
        .expect("run");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    let doc: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).expect("json")).expect("parse");
    let cells = doc["cells"].as_array().expect("cells");
    assert_eq!(cells.len(), 4);
    for c in cells {
        assert!(c["seconds"].as_f64().expect("seconds") > 0.0, "{c}");
        assert_eq!(c["bytes"], 131072);
    }
    // The switch issued one READ per item: 131072 / 64 and 131072 / 4096.
    let reads = |item: u64| {
        cells
            .iter()
            .find(|c| c["engine"] == "switch" && c["item"] == item)
            .map(|c| c["switch_reads"].as_u64().expect("reads"))
            .expect("switch cell")
    };
    assert!(reads(64) >= 2048, "{}", reads(64));
    assert!(reads(4096) >= 32, "{}", reads(4096));
    // The CPU copy's client spends CPU; the memory nodes serve both.
    let cpu = cells
        .iter()
        .find(|c| c["engine"] == "cpu" && c["item"] == 64)
        .expect("cpu cell");
    assert!(cpu["client_cpu"].as_f64().expect("client") > 0.0, "{cpu}");
    assert_eq!(doc["summary"].as_array().expect("summary").len(), 4);
    let md = std::fs::read_to_string(&page).expect("page");
    assert!(md.contains("# Results: `zero-bench copy`"), "{md}");
    assert!(md.contains("| 64 B | switch |"), "{md}");
    assert!(md.contains("| 4 KiB | cpu |"), "{md}");
    // The charts beside the page, linked from it.
    for file in ["zero-bench-copy-bandwidth.svg", "zero-bench-copy-cpu.svg"] {
        assert!(md.contains(&format!("]({file})")), "{md}");
        let svg = std::fs::read_to_string(dir.path().join(file)).expect("chart");
        assert!(
            svg.contains("switch-driven") && svg.contains("cpu-driven"),
            "{file}"
        );
    }
}
