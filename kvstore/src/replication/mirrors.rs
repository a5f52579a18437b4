//! The copies of an in-place table's tuples on its backups (and syncing members):
//! every WRITE a latch scheme sends to the primary is first written to every
//! mirror, in one round trip, and the primary's batch (which may carry the
//! unlatch) is posted only once every mirror acknowledged. So a tuple's new value
//! is on every copy before its latch is released, and a backup is never behind
//! what the primary's readers saw. Latch words and READs stay on the primary.

use std::future::Future;
use std::pin::Pin;

use verbs::worker::Qp;
use verbs::wr::{RemoteAddr, WorkRequest};

use dmkv_api::metadata::TableDescription;

use super::copies::resolve_all;
use super::fanout::syncing_targets;
use crate::error::KvError;
use crate::ptr::RemotePtr;
use crate::remote::{Links, Target, charge, completion_error, execute, join_all, post_error};
use crate::stats::OpStats;

/// A copy of a table's memory on another memnode: its queue pair and how an
/// address of the primary's copy translates to it (the same offset from another
/// region base).
#[derive(Clone)]
pub(crate) struct Mirror {
    /// The memnode holding the copy.
    memnode: u64,
    qp: Qp,
    rkey: u32,
    /// Added (wrapping) to a primary's virtual address.
    delta: u64,
}

impl std::fmt::Debug for Mirror {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Mirror")
            .field("rkey", &self.rkey)
            .field("delta", &self.delta)
            .finish()
    }
}

impl Mirror {
    /// The memnode holding the copy.
    pub(crate) fn memnode(&self) -> u64 {
        self.memnode
    }

    /// The mirror's address of the primary's `at`.
    pub(crate) fn translate(&self, at: RemoteAddr) -> RemoteAddr {
        RemoteAddr::new(self.rkey, at.va.wrapping_add(self.delta))
    }
}

/// The primary's copy of the `len` bytes at `ptr` (its memnode and address) and
/// a [`Mirror`] for every other member and syncing member of its set.
pub(crate) fn primary_and_mirrors(
    links: &Links,
    table: &TableDescription,
    ptr: RemotePtr,
    len: u64,
) -> Result<(Target, Vec<Mirror>), KvError> {
    let mut all = resolve_all(links, table, ptr, len)?.into_iter();
    let primary = all
        .next()
        .ok_or_else(|| KvError::corrupt("a replica set without members"))?;
    let others: Vec<Target> = all.chain(syncing_targets(links, table, ptr, len)).collect();
    let mut mirrors = Vec::with_capacity(others.len());
    for t in others {
        let link = links
            .get(t.memnode)
            .ok_or_else(|| links.missing(t.memnode))?;
        mirrors.push(Mirror {
            memnode: t.memnode,
            qp: link.qp,
            rkey: t.addr.rkey,
            delta: t.addr.va.wrapping_sub(primary.addr.va),
        });
    }
    Ok((primary, mirrors))
}

/// WRITE on every mirror what the WRITEs of `batch` (addressed to the primary)
/// write, in one round trip (none when the batch writes nothing or there are no
/// mirrors), and wait until every mirror acknowledged.
pub(crate) async fn write_mirrors(
    mirrors: &[Mirror],
    batch: &[WorkRequest],
    stats: &mut OpStats,
) -> Result<(), KvError> {
    let writes: Vec<(RemoteAddr, &Vec<u8>)> = batch
        .iter()
        .filter_map(|wr| match wr {
            WorkRequest::Write { remote, data, .. } => Some((*remote, data)),
            _ => None,
        })
        .collect();
    if writes.is_empty() || mirrors.is_empty() {
        return Ok(());
    }
    if let [only] = mirrors {
        let wrs = writes
            .iter()
            .map(|(at, data)| WorkRequest::write(only.translate(*at), data.to_vec()))
            .collect();
        for c in execute(&only.qp, wrs, stats).await? {
            c.result.map_err(completion_error)?;
        }
        return Ok(());
    }
    let mut futures: Vec<Pin<Box<dyn Future<Output = _>>>> = Vec::new();
    for m in mirrors {
        let wrs: Vec<WorkRequest> = writes
            .iter()
            .map(|(at, data)| WorkRequest::write(m.translate(*at), data.to_vec()))
            .collect();
        charge(&m.qp, &wrs, stats);
        let qp = m.qp.clone();
        futures.push(Box::pin(async move { qp.execute(wrs).await }));
    }
    stats.round_trips += 1;
    for r in join_all(futures).await {
        for c in r.map_err(post_error)? {
            c.result.map_err(completion_error)?;
        }
    }
    Ok(())
}
