//! What more copies cost: YCSB workloads A (50 % reads, 50 % updates) and C (reads
//! only) on Clover, RACE and in-place tables of one, two and three copies, in one
//! embedded cluster of three memory nodes over soft RoCE, taking turns so all see the
//! same machine.
//!
//! The workloads run through the `ycsb` crate's driver and `dmkv` binding; updates
//! replace the whole record (`dmkv.update=overwrite`), so an update is one `put` and its
//! cost is the cost of a write. Protocol figures are the binding's: round trips awaited
//! by operations (the sessions' operation statistics) and RoCE bytes both ways from the
//! sessions' transports (so they include background work such as shortcut advances).

use kvstore::{ClientOptions, TransportKind};
use testbed::EmbeddedOptions;
use ycsb::bindings::dmkv::{DmkvBinding, DmkvConfig};
use ycsb::client::{Phase, RunOptions, run_phase};
use ycsb::measure::RunReport;
use ycsb::props::Properties;

use crate::index::BenchIndex;
use crate::summary::Spread;

/// What the cost runs do.
#[derive(Clone, Debug)]
pub struct CostConfig {
    /// Records loaded into each table.
    pub records: u64,
    /// Operations per run.
    pub operations: u64,
    /// Driver threads (one session each).
    pub threads: usize,
    /// Operations in flight per thread.
    pub concurrency: usize,
    /// Key distribution: `uniform` or `zipfian`.
    pub distribution: String,
    /// Fields per record.
    pub field_count: u64,
    /// Bytes per field.
    pub field_length: u64,
    /// Runs of each (workload, copies) cell; the median by throughput is reported.
    pub repeat: usize,
    /// Bytes of memory per memory node.
    pub capacity: u64,
    /// Seed of the driver's generators.
    pub seed: u64,
}

/// One (workload, copies) cell: the median run by throughput.
#[derive(Clone, Debug, PartialEq)]
pub struct CostCell {
    /// The index of the table.
    pub index: BenchIndex,
    /// `A` or `C`.
    pub workload: &'static str,
    /// Copies of the table's data.
    pub replication: u32,
    /// Throughput of the median run.
    pub ops_per_sec: f64,
    /// Median read latency, µs.
    pub read_p50_us: f64,
    /// 99th percentile read latency, µs.
    pub read_p99_us: f64,
    /// Median update latency, µs (none in workload C).
    pub update_p50_us: Option<f64>,
    /// 99th percentile update latency, µs.
    pub update_p99_us: Option<f64>,
    /// Round trips awaited per operation.
    pub round_trips_per_op: f64,
    /// RoCE bytes both ways per operation.
    pub bytes_per_op: f64,
    /// Failed CASes, restarts, retransmissions and reconnects per operation.
    pub retries_per_op: f64,
    /// Operations that failed.
    pub failed: u64,
    /// Throughput of every run of the cell.
    pub throughput: Spread,
}

/// The copies of the tables measured, side by side in one cluster.
pub const COPIES: [u32; 3] = [1, 2, 3];

/// Memory nodes of the cost cluster: one per copy of the most replicated table.
pub const MEMNODES: usize = 3;

/// The workloads measured: name and read proportion.
const WORKLOADS: [(&str, f64); 2] = [("A", 0.5), ("C", 1.0)];

fn properties(
    config: &CostConfig,
    index: BenchIndex,
    replication: u32,
    read_proportion: f64,
) -> Properties {
    let mut p = Properties::new();
    let set = |p: &mut Properties, k: &str, v: String| p.set(k, v);
    set(&mut p, "recordcount", config.records.to_string());
    set(&mut p, "operationcount", config.operations.to_string());
    set(&mut p, "threadcount", config.threads.to_string());
    set(&mut p, "concurrency", config.concurrency.to_string());
    set(&mut p, "requestdistribution", config.distribution.clone());
    set(&mut p, "fieldcount", config.field_count.to_string());
    set(&mut p, "fieldlength", config.field_length.to_string());
    set(&mut p, "readallfields", "true".into());
    set(&mut p, "writeallfields", "true".into());
    set(&mut p, "readproportion", read_proportion.to_string());
    set(
        &mut p,
        "updateproportion",
        (1.0 - read_proportion).to_string(),
    );
    set(&mut p, "insertproportion", "0".into());
    set(&mut p, "scanproportion", "0".into());
    set(&mut p, "hdrhistogram.percentiles", "50,99".into());
    set(&mut p, "seed", config.seed.to_string());
    let table = match index {
        BenchIndex::Clover => format!("usertable_r{replication}"),
        other => format!("usertable_{other}_r{replication}"),
    };
    set(&mut p, "dmkv.table", table);
    index.set_ycsb(&mut p);
    set(&mut p, "dmkv.replication", replication.to_string());
    set(&mut p, "dmkv.update", "overwrite".into());
    set(&mut p, "dmkv.transport", "udp".into());
    p
}

fn quiet(phase: Phase) -> RunOptions {
    let mut o = RunOptions::new(phase);
    o.progress = false;
    o
}

/// Loads the tables of [`COPIES`] for every index of [`BenchIndex::ALL`] and runs
/// every (workload, index, copies) cell `config.repeat` times, alternating the
/// tables; the cells in the order A clover r=1, A clover r=2, A clover r=3, A race
/// r=1, …, C inplace r=3.
pub fn measure(config: &CostConfig) -> Result<Vec<CostCell>, String> {
    if !matches!(config.distribution.as_str(), "uniform" | "zipfian") {
        return Err(format!(
            "unknown key distribution {:?}: use uniform or zipfian",
            config.distribution
        ));
    }
    if config.records == 0 || config.operations == 0 {
        return Err("the cost runs need at least one record and one operation".into());
    }
    let client = testbed::embedded_client(EmbeddedOptions {
        memnodes: MEMNODES,
        capacity: config.capacity,
        transport: TransportKind::Udp,
        client: ClientOptions::with_transport(TransportKind::Udp).with_name("failover-bench"),
        prefault: false,
    })
    .map_err(|e| format!("starting the embedded cluster: {e}"))?;
    let mut bindings = Vec::new();
    for (index, r) in BenchIndex::ALL
        .into_iter()
        .flat_map(|i| COPIES.map(|r| (i, r)))
    {
        let p = properties(config, index, r, 0.5);
        let dmkv = DmkvConfig::from_props(&p).map_err(|e| e.to_string())?;
        let binding = DmkvBinding::with_client(client.clone(), dmkv).map_err(|e| e.to_string())?;
        let load = run_phase(&binding, &p, &quiet(Phase::Load))
            .map_err(|e| format!("loading the {index} table of {r} cop{}: {e}", plural(r)))?;
        let failed = load.failed_operations();
        if failed > 0 {
            return Err(format!(
                "loading the {index} table of {r} cop{}: {failed} inserts failed",
                plural(r)
            ));
        }
        bindings.push(((index, r), binding));
    }
    let mut cells = Vec::new();
    for (workload, reads) in WORKLOADS {
        let mut runs: Vec<Vec<RunReport>> = vec![Vec::new(); bindings.len()];
        for _ in 0..config.repeat.max(1) {
            for (i, ((index, r), binding)) in bindings.iter().enumerate() {
                let p = properties(config, *index, *r, reads);
                let report = run_phase(binding, &p, &quiet(Phase::Run)).map_err(|e| {
                    format!(
                        "workload {workload} on the {index} table of {r} cop{}: {e}",
                        plural(*r)
                    )
                })?;
                runs[i].push(report);
            }
        }
        for (((index, r), _), reports) in bindings.iter().zip(runs) {
            cells.push(cell(*index, workload, *r, reports)?);
        }
    }
    Ok(cells)
}

fn plural(r: u32) -> &'static str {
    if r == 1 { "y" } else { "ies" }
}

/// The cell of `reports` (runs of one workload on one table): the median by throughput.
fn cell(
    index: BenchIndex,
    workload: &'static str,
    replication: u32,
    mut reports: Vec<RunReport>,
) -> Result<CostCell, String> {
    let throughputs: Vec<f64> = reports.iter().map(|r| r.throughput).collect();
    let throughput = Spread::of(&throughputs)
        .ok_or_else(|| format!("workload {workload}: no run was measured"))?;
    reports.sort_by(|a, b| a.throughput.total_cmp(&b.throughput));
    let r = reports.swap_remove((reports.len() - 1) / 2);
    let proto = r
        .protocol
        .as_ref()
        .ok_or_else(|| "the dmkv binding reported no protocol counters".to_string())?;
    Ok(CostCell {
        index,
        workload,
        replication,
        ops_per_sec: r.throughput,
        read_p50_us: r.percentile_us("READ", 50.0).unwrap_or(0.0),
        read_p99_us: r.percentile_us("READ", 99.0).unwrap_or(0.0),
        update_p50_us: r.percentile_us("UPDATE", 50.0),
        update_p99_us: r.percentile_us("UPDATE", 99.0),
        round_trips_per_op: proto.round_trips_per_op,
        bytes_per_op: proto.bytes_per_op,
        retries_per_op: proto.retries_per_op,
        failed: r.failed_operations(),
        throughput,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config() -> CostConfig {
        CostConfig {
            records: 10,
            operations: 10,
            threads: 1,
            concurrency: 1,
            distribution: "zipfian".into(),
            field_count: 2,
            field_length: 8,
            repeat: 1,
            capacity: 4 << 20,
            seed: 1,
        }
    }

    #[test]
    fn properties_name_the_table_copies_and_mix() {
        let p = properties(&config(), BenchIndex::Clover, 2, 0.5);
        assert_eq!(p.get("dmkv.table"), Some("usertable_r2"));
        assert_eq!(p.get("dmkv.replication"), Some("2"));
        let p = properties(&config(), BenchIndex::Race, 2, 0.5);
        assert_eq!(p.get("dmkv.table"), Some("usertable_race_r2"));
        assert_eq!(p.get("dmkv.index"), Some("race"));
        let p = properties(&config(), BenchIndex::InPlace, 3, 0.5);
        assert_eq!(p.get("dmkv.table"), Some("usertable_inplace_r3"));
        let p = properties(&config(), BenchIndex::Clover, 3, 0.5);
        assert_eq!(p.get("dmkv.table"), Some("usertable_r3"));
        assert_eq!(p.get("dmkv.replication"), Some("3"));
        assert_eq!(p.get("readproportion"), Some("0.5"));
        assert_eq!(p.get("updateproportion"), Some("0.5"));
        let c = properties(&config(), BenchIndex::Clover, 1, 1.0);
        assert_eq!(c.get("updateproportion"), Some("0"));
        assert_eq!(c.get("hdrhistogram.percentiles"), Some("50,99"));
    }

    #[test]
    fn bad_distributions_are_refused() {
        let mut c = config();
        c.distribution = "latest".into();
        let e = measure(&c).unwrap_err();
        assert!(e.contains("unknown key distribution \"latest\""), "{e}");
    }
}
