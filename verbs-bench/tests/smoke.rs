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
        // A contended CAS operation is one increment of the shared word: a request and
        // its answer per attempt, and every failed attempt is retried.
        // Increments that gave up after the attempt bound are counted apart.
        assert!(c["cas_gave_up"].is_u64(), "{c}");
        let attempts = if c["contended"] == true {
            1.0 + c["cas_failures_per_op"].as_f64().unwrap_or(0.0)
        } else {
            1.0
        };
        let packets = c["packets_per_op"].as_f64().unwrap_or(0.0);
        if c["retransmissions_per_op"].as_f64() == Some(0.0) {
            assert!((packets - 2.0 * attempts).abs() < 1e-9, "{c}");
        } else {
            assert!(
                packets > 2.0 * attempts,
                "retransmissions without extra packets: {c}"
            );
        }
    }
    let ratios = doc["udp_vs_echo"].as_array().expect("ratios");
    assert_eq!(ratios.len(), 1);
    assert!(ratios[0]["echo_ops_per_sec"].as_f64().unwrap_or(0.0) > 0.0);
    // CPU per operation beside the echo floor: the whole process's, and the memory
    // node's and the echo server's share of it (coarse clocks may give a short cell 0).
    for field in ["udp_cpu_us_per_op", "echo_cpu_us_per_op"] {
        assert!(
            ratios[0][field].as_f64().unwrap_or(0.0) > 0.0,
            "{field}: {}",
            ratios[0]
        );
    }
    for field in ["udp_memnode_cpu_us_per_op", "echo_server_cpu_us_per_op"] {
        assert!(
            ratios[0][field].as_f64().is_some(),
            "{field}: {}",
            ratios[0]
        );
    }
    // Datagrams per send call on each side: at least one, and never more than the
    // operations one thread keeps outstanding (depth 4, one thread).
    for field in [
        "udp_client_datagrams_per_send",
        "udp_memnode_datagrams_per_send",
        "echo_client_datagrams_per_send",
        "echo_server_datagrams_per_send",
    ] {
        let v = ratios[0][field].as_f64().unwrap_or(0.0);
        assert!((1.0..=4.0).contains(&v), "{field}: {}", ratios[0]);
    }

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
    assert!(
        md.contains("| udp datagrams per send | echo datagrams per send |"),
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

#[test]
fn threads_mode_measures_every_policy_and_counts_cas_swaps() {
    let dir = tempfile::tempdir().expect("tempdir");
    let json = dir.path().join("threads.json");
    let page = dir.path().join("verbs-bench-threads.md");
    let out = Command::new(env!("CARGO_BIN_EXE_verbs-bench"))
        .args([
            "threads",
            "--transports",
            "shm,udp",
            "--threads",
            "1,2",
            "--doorbells",
            "batched,single",
            "--completions",
            "block",
            "--duration-ms",
            "40",
            "--repeat",
            "1",
            "--json",
        ])
        .arg(&json)
        .arg("--results-md")
        .arg(&page)
        .output()
        .expect("run verbs-bench threads");
    assert!(
        out.status.success(),
        "verbs-bench threads failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let doc: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).expect("json written")).expect("json");
    assert_eq!(doc["depth"].as_u64(), Some(8));
    let cells = doc["cells"].as_array().expect("cells");
    // 2 transports × 2 verbs × 2 doorbells × 2 policies × 2 thread counts.
    assert_eq!(cells.len(), 32);
    for c in cells {
        let verbs = c["verbs"].as_u64().unwrap_or(0);
        assert!(verbs > 0, "no verbs in {c}");
        assert_eq!(c["errors"].as_u64(), Some(0), "errors in {c}");
        // Whole batches only: every round waits for all of its eight completions.
        assert_eq!(verbs % 8, 0, "{c}");
        let doorbells = c["doorbells_per_verb"].as_f64().unwrap_or(0.0);
        match c["doorbell"].as_str() {
            Some("batched") => assert_eq!(doorbells, 0.125, "{c}"),
            Some("single") => assert_eq!(doorbells, 1.0, "{c}"),
            other => panic!("doorbell {other:?} in {c}"),
        }
        let swaps = c["cas_swaps"].as_u64().unwrap_or(0);
        match c["verb"].as_str() {
            Some("read") => assert_eq!(swaps, 0, "{c}"),
            Some("cas") => {
                assert!(swaps > 0 && swaps <= verbs, "{c}");
                if c["threads"] == 1 {
                    // Alone on the word, a thread's expectations are always right.
                    assert_eq!(swaps, verbs, "{c}");
                }
            }
            other => panic!("verb {other:?} in {c}"),
        }
        let lock = c["lock_wait_share"].as_f64().unwrap_or(-1.0);
        match c["policy"].as_str() {
            Some("per-thread") => assert_eq!(lock, 0.0, "{c}"),
            Some("shared") => assert!((0.0..1.0).contains(&lock), "{c}"),
            other => panic!("policy {other:?} in {c}"),
        }
    }
    let ratios = doc["per_thread_over_shared"].as_array().expect("ratios");
    assert_eq!(ratios.len(), 16);
    assert!(
        ratios
            .iter()
            .all(|r| r["ratio"].as_f64().unwrap_or(0.0) > 0.0)
    );

    let md = std::fs::read_to_string(&page).expect("results page written");
    assert!(md.starts_with("# Results: `verbs-bench threads`\n"), "{md}");
    assert!(
        md.contains("- command: `verbs-bench threads --transports shm,udp"),
        "{md}"
    );
    assert!(
        md.contains("## What this transport can and cannot show"),
        "{md}"
    );
    assert!(
        md.contains("## Per-thread queue pairs over one shared queue pair"),
        "{md}"
    );
    // Two tables: 16 ratio rows and 32 cells, each with a header and a separator.
    assert_eq!(
        md.lines().filter(|l| l.starts_with('|')).count(),
        2 + 16 + 2 + 32,
        "{md}"
    );
    // A chart per transport and verb beside the page, linked from it.
    for t in ["shm", "udp"] {
        for v in ["read", "cas"] {
            let file = format!("verbs-bench-threads-{t}-{v}.svg");
            assert!(md.contains(&format!("]({file})")), "{file}: {md}");
            let svg = std::fs::read_to_string(dir.path().join(&file)).expect("chart");
            assert!(
                svg.contains("per-thread") && svg.contains("shared"),
                "{file}"
            );
        }
    }
}
