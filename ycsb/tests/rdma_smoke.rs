//! YCSB over the `rdma` transport: an embedded cluster whose memory node and sessions
//! use an RDMA device loads and runs workload A with `dataintegrity=true` and no failed
//! operation. Without a device (or without the `rdma` feature: `cargo test -p ycsb
//! --features rdma`) it prints `SKIPPED: …`; `DMKV_REQUIRE_RDMA=1` fails instead.

use std::path::PathBuf;

use ycsb::bindings::dmkv::DmkvBinding;
use ycsb::client::{Phase, RunOptions, run_phase};
use ycsb::measure::RunReport;
use ycsb::props::Properties;

fn props() -> Properties {
    let mut p = Properties::new();
    p.merge_file(
        PathBuf::from(env!("CARGO_MANIFEST_DIR"))
            .join("workloads")
            .join("workloada"),
    )
    .unwrap();
    for (k, v) in [
        ("recordcount", "200"),
        ("operationcount", "1000"),
        ("dataintegrity", "true"),
        ("threadcount", "2"),
        ("concurrency", "4"),
        ("dmkv.transport", "rdma"),
    ] {
        p.set(k, v);
    }
    p
}

fn phase(phase: Phase) -> RunOptions {
    let mut o = RunOptions::new(phase);
    o.progress = false;
    o
}

fn assert_clean(r: &RunReport) {
    for o in &r.ops {
        assert!(!o.name.ends_with("-FAILED"), "{}: {:?}", o.name, o.returns);
        for (status, n) in &o.returns {
            assert_eq!(status, "OK", "{} returned {status} {n} times", o.name);
        }
    }
}

#[test]
fn workload_a_runs_clean_over_rdma() {
    if !testbed::rdma::ready("workload_a_runs_clean_over_rdma") {
        return;
    }
    let p = props();
    let binding = DmkvBinding::new(&p).unwrap();
    let load = run_phase(&binding, &p, &phase(Phase::Load)).unwrap();
    assert_clean(&load);
    let run = run_phase(&binding, &p, &phase(Phase::Run)).unwrap();
    assert_eq!(run.operations, 1000);
    assert_clean(&run);
}
