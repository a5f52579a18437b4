//! Repeated runs folded into one cell per setting: the median of every figure over the
//! repetitions, with the lowest and highest throughput beside it (this machine is
//! shared and noisy; one run says little on its own).

use crate::cell::Cell;
pub use testbed::median::median;

/// One cell per setting out of `runs` (each a full pass over the plan, in the same
/// order): medians of the figures, the throughput's range, failures summed.
pub fn fold(runs: &[Vec<Cell>]) -> Vec<Cell> {
    let Some(first) = runs.first() else {
        return Vec::new();
    };
    first
        .iter()
        .map(|c| {
            let same: Vec<&Cell> = runs
                .iter()
                .filter_map(|r| r.iter().find(|o| o.spec == c.spec))
                .collect();
            let m = |f: fn(&Cell) -> f64| median(same.iter().map(|c| f(c)).collect());
            let ops: Vec<f64> = same.iter().map(|c| c.ops_per_sec).collect();
            let updates: Vec<f64> = same.iter().filter_map(|c| c.update_p99_us).collect();
            Cell {
                spec: c.spec.clone(),
                ops_per_sec: median(ops.clone()),
                ops_per_sec_min: ops.iter().copied().fold(f64::INFINITY, f64::min),
                ops_per_sec_max: ops.iter().copied().fold(0.0, f64::max),
                repetitions: same.len(),
                read_p50_us: m(|c| c.read_p50_us),
                read_p99_us: m(|c| c.read_p99_us),
                update_p99_us: (!updates.is_empty()).then(|| median(updates)),
                round_trips_per_op: m(|c| c.round_trips_per_op),
                rpcs_per_op: m(|c| c.rpcs_per_op),
                multi_round_trip_share: m(|c| c.multi_round_trip_share),
                memnode_cpu_us_per_op: m(|c| c.memnode_cpu_us_per_op),
                client_cpu_us_per_op: m(|c| c.client_cpu_us_per_op),
                failed: same.iter().map(|c| c.failed).sum(),
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::{CellSpec, Experiment};
    use kvstore::AccessMode;

    fn cell(records: u64, ops: f64, failed: u64) -> Cell {
        let spec = CellSpec {
            experiment: Experiment::Contention,
            index: "clover",
            mode: AccessMode::OneSided,
            transport: kvstore::RpcTransport::Send,
            workload: "A",
            records,
            threads: 1,
            workers: 1,
        };
        let mut c = Cell::single(spec, ops);
        c.failed = failed;
        c.update_p99_us = Some(ops);
        c
    }

    #[test]
    fn medians_per_setting_with_the_range() {
        let runs = vec![
            vec![cell(4, 100.0, 0), cell(20, 10.0, 1)],
            vec![cell(4, 300.0, 0), cell(20, 30.0, 0)],
            vec![cell(4, 200.0, 2), cell(20, 20.0, 0)],
        ];
        let folded = fold(&runs);
        assert_eq!(folded.len(), 2);
        assert_eq!(folded[0].spec.records, 4);
        assert_eq!(folded[0].ops_per_sec, 200.0);
        assert_eq!(
            (folded[0].ops_per_sec_min, folded[0].ops_per_sec_max),
            (100.0, 300.0)
        );
        assert_eq!(folded[0].repetitions, 3);
        assert_eq!(folded[0].failed, 2);
        assert_eq!(folded[1].ops_per_sec, 20.0);
        assert_eq!(folded[1].update_p99_us, Some(20.0));
        assert_eq!(folded[1].failed, 1);
    }
}
