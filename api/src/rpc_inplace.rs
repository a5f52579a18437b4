//! In-place reads and writes of the RPC framing ([`crate::rpc`], operations 10 and
//! 11): one tuple of an in-place table read or written by the memory node's workers
//! under the table's pessimistic latch ([`crate::latch_word`]), with the protocol the
//! one-sided clients of the scheme run, on the region's own atomics.
//!
//! Read body (operation 10, big-endian):
//!
//! ```text
//! readers u8 (0 shared, 1 exclusive-only) | rkey u32 | latch va u64 | data va u64
//! | payload u32 (1–4095) | owner u64 (exclusive-only: the latch word to store; shared: 0)
//! ```
//!
//! Write body (operation 11):
//!
//! ```text
//! kind u8 (1 insert, 2 update, 3 put, 4 delete) | rkey u32 | latch va u64 | data va u64
//! | payload u32 (72–4096) | owner u64 (the latch word to store) | key length u16 (1–64)
//! | value length u32 (0 for delete; at most payload − 72) | key | value
//! ```
//!
//! The owner word is the client's: a fresh exclusive latch word
//! ([`crate::latch_word::exclusive`]) carrying its client id and acquisition number, so
//! a latch a worker holds looks to one-sided clients exactly like the client's own and
//! is broken by the same lease.
//!
//! Replies: a read answers `0 | payload` (the payload, `payload` bytes), `1` (the
//! tuple's last writer was broken: it may be torn) or `5 | reason` (handed back); a
//! write answers `0` written, `1` exists (insert of a live key), `2` not found (update
//! or delete of an absent key), `3` another key's tuple, `4` a tuple that does not
//! parse, `5 | reason` handed back, or `6` the latch was broken while the worker held
//! it (the write happened; as for a one-sided writer that held a latch past its lease).

use crate::inplace_tuple::{KEY_CAP, TUPLE_HEADER, value_cap};
use crate::latch_word;
use crate::rpc::RPC_MAX_DATA;
use crate::rpc_race::Deferral;

/// Fixed bytes of a read body.
const READ_FIXED: usize = 1 + 4 + 8 + 8 + 4 + 8;
/// Fixed bytes of a write body before the key and value.
const WRITE_FIXED: usize = READ_FIXED + 2 + 4;

/// Where a tuple and its latch are, and the latch word a worker stores.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TupleAt {
    /// The region key (as a one-sided verb would carry it).
    pub rkey: u32,
    /// The latch word's address (8-byte aligned).
    pub latch_va: u64,
    /// The payload's address.
    pub data_va: u64,
    /// Bytes of the payload.
    pub payload: u32,
    /// The exclusive latch word to store (0 for a shared read).
    pub owner: u64,
}

impl TupleAt {
    fn encode(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.rkey.to_be_bytes());
        out.extend_from_slice(&self.latch_va.to_be_bytes());
        out.extend_from_slice(&self.data_va.to_be_bytes());
        out.extend_from_slice(&self.payload.to_be_bytes());
        out.extend_from_slice(&self.owner.to_be_bytes());
    }

    fn parse(f: &[u8; 32]) -> TupleAt {
        let be =
            |r: std::ops::Range<usize>| f[r].iter().fold(0u64, |a, &b| (a << 8) | u64::from(b));
        TupleAt {
            rkey: be(0..4) as u32,
            latch_va: be(4..12),
            data_va: be(12..20),
            payload: be(20..24) as u32,
            owner: be(24..32),
        }
    }
}

/// An in-place read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct InPlaceRead {
    /// Whether readers share the latch (FAA on the reader count) or take it
    /// exclusively (CAS, the exclusive-only latch).
    pub shared: bool,
    /// The tuple.
    pub at: TupleAt,
}

impl InPlaceRead {
    /// Bytes of the body.
    pub fn body_len(&self) -> usize {
        READ_FIXED
    }

    /// Append the body to `out`.
    pub fn encode_body(&self, out: &mut Vec<u8>) {
        out.push(u8::from(!self.shared));
        self.at.encode(out);
    }
}

/// What an in-place write does with the key's tuple.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum InPlaceKind {
    /// Write the value if the key is not live.
    Insert,
    /// Write the value if the key is live.
    Update,
    /// Write the value.
    Put,
    /// Leave a tombstone if the key is live.
    Delete,
}

impl InPlaceKind {
    /// Its code on the wire.
    pub fn code(self) -> u8 {
        match self {
            InPlaceKind::Insert => 1,
            InPlaceKind::Update => 2,
            InPlaceKind::Put => 3,
            InPlaceKind::Delete => 4,
        }
    }

    /// The kind with code `code`.
    pub fn from_code(code: u8) -> Option<InPlaceKind> {
        Some(match code {
            1 => InPlaceKind::Insert,
            2 => InPlaceKind::Update,
            3 => InPlaceKind::Put,
            4 => InPlaceKind::Delete,
            _ => return None,
        })
    }
}

/// An in-place write.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct InPlaceWrite<'a> {
    /// What it does.
    pub kind: InPlaceKind,
    /// The tuple.
    pub at: TupleAt,
    /// The key.
    pub key: &'a [u8],
    /// The value (empty for a delete).
    pub value: &'a [u8],
}

impl InPlaceWrite<'_> {
    /// Bytes of the body.
    pub fn body_len(&self) -> usize {
        WRITE_FIXED + self.key.len() + self.value.len()
    }

    /// Append the body to `out`.
    pub fn encode_body(&self, out: &mut Vec<u8>) {
        out.push(self.kind.code());
        self.at.encode(out);
        out.extend_from_slice(&(self.key.len() as u16).to_be_bytes());
        out.extend_from_slice(&(self.value.len() as u32).to_be_bytes());
        out.extend_from_slice(self.key);
        out.extend_from_slice(self.value);
    }
}

/// Why a body is not an in-place request.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum InPlaceFrameError {
    /// The body is shorter or longer than its fields say.
    #[error("the in-place request body has {got} bytes, its fields need {want}")]
    Length {
        /// Bytes present.
        got: usize,
        /// Bytes the fields need.
        want: usize,
    },
    /// A field has a value no client sends.
    #[error("the in-place request's {0} is out of range")]
    Field(&'static str),
}

fn fixed_at(body: &[u8]) -> Result<(u8, TupleAt, &[u8]), InPlaceFrameError> {
    let Some((first, rest)) = body.split_first() else {
        return Err(InPlaceFrameError::Length {
            got: 0,
            want: READ_FIXED,
        });
    };
    let Some((f, rest)) = rest.split_first_chunk::<32>() else {
        return Err(InPlaceFrameError::Length {
            got: body.len(),
            want: READ_FIXED,
        });
    };
    let at = TupleAt::parse(f);
    if !at.latch_va.is_multiple_of(8) {
        return Err(InPlaceFrameError::Field("latch address"));
    }
    Ok((*first, at, rest))
}

/// Parse a read body.
pub fn parse_read(body: &[u8]) -> Result<InPlaceRead, InPlaceFrameError> {
    let (readers, at, rest) = fixed_at(body)?;
    if !rest.is_empty() {
        return Err(InPlaceFrameError::Length {
            got: body.len(),
            want: READ_FIXED,
        });
    }
    let shared = match readers {
        0 => true,
        1 => false,
        _ => return Err(InPlaceFrameError::Field("readers")),
    };
    if at.payload == 0 || at.payload as usize >= RPC_MAX_DATA {
        return Err(InPlaceFrameError::Field("payload length"));
    }
    if shared != (at.owner == 0) || (!shared && !latch_word::is_exclusive(at.owner)) {
        return Err(InPlaceFrameError::Field("owner word"));
    }
    Ok(InPlaceRead { shared, at })
}

/// Parse a write body.
pub fn parse_write(body: &[u8]) -> Result<InPlaceWrite<'_>, InPlaceFrameError> {
    let (kind, at, rest) = fixed_at(body)?;
    let kind = InPlaceKind::from_code(kind).ok_or(InPlaceFrameError::Field("kind"))?;
    let payload = at.payload as usize;
    if !(TUPLE_HEADER + KEY_CAP..=RPC_MAX_DATA).contains(&payload) {
        return Err(InPlaceFrameError::Field("payload length"));
    }
    if !latch_word::is_exclusive(at.owner) {
        return Err(InPlaceFrameError::Field("owner word"));
    }
    let Some((lens, data)) = rest.split_first_chunk::<6>() else {
        return Err(InPlaceFrameError::Length {
            got: body.len(),
            want: WRITE_FIXED,
        });
    };
    let key_len = usize::from(u16::from_be_bytes([lens[0], lens[1]]));
    let value_len = u32::from_be_bytes([lens[2], lens[3], lens[4], lens[5]]) as usize;
    if key_len == 0 || key_len > KEY_CAP {
        return Err(InPlaceFrameError::Field("key length"));
    }
    if value_len > value_cap(payload) || (kind == InPlaceKind::Delete && value_len != 0) {
        return Err(InPlaceFrameError::Field("value length"));
    }
    if data.len() != key_len + value_len {
        return Err(InPlaceFrameError::Length {
            got: body.len(),
            want: WRITE_FIXED + key_len + value_len,
        });
    }
    let (key, value) = data.split_at(key_len);
    Ok(InPlaceWrite {
        kind,
        at,
        key,
        value,
    })
}

/// How an in-place read ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ReadOutcome {
    /// The payload, read under the latch.
    Payload(Vec<u8>),
    /// The tuple's last exclusive holder was broken: it may hold part of a write.
    Torn,
    /// The client must read one-sided.
    Deferred(Deferral),
}

impl ReadOutcome {
    /// The reply body.
    pub fn encode(&self) -> Vec<u8> {
        match self {
            ReadOutcome::Payload(p) => {
                let mut out = Vec::with_capacity(1 + p.len());
                out.push(0);
                out.extend_from_slice(p);
                out
            }
            ReadOutcome::Torn => vec![1],
            ReadOutcome::Deferred(d) => vec![5, d.code()],
        }
    }

    /// Parse a reply body.
    pub fn parse(body: &[u8]) -> Option<ReadOutcome> {
        let (&code, rest) = body.split_first()?;
        match (code, rest.len()) {
            (0, _) => Some(ReadOutcome::Payload(rest.to_vec())),
            (1, 0) => Some(ReadOutcome::Torn),
            (5, 1) => Some(ReadOutcome::Deferred(Deferral::from_code(rest[0])?)),
            _ => None,
        }
    }
}

/// How an in-place write ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WriteOutcome {
    /// The tuple was written.
    Written,
    /// Insert of a live key: nothing written.
    Exists,
    /// Update or delete of an absent key: nothing written.
    NotFound,
    /// The tuple holds another key: nothing written (probe on).
    OtherKey,
    /// The tuple does not parse: nothing written.
    Corrupt,
    /// The client must write one-sided; nothing changed.
    Deferred(Deferral),
    /// Written, but the latch was broken while held (held past the lease).
    LatchLost,
}

impl WriteOutcome {
    /// The reply body.
    pub fn encode(&self) -> Vec<u8> {
        match self {
            WriteOutcome::Written => vec![0],
            WriteOutcome::Exists => vec![1],
            WriteOutcome::NotFound => vec![2],
            WriteOutcome::OtherKey => vec![3],
            WriteOutcome::Corrupt => vec![4],
            WriteOutcome::Deferred(d) => vec![5, d.code()],
            WriteOutcome::LatchLost => vec![6],
        }
    }

    /// Parse a reply body.
    pub fn parse(body: &[u8]) -> Option<WriteOutcome> {
        Some(match body {
            [0] => WriteOutcome::Written,
            [1] => WriteOutcome::Exists,
            [2] => WriteOutcome::NotFound,
            [3] => WriteOutcome::OtherKey,
            [4] => WriteOutcome::Corrupt,
            [5, d] => WriteOutcome::Deferred(Deferral::from_code(*d)?),
            [6] => WriteOutcome::LatchLost,
            _ => return None,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use proptest::test_runner::{Config, RngSeed};

    fn at(owner: u64) -> TupleAt {
        TupleAt {
            rkey: 7,
            latch_va: 0x1000,
            data_va: 0x1008,
            payload: 200,
            owner,
        }
    }

    #[test]
    fn requests_and_outcomes_round_trip() {
        for r in [
            InPlaceRead {
                shared: true,
                at: at(0),
            },
            InPlaceRead {
                shared: false,
                at: at(latch_word::exclusive(5)),
            },
        ] {
            let mut b = Vec::new();
            r.encode_body(&mut b);
            assert_eq!(b.len(), r.body_len());
            assert_eq!(parse_read(&b), Ok(r));
            assert!(parse_read(&b[..b.len() - 1]).is_err());
        }
        let w = InPlaceWrite {
            kind: InPlaceKind::Put,
            at: at(latch_word::exclusive(9)),
            key: b"key",
            value: b"value",
        };
        let mut b = Vec::new();
        w.encode_body(&mut b);
        assert_eq!(b.len(), w.body_len());
        assert_eq!(parse_write(&b), Ok(w));
        assert!(parse_write(&b[..b.len() - 1]).is_err());
        for o in [
            ReadOutcome::Payload(b"p".to_vec()),
            ReadOutcome::Torn,
            ReadOutcome::Deferred(Deferral::Contended),
        ] {
            assert_eq!(ReadOutcome::parse(&o.encode()), Some(o));
        }
        for o in [
            WriteOutcome::Written,
            WriteOutcome::Exists,
            WriteOutcome::NotFound,
            WriteOutcome::OtherKey,
            WriteOutcome::Corrupt,
            WriteOutcome::Deferred(Deferral::Contended),
            WriteOutcome::LatchLost,
        ] {
            assert_eq!(WriteOutcome::parse(&o.encode()), Some(o));
        }
    }

    #[test]
    fn out_of_range_fields_are_refused() {
        let good = InPlaceWrite {
            kind: InPlaceKind::Delete,
            at: at(latch_word::exclusive(9)),
            key: b"k",
            value: b"",
        };
        let bad = [
            InPlaceWrite { at: at(0), ..good },
            InPlaceWrite {
                at: TupleAt {
                    latch_va: 0x1004,
                    ..good.at
                },
                ..good
            },
            InPlaceWrite {
                value: b"v",
                ..good
            },
            InPlaceWrite { key: b"", ..good },
            InPlaceWrite {
                at: TupleAt {
                    payload: 71,
                    ..good.at
                },
                ..good
            },
        ];
        for w in bad {
            let mut b = Vec::new();
            w.encode_body(&mut b);
            assert!(
                matches!(parse_write(&b), Err(InPlaceFrameError::Field(_))),
                "{w:?}"
            );
        }
        let shared_with_owner = InPlaceRead {
            shared: true,
            at: at(latch_word::exclusive(1)),
        };
        let mut b = Vec::new();
        shared_with_owner.encode_body(&mut b);
        assert!(parse_read(&b).is_err());
    }

    proptest! {
        #![proptest_config(Config {
            cases: 512,
            rng_seed: RngSeed::Fixed(0x1a9c),
            failure_persistence: None,
            ..Config::default()
        })]

        /// Whatever the bytes, the parsers never panic, and what they accept
        /// encodes back to exactly those bytes.
        #[test]
        fn any_body_parses_exactly_or_not(bytes in proptest::collection::vec(any::<u8>(), 0..120)) {
            if let Ok(r) = parse_read(&bytes) {
                let mut again = Vec::new();
                r.encode_body(&mut again);
                prop_assert_eq!(&again[..], &bytes[..]);
            }
            if let Ok(w) = parse_write(&bytes) {
                let mut again = Vec::new();
                w.encode_body(&mut again);
                prop_assert_eq!(&again[..], &bytes[..]);
            }
            let _ = ReadOutcome::parse(&bytes);
            let _ = WriteOutcome::parse(&bytes);
        }

        /// A valid write with one byte changed parses to itself, to another valid
        /// write, or is refused; never a panic.
        #[test]
        fn damaged_writes_are_refused_or_exact(at_byte in 0usize..50, xor in 1u8..) {
            let w = InPlaceWrite {
                kind: InPlaceKind::Insert,
                at: at(latch_word::exclusive(3)),
                key: b"abc",
                value: b"defgh",
            };
            let mut b = Vec::new();
            w.encode_body(&mut b);
            let i = at_byte % b.len();
            b[i] ^= xor;
            if let Ok(p) = parse_write(&b) {
                let mut again = Vec::new();
                p.encode_body(&mut again);
                prop_assert_eq!(again, b);
            }
        }
    }
}
