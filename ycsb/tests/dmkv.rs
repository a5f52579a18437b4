//! The dmkv binding end to end on an embedded cluster (metadata service and memory node on
//! loopback, soft RoCE over udp): load and run YCSB's workloads with `dataintegrity=true` and no
//! failed operation, the record encoding through the `Db` interface, throttling on the session's
//! executor, workload E's clear refusal, and RACE tables (run when the client serves them, else
//! refused with the client's `Unsupported` error).

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::path::PathBuf;
use ycsb::bindings::dmkv::DmkvBinding;
use ycsb::client::{Phase, RunOptions, run_phase};
use ycsb::db::{Binding, Status};
use ycsb::measure::RunReport;
use ycsb::props::Properties;

fn props(file: &str, overrides: &[(&str, &str)]) -> Properties {
    let mut p = Properties::new();
    p.merge_file(
        PathBuf::from(env!("CARGO_MANIFEST_DIR"))
            .join("workloads")
            .join(file),
    )
    .unwrap();
    for (k, v) in overrides {
        p.set(*k, *v);
    }
    p
}

fn opts(phase: Phase) -> RunOptions {
    let mut o = RunOptions::new(phase);
    o.progress = false;
    o
}

fn returns(r: &RunReport, name: &str) -> BTreeMap<String, u64> {
    r.ops
        .iter()
        .find(|o| o.name == name)
        .map(|o| o.returns.iter().cloned().collect())
        .unwrap_or_default()
}

/// Every operation returned OK and every read verified.
fn assert_clean(r: &RunReport) {
    for o in &r.ops {
        assert!(!o.name.ends_with("-FAILED"), "{}: {:?}", o.name, o.returns);
        for (status, n) in &o.returns {
            assert_eq!(status, "OK", "{} returned {status} {n} times", o.name);
        }
    }
    let reads: u64 = returns(r, "READ").values().sum();
    if reads > 0 {
        assert_eq!(
            returns(r, "VERIFY"),
            BTreeMap::from([("OK".into(), reads)]),
            "every read verified"
        );
    }
}

const BASE: &[(&str, &str)] = &[
    ("recordcount", "300"),
    ("operationcount", "1500"),
    ("dataintegrity", "true"),
    ("threadcount", "2"),
    ("concurrency", "4"),
];

#[test]
fn load_and_run_with_data_integrity_on_the_embedded_cluster() {
    let p = props("workloada", BASE);
    let binding = DmkvBinding::new(&p).unwrap();
    assert_eq!(binding.name(), "dmkv-clover");
    assert!(!binding.supports_scan());
    let load = run_phase(&binding, &p, &opts(Phase::Load)).unwrap();
    assert_eq!(
        returns(&load, "INSERT"),
        BTreeMap::from([("OK".into(), 300)])
    );
    assert_clean(&load);
    // The same cluster and table for every workload of the process.
    for file in [
        "workloada",
        "workloadb",
        "workloadc",
        "workloadf",
        "workloadd",
    ] {
        let p = props(file, BASE);
        let run = run_phase(&binding, &p, &opts(Phase::Run)).unwrap();
        assert_eq!(run.operations, 1500, "{file}");
        assert_clean(&run);
        assert!(returns(&run, "VERIFY")["OK"] > 0, "{file}");
        let proto = run
            .protocol
            .as_ref()
            .expect("dmkv reports protocol counters");
        assert!(
            proto.round_trips_per_op >= 1.0 && proto.round_trips_per_op < 20.0,
            "{file}: {proto:?}"
        );
        assert!(proto.bytes_per_op > 1000.0, "{file}: {proto:?}");
        if file == "workloadf" {
            assert!(run.ops.iter().any(|o| o.name == "READ-MODIFY-WRITE"));
        }
    }
}

#[test]
fn dmkv_switch_true_runs_through_an_in_process_soft_switch() {
    let mut base = BASE.to_vec();
    base.push(("dmkv.switch", "true"));
    let p = props("workloada", &base);
    let binding = DmkvBinding::new(&p).unwrap();
    let switch = binding
        .switch()
        .expect("dmkv.switch=true starts a switch")
        .clone();
    let load = run_phase(&binding, &p, &opts(Phase::Load)).unwrap();
    assert_clean(&load);
    let run = run_phase(&binding, &p, &opts(Phase::Run)).unwrap();
    assert_eq!(run.operations, 1500);
    assert_clean(&run);
    let c = switch.control().pipeline().counters();
    assert!(c.forward.forwarded > 3000, "{c:?}");
    assert_eq!(c.forward.bad_icrc, 0, "{c:?}");
}

#[test]
fn race_tables_run_or_are_refused_clearly() {
    let p = props(
        "workloadb",
        &[
            ("recordcount", "200"),
            ("operationcount", "800"),
            ("dataintegrity", "true"),
            ("concurrency", "4"),
            ("dmkv.index", "race"),
        ],
    );
    let binding = DmkvBinding::new(&p).unwrap();
    assert_eq!(binding.name(), "dmkv-race");
    match binding.check() {
        Ok(()) => {
            let load = run_phase(&binding, &p, &opts(Phase::Load)).unwrap();
            assert_clean(&load);
            let run = run_phase(&binding, &p, &opts(Phase::Run)).unwrap();
            assert_eq!(run.operations, 800);
            assert_clean(&run);
        }
        Err(kvstore::KvError::Unsupported(why)) => {
            let e = run_phase(&binding, &p, &opts(Phase::Load))
                .expect_err("a race table the client does not serve cannot be loaded")
                .to_string();
            assert!(e.contains("unsupported") && e.contains(&why), "{e}");
            assert!(e.contains("usertable"), "names the table: {e}");
        }
        Err(e) => panic!("unexpected error opening a race table: {e}"),
    }
}

/// In-place tables with a latch scheme: load and run with every read verified, for a
/// pessimistic and an optimistic scheme.
#[test]
fn inplace_tables_run_with_data_integrity() {
    for latch in ["pessimistic-rw-async-embedded", "versioning"] {
        let p = props(
            "workloada",
            &[
                ("recordcount", "300"),
                ("operationcount", "1200"),
                ("dataintegrity", "true"),
                ("concurrency", "4"),
                ("dmkv.transport", "local"),
                ("dmkv.index", "inplace"),
                ("dmkv.latch", latch),
            ],
        );
        let binding = DmkvBinding::new(&p).unwrap();
        assert_eq!(binding.name(), "dmkv-inplace");
        let load = run_phase(&binding, &p, &opts(Phase::Load)).unwrap();
        assert_clean(&load);
        let run = run_phase(&binding, &p, &opts(Phase::Run)).unwrap();
        assert_eq!(run.operations, 1200, "{latch}");
        assert_clean(&run);
        let t = binding.client().table("usertable").unwrap();
        let info = t.layout.in_place().expect("an in-place table");
        assert_eq!(info.scheme, latch);
        assert_eq!(info.capacity, 2000, "twice the records, at least 1000 each");
    }
}

#[test]
fn workload_e_is_refused_with_a_clear_error() {
    let p = props(
        "workloade",
        &[("recordcount", "10"), ("dmkv.transport", "local")],
    );
    let binding = DmkvBinding::new(&p).unwrap();
    let e = run_phase(&binding, &p, &opts(Phase::Run))
        .expect_err("workload E needs ordered scans")
        .to_string();
    assert!(e.contains("dmkv-clover"), "{e}");
    assert!(
        e.contains("hash index") && e.contains("ordered scans"),
        "{e}"
    );
    assert!(e.contains("scanproportion=0"), "says what to do: {e}");
}

#[test]
fn bad_properties_are_refused_before_anything_starts() {
    for (k, v, says) in [
        ("dmkv.index", "btree", "choose clover, race or inplace"),
        ("dmkv.latch", "versioning", "dmkv.index=inplace"),
        ("dmkv.transport", "infiniband", "choose local, shm, udp"),
        (
            "dmkv.metadata",
            "127.0.0.1:1",
            "cannot reach the cluster at 127.0.0.1:1",
        ),
    ] {
        let e = DmkvBinding::new(&props("workloada", &[(k, v)]))
            .err()
            .unwrap()
            .to_string();
        assert!(e.contains(says), "{k}={v}: {e}");
    }
    // A table that exists with the other index is not silently reused.
    let p = props("workloada", &[("dmkv.transport", "local")]);
    let b = DmkvBinding::new(&p).unwrap();
    let mut config = b.config().clone();
    config.index = Some(kvstore::IndexKind::Race);
    let e = DmkvBinding::with_client(b.client().clone(), config)
        .err()
        .unwrap()
        .to_string();
    assert!(e.contains("exists with the clover index"), "{e}");
}

#[test]
fn records_through_the_db_interface() {
    for mode in ["merge", "overwrite"] {
        let p = props(
            "workloada",
            &[("dmkv.transport", "local"), ("dmkv.update", mode)],
        );
        let binding = DmkvBinding::new(&p).unwrap();
        let db = binding.create(&p, 0).unwrap();
        let seen = RefCell::new(Vec::new());
        db.run(Box::pin(async {
            let rec = vec![
                ("a".to_string(), b"1".to_vec()),
                ("b".to_string(), vec![0u8, 255, 7]),
            ];
            let mut o = Vec::new();
            o.push(db.insert("usertable", "k", &rec).await);
            o.push(db.insert("usertable", "k", &rec).await);
            let (s, r) = db.read("usertable", "k", None).await;
            o.push(s);
            assert_eq!(r, rec);
            let b = ["b".to_string(), "zz".to_string()];
            let (s, r) = db.read("usertable", "k", Some(&b)).await;
            o.push(s);
            assert_eq!(r, vec![("b".to_string(), vec![0u8, 255, 7])]);
            let upd = vec![("b".to_string(), b"new".to_vec())];
            o.push(db.update("usertable", "k", &upd).await);
            let (s, r) = db.read("usertable", "k", None).await;
            o.push(s);
            if mode == "merge" {
                assert_eq!(
                    r,
                    vec![
                        ("a".to_string(), b"1".to_vec()),
                        ("b".to_string(), b"new".to_vec())
                    ]
                );
            } else {
                assert_eq!(r, upd);
            }
            o.push(db.update("usertable", "absent", &upd).await);
            o.push(db.delete("usertable", "k").await);
            o.push(db.read("usertable", "k", None).await.0);
            o.push(db.delete("usertable", "k").await);
            o.push(db.scan("usertable", "k", 10, None).await.0);
            *seen.borrow_mut() = o;
        }));
        assert_eq!(
            seen.into_inner(),
            [
                Status::Ok,
                Status::Error, // insert of a present key
                Status::Ok,
                Status::Ok,
                Status::Ok,
                Status::Ok,
                Status::NotFound,
                Status::Ok,
                Status::NotFound,
                Status::NotFound,
                Status::NotImplemented,
            ],
            "{mode}"
        );
        let c = db.counters().unwrap();
        assert!(c.round_trips > 0 && c.bytes_sent > 0 && c.bytes_received > 0);
    }
}

#[test]
fn throttled_runs_wake_on_time_on_the_session_executor() {
    let p = props(
        "workloadc",
        &[
            ("recordcount", "50"),
            ("operationcount", "200"),
            ("target", "200"),
            ("concurrency", "2"),
        ],
    );
    let binding = DmkvBinding::new(&p).unwrap();
    run_phase(&binding, &p, &opts(Phase::Load)).unwrap();
    let run = run_phase(&binding, &p, &opts(Phase::Run)).unwrap();
    assert_eq!(run.operations, 200);
    assert!(
        run.runtime_ms >= 900 && run.runtime_ms < 5000,
        "200 operations at 200/s took {} ms",
        run.runtime_ms
    );
}

#[test]
fn the_binary_runs_dmkv_with_protocol_figures() {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_ycsb"))
        .args(["loadrun", "dmkv", "-P", "workloads/workloadb"])
        .args(["-p", "recordcount=200", "-p", "operationcount=600"])
        .args([
            "-p",
            "dataintegrity=true",
            "-concurrency",
            "4",
            "--no-progress",
        ])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(stderr.contains("embedded cluster"), "{stderr}");
    let stdout = String::from_utf8(out.stdout).unwrap();
    let run = &stdout[stdout.rfind("[OVERALL], RunTime").unwrap()..];
    for line in [
        "[PROTOCOL], RoundTripsPerOp, ",
        "[PROTOCOL], BytesPerOp, ",
        "[VERIFY], Return=OK, ",
        "[READ], Return=OK, ",
    ] {
        assert!(run.contains(line), "{line} in {run}");
    }
    assert!(
        !run.contains("FAILED") && !run.contains("UNEXPECTED"),
        "{run}"
    );
    // Workload E is refused by the binary too, with the reason.
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_ycsb"))
        .args(["run", "dmkv", "-P", "workloads/workloade", "--no-progress"])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("ordered scans"), "{stderr}");
}

/// `dmkv.access` on a RACE table: `rpc` takes about one RPC per operation, `one-sided`
/// none; every mode keeps data integrity.
#[test]
fn access_modes_report_rpcs_per_operation() {
    for (mode, transport, rpc) in [
        ("rpc", "send", true),
        ("rpc", "write", true),
        ("hybrid", "send", false),
        ("one-sided", "send", false),
    ] {
        let mut over = BASE.to_vec();
        over.extend([
            ("dmkv.index", "race"),
            ("dmkv.access", mode),
            ("dmkv.rpc.transport", transport),
            // One table operation per YCSB operation.
            ("dmkv.update", "overwrite"),
            ("recordcount", "100"),
            ("operationcount", "400"),
        ]);
        let p = props("workloada", &over);
        let binding = DmkvBinding::new(&p).unwrap();
        let load = run_phase(&binding, &p, &opts(Phase::Load)).unwrap();
        assert_clean(&load);
        let run = run_phase(&binding, &p, &opts(Phase::Run)).unwrap();
        assert_clean(&run);
        let proto = run.protocol.as_ref().expect("protocol counters");
        println!("{mode} by {transport}: {proto:?}");
        assert_eq!(proto.totals.store_operations, 400, "{mode}: {proto:?}");
        if rpc {
            assert!(
                proto.rpcs_per_op >= 0.95 && proto.rpcs_per_op <= 1.1,
                "{mode}: {proto:?}"
            );
            // One RPC each: hardly any operation takes a second round trip.
            assert!(proto.multi_round_trip_share < 0.1, "{mode}: {proto:?}");
        } else if mode == "one-sided" {
            assert_eq!(proto.totals.rpcs, 0, "{mode}: {proto:?}");
            // Every operation is at least one round trip of its own verbs (an update
            // of a key whose slot the client saw moments ago is one, others two or
            // three: how many is a matter of timing here).
            assert!(
                proto.totals.round_trips >= proto.totals.store_operations,
                "{mode}: {proto:?}"
            );
        }
    }
    let bad = props("workloada", &[("dmkv.access", "two-sided")]);
    let e = DmkvBinding::new(&bad).expect_err("bad mode");
    assert!(e.to_string().contains("dmkv.access"), "{e}");
    let bad = props("workloada", &[("dmkv.rpc.transport", "rdma")]);
    let e = DmkvBinding::new(&bad).expect_err("bad transport");
    assert!(e.to_string().contains("dmkv.rpc.transport"), "{e}");
}
