//! Load-balanced READs on the control plane: a read lane (the switch's own queue pair)
//! on every backup of a replica set, the set's read alias key and the `balance_*`
//! tables; members marked non-serving get no READ. Installed beside the set's
//! replication of writes (`POST /v1/mirrors` with `balance_reads`).

use dmkv_api::memnode_admin;

use super::mirrors::{LaneKind, MirrorRecord, fresh};
use super::{Control, ControlError};
use crate::functions::read_balance::{BalanceAnswerAction, BalanceSetAction, ReadBalanceCounters};
use crate::model::RouteKey;

/// Path MTU of the read lanes: a balanced READ is answered in one packet of at most
/// this.
pub(super) const READ_LANE_PMTU: u32 = 1024;

/// A fresh read alias key for set `set` (distinct from the WRITE alias keys, which
/// start with `0xA`).
pub(super) fn read_alias(set: u8) -> u32 {
    0xB000_0000 | (fresh(u32::from(set) ^ 0xB0B0) & 0x0FFF_FF00) | u32::from(set)
}

impl Control {
    /// Balanced READs per member position (primary first) and the rule's other
    /// counters, over every set.
    pub fn read_balance_counters(&self) -> ReadBalanceCounters {
        self.pipeline().read_balance().counters
    }

    /// The set of `record` with READs balanced (`on`) or not, `non_serving` backups
    /// getting none: new read lanes are created, then the old ones deleted (if a
    /// backup refuses, the set stays as it was).
    pub(super) fn rebalance_reads(
        &self,
        record: MirrorRecord,
        on: bool,
        non_serving: &[String],
    ) -> Result<MirrorRecord, ControlError> {
        let old = record.clone();
        let mut record = record;
        record.set.read_alias_rkey = match (on, record.set.read_alias_rkey) {
            (false, _) => None,
            (true, Some(k)) => Some(k),
            (true, None) => Some(read_alias(record.set.set)),
        };
        record.set.non_serving = non_serving.to_vec();
        let record = self.install_read_balance(record)?;
        self.delete_read_lanes(&old);
        Ok(record)
    }

    /// Delete the read lanes' queue pairs of `record` on its backups (best effort: a
    /// node that cannot be reached keeps a queue pair nothing uses).
    pub(super) fn delete_read_lanes(&self, record: &MirrorRecord) {
        for (m, lane) in record.set.backups.iter().zip(&record.read_lanes) {
            let _ = memnode_admin::delete_qp_as(
                &m.memnode,
                self.memnode_token.as_deref(),
                lane.memnode_qpn,
            );
        }
    }

    /// Create the read lanes of `record`'s set and install its `balance_*` entries in
    /// place of the set's old ones (or only remove those when its READs are not
    /// balanced). Nothing changes in the tables if a lane cannot be created.
    pub(super) fn install_read_balance(
        &self,
        mut record: MirrorRecord,
    ) -> Result<MirrorRecord, ControlError> {
        let set = record.set.set;
        let clear = |p: &mut crate::pipeline::Pipeline| {
            let lb = p.read_balance_mut();
            lb.balance_rkey.retain(|_, a| a.set != set);
            lb.balance_lane.retain(|(s, _), _| *s != set);
            lb.balance_answer.retain(|_, a| a.set != set);
        };
        record.read_lanes.clear();
        let Some(read_alias_rkey) = record.set.read_alias_rkey else {
            clear(&mut self.pipeline());
            return Ok(record);
        };
        let lanes = self.create_lanes(&record, LaneKind::ReadBalance)?;
        let primary = &record.set.primary;
        let mut serving = 0u8;
        let mut p = self.pipeline();
        clear(&mut p);
        let lb = p.read_balance_mut();
        for (i, ((lane, addr), b)) in lanes.iter().zip(&record.set.backups).enumerate() {
            let backup = i as u8;
            if !record.set.non_serving.contains(&b.memnode) {
                serving |= 1 << backup;
            }
            lb.balance_lane.insert(
                (set, backup),
                crate::functions::read_balance::BalanceLaneAction {
                    src: self.memnode_side,
                    dst: *addr,
                    qpn: lane.memnode_qpn,
                    rkey: b.rkey,
                    va_delta: b.base_va.wrapping_sub(primary.base_va),
                },
            );
            lb.balance_answer.insert(
                RouteKey {
                    src: *addr,
                    qpn: lane.switch_qpn,
                },
                BalanceAnswerAction { set, backup },
            );
            lb.init_lane(set, backup, lane.psn);
        }
        lb.balance_rkey.insert(
            read_alias_rkey,
            BalanceSetAction {
                set,
                rkey: primary.rkey,
                backups: lanes.len() as u8,
                serving,
            },
        );
        drop(p);
        record.read_lanes = lanes.into_iter().map(|(l, _)| l).collect();
        Ok(record)
    }
}
