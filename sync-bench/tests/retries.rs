//! `sync-bench retries` runs end to end on a tiny hot set and reports retries, round
//! trips and throughput for every index and mode.

use std::process::Command;

#[test]
fn retries_counts_failed_cases_per_update_for_every_index_and_mode() {
    let dir = tempfile::tempdir().expect("tempdir");
    let page = dir.path().join("sync-bench-retries.md");
    let out = Command::new(env!("CARGO_BIN_EXE_sync-bench"))
        .arg("--out")
        .arg(dir.path())
        .arg("--results-md")
        .arg(&page)
        .args([
            "retries",
            "--threads",
            "2",
            "--tasks",
            "4",
            "--keys",
            "4",
            "--duration-ms",
            "200",
            "--reps",
            "1",
            "--modes",
            "off,backoff,on",
            "--t0-us",
            "16",
            "--capacity-mb",
            "64",
        ])
        .output()
        .expect("run sync-bench retries");
    assert!(
        out.status.success(),
        "sync-bench retries failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = std::fs::read_to_string(dir.path().join("sync-retries.json")).expect("json");
    let doc: serde_json::Value = serde_json::from_str(&text).expect("json");
    let cells = doc["cells"].as_array().expect("cells");
    assert_eq!(cells.len(), 6, "2 indexes × 3 modes");
    let mut off_retries = 0.0;
    for c in cells {
        assert!(c["updates"].as_u64().unwrap_or(0) > 0, "no updates in {c}");
        assert_eq!(c["errors"].as_u64(), Some(0), "errors in {c}");
        // An update writes its new node or block and swings one word by CAS: at least
        // two round trips, and a retry adds at least one more.
        let rt = c["round_trips_per_op"].as_f64().unwrap_or(0.0);
        let retries = c["retries_per_op"].as_f64().unwrap_or(-1.0);
        assert!(rt >= 2.0 + retries, "{c}");
        assert!(c["ops_per_sec"].as_f64().unwrap_or(0.0) > 0.0, "{c}");
        if c["mode"] == "off" {
            off_retries += retries;
        }
    }
    // Eight concurrent updates on four keys collide without conflict avoidance.
    assert!(off_retries > 0.0, "no retries counted: {text}");
    for svg in [
        "sync-retries-per-op-tasks4.svg",
        "sync-retries-throughput-tasks4.svg",
    ] {
        let s = std::fs::read_to_string(dir.path().join(svg)).expect("chart written");
        assert!(s.starts_with("<svg"), "{svg}");
    }
    let md = std::fs::read_to_string(&page).expect("results page");
    assert!(md.starts_with("# Results: `sync-bench retries`\n"), "{md}");
    assert!(md.contains("## Conflict avoidance off → on"), "{md}");
    assert!(md.contains("| clover | off | - | 2 | 4 |"), "{md}");
    assert!(md.contains("| race | on | 16 | 2 | 4 |"), "{md}");
}
