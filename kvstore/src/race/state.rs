//! A session's view of one RACE table: where its directory area is, the cached
//! directory entries, the arena new subtables are carved from, and the bootstrap
//! that initialises a fresh table ([`super::area`]).

use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::rc::Rc;
use std::time::{Duration, Instant};

use dmkv_api::metadata::{CreateLeaseRequest, TableDescription};

use super::area::{self, Entry, REGISTRY_COUNT_AT, Ready, STATE_AT, State};
use super::bucket::{Bucket, BucketHeader, Subtable};
use super::hash::{KeyHash, depth_mask};
use super::net::{cas_bulk, exchange, faa_wr, read_word, read_wr, words_of, write_wr};
use super::slot::is_tentative;
use crate::client::meta_error;
use crate::error::KvError;
use crate::index::SessionIndex;
use crate::ptr::RemotePtr;
use crate::remote::{atomic_value, read_bytes, write_done};
use crate::session::SessionCore;
use crate::stats::OpStats;

/// A chunk leased for subtables, carved from the front.
#[derive(Debug, Clone, Copy)]
struct Arena {
    memnode: u64,
    va: u64,
    len: u64,
    used: u64,
}

/// One RACE table as one session sees it.
pub(crate) struct TableState {
    /// The table's name.
    pub name: String,
    /// The catalog's directory generation this state was built for.
    pub generation: u64,
    /// The directory area.
    pub area: RemotePtr,
    /// Its length.
    pub area_len: u64,
    /// What the state word says.
    pub ready: Ready,
    /// Geometry of every subtable.
    pub geometry: Subtable,
    /// Memory nodes the table's memory lives on (that this session reaches).
    pub memnodes: Vec<u64>,
    entries: RefCell<Vec<u64>>,
    arena: RefCell<Option<Arena>>,
    last_renew: Cell<Instant>,
    /// The table's catalog entry as last seen (where the copies of its memory
    /// are; replaced when the table fails over).
    table: RefCell<Rc<TableDescription>>,
    /// Split locks seen held: primary entry index → (word, first seen).
    locks_seen: RefCell<HashMap<usize, (u64, Instant)>>,
    /// Tentative slots seen: slot address → (word, first seen).
    tentative_seen: RefCell<HashMap<RemotePtr, (u64, Instant)>>,
}

impl std::fmt::Debug for TableState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TableState")
            .field("name", &self.name)
            .field("area", &self.area)
            .field("ready", &self.ready)
            .finish()
    }
}

impl TableState {
    /// The directory depth.
    pub(crate) fn depth(&self) -> u8 {
        self.ready.depth
    }

    /// The entry index of a key.
    pub(crate) fn index_of(&self, hash: &KeyHash) -> usize {
        hash.subtable_index(self.ready.depth)
    }

    /// The table's catalog entry as last seen: where the copies of its memory are.
    pub(crate) fn table(&self) -> Rc<TableDescription> {
        self.table.borrow().clone()
    }

    /// Take `table` as the catalog entry if its replica sets (or syncing members)
    /// changed since: the table failed over, or a member is being brought up to
    /// date.
    pub(crate) fn follow(&self, table: &TableDescription) {
        let current = self.table();
        if current.replica_sets != table.replica_sets || current.syncing != table.syncing {
            *self.table.borrow_mut() = Rc::new(table.clone());
        }
    }

    /// The cached entry `index`.
    pub(crate) fn entry(&self, index: usize) -> Result<Entry, KvError> {
        let w = self.entries.borrow().get(index).copied().unwrap_or(0);
        Ok(Entry::unpack(w, self.ready.initial)?)
    }

    /// Remember entry `index` as read.
    pub(crate) fn set_entry(&self, index: usize, word: u64) {
        if let Some(e) = self.entries.borrow_mut().get_mut(index) {
            *e = word;
        }
    }

    /// Replace every cached entry.
    pub(crate) fn set_entries(&self, words: Vec<u64>) {
        *self.entries.borrow_mut() = words;
    }

    /// Address of entry `index`.
    pub(crate) fn entry_ptr(&self, index: usize) -> Result<RemotePtr, KvError> {
        self.area
            .checked_add(area::entry_at(index as u64))
            .ok_or_else(|| KvError::corrupt("directory entry outside the area"))
    }

    /// Read entry `index` (one round trip) and cache it.
    pub(crate) async fn refresh_entry(
        &self,
        core: &SessionCore,
        index: usize,
        stats: &mut OpStats,
    ) -> Result<(u64, Entry), KvError> {
        let w = read_word(core, &self.table(), self.entry_ptr(index)?, stats).await?;
        self.set_entry(index, w);
        Ok((w, Entry::unpack(w, self.ready.initial)?))
    }

    /// Read every entry (one round trip) and cache them.
    pub(crate) async fn refresh_all(
        &self,
        core: &SessionCore,
        stats: &mut OpStats,
    ) -> Result<(), KvError> {
        let n = 1u64 << self.ready.depth;
        let done = exchange(
            core,
            vec![read_wr(core, &self.table(), self.entry_ptr(0)?, 8 * n)?],
            stats,
        )
        .await?;
        self.set_entries(words_of(read_bytes(done.first())?));
        Ok(())
    }

    /// Note that the primary entry `index` holds split lock `word`; true when it has
    /// been held unchanged for longer than `timeout` (its holder may have died).
    pub(crate) fn lock_expired(&self, index: usize, word: u64, timeout: Duration) -> bool {
        let now = Instant::now();
        let mut seen = self.locks_seen.borrow_mut();
        if seen.len() > 1024 {
            seen.clear();
        }
        let e = seen.entry(index).or_insert((word, now));
        if e.0 != word {
            *e = (word, now);
        }
        now.duration_since(e.1) >= timeout
    }

    /// Note the slot words of a view (`(address, word)`, tentative or not); the
    /// tentative ones seen unchanged for at least `timeout` (their inserter may
    /// have died) are returned.
    pub(crate) fn stale_tentative(
        &self,
        slots: &[(RemotePtr, u64)],
        timeout: Duration,
    ) -> Vec<(RemotePtr, u64)> {
        let now = Instant::now();
        let mut map = self.tentative_seen.borrow_mut();
        if map.len() > 4096 {
            map.clear();
        }
        let mut stale = Vec::new();
        for &(addr, word) in slots {
            if !is_tentative(word) {
                if !map.is_empty() {
                    map.remove(&addr);
                }
                continue;
            }
            let e = map.entry(addr).or_insert((word, now));
            if e.0 != word {
                *e = (word, now);
            }
            if now.duration_since(e.1) >= timeout {
                stale.push((addr, word));
            }
        }
        stale
    }

    /// The image of an empty subtable whose buckets carry `header`.
    pub(crate) fn subtable_image(&self, header: BucketHeader) -> Vec<u8> {
        let bucket = Bucket::empty(header).encode();
        let mut out = Vec::with_capacity(self.geometry.bytes() as usize);
        for _ in 0..3 * self.geometry.groups() {
            out.extend_from_slice(&bucket);
        }
        out
    }

    /// Memory for a new subtable: carved from this session's arena chunk, leasing
    /// and registering a new chunk when it is used up.
    pub(crate) async fn alloc_subtable(
        &self,
        core: &SessionCore,
        stats: &mut OpStats,
    ) -> Result<RemotePtr, KvError> {
        let need = self.geometry.bytes();
        let fits = |a: &Arena| a.used + need <= a.len;
        let current = *self.arena.borrow();
        let mut a = match current {
            Some(a) if fits(&a) => a,
            _ => self.lease_arena(core, need, stats).await?,
        };
        let mut ptr = core.links.ptr_of(a.memnode, a.va + a.used)?;
        if ptr.raw() == 0 {
            // Zero names nothing (a zero entry word means the initial subtable).
            a.used += 64;
            if !fits(&a) {
                return Err(KvError::unavailable("subtable arena too small"));
            }
            ptr = core.links.ptr_of(a.memnode, a.va + a.used)?;
        }
        a.used += need;
        *self.arena.borrow_mut() = Some(a);
        Ok(ptr)
    }

    /// Lease a chunk for subtables and list it in the registry (before anything in
    /// it is published), so every session using the table renews it.
    async fn lease_arena(
        &self,
        core: &SessionCore,
        need: u64,
        stats: &mut OpStats,
    ) -> Result<Arena, KvError> {
        let pick = rand::random::<u32>() as usize % self.memnodes.len().max(1);
        let memnode = self.memnodes.get(pick).copied();
        let o = &core.client.options;
        stats.metadata_calls += 1;
        let lease = core
            .client
            .meta
            .create_lease(&CreateLeaseRequest {
                client: format!("table:{}:race", self.name),
                bytes: need.max(o.memory.chunk_bytes),
                // A nearly full memnode may grant less than a chunk: enough for
                // the subtable (and the word skipped at a region's base).
                min_bytes: Some(need.saturating_add(64)),
                memnode,
                ttl_ms: Some(u64::try_from(o.memory.lease_ttl.as_millis()).unwrap_or(u64::MAX)),
                // Subtables are table data: adopted by the table if no session
                // renews them any more.
                table: Some(self.name.clone()),
            })
            .map_err(|e| match e.status() {
                Some(507) => KvError::unavailable("out of memory for RACE subtables"),
                _ => meta_error(e),
            })?;
        core.grant_new_leases(true);
        let count = self
            .area
            .checked_add(REGISTRY_COUNT_AT)
            .ok_or_else(area_err)?;
        let done = exchange(core, faa_wr(core, &self.table(), count, 1)?, stats).await?;
        let slot = atomic_value(done.first())?;
        if slot >= area::registry_slots(self.area_len, self.ready.depth) {
            let _ = core.client.meta.free(lease.lease_id);
            return Err(KvError::unavailable(
                "the table's registry of subtable chunks is full",
            ));
        }
        let at = self
            .area
            .checked_add(area::registry_at(self.ready.depth) + 8 * slot)
            .ok_or_else(area_err)?;
        let done = exchange(
            core,
            write_wr(
                core,
                &self.table(),
                at,
                lease.lease_id.to_le_bytes().to_vec(),
            )?,
            stats,
        )
        .await?;
        for c in &done {
            write_done(Some(c))?;
        }
        Ok(Arena {
            memnode: lease.memnode_id,
            va: lease.va,
            len: lease.len,
            used: 0,
        })
    }

    /// Renew every registered subtable chunk when a third of the lease time has
    /// passed since the last renewal (reads the registry: one round trip).
    pub(crate) async fn renew_if_due(&self, core: &SessionCore) {
        let ttl = core.client.options.memory.lease_ttl;
        if self.last_renew.get().elapsed() < ttl / 3 {
            return;
        }
        self.last_renew.set(Instant::now());
        let mut stats = OpStats::default();
        if let Ok(ids) = self.registry(core, &mut stats).await {
            renew(core, &ids, &mut stats);
        }
        core.add_background(&stats);
    }

    async fn registry(&self, core: &SessionCore, stats: &mut OpStats) -> Result<Vec<u64>, KvError> {
        let count = read_word(
            core,
            &self.table(),
            self.area
                .checked_add(REGISTRY_COUNT_AT)
                .ok_or_else(area_err)?,
            stats,
        )
        .await?;
        let n = count.min(area::registry_slots(self.area_len, self.ready.depth));
        if n == 0 {
            return Ok(Vec::new());
        }
        let at = self
            .area
            .checked_add(area::registry_at(self.ready.depth))
            .ok_or_else(area_err)?;
        let done = exchange(core, vec![read_wr(core, &self.table(), at, 8 * n)?], stats).await?;
        Ok(words_of(read_bytes(done.first())?))
    }
}

fn area_err() -> KvError {
    KvError::corrupt("address outside the directory area")
}

fn renew(core: &SessionCore, ids: &[u64], stats: &mut OpStats) {
    let ttl = u64::try_from(core.client.options.memory.lease_ttl.as_millis()).ok();
    for &id in ids.iter().filter(|&&id| id != 0) {
        stats.metadata_calls += 1;
        let _ = core.client.meta.renew(id, ttl);
    }
}

/// The RACE tables one session has opened, by table id (RACE's state in a session).
#[derive(Default)]
pub(crate) struct RaceSession {
    tables: RefCell<HashMap<u64, Rc<TableState>>>,
}

impl SessionIndex for RaceSession {}

/// The session's state of `table`, bootstrapping it on first use: read the
/// directory area (initialising the table if nobody has), cache the entries, and
/// renew the registered subtable chunks.
pub(crate) async fn open(
    core: &Rc<SessionCore>,
    table: &TableDescription,
    stats: &mut OpStats,
) -> Result<Rc<TableState>, KvError> {
    let race = table.layout.race().ok_or_else(|| {
        KvError::InvalidArgument(format!("table {} is not a RACE table", table.name))
    })?;
    let opened = core.index_state::<RaceSession>();
    let known = opened.tables.borrow().get(&table.id).cloned();
    if let Some(s) = known
        && s.generation == race.generation
    {
        s.follow(table);
        s.renew_if_due(core).await;
        return Ok(s);
    }
    let dir = race.directory.as_ref().ok_or_else(|| {
        KvError::unavailable(format!(
            "the directory of table {} was lost with its memory node",
            table.name
        ))
    })?;
    let area_ptr = core.links.ptr_of(dir.memnode_id, dir.va)?;
    let depth = area::depth_for(dir.len)?;
    let (ready, arena) = bootstrap(core, area_ptr, depth, table, stats).await?;
    let geometry = Subtable::new(ready.groups())?;
    let memnodes: Vec<u64> = table
        .memnodes
        .iter()
        .copied()
        .filter(|m| core.links.get(*m).is_some())
        .collect();
    let state = Rc::new(TableState {
        name: table.name.clone(),
        generation: race.generation,
        area: area_ptr,
        area_len: dir.len,
        ready,
        geometry,
        memnodes: if memnodes.is_empty() {
            vec![dir.memnode_id]
        } else {
            memnodes
        },
        entries: RefCell::new(Vec::new()),
        table: RefCell::new(Rc::new(table.clone())),
        arena: RefCell::new(arena),
        last_renew: Cell::new(Instant::now()),
        locks_seen: RefCell::new(HashMap::new()),
        tentative_seen: RefCell::new(HashMap::new()),
    });
    state.refresh_all(core, stats).await?;
    let ids = state.registry(core, stats).await?;
    renew(core, &ids, stats);
    opened.tables.borrow_mut().insert(table.id, state.clone());
    Ok(state)
}

/// Read the state word until the table is ready, initialising it if nobody is.
async fn bootstrap(
    core: &Rc<SessionCore>,
    area_ptr: RemotePtr,
    depth: u8,
    table: &TableDescription,
    stats: &mut OpStats,
) -> Result<(Ready, Option<Arena>), KvError> {
    let state_ptr = area_ptr.checked_add(STATE_AT).ok_or_else(area_err)?;
    let timeout = core.client.options.retry.lock_timeout;
    let started = Instant::now();
    let mut seen: Option<(u64, Instant)> = None;
    let mut attempt = 0u32;
    loop {
        let word = read_word(core, table, state_ptr, stats).await?;
        let claim = match State::unpack(word)? {
            State::Ready(r) => return Ok((r, None)),
            State::Empty => Some((0, 0)),
            State::Initialising { attempt: a, .. } => {
                let first = match seen {
                    Some((w, at)) if w == word => at,
                    _ => {
                        seen = Some((word, Instant::now()));
                        Instant::now()
                    }
                };
                (first.elapsed() >= timeout).then_some((word, a.wrapping_add(1)))
            }
        };
        if let Some((compare, next)) = claim {
            let token = rand::random::<u32>() | 1;
            let mine = State::Initialising {
                token,
                attempt: next,
            }
            .pack();
            let done = cas_bulk(core, table, &[(state_ptr, compare, mine)], stats).await?;
            if done.first() == Some(&compare)
                && let Some(r) = initialise(core, area_ptr, depth, mine, table, stats).await?
            {
                return Ok(r);
            }
        }
        if started.elapsed() > 4 * timeout + Duration::from_secs(5) {
            return Err(KvError::unavailable(format!(
                "table {} is still being initialised by another client",
                table.name
            )));
        }
        core.backoff(attempt.min(8)).await;
        attempt += 1;
    }
}

/// Write the initial subtable and publish it; `None` when another client took over.
async fn initialise(
    core: &Rc<SessionCore>,
    area_ptr: RemotePtr,
    depth: u8,
    mine: u64,
    table: &TableDescription,
    stats: &mut OpStats,
) -> Result<Option<(Ready, Option<Arena>)>, KvError> {
    let state_ptr = area_ptr.checked_add(STATE_AT).ok_or_else(area_err)?;
    let groups = core.client.options.race.subtable_groups.max(1);
    let log2_groups = u8::try_from(groups.next_power_of_two().trailing_zeros())
        .unwrap_or(u8::MAX)
        .min(area::MAX_LOG2_GROUPS);
    let geometry = Subtable::new(1 << log2_groups)?;
    let dir = table
        .layout
        .race()
        .and_then(|r| r.directory.as_ref())
        .ok_or_else(|| KvError::unavailable("no directory"))?;
    let memnodes: Vec<u64> = table
        .memnodes
        .iter()
        .copied()
        .filter(|m| core.links.get(*m).is_some())
        .collect();
    // A provisional state to carve the first subtable from (entries are not used).
    let provisional = TableState {
        name: table.name.clone(),
        generation: 0,
        area: area_ptr,
        area_len: dir.len,
        ready: Ready {
            depth,
            log2_groups,
            initial: area_ptr,
        },
        geometry,
        memnodes: if memnodes.is_empty() {
            vec![dir.memnode_id]
        } else {
            memnodes
        },
        entries: RefCell::new(Vec::new()),
        table: RefCell::new(Rc::new(table.clone())),
        arena: RefCell::new(None),
        last_renew: Cell::new(Instant::now()),
        locks_seen: RefCell::new(HashMap::new()),
        tentative_seen: RefCell::new(HashMap::new()),
    };
    let initial = provisional.alloc_subtable(core, stats).await?;
    let image = provisional.subtable_image(BucketHeader::new(0, 0)?);
    let done = exchange(core, write_wr(core, table, initial, image)?, stats).await?;
    for c in &done {
        write_done(Some(c))?;
    }
    let ready = Ready {
        depth,
        log2_groups,
        initial,
    };
    let done = cas_bulk(
        core,
        table,
        &[(state_ptr, mine, State::Ready(ready).pack())],
        stats,
    )
    .await?;
    let arena = *provisional.arena.borrow();
    Ok((done.first() == Some(&mine)).then_some((ready, arena)))
}

/// The index of the primary entry of the subtable with this header's parent split:
/// a subtable of depth `d ≥ 1` came from splitting the one whose primary entry is
/// its suffix's low `d − 1` bits.
pub(crate) fn parent_primary(h: BucketHeader) -> Option<(usize, u8)> {
    let d = h.local_depth().checked_sub(1)?;
    Some(((u64::from(h.suffix()) & depth_mask(d)) as usize, d))
}
