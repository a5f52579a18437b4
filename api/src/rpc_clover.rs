//! The Clover walk of the RPC framing ([`crate::rpc`], operation 7): from a node of
//! a key's chain the client has validated, follow the successors to the tail next
//! to memory and return it, checking each node as a one-sided reader does (chain
//! id, key, CRC, the predecessor's version plus one, the link's generation tag).
//! Read-only: it changes nothing.
//!
//! Request body (big-endian): `rkey u32 | base va u64 | pointer memnode u8 | chain id
//! u64 | start offset u64 | start version u32 | start generation u16 | key length u16
//! (1–256) | key`. The start node must still carry that version and generation.
//!
//! Reply body of an `ok` reply: `0 | offset u64 | header u64 | version u32 | class
//! index u8 | value` (the tail), or `5 | reason u8` (deferred, see
//! [`crate::rpc_race::Deferral`]: a node failed its checks, a successor lives on
//! another memory node, the chain is longer than [`MAX_WALK`], the value does not fit).

use crate::clover_layout::MAX_KEY_BYTES;
use crate::rpc_race::Deferral;

/// Most successors one walk follows.
pub const MAX_WALK: usize = 1024;

/// A Clover walk request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CloverWalk<'a> {
    /// The region key.
    pub rkey: u32,
    /// The virtual address of pointer offset 0.
    pub base_va: u64,
    /// The memnode byte of pointers that name this node's memory.
    pub pointer_memnode: u8,
    /// The key's chain id.
    pub chain_id: u64,
    /// Offset of the start node.
    pub start: u64,
    /// The start node's version.
    pub version: u32,
    /// The start node's own generation.
    pub generation: u16,
    /// The key.
    pub key: &'a [u8],
}

const FIXED: usize = 4 + 8 + 1 + 8 + 8 + 4 + 2 + 2;

impl CloverWalk<'_> {
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
        out.extend_from_slice(&self.start.to_be_bytes());
        out.extend_from_slice(&self.version.to_be_bytes());
        out.extend_from_slice(&self.generation.to_be_bytes());
        out.extend_from_slice(&(self.key.len() as u16).to_be_bytes());
        out.extend_from_slice(self.key);
    }
}

/// Parse a walk body: `Err(want)` with the length the fields need (or 0 for a key
/// length out of range).
pub fn parse_walk(body: &[u8]) -> Result<CloverWalk<'_>, usize> {
    let Some((f, key)) = body.split_first_chunk::<FIXED>() else {
        return Err(FIXED);
    };
    let be = |r: std::ops::Range<usize>| f[r].iter().fold(0u64, |a, &b| (a << 8) | u64::from(b));
    let key_len = be(35..37) as usize;
    if key_len == 0 || key_len > MAX_KEY_BYTES {
        return Err(0);
    }
    if key.len() != key_len {
        return Err(FIXED + key_len);
    }
    Ok(CloverWalk {
        rkey: be(0..4) as u32,
        base_va: be(4..12),
        pointer_memnode: f[12],
        chain_id: be(13..21),
        start: be(21..29),
        version: be(29..33) as u32,
        generation: be(33..35) as u16,
        key,
    })
}

/// The tail a walk found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Tail {
    /// Its offset.
    pub offset: u64,
    /// Its header word as read.
    pub header: u64,
    /// Its version.
    pub version: u32,
    /// Its size class index.
    pub class_index: u8,
    /// Its value.
    pub value: Vec<u8>,
}

/// How a walk ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WalkOutcome {
    /// The tail.
    Tail(Tail),
    /// The client must walk one-sided.
    Deferred(Deferral),
}

impl WalkOutcome {
    /// The reply body.
    pub fn encode(&self) -> Vec<u8> {
        match self {
            WalkOutcome::Tail(t) => {
                let mut out = Vec::with_capacity(22 + t.value.len());
                out.push(0);
                out.extend_from_slice(&t.offset.to_be_bytes());
                out.extend_from_slice(&t.header.to_be_bytes());
                out.extend_from_slice(&t.version.to_be_bytes());
                out.push(t.class_index);
                out.extend_from_slice(&t.value);
                out
            }
            WalkOutcome::Deferred(d) => vec![5, d.code()],
        }
    }

    /// Parse a reply body.
    pub fn parse(body: &[u8]) -> Option<WalkOutcome> {
        let (&code, rest) = body.split_first()?;
        match code {
            0 => {
                let (f, value) = rest.split_first_chunk::<21>()?;
                let be = |r: std::ops::Range<usize>| {
                    f[r].iter().fold(0u64, |a, &b| (a << 8) | u64::from(b))
                };
                Some(WalkOutcome::Tail(Tail {
                    offset: be(0..8),
                    header: be(8..16),
                    version: be(16..20) as u32,
                    class_index: f[20],
                    value: value.to_vec(),
                }))
            }
            5 if rest.len() == 1 => Some(WalkOutcome::Deferred(Deferral::from_code(rest[0])?)),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use proptest::test_runner::{Config, RngSeed};

    #[test]
    fn walks_and_outcomes_round_trip() {
        let w = CloverWalk {
            rkey: 1,
            base_va: 0x1000,
            pointer_memnode: 3,
            chain_id: 77,
            start: 0x40,
            version: 5,
            generation: 9,
            key: b"k1",
        };
        let mut b = Vec::new();
        w.encode_body(&mut b);
        assert_eq!(b.len(), w.body_len());
        assert_eq!(parse_walk(&b), Ok(w));
        assert!(parse_walk(&b[..b.len() - 1]).is_err());
        for o in [
            WalkOutcome::Tail(Tail {
                offset: 64,
                header: 1 << 62,
                version: 6,
                class_index: 2,
                value: b"v".to_vec(),
            }),
            WalkOutcome::Deferred(Deferral::Elsewhere),
        ] {
            assert_eq!(WalkOutcome::parse(&o.encode()), Some(o));
        }
        assert_eq!(WalkOutcome::parse(&[5]), None);
    }

    proptest! {
        #![proptest_config(Config {
            cases: 256,
            rng_seed: RngSeed::Fixed(0xc1c1),
            failure_persistence: None,
            ..Config::default()
        })]

        #[test]
        fn any_body_parses_exactly_or_not(bytes in proptest::collection::vec(any::<u8>(), 0..80)) {
            if let Ok(w) = parse_walk(&bytes) {
                let mut again = Vec::new();
                w.encode_body(&mut again);
                prop_assert_eq!(&again[..], &bytes[..]);
            }
            let _ = WalkOutcome::parse(&bytes);
        }
    }
}
