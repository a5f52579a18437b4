//! `ycsb compare --quick` against a real `redis-server` (started by the command on a free
//! loopback port) and an embedded dmkv cluster over udp. Without `redis-server` the test skips
//! loudly, unless `DMKV_REQUIRE_INTEROP=1`.

#[path = "../../verbs/tests/support/interop.rs"]
mod interop;

use std::process::Command;

fn tempfile(name: &str) -> std::path::PathBuf {
    std::env::temp_dir().join(format!(
        "ycsb-compare-{}-{}-{name}",
        std::process::id(),
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_nanos()
    ))
}

#[test]
fn compare_quick_against_redis_server() {
    let available = interop::tool_available(
        || {
            Command::new("redis-server")
                .arg("--version")
                .output()
                .is_ok_and(|o| o.status.success())
        },
        "redis-server",
    );
    if !available {
        return;
    }
    let json = tempfile("results.json");
    let out = Command::new(env!("CARGO_BIN_EXE_ycsb"))
        .args(["compare", "--quick", "--no-progress", "--json"])
        .arg(&json)
        .args(["-p", "recordcount=300", "-p", "operationcount=600"])
        .args(["-threads", "1", "-concurrency", "4", "--rounds", "2"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    let stdout = String::from_utf8(out.stdout).unwrap();
    for s in [
        "| redis ops/s |",
        "| dmkv-clover ops/s |",
        "| dmkv-race ops/s |",
        "clover÷redis ops/s",
        "300 records (10 fields x 100 B), 600 operations per workload, zipfian",
        "dmkv-clover: load",
        "2 rounds of the load and of every workload",
        "- load clover÷redis: ",
        "- C clover÷redis: ",
        "dmkv-clover: load ",
        " records/s (median round)",
    ] {
        assert!(stdout.contains(s), "{s:?} in\n{stdout}");
    }
    for w in ["A", "B", "C", "F"] {
        assert!(
            stdout
                .lines()
                .any(|l| l.starts_with(&format!("| {w} ")) && l.contains("| all ")),
            "a row for workload {w} in\n{stdout}"
        );
    }

    let doc: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    let _ = std::fs::remove_file(&json);
    let systems = doc["systems"].as_array().unwrap();
    let names: Vec<&str> = systems
        .iter()
        .map(|s| s["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["redis", "dmkv-clover", "dmkv-race"]);
    let race_available = systems[2]["available"].as_bool().unwrap();
    assert_eq!(doc["rounds"], 2);
    for s in systems {
        if s["available"].as_bool().unwrap() {
            // The second load round went into an empty store: no insert found its key.
            assert_eq!(s["failed_operations"], 0, "{s}");
            let loads = s["load_throughputs"].as_array().unwrap();
            assert_eq!(loads.len(), 2, "{s}");
            // Two rounds of each of the four workloads.
            let rounds = s["round_throughputs"].as_array().unwrap();
            assert_eq!(rounds.len(), 4, "{s}");
            assert!(
                rounds.iter().all(|r| r.as_array().unwrap().len() == 2),
                "{s}"
            );
        }
    }
    assert_eq!(systems[0]["available"], true);
    assert_eq!(systems[1]["available"], true);
    if !race_available {
        // The client's own reason, in the JSON and under the table.
        let reason = systems[2]["reason"].as_str().unwrap();
        assert!(reason.contains("race"), "{reason}");
        assert!(
            stdout.contains(&format!("dmkv-race: not available: {reason}")),
            "{stdout}"
        );
    }
    // Every available system: a load and four runs (the median rounds), all plot-able.
    let available = systems
        .iter()
        .filter(|s| s["available"].as_bool().unwrap())
        .count();
    let runs = doc["runs"].as_array().unwrap();
    assert_eq!(runs.len(), available * 5);
    let rows = doc["rows"].as_array().unwrap();
    for row in rows {
        let cells = row["cells"].as_array().unwrap();
        assert!(cells[0].is_object() && cells[1].is_object(), "{row}");
        assert_eq!(cells[2].is_object(), race_available, "{row}");
    }
    assert!(
        rows.iter()
            .any(|r| r["workload"] == "F" && r["op"] == "READ-MODIFY-WRITE")
    );
}

#[test]
fn compare_without_redis_server_says_how_to_get_it() {
    let out = Command::new(env!("CARGO_BIN_EXE_ycsb"))
        .args([
            "compare",
            "--quick",
            "--redis-server",
            "/nonexistent/redis-server",
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("apt-get install redis-server"), "{stderr}");
}
