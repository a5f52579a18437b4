//! One measured cell: a YCSB run phase with its protocol figures and the CPU it cost.

use serde::Serialize;
use ycsb::measure::RunReport;

use crate::plan::CellSpec;

/// What one cell measured.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Cell {
    /// Its settings.
    #[serde(flatten)]
    pub spec: CellSpec,
    /// Operations per second (the median over the repetitions).
    pub ops_per_sec: f64,
    /// The lowest throughput of the repetitions.
    pub ops_per_sec_min: f64,
    /// The highest.
    pub ops_per_sec_max: f64,
    /// Runs folded into this cell.
    pub repetitions: usize,
    /// READ latency percentiles, µs.
    pub read_p50_us: f64,
    /// …
    pub read_p99_us: f64,
    /// UPDATE 99th percentile, µs (none in workload C).
    pub update_p99_us: Option<f64>,
    /// Round trips awaited per operation.
    pub round_trips_per_op: f64,
    /// RPCs to the memory node's workers per operation.
    pub rpcs_per_op: f64,
    /// Share of the store's operations that took more than one round trip (an RPC
    /// counts as one): on one-sided cells, how often the one-sided path cannot
    /// finish at once.
    pub multi_round_trip_share: f64,
    /// CPU µs per operation of the memory node's threads (data plane and workers).
    pub memnode_cpu_us_per_op: f64,
    /// CPU µs per operation of the rest of the process (the clients, the metadata
    /// service).
    pub client_cpu_us_per_op: f64,
    /// Operations that failed.
    pub failed: u64,
}

impl Cell {
    /// The cell of `spec` from its run's report and the CPU seconds the memory node
    /// and the whole process spent during it.
    pub fn of(spec: CellSpec, r: &RunReport, memnode_cpu: f64, process_cpu: f64) -> Cell {
        let ops = r.operations.max(1) as f64;
        let (rtt, rpcs, multi) = r.protocol.as_ref().map_or((0.0, 0.0, 0.0), |p| {
            (
                p.round_trips_per_op,
                p.rpcs_per_op,
                p.multi_round_trip_share,
            )
        });
        Cell {
            spec,
            ops_per_sec: r.throughput,
            ops_per_sec_min: r.throughput,
            ops_per_sec_max: r.throughput,
            repetitions: 1,
            read_p50_us: r.percentile_us("READ", 50.0).unwrap_or(0.0),
            read_p99_us: r.percentile_us("READ", 99.0).unwrap_or(0.0),
            update_p99_us: r.percentile_us("UPDATE", 99.0),
            round_trips_per_op: rtt,
            rpcs_per_op: rpcs,
            multi_round_trip_share: multi,
            memnode_cpu_us_per_op: memnode_cpu * 1e6 / ops,
            client_cpu_us_per_op: (process_cpu - memnode_cpu).max(0.0) * 1e6 / ops,
            failed: r.failed_operations(),
        }
    }
}

#[cfg(test)]
impl Cell {
    /// A cell of `spec` measuring `ops` operations per second and nothing else.
    pub(crate) fn single(spec: CellSpec, ops: f64) -> Cell {
        Cell {
            spec,
            ops_per_sec: ops,
            ops_per_sec_min: ops,
            ops_per_sec_max: ops,
            repetitions: 1,
            read_p50_us: 0.0,
            read_p99_us: 0.0,
            update_p99_us: None,
            round_trips_per_op: 0.0,
            rpcs_per_op: 0.0,
            multi_round_trip_share: 0.0,
            memnode_cpu_us_per_op: 0.0,
            client_cpu_us_per_op: 0.0,
            failed: 0,
        }
    }
}
