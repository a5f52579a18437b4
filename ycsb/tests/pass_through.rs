//! `ycsb switch` at a tiny scale: the direct path and the in-process switch run every
//! round, the switch counts its packets in the pipeline histogram, and a missing
//! `accel-p4` binary leaves that path out with the reason.

use std::path::PathBuf;

use ycsb::pass_through::{PassThroughArgs, run};

#[test]
fn direct_and_in_process_switch_run_every_round() {
    let args = PassThroughArgs {
        overrides: vec![
            ("recordcount".into(), "50".into()),
            ("operationcount".into(), "300".into()),
        ],
        rounds: 2,
        accel_p4: Some(PathBuf::from("/nonexistent/accel-p4")),
        progress: Some(false),
        ..PassThroughArgs::default()
    };
    let pt = run(&args).expect("the measurement runs");
    assert_eq!(pt.paths.len(), 3);
    for path in &pt.paths[..2] {
        assert!(
            path.unavailable.is_none(),
            "{}: {:?}",
            path.name,
            path.unavailable
        );
        assert_eq!(path.runs.len(), 2, "{}", path.name);
        assert!(path.runs.iter().all(|r| r.operations == 300));
    }
    let process = &pt.paths[2];
    assert_eq!(process.name, "switch process");
    assert!(
        process
            .unavailable
            .as_deref()
            .is_some_and(|why| why.contains("cannot start")),
        "{:?}",
        process.unavailable
    );
    assert!(pt.ratio_to_direct(1).is_some_and(|r| r > 0.0));
    // Two rounds of 300 reads: at least a request and a response each.
    assert!(pt.pipeline_sum.1 >= 1200, "{:?}", pt.pipeline_sum);
    assert_eq!(
        pt.pipeline_buckets.iter().map(|(_, n)| n).sum::<u64>(),
        pt.pipeline_sum.1
    );
    let report = pt.report();
    assert!(report.contains("switch in process"), "{report}");
    assert!(report.contains("≤ 100 ns"), "{report}");
    assert!(report.contains("not run: cannot start"), "{report}");
}
