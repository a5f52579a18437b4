//! The Clover write of the RPC framing ([`crate::rpc`], operation 8): find the tail
//! of a key's chain next to memory and link a new version node after it with the
//! CAS one-sided writers use.
//!
//! The client has allocated the new node and WRITten it whole, one-sided, in the
//! doorbell of the SEND (so it is in memory when the node sees the request); its
//! version field is a guess the node overwrites with the tail's version plus one
//! before linking (the version lies outside the node's CRC, and nobody reads an
//! unlinked node).
//!
//! Request body (big-endian): `rkey u32 | base va u64 | pointer memnode u8 | chain
//! id u64 | kind u8 (0 put, 1 insert, 2 update, 3 delete) | root offset u64 | start
//! offset u64 | start version u32 | start generation u16 | new node offset u64 | new
//! node generation u16 | key length u16 (1–256) | key`. A start offset of
//! [`NO_START`] starts from the node the root's shortcut word names.
//!
//! Reply body of an `ok` reply ([`LinkOutcome`]): `0 | tail offset u64 | tail header
//! u64 | tail version u32 | tail class index u8 | shortcut word u64` (linked after
//! that tail; the new node has its version plus one; the root's shortcut word as
//! read), `3` (an insert found the key present), `4` (an update or delete found it
//! absent), or `5 | reason u8` (deferred, see [`crate::rpc_race::Deferral`]; nothing
//! was linked).

use crate::clover_layout::MAX_KEY_BYTES;
use crate::rpc_race::Deferral;

/// The start offset that means "start from the root's shortcut".
pub const NO_START: u64 = u64::MAX;

/// Link attempts at the node before a write that keeps losing its CAS is handed back.
pub const MAX_LINK_ATTEMPTS: usize = 8;

/// What a Clover write does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LinkKind {
    /// Link whatever the tail is (upsert).
    Put,
    /// Link only after a tombstone tail (the key absent).
    Insert,
    /// Link only after a live tail (the key present).
    Update,
    /// Link a tombstone, only after a live tail.
    Delete,
}

impl LinkKind {
    /// Its code on the wire.
    pub fn code(self) -> u8 {
        match self {
            LinkKind::Put => 0,
            LinkKind::Insert => 1,
            LinkKind::Update => 2,
            LinkKind::Delete => 3,
        }
    }

    /// The kind with code `code`.
    pub fn from_code(code: u8) -> Option<LinkKind> {
        Some(match code {
            0 => LinkKind::Put,
            1 => LinkKind::Insert,
            2 => LinkKind::Update,
            3 => LinkKind::Delete,
            _ => return None,
        })
    }

    /// Whether the new node is a tombstone.
    pub fn is_delete(self) -> bool {
        self == LinkKind::Delete
    }
}

/// A Clover write request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CloverLink<'a> {
    /// The region key.
    pub rkey: u32,
    /// The virtual address of pointer offset 0.
    pub base_va: u64,
    /// The memnode byte of pointers that name this node's memory.
    pub pointer_memnode: u8,
    /// The key's chain id.
    pub chain_id: u64,
    /// What the write does.
    pub kind: LinkKind,
    /// Offset of the key's root.
    pub root: u64,
    /// Offset of the start node (the client's hint), or [`NO_START`].
    pub start: u64,
    /// The start node's version.
    pub start_version: u32,
    /// The start node's own generation.
    pub start_generation: u16,
    /// Offset of the new node.
    pub node: u64,
    /// The new node's own generation.
    pub node_generation: u16,
    /// The key.
    pub key: &'a [u8],
}

const FIXED: usize = 4 + 8 + 1 + 8 + 1 + 8 + 8 + 4 + 2 + 8 + 2 + 2;

/// Why a link body does not parse.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LinkFrameError {
    /// The body has `got` bytes where its fields need `want`.
    Length {
        /// Bytes in the body.
        got: usize,
        /// Bytes the fields need.
        want: usize,
    },
    /// A field holds a value no client sends (an unknown kind, a key length out of
    /// range).
    Field(&'static str),
}

impl CloverLink<'_> {
    /// Bytes of the body.
    pub fn body_len(&self) -> usize {
        FIXED + self.key.len()
    }

    /// Append the body to `out`.
    pub fn encode_body(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.rkey.to_be_bytes());
        out.extend_from_slice(&self.base_va.to_be_bytes());
        out.push(self.pointer_memnode);
        out.extend_from_slice(&self.chain_id.to_be_bytes());
        out.push(self.kind.code());
        out.extend_from_slice(&self.root.to_be_bytes());
        out.extend_from_slice(&self.start.to_be_bytes());
        out.extend_from_slice(&self.start_version.to_be_bytes());
        out.extend_from_slice(&self.start_generation.to_be_bytes());
        out.extend_from_slice(&self.node.to_be_bytes());
        out.extend_from_slice(&self.node_generation.to_be_bytes());
        out.extend_from_slice(&(self.key.len() as u16).to_be_bytes());
        out.extend_from_slice(self.key);
    }
}

/// Parse a link body; never panics, never allocates.
pub fn parse_link(body: &[u8]) -> Result<CloverLink<'_>, LinkFrameError> {
    let Some((f, key)) = body.split_first_chunk::<FIXED>() else {
        return Err(LinkFrameError::Length {
            got: body.len(),
            want: FIXED,
        });
    };
    let be = |r: std::ops::Range<usize>| f[r].iter().fold(0u64, |a, &b| (a << 8) | u64::from(b));
    let kind = LinkKind::from_code(f[21]).ok_or(LinkFrameError::Field("kind"))?;
    let key_len = be(54..56) as usize;
    if key_len == 0 || key_len > MAX_KEY_BYTES {
        return Err(LinkFrameError::Field("key length"));
    }
    if key.len() != key_len {
        return Err(LinkFrameError::Length {
            got: body.len(),
            want: FIXED + key_len,
        });
    }
    Ok(CloverLink {
        rkey: be(0..4) as u32,
        base_va: be(4..12),
        pointer_memnode: f[12],
        chain_id: be(13..21),
        kind,
        root: be(22..30),
        start: be(30..38),
        start_version: be(38..42) as u32,
        start_generation: be(42..44) as u16,
        node: be(44..52),
        node_generation: be(52..54) as u16,
        key,
    })
}

/// The tail a write linked its node after.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LinkedAfter {
    /// The tail's offset.
    pub offset: u64,
    /// Its header word before the link (no successor).
    pub header: u64,
    /// Its version (the new node has this plus one).
    pub version: u32,
    /// Its size class index.
    pub class_index: u8,
    /// The root's shortcut word as the node read it.
    pub shortcut: u64,
}

/// How a write ended at the node.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LinkOutcome {
    /// Linked.
    Linked(LinkedAfter),
    /// An insert found the key present: nothing linked.
    Exists,
    /// An update or delete found the key absent: nothing linked.
    NotFound,
    /// The client must write one-sided: nothing linked.
    Deferred(Deferral),
}

impl LinkOutcome {
    /// The reply body.
    pub fn encode(&self) -> Vec<u8> {
        match self {
            LinkOutcome::Linked(t) => {
                let mut out = Vec::with_capacity(30);
                out.push(0);
                out.extend_from_slice(&t.offset.to_be_bytes());
                out.extend_from_slice(&t.header.to_be_bytes());
                out.extend_from_slice(&t.version.to_be_bytes());
                out.push(t.class_index);
                out.extend_from_slice(&t.shortcut.to_be_bytes());
                out
            }
            LinkOutcome::Exists => vec![3],
            LinkOutcome::NotFound => vec![4],
            LinkOutcome::Deferred(d) => vec![5, d.code()],
        }
    }

    /// Parse a reply body (exact lengths only).
    pub fn parse(body: &[u8]) -> Option<LinkOutcome> {
        let (&code, rest) = body.split_first()?;
        match code {
            0 => {
                let f: &[u8; 29] = rest.try_into().ok()?;
                let be = |r: std::ops::Range<usize>| {
                    f[r].iter().fold(0u64, |a, &b| (a << 8) | u64::from(b))
                };
                Some(LinkOutcome::Linked(LinkedAfter {
                    offset: be(0..8),
                    header: be(8..16),
                    version: be(16..20) as u32,
                    class_index: f[20],
                    shortcut: be(21..29),
                }))
            }
            3 if rest.is_empty() => Some(LinkOutcome::Exists),
            4 if rest.is_empty() => Some(LinkOutcome::NotFound),
            5 if rest.len() == 1 => Some(LinkOutcome::Deferred(Deferral::from_code(rest[0])?)),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use proptest::test_runner::{Config, RngSeed};

    fn sample(key: &[u8]) -> CloverLink<'_> {
        CloverLink {
            rkey: 7,
            base_va: 0x1000,
            pointer_memnode: 2,
            chain_id: 77,
            kind: LinkKind::Update,
            root: 0x80,
            start: NO_START,
            start_version: 5,
            start_generation: 9,
            node: 0x4000,
            node_generation: 3,
            key,
        }
    }

    #[test]
    fn links_and_outcomes_round_trip() {
        for kind in [
            LinkKind::Put,
            LinkKind::Insert,
            LinkKind::Update,
            LinkKind::Delete,
        ] {
            let l = CloverLink {
                kind,
                ..sample(b"k1")
            };
            let mut b = Vec::new();
            l.encode_body(&mut b);
            assert_eq!(b.len(), l.body_len());
            assert_eq!(parse_link(&b), Ok(l));
            assert!(parse_link(&b[..b.len() - 1]).is_err());
        }
        for o in [
            LinkOutcome::Linked(LinkedAfter {
                offset: 64,
                header: 1 << 62,
                version: 6,
                class_index: 2,
                shortcut: 0xdead_beef,
            }),
            LinkOutcome::Exists,
            LinkOutcome::NotFound,
            LinkOutcome::Deferred(Deferral::Contended),
        ] {
            assert_eq!(LinkOutcome::parse(&o.encode()), Some(o));
        }
        assert_eq!(LinkOutcome::parse(&[5]), None);
        assert_eq!(LinkOutcome::parse(&[3, 0]), None);
        assert_eq!(LinkOutcome::parse(&[0; 29]), None, "one byte short");
    }

    #[test]
    fn bad_fields_are_named() {
        let mut b = Vec::new();
        sample(b"k").encode_body(&mut b);
        let mut bad = b.clone();
        bad[21] = 9;
        assert_eq!(parse_link(&bad), Err(LinkFrameError::Field("kind")));
        let mut bad = b.clone();
        bad[54] = 0xff;
        assert_eq!(parse_link(&bad), Err(LinkFrameError::Field("key length")));
        let mut long = b.clone();
        long.push(0);
        assert_eq!(
            parse_link(&long),
            Err(LinkFrameError::Length {
                got: b.len() + 1,
                want: b.len()
            })
        );
    }

    proptest! {
        #![proptest_config(Config {
            cases: 512,
            rng_seed: RngSeed::Fixed(0xc11c),
            failure_persistence: None,
            ..Config::default()
        })]

        /// Any body parses to exactly its own encoding or is refused; any reply body
        /// parses to exactly its encoding or not at all.
        #[test]
        fn any_body_parses_exactly_or_not(bytes in proptest::collection::vec(any::<u8>(), 0..96)) {
            if let Ok(l) = parse_link(&bytes) {
                let mut again = Vec::new();
                l.encode_body(&mut again);
                prop_assert_eq!(&again[..], &bytes[..]);
            }
            if let Some(o) = LinkOutcome::parse(&bytes) {
                prop_assert_eq!(o.encode(), bytes);
            }
        }

        /// A valid request damaged by truncation or one flipped byte is refused or
        /// is still exactly its own encoding.
        #[test]
        fn damaged_requests_are_refused_or_exact(cut in 0usize..64, at in 0usize..60, xor in 1u8..) {
            let mut b = Vec::new();
            sample(b"key").encode_body(&mut b);
            prop_assert!(parse_link(&b[..cut.min(b.len() - 1)]).is_err());
            let mut bent = b.clone();
            if let Some(x) = bent.get_mut(at) {
                *x ^= xor;
            }
            if let Ok(l) = parse_link(&bent) {
                let mut again = Vec::new();
                l.encode_body(&mut again);
                prop_assert_eq!(again, bent);
            }
        }
    }
}
