//! A session's remote-memory allocator: size-class objects carved from chunks leased
//! on a chosen memory node, and reuse of reclaimed objects with a new generation.
//!
//! Mechanism only: the reclamation queue (reclaim.rs) decides when an object may be handed back
//! (after the key's shortcut moved past it), and the grace period before reuse is a
//! setting. Objects are placed on the memory node the caller names, so a Clover node
//! lands on the memory node of its chain and its WRITE and the linking CAS share a
//! queue pair.
//!
//! Tables: every chunk is leased as a *data lease* of one table, and objects are
//! carved and recycled per table, so memory that held a table's data only ever
//! holds that table's data. When the session stops, it hands its chunks over to
//! their tables, trimmed to the prefix it used ([`Allocator::hand_over`]); when
//! it crashes, its leases expire and the service lets the tables adopt them
//! (never reusing memory that may hold live values while the table lives).
//!
//! Generations: an object reused after reclamation gets the generation after its
//! last one, so a stale pointer that remembers the old generation fails validation.
//! Memory never used by this session (a fresh chunk) starts at a random generation,
//! because the chunk may have held nodes of a client whose lease expired.

use std::collections::{HashMap, HashSet, VecDeque};
use std::time::{Duration, Instant};

use crate::carve::{CarveError, Chunk, ChunkSource, SizeClasses};
use dmkv_api::metadata::{CreateLeaseRequest, TableDescription};
use dmkv_api::{ClientError, MetadataClient};
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};

use crate::error::KvError;
use crate::size_class::MAX_CLASS;

impl<'a> From<&'a TableDescription> for TableRef<'a> {
    fn from(t: &'a TableDescription) -> TableRef<'a> {
        TableRef {
            id: t.id,
            name: &t.name,
        }
    }
}

/// An object handed out by the allocator.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Allocation {
    /// The table (metadata id) whose memory it is.
    pub table: u64,
    /// The memory node (metadata id).
    pub memnode: u64,
    /// Its first byte.
    pub va: u64,
    /// Its size class.
    pub size: usize,
    /// The generation to write into it.
    pub generation: u16,
}

/// Counters of a session's allocator.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct MemoryStats {
    /// Objects cut from leased chunks.
    pub carved: u64,
    /// Objects handed out again after reclamation.
    pub reused: u64,
    /// Objects reclaimed (handed back after their grace period started).
    pub reclaimed: u64,
    /// Objects waiting for their grace period to end.
    pub in_grace: usize,
    /// Superseded nodes waiting for their key's shortcut to move past them.
    pub superseded: usize,
    /// Chunks leased.
    pub chunks: usize,
    /// Bytes leased.
    pub leased_bytes: u64,
    /// Lease renewals that failed.
    pub renew_failures: u64,
}

/// The table an allocation is for: its id (objects are recycled per id) and its
/// name (data leases name it).
#[derive(Debug, Clone, Copy)]
pub(crate) struct TableRef<'a> {
    /// The table's id.
    pub id: u64,
    /// The table's name.
    pub name: &'a str,
}

#[derive(Debug, Clone, Copy)]
struct Freed {
    va: u64,
    next_generation: u16,
    ready_at: Instant,
}

/// Leases chunks on one memory node.
struct OnMemnode<'a> {
    client: &'a MetadataClient,
    name: &'a str,
    ttl_ms: u64,
    memnode: u64,
    table: &'a str,
}

impl ChunkSource for OnMemnode<'_> {
    type Error = ClientError;

    fn lease_chunk(&mut self, bytes: u64, min_bytes: u64) -> Result<Chunk, ClientError> {
        let l = self.client.create_lease(&CreateLeaseRequest {
            client: self.name.to_owned(),
            bytes,
            memnode: Some(self.memnode),
            ttl_ms: Some(self.ttl_ms),
            min_bytes: Some(min_bytes),
            table: Some(self.table.to_owned()),
        })?;
        Ok(Chunk {
            lease_id: l.lease_id,
            memnode_id: l.memnode_id,
            rkey: l.rkey,
            va: l.va,
            len: l.len,
        })
    }
}

/// See the [module documentation](self).
pub(crate) struct Allocator {
    /// Per (table, memory node).
    carvers: HashMap<(u64, u64), SizeClasses>,
    /// Per (table, memory node, size class).
    free: HashMap<(u64, u64, usize), VecDeque<Freed>>,
    name: String,
    ttl: Duration,
    chunk_bytes: u64,
    grace: Duration,
    last_renew: Instant,
    /// Leases of chunks in use that their table adopted already (not renewed).
    adopted: HashSet<u64>,
    rng: SmallRng,
    stats: MemoryStats,
}

impl Allocator {
    pub(crate) fn new(
        name: String,
        ttl: Duration,
        chunk_bytes: u64,
        grace: Duration,
        seed: u64,
    ) -> Allocator {
        Allocator {
            carvers: HashMap::new(),
            free: HashMap::new(),
            name,
            ttl,
            chunk_bytes,
            grace,
            last_renew: Instant::now(),
            adopted: HashSet::new(),
            rng: SmallRng::seed_from_u64(seed),
            stats: MemoryStats::default(),
        }
    }

    /// An object of class `size` for table `table` on memory node `memnode`: a
    /// reclaimed one of the table whose grace period is over, else a new one cut
    /// from a (possibly newly leased) chunk of the table.
    pub(crate) fn alloc(
        &mut self,
        meta: &MetadataClient,
        table: TableRef<'_>,
        memnode: u64,
        size: usize,
        now: Instant,
    ) -> Result<Allocation, KvError> {
        if let Some(q) = self.free.get_mut(&(table.id, memnode, size))
            && q.front().is_some_and(|f| f.ready_at <= now)
            && let Some(f) = q.pop_front()
        {
            self.stats.reused += 1;
            self.stats.in_grace = self.stats.in_grace.saturating_sub(1);
            return Ok(Allocation {
                table: table.id,
                memnode,
                va: f.va,
                size,
                generation: f.next_generation,
            });
        }
        let carver = self.carvers.entry((table.id, memnode)).or_insert_with(|| {
            SizeClasses::new(MAX_CLASS as u64).with_chunk_bytes(self.chunk_bytes)
        });
        let chunks_before = carver.chunks().count();
        let mut source = OnMemnode {
            client: meta,
            name: &self.name,
            ttl_ms: u64::try_from(self.ttl.as_millis()).unwrap_or(u64::MAX),
            memnode,
            table: table.name,
        };
        let obj = carver
            .alloc(&mut source, size as u64)
            .map_err(|e| match e {
                CarveError::Source(ClientError::Http { status: 507, .. }) => {
                    KvError::unavailable(format!("memnode {memnode} is out of memory"))
                }
                other => KvError::unavailable_because(
                    format!("allocating remote memory: {other}"),
                    other,
                ),
            })?;
        if carver.chunks().count() != chunks_before {
            self.stats.chunks = self.carvers.values().map(|c| c.chunks().count()).sum();
            self.stats.leased_bytes = self
                .carvers
                .values()
                .flat_map(|c| c.chunks())
                .map(|c| c.len)
                .sum();
        }
        self.stats.carved += 1;
        Ok(Allocation {
            table: table.id,
            memnode: obj.memnode_id,
            va: obj.va,
            size,
            generation: self.rng.random(),
        })
    }

    /// Hand back an object that held a node of generation `generation`; it is reused
    /// after the grace period, with the next generation.
    pub(crate) fn reclaim(&mut self, a: Allocation, now: Instant) {
        let grace = self.grace;
        self.reclaim_after(a, now, grace);
    }

    /// [`Allocator::reclaim`] with a grace period of its own (at least the setting's;
    /// the objects of one table always get the same one, so each free list stays in
    /// the order its objects become ready).
    pub(crate) fn reclaim_after(&mut self, a: Allocation, now: Instant, grace: Duration) {
        self.stats.reclaimed += 1;
        self.stats.in_grace += 1;
        self.free
            .entry((a.table, a.memnode, a.size))
            .or_default()
            .push_back(Freed {
                va: a.va,
                next_generation: a.generation.wrapping_add(1),
                ready_at: now + grace.max(self.grace),
            });
    }

    /// Hand back an object whose node was never linked (no reader can have a valid
    /// pointer to it): reusable at once, with the next generation.
    pub(crate) fn release_unlinked(&mut self, a: Allocation) {
        self.free
            .entry((a.table, a.memnode, a.size))
            .or_default()
            .push_front(Freed {
                va: a.va,
                next_generation: a.generation.wrapping_add(1),
                ready_at: Instant::now(),
            });
        self.stats.in_grace += 1;
    }

    /// Renew every lease when a third of the time to live has passed since the last
    /// renewal. Failures are counted, not returned: the memory stays usable until
    /// the lease really expires.
    pub(crate) fn renew_if_due(&mut self, meta: &MetadataClient, now: Instant) {
        if now.duration_since(self.last_renew) < self.ttl / 3 {
            return;
        }
        self.last_renew = now;
        let ttl = u64::try_from(self.ttl.as_millis()).ok();
        for c in self.carvers.values().flat_map(|c| c.chunks()) {
            if self.adopted.contains(&c.lease_id) {
                continue;
            }
            match meta.renew(c.lease_id, ttl) {
                Ok(_) => {}
                // The lease lapsed (e.g. the process was paused) and its table
                // adopted it: the memory stays the table's and usable; stop renewing.
                Err(e) if e.code() == Some("lease_owned_by_table") => {
                    self.adopted.insert(c.lease_id);
                }
                Err(_) => self.stats.renew_failures += 1,
            }
        }
    }

    /// Hand every chunk over to its table, trimmed to the prefix its objects lie in
    /// (the session stops: what it wrote stays with the table, the unused rest
    /// goes back to the free map at once instead of at the end of the lease).
    /// Failures are counted and otherwise harmless: the lease then expires and its
    /// table adopts it whole.
    pub(crate) fn hand_over(&mut self, meta: &MetadataClient) {
        for (c, used) in self.carvers.values().flat_map(|c| c.used()) {
            if self.adopted.contains(&c.lease_id) {
                continue;
            }
            if meta.adopt(c.lease_id, Some(used)).is_err() {
                self.stats.renew_failures += 1;
            }
        }
        self.carvers.clear();
        self.free.clear();
    }

    /// The counters (`superseded` is filled in by the session).
    pub(crate) fn stats(&self) -> MemoryStats {
        self.stats
    }
}
