//! The Clover insert of a key with no chain yet, in the RPC framing
//! ([`crate::rpc`], operation 9): claim the key's slot in the table's chain
//! directory ([`crate::clover_directory`]) for a root the client prepared, then link
//! the new version after the chain's first node as operation 8 does
//! ([`crate::rpc_clover_link`]). No metadata call: the chain id comes from the
//! client's leased block.
//!
//! The client allocates and WRITEs, one-sided in the doorbell of the SEND, the keyed
//! root (shortcut to the first node, the chain id, the key), the first node (a
//! tombstone of version 1: the key starts absent) and the new version node.
//!
//! Request body (big-endian): `bucket offset u64 | fingerprint u16 (not 0) | link
//! body` — the body of operation 8, whose root is the new root, whose start is the
//! first node (start version 1) and whose kind is put or insert.
//!
//! Reply body of an `ok` reply ([`CreateOutcome`]): `1 | link outcome` (the node
//! claimed the key's slot for the new root, then linked, or not, as operation 8
//! answers), `2 | root offset u64 | chain id u64` (the directory names the key's
//! chain already: nothing changed), or `5 | reason u8` (deferred, nothing changed:
//! the bucket is full, a candidate root lives on another memory node, the prepared
//! objects are not what the request says, the bucket changed on every attempt).

use crate::rpc_clover_link::{
    CloverLink, LinkFrameError, LinkKind, LinkOutcome, NO_START, parse_link,
};
use crate::rpc_race::Deferral;

/// A Clover insert request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CloverCreate<'a> {
    /// Offset of the key's directory bucket.
    pub bucket: u64,
    /// The key's fingerprint in the directory (never 0).
    pub fingerprint: u16,
    /// The link after the claim: root, first node (as start) and new node.
    pub link: CloverLink<'a>,
}

const FIXED: usize = 8 + 2;

impl CloverCreate<'_> {
    /// Bytes of the body.
    pub fn body_len(&self) -> usize {
        FIXED + self.link.body_len()
    }

    /// Append the body to `out`.
    pub fn encode_body(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.bucket.to_be_bytes());
        out.extend_from_slice(&self.fingerprint.to_be_bytes());
        self.link.encode_body(out);
    }
}

/// Parse a create body; never panics, never allocates.
pub fn parse_create(body: &[u8]) -> Result<CloverCreate<'_>, LinkFrameError> {
    let Some((f, rest)) = body.split_first_chunk::<FIXED>() else {
        return Err(LinkFrameError::Length {
            got: body.len(),
            want: FIXED,
        });
    };
    let link = parse_link(rest).map_err(|e| match e {
        LinkFrameError::Length { got, want } => LinkFrameError::Length {
            got: got + FIXED,
            want: want + FIXED,
        },
        field => field,
    })?;
    let fingerprint = u16::from_be_bytes([f[8], f[9]]);
    if fingerprint == 0 {
        return Err(LinkFrameError::Field("fingerprint"));
    }
    if !matches!(link.kind, LinkKind::Put | LinkKind::Insert) {
        return Err(LinkFrameError::Field("kind"));
    }
    if link.start == NO_START || link.start_version != 1 {
        return Err(LinkFrameError::Field("first node"));
    }
    let mut bucket = [0u8; 8];
    bucket.copy_from_slice(&f[..8]);
    Ok(CloverCreate {
        bucket: u64::from_be_bytes(bucket),
        fingerprint,
        link,
    })
}

/// How an insert ended at the node.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CreateOutcome {
    /// The key's slot now names the new root; then the link went as this says.
    Created(LinkOutcome),
    /// The directory already names the key's chain: nothing changed.
    Exists {
        /// The chain's root offset.
        root: u64,
        /// Its chain id.
        chain_id: u64,
    },
    /// The client must create the chain one-sided: nothing changed.
    Deferred(Deferral),
}

impl CreateOutcome {
    /// The reply body.
    pub fn encode(&self) -> Vec<u8> {
        match self {
            CreateOutcome::Created(link) => {
                let mut out = vec![1];
                out.extend_from_slice(&link.encode());
                out
            }
            CreateOutcome::Exists { root, chain_id } => {
                let mut out = vec![2];
                out.extend_from_slice(&root.to_be_bytes());
                out.extend_from_slice(&chain_id.to_be_bytes());
                out
            }
            CreateOutcome::Deferred(d) => vec![5, d.code()],
        }
    }

    /// Parse a reply body (exact lengths only).
    pub fn parse(body: &[u8]) -> Option<CreateOutcome> {
        let (&code, rest) = body.split_first()?;
        match code {
            1 => Some(CreateOutcome::Created(LinkOutcome::parse(rest)?)),
            2 => {
                let f: &[u8; 16] = rest.try_into().ok()?;
                let (root, chain_id) = f.split_at(8);
                Some(CreateOutcome::Exists {
                    root: u64::from_be_bytes(root.try_into().ok()?),
                    chain_id: u64::from_be_bytes(chain_id.try_into().ok()?),
                })
            }
            5 if rest.len() == 1 => Some(CreateOutcome::Deferred(Deferral::from_code(rest[0])?)),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rpc_clover_link::LinkedAfter;
    use proptest::prelude::*;
    use proptest::test_runner::{Config, RngSeed};

    fn sample(key: &[u8]) -> CloverCreate<'_> {
        CloverCreate {
            bucket: 0x1_0000,
            fingerprint: 0xBEEF,
            link: CloverLink {
                rkey: 7,
                base_va: 0x1000,
                pointer_memnode: 2,
                chain_id: 77,
                kind: LinkKind::Insert,
                root: 0x80,
                start: 0x100,
                start_version: 1,
                start_generation: 9,
                node: 0x4000,
                node_generation: 3,
                key,
            },
        }
    }

    #[test]
    fn creates_and_outcomes_round_trip() {
        let c = sample(b"key");
        let mut b = Vec::new();
        c.encode_body(&mut b);
        assert_eq!(b.len(), c.body_len());
        assert_eq!(parse_create(&b), Ok(c));
        assert!(parse_create(&b[..b.len() - 1]).is_err());
        for o in [
            CreateOutcome::Created(LinkOutcome::Linked(LinkedAfter {
                offset: 0x100,
                header: 1 << 62,
                version: 1,
                class_index: 0,
                shortcut: 5,
            })),
            CreateOutcome::Created(LinkOutcome::Exists),
            CreateOutcome::Exists {
                root: 0x80,
                chain_id: 9,
            },
            CreateOutcome::Deferred(Deferral::Full),
        ] {
            assert_eq!(CreateOutcome::parse(&o.encode()), Some(o));
        }
        assert_eq!(CreateOutcome::parse(&[2; 16]), None, "one byte short");
    }

    #[test]
    fn out_of_scope_fields_are_named() {
        let bad = |c: CloverCreate<'_>| {
            let mut b = Vec::new();
            c.encode_body(&mut b);
            parse_create(&b).map(|_| ())
        };
        let c = sample(b"k");
        assert_eq!(
            bad(CloverCreate {
                fingerprint: 0,
                ..c
            }),
            Err(LinkFrameError::Field("fingerprint"))
        );
        for kind in [LinkKind::Update, LinkKind::Delete] {
            let link = CloverLink { kind, ..c.link };
            assert_eq!(
                bad(CloverCreate { link, ..c }),
                Err(LinkFrameError::Field("kind"))
            );
        }
        let link = CloverLink {
            start: NO_START,
            ..c.link
        };
        assert_eq!(
            bad(CloverCreate { link, ..c }),
            Err(LinkFrameError::Field("first node"))
        );
        let link = CloverLink {
            start_version: 2,
            ..c.link
        };
        assert_eq!(
            bad(CloverCreate { link, ..c }),
            Err(LinkFrameError::Field("first node"))
        );
    }

    proptest! {
        #![proptest_config(Config {
            cases: 512,
            rng_seed: RngSeed::Fixed(0xc12e),
            failure_persistence: None,
            ..Config::default()
        })]

        /// Any body parses to exactly its own encoding or is refused; any reply body
        /// parses to exactly its encoding or not at all.
        #[test]
        fn any_body_parses_exactly_or_not(bytes in proptest::collection::vec(any::<u8>(), 0..100)) {
            if let Ok(c) = parse_create(&bytes) {
                let mut again = Vec::new();
                c.encode_body(&mut again);
                prop_assert_eq!(&again[..], &bytes[..]);
            }
            if let Some(o) = CreateOutcome::parse(&bytes) {
                prop_assert_eq!(o.encode(), bytes);
            }
        }

        /// A valid request with one flipped byte is refused or still exact.
        #[test]
        fn damaged_requests_are_refused_or_exact(at in 0usize..72, xor in 1u8..) {
            let mut b = Vec::new();
            sample(b"key").encode_body(&mut b);
            if let Some(x) = b.get_mut(at) {
                *x ^= xor;
            }
            if let Ok(c) = parse_create(&b) {
                let mut again = Vec::new();
                c.encode_body(&mut again);
                prop_assert_eq!(again, b);
            }
        }
    }
}
