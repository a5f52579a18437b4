//! What Clover keeps per session (tail hints, superseded nodes waiting for their
//! shortcut) and per client (chain ids), in the slots the shell offers
//! ([`crate::index`]).

use crate::key_map::KeyMap;
use std::cell::RefCell;
use std::collections::HashMap;
use std::rc::Rc;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use dmkv_api::metadata::PublishedChain;

use super::chain_ids::IdBlock;
use super::directory::Directory;
use super::publish::Pending;
use super::reclaim::{Reclaimer, Superseded};
use super::shortcut::Shortcut;
use crate::alloc::MemoryStats;
use crate::index::{ClientIndex, SessionIndex};
use crate::ptr::RemotePtr;
use crate::session::SessionCore;

/// A key's chain: its id and where its root is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct ChainRef {
    /// The chain id (also at offset 8 of every node and of the root).
    pub chain_id: u64,
    /// The root object.
    pub root: RemotePtr,
}

/// Where this session last saw the tail of a chain.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Hint {
    /// The node.
    pub ptr: RemotePtr,
    /// Its generation.
    pub generation: u16,
    /// Its version.
    pub version: u32,
    /// Its size class.
    pub size_class: usize,
}

/// What a session caches per key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct ChainCache {
    /// The chain.
    pub chain: ChainRef,
    /// The last tail seen, if any.
    pub hint: Option<Hint>,
}

/// Entries in a session's hint cache before it is emptied (a crude bound).
const HINT_CACHE_LIMIT: usize = 1 << 18;
/// Entries in a session's map of tails it verified before it is emptied: only the
/// last grace period's matter.
const VERIFIED_LIMIT: usize = 1 << 14;
/// Entries kept in the shared chain cache before it is emptied (a crude bound).
const CHAIN_CACHE_LIMIT: usize = 1 << 20;

/// Clover's state in one session.
pub(crate) struct CloverSession {
    /// The cached chain and tail hint of keys, by table id and key.
    hints: RefCell<KeyMap<ChainCache>>,
    /// Tails this session read without a successor or linked itself, and when
    /// ([`super::known_tail`]).
    verified: RefCell<KeyMap<(Hint, Instant)>>,
    /// Nodes this session superseded, waiting for their key's shortcut to move on.
    reclaim: RefCell<Reclaimer>,
}

impl Default for CloverSession {
    fn default() -> Self {
        CloverSession {
            hints: RefCell::new(KeyMap::with_limit(HINT_CACHE_LIMIT)),
            verified: RefCell::new(KeyMap::with_limit(VERIFIED_LIMIT)),
            reclaim: RefCell::default(),
        }
    }
}

impl SessionIndex for CloverSession {
    fn clear_hints(&self) {
        self.hints.borrow_mut().clear();
        self.verified.borrow_mut().clear();
    }

    fn memory_stats(&self, stats: &mut MemoryStats) {
        stats.superseded = self.reclaim.borrow().len();
    }
}

/// Clover's state shared by the sessions of one client.
pub(crate) struct CloverShared {
    /// Chains of keys and the last tail a session of this client saw, by table id
    /// and key: a session that has not touched a key starts from what another one
    /// learnt (hints are validated like any other).
    chains: Mutex<KeyMap<ChainCache>>,
    /// Chain directories by table id (`None`: the table uses the metadata path).
    directories: Mutex<HashMap<u64, Option<Directory>>>,
    /// Leased chain ids not used yet, by table id.
    chain_ids: Mutex<HashMap<u64, IdBlock>>,
    /// Claimed mappings waiting to be published, by table id.
    published: Mutex<HashMap<u64, Pending>>,
}

impl Default for CloverShared {
    fn default() -> Self {
        CloverShared {
            chains: Mutex::new(KeyMap::with_limit(CHAIN_CACHE_LIMIT)),
            directories: Mutex::default(),
            chain_ids: Mutex::default(),
            published: Mutex::default(),
        }
    }
}

impl ClientIndex for CloverShared {
    fn forget_table(&self, id: u64) {
        lock(&self.chains).forget_table(id);
        lock(&self.directories).remove(&id);
        lock(&self.chain_ids).remove(&id);
    }
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// The Clover state of `core`'s session.
pub(crate) fn of(core: &SessionCore) -> Rc<CloverSession> {
    core.index_state::<CloverSession>()
}

/// Remember the tail of `key` a session just saw, for the session and for the other
/// sessions of its client.
pub(crate) fn remember_tail(core: &SessionCore, table: u64, key: &[u8], cache: ChainCache) {
    of(core).set_hint(table, key, cache);
    shared(core).set_tail(table, key, cache);
}

/// Of a session's cache of a key and its client's, the one to start from: the
/// client's when the session has none, or when it names a later tail of the same
/// chain (another session of the client wrote or read past the session's hint);
/// the session's otherwise (either is validated like any hint).
pub(crate) fn newer(mine: Option<ChainCache>, client: Option<ChainCache>) -> Option<ChainCache> {
    match (mine, client) {
        (Some(m), Some(c)) if m.chain == c.chain && later(c.hint, m.hint) => Some(c),
        (Some(m), _) => Some(m),
        (None, c) => c,
    }
}

/// Whether tail hint `a` names a later version than `b` (versions grow by one per
/// write and may wrap).
fn later(a: Option<Hint>, b: Option<Hint>) -> bool {
    match (a, b) {
        (Some(a), Some(b)) => (a.version.wrapping_sub(b.version) as i32) > 0,
        (Some(_), None) => true,
        (None, _) => false,
    }
}

/// Forget what `core`'s session and client cache about `key` (after corruption or
/// an unknown outcome).
pub(crate) fn forget(core: &SessionCore, table: u64, key: &[u8]) {
    of(core).forget(table, key);
    lock(&shared(core).chains).remove(table, key);
}

/// The Clover state shared by `core`'s client.
pub(crate) fn shared(core: &SessionCore) -> Arc<CloverShared> {
    core.client.shared_state::<CloverShared>()
}

impl CloverSession {
    /// The cached chain and tail hint of `key` in table `table`.
    pub(crate) fn hint(&self, table: u64, key: &[u8]) -> Option<ChainCache> {
        self.hints.borrow().get(table, key).copied()
    }

    /// Remember the chain and tail hint of `key`.
    pub(crate) fn set_hint(&self, table: u64, key: &[u8], c: ChainCache) {
        self.hints.borrow_mut().insert(table, key, c);
    }

    /// Forget what is cached about `key`.
    pub(crate) fn forget(&self, table: u64, key: &[u8]) {
        self.hints.borrow_mut().remove(table, key);
        self.verified.borrow_mut().remove(table, key);
    }

    /// Record that `tail` was `key`'s tail at some moment after `since`: read without
    /// a successor, or linked, by a round trip posted after `since` (so `since` bounds
    /// how old the knowledge is, whatever retransmissions delayed the answer).
    pub(crate) fn verified_tail(&self, table: u64, key: &[u8], tail: Hint, since: Instant) {
        self.verified.borrow_mut().insert(table, key, (tail, since));
    }

    /// The tail of `key` this session verified less than `within` ago, if any.
    pub(crate) fn recent_tail(&self, table: u64, key: &[u8], within: Duration) -> Option<Hint> {
        let (tail, at) = *self.verified.borrow().get(table, key)?;
        (at.elapsed() < within).then_some(tail)
    }

    /// Remember a node this session superseded.
    pub(crate) fn supersede(&self, s: Superseded) {
        self.reclaim.borrow_mut().supersede(s);
    }

    /// Superseded nodes waiting.
    pub(crate) fn superseded(&self) -> usize {
        self.reclaim.borrow().len()
    }

    /// Up to `n` roots whose shortcut was last checked before `before`.
    pub(crate) fn roots_to_check(&self, before: Instant, n: usize) -> Vec<RemotePtr> {
        self.reclaim.borrow().roots_to_check(before, n)
    }

    /// Hand the superseded nodes of `root` that `shortcut` has passed to the allocator.
    pub(crate) fn shortcut_seen(&self, core: &SessionCore, root: RemotePtr, shortcut: Shortcut) {
        let passed = self.reclaim.borrow_mut().passed(root, shortcut);
        if passed.is_empty() {
            return;
        }
        let now = Instant::now();
        let mut a = core.alloc.borrow_mut();
        for s in passed {
            a.reclaim(s.node, now);
        }
    }
}

impl CloverShared {
    /// The chain of `key` in table `table`, if a session of this client learnt it.
    pub(crate) fn chain(&self, table: u64, key: &[u8]) -> Option<ChainRef> {
        self.cached(table, key).map(|c| c.chain)
    }

    /// The chain of `key` and the last tail a session of this client saw, if any.
    pub(crate) fn cached(&self, table: u64, key: &[u8]) -> Option<ChainCache> {
        lock(&self.chains).get(table, key).copied()
    }

    /// Remember the chain of `key` (keeping a tail hint of the same chain).
    pub(crate) fn set_chain(&self, table: u64, key: &[u8], chain: ChainRef) {
        let mut g = lock(&self.chains);
        match g.get_mut(table, key) {
            Some(e) if e.chain == chain => {}
            Some(e) => *e = ChainCache { chain, hint: None },
            None => g.insert(table, key, ChainCache { chain, hint: None }),
        }
    }

    /// Remember the chain of `key` and the tail a session just saw.
    pub(crate) fn set_tail(&self, table: u64, key: &[u8], cache: ChainCache) {
        lock(&self.chains).insert(table, key, cache);
    }
}

impl CloverShared {
    /// The chain directory of table `table`, if this client asked for it already
    /// (`Some(None)`: the table has none).
    pub(crate) fn directory(&self, table: u64) -> Option<Option<Directory>> {
        lock(&self.directories).get(&table).copied()
    }

    /// Remember the chain directory of table `table`.
    pub(crate) fn set_directory(&self, table: u64, dir: Option<Directory>) {
        lock(&self.directories).insert(table, dir);
    }

    /// A leased chain id of table `table` not handed out yet.
    pub(crate) fn take_chain_id(&self, table: u64) -> Option<u64> {
        lock(&self.chain_ids)
            .get_mut(&table)
            .and_then(IdBlock::take)
    }

    /// Keep `block` as table `table`'s spare ids unless the current block has ids left.
    pub(crate) fn offer_chain_ids(&self, table: u64, block: IdBlock) {
        let mut g = lock(&self.chain_ids);
        let cur = g.entry(table).or_default();
        if cur.next >= cur.end {
            *cur = block;
        }
    }

    /// Queue a claimed mapping of table `table` (named `name`); whether the queue is
    /// due for publishing (`batch` mappings, a request body's worth, or the oldest
    /// older than `delay`).
    pub(crate) fn queue_published(
        &self,
        table: u64,
        name: &str,
        chain: PublishedChain,
        batch: usize,
        delay: std::time::Duration,
    ) -> bool {
        let mut g = lock(&self.published);
        let p = g.entry(table).or_default();
        if p.table.is_empty() {
            p.table = name.to_owned();
        }
        p.push(chain);
        p.due(batch, delay)
    }

    /// How many mappings of table `table` wait.
    pub(crate) fn queued_published(&self, table: u64) -> usize {
        lock(&self.published)
            .get(&table)
            .map_or(0, |p| p.chains.len())
    }

    /// The oldest queued mappings of table `table` for one call (at most `max`, and
    /// no more than one request body holds), with the table's name.
    pub(crate) fn take_published(
        &self,
        table: u64,
        max: usize,
    ) -> Option<(String, Vec<PublishedChain>)> {
        let mut g = lock(&self.published);
        let p = g.get_mut(&table)?;
        if p.chains.is_empty() {
            return None;
        }
        let taken = p.take_batch(max);
        Some((p.table.clone(), taken))
    }

    /// Put back mappings that failed to publish, ahead of the others.
    pub(crate) fn requeue_published(&self, table: u64, name: &str, chains: Vec<PublishedChain>) {
        let mut g = lock(&self.published);
        let p = g.entry(table).or_default();
        if p.table.is_empty() {
            p.table = name.to_owned();
        }
        p.requeue(chains);
    }

    /// Ids of the tables with mappings waiting.
    pub(crate) fn published_table_ids(&self) -> Vec<u64> {
        lock(&self.published)
            .iter()
            .filter(|(_, p)| !p.chains.is_empty())
            .map(|(id, _)| *id)
            .collect()
    }

    /// Ids of the tables named `name` with mappings waiting.
    pub(crate) fn published_tables(&self, name: &str) -> Vec<u64> {
        lock(&self.published)
            .iter()
            .filter(|(_, p)| p.table == name && !p.chains.is_empty())
            .map(|(id, _)| *id)
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cache(chain_id: u64, version: Option<u32>) -> ChainCache {
        let root = RemotePtr::new(1, 4096).unwrap();
        ChainCache {
            chain: ChainRef { chain_id, root },
            hint: version.map(|version| Hint {
                ptr: RemotePtr::new(1, 8192 + 64 * u64::from(version)).unwrap(),
                generation: 1,
                version,
                size_class: 1,
            }),
        }
    }

    #[test]
    fn a_session_starts_from_the_later_tail_of_the_same_chain() {
        let (old, new) = (cache(7, Some(3)), cache(7, Some(4)));
        assert_eq!(
            newer(Some(old), Some(new)),
            Some(new),
            "another session wrote"
        );
        assert_eq!(
            newer(Some(new), Some(old)),
            Some(new),
            "the session is ahead"
        );
        assert_eq!(newer(Some(old), Some(old)), Some(old));
        assert_eq!(newer(None, Some(old)), Some(old), "nothing of its own");
        assert_eq!(newer(Some(old), None), Some(old));
        assert_eq!(newer(None, None), None);
        // A tail beats no tail; no tail never replaces one.
        let bare = cache(7, None);
        assert_eq!(newer(Some(bare), Some(old)), Some(old));
        assert_eq!(newer(Some(old), Some(bare)), Some(old));
        // Another chain (the key was deleted and made again): the session's stays,
        // and its validation finds out.
        assert_eq!(newer(Some(old), Some(cache(8, Some(9)))), Some(old));
        // Versions wrap.
        let (last, wrapped) = (cache(7, Some(u32::MAX)), cache(7, Some(0)));
        assert_eq!(newer(Some(last), Some(wrapped)), Some(wrapped));
        assert_eq!(newer(Some(wrapped), Some(last)), Some(wrapped));
    }
}
