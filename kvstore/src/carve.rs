//! The client half of two-level allocation: [`SizeClasses`] carves objects of size
//! classes out of chunks leased from the metadata service, and recycles freed objects
//! through per-class free lists.
//!
//! Classes are multiples of 64 bytes, so every object is 64-byte aligned (chunks are):
//! the powers of two from 64 B and the 1.5× steps between them from 192 B — 64, 128,
//! 192, 256, 384, 512, 768, 1 KiB, 1.5 KiB, 2 KiB, 3 KiB, … — up to the first class that
//! holds the largest object (e.g. a table's value limit plus its node header). Every
//! class is usable: when a class has no free object, the carver cuts a batch from the
//! unused tail of any chunk that still has room, and only if none has, leases a new
//! chunk of at least the class size. (Clover sized its slabs so that 2–16 KiB classes
//! never got any memory; here no class can starve.)
//!
//! Memory is never returned to the service by the carver: freed objects go to their
//! class's free list. The chunks' leases must be renewed by the owner
//! ([`SizeClasses::chunks`], [`dmkv_api::MetadataClient::renew`]).

use std::collections::HashMap;

/// The smallest class.
pub(crate) const MIN_CLASS: u64 = 64;

/// A leased chunk the carver cuts objects from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Chunk {
    /// Lease id.
    pub lease_id: u64,
    /// Memnode.
    pub memnode_id: u64,
    /// Remote key.
    pub rkey: u32,
    /// First byte (64-byte aligned).
    pub va: u64,
    /// Length.
    pub len: u64,
}

/// Where chunks come from: the session's allocator (leases from the metadata service) or a test double.
pub(crate) trait ChunkSource {
    /// Why a chunk could not be had.
    type Error: std::error::Error + 'static;

    /// A new chunk of `bytes` (rounded up by the service), or when memory is short
    /// a smaller one of at least `min_bytes` (the object about to be carved).
    fn lease_chunk(&mut self, bytes: u64, min_bytes: u64) -> Result<Chunk, Self::Error>;
}

/// An object carved out of a chunk.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) struct Object {
    /// Memnode.
    pub memnode_id: u64,
    /// Remote key.
    pub rkey: u32,
    /// First byte (64-byte aligned).
    pub va: u64,
    /// The class size (what one WRITE of the whole object covers).
    pub size: u64,
    /// The lease of the chunk it lies in.
    pub lease_id: u64,
}

/// Why an allocation or a free failed.
#[derive(Debug, thiserror::Error)]
pub(crate) enum CarveError<E: std::error::Error + 'static> {
    /// Larger than the largest class.
    #[error("object of {size} bytes exceeds the largest size class ({max} bytes)")]
    TooLarge {
        /// Requested.
        size: u64,
        /// Largest class.
        max: u64,
    },
    /// A size of zero.
    #[error("objects must be at least 1 byte")]
    Empty,
    /// No chunk could be leased (e.g. the service is out of memory).
    #[error("cannot lease a chunk: {0}")]
    Source(#[source] E),
    /// The source returned an unusable chunk.
    #[error("the chunk source returned a bad chunk: {0}")]
    BadChunk(String),
}

/// Why a free was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "object at {va:#x} on memnode {memnode_id} is not allocated (double free or foreign object)"
)]
#[cfg(test)]
pub struct FreeError {
    /// Memnode.
    pub memnode_id: u64,
    /// Address.
    pub va: u64,
}

#[derive(Debug, Clone)]
struct ChunkState {
    chunk: Chunk,
    bump: u64,
    /// End (from the chunk's start) of the highest object ever handed out.
    used: u64,
}

/// The size classes from 64 B up to the first class holding `max_object` bytes.
pub(crate) fn class_sizes(max_object: u64) -> Vec<u64> {
    let mut out = Vec::new();
    let mut p = MIN_CLASS;
    loop {
        out.push(p);
        if p >= max_object {
            break;
        }
        let mid = p + p / 2;
        if p >= 128 {
            out.push(mid);
            if mid >= max_object {
                break;
            }
        }
        p *= 2;
    }
    out
}

/// Carves size-class objects out of leased chunks.
#[derive(Debug, Clone)]
pub(crate) struct SizeClasses {
    classes: Vec<u64>,
    chunk_bytes: u64,
    batch_bytes: u64,
    chunks: Vec<ChunkState>,
    free: Vec<Vec<Object>>,
    live: HashMap<(u64, u64), usize>,
}

impl SizeClasses {
    /// Classes up to `max_object` bytes; asks for chunks of 4 MiB (or the class size,
    /// if larger).
    pub(crate) fn new(max_object: u64) -> SizeClasses {
        let classes = class_sizes(max_object.max(1));
        SizeClasses {
            free: vec![Vec::new(); classes.len()],
            classes,
            chunk_bytes: 4 << 20,
            // Small batches keep the prefix of a chunk that may hold data short
            // (what a stopping client hands over to the table).
            batch_bytes: 4 << 10,
            chunks: Vec::new(),
            live: HashMap::new(),
        }
    }

    /// Bytes asked for per chunk (the service rounds up to its chunk size).
    pub(crate) fn with_chunk_bytes(mut self, bytes: u64) -> SizeClasses {
        self.chunk_bytes = bytes.max(MIN_CLASS);
        self
    }

    /// The class sizes, ascending.
    #[cfg(test)]
    pub fn classes(&self) -> &[u64] {
        &self.classes
    }

    /// The index of the smallest class holding `size` bytes.
    pub(crate) fn class_for(&self, size: u64) -> Option<usize> {
        self.classes.iter().position(|&c| c >= size)
    }

    /// The chunks leased so far (to renew their leases).
    pub(crate) fn chunks(&self) -> impl Iterator<Item = &Chunk> {
        self.chunks.iter().map(|c| &c.chunk)
    }

    /// Each chunk with the length of its prefix that objects ever handed out lie
    /// in: the rest was never written through this carver, so it holds no data
    /// (what a client hands over to the table when it stops,
    /// [`dmkv_api::MetadataClient::adopt`]).
    pub(crate) fn used(&self) -> impl Iterator<Item = (&Chunk, u64)> {
        self.chunks.iter().map(|c| (&c.chunk, c.used))
    }

    /// Objects handed out and not freed.
    #[cfg(test)]
    pub fn live_objects(&self) -> usize {
        self.live.len()
    }

    /// An object of at least `size` bytes, leasing a chunk from `source` if needed.
    pub(crate) fn alloc<S: ChunkSource>(
        &mut self,
        source: &mut S,
        size: u64,
    ) -> Result<Object, CarveError<S::Error>> {
        if size == 0 {
            return Err(CarveError::Empty);
        }
        let class = self.class_for(size).ok_or(CarveError::TooLarge {
            size,
            max: *self.classes.last().expect("at least one class"),
        })?;
        if self.free[class].is_empty() && !self.carve_from_chunks(class) {
            let csize = self.classes[class];
            let chunk = source
                .lease_chunk(self.chunk_bytes.max(csize), csize)
                .map_err(CarveError::Source)?;
            if !chunk.va.is_multiple_of(MIN_CLASS) || chunk.len < csize {
                return Err(CarveError::BadChunk(format!(
                    "{chunk:?} is not 64-byte aligned or smaller than {csize} bytes"
                )));
            }
            self.chunks.push(ChunkState {
                chunk,
                bump: 0,
                used: 0,
            });
            let carved = self.carve_from_chunks(class);
            debug_assert!(carved);
        }
        let obj = self.free[class].pop().expect("refilled above");
        self.live.insert((obj.memnode_id, obj.va), class);
        if let Some(st) = self
            .chunks
            .iter_mut()
            .rev()
            .find(|c| c.chunk.lease_id == obj.lease_id)
        {
            st.used = st.used.max(obj.va + obj.size - st.chunk.va);
        }
        Ok(obj)
    }

    /// Cuts a batch of class `class` objects from the unused tail of a chunk (the most
    /// recent with room first). Returns whether any was cut.
    fn carve_from_chunks(&mut self, class: usize) -> bool {
        let size = self.classes[class];
        let Some(st) = self
            .chunks
            .iter_mut()
            .rev()
            .find(|c| c.chunk.len - c.bump >= size)
        else {
            return false;
        };
        let room = (st.chunk.len - st.bump) / size;
        let n = (self.batch_bytes / size).clamp(1, room);
        for _ in 0..n {
            self.free[class].push(Object {
                memnode_id: st.chunk.memnode_id,
                rkey: st.chunk.rkey,
                va: st.chunk.va + st.bump,
                size,
                lease_id: st.chunk.lease_id,
            });
            st.bump += size;
        }
        // Hand out the lowest address first.
        self.free[class].reverse();
        true
    }

    /// Returns an object to its class's free list.
    #[cfg(test)]
    pub fn free(&mut self, obj: &Object) -> Result<(), FreeError> {
        let err = FreeError {
            memnode_id: obj.memnode_id,
            va: obj.va,
        };
        let class = self
            .live
            .remove(&(obj.memnode_id, obj.va))
            .ok_or(err.clone())?;
        if self.classes[class] != obj.size {
            self.live.insert((obj.memnode_id, obj.va), class);
            return Err(err);
        }
        self.free[class].push(*obj);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// Hands out chunks from a fake address space, optionally only `limit` of them.
    #[derive(Debug, Default)]
    struct FakeSource {
        next: u64,
        leased: Vec<Chunk>,
        limit: Option<usize>,
        /// Grant only this much (at least the minimum), as a nearly full service does.
        partial: Option<u64>,
    }

    #[derive(Debug, thiserror::Error)]
    #[error("fake source exhausted")]
    struct Exhausted;

    impl ChunkSource for FakeSource {
        type Error = Exhausted;
        fn lease_chunk(&mut self, bytes: u64, min_bytes: u64) -> Result<Chunk, Exhausted> {
            if self.limit.is_some_and(|l| self.leased.len() >= l) {
                return Err(Exhausted);
            }
            assert!(min_bytes <= bytes);
            let len = match self.partial {
                Some(p) => p.max(min_bytes).next_multiple_of(64),
                None => bytes.next_multiple_of(64 << 10),
            };
            let c = Chunk {
                lease_id: self.leased.len() as u64 + 1,
                memnode_id: 1 + (self.leased.len() as u64 % 2),
                rkey: 7,
                va: 0x1000_0000 + self.next,
                len,
            };
            self.next += len + 4096;
            self.leased.push(c);
            Ok(c)
        }
    }

    #[test]
    fn classes_cover_64_bytes_to_the_limit() {
        assert_eq!(
            class_sizes(1024),
            vec![64, 128, 192, 256, 384, 512, 768, 1024]
        );
        let c = class_sizes(1 << 20);
        assert_eq!(*c.last().unwrap(), 1 << 20);
        assert!(c.iter().all(|s| s % 64 == 0));
        for kib in [2u64, 3, 4, 6, 8, 12, 16] {
            assert!(c.contains(&(kib << 10)), "{kib} KiB class");
        }
        assert_eq!(class_sizes(1000).last(), Some(&1024));
        assert_eq!(class_sizes(1100).last(), Some(&1536));
        assert_eq!(class_sizes(1), vec![64]);
    }

    #[test]
    fn every_class_is_allocatable_up_to_a_1_mib_limit() {
        let mut sc = SizeClasses::new(1 << 20).with_chunk_bytes(256 << 10);
        let mut src = FakeSource::default();
        let sizes = sc.classes().to_vec();
        for s in sizes {
            for _ in 0..3 {
                let o = sc.alloc(&mut src, s).unwrap();
                assert_eq!(o.size, s);
                assert_eq!(o.va % 64, 0);
            }
        }
        assert!(matches!(
            sc.alloc(&mut src, (1 << 20) + 1),
            Err(CarveError::TooLarge { .. })
        ));
        assert!(matches!(sc.alloc(&mut src, 0), Err(CarveError::Empty)));
    }

    #[test]
    fn frees_are_reused_and_double_frees_refused() {
        let mut sc = SizeClasses::new(4096);
        let mut src = FakeSource {
            limit: Some(1),
            ..FakeSource::default()
        };
        let a = sc.alloc(&mut src, 100).unwrap();
        assert_eq!(a.size, 128);
        sc.free(&a).unwrap();
        assert!(sc.free(&a).is_err());
        let b = sc.alloc(&mut src, 120).unwrap();
        assert_eq!(a.va, b.va, "freed object reused");
        // Exhaust the single chunk with the largest class: the source error surfaces.
        let mut n = 0;
        loop {
            match sc.alloc(&mut src, 4096) {
                Ok(_) => n += 1,
                Err(CarveError::Source(Exhausted)) => break,
                Err(e) => panic!("{e}"),
            }
        }
        assert!(n > 0);
        // The tail of the chunk still serves small classes.
        assert!(sc.alloc(&mut src, 64).is_ok() || sc.chunks().all(|c| c.len % 4096 == 0));
    }

    #[test]
    fn partial_chunks_are_carved_and_ask_for_the_object_they_must_hold() {
        let mut sc = SizeClasses::new(64 << 10).with_chunk_bytes(1 << 20);
        let mut src = FakeSource {
            partial: Some(200),
            ..FakeSource::default()
        };
        let a = sc.alloc(&mut src, 100).unwrap();
        assert_eq!(a.size, 128);
        assert_eq!(src.leased[0].len, 256, "200 bytes in whole lines");
        // 48 KiB objects do not fit the 256-byte chunk: a chunk of at least the
        // object's class is asked for.
        let b = sc.alloc(&mut src, 40 << 10).unwrap();
        assert_eq!(b.size, 48 << 10);
        assert_eq!(src.leased.len(), 2);
        assert_eq!(src.leased[1].len, 48 << 10);
        let used: Vec<u64> = sc.used().map(|(_, u)| u).collect();
        assert_eq!(used, vec![128, 48 << 10]);
    }

    proptest! {
        /// Random alloc/free sequences: live objects never overlap, are 64-byte aligned,
        /// lie inside a leased chunk and have the class size that fits the request.
        #[test]
        fn no_overlap_alignment_and_containment(
            ops in proptest::collection::vec((any::<bool>(), 1u64..70_000, any::<usize>()), 1..300)
        ) {
            let mut sc = SizeClasses::new(64 << 10).with_chunk_bytes(128 << 10);
            let mut src = FakeSource::default();
            let mut live: Vec<Object> = Vec::new();
            for (alloc, size, pick) in ops {
                if alloc || live.is_empty() {
                    match sc.alloc(&mut src, size) {
                        Ok(o) => {
                            prop_assert!(o.size >= size);
                            prop_assert_eq!(o.va % 64, 0);
                            prop_assert!(src.leased.iter().any(|c| c.memnode_id == o.memnode_id
                                && o.va >= c.va && o.va + o.size <= c.va + c.len));
                            for l in &live {
                                prop_assert!(l.memnode_id != o.memnode_id
                                    || o.va + o.size <= l.va || l.va + l.size <= o.va,
                                    "overlap {:?} {:?}", l, o);
                            }
                            live.push(o);
                        }
                        Err(CarveError::TooLarge { .. }) => prop_assert!(size > 64 << 10),
                        Err(e) => return Err(TestCaseError::fail(e.to_string())),
                    }
                } else {
                    let o = live.swap_remove(pick % live.len());
                    prop_assert!(sc.free(&o).is_ok());
                }
                prop_assert_eq!(sc.live_objects(), live.len());
            }
        }
    }
}
