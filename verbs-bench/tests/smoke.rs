//! The benchmark binary runs end to end on every transport and writes its JSON.

use std::process::Command;

#[test]
fn quick_run_writes_json_for_every_transport_and_the_echo() {
    let dir = tempfile::tempdir().expect("tempdir");
    let json = dir.path().join("out.json");
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
        assert_eq!(c["packets_per_op"].as_f64(), Some(2.0), "{c}");
    }
    let ratios = doc["udp_vs_echo"].as_array().expect("ratios");
    assert_eq!(ratios.len(), 1);
    assert!(ratios[0]["echo_ops_per_sec"].as_f64().unwrap_or(0.0) > 0.0);
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
