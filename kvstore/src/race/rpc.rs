//! RACE operations as RPCs to the memory node holding the key's buckets
//! ([`dmkv_api::rpc_race`]): the request names the key's two combined buckets in
//! the subtable the session's directory cache gives, the region key and base that
//! turn slot pointers into addresses, and (for writes) the slot word of the new KV
//! block, which the session has written into its own memory first — on the same
//! queue pair in the same doorbell when the block lives on that node (the WRITE
//! then lands before the node receives the SEND), else one round trip earlier.
//!
//! The node runs the slot protocol next to memory and answers with the outcome, or
//! hands the operation back ([`RaceOutcome::Deferred`]) with nothing changed; the
//! caller then goes on one-sided.

use std::rc::Rc;

use dmkv_api::metadata::TableDescription;
use dmkv_api::race_layout::COMBINED_BYTES;
use dmkv_api::rpc::Request;
use dmkv_api::rpc_race::{CombinedAt, Deferral, RaceKind, RaceOutcome, RaceRequest};
use verbs::wr::WorkRequest;

use super::bucket::Subtable;
use super::hash::KeyHash;
use super::net::{Wr, exchange};
use super::state::TableState;
use crate::error::KvError;
use crate::remote::write_done;
use crate::replication::fanout::primary_target;
use crate::session::SessionCore;
use crate::stats::OpStats;

/// Call the node holding `key`'s buckets: `Ok(None)` when it cannot be called (it
/// runs no RPC workers, or the session's queue pair to it has no RPC endpoint).
/// `before` are WRITEs the request depends on (the new KV block). When the node
/// finds the session's directory entry stale, the entry is read again (one round
/// trip) and, if it names another subtable now, the call is made once more.
#[allow(clippy::too_many_arguments)]
pub(crate) async fn call(
    core: &Rc<SessionCore>,
    st: &TableState,
    table: &TableDescription,
    hash: &KeyHash,
    key: &[u8],
    kind: RaceKind,
    word: u64,
    before: Vec<Wr>,
    stats: &mut OpStats,
) -> Result<Option<RaceOutcome>, KvError> {
    let stale = Some(RaceOutcome::Deferred(Deferral::Stale));
    let idx = st.index_of(hash);
    let cached = st.entry(idx)?.subtable;
    let out = call_once(core, st, table, hash, key, kind, word, before, stats).await?;
    if out != stale {
        return Ok(out);
    }
    let (_, fresh) = st.refresh_entry(core, idx, stats).await?;
    if fresh.subtable == cached {
        // A split is moving the key: the one-sided path waits for it.
        return Ok(out);
    }
    stats.restarts += 1;
    call_once(core, st, table, hash, key, kind, word, Vec::new(), stats).await
}

/// One call of [`call`].
#[allow(clippy::too_many_arguments)]
async fn call_once(
    core: &Rc<SessionCore>,
    st: &TableState,
    table: &TableDescription,
    hash: &KeyHash,
    key: &[u8],
    kind: RaceKind,
    word: u64,
    before: Vec<Wr>,
    stats: &mut OpStats,
) -> Result<Option<RaceOutcome>, KvError> {
    let e = st.entry(st.index_of(hash))?;
    let [a, b] = st.geometry.candidates(hash);
    let choices = if a == b { vec![a] } else { vec![a, b] };
    let mut buckets = [None, None];
    let mut memnode = None;
    let mut region_rkey = 0;
    for (i, &bk) in choices.iter().enumerate() {
        let at = e
            .subtable
            .checked_add(Subtable::combined_offset(bk))
            .ok_or_else(|| KvError::corrupt("a combined bucket outside its memory node"))?;
        let t = primary_target(&core.links, table, at, COMBINED_BYTES as u64)?;
        if memnode.is_some_and(|m| m != t.memnode) {
            return Ok(None);
        }
        memnode = Some(t.memnode);
        region_rkey = t.addr.rkey;
        buckets[i] = Some(CombinedAt {
            va: t.addr.va,
            main_first: bk % 2 == 0,
        });
    }
    let Some(memnode) = memnode else {
        return Ok(None);
    };
    let Some((port, link, rkey)) = crate::rpc_port::endpoint(core, memnode, region_rkey)? else {
        return Ok(None);
    };
    // WRITEs to the node itself go in the RPC's doorbell; others one round trip before.
    let (same, elsewhere): (Vec<Wr>, Vec<Wr>) =
        before.into_iter().partition(|(m, _)| *m == memnode);
    if !elsewhere.is_empty() {
        for c in exchange(core, elsewhere, stats).await? {
            write_done(Some(&c))?;
        }
    }
    let pre: Vec<WorkRequest> = same.into_iter().map(|(_, wr)| wr).collect();
    let request = RaceRequest {
        kind,
        fingerprint: hash.fingerprint(),
        pointer_memnode: e.subtable.memnode(),
        rkey,
        base_va: link.base_va,
        // The low 32 bits: what bucket headers' suffixes are compared with.
        suffix: hash.h1 as u32,
        word,
        buckets,
        key,
    };
    let timeout = core.client.options.access.rpc_timeout;
    let reply = port
        .call(
            &core.worker,
            &link.qp,
            pre,
            Request::Race(request),
            timeout,
            stats,
        )
        .await?;
    let body = crate::rpc_port::ok_body(&reply, "RACE request")?;
    RaceOutcome::parse(body)
        .map(Some)
        .ok_or_else(|| KvError::corrupt("the memory node's RACE reply does not parse"))
}

pub(crate) use crate::rpc_port::no_workers;
