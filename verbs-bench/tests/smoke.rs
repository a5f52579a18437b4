//! The benchmark binary runs end to end on every transport and writes its JSON.

use std::process::Command;

#[test]
fn quick_run_writes_json_for_every_transport_and_the_echo() {
    let dir = tempfile::tempdir().expect("tempdir");
    let json = dir.path().join("out.json");
    let page = dir.path().join("pages/verbs-bench.md");
    let out = Command::new(env!("CARGO_BIN_EXE_verbs-bench"))
        .args([
            "--transports",
            "local,shm,udp",
            "--verbs",
            "read,cas",
            "--sizes",
            "64",
            "--threads",
            "1",
            "--depths",
            "4",
            "--duration-ms",
            "30",
            "--repeat",
            "1",
            "--json",
        ])
        .arg(&json)
        .arg("--results-md")
        .arg(&page)
        .output()
        .expect("run verbs-bench");
    assert!(
        out.status.success(),
        "verbs-bench failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains("soft RoCE (udp) vs raw UDP echo"),
        "{stdout}"
    );
    let doc: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).expect("json written")).expect("json");
    let cells = doc["cells"].as_array().expect("cells");
    // 3 transports × (read 64 + cas uncontended + cas contended).
    assert_eq!(cells.len(), 9);
    for c in cells {
        assert!(c["ops"].as_u64().unwrap_or(0) > 0, "no operations in {c}");
        assert_eq!(c["errors"].as_u64(), Some(0), "errors in {c}");
        // A request and its answer; a busy machine may time a request out and
        // retransmit it, which adds packets but must be counted as such.
        let packets = c["packets_per_op"].as_f64().unwrap_or(0.0);
        if c["retransmissions_per_op"].as_f64() == Some(0.0) {
            assert_eq!(packets, 2.0, "{c}");
        } else {
            assert!(packets > 2.0, "retransmissions without extra packets: {c}");
        }
    }
    let ratios = doc["udp_vs_echo"].as_array().expect("ratios");
    assert_eq!(ratios.len(), 1);
    assert!(ratios[0]["echo_ops_per_sec"].as_f64().unwrap_or(0.0) > 0.0);

    let md = std::fs::read_to_string(&page).expect("results page written");
    assert!(md.starts_with("# Results: `verbs-bench`\n"), "{md}");
    assert!(md.contains("- date: "), "{md}");
    assert!(md.contains("- machine: "), "{md}");
    assert!(
        md.contains("- command: `verbs-bench --transports local,shm,udp"),
        "{md}"
    );
    // Header and separator of each table, nine cells and one echo line.
    assert_eq!(
        md.lines().filter(|l| l.starts_with('|')).count(),
        2 + 9 + 2 + 1,
        "{md}"
    );
    assert!(
        md.contains("## Soft RoCE (udp) against a raw UDP echo"),
        "{md}"
    );
}

#[test]
fn bad_arguments_are_refused_clearly() {
    let out = Command::new(env!("CARGO_BIN_EXE_verbs-bench"))
        .args(["--verbs", "scan"])
        .output()
        .expect("run verbs-bench");
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("unknown verb \"scan\""), "{err}");
}
