//! Running the plan: an embedded cluster per RPC worker count, a client per access
//! mode and RPC transport (both are client settings), a table per index and record
//! count loaded once, and the cells run with the modes taking turns.

use std::collections::BTreeSet;
use std::time::Duration;

use kvstore::{AccessMode, AccessOptions, Client, ClientOptions, RpcTransport, TransportKind};
use testbed::cpu_time::{process_cpu, threads_cpu};
use testbed::{EmbeddedOptions, Security};
use ycsb::bindings::dmkv::{DmkvBinding, DmkvConfig};
use ycsb::client::{Phase, RunOptions, run_phase};
use ycsb::props::Properties;

use crate::cell::Cell;
use crate::plan::{ACCESSES, CellSpec, Experiment, INDEXES, Plan, access_label, read_proportion};

/// The memory node's thread names start with this.
const MEMNODE_THREADS: &str = "memnode-";

fn properties(plan: &Plan, index: &str, records: u64, threads: usize, w: &str) -> Properties {
    let mut p = Properties::new();
    let reads = read_proportion(w);
    for (k, v) in [
        ("recordcount", records.to_string()),
        ("operationcount", plan.operations.to_string()),
        ("threadcount", threads.to_string()),
        ("concurrency", plan.concurrency.to_string()),
        ("requestdistribution", plan.distribution.clone()),
        ("fieldcount", "1".into()),
        ("fieldlength", plan.value_bytes.to_string()),
        ("readallfields", "true".into()),
        ("writeallfields", "true".into()),
        ("readproportion", reads.to_string()),
        ("updateproportion", (1.0 - reads).to_string()),
        ("insertproportion", "0".into()),
        ("scanproportion", "0".into()),
        ("hdrhistogram.percentiles", "50,99".into()),
        ("seed", "7".into()),
        ("dmkv.table", format!("t_{index}_{records}")),
        ("dmkv.index", index.to_owned()),
        ("dmkv.update", "overwrite".into()),
        ("dmkv.transport", "udp".into()),
    ] {
        p.set(k, v);
    }
    p
}

fn quiet(phase: Phase) -> RunOptions {
    let mut o = RunOptions::new(phase);
    o.progress = false;
    o
}

/// One cluster: its clients by mode and transport, and the tables loaded so far.
struct Cluster {
    clients: Vec<((AccessMode, RpcTransport), Client)>,
    loaded: BTreeSet<(String, u64)>,
    workers: usize,
}

impl Cluster {
    fn start(plan: &Plan, workers: usize) -> Result<Cluster, String> {
        // Every client leases memory per table in chunks: room for all of them.
        let capacity = (plan.records * (plan.value_bytes + 512) * 8).max(1 << 30);
        let options = ClientOptions::with_transport(TransportKind::Udp).with_name("access-bench");
        let owner = testbed::embedded_client_with_rpc_workers(
            EmbeddedOptions {
                memnodes: 1,
                capacity,
                transport: TransportKind::Udp,
                client: options.clone(),
                prefault: false,
            },
            Security::Open,
            workers,
        )
        .map_err(|e| format!("starting a cluster with {workers} RPC workers: {e}"))?;
        let url = owner.metadata_url();
        let mut clients = vec![((AccessMode::OneSided, RpcTransport::Send), owner)];
        for (mode, transport) in ACCESSES {
            if mode == AccessMode::OneSided {
                continue;
            }
            let o = options.clone().with_access(
                AccessOptions::default()
                    .with_mode(mode)
                    .with_hybrid_k(plan.hybrid_k)
                    .with_transport(transport),
            );
            let c = Client::connect(&url, o)
                .map_err(|e| format!("a {} client: {e}", access_label(mode, transport)))?;
            clients.push(((mode, transport), c));
        }
        Ok(Cluster {
            clients,
            loaded: BTreeSet::new(),
            workers,
        })
    }

    fn client(&self, mode: AccessMode, transport: RpcTransport) -> Result<&Client, String> {
        self.clients
            .iter()
            .find(|(a, _)| *a == (mode, transport))
            .map(|(_, c)| c)
            .ok_or_else(|| format!("no {} client", access_label(mode, transport)))
    }

    /// Runs `spec` (loading its table first if needed).
    fn cell(&mut self, plan: &Plan, spec: CellSpec) -> Result<Cell, String> {
        let p = properties(plan, spec.index, spec.records, spec.threads, spec.workload);
        let config = DmkvConfig::from_props(&p).map_err(|e| e.to_string())?;
        let key = (spec.index.to_owned(), spec.records);
        if !self.loaded.contains(&key) {
            let loader = DmkvBinding::with_client(
                self.client(AccessMode::OneSided, RpcTransport::Send)?
                    .clone(),
                config.clone(),
            )
            .map_err(|e| e.to_string())?;
            run_phase(&loader, &p, &quiet(Phase::Load)).map_err(|e| {
                format!(
                    "loading {} records into a {} table: {e}",
                    spec.records, spec.index
                )
            })?;
            self.loaded.insert(key);
        }
        let binding =
            DmkvBinding::with_client(self.client(spec.mode, spec.transport)?.clone(), config)
                .map_err(|e| e.to_string())?;
        let m0 = threads_cpu(&[MEMNODE_THREADS]).unwrap_or_default();
        let p0 = process_cpu().unwrap_or_default();
        let report = run_phase(&binding, &p, &quiet(Phase::Run)).map_err(|e| {
            format!(
                "{} {} workload {} ({} records, {} threads, {} workers): {e}",
                spec.index,
                spec.access(),
                spec.workload,
                spec.records,
                spec.threads,
                self.workers
            )
        })?;
        let m1 = threads_cpu(&[MEMNODE_THREADS]).unwrap_or_default();
        let p1 = process_cpu().unwrap_or_default();
        let secs = |a: Duration, b: Duration| b.saturating_sub(a).as_secs_f64();
        Ok(Cell::of(spec, &report, secs(m0, m1), secs(p0, p1)))
    }
}

/// The cells of `plan` on the cluster with `workers` RPC workers.
fn specs(plan: &Plan, workers: usize) -> Vec<CellSpec> {
    let mut out = Vec::new();
    let mut add = |experiment, workload, records, threads| {
        for index in INDEXES {
            for (mode, transport) in ACCESSES {
                out.push(CellSpec {
                    experiment,
                    index,
                    mode,
                    transport,
                    workload,
                    records,
                    threads,
                    workers,
                });
            }
        }
    };
    let has = |e| plan.experiments.contains(&e);
    if workers == plan.workers {
        if has(Experiment::Workloads) {
            for w in ["A", "B", "C"] {
                add(Experiment::Workloads, w, plan.records, plan.threads);
            }
        }
        if has(Experiment::Contention) {
            for &r in &plan.record_counts {
                add(Experiment::Contention, "A", r, plan.threads);
            }
        }
        if has(Experiment::Threads) {
            for &t in &plan.thread_counts {
                add(Experiment::Threads, "C", plan.records, t);
            }
        }
    }
    if has(Experiment::Workers) && plan.worker_counts.contains(&workers) {
        add(Experiment::Workers, "C", plan.records, plan.threads);
    }
    out
}

/// Runs `plan`, telling `progress` about every cell.
pub fn run(plan: &Plan, mut progress: impl FnMut(&Cell)) -> Result<Vec<Cell>, String> {
    plan.check()?;
    let mut counts = vec![plan.workers];
    if plan.experiments.contains(&Experiment::Workers) {
        counts.extend(plan.worker_counts.iter().copied());
    }
    counts.sort_unstable();
    counts.dedup();
    let mut cells = Vec::new();
    for workers in counts {
        let specs = specs(plan, workers);
        if specs.is_empty() {
            continue;
        }
        let mut cluster = Cluster::start(plan, workers)?;
        for spec in specs {
            let cell = cluster.cell(plan, spec)?;
            progress(&cell);
            cells.push(cell);
        }
    }
    Ok(cells)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_sweep_has_every_mode_and_index() {
        let plan = Plan::standard();
        let main = specs(&plan, plan.workers);
        // 3 workloads + 4 record counts + 3 thread counts, and the worker sweep's one.
        let per_setting = INDEXES.len() * ACCESSES.len();
        assert_eq!(main.len(), (3 + 4 + 3 + 1) * per_setting);
        assert_eq!(specs(&plan, 4).len(), per_setting);
        assert!(specs(&plan, 3).is_empty());
        let p = properties(&plan, "race", 20, 2, "B");
        assert_eq!(p.get("dmkv.table"), Some("t_race_20"));
        assert_eq!(p.get("readproportion"), Some("0.95"));
    }
}
