//! Clover writes next to memory ([`dmkv_api::rpc_clover_link`]): find the tail of a
//! key's chain and link the client's new node after it, with the CAS one-sided
//! writers run (`kvstore::clover::write`), on the region's own atomics.
//!
//! 1. Read the key's root (its chain id must be the request's) and start from the
//!    client's hint when it still carries the version and generation the client
//!    saw, else from the node the root's shortcut word names; walk successors to the
//!    tail, checking every node as a one-sided reader does
//!    ([`super::clover::walk_from`]).
//! 2. Check the new node: it must already hold the key, the chain id and the header
//!    of an unlinked node of the request's generation (a tombstone for a delete).
//! 3. Check the write's condition against the tail (insert: a tombstone; update and
//!    delete: a live node); a failed condition links nothing.
//! 4. Write the tail's version plus one into the new node (outside its CRC; nobody
//!    reads an unlinked node) and CAS the tail's header from "no successor" to the
//!    link. A CAS that loses means another writer — one-sided or RPC — linked first:
//!    walk on from the old tail and try again, [`MAX_LINK_ATTEMPTS`] times in all,
//!    then hand the write back.
//!
//! The link CAS is the write's only change other clients can see, so a worker that
//! stops before it leaves the key as it was, and one that stops after it leaves the
//! write applied whole.

use std::sync::atomic::{AtomicBool, Ordering};

use dmkv_api::clover_layout::{
    HAS_SUCCESSOR, NODE_ALIGN, NODE_PREFIX, NodeError, OWN_GEN_SHIFT, ROOT_CHAIN_ID_AT, ROOT_READ,
    ROOT_SHORTCUT_AT, SHORTCUT_VERSION_BITS, SUCC_GEN_SHIFT, SUCC_LINE_BITS, SUCC_MEMNODE_SHIFT,
    TOMBSTONE, VERSION_AT, header_generation, parse_node, shortcut_target,
};
use dmkv_api::layout::SIZE_CLASSES;
use dmkv_api::rpc_clover::CloverWalk;
use dmkv_api::rpc_clover_link::{
    CloverLink, LinkKind, LinkOutcome, LinkedAfter, MAX_LINK_ATTEMPTS, NO_START,
};
use dmkv_api::rpc_race::Deferral;
use verbs::mem::RemoteMemory;

use super::clover::{Read, walk_from};
use super::race::Stop;

/// The little-endian word at `at` of `buf`.
fn le64(buf: &[u8], at: usize) -> Option<u64> {
    buf.get(at..at + 8)
        .and_then(|b| <[u8; 8]>::try_from(b).ok())
        .map(u64::from_le_bytes)
}

/// Whether the node at the request's node offset is the client's new node: the key,
/// the chain id and the header of an unlinked node of its generation.
fn new_node_ready(l: &CloverLink<'_>, memory: &dyn RemoteMemory) -> Result<bool, Stop> {
    let Some(va) = l.base_va.checked_add(l.node) else {
        return Ok(false);
    };
    let mut len = NODE_PREFIX + l.key.len();
    for _ in 0..2 {
        let mut buf = vec![0u8; len];
        memory.read(l.rkey, va, &mut buf)?;
        let mut expected = u64::from(l.node_generation) << OWN_GEN_SHIFT;
        if l.kind.is_delete() {
            expected |= TOMBSTONE;
        }
        match parse_node(&buf) {
            Ok(n) => {
                return Ok(n.chain_id == l.chain_id && n.key == l.key && n.header == expected);
            }
            Err(NodeError::Truncated(need)) if need > len => len = need,
            Err(_) => return Ok(false),
        }
    }
    Ok(false)
}

/// The walk fields of a link request.
fn as_walk<'a>(l: &CloverLink<'a>) -> CloverWalk<'a> {
    CloverWalk {
        rkey: l.rkey,
        base_va: l.base_va,
        pointer_memnode: l.pointer_memnode,
        chain_id: l.chain_id,
        start: l.start,
        version: l.start_version,
        generation: l.start_generation,
        key: l.key,
    }
}

/// Find the tail: from the hint when it is still the node the client saw, else from
/// the root's shortcut.
fn find_tail(
    l: &CloverLink<'_>,
    memory: &dyn RemoteMemory,
    shortcut: u64,
) -> Result<Result<(u64, Read), Deferral>, Stop> {
    let w = as_walk(l);
    if l.start != NO_START {
        let hinted = |n: &Read| {
            n.version == l.start_version && header_generation(n.header) == l.start_generation
        };
        if let Ok(found) = walk_from(&w, memory, l.start, hinted)? {
            return Ok(Ok(found));
        }
    }
    let (memnode, offset, class, low) = shortcut_target(shortcut);
    if memnode != l.pointer_memnode {
        return Ok(Err(Deferral::Elsewhere));
    }
    if usize::from(class) >= SIZE_CLASSES.len() {
        return Ok(Err(Deferral::Torn));
    }
    let mask = (1u32 << SHORTCUT_VERSION_BITS) - 1;
    let named = |n: &Read| n.version & mask == low;
    Ok(walk_from(&w, memory, offset, named)?)
}

/// Run the write `l` against `memory`. `crash`, when set, is cleared and stops the
/// worker right after the link CAS took effect ([`Stop::Crashed`]).
pub fn link(
    l: &CloverLink<'_>,
    memory: &dyn RemoteMemory,
    crash: &AtomicBool,
) -> Result<LinkOutcome, Stop> {
    let deferred = |d| Ok(LinkOutcome::Deferred(d));
    let line = l.node / NODE_ALIGN;
    if !l.node.is_multiple_of(NODE_ALIGN) || line >= 1 << SUCC_LINE_BITS {
        return deferred(Deferral::Torn);
    }
    let Some(root_va) = l.base_va.checked_add(l.root) else {
        return deferred(Deferral::Elsewhere);
    };
    let mut root = [0u8; ROOT_READ];
    memory.read(l.rkey, root_va, &mut root)?;
    let (Some(shortcut), Some(chain_id)) =
        (le64(&root, ROOT_SHORTCUT_AT), le64(&root, ROOT_CHAIN_ID_AT))
    else {
        return deferred(Deferral::Torn);
    };
    if chain_id != l.chain_id {
        return deferred(Deferral::Torn);
    }
    let (mut offset, mut tail) = match find_tail(l, memory, shortcut)? {
        Ok(found) => found,
        Err(d) => return deferred(d),
    };
    if !new_node_ready(l, memory)? {
        return deferred(Deferral::Torn);
    }
    let Some(node_va) = l.base_va.checked_add(l.node) else {
        return deferred(Deferral::Torn);
    };
    let succ = HAS_SUCCESSOR
        | (u64::from(l.node_generation as u8) << SUCC_GEN_SHIFT)
        | (u64::from(l.pointer_memnode) << SUCC_MEMNODE_SHIFT)
        | line;
    for _ in 0..MAX_LINK_ATTEMPTS {
        if offset == l.node {
            // The client's node is the tail: never link a node after itself.
            return deferred(Deferral::Torn);
        }
        let tombstone = tail.header & TOMBSTONE != 0;
        match (l.kind, tombstone) {
            (LinkKind::Insert, false) => return Ok(LinkOutcome::Exists),
            (LinkKind::Update | LinkKind::Delete, true) => return Ok(LinkOutcome::NotFound),
            _ => {}
        }
        let Some(tail_va) = l.base_va.checked_add(offset) else {
            return deferred(Deferral::Torn);
        };
        let version = tail.version.wrapping_add(1);
        memory.write(l.rkey, node_va + VERSION_AT as u64, &version.to_le_bytes())?;
        let compare = tail.header;
        let previous = memory.compare_swap(l.rkey, tail_va, compare, compare | succ)?;
        if previous == compare {
            if crash.swap(false, Ordering::SeqCst) {
                return Err(Stop::Crashed);
            }
            return Ok(LinkOutcome::Linked(LinkedAfter {
                offset,
                header: compare,
                version: tail.version,
                class_index: tail.class_index,
                shortcut,
            }));
        }
        // Another writer linked first: walk on from the old tail.
        let (was_version, was_generation) = (tail.version, header_generation(tail.header));
        let same =
            |n: &Read| n.version == was_version && header_generation(n.header) == was_generation;
        (offset, tail) = match walk_from(&as_walk(l), memory, offset, same)? {
            Ok(found) => found,
            Err(d) => return deferred(d),
        };
    }
    deferred(Deferral::Contended)
}

#[cfg(test)]
mod tests {
    use super::*;
    use dmkv_api::clover_layout::encode_node;
    use proptest::prelude::*;
    use proptest::test_runner::{Config, RngSeed};
    use verbs::mem::{AccessError, AccessFlags, MemoryTable, Region};

    const BASE: u64 = 0x3000_0000;
    const LEN: usize = 16384;
    const ROOT: u64 = 8192;
    const NEW: u64 = 12288;
    const CHAIN: u64 = 99;

    fn memory() -> (MemoryTable, u32) {
        let table = MemoryTable::new();
        let region = Region::anonymous(LEN).expect("region");
        let info = table
            .register(std::sync::Arc::new(region), BASE, AccessFlags::ALL)
            .expect("register");
        (table, info.rkey)
    }

    fn header(generation: u16, next: Option<u64>, tombstone: bool) -> u64 {
        let mut h = u64::from(generation) << OWN_GEN_SHIFT;
        if tombstone {
            h |= TOMBSTONE;
        }
        if let Some(off) = next {
            h |= HAS_SUCCESSOR | (3 << SUCC_GEN_SHIFT) | (1 << SUCC_MEMNODE_SHIFT) | (off / 64);
        }
        h
    }

    /// A chain of `n` nodes at 0, 128, …, versions 1..=n, generation 3; the first is
    /// a tombstone, the tail is a tombstone when `dead`. The root's shortcut names
    /// the first node.
    fn chain(mem: &MemoryTable, rkey: u32, n: u32, dead: bool) {
        for i in 0..n {
            let next = (i + 1 < n).then(|| u64::from(i + 1) * 128);
            let tomb = i == 0 || (dead && i + 1 == n);
            let value = if tomb {
                String::new()
            } else {
                format!("v{}", i + 1)
            };
            let b = encode_node(
                header(3, next, tomb),
                CHAIN,
                i + 1,
                1,
                b"k",
                value.as_bytes(),
            )
            .expect("node");
            mem.write(rkey, BASE + u64::from(i) * 128, &b)
                .expect("write");
        }
        // Shortcut to node 0: version 1, class 1, memnode 1, line 0.
        let shortcut: u64 = (1 << 43) | (1 << 38) | (1 << 30);
        let mut root = shortcut.to_le_bytes().to_vec();
        root.extend_from_slice(&CHAIN.to_le_bytes());
        mem.write(rkey, BASE + ROOT, &root).expect("root");
    }

    /// The client's new node at [`NEW`], generation 5, version 0 (a guess).
    fn new_node(mem: &MemoryTable, rkey: u32, kind: LinkKind) {
        let (h, v): (u64, &[u8]) = if kind.is_delete() {
            ((5 << OWN_GEN_SHIFT) | TOMBSTONE, b"")
        } else {
            (5 << OWN_GEN_SHIFT, b"new")
        };
        let b = encode_node(h, CHAIN, 0, 1, b"k", v).expect("node");
        mem.write(rkey, BASE + NEW, &b).expect("write");
    }

    fn request(rkey: u32, kind: LinkKind, start: u64, version: u32) -> CloverLink<'static> {
        CloverLink {
            rkey,
            base_va: BASE,
            pointer_memnode: 1,
            chain_id: CHAIN,
            kind,
            root: ROOT,
            start,
            start_version: version,
            start_generation: 3,
            node: NEW,
            node_generation: 5,
            key: b"k",
        }
    }

    fn snapshot(mem: &MemoryTable, rkey: u32) -> Vec<u8> {
        let mut all = vec![0u8; LEN];
        mem.read(rkey, BASE, &mut all).expect("read");
        all
    }

    fn word(mem: &MemoryTable, rkey: u32, off: u64) -> u64 {
        let mut b = [0u8; 8];
        mem.read(rkey, BASE + off, &mut b).expect("read");
        u64::from_le_bytes(b)
    }

    fn no_crash() -> AtomicBool {
        AtomicBool::new(false)
    }

    /// The new node is linked after the node at `tail` of version `v`.
    fn assert_linked_after(mem: &MemoryTable, rkey: u32, tail: u64, v: u32) {
        let h = word(mem, rkey, tail);
        assert_eq!(h & HAS_SUCCESSOR, HAS_SUCCESSOR);
        assert_eq!(h & ((1 << SUCC_LINE_BITS) - 1), NEW / 64);
        assert_eq!((h >> SUCC_GEN_SHIFT) as u8, 5);
        let mut b = vec![0u8; 128];
        mem.read(rkey, BASE + NEW, &mut b).expect("read");
        let n = parse_node(&b).expect("the new node parses");
        assert_eq!(n.version, v + 1);
        assert_eq!(b[dmkv_api::clover_layout::CLASS_AT], 1);
    }

    #[test]
    fn links_after_the_tail_from_a_hint_or_the_shortcut() {
        for start in [(0, 1), (256, 3), (NO_START, 0), (128, 7)] {
            let (mem, rkey) = memory();
            chain(&mem, rkey, 4, false);
            new_node(&mem, rkey, LinkKind::Update);
            let r = link(
                &request(rkey, LinkKind::Update, start.0, start.1),
                &mem,
                &no_crash(),
            );
            let Ok(LinkOutcome::Linked(after)) = r else {
                panic!("{start:?}: {r:?}")
            };
            assert_eq!((after.offset, after.version), (384, 4), "{start:?}");
            assert_eq!(after.header, header(3, None, false));
            assert_linked_after(&mem, rkey, 384, 4);
        }
    }

    #[test]
    fn conditions_are_decided_by_the_tail_and_change_nothing() {
        let cases = [
            (LinkKind::Insert, false, LinkOutcome::Exists),
            (LinkKind::Update, true, LinkOutcome::NotFound),
            (LinkKind::Delete, true, LinkOutcome::NotFound),
        ];
        for (kind, dead, want) in cases {
            let (mem, rkey) = memory();
            chain(&mem, rkey, 3, dead);
            new_node(&mem, rkey, kind);
            let before = snapshot(&mem, rkey);
            let r = link(&request(rkey, kind, 0, 1), &mem, &no_crash());
            assert_eq!(r, Ok(want), "{kind:?}");
            assert_eq!(snapshot(&mem, rkey), before, "{kind:?}");
        }
        // Insert after a tombstone, delete and put after a live tail.
        for (kind, dead) in [
            (LinkKind::Insert, true),
            (LinkKind::Delete, false),
            (LinkKind::Put, true),
        ] {
            let (mem, rkey) = memory();
            chain(&mem, rkey, 3, dead);
            new_node(&mem, rkey, kind);
            let r = link(&request(rkey, kind, 0, 1), &mem, &no_crash());
            assert!(matches!(r, Ok(LinkOutcome::Linked(_))), "{kind:?}: {r:?}");
            assert_linked_after(&mem, rkey, 256, 3);
        }
    }

    #[test]
    fn what_the_node_cannot_check_is_handed_back_unchanged() {
        let (mem, rkey) = memory();
        chain(&mem, rkey, 3, false);
        new_node(&mem, rkey, LinkKind::Put);
        let before = snapshot(&mem, rkey);
        let base = request(rkey, LinkKind::Put, 0, 1);
        let cases = [
            // Another chain's root.
            CloverLink {
                chain_id: CHAIN + 1,
                ..base
            },
            // The new node does not hold what the request says.
            CloverLink {
                node_generation: 6,
                ..base
            },
            CloverLink {
                kind: LinkKind::Delete,
                ..base
            },
            // A misaligned new node, a node that is the tail itself.
            CloverLink {
                node: NEW + 8,
                ..base
            },
            CloverLink { node: 256, ..base },
            // The shortcut on another memory node (the hint is stale).
            CloverLink {
                pointer_memnode: 2,
                start: NO_START,
                ..base
            },
        ];
        for (i, l) in cases.iter().enumerate() {
            let r = link(l, &mem, &no_crash());
            assert!(matches!(r, Ok(LinkOutcome::Deferred(_))), "case {i}: {r:?}");
            assert_eq!(snapshot(&mem, rkey), before, "case {i}");
        }
        // Refused memory: refused, nothing changed.
        let r = link(
            &CloverLink {
                rkey: rkey ^ 1,
                ..base
            },
            &mem,
            &no_crash(),
        );
        assert!(
            matches!(r, Err(Stop::Access(AccessError::UnknownRkey(_)))),
            "{r:?}"
        );
        let r = link(
            &CloverLink {
                root: LEN as u64,
                ..base
            },
            &mem,
            &no_crash(),
        );
        assert!(matches!(r, Err(Stop::Access(_))), "{r:?}");
        assert_eq!(snapshot(&mem, rkey), before);
    }

    #[test]
    fn a_crash_after_the_link_leaves_the_write_whole() {
        let (mem, rkey) = memory();
        chain(&mem, rkey, 2, false);
        new_node(&mem, rkey, LinkKind::Put);
        let crash = AtomicBool::new(true);
        let r = link(&request(rkey, LinkKind::Put, 0, 1), &mem, &crash);
        assert_eq!(r, Err(Stop::Crashed));
        assert!(!crash.load(Ordering::SeqCst));
        assert_linked_after(&mem, rkey, 128, 2);
    }

    /// Memory whose first CAS loses to another writer, which links its node (at
    /// 640, version tail + 1) after the same tail just before.
    struct Racing<'a> {
        mem: &'a MemoryTable,
        raced: AtomicBool,
    }

    impl RemoteMemory for Racing<'_> {
        fn read(&self, rkey: u32, va: u64, buf: &mut [u8]) -> Result<(), AccessError> {
            self.mem.read(rkey, va, buf)
        }
        fn write(&self, rkey: u32, va: u64, data: &[u8]) -> Result<(), AccessError> {
            self.mem.write(rkey, va, data)
        }
        fn compare_swap(
            &self,
            rkey: u32,
            va: u64,
            compare: u64,
            swap: u64,
        ) -> Result<u64, AccessError> {
            if !self.raced.swap(true, Ordering::SeqCst) {
                let other =
                    encode_node(header(3, None, false), CHAIN, 3, 1, b"k", b"other").expect("node");
                self.mem.write(rkey, BASE + 640, &other)?;
                let link = compare
                    | HAS_SUCCESSOR
                    | (3 << SUCC_GEN_SHIFT)
                    | (1 << SUCC_MEMNODE_SHIFT)
                    | 10;
                self.mem.compare_swap(rkey, va, compare, link)?;
            }
            self.mem.compare_swap(rkey, va, compare, swap)
        }
        fn fetch_add(&self, rkey: u32, va: u64, add: u64) -> Result<u64, AccessError> {
            self.mem.fetch_add(rkey, va, add)
        }
        fn check(
            &self,
            rkey: u32,
            va: u64,
            len: u64,
            needed: AccessFlags,
        ) -> Result<(), AccessError> {
            self.mem.check(rkey, va, len, needed)
        }
    }

    #[test]
    fn a_lost_cas_walks_on_and_links_after_the_winner() {
        let (mem, rkey) = memory();
        chain(&mem, rkey, 2, false);
        new_node(&mem, rkey, LinkKind::Update);
        let racing = Racing {
            mem: &mem,
            raced: AtomicBool::new(false),
        };
        let r = link(
            &request(rkey, LinkKind::Update, 128, 2),
            &racing,
            &no_crash(),
        );
        let Ok(LinkOutcome::Linked(after)) = r else {
            panic!("{r:?}")
        };
        assert_eq!((after.offset, after.version), (640, 3));
        assert_linked_after(&mem, rkey, 640, 3);
    }

    proptest! {
        #![proptest_config(Config {
            cases: 256,
            rng_seed: RngSeed::Fixed(0xc11d),
            failure_persistence: None,
            ..Config::default()
        })]

        /// Arbitrary requests over arbitrary memory never panic, and change nothing
        /// but the new node's version field and one header word, and those only when
        /// they answer `linked`.
        #[test]
        fn arbitrary_links_never_panic_and_change_at_most_the_link(
            words in proptest::collection::vec(any::<u64>(), 64),
            start in prop_oneof![Just(NO_START), 0u64..1024],
            version: u32,
            kind in 0u8..4,
            root in prop_oneof![Just(ROOT), 0u64..(LEN as u64)],
            node in prop_oneof![Just(NEW), 0u64..(LEN as u64 + 64)],
        ) {
            let (mem, rkey) = memory();
            for (i, w) in words.iter().enumerate() {
                mem.write(rkey, BASE + 512 + 8 * i as u64, &w.to_le_bytes()).expect("fill");
            }
            chain(&mem, rkey, 4, false);
            let kind = LinkKind::from_code(kind).expect("kind");
            new_node(&mem, rkey, kind);
            let before = snapshot(&mem, rkey);
            let l = CloverLink { start: start & !63, root: root & !7, node, ..request(rkey, kind, 0, version) };
            let r = link(&l, &mem, &no_crash());
            let after = snapshot(&mem, rkey);
            let changed: Vec<usize> = (0..LEN).filter(|&i| before[i] != after[i]).collect();
            match r {
                Ok(LinkOutcome::Linked(t)) => {
                    let version_at = (node as usize + VERSION_AT)..(node as usize + VERSION_AT + 4);
                    let header_at = (t.offset as usize)..(t.offset as usize + 8);
                    prop_assert!(changed.iter().all(|i| version_at.contains(i) || header_at.contains(i)));
                }
                _ => {
                    // A failed attempt may have set the version field only.
                    let version_at = (node as usize + VERSION_AT)..(node as usize + VERSION_AT + 4);
                    prop_assert!(changed.iter().all(|i| version_at.contains(i)), "{:?}", r);
                }
            }
        }
    }
}
