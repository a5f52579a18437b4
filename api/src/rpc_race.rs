//! The RACE index operation of the RPC framing ([`crate::rpc`], operation 6): a
//! search, insert, update, put or delete of one key, executed by a memory node's
//! worker next to the table's buckets with the same slot protocol one-sided
//! clients use.
//!
//! The client names everything the node touches: the key's combined buckets (from
//! its directory cache), the region key and base address that turn slot pointers
//! into addresses, and, for writes, the new slot word of a KV block it has already
//! written into its own memory. The node reads and changes only that memory, under
//! the queue pair's access scope.
//!
//! Request body (big-endian), after the common header:
//!
//! ```text
//! kind u8 | fingerprint u8 | pointer memnode u8 | buckets n u8 (1–2)
//! rkey u32 | base va u64 | suffix u32 | new word u64 (0 for search and delete)
//! n × (combined bucket va u64 | main first u8 (0|1))
//! key length u16 (1–256) | key
//! ```
//!
//! Reply body of an `ok` reply: outcome u8, then a value (found), the replaced slot
//! word u64 (done) or a reason u8 (deferred).

use crate::race_layout::MAX_KEY_BYTES;

/// Which index operation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RaceKind {
    /// Find the key's value.
    Search,
    /// Add the key; fails if it exists.
    Insert,
    /// Replace the key's value; fails if it is absent.
    Update,
    /// Insert or update.
    Put,
    /// Remove the key; fails if it is absent.
    Delete,
}

impl RaceKind {
    /// Its code on the wire.
    pub fn code(self) -> u8 {
        match self {
            RaceKind::Search => 0,
            RaceKind::Insert => 1,
            RaceKind::Update => 2,
            RaceKind::Put => 3,
            RaceKind::Delete => 4,
        }
    }

    /// The kind with code `code`.
    pub fn from_code(code: u8) -> Option<RaceKind> {
        Some(match code {
            0 => RaceKind::Search,
            1 => RaceKind::Insert,
            2 => RaceKind::Update,
            3 => RaceKind::Put,
            4 => RaceKind::Delete,
            _ => return None,
        })
    }

    /// Whether it installs a new slot word (insert, update, put).
    pub fn installs(self) -> bool {
        matches!(self, RaceKind::Insert | RaceKind::Update | RaceKind::Put)
    }
}

/// One combined bucket of the key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CombinedAt {
    /// Virtual address of its 128 bytes.
    pub va: u64,
    /// Whether the main bucket is the first 64 bytes (even bucket numbers).
    pub main_first: bool,
}

/// A RACE index request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RaceRequest<'a> {
    /// The operation.
    pub kind: RaceKind,
    /// The key's fingerprint.
    pub fingerprint: u8,
    /// The memnode byte of slot pointers that name this node's memory.
    pub pointer_memnode: u8,
    /// The region key for buckets and blocks.
    pub rkey: u32,
    /// The virtual address of pointer offset 0.
    pub base_va: u64,
    /// The low 32 bits of the key's first hash (checked against bucket headers).
    pub suffix: u32,
    /// The slot word to install (0 for search and delete).
    pub word: u64,
    /// The key's combined buckets (one or two).
    pub buckets: [Option<CombinedAt>; 2],
    /// The key.
    pub key: &'a [u8],
}

/// Fixed body bytes before the buckets.
const FIXED: usize = 4 + 4 + 8 + 4 + 8;

impl RaceRequest<'_> {
    /// Bytes of the body.
    pub fn body_len(&self) -> usize {
        FIXED + 9 * self.buckets.iter().flatten().count() + 2 + self.key.len()
    }

    /// Append the body to `out`.
    pub fn encode_body(&self, out: &mut Vec<u8>) {
        let n = self.buckets.iter().flatten().count() as u8;
        out.extend_from_slice(&[self.kind.code(), self.fingerprint, self.pointer_memnode, n]);
        out.extend_from_slice(&self.rkey.to_be_bytes());
        out.extend_from_slice(&self.base_va.to_be_bytes());
        out.extend_from_slice(&self.suffix.to_be_bytes());
        out.extend_from_slice(&self.word.to_be_bytes());
        for b in self.buckets.iter().flatten() {
            out.extend_from_slice(&b.va.to_be_bytes());
            out.push(u8::from(b.main_first));
        }
        out.extend_from_slice(&(self.key.len() as u16).to_be_bytes());
        out.extend_from_slice(self.key);
    }
}

/// Why a body is not a RACE request.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum RaceFrameError {
    /// The body is shorter or longer than its fields say.
    #[error("the RACE request body has {got} bytes, its fields need {want}")]
    Length {
        /// Bytes present.
        got: usize,
        /// Bytes the fields need.
        want: usize,
    },
    /// A field has a value no client sends.
    #[error("the RACE request's {0} is out of range")]
    Field(&'static str),
}

/// Parse a RACE request body.
pub fn parse_race(body: &[u8]) -> Result<RaceRequest<'_>, RaceFrameError> {
    let short = |want: usize| RaceFrameError::Length {
        got: body.len(),
        want,
    };
    let Some((fixed, rest)) = body.split_first_chunk::<FIXED>() else {
        return Err(short(FIXED));
    };
    let kind = RaceKind::from_code(fixed[0]).ok_or(RaceFrameError::Field("kind"))?;
    let n = usize::from(fixed[3]);
    if !(1..=2).contains(&n) {
        return Err(RaceFrameError::Field("bucket count"));
    }
    let be32 = |b: &[u8]| u32::from_be_bytes([b[0], b[1], b[2], b[3]]);
    let be64 = |b: &[u8]| {
        let mut w = [0u8; 8];
        w.copy_from_slice(&b[..8]);
        u64::from_be_bytes(w)
    };
    let rkey = be32(&fixed[4..8]);
    let base_va = be64(&fixed[8..16]);
    let suffix = be32(&fixed[16..20]);
    let word = be64(&fixed[20..28]);
    if kind.installs() == (word == 0) {
        return Err(RaceFrameError::Field("new slot word"));
    }
    let Some((bucket_bytes, rest)) = rest.split_at_checked(9 * n) else {
        return Err(short(FIXED + 9 * n + 2));
    };
    let mut buckets = [None, None];
    for (i, b) in bucket_bytes.chunks_exact(9).enumerate() {
        if b[8] > 1 {
            return Err(RaceFrameError::Field("main-first flag"));
        }
        buckets[i] = Some(CombinedAt {
            va: be64(b),
            main_first: b[8] == 1,
        });
    }
    let Some((len, key)) = rest.split_first_chunk::<2>() else {
        return Err(short(FIXED + 9 * n + 2));
    };
    let key_len = usize::from(u16::from_be_bytes(*len));
    if key_len == 0 || key_len > MAX_KEY_BYTES {
        return Err(RaceFrameError::Field("key length"));
    }
    if key.len() != key_len {
        return Err(short(FIXED + 9 * n + 2 + key_len));
    }
    Ok(RaceRequest {
        kind,
        fingerprint: fixed[1],
        pointer_memnode: fixed[2],
        rkey,
        base_va,
        suffix,
        word,
        buckets,
        key,
    })
}

/// Why the node handed an operation back to the client's one-sided path: cases it
/// does not handle because they need the directory, a split, or memory elsewhere.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Deferral {
    /// A bucket header does not cover the key (the client's directory cache is stale).
    Stale,
    /// A split is filling or freezing the subtable.
    Split,
    /// Another client's insert of the key is unconfirmed.
    Busy,
    /// Both combined buckets are full (the subtable must split).
    Full,
    /// A candidate's KV block lives on another memory node.
    Elsewhere,
    /// The slot changed under every attempt.
    Contended,
    /// A KV block failed its checks on every attempt.
    Torn,
    /// Several slots hold the key (a delete must clear them all).
    Duplicate,
    /// The value does not fit a reply.
    TooLarge,
}

impl Deferral {
    /// Its code on the wire.
    pub fn code(self) -> u8 {
        match self {
            Deferral::Stale => 1,
            Deferral::Split => 2,
            Deferral::Busy => 3,
            Deferral::Full => 4,
            Deferral::Elsewhere => 5,
            Deferral::Contended => 6,
            Deferral::Torn => 7,
            Deferral::Duplicate => 8,
            Deferral::TooLarge => 9,
        }
    }

    /// The deferral with code `code`.
    pub fn from_code(code: u8) -> Option<Deferral> {
        Some(match code {
            1 => Deferral::Stale,
            2 => Deferral::Split,
            3 => Deferral::Busy,
            4 => Deferral::Full,
            5 => Deferral::Elsewhere,
            6 => Deferral::Contended,
            7 => Deferral::Torn,
            8 => Deferral::Duplicate,
            9 => Deferral::TooLarge,
            _ => return None,
        })
    }
}

/// How a RACE request ended at the node.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RaceOutcome {
    /// A search found the key's value.
    Found(Vec<u8>),
    /// A search found no slot holding the key.
    Absent,
    /// A write took effect; the replaced slot word (0: none, an insert).
    Done(u64),
    /// An insert found the key present.
    Exists,
    /// An update or delete found the key absent.
    NotFound,
    /// Nothing changed; the client's one-sided path must do the operation.
    Deferred(Deferral),
}

impl RaceOutcome {
    /// The reply body.
    pub fn encode(&self) -> Vec<u8> {
        match self {
            RaceOutcome::Found(v) => {
                let mut out = Vec::with_capacity(1 + v.len());
                out.push(0);
                out.extend_from_slice(v);
                out
            }
            RaceOutcome::Absent => vec![1],
            RaceOutcome::Done(w) => {
                let mut out = vec![2];
                out.extend_from_slice(&w.to_be_bytes());
                out
            }
            RaceOutcome::Exists => vec![3],
            RaceOutcome::NotFound => vec![4],
            RaceOutcome::Deferred(d) => vec![5, d.code()],
        }
    }

    /// Parse a reply body; `None` when it is no outcome.
    pub fn parse(body: &[u8]) -> Option<RaceOutcome> {
        let (&code, rest) = body.split_first()?;
        Some(match (code, rest.len()) {
            (0, _) => RaceOutcome::Found(rest.to_vec()),
            (1, 0) => RaceOutcome::Absent,
            (2, 8) => {
                let mut w = [0u8; 8];
                w.copy_from_slice(rest);
                RaceOutcome::Done(u64::from_be_bytes(w))
            }
            (3, 0) => RaceOutcome::Exists,
            (4, 0) => RaceOutcome::NotFound,
            (5, 1) => RaceOutcome::Deferred(Deferral::from_code(rest[0])?),
            _ => return None,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use proptest::test_runner::{Config, RngSeed};

    fn sample(kind: RaceKind, word: u64) -> RaceRequest<'static> {
        RaceRequest {
            kind,
            fingerprint: 0x5a,
            pointer_memnode: 2,
            rkey: 0x1234_5678,
            base_va: 0x1000_0000,
            suffix: 0xdead_beef,
            word,
            buckets: [
                Some(CombinedAt {
                    va: 0x1000_0040,
                    main_first: true,
                }),
                Some(CombinedAt {
                    va: 0x1000_0100,
                    main_first: false,
                }),
            ],
            key: b"user:1",
        }
    }

    #[test]
    fn requests_round_trip() {
        for (kind, word) in [
            (RaceKind::Search, 0),
            (RaceKind::Insert, 7 << 48 | 64),
            (RaceKind::Delete, 0),
        ] {
            let r = sample(kind, word);
            let mut body = Vec::new();
            r.encode_body(&mut body);
            assert_eq!(body.len(), r.body_len());
            assert_eq!(parse_race(&body), Ok(r));
            assert!(parse_race(&body[..body.len() - 1]).is_err());
            body.push(0);
            assert!(parse_race(&body).is_err());
        }
        // A search carrying a word, an insert without one: refused.
        let mut body = Vec::new();
        sample(RaceKind::Search, 1).encode_body(&mut body);
        assert_eq!(
            parse_race(&body),
            Err(RaceFrameError::Field("new slot word"))
        );
    }

    #[test]
    fn outcomes_round_trip() {
        for o in [
            RaceOutcome::Found(b"v".to_vec()),
            RaceOutcome::Found(Vec::new()),
            RaceOutcome::Absent,
            RaceOutcome::Done(0x42),
            RaceOutcome::Exists,
            RaceOutcome::NotFound,
            RaceOutcome::Deferred(Deferral::Busy),
            RaceOutcome::Deferred(Deferral::TooLarge),
        ] {
            assert_eq!(RaceOutcome::parse(&o.encode()), Some(o));
        }
        assert_eq!(RaceOutcome::parse(&[]), None);
        assert_eq!(RaceOutcome::parse(&[5, 0]), None);
        assert_eq!(RaceOutcome::parse(&[2, 1]), None);
    }

    proptest! {
        #![proptest_config(Config {
            cases: 512,
            rng_seed: RngSeed::Fixed(0x7ace),
            failure_persistence: None,
            ..Config::default()
        })]

        /// Any byte string is a request exactly as it encodes, or an error.
        #[test]
        fn any_body_parses_exactly_or_not(bytes in proptest::collection::vec(any::<u8>(), 0..80)) {
            if let Ok(r) = parse_race(&bytes) {
                let mut again = Vec::new();
                r.encode_body(&mut again);
                prop_assert_eq!(&again[..], &bytes[..]);
            }
            let _ = RaceOutcome::parse(&bytes);
        }
    }
}
