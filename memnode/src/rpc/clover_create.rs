//! Clover inserts of keys without a chain, next to memory
//! ([`dmkv_api::rpc_clover_create`]): the steps a client runs one-sided to claim a
//! key in the table's chain directory (`kvstore::clover::directory`), then the link
//! of [`super::clover_link`].
//!
//! 1. Check what the client prepared: the keyed root holds the key and the chain id
//!    and its shortcut names the first node; the first node is a tombstone of
//!    version 1 of that chain and key, without a successor.
//! 2. Read the key's bucket. A slot with the key's fingerprint whose root holds the
//!    key means the key has a chain: answer it, nothing changed. Otherwise CAS the
//!    first free slot from 0 to the new root; a lost CAS reads the bucket again
//!    (another key, or the same key, took the slot), [`MAX_CLAIMS`] times in all.
//!    A full bucket is handed back (the key's chain then lives in the metadata
//!    service, which only the client calls).
//! 3. Link the new version after the first node ([`super::clover_link::link`]).
//!
//! The claim CAS is where the key gets its chain, as on the one-sided path; until
//! the link, the chain holds only the tombstone, so a worker that stops between the
//! two leaves the key absent.

use std::sync::atomic::{AtomicBool, Ordering};

use dmkv_api::clover_directory::{BUCKET_BYTES, ROOT_KEY_AT, root_holds, slot_root, slot_word};
use dmkv_api::clover_layout::{
    NODE_ALIGN, NODE_PREFIX, NodeError, OWN_GEN_SHIFT, ROOT_SHORTCUT_AT, SHORTCUT_VERSION_BITS,
    TOMBSTONE, parse_node, shortcut_target,
};
use dmkv_api::layout::SIZE_CLASSES;
use dmkv_api::rpc_clover_create::{CloverCreate, CreateOutcome};
use dmkv_api::rpc_clover_link::LinkOutcome;
use dmkv_api::rpc_race::Deferral;
use verbs::mem::RemoteMemory;

use super::clover_link::link;
use super::race::Stop;

/// Claims of one key before the insert is handed back.
pub const MAX_CLAIMS: usize = 8;

/// The size class index of the first node, when it is the tombstone of version 1
/// the request says.
fn first_node_class(c: &CloverCreate<'_>, memory: &dyn RemoteMemory) -> Result<Option<u8>, Stop> {
    let l = &c.link;
    let Some(va) = l.base_va.checked_add(l.start) else {
        return Ok(None);
    };
    let mut len = NODE_PREFIX + l.key.len();
    for _ in 0..2 {
        let mut buf = vec![0u8; len];
        memory.read(l.rkey, va, &mut buf)?;
        match parse_node(&buf) {
            Ok(n) => {
                let header = (u64::from(l.start_generation) << OWN_GEN_SHIFT) | TOMBSTONE;
                let ok = n.chain_id == l.chain_id
                    && n.key == l.key
                    && n.version == 1
                    && n.header == header;
                return Ok(ok.then_some(n.class_index));
            }
            Err(NodeError::Truncated(need)) if need > len => len = need,
            Err(_) => return Ok(None),
        }
    }
    Ok(None)
}

/// Whether the root and the first node are what the request says, and lie apart.
fn prepared(c: &CloverCreate<'_>, memory: &dyn RemoteMemory) -> Result<bool, Stop> {
    let l = &c.link;
    let root_len = dmkv_api::clover_directory::keyed_root_size(l.key.len()) as u64;
    let Some(class) = first_node_class(c, memory)? else {
        return Ok(false);
    };
    let Some(&first_len) = SIZE_CLASSES.get(usize::from(class)) else {
        return Ok(false);
    };
    let apart = |a: u64, a_len: u64, b: u64, b_len: u64| {
        a.checked_add(a_len).is_some_and(|end| end <= b)
            || b.checked_add(b_len).is_some_and(|end| end <= a)
    };
    if !l.root.is_multiple_of(NODE_ALIGN)
        || !apart(l.root, root_len, l.start, first_len as u64)
        || l.node == l.root
        || l.node == l.start
    {
        return Ok(false);
    }
    let Some(va) = l.base_va.checked_add(l.root) else {
        return Ok(false);
    };
    let mut root = vec![0u8; ROOT_KEY_AT + l.key.len()];
    memory.read(l.rkey, va, &mut root)?;
    let shortcut = root
        .get(ROOT_SHORTCUT_AT..ROOT_SHORTCUT_AT + 8)
        .and_then(|b| <[u8; 8]>::try_from(b).ok())
        .map(u64::from_le_bytes);
    let mask = (1u32 << SHORTCUT_VERSION_BITS) - 1;
    Ok(root_holds(&root, l.key) == Some(l.chain_id)
        && shortcut.map(shortcut_target) == Some((l.pointer_memnode, l.start, class, 1 & mask)))
}

/// Run the insert `c` against `memory`. `crash`, when set, is cleared and stops the
/// worker right after the claim CAS took effect ([`Stop::Crashed`]).
pub fn create(
    c: &CloverCreate<'_>,
    memory: &dyn RemoteMemory,
    crash: &AtomicBool,
) -> Result<CreateOutcome, Stop> {
    let l = &c.link;
    let deferred = |d| Ok(CreateOutcome::Deferred(d));
    let Some(word) = slot_word(c.fingerprint, l.pointer_memnode, l.root) else {
        return deferred(Deferral::Elsewhere);
    };
    let Some(bucket_va) = l.base_va.checked_add(c.bucket) else {
        return deferred(Deferral::Elsewhere);
    };
    if !prepared(c, memory)? {
        return deferred(Deferral::Torn);
    }
    let mut claimed = false;
    for _ in 0..MAX_CLAIMS {
        let mut bucket = [0u8; BUCKET_BYTES];
        memory.read(l.rkey, bucket_va, &mut bucket)?;
        let words: Vec<u64> = bucket
            .chunks_exact(8)
            .filter_map(|b| <[u8; 8]>::try_from(b).ok())
            .map(u64::from_le_bytes)
            .collect();
        for (fp, memnode, root) in words.iter().filter_map(|w| slot_root(*w)) {
            if fp != c.fingerprint {
                continue;
            }
            if memnode != l.pointer_memnode {
                return deferred(Deferral::Elsewhere);
            }
            let Some(va) = l.base_va.checked_add(root) else {
                return deferred(Deferral::Elsewhere);
            };
            let mut buf = vec![0u8; ROOT_KEY_AT + l.key.len()];
            memory.read(l.rkey, va, &mut buf)?;
            if let Some(chain_id) = root_holds(&buf, l.key) {
                return Ok(CreateOutcome::Exists { root, chain_id });
            }
        }
        let Some(free) = words.iter().position(|w| *w == 0) else {
            return deferred(Deferral::Full);
        };
        let previous = memory.compare_swap(l.rkey, bucket_va + 8 * free as u64, 0, word)?;
        if previous == 0 {
            claimed = true;
            break;
        }
    }
    if !claimed {
        return deferred(Deferral::Contended);
    }
    if crash.swap(false, Ordering::SeqCst) {
        return Err(Stop::Crashed);
    }
    Ok(CreateOutcome::Created(
        match link(l, memory, &AtomicBool::new(false)) {
            Ok(outcome) => outcome,
            // The chain exists now; the client links one-sided.
            Err(_) => LinkOutcome::Deferred(Deferral::Torn),
        },
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use dmkv_api::clover_directory::keyed_root_size;
    use dmkv_api::clover_layout::{HAS_SUCCESSOR, encode_node};
    use dmkv_api::rpc_clover_link::{CloverLink, LinkKind};
    use proptest::prelude::*;
    use proptest::test_runner::{Config, RngSeed};
    use verbs::mem::{AccessFlags, MemoryTable, Region};

    const BASE: u64 = 0x4000_0000;
    const LEN: usize = 16384;
    const BUCKET: u64 = 0;
    const ROOT: u64 = 1024;
    const FIRST: u64 = 2048;
    const NEW: u64 = 4096;
    const CHAIN: u64 = 500;
    const FP: u16 = 0xABCD;

    fn memory() -> (MemoryTable, u32) {
        let table = MemoryTable::new();
        let region = Region::anonymous(LEN).expect("region");
        let info = table
            .register(std::sync::Arc::new(region), BASE, AccessFlags::ALL)
            .expect("register");
        (table, info.rkey)
    }

    /// A keyed root at `root` for `chain` and `key`, with its first node at `first`.
    fn prepare(mem: &MemoryTable, rkey: u32, root: u64, first: u64, chain: u64, key: &[u8]) {
        let node = encode_node((4 << OWN_GEN_SHIFT) | TOMBSTONE, chain, 1, 0, key, b"")
            .expect("first node");
        mem.write(rkey, BASE + first, &node).expect("write");
        // Shortcut: version 1, class 0, memnode 1, the first node's line.
        let shortcut: u64 = (1 << 43) | (1 << 30) | (first / 64);
        let mut r = shortcut.to_le_bytes().to_vec();
        r.extend_from_slice(&chain.to_le_bytes());
        r.extend_from_slice(&(key.len() as u32).to_le_bytes());
        r.extend_from_slice(&[0; 4]);
        r.extend_from_slice(key);
        r.resize(keyed_root_size(key.len()), 0);
        mem.write(rkey, BASE + root, &r).expect("write");
        let v = encode_node(6 << OWN_GEN_SHIFT, chain, 0, 1, key, b"value").expect("node");
        mem.write(rkey, BASE + NEW, &v).expect("write");
    }

    fn request(rkey: u32, kind: LinkKind) -> CloverCreate<'static> {
        CloverCreate {
            bucket: BUCKET,
            fingerprint: FP,
            link: CloverLink {
                rkey,
                base_va: BASE,
                pointer_memnode: 1,
                chain_id: CHAIN,
                kind,
                root: ROOT,
                start: FIRST,
                start_version: 1,
                start_generation: 4,
                node: NEW,
                node_generation: 6,
                key: b"key",
            },
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

    #[test]
    fn creates_the_chain_and_links_the_value() {
        let (mem, rkey) = memory();
        prepare(&mem, rkey, ROOT, FIRST, CHAIN, b"key");
        // Another key's slot first in the bucket.
        let other = slot_word(0x1111, 1, 8192).expect("word");
        mem.write(rkey, BASE + BUCKET, &other.to_le_bytes())
            .expect("write");
        let r = create(
            &request(rkey, LinkKind::Insert),
            &mem,
            &AtomicBool::new(false),
        );
        let Ok(CreateOutcome::Created(LinkOutcome::Linked(after))) = r else {
            panic!("{r:?}")
        };
        assert_eq!((after.offset, after.version), (FIRST, 1));
        assert_eq!(
            word(&mem, rkey, BUCKET + 8),
            slot_word(FP, 1, ROOT).expect("w")
        );
        assert_eq!(word(&mem, rkey, FIRST) & HAS_SUCCESSOR, HAS_SUCCESSOR);
        let mut b = vec![0u8; 128];
        mem.read(rkey, BASE + NEW, &mut b).expect("read");
        assert_eq!(parse_node(&b).expect("node").version, 2);

        // A second insert of the key finds its chain and changes nothing.
        prepare(&mem, rkey, 6144, 7168, CHAIN + 1, b"key");
        let before = snapshot(&mem, rkey);
        let again = CloverCreate {
            link: CloverLink {
                root: 6144,
                start: 7168,
                chain_id: CHAIN + 1,
                ..request(rkey, LinkKind::Insert).link
            },
            ..request(rkey, LinkKind::Insert)
        };
        let r = create(&again, &mem, &AtomicBool::new(false));
        assert_eq!(
            r,
            Ok(CreateOutcome::Exists {
                root: ROOT,
                chain_id: CHAIN
            })
        );
        assert_eq!(snapshot(&mem, rkey), before);
    }

    #[test]
    fn full_buckets_bad_preparations_and_refused_memory_change_nothing() {
        let (mem, rkey) = memory();
        prepare(&mem, rkey, ROOT, FIRST, CHAIN, b"key");
        let base = request(rkey, LinkKind::Put);
        let bad = [
            // The root holds another chain id, the first node another generation.
            CloverCreate {
                link: CloverLink {
                    chain_id: CHAIN + 1,
                    ..base.link
                },
                ..base
            },
            CloverCreate {
                link: CloverLink {
                    start_generation: 5,
                    ..base.link
                },
                ..base
            },
            // Root and first node overlap; the new node is the first node.
            CloverCreate {
                link: CloverLink {
                    root: FIRST,
                    ..base.link
                },
                ..base
            },
            CloverCreate {
                link: CloverLink {
                    node: FIRST,
                    ..base.link
                },
                ..base
            },
        ];
        let before = snapshot(&mem, rkey);
        for (i, c) in bad.iter().enumerate() {
            let r = create(c, &mem, &AtomicBool::new(false));
            assert_eq!(r, Ok(CreateOutcome::Deferred(Deferral::Torn)), "case {i}");
            assert_eq!(snapshot(&mem, rkey), before, "case {i}");
        }
        // A foreign key under the fingerprint on another node: handed back.
        let far = slot_word(FP, 2, 8192).expect("word");
        mem.write(rkey, BASE + BUCKET, &far.to_le_bytes())
            .expect("write");
        let before = snapshot(&mem, rkey);
        let r = create(&base, &mem, &AtomicBool::new(false));
        assert_eq!(r, Ok(CreateOutcome::Deferred(Deferral::Elsewhere)));
        assert_eq!(snapshot(&mem, rkey), before);
        // A full bucket.
        for i in 0..8u64 {
            let w = slot_word(0x2000 + i as u16, 1, 8192 + 64 * i).expect("word");
            mem.write(rkey, BASE + BUCKET + 8 * i, &w.to_le_bytes())
                .expect("write");
        }
        let before_full = snapshot(&mem, rkey);
        let r = create(&base, &mem, &AtomicBool::new(false));
        assert_eq!(r, Ok(CreateOutcome::Deferred(Deferral::Full)));
        assert_eq!(snapshot(&mem, rkey), before_full);
        assert_ne!(before, before_full);
        // Refused memory: refused, nothing changed.
        let r = create(
            &CloverCreate {
                bucket: LEN as u64,
                ..base
            },
            &mem,
            &AtomicBool::new(false),
        );
        assert!(matches!(r, Err(Stop::Access(_))), "{r:?}");
        assert_eq!(snapshot(&mem, rkey), before_full);
    }

    #[test]
    fn a_crash_after_the_claim_leaves_the_key_absent() {
        let (mem, rkey) = memory();
        prepare(&mem, rkey, ROOT, FIRST, CHAIN, b"key");
        let crash = AtomicBool::new(true);
        let r = create(&request(rkey, LinkKind::Put), &mem, &crash);
        assert_eq!(r, Err(Stop::Crashed));
        // The slot names the root; the chain is its tombstone alone.
        assert_eq!(word(&mem, rkey, BUCKET), slot_word(FP, 1, ROOT).expect("w"));
        assert_eq!(word(&mem, rkey, FIRST) & HAS_SUCCESSOR, 0);
    }

    proptest! {
        #![proptest_config(Config {
            cases: 256,
            rng_seed: RngSeed::Fixed(0xc12f),
            failure_persistence: None,
            ..Config::default()
        })]

        /// Arbitrary inserts over arbitrary buckets never panic; unless they answer
        /// `created`, nothing changes.
        #[test]
        fn arbitrary_inserts_never_panic(
            slots in proptest::collection::vec(any::<u64>(), 8),
            bucket in prop_oneof![Just(BUCKET), 0u64..(LEN as u64)],
            root in prop_oneof![Just(ROOT), 0u64..(LEN as u64)],
            fingerprint in 1u16..,
        ) {
            let (mem, rkey) = memory();
            prepare(&mem, rkey, ROOT, FIRST, CHAIN, b"key");
            for (i, w) in slots.iter().enumerate() {
                mem.write(rkey, BASE + 512 + 8 * i as u64, &w.to_le_bytes()).expect("fill");
            }
            let before = snapshot(&mem, rkey);
            let base = request(rkey, LinkKind::Put);
            let c = CloverCreate {
                bucket: bucket & !7,
                fingerprint,
                link: CloverLink { root, ..base.link },
            };
            let r = create(&c, &mem, &AtomicBool::new(false));
            if !matches!(r, Ok(CreateOutcome::Created(_))) {
                prop_assert_eq!(snapshot(&mem, rkey), before, "{:?}", r);
            }
        }
    }
}
