//! The copy experiment: two memory nodes and a soft switch in processes of their own,
//! the same copies driven by the switch and by a client's CPU, interleaved per item
//! size and repetition, each checked byte for byte afterwards.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use serde::Serialize;

use crate::child::Component;
use crate::cpu_driven::{Client, Place};
use crate::switch_driven;
use testbed::cpu_time::{pid_cpu, thread_cpu};

/// Who moves the bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Engine {
    /// The soft switch: READ responses turned into WRITEs.
    Switch,
    /// A client: READ into its memory, WRITE out of it.
    Cpu,
}

impl Engine {
    /// Its name in tables.
    pub fn name(self) -> &'static str {
        match self {
            Engine::Switch => "switch",
            Engine::Cpu => "cpu",
        }
    }
}

/// What to run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CopyPlan {
    /// Item sizes (bytes per READ and WRITE).
    pub items: Vec<u32>,
    /// Bytes copied per cell.
    pub bytes: u64,
    /// READs in flight.
    pub window: u32,
    /// Repetitions of every cell.
    pub repeat: usize,
    /// This program, started again for the components.
    pub program: PathBuf,
}

/// One measured copy.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CopyCell {
    /// Who moved the bytes.
    pub engine: Engine,
    /// Bytes per READ and WRITE.
    pub item: u32,
    /// Bytes copied.
    pub bytes: u64,
    /// Repetition.
    pub round: usize,
    /// Wall time.
    pub seconds: f64,
    /// CPU seconds of the source memory node's process.
    pub source_cpu: f64,
    /// CPU seconds of the target memory node's process.
    pub target_cpu: f64,
    /// CPU seconds of the switch's process.
    pub switch_cpu: f64,
    /// CPU seconds of the client's thread (the copier, or the one asking and polling).
    pub client_cpu: f64,
    /// READs the switch issued and re-issued (0 for the CPU copy).
    pub switch_reads: u64,
    /// Of which re-issued.
    pub switch_rereads: u64,
}

impl CopyCell {
    /// MB/s (10^6 bytes).
    pub fn mb_per_s(&self) -> f64 {
        if self.seconds > 0.0 {
            self.bytes as f64 / self.seconds / 1e6
        } else {
            0.0
        }
    }

    /// CPU seconds per GB (10^9 bytes) of `cpu` seconds.
    pub fn per_gb(&self, cpu: f64) -> f64 {
        if self.bytes == 0 {
            0.0
        } else {
            cpu / (self.bytes as f64 / 1e9)
        }
    }
}

struct Cluster {
    source: Component,
    target: Component,
    switch: Component,
}

impl Cluster {
    fn start(plan: &CopyPlan) -> Result<Cluster, String> {
        let capacity = (plan.bytes + (4 << 20)).next_power_of_two().max(16 << 20);
        let memnode = vec!["--capacity".to_owned(), capacity.to_string()];
        Ok(Cluster {
            source: Component::start(&plan.program, "memnode", &memnode)?,
            target: Component::start(&plan.program, "memnode", &memnode)?,
            switch: Component::start(&plan.program, "switch", &[])?,
        })
    }

    fn cpu(&self) -> [Duration; 3] {
        let of = |c: &Component| pid_cpu(c.pid()).unwrap_or_default();
        [of(&self.source), of(&self.target), of(&self.switch)]
    }
}

/// Runs `plan`, telling `progress` about every cell.
pub fn run(plan: &CopyPlan, mut progress: impl FnMut(&CopyCell)) -> Result<Vec<CopyCell>, String> {
    let cluster = Cluster::start(plan)?;
    let source = Place::region_start(&cluster.source.announced.admin_url)?;
    let target = Place::region_start(&cluster.target.announced.admin_url)?;
    let switch = cluster.switch.announced.admin_url.clone();
    let mut client = Client::connect(&source, &target)?;
    let mut cells = Vec::new();
    for round in 0..plan.repeat {
        for &item in &plan.items {
            // Alternate which engine goes first, so drift favours neither.
            let engines = if (round + cells.len()) % 2 == 0 {
                [Engine::Switch, Engine::Cpu]
            } else {
                [Engine::Cpu, Engine::Switch]
            };
            for engine in engines {
                let seed = (round as u64) << 32 | u64::from(item);
                let want = client.prepare(&source, &target, plan.bytes, seed)?;
                let before = cluster.cpu();
                let client_before = thread_cpu().unwrap_or_default();
                let started = Instant::now();
                let report = match engine {
                    Engine::Switch => {
                        let r = switch_driven::copy(
                            &switch,
                            &source,
                            &target,
                            plan.bytes,
                            item,
                            plan.window,
                        )?;
                        (r.reads, r.rereads)
                    }
                    Engine::Cpu => {
                        client.copy(&source, &target, plan.bytes, item, plan.window as usize)?;
                        (0, 0)
                    }
                };
                let seconds = started.elapsed().as_secs_f64();
                let client_cpu = thread_cpu().unwrap_or_default() - client_before;
                let after = cluster.cpu();
                if let Some(at) = client.check(&target, &want)? {
                    return Err(format!(
                        "{} copy of {item}-byte items: the target differs from the source at byte {at}",
                        engine.name()
                    ));
                }
                let spent = |i: usize| after[i].saturating_sub(before[i]).as_secs_f64();
                let cell = CopyCell {
                    engine,
                    item,
                    bytes: plan.bytes,
                    round,
                    seconds,
                    source_cpu: spent(0),
                    target_cpu: spent(1),
                    switch_cpu: spent(2),
                    client_cpu: client_cpu.as_secs_f64(),
                    switch_reads: report.0,
                    switch_rereads: report.1,
                };
                progress(&cell);
                cells.push(cell);
            }
        }
    }
    Ok(cells)
}
