//! Switch replication of writes on the control plane: replica sets installed from the
//! admin API, a queue pair (a *lane*) on every backup, the `mirror_*` tables, and the
//! restart rule (fresh lanes, the same sets and alias keys).

use dmkv_api::memnode::CreateQpRequest;
use dmkv_api::memnode_admin;
use dmkv_api::switch::{MirrorMember, MirrorRequest, MirrorSet};
use serde::{Deserialize, Serialize};

use super::read_balance::read_alias;
use super::{Control, ControlError, lock};
use crate::model::{MirrorAckAction, MirrorLaneAction, MirrorRkeyAction, RouteKey};
use crate::spec::{MIRROR_BACKUPS, MIRROR_SETS};

/// Path MTU of the lanes (a replicated WRITE is one packet of at most this).
const LANE_PMTU: u32 = 4096;

/// A lane's queue pair on a backup.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct MirrorLaneQp {
    /// The switch's QPN (the backup's answers go to it).
    pub switch_qpn: u32,
    /// The backup's QPN.
    pub memnode_qpn: u32,
    /// The lane's first PSN.
    pub psn: u32,
}

/// A replica set in the state file: the set and its lanes' queue pairs.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MirrorRecord {
    /// The set as the admin API shows it.
    pub set: MirrorSet,
    /// One lane per backup, in order.
    pub lanes: Vec<MirrorLaneQp>,
    /// One read lane per backup, in order, when the set's READs are balanced.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub read_lanes: Vec<MirrorLaneQp>,
}

/// Nanoseconds of the wall clock, mixed: QPNs, PSNs and alias keys fresh for this
/// incarnation.
pub(super) fn fresh(salt: u32) -> u32 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.subsec_nanos() ^ (d.as_secs() as u32).rotate_left(11))
        .unwrap_or(7)
        .wrapping_mul(0x9E37_79B9)
        ^ salt.rotate_left(17)
}

impl Control {
    /// The replica sets the switch replicates WRITEs to.
    pub fn mirrors(&self) -> Vec<MirrorSet> {
        lock(&self.state)
            .mirrors
            .iter()
            .map(|r| r.set.clone())
            .collect()
    }

    /// Replicate WRITEs to the set `req` names (blocking: asks the memory nodes for
    /// their regions and creates a lane on every backup over HTTP). A set with the
    /// same members is answered as it is (`false`: not created now).
    pub fn add_mirror(&self, req: &MirrorRequest) -> Result<(MirrorSet, bool), ControlError> {
        if req.backups.is_empty() || req.backups.len() > MIRROR_BACKUPS {
            return Err(ControlError::Invalid(format!(
                "a replica set has 1 to {MIRROR_BACKUPS} backups, not {}",
                req.backups.len()
            )));
        }
        let mut all = vec![&req.primary];
        all.extend(&req.backups);
        for (i, m) in all.iter().enumerate() {
            if all[..i].contains(m) {
                return Err(ControlError::Invalid(format!(
                    "memory node {m} appears twice in the replica set"
                )));
            }
        }
        for n in &req.non_serving {
            if !req.backups.contains(n) {
                return Err(ControlError::Invalid(format!(
                    "non-serving member {n} is not a backup of the set"
                )));
            }
        }
        let set = {
            let existing = lock(&self.state)
                .mirrors
                .iter()
                .find(|r| r.set.primary.memnode == req.primary && same_backups(&r.set, req))
                .cloned();
            if let Some(r) = existing {
                if r.set.read_alias_rkey.is_some() == req.balance_reads
                    && r.set.non_serving == req.non_serving
                {
                    return Ok((r.set.clone(), false));
                }
                // The same set with other read balancing: only that part changes.
                let r = self.rebalance_reads(r, req.balance_reads, &req.non_serving)?;
                let answer = r.set.clone();
                let mut state = lock(&self.state);
                state.mirrors.retain(|x| x.set.set != answer.set);
                state.mirrors.push(r);
                self.persist(&state)?;
                return Ok((answer, false));
            }
            let state = lock(&self.state);
            (0..MIRROR_SETS as u8)
                .find(|i| state.mirrors.iter().all(|r| r.set.set != *i))
                .ok_or_else(|| {
                    ControlError::Conflict(format!("all {MIRROR_SETS} replica sets are in use"))
                })?
        };
        let primary = self.member(&req.primary)?;
        let backups = req
            .backups
            .iter()
            .map(|b| self.member(b))
            .collect::<Result<Vec<_>, _>>()?;
        let alias_rkey = 0xA000_0000 | (fresh(u32::from(set)) & 0x0FFF_FF00) | u32::from(set);
        let record = MirrorRecord {
            set: MirrorSet {
                set,
                alias_rkey,
                primary,
                backups,
                read_alias_rkey: req.balance_reads.then(|| read_alias(set)),
                non_serving: req.non_serving.clone(),
            },
            lanes: Vec::new(),
            read_lanes: Vec::new(),
        };
        let record = self.install_mirror(record)?;
        let answer = record.set.clone();
        let mut state = lock(&self.state);
        state.mirrors.retain(|r| r.set.set != set);
        state.mirrors.push(record);
        self.persist(&state)?;
        Ok((answer, true))
    }

    /// After a restart: the set of `record` on fresh lanes (its old queue pairs are
    /// deleted). A backup that cannot be reached leaves the set out, logged.
    pub(super) fn restore_mirror(&self, record: MirrorRecord) {
        for (m, lane) in record.set.backups.iter().zip(&record.lanes) {
            let _ = memnode_admin::delete_qp_as(
                &m.memnode,
                self.memnode_token.as_deref(),
                lane.memnode_qpn,
            );
        }
        self.delete_read_lanes(&record);
        let set = record.set.set;
        match self.install_mirror(record) {
            Ok(r) => {
                let mut state = lock(&self.state);
                state.mirrors.retain(|x| x.set.set != set);
                state.mirrors.push(r);
                if let Err(error) = self.persist(&state) {
                    tracing::warn!(%error, set, "replica set not written to the state file");
                }
            }
            Err(error) => {
                tracing::warn!(%error, set, "replica set not restored; its WRITEs are not replicated by the switch")
            }
        }
    }

    /// A member as the admin API shows it, from its node's answer.
    fn member(&self, admin: &str) -> Result<MirrorMember, ControlError> {
        let token = self.memnode_token.as_deref();
        let node = memnode_admin::node_info_as(admin, token)
            .map_err(|e| ControlError::Memnode(e.to_string()))?;
        let addr = memnode_admin::data_addr(admin, &node)
            .map_err(|e| ControlError::Invalid(e.to_string()))?;
        let region = node
            .regions
            .first()
            .ok_or_else(|| ControlError::Memnode(format!("memory node {admin} has no region")))?;
        Ok(MirrorMember {
            memnode: admin.to_owned(),
            addr,
            memnode_id: node.memnode_id,
            rkey: region.rkey,
            base_va: region.base_va,
        })
    }

    /// Create the lanes of `record`'s set and install its tables.
    fn install_mirror(&self, mut record: MirrorRecord) -> Result<MirrorRecord, ControlError> {
        let set = record.set.set;
        let lanes = self.create_lanes(&record, LaneKind::Mirror)?;
        let primary = &record.set.primary;
        let mut p = self.pipeline();
        // Old lanes of this set (a restart, or the set re-created) match nothing now.
        let stale: Vec<RouteKey> = p
            .tables
            .mirror_ack
            .entries()
            .filter(|(_, a)| a.set == set)
            .map(|(k, _)| *k)
            .collect();
        for k in stale {
            p.tables.mirror_ack.remove(&k);
        }
        for (i, ((lane, addr), b)) in lanes.iter().zip(&record.set.backups).enumerate() {
            let backup = i as u8;
            p.tables.mirror_lane.insert(
                (set, backup),
                MirrorLaneAction {
                    src: self.memnode_side,
                    dst: *addr,
                    qpn: lane.memnode_qpn,
                    rkey: b.rkey,
                    va_delta: b.base_va.wrapping_sub(primary.base_va),
                },
            )?;
            p.tables.mirror_ack.insert(
                RouteKey {
                    src: *addr,
                    qpn: lane.switch_qpn,
                },
                MirrorAckAction { set, backup },
            )?;
            p.init_mirror_lane(set, backup, lane.psn);
        }
        p.tables.mirror_rkey.insert(
            record.set.alias_rkey,
            MirrorRkeyAction {
                set,
                rkey: primary.rkey,
                backups: lanes.len() as u8,
            },
        )?;
        record.lanes = lanes.into_iter().map(|(l, _)| l).collect();
        drop(p);
        self.install_read_balance(record)
    }
}

fn same_backups(set: &MirrorSet, req: &MirrorRequest) -> bool {
    set.backups.len() == req.backups.len()
        && set
            .backups
            .iter()
            .zip(&req.backups)
            .all(|(m, b)| &m.memnode == b)
}

/// Which of a replica set's lane families [`Control::create_lanes`] makes: each has its
/// own QPN range, salt and path MTU, so their queue pairs never collide.
#[derive(Debug, Clone, Copy)]
pub(super) enum LaneKind {
    /// Write-mirroring lanes (`LANE_PMTU`).
    Mirror,
    /// Load-balanced READ lanes.
    ReadBalance,
}

impl Control {
    /// Creates one lane queue pair per backup of `record`'s set on the backup's memory
    /// node (QPN and first PSN drawn from the set, the backup's index and `kind`), and
    /// returns each with the address its responder listens on.
    pub(super) fn create_lanes(
        &self,
        record: &MirrorRecord,
        kind: LaneKind,
    ) -> Result<Vec<(MirrorLaneQp, std::net::SocketAddrV4)>, ControlError> {
        let set = record.set.set;
        let (qpn_base, salt_tag, psn_xor, pmtu) = match kind {
            LaneKind::Mirror => (0x00E8_0000, 0, 0x55, LANE_PMTU),
            LaneKind::ReadBalance => (
                0x00EC_0000,
                0x800,
                0xAA,
                super::read_balance::READ_LANE_PMTU,
            ),
        };
        let mut lanes = Vec::new();
        for (i, b) in record.set.backups.iter().enumerate() {
            let salt = (u32::from(set) << 4) | i as u32 | salt_tag;
            let switch_qpn = qpn_base | (u32::from(set) << 10) | (fresh(salt) & 0x3F8) | i as u32;
            let psn = fresh(salt ^ psn_xor) & verbs::wire::PSN_MASK;
            let resp = memnode_admin::create_qp_as(
                &b.memnode,
                self.memnode_token.as_deref(),
                &CreateQpRequest {
                    qpn: switch_qpn,
                    psn,
                    addr: self.memnode_side,
                    pmtu,
                    server_addr: Some(b.addr),
                    coalesce: false,
                },
            )
            .map_err(|e| ControlError::Memnode(e.to_string()))?;
            lanes.push((
                MirrorLaneQp {
                    switch_qpn,
                    memnode_qpn: resp.qpn,
                    psn,
                },
                resp.addr,
            ));
        }
        Ok(lanes)
    }
}
