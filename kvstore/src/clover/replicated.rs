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

use super::header::Header;
use super::node::{CLASS_AT, NODE_PREFIX, NodeView};
use crate::error::{Cause, KvError};
use crate::ptr::RemotePtr;
use crate::remote::{Target, atomic_value, read_bytes, write_done};
use crate::replication::copies::{resolve_all, resolve_syncing};
use crate::replication::decide::{Decision, decide, decide_split};
use crate::session::SessionCore;
use crate::size_class::SIZE_CLASSES;
use crate::stats::OpStats;

/// How a replicated append ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Appended {
    /// The node is linked on every member.
    Linked,
    /// Another writer's link won. `previous` is the old tail's header as the
    /// primary holds it when the round read it (to chase), else the expected value
    /// (find the tail again).
    Lost {
        /// A header word to chase from, as the primary holds it.
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
    // Syncing members get every write too; their answers decide nothing.
    let sync_nodes = resolve_syncing(&core.links, table, node, class as u64)?;
    let sync_headers = resolve_syncing(&core.links, table, tail, 8)?;
    let pairs_match = |a: &[Target], b: &[Target]| {
        a.len() == b.len() && a.iter().zip(b).all(|(n, h)| n.memnode == h.memnode)
    };
    let same_homes = pairs_match(&nodes, &headers) && pairs_match(&sync_nodes, &sync_headers);
    let involved: Vec<u64> = nodes
        .iter()
        .chain(&headers)
        .chain(&sync_nodes)
        .chain(&sync_headers)
        .map(|t| t.memnode)
        .collect();
    ready_and_current(core, table, &involved)?;
    let backups = headers.len().saturating_sub(1);
    // With switch replication the node goes once, to the primary, and completes only
    // once every member holds it; the backups' CASes follow it in the next round trip.
    let member_ids: Vec<u64> = nodes.iter().map(|t| t.memnode).collect();
    let alias = core.links.switch_alias(&member_ids, class as u64);
    // Step 1: node everywhere, then the backups' (and syncing members') header CASes.
    let (seen, sync_seen): (Vec<u64>, Vec<u64>) = if same_homes && alias.is_none() {
        let mut batches: Vec<_> = nodes
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
        batches.extend(sync_nodes.iter().zip(&sync_headers).map(|(n, h)| {
            (
                n.memnode,
                vec![
                    WorkRequest::write(n.addr, bytes.clone()),
                    WorkRequest::cas(h.addr, compare, swap),
                ],
            )
        }));
        let done = core.links.round_trip(batches, stats).await?;
        let mut seen = Vec::with_capacity(backups);
        let mut sync_seen = Vec::with_capacity(sync_headers.len());
        for (i, batch) in done.iter().enumerate() {
            write_done(batch.first())?;
            if i >= nodes.len() {
                sync_seen.push(atomic_value(batch.get(1))?);
            } else if i > 0 {
                seen.push(atomic_value(batch.get(1))?);
            }
        }
        (seen, sync_seen)
    } else {
        let batches = match (alias, nodes.first()) {
            (Some(rkey), Some(primary)) => {
                let mut addr = primary.addr;
                addr.rkey = rkey;
                std::iter::once((
                    primary.memnode,
                    vec![WorkRequest::write(addr, bytes.clone())],
                ))
                .chain(
                    sync_nodes
                        .iter()
                        .map(|n| (n.memnode, vec![WorkRequest::write(n.addr, bytes.clone())])),
                )
                .collect()
            }
            _ => nodes
                .iter()
                .chain(&sync_nodes)
                .map(|n| (n.memnode, vec![WorkRequest::write(n.addr, bytes.clone())]))
                .collect(),
        };
        for batch in core.links.round_trip(batches, stats).await? {
            write_done(batch.first())?;
        }
        let mut all = cas_each(
            core,
            headers.iter().skip(1).chain(&sync_headers),
            compare,
            swap,
            stats,
        )
        .await?;
        let sync_seen = all.split_off(backups.min(all.len()));
        (all, sync_seen)
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
            // The linearization point: only with the table's current replica sets.
            confirm_config(core, table)?;
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
                repair_syncing(core, &sync_headers, &sync_seen, compare, swap, stats).await;
                Ok(Appended::Linked)
            } else if headers.len() == 1 {
                // A set a failure left with one member: its CAS alone decides, as on
                // an unreplicated chain.
                Ok(Appended::Lost {
                    previous: was,
                    exposed: false,
                })
            } else {
                Err(KvError::corrupt(format!(
                    "the primary's header copy on memnode {} moved on ({was:#x}, expected \
                     {compare:#x}, linking {swap:#x}; backups said {seen:x?}) while every \
                     backup held this write's link",
                    primary.memnode
                )))
            }
        }
        // The winner's link may not be on the primary yet: chasing it would append
        // after a node readers cannot see, and acknowledge a write they would
        // miss. When every backup holds the winner's link, help it onto the
        // primary (a winner may have failed between its backup CASes and its
        // primary CAS, which would block the key forever); otherwise find the
        // tail again the way readers do, on the primary.
        Decision::Lose { winner: Some(w) } if seen.iter().all(|&v| v == w) => {
            let now = help(core, table, &headers, compare, w, stats).await?;
            Ok(Appended::Lost {
                previous: now,
                exposed,
            })
        }
        Decision::Lose { .. } => Ok(Appended::Lost {
            previous: compare,
            exposed,
        }),
        Decision::ReadPrimary | Decision::ReplicaFailed => Err(KvError::unavailable(
            "a replica of the chain did not answer; the write may or may not take effect \
             once the table's configuration changes",
        )),
    }
}

/// After winning: a syncing member whose header held another contender's link
/// (its CAS failed) is moved over to this write's link, so the member agrees with
/// the primary even if no copy pass looks at the word again. Best effort: the
/// copier compares every word before the member is promoted.
async fn repair_syncing(
    core: &SessionCore,
    headers: &[Target],
    seen: &[u64],
    compare: u64,
    swap: u64,
    stats: &mut OpStats,
) {
    let batches: Vec<_> = headers
        .iter()
        .zip(seen)
        .filter(|&(_, &was)| was != compare && was != swap)
        .map(|(h, &was)| (h.memnode, vec![WorkRequest::cas(h.addr, was, swap)]))
        .collect();
    if !batches.is_empty() {
        let _ = core.links.round_trip(batches, stats).await;
    }
}

/// Checks, before a write's linearizing CAS, that `table` (the description the
/// write used) still has the table's current replica sets, asking the metadata
/// service again whenever this session replaced a queue pair since it last asked.
/// The metadata service destroys the queue pairs of a replica set's members when
/// a member joins or is promoted (a fence), so a writer that did not learn the
/// change cannot link anything on the primary afterwards: it fails here with
/// `OutcomeUnknown` (its node may already be linked on a backup) instead.
pub(crate) fn confirm_config(core: &SessionCore, table: &TableDescription) -> Result<(), KvError> {
    let reconnects = core.links.reconnector().reconnects();
    let known = core.config_checks.borrow().get(&table.name).copied();
    if known == Some((table.config_epoch, reconnects)) {
        return Ok(());
    }
    let fresh = core.client.fresh_table(&table.name)?;
    if fresh.config_epoch != table.config_epoch
        || fresh.replica_sets != table.replica_sets
        || fresh.syncing != table.syncing
    {
        return Err(KvError::OutcomeUnknown(Cause::new(format!(
            "the replica sets of table {:?} changed while the write was in flight \
             (configuration epoch {} became {}): it may or may not take effect",
            table.name, table.config_epoch, fresh.config_epoch
        ))));
    }
    core.config_checks
        .borrow_mut()
        .insert(table.name.clone(), (fresh.config_epoch, reconnects));
    // Every queue pair the session has now existed when this was confirmed.
    core.links.routes().borrow().limit_writes();
    Ok(())
}

/// Before a write's first WRITE or CAS: gives every memnode in `memnodes` a usable
/// queue pair (replacing failed ones now), then confirms `table` is the current
/// configuration ([`confirm_config`]). Every queue pair the write then posts on
/// existed when the configuration was confirmed, so a queue pair made after a
/// fence never carries a write of an older configuration. A configuration that
/// changed fails the attempt before anything was written (`Unavailable`; the
/// operation is repeated on the new configuration).
pub(crate) fn ready_and_current(
    core: &SessionCore,
    table: &TableDescription,
    memnodes: &[u64],
) -> Result<(), KvError> {
    for &m in memnodes {
        core.links.ready(m)?;
    }
    confirm_config(core, table).map_err(|e| match e {
        KvError::OutcomeUnknown(c) => KvError::Unavailable(c),
        other => other,
    })
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

/// Puts the winner's link `won` (held by every backup of the old tail's header)
/// onto the primary if the primary still holds `compare`: the winner's node is
/// read from a backup — where it was complete before the backup linked it — and
/// written to the primary, then the primary's header is CASed. A winner that is
/// merely slow finds its own link there and counts its write as done. Returns the
/// primary's header afterwards.
async fn help(
    core: &SessionCore,
    table: &TableDescription,
    headers: &[Target],
    compare: u64,
    won: u64,
    stats: &mut OpStats,
) -> Result<u64, KvError> {
    let (Some(primary), Some(backup)) = (headers.first(), headers.get(1)) else {
        return Ok(compare);
    };
    let done = core
        .links
        .round_trip(
            vec![(primary.memnode, vec![WorkRequest::read(primary.addr, 8)])],
            stats,
        )
        .await?;
    let now = word(done.first().and_then(|b| b.first()))?;
    if now != compare {
        return Ok(now);
    }
    let link = match Header::unpack(won) {
        Ok(Header {
            successor: Some(link),
            ..
        }) => link,
        _ => return Ok(now),
    };
    let copies = resolve_all(&core.links, table, link.ptr(), NODE_PREFIX as u64)?;
    let Some(from) = copies.iter().find(|c| c.memnode == backup.memnode) else {
        return Ok(now);
    };
    let done = core
        .links
        .round_trip(
            vec![(
                from.memnode,
                vec![WorkRequest::read(from.addr, NODE_PREFIX as u32)],
            )],
            stats,
        )
        .await?;
    let prefix = read_bytes(done.first().and_then(|b| b.first()))?;
    let Some(&class) = prefix
        .get(CLASS_AT)
        .and_then(|c| SIZE_CLASSES.get(usize::from(*c)))
    else {
        return Ok(now);
    };
    let node_copies = resolve_all(&core.links, table, link.ptr(), class as u64)?;
    let (Some(src), Some(dst)) = (
        node_copies.iter().find(|c| c.memnode == backup.memnode),
        node_copies.first(),
    ) else {
        return Ok(now);
    };
    let Ok(len) = u32::try_from(class) else {
        return Ok(now);
    };
    // Both copies in one round: the backup's is the node the winner linked (it was
    // complete there before the backup's CAS) if its generation matches the link;
    // the primary's may be complete already (the winner's own WRITE landed).
    let done = core
        .links
        .round_trip(
            vec![
                (src.memnode, vec![WorkRequest::read(src.addr, len)]),
                (dst.memnode, vec![WorkRequest::read(dst.addr, len)]),
            ],
            stats,
        )
        .await?;
    let node = read_bytes(done.first().and_then(|b| b.first()))?.to_vec();
    let on_primary = read_bytes(done.get(1).and_then(|b| b.first()))?;
    let linked_one = |bytes: &[u8]| {
        NodeView::new_checked(bytes).is_ok_and(|v| link.matches(v.header().generation))
    };
    if !linked_one(&node) {
        // Reused since (a newer node of another generation): the round is long over.
        return Ok(now);
    }
    let mut batch = Vec::with_capacity(2);
    if on_primary != node.as_slice() {
        batch.push(WorkRequest::write(dst.addr, node));
    }
    batch.push(WorkRequest::cas(primary.addr, compare, won));
    let copies_node = batch.len() == 2;
    let done = core
        .links
        .round_trip(vec![(dst.memnode, batch)], stats)
        .await?;
    let batch = done.first();
    let was = if copies_node {
        write_done(batch.and_then(|b| b.first()))?;
        atomic_value(batch.and_then(|b| b.get(1)))?
    } else {
        atomic_value(batch.and_then(|b| b.first()))?
    };
    stats.helped_links += 1;
    Ok(if was == compare { won } else { was })
}

fn word(c: Option<&verbs::wr::Completion>) -> Result<u64, KvError> {
    read_bytes(c)?
        .get(..8)
        .and_then(|b| b.try_into().ok())
        .map(u64::from_le_bytes)
        .ok_or_else(|| KvError::corrupt("short header read"))
}
