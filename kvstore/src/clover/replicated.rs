//! Appending to a chain of a replicated table.
//!
//! Every node and every header exists on each member of the chain's replica set
//! ([`crate::replication::copies`]), at the same offset. A write:
//!
//! 1. WRITEs the whole node to every member and, on each backup's queue pair right
//!    after that WRITE, CASes the backup's copy of the old tail's header (compare:
//!    no successor and the tail's generation; swap: the link). A queue pair executes
//!    in order, so on every backup the node is complete before it is linked. One
//!    round trip (two when the tail lives on another home than the node).
//! 2. Decides the round from the backups' answers ([`crate::replication::decide`]):
//!    with one backup its CAS decides; with two, a split goes to the smaller link
//!    after a READ of the primary's header.
//! 3. The winner moves any backup holding another contender's link over to its own,
//!    then CASes the primary's header: that CAS is the write's linearization point.
//!    The primary's node copy was written in step 1, so it is complete too.
//!
//! Readers read the primary only. Backups are never behind the primary (a header
//! changes on every backup before the primary), which is what promoting a backup
//! after its primary failed relies on. A loser retries after the winner, like a
//! lost CAS of an unreplicated table; if its link reached a backup (a split it
//! lost), its node stays untouched until reclaimed, since a backup pointed at it.
//! An r = 2 write thus costs one round trip more than r = 1; GETs cost the same.

use verbs::wr::WorkRequest;

use dmkv_api::metadata::TableDescription;

use crate::error::KvError;
use crate::ptr::RemotePtr;
use crate::remote::{atomic_value, write_done};
use crate::replication::copies::resolve_all;
use crate::replication::decide::{Decision, decide, decide_split};
use crate::session::SessionCore;
use crate::stats::OpStats;

/// How a replicated append ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Appended {
    /// The node is linked on every member.
    Linked,
    /// Another writer's link won; `previous` is the header it installed (to chase)
    /// when known, else the header as the primary holds it.
    Lost {
        /// A header word to chase from.
        previous: u64,
        /// Our link reached a backup before losing there: the node must not be
        /// rewritten or reused before it is reclaimed.
        exposed: bool,
    },
}

/// WRITE `bytes` (a whole node of `class` bytes) at `node` on every member and link
/// it after the tail at `tail` by replacing `compare` with `swap` in the tail's
/// header on every member, primary last.
#[allow(clippy::too_many_arguments)]
pub(crate) async fn append(
    core: &SessionCore,
    table: &TableDescription,
    node: RemotePtr,
    class: usize,
    bytes: Vec<u8>,
    tail: RemotePtr,
    compare: u64,
    swap: u64,
    stats: &mut OpStats,
) -> Result<Appended, KvError> {
    let nodes = resolve_all(&core.links, table, node, class as u64)?;
    let headers = resolve_all(&core.links, table, tail, 8)?;
    let same_homes = nodes.len() == headers.len()
        && nodes
            .iter()
            .zip(&headers)
            .all(|(n, h)| n.memnode == h.memnode);
    let backups = headers.len().saturating_sub(1);
    // Step 1: node everywhere, then the backups' header CASes.
    let seen: Vec<u64> = if same_homes {
        let batches = nodes
            .iter()
            .zip(&headers)
            .enumerate()
            .map(|(i, (n, h))| {
                let mut wrs = vec![WorkRequest::write(n.addr, bytes.clone())];
                if i > 0 {
                    wrs.push(WorkRequest::cas(h.addr, compare, swap));
                }
                (n.memnode, wrs)
            })
            .collect();
        let done = core.links.round_trip(batches, stats).await?;
        let mut seen = Vec::with_capacity(backups);
        for (i, batch) in done.iter().enumerate() {
            write_done(batch.first())?;
            if i > 0 {
                seen.push(atomic_value(batch.get(1))?);
            }
        }
        seen
    } else {
        let batches = nodes
            .iter()
            .map(|n| (n.memnode, vec![WorkRequest::write(n.addr, bytes.clone())]))
            .collect();
        for batch in core.links.round_trip(batches, stats).await? {
            write_done(batch.first())?;
        }
        cas_each(core, headers.iter().skip(1), compare, swap, stats).await?
    };
    let seen_opt: Vec<Option<u64>> = seen.iter().copied().map(Some).collect();
    let exposed = seen.contains(&compare);
    let mut decision = decide(compare, swap, &seen_opt);
    if decision == Decision::ReadPrimary {
        let primary = headers
            .first()
            .ok_or_else(|| KvError::corrupt("a replica set without members"))?;
        let done = core
            .links
            .round_trip(
                vec![(primary.memnode, vec![WorkRequest::read(primary.addr, 8)])],
                stats,
            )
            .await?;
        let buf = crate::remote::read_bytes(done.first().and_then(|b| b.first()))?;
        let now = buf
            .get(..8)
            .and_then(|b| b.try_into().ok())
            .map(u64::from_le_bytes)
            .ok_or_else(|| KvError::corrupt("short header read"))?;
        decision = decide_split(compare, swap, &seen_opt, now);
        if let Decision::Lose { winner: None } = decision {
            return Ok(Appended::Lost {
                previous: now,
                exposed,
            });
        }
    }
    match decision {
        Decision::Win { fix } => {
            if !fix.is_empty() {
                let fixes: Vec<_> = fix
                    .iter()
                    .filter_map(|&(i, theirs)| headers.get(i + 1).map(|h| (h, theirs)))
                    .collect();
                let batches = fixes
                    .iter()
                    .map(|(h, theirs)| (h.memnode, vec![WorkRequest::cas(h.addr, *theirs, swap)]))
                    .collect();
                let done = core.links.round_trip(batches, stats).await?;
                for (batch, (h, theirs)) in done.iter().zip(&fixes) {
                    let was = atomic_value(batch.first())?;
                    if was != *theirs && was != swap {
                        return Err(KvError::corrupt(format!(
                            "the header copy on memnode {} changed during a decided round",
                            h.memnode
                        )));
                    }
                }
            }
            let primary = headers
                .first()
                .ok_or_else(|| KvError::corrupt("a replica set without members"))?;
            let done = core
                .links
                .round_trip(
                    vec![(
                        primary.memnode,
                        vec![WorkRequest::cas(primary.addr, compare, swap)],
                    )],
                    stats,
                )
                .await?;
            let was = atomic_value(done.first().and_then(|b| b.first()))?;
            if was == compare || was == swap {
                Ok(Appended::Linked)
            } else {
                Err(KvError::corrupt(format!(
                    "the primary's header copy on memnode {} moved on ({was:#x}) while every \
                     backup held this write's link",
                    primary.memnode
                )))
            }
        }
        Decision::Lose { winner } => Ok(Appended::Lost {
            previous: winner.unwrap_or(compare),
            exposed,
        }),
        Decision::ReadPrimary | Decision::ReplicaFailed => Err(KvError::unavailable(
            "a replica of the chain did not answer; the write may or may not take effect \
             once the table's configuration changes",
        )),
    }
}

/// CAS every target from `compare` to `swap` in one round trip; the old values.
async fn cas_each<'a>(
    core: &SessionCore,
    targets: impl Iterator<Item = &'a crate::remote::Target>,
    compare: u64,
    swap: u64,
    stats: &mut OpStats,
) -> Result<Vec<u64>, KvError> {
    let batches: Vec<_> = targets
        .map(|t| (t.memnode, vec![WorkRequest::cas(t.addr, compare, swap)]))
        .collect();
    if batches.is_empty() {
        return Ok(Vec::new());
    }
    let done = core.links.round_trip(batches, stats).await?;
    done.iter().map(|b| atomic_value(b.first())).collect()
}
