//! The program end to end at a tiny size: every mode runs on every index, RPC cells
//! make RPCs and one-sided cells none, and the JSON and the page say so.

use std::process::Command;

#[test]
fn a_tiny_run_of_the_workloads_and_workers_experiments() {
    let dir = tempfile::tempdir().expect("tempdir");
    let json = dir.path().join("access.json");
    let page = dir.path().join("access.md");
    let out = Command::new(env!("CARGO_BIN_EXE_access-bench"))
        .args([
            "--records",
            "50",
            "--operations",
            "200",
            "--threads",
            "1",
            "--concurrency",
            "2",
            "--experiments",
            "workloads,workers",
            "--worker-counts",
            "1",
            "--repetitions",
            "2",
        ])
        .arg("--json")
        .arg(&json)
        .arg("--results-md")
        .arg(&page)
        .output()
        .expect("run");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let doc: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).expect("json")).expect("parse");
    let cells = doc["cells"].as_array().expect("cells");
    assert_eq!(doc["repetitions"], 2);
    assert_eq!(doc["runs"].as_array().expect("runs").len(), 2);
    // 3 workloads × 3 indexes × 5 accesses (one-sided; rpc and hybrid by SEND and
    // by WRITE), and the worker sweep's 3 × 5.
    assert_eq!(cells.len(), 60);
    for c in cells {
        assert_eq!(c["failed"], 0, "{c}");
        assert_eq!(c["repetitions"], 2, "{c}");
        let (lo, hi) = (
            c["ops_per_sec_min"].as_f64().expect("min"),
            c["ops_per_sec_max"].as_f64().expect("max"),
        );
        let ops = c["ops_per_sec"].as_f64().expect("ops");
        assert!(lo <= ops && ops <= hi, "{c}");
        assert!(c["ops_per_sec"].as_f64().expect("ops") > 0.0, "{c}");
        let rpcs = c["rpcs_per_op"].as_f64().expect("rpcs");
        assert!(
            matches!(c["transport"].as_str(), Some("send" | "write")),
            "{c}"
        );
        match c["mode"].as_str().expect("mode") {
            "one-sided" => assert_eq!(rpcs, 0.0, "{c}"),
            // Every RACE operation is an RPC in rpc mode (Clover reads use one only
            // to walk a chain longer than one node).
            "rpc" if c["index"] == "race" => assert!(rpcs >= 0.9, "{c}"),
            // An in-place operation is one RPC per probed tuple.
            "rpc" if c["index"] == "inplace" => assert!(rpcs >= 1.0, "{c}"),
            _ => {}
        }
    }
    let md = std::fs::read_to_string(&page).expect("page");
    assert!(md.contains("# Results: `access-bench`"), "{md}");
    assert!(
        md.contains("## workloads") && md.contains("## workers"),
        "{md}"
    );
    assert!(md.contains("| race | rpc/write |"), "{md}");
    assert!(md.contains("| inplace | rpc |"), "{md}");
    // The worker sweep's charts beside the page, linked from it.
    for index in ["clover", "race", "inplace"] {
        for suffix in ["", "-p99"] {
            let file = format!("access-bench-workers-{index}{suffix}.svg");
            assert!(md.contains(&format!("]({file})")), "{file}: {md}");
            let svg = std::fs::read_to_string(dir.path().join(&file)).expect("chart");
            assert!(
                svg.contains("one-sided") && svg.contains("rpc/write"),
                "{file}"
            );
        }
    }
}
