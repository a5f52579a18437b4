//! What the program measures: the experiments and their cells' settings.

use kvstore::{AccessMode, RpcTransport};
use serde::Serialize;

/// The access modes with the RPC transports they are measured with, in the order the
/// tables show them (one-sided access sends no RPC, so it has one transport).
pub const ACCESSES: [(AccessMode, RpcTransport); 5] = [
    (AccessMode::OneSided, RpcTransport::Send),
    (AccessMode::Rpc, RpcTransport::Send),
    (AccessMode::Rpc, RpcTransport::Write),
    (AccessMode::Hybrid, RpcTransport::Send),
    (AccessMode::Hybrid, RpcTransport::Write),
];

/// How tables name an access mode with its RPC transport: the mode alone for SEND
/// (and one-sided), `mode/write` for write-based RPC.
pub fn access_label(mode: AccessMode, transport: RpcTransport) -> String {
    match (mode, transport) {
        (AccessMode::OneSided, _) | (_, RpcTransport::Send) => mode.name().to_owned(),
        (_, RpcTransport::Write) => format!("{}/write", mode.name()),
    }
}

/// The indexes measured (in-place tables with the binding's default scheme,
/// `pessimistic-rw-async-embedded`, which the memory node's workers execute).
pub const INDEXES: [&str; 3] = ["clover", "race", "inplace"];

/// Which sweep a cell belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Experiment {
    /// YCSB A, B and C per mode and index.
    Workloads,
    /// Workload A over fewer and fewer records: more contention, longer chains.
    Contention,
    /// Workload C over client thread counts.
    Threads,
    /// Workload C over the memory node's RPC worker counts.
    Workers,
}

impl Experiment {
    /// Its name in tables and JSON.
    pub fn name(self) -> &'static str {
        match self {
            Experiment::Workloads => "workloads",
            Experiment::Contention => "contention",
            Experiment::Threads => "threads",
            Experiment::Workers => "workers",
        }
    }
}

/// The settings of the run.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Plan {
    /// Records loaded into each table (the contention sweep divides it).
    pub records: u64,
    /// Operations per cell.
    pub operations: u64,
    /// Driver threads, except in the thread sweep.
    pub threads: usize,
    /// Operations in flight per thread.
    pub concurrency: usize,
    /// Key distribution.
    pub distribution: String,
    /// RPC workers per memory node, except in the worker sweep.
    pub workers: usize,
    /// The thread counts of the thread sweep.
    pub thread_counts: Vec<usize>,
    /// The worker counts of the worker sweep.
    pub worker_counts: Vec<usize>,
    /// The record counts of the contention sweep.
    pub record_counts: Vec<u64>,
    /// Hybrid's round-trip budget before it turns to an RPC.
    pub hybrid_k: u32,
    /// Bytes per value (one field).
    pub value_bytes: u64,
    /// Which experiments to run.
    pub experiments: Vec<Experiment>,
}

impl Plan {
    /// The default plan: about a minute and a half on a 2-vCPU machine.
    pub fn standard() -> Plan {
        Plan {
            records: 2000,
            operations: 6000,
            threads: 2,
            concurrency: 4,
            distribution: "zipfian".into(),
            workers: 2,
            thread_counts: vec![1, 2, 4],
            worker_counts: vec![1, 2, 4],
            record_counts: vec![2000, 200, 20, 4],
            hybrid_k: 2,
            value_bytes: 100,
            experiments: vec![
                Experiment::Workloads,
                Experiment::Contention,
                Experiment::Threads,
                Experiment::Workers,
            ],
        }
    }

    /// Checks the settings.
    pub fn check(&self) -> Result<(), String> {
        if self.records == 0 || self.operations == 0 || self.threads == 0 {
            return Err("records, operations and threads must be at least 1".into());
        }
        if self.concurrency == 0 || self.workers == 0 {
            return Err("concurrency and workers must be at least 1".into());
        }
        if !matches!(self.distribution.as_str(), "uniform" | "zipfian") {
            return Err(format!(
                "unknown key distribution {:?}: use uniform or zipfian",
                self.distribution
            ));
        }
        if self.thread_counts.contains(&0)
            || self.worker_counts.contains(&0)
            || self.record_counts.contains(&0)
        {
            return Err("sweep values must be at least 1".into());
        }
        if self.experiments.is_empty() {
            return Err("no experiment to run".into());
        }
        Ok(())
    }
}

/// The settings of one cell.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CellSpec {
    /// The sweep.
    pub experiment: Experiment,
    /// `clover` or `race`.
    pub index: &'static str,
    /// The access mode.
    #[serde(serialize_with = "mode_name")]
    pub mode: AccessMode,
    /// How its RPC requests travel.
    #[serde(serialize_with = "transport_name")]
    pub transport: RpcTransport,
    /// `A`, `B` or `C`.
    pub workload: &'static str,
    /// Records in the table.
    pub records: u64,
    /// Driver threads.
    pub threads: usize,
    /// RPC workers per memory node.
    pub workers: usize,
}

fn mode_name<S: serde::Serializer>(m: &AccessMode, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(m.name())
}

fn transport_name<S: serde::Serializer>(t: &RpcTransport, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(t.name())
}

impl CellSpec {
    /// Its access mode and transport as the tables name them.
    pub fn access(&self) -> String {
        access_label(self.mode, self.transport)
    }
}

/// YCSB's read proportion of workload `w` (the rest are updates).
pub fn read_proportion(w: &str) -> f64 {
    match w {
        "A" => 0.5,
        "B" => 0.95,
        _ => 1.0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_standard_plan_is_valid_and_bad_ones_say_why() {
        assert_eq!(Plan::standard().check(), Ok(()));
        let mut p = Plan::standard();
        p.distribution = "latest".into();
        assert!(p.check().unwrap_err().contains("latest"));
        let mut p = Plan::standard();
        p.worker_counts = vec![0];
        assert!(p.check().is_err());
        assert_eq!(read_proportion("B"), 0.95);
        assert_eq!(access_label(AccessMode::Rpc, RpcTransport::Send), "rpc");
        assert_eq!(
            access_label(AccessMode::Rpc, RpcTransport::Write),
            "rpc/write"
        );
        assert_eq!(
            access_label(AccessMode::OneSided, RpcTransport::Write),
            "one-sided"
        );
    }
}
