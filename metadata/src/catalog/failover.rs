//! Failing over replicated tables: a memnode that is down (no heartbeat for the
//! failover timeout) or lost its memory is taken out of every replica set it is a
//! member of, so its backups serve in its place.
//!
//! A set keeps its position in the table's `replica_sets` (clients locate copies
//! by the home memnode's position), so removing a member promotes the next one to
//! primary. Backups are never behind their primary (every control word changes on
//! the backups first, see `docs/replication.md`), so the promoted member holds
//! every acknowledged write. The member's copy is dropped from every mirrored
//! lease as well, and its extent returned to its free map (a memnode that comes
//! back holds stale copies nobody points at). The table gets a loss record for
//! the memnode: degraded while every set keeps a member, lost once a set has none.
//!
//! Before a silent memnode that is some set's primary is failed over, the copier
//! makes that set's other survivors equal to the member promoted
//! ([`Catalog::survivor_plans`]); see `docs/replication.md`.

use std::collections::BTreeSet;

use super::error::CatalogError;
use super::keys::{lkey, tkey};
use super::records::{CopyRecord, LeaseRecord, TableRecord};
use super::rereplicate::SyncPlan;
use super::state::Catalog;
use crate::api::LostCopy;
use crate::store::Batch;

/// What [`Catalog::fail_over`] changed.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Failover {
    /// Tables whose replica sets lost the memnode (as they are now).
    pub tables: Vec<TableRecord>,
    /// Mirrored leases that lost their copy on it.
    pub leases: usize,
}

/// Resynchronising one survivor of a failed primary with the member promoted in
/// its place ([`Catalog::survivor_plans`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SurvivorPlan {
    /// The table.
    pub table: String,
    /// The set's position in the table's `replica_sets`.
    pub set: usize,
    /// Source: the member promoted; target: another survivor; members: every
    /// survivor.
    pub plan: SyncPlan,
}

impl Catalog {
    /// Memnodes that are members of some replicated table's replica set and have
    /// gone without a heartbeat for at least `after_ms`.
    pub fn failover_due(&self, now_ms: u64, after_ms: u64) -> Vec<u64> {
        let members: BTreeSet<u64> = self
            .tables
            .values()
            .filter(|t| t.replication > 1)
            .flat_map(|t| t.mirror_sets().into_iter().flatten())
            .collect();
        members
            .into_iter()
            .filter(|id| {
                self.memnodes
                    .get(id)
                    .is_some_and(|n| now_ms.saturating_sub(n.last_heartbeat_ms) >= after_ms)
            })
            .collect()
    }

    /// The memnodes [`Catalog::failover_due`] names with the configured timeout.
    pub fn failover_due_now(&self, now_ms: u64) -> Vec<u64> {
        self.failover_due(now_ms, self.cfg.failover_after())
    }

    /// Fails over every memnode that is due ([`Catalog::failover_due_now`]):
    /// `(memnode id, reason, what changed)` for each.
    pub fn fail_over_down(
        &mut self,
        now_ms: u64,
    ) -> Result<Vec<(u64, String, Failover)>, CatalogError> {
        let mut done = Vec::new();
        for id in self.failover_due_now(now_ms) {
            done.push(self.fail_over_silent(id, now_ms)?);
        }
        Ok(done)
    }

    /// Fails over memnode `id` because it sent no heartbeat for the failover
    /// timeout: `(id, reason, what changed)`.
    pub fn fail_over_silent(
        &mut self,
        id: u64,
        now_ms: u64,
    ) -> Result<(u64, String, Failover), CatalogError> {
        let after = self.cfg.failover_after();
        let name = self
            .memnodes
            .get(&id)
            .map(|n| n.rec.name.clone())
            .unwrap_or_default();
        let reason = format!("memnode {name} sent no heartbeat for {after} ms");
        let f = self.fail_over(id, &reason, now_ms)?;
        Ok((id, reason, f))
    }

    /// What failing over memnode `id` asks of the copier first: for every replica
    /// set whose **primary** `id` is and that keeps two members or more, a plan
    /// per member beyond the one promoted (the next), copying from the promoted
    /// member and fencing every survivor.
    ///
    /// A round that the primary's failure interrupted can leave the survivors
    /// disagreeing on a control word: a writer that failed between its backup
    /// CASes leaves its value on one backup only, and a split among the backups
    /// is never decided (deciding it needs a READ of the primary). With the
    /// promoted member behind another survivor that is harmless, but with another
    /// survivor behind the promoted member the next writer would "help" the
    /// older value back onto the new primary, and a second failure would promote
    /// the older copy: a read returns a value older than one already returned.
    /// Nobody writes these survivors meanwhile: every write of the set starts
    /// with a READ of its primary, which is down, and the fence ends the queue
    /// pairs of the writes posted before. So the copy is exact.
    ///
    /// Sets in which `id` was a backup need none: their primary survives and
    /// every other survivor changed before it in every round (never behind it).
    pub fn survivor_plans(&self, id: u64) -> Vec<SurvivorPlan> {
        let mut out = Vec::new();
        for t in self.tables.values().filter(|t| t.replication > 1) {
            for (k, set) in t.replica_sets.iter().enumerate() {
                if set.first() != Some(&id) || set.len() < 3 {
                    continue;
                }
                let survivors = &set[1..];
                for &target in &survivors[1..] {
                    match self.plan_between(t, k, survivors[0], target, survivors) {
                        Ok(plan) => out.push(SurvivorPlan {
                            table: t.name.clone(),
                            set: k,
                            plan,
                        }),
                        Err(e) => tracing::warn!(
                            table = %t.name,
                            set = k,
                            target,
                            error = %e,
                            "no plan to resynchronise a survivor of a failover"
                        ),
                    }
                }
            }
        }
        out
    }

    /// Takes memnode `id` out of every replicated table's replica sets and its copy
    /// out of every mirrored lease, recording why (`reason`) in each table's loss
    /// records. Idempotent: a memnode that is no member of any set changes nothing.
    pub fn fail_over(
        &mut self,
        id: u64,
        reason: &str,
        now_ms: u64,
    ) -> Result<Failover, CatalogError> {
        let name = self
            .memnodes
            .get(&id)
            .map(|n| n.rec.name.clone())
            .unwrap_or_else(|| format!("#{id}"));
        let mut batch = Batch::new();
        let mut out = Failover::default();
        for t in self.tables.values() {
            if !t.mirror_sets().iter().any(|s| s.contains(&id)) {
                continue;
            }
            let mut t2 = t.clone();
            for set in t2.replica_sets.iter_mut().chain(t2.syncing.iter_mut()) {
                set.retain(|&m| m != id);
            }
            t2.config_epoch += 1;
            // A syncing member never held a full copy: losing it loses nothing.
            let member = t.replica_sets.iter().any(|s| s.contains(&id));
            if member && !t2.lost.iter().any(|l| l.memnode_id == id) {
                t2.lost.push(LostCopy {
                    memnode_id: id,
                    memnode_name: name.clone(),
                    since_ms: now_ms,
                    reason: reason.to_owned(),
                });
            }
            batch.put(tkey(&t2.name), &t2);
            out.tables.push(t2);
        }
        let mut leases: Vec<(LeaseRecord, CopyRecord)> = Vec::new();
        for l in self.leases.values() {
            let Some(copy) = l.replicas.iter().find(|c| c.memnode_id == id) else {
                continue;
            };
            // The lease keeps naming its home (`memnode_id`, `va`): that is how
            // clients address the memory, whichever members hold copies of it.
            let mut l2 = l.clone();
            l2.replicas.retain(|c| c.memnode_id != id);
            if l2.replicas.is_empty() {
                // No copy left: the memory is gone with the memnode.
                batch.delete(lkey(l2.id));
            } else {
                batch.put(lkey(l2.id), &l2);
            }
            leases.push((l2, *copy));
        }
        if out.tables.is_empty() && leases.is_empty() {
            return Ok(out);
        }
        self.commit(&batch)?;
        for (l2, copy) in leases {
            let len = l2.len;
            if l2.replicas.is_empty() {
                self.leases.remove(&l2.id);
            } else {
                self.leases.insert(l2.id, l2);
            }
            self.release_copy(&copy, len);
            out.leases += 1;
        }
        for t in &out.tables {
            self.tables.insert(t.name.clone(), t.clone());
        }
        Ok(out)
    }
}
