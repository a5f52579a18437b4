//! The driver end to end on the in-process `memory` binding: workload files and overrides, every
//! standard workload, `dataintegrity=true`, the report against YCSB's grammar, protocol counters,
//! workload E's error on a binding without ordered scans, `--json`, plots and the binary.

use std::collections::BTreeMap;
use std::path::PathBuf;
use ycsb::bindings::memory::MemoryBinding;
use ycsb::client::{Phase, RunOptions, run_phase};
use ycsb::db::{Binding, Db, DbError, LocalBoxFuture, ProtocolCounters, Record, Status};
use ycsb::measure::{RunReport, text_report};
use ycsb::props::Properties;

fn workload(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("workloads")
        .join(name)
}

fn props(file: &str, overrides: &[(&str, &str)]) -> Properties {
    let mut p = Properties::new();
    p.merge_file(workload(file)).unwrap();
    for (k, v) in overrides {
        p.set(*k, *v);
    }
    p
}

fn opts(phase: Phase) -> RunOptions {
    let mut o = RunOptions::new(phase);
    o.progress = false;
    o.workload_label = "test".into();
    o
}

fn op<'a>(r: &'a RunReport, name: &str) -> Option<&'a ycsb::measure::OpReport> {
    r.ops.iter().find(|o| o.name == name)
}

fn returns(r: &RunReport, name: &str) -> BTreeMap<String, u64> {
    op(r, name)
        .map(|o| o.returns.iter().cloned().collect())
        .unwrap_or_default()
}

/// Check every line of a text report against YCSB's exporter grammar and block order.
fn check_grammar(text: &str, percentiles: &[&str]) {
    let mut lines = text.lines().peekable();
    let num = |s: &str| s.parse::<f64>().is_ok() || s == "NaN" || s == "Infinity";
    let int = |s: &str| s.parse::<u64>().is_ok();
    let split = |l: &str| -> (String, String, String) {
        assert!(l.starts_with('['), "line {l:?} does not start with [NAME]");
        let close = l.find("], ").unwrap_or_else(|| panic!("no '], ' in {l:?}"));
        let name = l[1..close].to_string();
        let rest = &l[close + 3..];
        let (m, v) = rest
            .rsplit_once(", ")
            .unwrap_or_else(|| panic!("no ', value' in {l:?}"));
        assert!(
            name.chars()
                .all(|c| c.is_ascii_uppercase() || c == '-' || c == '_'),
            "bad metric name in {l:?}"
        );
        (name, m.to_string(), v.to_string())
    };
    let (n, m, v) = split(lines.next().unwrap());
    assert_eq!((n.as_str(), m.as_str()), ("OVERALL", "RunTime(ms)"));
    assert!(int(&v));
    let (n, m, v) = split(lines.next().unwrap());
    assert_eq!((n.as_str(), m.as_str()), ("OVERALL", "Throughput(ops/sec)"));
    assert!(num(&v) && v.contains(['.', 'E']), "Java double: {v}");
    while let Some(l) = lines.peek() {
        if !l.starts_with("[PROTOCOL]") {
            break;
        }
        let l = lines.next().unwrap();
        let (_, m, v) = split(l);
        assert!(
            (m.ends_with("PerOp") || m.ends_with("Share")) && num(&v) || int(&v),
            "{l}"
        );
    }
    let mut blocks = 0;
    while let Some(l) = lines.next() {
        let (name, m, v) = split(l);
        assert_eq!(m, "Operations", "block must start with Operations: {l}");
        assert!(int(&v));
        let expect = ["AverageLatency(us)", "MinLatency(us)", "MaxLatency(us)"];
        for (i, e) in expect.iter().enumerate() {
            let (n2, m2, v2) = split(lines.next().unwrap());
            assert_eq!((&n2, m2.as_str()), (&name, *e));
            if i == 0 {
                assert!(
                    num(&v2) && v2.contains('.'),
                    "AverageLatency is a Java double: {v2}"
                );
            } else {
                assert!(int(&v2));
            }
        }
        for p in percentiles {
            let (n2, m2, v2) = split(lines.next().unwrap());
            assert_eq!(n2, name);
            assert_eq!(m2, format!("{p}PercentileLatency(us)"));
            assert!(int(&v2));
        }
        while let Some(l) = lines.peek() {
            let (n2, m2, v2) = split(l);
            if n2 != name || !m2.starts_with("Return=") {
                break;
            }
            assert!(m2[7..].chars().all(|c| c.is_ascii_uppercase() || c == '_'));
            assert!(int(&v2));
            lines.next();
        }
        blocks += 1;
    }
    assert!(blocks > 0);
}

#[test]
fn workload_files_and_overrides() {
    let mut p = props("workloada", &[]);
    assert_eq!(p.get("readproportion"), Some("0.5"));
    assert_eq!(p.get("updateproportion"), Some("0.5"));
    assert_eq!(p.get("requestdistribution"), Some("zipfian"));
    assert_eq!(p.get("recordcount"), Some("1000"));
    // A later -P file overrides an earlier one; -p wins over both.
    p.merge_file(workload("workloadd")).unwrap();
    assert_eq!(p.get("requestdistribution"), Some("latest"));
    let (k, v) = Properties::parse_override("requestdistribution=uniform").unwrap();
    p.set(k, v);
    assert_eq!(p.get("requestdistribution"), Some("uniform"));
    // The CLI applies -p after all -P files whatever the order.
    let args: Vec<String> = [
        "run",
        "memory",
        "-p",
        "readproportion=0.25",
        "-P",
        workload("workloadb").to_str().unwrap(),
        "-threads",
        "3",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    let ycsb::cli::Command::Bench(b) = ycsb::cli::parse_args(&args).unwrap() else {
        panic!()
    };
    assert_eq!(b.props.get("readproportion"), Some("0.25"));
    assert_eq!(b.props.get("updateproportion"), Some("0.05"));
    assert_eq!(b.props.get("threadcount"), Some("3"));
    assert_eq!(b.workload_label, "workloadb");
    for (f, mix) in [
        ("workloada", [0.5, 0.5, 0.0, 0.0, 0.0]),
        ("workloadb", [0.95, 0.05, 0.0, 0.0, 0.0]),
        ("workloadc", [1.0, 0.0, 0.0, 0.0, 0.0]),
        ("workloadd", [0.95, 0.0, 0.05, 0.0, 0.0]),
        ("workloade", [0.0, 0.0, 0.05, 0.95, 0.0]),
        ("workloadf", [0.5, 0.0, 0.0, 0.0, 0.5]),
    ] {
        let p = props(f, &[]);
        let got: Vec<f64> = [
            "readproportion",
            "updateproportion",
            "insertproportion",
            "scanproportion",
            "readmodifywriteproportion",
        ]
        .iter()
        .map(|k| p.get_f64(k, 0.0).unwrap())
        .collect();
        assert_eq!(got, mix, "{f}");
    }
    // Bad values are clear errors.
    let bad = props("workloada", &[("requestdistribution", "pareto")]);
    let e = ycsb::workload::CoreWorkload::new(&bad)
        .err()
        .unwrap()
        .to_string();
    assert!(e.contains("requestdistribution"), "{e}");
    let bad = props(
        "workloada",
        &[
            ("dataintegrity", "true"),
            ("fieldlengthdistribution", "uniform"),
        ],
    );
    assert!(ycsb::workload::CoreWorkload::new(&bad).is_err());
    // Zipfian constants: any positive one (1 or more is drawn exactly), nothing else.
    for ok in ["0.5", "0.99", "1", "1.5", "2"] {
        let p = props(
            "workloada",
            &[("requestdistribution", "zipfian"), ("zipfianconstant", ok)],
        );
        assert!(ycsb::workload::CoreWorkload::new(&p).is_ok(), "{ok}");
    }
    for bad in ["0", "-1", "NaN", "inf"] {
        let p = props(
            "workloada",
            &[("requestdistribution", "zipfian"), ("zipfianconstant", bad)],
        );
        let e = ycsb::workload::CoreWorkload::new(&p)
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default();
        assert!(e.contains("zipfianconstant"), "{bad}: {e}");
    }
}

#[test]
fn more_loops_than_operations_run_exactly_the_operations() {
    // 2 threads x 4 loops over 4 records and 3 operations: half the loops have nothing to
    // do, and must do nothing (not run without a limit).
    let db = MemoryBinding::new();
    let p = props(
        "workloada",
        &[
            ("recordcount", "4"),
            ("operationcount", "3"),
            ("threadcount", "2"),
            ("concurrency", "4"),
        ],
    );
    let load = run_phase(&db, &p, &opts(Phase::Load)).unwrap();
    assert_eq!(load.operations, 4);
    assert_eq!(returns(&load, "INSERT"), BTreeMap::from([("OK".into(), 4)]));
    assert_eq!(db.len("usertable"), 4);
    let run = run_phase(&db, &p, &opts(Phase::Run)).unwrap();
    assert_eq!(run.operations, 3);
    assert_eq!(db.len("usertable"), 4);
}

#[test]
fn every_standard_workload_with_dataintegrity() {
    for w in [
        "workloada",
        "workloadb",
        "workloadc",
        "workloadd",
        "workloade",
        "workloadf",
    ] {
        let db = MemoryBinding::new();
        let p = props(
            w,
            &[
                ("recordcount", "500"),
                ("operationcount", "3000"),
                ("dataintegrity", "true"),
                ("threadcount", "2"),
                ("concurrency", "3"),
                ("hdrhistogram.percentiles", "50,95,99,99.9"),
            ],
        );
        let load = run_phase(&db, &p, &opts(Phase::Load)).unwrap();
        assert_eq!(load.operations, 500, "{w}");
        assert_eq!(
            returns(&load, "INSERT"),
            BTreeMap::from([("OK".into(), 500)])
        );
        assert_eq!(db.len("usertable"), 500);
        let run = run_phase(&db, &p, &opts(Phase::Run)).unwrap();
        assert_eq!(run.operations, 3000, "{w}");
        let text = text_report(&run);
        check_grammar(&text, &["50th", "95th", "99th", "99.9"]);
        // No failed operation of any kind, and every read verified.
        for o in &run.ops {
            assert!(!o.name.ends_with("-FAILED"), "{w}: {text}");
            for (s, n) in &o.returns {
                assert_eq!(s, "OK", "{w}: {} had {n} {s}\n{text}", o.name);
            }
        }
        let reads = op(&run, "READ").map_or(0, |o| o.operations);
        if reads > 0 {
            assert_eq!(
                returns(&run, "VERIFY"),
                BTreeMap::from([("OK".into(), reads)]),
                "{w}"
            );
        }
        let total: u64 = ["READ", "UPDATE", "INSERT", "SCAN", "READ-MODIFY-WRITE"]
            .iter()
            .filter_map(|n| op(&run, n))
            .map(|o| o.operations)
            .sum();
        let rmw = op(&run, "READ-MODIFY-WRITE").map_or(0, |o| o.operations);
        // A read-modify-write counts once but also measures its READ and UPDATE.
        assert_eq!(total - 2 * rmw, 3000, "{w}");
        if w == "workloadd" {
            let inserts = op(&run, "INSERT").unwrap().operations;
            assert_eq!(db.len("usertable") as u64, 500 + inserts);
        }
    }
}

#[test]
fn dataintegrity_detects_corruption() {
    /// Memory, but every read returns a flipped byte.
    struct Corrupt(MemoryBinding);
    struct CorruptDb(Box<dyn Db>);
    impl Binding for Corrupt {
        fn name(&self) -> &str {
            "corrupt"
        }
        fn supports_scan(&self) -> bool {
            false
        }
        fn create(&self, p: &Properties, t: usize) -> Result<Box<dyn Db>, DbError> {
            Ok(Box::new(CorruptDb(self.0.create(p, t)?)))
        }
    }
    impl Db for CorruptDb {
        fn read<'a>(
            &'a self,
            t: &'a str,
            k: &'a str,
            f: Option<&'a [String]>,
        ) -> LocalBoxFuture<'a, (Status, Record)> {
            Box::pin(async move {
                let (s, mut r) = self.0.read(t, k, f).await;
                if let Some((_, v)) = r.first_mut() {
                    v[5] ^= 1;
                }
                (s, r)
            })
        }
        fn scan<'a>(
            &'a self,
            t: &'a str,
            k: &'a str,
            n: usize,
            f: Option<&'a [String]>,
        ) -> LocalBoxFuture<'a, (Status, Vec<(String, Record)>)> {
            self.0.scan(t, k, n, f)
        }
        fn update<'a>(
            &'a self,
            t: &'a str,
            k: &'a str,
            v: &'a Record,
        ) -> LocalBoxFuture<'a, Status> {
            self.0.update(t, k, v)
        }
        fn insert<'a>(
            &'a self,
            t: &'a str,
            k: &'a str,
            v: &'a Record,
        ) -> LocalBoxFuture<'a, Status> {
            self.0.insert(t, k, v)
        }
        fn delete<'a>(&'a self, t: &'a str, k: &'a str) -> LocalBoxFuture<'a, Status> {
            self.0.delete(t, k)
        }
        fn counters(&self) -> Option<ProtocolCounters> {
            Some(ProtocolCounters {
                round_trips: 2,
                rpcs: 0,
                bytes_sent: 100,
                bytes_received: 300,
                retries: 1,
                store_operations: 4,
                multi_round_trip_operations: 1,
            })
        }
    }
    let db = Corrupt(MemoryBinding::new());
    let p = props(
        "workloadc",
        &[
            ("recordcount", "50"),
            ("operationcount", "200"),
            ("dataintegrity", "true"),
            ("threadcount", "2"),
        ],
    );
    run_phase(&db, &p, &opts(Phase::Load)).unwrap();
    let run = run_phase(&db, &p, &opts(Phase::Run)).unwrap();
    assert_eq!(
        returns(&run, "VERIFY"),
        BTreeMap::from([("UNEXPECTED_STATE".into(), 200)])
    );
    // Protocol figures: the sum over both threads, per operation.
    let proto = run.protocol.as_ref().unwrap();
    assert_eq!(proto.totals.round_trips, 4);
    assert_eq!(proto.round_trips_per_op, 4.0 / 200.0);
    assert_eq!(proto.bytes_per_op, 800.0 / 200.0);
    // The share of the store's own operations that took more than one round trip.
    assert_eq!(proto.multi_round_trip_share, 2.0 / 8.0);
    let text = text_report(&run);
    assert!(
        text.contains("[PROTOCOL], MultiRoundTripShare, 0.25\n"),
        "{text}"
    );
    assert!(
        text.contains("[PROTOCOL], RoundTripsPerOp, 0.02\n"),
        "{text}"
    );
    check_grammar(&text, &["95th", "99th"]);
    // Workload E on a binding without ordered scans: a clear error.
    let e = run_phase(&db, &props("workloade", &[]), &opts(Phase::Run))
        .err()
        .unwrap()
        .to_string();
    assert!(e.contains("ordered scans") && e.contains("corrupt"), "{e}");
}

#[test]
fn failed_operations_measured_apart() {
    // Reading an empty store: READ-FAILED latencies, Return=NOT_FOUND, VERIFY errors.
    let db = MemoryBinding::new();
    let p = props(
        "workloadc",
        &[("operationcount", "100"), ("dataintegrity", "true")],
    );
    let run = run_phase(&db, &p, &opts(Phase::Run)).unwrap();
    assert_eq!(op(&run, "READ-FAILED").unwrap().operations, 100);
    assert!(op(&run, "READ").is_none_or(|o| o.operations == 0));
    assert_eq!(
        returns(&run, "READ"),
        BTreeMap::from([("NOT_FOUND".into(), 100)])
    );
    assert_eq!(
        returns(&run, "VERIFY"),
        BTreeMap::from([("ERROR".into(), 100)])
    );
}

#[test]
fn target_throttles_and_maxexecutiontime_stops() {
    let db = MemoryBinding::new();
    let p = props(
        "workloadc",
        &[
            ("recordcount", "100"),
            ("operationcount", "300"),
            ("target", "1000"),
            ("threadcount", "2"),
            ("concurrency", "2"),
        ],
    );
    run_phase(&db, &p, &opts(Phase::Load)).unwrap();
    let run = run_phase(&db, &p, &opts(Phase::Run)).unwrap();
    assert_eq!(run.operations, 300);
    assert!(
        run.runtime_ms >= 250,
        "300 ops at 1000/s took {} ms",
        run.runtime_ms
    );
    let mut p2 = p.clone();
    p2.set("operationcount", "0");
    p2.set("maxexecutiontime", "1");
    p2.set("target", "200");
    let run = run_phase(&db, &p2, &opts(Phase::Run)).unwrap();
    assert!(
        run.runtime_ms >= 1000 && run.runtime_ms < 5000,
        "{}",
        run.runtime_ms
    );
    assert!(
        run.operations > 50 && run.operations <= 260,
        "{}",
        run.operations
    );
}

#[test]
fn json_plots_and_binary() {
    let dir = tempdir();
    let json = dir.join("results.json");
    let bin = env!("CARGO_BIN_EXE_ycsb");
    for threads in ["1", "2"] {
        let out = std::process::Command::new(bin)
            .args(["loadrun", "memory", "-P"])
            .arg(workload("workloada"))
            .args([
                "-p",
                "operationcount=2000",
                "-threads",
                threads,
                "-s",
                "--json",
            ])
            .arg(&json)
            .args(["-p", "status.interval=0.05"])
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let stdout = String::from_utf8(out.stdout).unwrap();
        // Two reports: load then run.
        let run_report = &stdout[stdout.rfind("[OVERALL], RunTime").unwrap()..];
        check_grammar(run_report, &["95th", "99th"]);
        let stderr = String::from_utf8(out.stderr).unwrap();
        let status = stderr
            .lines()
            .find(|l| l.contains(" sec: ") && l.contains("[READ: Count="))
            .unwrap_or_else(|| panic!("no status line in {stderr}"));
        // 2026-01-01 00:00:00:000 N sec: N operations; ...
        assert_eq!(&status[4..5], "-");
        assert_eq!(&status[19..20], ":");
        assert!(status.contains(" operations; "), "{status}");
    }
    let runs = ycsb::plot::load_runs(std::slice::from_ref(&json)).unwrap();
    assert_eq!(runs.len(), 4);
    assert_eq!(runs[3].phase, "run");
    assert_eq!(runs[3].threads, 2);
    assert_eq!(runs[3].workload, "workloada");
    let out_dir = dir.join("plots");
    let out = std::process::Command::new(bin)
        .arg("plot")
        .arg(&json)
        .arg("--out")
        .arg(&out_dir)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    for f in [
        "throughput_vs_threads.svg",
        "latency_cdf_read.svg",
        "latency_cdf_update.svg",
    ] {
        let svg = std::fs::read_to_string(out_dir.join(f)).unwrap();
        assert!(svg.starts_with("<svg") && svg.contains("memory"), "{f}");
    }
    // Usage errors exit 2 with a message.
    let out = std::process::Command::new(bin)
        .args(["run", "nosuchdb"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("unknown binding"));
    let _ = std::fs::remove_dir_all(&dir);
}

fn tempdir() -> PathBuf {
    let d = std::env::temp_dir().join(format!(
        "ycsb-test-{}-{}",
        std::process::id(),
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_nanos()
    ));
    std::fs::create_dir_all(&d).unwrap();
    d
}
