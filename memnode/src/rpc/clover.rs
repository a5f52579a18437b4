//! Clover lookup-to-tail next to memory ([`dmkv_api::rpc_clover`]): from a node of a
//! key's chain the client has validated, follow successors to the tail.
//!
//! Every node is checked as a one-sided reader checks it (`kvstore::clover::locate`):
//! the key's chain id and key, the CRC, the predecessor's version plus one, and the
//! generation tag the link recorded; the start node must still carry the version and
//! generation the client saw. A node that fails (its memory reclaimed and reused, or
//! read while being written) hands the walk back, as does a successor on another
//! memory node, a chain longer than [`MAX_WALK`] and a value too large for a reply.
//! The walk only reads, through the queue pair's access scope.

use dmkv_api::clover_layout::{
    NODE_PREFIX, NodeError, header_generation, header_successor, parse_node,
};
use dmkv_api::rpc::RPC_MAX_DATA;
use dmkv_api::rpc_clover::{CloverWalk, MAX_WALK, Tail, WalkOutcome};
use dmkv_api::rpc_race::Deferral;
use verbs::mem::{AccessError, RemoteMemory};

/// A node read and checked: its fields, owned.
pub(super) struct Read {
    /// Its header word as read.
    pub header: u64,
    /// Its version.
    pub version: u32,
    /// Its size class index.
    pub class_index: u8,
    /// Its value.
    pub value: Vec<u8>,
}

/// Read the node at `offset`, first `guess` bytes, then its whole class if larger.
pub(super) fn read_node(
    w: &CloverWalk<'_>,
    memory: &dyn RemoteMemory,
    offset: u64,
    guess: usize,
) -> Result<Result<Read, Deferral>, AccessError> {
    let Some(va) = w.base_va.checked_add(offset) else {
        return Ok(Err(Deferral::Elsewhere));
    };
    let mut len = guess.max(NODE_PREFIX + w.key.len());
    for _ in 0..2 {
        let mut buf = vec![0u8; len];
        memory.read(w.rkey, va, &mut buf)?;
        match parse_node(&buf) {
            Ok(n) if n.chain_id == w.chain_id && n.key == w.key => {
                return Ok(Ok(Read {
                    header: n.header,
                    version: n.version,
                    class_index: n.class_index,
                    value: n.value.to_vec(),
                }));
            }
            Ok(_) | Err(NodeError::Invalid) => return Ok(Err(Deferral::Torn)),
            Err(NodeError::Truncated(need)) if need > len => len = need,
            Err(NodeError::Truncated(_)) => return Ok(Err(Deferral::Torn)),
        }
    }
    Ok(Err(Deferral::Torn))
}

/// Walk `w`'s chain to its tail in `memory`.
pub fn walk(w: &CloverWalk<'_>, memory: &dyn RemoteMemory) -> Result<WalkOutcome, AccessError> {
    let start = |n: &Read| n.version == w.version && header_generation(n.header) == w.generation;
    match walk_from(w, memory, w.start, start)? {
        Err(d) => Ok(WalkOutcome::Deferred(d)),
        Ok((_, cur)) if cur.value.len() + 22 > RPC_MAX_DATA => {
            Ok(WalkOutcome::Deferred(Deferral::TooLarge))
        }
        Ok((offset, cur)) => Ok(WalkOutcome::Tail(Tail {
            offset,
            header: cur.header,
            version: cur.version,
            class_index: cur.class_index,
            value: cur.value,
        })),
    }
}

/// Follow `w`'s chain from the node at `start`, which must pass `accept`, to the
/// first node without a successor: its offset and fields, or why the walk is handed
/// back. `w.start`, `w.version` and `w.generation` are not looked at.
pub(super) fn walk_from(
    w: &CloverWalk<'_>,
    memory: &dyn RemoteMemory,
    start: u64,
    accept: impl Fn(&Read) -> bool,
) -> Result<Result<(u64, Read), Deferral>, AccessError> {
    let mut offset = start;
    let mut cur = match read_node(w, memory, offset, NODE_PREFIX + w.key.len())? {
        Ok(n) if accept(&n) => n,
        Ok(_) => return Ok(Err(Deferral::Torn)),
        Err(d) => return Ok(Err(d)),
    };
    for _ in 0..MAX_WALK {
        let Ok(successor) = header_successor(cur.header) else {
            return Ok(Err(Deferral::Torn));
        };
        let Some((memnode, next, tag)) = successor else {
            return Ok(Ok((offset, cur)));
        };
        if memnode != w.pointer_memnode {
            return Ok(Err(Deferral::Elsewhere));
        }
        let guess = NODE_PREFIX + w.key.len() + cur.value.len();
        let n = match read_node(w, memory, next, guess)? {
            Ok(n) => n,
            Err(d) => return Ok(Err(d)),
        };
        if n.version != cur.version.wrapping_add(1) || header_generation(n.header) as u8 != tag {
            return Ok(Err(Deferral::Torn));
        }
        offset = next;
        cur = n;
    }
    Ok(Err(Deferral::Contended))
}

#[cfg(test)]
mod tests {
    use super::*;
    use dmkv_api::clover_layout::{
        HAS_SUCCESSOR, OWN_GEN_SHIFT, SUCC_GEN_SHIFT, SUCC_MEMNODE_SHIFT, TOMBSTONE, encode_node,
    };
    use proptest::prelude::*;
    use proptest::test_runner::{Config, RngSeed};
    use verbs::mem::{AccessFlags, MemoryTable, Region};

    const BASE: u64 = 0x2000_0000;
    const LEN: usize = 16384;

    fn memory() -> (MemoryTable, u32) {
        let table = MemoryTable::new();
        let region = Region::anonymous(LEN).expect("region");
        let info = table
            .register(std::sync::Arc::new(region), BASE, AccessFlags::ALL)
            .expect("register");
        (table, info.rkey)
    }

    fn header(generation: u16, next: Option<(u8, u64, u16)>, tombstone: bool) -> u64 {
        let mut h = u64::from(generation) << OWN_GEN_SHIFT;
        if tombstone {
            h |= TOMBSTONE;
        }
        if let Some((m, off, g)) = next {
            h |= HAS_SUCCESSOR
                | (u64::from(g as u8) << SUCC_GEN_SHIFT)
                | (u64::from(m) << SUCC_MEMNODE_SHIFT)
                | (off / 64);
        }
        h
    }

    /// A chain of `n` nodes of key `k` at offsets 0, 128, 256, …; versions 1..=n,
    /// generation 3 each; the last is the tail with value "v{n}".
    fn chain(mem: &MemoryTable, rkey: u32, n: u32) {
        for i in 0..n {
            let next = (i + 1 < n).then(|| (1u8, u64::from(i + 1) * 128, 3u16));
            let value = format!("v{}", i + 1);
            let b = encode_node(header(3, next, false), 99, i + 1, 1, b"k", value.as_bytes())
                .expect("node");
            mem.write(rkey, BASE + u64::from(i) * 128, &b)
                .expect("write");
        }
    }

    fn request(rkey: u32, start: u64, version: u32) -> CloverWalk<'static> {
        CloverWalk {
            rkey,
            base_va: BASE,
            pointer_memnode: 1,
            chain_id: 99,
            start,
            version,
            generation: 3,
            key: b"k",
        }
    }

    #[test]
    fn walks_to_the_tail() {
        let (mem, rkey) = memory();
        chain(&mem, rkey, 5);
        let out = walk(&request(rkey, 0, 1), &mem).expect("walk");
        let WalkOutcome::Tail(t) = out else {
            panic!("{out:?}")
        };
        assert_eq!((t.offset, t.version, t.value), (4 * 128, 5, b"v5".to_vec()));
        // From the middle, and from the tail itself.
        let out = walk(&request(rkey, 2 * 128, 3), &mem).expect("walk");
        assert!(matches!(out, WalkOutcome::Tail(t) if t.version == 5));
        let out = walk(&request(rkey, 4 * 128, 5), &mem).expect("walk");
        assert!(matches!(out, WalkOutcome::Tail(t) if t.version == 5));
    }

    #[test]
    fn a_node_that_fails_its_checks_hands_the_walk_back() {
        let (mem, rkey) = memory();
        chain(&mem, rkey, 3);
        // The start node is not the one the client saw.
        let out = walk(&request(rkey, 0, 2), &mem).expect("walk");
        assert_eq!(out, WalkOutcome::Deferred(Deferral::Torn));
        // A successor reused by another chain.
        let other = encode_node(header(3, None, false), 100, 2, 1, b"k", b"x").expect("node");
        mem.write(rkey, BASE + 128, &other).expect("write");
        let out = walk(&request(rkey, 0, 1), &mem).expect("walk");
        assert_eq!(out, WalkOutcome::Deferred(Deferral::Torn));
        // A successor on another node.
        let far =
            encode_node(header(3, Some((2, 128, 3)), false), 99, 1, 1, b"k", b"v1").expect("node");
        mem.write(rkey, BASE, &far).expect("write");
        let out = walk(&request(rkey, 0, 1), &mem).expect("walk");
        assert_eq!(out, WalkOutcome::Deferred(Deferral::Elsewhere));
        // Outside the region: refused.
        assert!(walk(&request(rkey, LEN as u64, 1), &mem).is_err());
    }

    proptest! {
        #![proptest_config(Config {
            cases: 256,
            rng_seed: RngSeed::Fixed(0xc10f),
            failure_persistence: None,
            ..Config::default()
        })]

        /// Arbitrary walks over arbitrary memory never panic and never change memory.
        #[test]
        fn arbitrary_walks_never_panic_or_write(
            words in proptest::collection::vec(any::<u64>(), 64),
            start in 0u64..(LEN as u64 + 256),
            version: u32,
            generation: u16,
        ) {
            let (mem, rkey) = memory();
            for (i, w) in words.iter().enumerate() {
                mem.write(rkey, BASE + 512 + 8 * i as u64, &w.to_le_bytes()).expect("fill");
            }
            chain(&mem, rkey, 4);
            let mut before = vec![0u8; LEN];
            mem.read(rkey, BASE, &mut before).expect("snapshot");
            let w = CloverWalk { start: start & !63, version, generation, ..request(rkey, 0, 1) };
            let _ = walk(&w, &mem);
            let mut after = vec![0u8; LEN];
            mem.read(rkey, BASE, &mut after).expect("snapshot");
            prop_assert_eq!(before, after);
        }
    }
}
