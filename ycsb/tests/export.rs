//! `exporter=`, `exportfile=`, `measurementtype=` and the phase labels, end to end through the
//! binary on the in-process `memory` binding.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn tempdir() -> PathBuf {
    let d = std::env::temp_dir().join(format!(
        "ycsb-export-{}-{}",
        std::process::id(),
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_nanos()
    ));
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn ycsb(args: &[&str]) -> Output {
    let workload = Path::new(env!("CARGO_MANIFEST_DIR")).join("workloads/workloada");
    Command::new(env!("CARGO_BIN_EXE_ycsb"))
        .args(args)
        .arg("-P")
        .arg(workload)
        .args(["-p", "recordcount=300", "-p", "operationcount=600"])
        .args(["-p", "seed=7", "--no-progress"])
        .output()
        .unwrap()
}

fn ok(out: &Output) -> String {
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout.clone()).unwrap()
}

/// (metric, measurement, value) of a JSON exporter's objects.
fn triples(objects: &[serde_json::Value]) -> Vec<(String, String, serde_json::Value)> {
    objects
        .iter()
        .map(|o| {
            assert_eq!(o.as_object().unwrap().len(), 3, "{o}");
            (
                o["metric"].as_str().unwrap().to_string(),
                o["measurement"].as_str().unwrap().to_string(),
                o["value"].clone(),
            )
        })
        .collect()
}

fn value(t: &[(String, String, serde_json::Value)], metric: &str, m: &str) -> serde_json::Value {
    t.iter()
        .find(|(a, b, _)| a == metric && b == m)
        .unwrap_or_else(|| panic!("no [{metric}], {m} in {t:?}"))
        .2
        .clone()
}

#[test]
fn json_exporter_writes_one_file_per_phase() {
    let dir = tempdir();
    let file = dir.join("report.json");
    let stdout = ok(&ycsb(&[
        "loadrun",
        "memory",
        "-p",
        "exporter=site.ycsb.measurements.exporter.JSONMeasurementsExporter",
        "-p",
        &format!("exportfile={}", file.display()),
    ]));
    assert!(!stdout.contains("[OVERALL]"), "{stdout}");
    assert!(!file.exists());
    for (phase, op, count) in [("load", "INSERT", 300), ("run", "READ", 0)] {
        let text = std::fs::read_to_string(dir.join(format!("report.json.{phase}"))).unwrap();
        let objects: Vec<serde_json::Value> = text
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        let t = triples(&objects);
        assert_eq!(
            (t[0].0.as_str(), t[0].1.as_str()),
            ("OVERALL", "RunTime(ms)")
        );
        assert!(value(&t, "OVERALL", "Throughput(ops/sec)").is_f64());
        let ops = value(&t, op, "Operations").as_u64().unwrap();
        if count > 0 {
            assert_eq!(ops, count);
        } else {
            let updates = value(&t, "UPDATE", "Operations").as_u64().unwrap();
            assert_eq!(ops + updates, 600);
        }
        assert!(value(&t, op, "95thPercentileLatency(us)").is_u64());
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn json_array_on_stdout_is_labelled_by_phase() {
    let stdout = ok(&ycsb(&["loadrun", "memory", "-p", "exporter=jsonarray"]));
    let parts: Vec<&str> = stdout.split("[PHASE], ").collect();
    assert_eq!(parts.len(), 3, "{stdout}");
    assert!(parts[0].is_empty());
    for (part, phase) in parts[1..].iter().zip(["load", "run"]) {
        let (label, array) = part.split_once('\n').unwrap();
        assert_eq!(label, phase);
        let v: serde_json::Value = serde_json::from_str(array).unwrap();
        let t = triples(v.as_array().unwrap());
        assert_eq!(t[0].0, "OVERALL");
    }
    // One phase: exactly YCSB's report, no label.
    let stdout = ok(&ycsb(&["load", "memory"]));
    assert!(stdout.starts_with("[OVERALL], RunTime(ms), "), "{stdout}");
    assert!(!stdout.contains("[PHASE]"));
    // Text with both phases: each [OVERALL] block follows its label.
    let stdout = ok(&ycsb(&["loadrun", "memory"]));
    let lines: Vec<&str> = stdout.lines().collect();
    assert_eq!(lines[0], "[PHASE], load");
    let run_at = lines.iter().position(|l| *l == "[PHASE], run").unwrap();
    assert!(lines[run_at + 1].starts_with("[OVERALL], RunTime(ms), "));
    assert_eq!(stdout.matches("[OVERALL], RunTime(ms)").count(), 2);
}

#[test]
fn histogram_buckets_add_up_to_the_operations() {
    let dir = tempdir();
    let file = dir.join("load.txt");
    ok(&ycsb(&[
        "-load",
        "-db",
        "memory",
        "-p",
        "measurementtype=histogram",
        "-p",
        "histogram.buckets=5",
        "-p",
        &format!("exportfile={}", file.display()),
    ]));
    let text = std::fs::read_to_string(&file).unwrap();
    let insert: Vec<(&str, &str)> = text
        .lines()
        .filter_map(|l| l.strip_prefix("[INSERT], "))
        .map(|l| l.rsplit_once(", ").unwrap())
        .collect();
    let names: Vec<&str> = insert.iter().map(|x| x.0).collect();
    assert_eq!(
        &names[..5],
        [
            "Operations",
            "AverageLatency(us)",
            "LatencyVariance(us)",
            "MinLatency(us)",
            "MaxLatency(us)"
        ]
    );
    assert_eq!(&names[names.len() - 6..], ["0", "1", "2", "3", "4", ">5"]);
    let buckets: u64 = insert[insert.len() - 6..]
        .iter()
        .map(|x| x.1.parse::<u64>().unwrap())
        .sum();
    assert_eq!(buckets, 300);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn timeseries_rows_fall_on_the_granularity() {
    let stdout = ok(&ycsb(&[
        "load",
        "memory",
        "-p",
        "measurementtype=timeseries",
        "-p",
        "timeseries.granularity=20",
    ]));
    let rows: Vec<(u64, f64)> = stdout
        .lines()
        .filter_map(|l| l.strip_prefix("[INSERT], "))
        .filter_map(|l| l.split_once(", "))
        .filter_map(|(t, v)| Some((t.parse::<u64>().ok()?, v.parse::<f64>().unwrap())))
        .collect();
    assert!(!rows.is_empty(), "{stdout}");
    assert!(rows.iter().all(|(t, avg)| t % 20 == 0 && *avg >= 0.0));
    assert!(rows.windows(2).all(|w| w[0].0 < w[1].0));
    assert!(stdout.contains("[INSERT], 95thPercentileLatency(us), "));
}

#[test]
fn unknown_exporter_or_type_is_refused_before_the_run() {
    for bad in [
        "exporter=site.ycsb.measurements.exporter.CsvExporter",
        "measurementtype=raw",
    ] {
        let out = ycsb(&["loadrun", "memory", "-p", bad]);
        assert_eq!(out.status.code(), Some(2));
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(stderr.contains(bad), "{stderr}");
        assert!(!stderr.contains("Starting test."), "{stderr}");
        assert!(out.stdout.is_empty());
    }
}
