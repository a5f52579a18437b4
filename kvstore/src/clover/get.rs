//! Clover reads: find the tail ([`super::locate`]) and return its value, or
//! `NotFound` when the tail is a tombstone or the key has no chain yet. With the
//! `rpc` and `hybrid` access modes the walk along successors may go to the memory
//! node as one RPC.

use std::rc::Rc;

use dmkv_api::metadata::TableDescription;

use super::chain;
use super::locate::{hint_of, locate_with};
use super::state;
use super::state::ChainCache;
use crate::AccessMode;
use crate::error::KvError;
use crate::session::SessionCore;
use crate::stats::OpStats;

/// Read `key`, walking the chain as `mode` says ([`super::locate::locate_with`]).
pub(crate) async fn get(
    core: &Rc<SessionCore>,
    table: &TableDescription,
    key: &[u8],
    mode: AccessMode,
) -> Result<Vec<u8>, KvError> {
    let mut stats = OpStats::default();
    core.renew_if_due();
    let r = get_inner(core, table, key, mode, &mut stats).await;
    if matches!(r, Err(KvError::Corrupt(_))) {
        state::forget(core, table.id, key);
    }
    core.finish_op(stats);
    r
}

async fn get_inner(
    core: &Rc<SessionCore>,
    table: &TableDescription,
    key: &[u8],
    mode: AccessMode,
    stats: &mut OpStats,
) -> Result<Vec<u8>, KvError> {
    let Some(cache) = chain::open(core, table, key, false, stats).await? else {
        return Err(KvError::NotFound);
    };
    let since = std::time::Instant::now();
    let found = locate_with(core, table, key, cache, mode, stats).await?;
    let tail = Some(hint_of(&found.node));
    state::of(core).verified_tail(table.id, key, hint_of(&found.node), since);
    if tail != cache.hint {
        state::remember_tail(
            core,
            table.id,
            key,
            ChainCache {
                chain: cache.chain,
                hint: tail,
            },
        );
    }
    match found.node.value {
        Some(v) if !found.node.header.tombstone => Ok(v),
        _ => Err(KvError::NotFound),
    }
}
