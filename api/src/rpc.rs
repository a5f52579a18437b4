//! The framing of RPCs to a memory node's workers (`memnode --rpc-workers N`).
//!
//! A request travels as the payload of one RC SEND from a client queue pair to its
//! memory-node queue pair; the answer comes back as one SEND on the same queue pair.
//! Both directions carry a fixed 12-byte header, big-endian like the RoCE headers:
//!
//! ```text
//! request: version u8 | operation u8 | flags u16 (0) | request id u64 | body
//! reply:   version u8 | status u8    | flags u16 (0) | request id u64 | body
//! ```
//!
//! The request id is the client's and comes back unchanged, so a client with several
//! requests outstanding on one queue pair can match replies that arrive in any order.
//! Each operation has a body of an exact size (a WRITE's data length is in its body);
//! anything else — a short or long message, an unknown version or operation, flags
//! set, an oversized length — parses to a [`FrameError`], which a worker answers with
//! an error reply ([`Reply::refusal`]) without touching memory.
//!
//! Every memory access an RPC makes names a key and a virtual address exactly as a
//! one-sided verb does, and is admitted by the same access scope (the queue pair's
//! grants and memory windows) as a one-sided verb on the same queue pair.
//!
//! Parsing never panics and never allocates; see `tests/rpc_props.rs` for the
//! property tests.

/// The framing version this module speaks.
pub const RPC_VERSION: u8 = 1;

/// Bytes of the request and reply header.
pub const RPC_HEADER_LEN: usize = 12;

/// Largest READ or WRITE one RPC may carry.
pub const RPC_MAX_DATA: usize = 4096;

/// Largest request a worker accepts (a WRITE of [`RPC_MAX_DATA`] bytes); longer
/// messages fail at the receive queue (local length error).
pub const RPC_MAX_REQUEST: usize = RPC_HEADER_LEN + WRITE_FIXED + RPC_MAX_DATA;

/// Largest reply (a READ of [`RPC_MAX_DATA`] bytes).
pub const RPC_MAX_REPLY: usize = RPC_HEADER_LEN + RPC_MAX_DATA;

/// Fixed body bytes of a WRITE before its data: rkey, va, length.
const WRITE_FIXED: usize = 4 + 8 + 4;

/// What a request asks the worker to do.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RpcOp {
    /// Nothing: the reply says the worker is alive.
    Ping,
    /// Read `len` bytes.
    Read,
    /// Write the body's data.
    Write,
    /// Compare-and-swap one aligned 8-byte word.
    CompareSwap,
    /// Fetch-and-add on one aligned 8-byte word.
    FetchAdd,
    /// A RACE index operation ([`crate::rpc_race`]).
    Race,
    /// A walk of a Clover chain to its tail ([`crate::rpc_clover`]).
    CloverWalk,
    /// A Clover write: the tail search and the link ([`crate::rpc_clover_link`]).
    CloverLink,
    /// A Clover insert of a key without a chain ([`crate::rpc_clover_create`]).
    CloverCreate,
    /// An in-place read of a tuple under its latch ([`crate::rpc_inplace`]).
    InPlaceRead,
    /// An in-place write of a tuple under its latch ([`crate::rpc_inplace`]).
    InPlaceWrite,
}

impl RpcOp {
    /// Its code on the wire.
    pub fn code(self) -> u8 {
        match self {
            RpcOp::Ping => 1,
            RpcOp::Read => 2,
            RpcOp::Write => 3,
            RpcOp::CompareSwap => 4,
            RpcOp::FetchAdd => 5,
            RpcOp::Race => 6,
            RpcOp::CloverWalk => 7,
            RpcOp::CloverLink => 8,
            RpcOp::CloverCreate => 9,
            RpcOp::InPlaceRead => 10,
            RpcOp::InPlaceWrite => 11,
        }
    }

    /// The operation with wire code `code`, if there is one.
    pub fn from_code(code: u8) -> Option<RpcOp> {
        Some(match code {
            1 => RpcOp::Ping,
            2 => RpcOp::Read,
            3 => RpcOp::Write,
            4 => RpcOp::CompareSwap,
            5 => RpcOp::FetchAdd,
            6 => RpcOp::Race,
            7 => RpcOp::CloverWalk,
            8 => RpcOp::CloverLink,
            9 => RpcOp::CloverCreate,
            10 => RpcOp::InPlaceRead,
            11 => RpcOp::InPlaceWrite,
            _ => return None,
        })
    }
}

/// One request, as parsed (data borrowed from the message).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Request<'a> {
    /// Are you there?
    Ping,
    /// READ of `len` bytes at `va` under `rkey`.
    Read {
        /// The memory key, as a one-sided READ would carry.
        rkey: u32,
        /// First virtual address.
        va: u64,
        /// Bytes to read (1..=[`RPC_MAX_DATA`]).
        len: u32,
    },
    /// WRITE of `data` at `va` under `rkey`.
    Write {
        /// The memory key.
        rkey: u32,
        /// First virtual address.
        va: u64,
        /// The bytes (1..=[`RPC_MAX_DATA`]).
        data: &'a [u8],
    },
    /// Compare-and-swap of the word at `va`.
    CompareSwap {
        /// The memory key.
        rkey: u32,
        /// Address of the 8-byte aligned word.
        va: u64,
        /// Expected value.
        compare: u64,
        /// New value.
        swap: u64,
    },
    /// Fetch-and-add on the word at `va`.
    FetchAdd {
        /// The memory key.
        rkey: u32,
        /// Address of the 8-byte aligned word.
        va: u64,
        /// Added (wrapping).
        add: u64,
    },
    /// A RACE index operation.
    Race(crate::rpc_race::RaceRequest<'a>),
    /// A walk of a Clover chain to its tail.
    CloverWalk(crate::rpc_clover::CloverWalk<'a>),
    /// A Clover write: find the tail and link the new node.
    CloverLink(crate::rpc_clover_link::CloverLink<'a>),
    /// A Clover insert of a key without a chain: claim, then link.
    CloverCreate(crate::rpc_clover_create::CloverCreate<'a>),
    /// An in-place read of a tuple under its latch.
    InPlaceRead(crate::rpc_inplace::InPlaceRead),
    /// An in-place write of a tuple under its latch.
    InPlaceWrite(crate::rpc_inplace::InPlaceWrite<'a>),
}

impl Request<'_> {
    /// Its operation.
    pub fn op(&self) -> RpcOp {
        match self {
            Request::Ping => RpcOp::Ping,
            Request::Read { .. } => RpcOp::Read,
            Request::Write { .. } => RpcOp::Write,
            Request::CompareSwap { .. } => RpcOp::CompareSwap,
            Request::FetchAdd { .. } => RpcOp::FetchAdd,
            Request::Race(_) => RpcOp::Race,
            Request::CloverWalk(_) => RpcOp::CloverWalk,
            Request::CloverLink(_) => RpcOp::CloverLink,
            Request::CloverCreate(_) => RpcOp::CloverCreate,
            Request::InPlaceRead(_) => RpcOp::InPlaceRead,
            Request::InPlaceWrite(_) => RpcOp::InPlaceWrite,
        }
    }

    /// Bytes of its encoding.
    pub fn encoded_len(&self) -> usize {
        RPC_HEADER_LEN
            + match self {
                Request::Ping => 0,
                Request::Read { .. } => 16,
                Request::Write { data, .. } => WRITE_FIXED + data.len(),
                Request::CompareSwap { .. } => 28,
                Request::FetchAdd { .. } => 20,
                Request::Race(r) => r.body_len(),
                Request::CloverWalk(w) => w.body_len(),
                Request::CloverLink(l) => l.body_len(),
                Request::CloverCreate(c) => c.body_len(),
                Request::InPlaceRead(r) => r.body_len(),
                Request::InPlaceWrite(w) => w.body_len(),
            }
    }

    /// The message carrying this request with id `id`.
    pub fn encode(&self, id: u64) -> Vec<u8> {
        let mut out = Vec::with_capacity(self.encoded_len());
        out.push(RPC_VERSION);
        out.push(self.op().code());
        out.extend_from_slice(&0u16.to_be_bytes());
        out.extend_from_slice(&id.to_be_bytes());
        match *self {
            Request::Ping => {}
            Request::Read { rkey, va, len } => {
                out.extend_from_slice(&rkey.to_be_bytes());
                out.extend_from_slice(&va.to_be_bytes());
                out.extend_from_slice(&len.to_be_bytes());
            }
            Request::Write { rkey, va, data } => {
                out.extend_from_slice(&rkey.to_be_bytes());
                out.extend_from_slice(&va.to_be_bytes());
                out.extend_from_slice(&(data.len() as u32).to_be_bytes());
                out.extend_from_slice(data);
            }
            Request::CompareSwap {
                rkey,
                va,
                compare,
                swap,
            } => {
                out.extend_from_slice(&rkey.to_be_bytes());
                out.extend_from_slice(&va.to_be_bytes());
                out.extend_from_slice(&compare.to_be_bytes());
                out.extend_from_slice(&swap.to_be_bytes());
            }
            Request::FetchAdd { rkey, va, add } => {
                out.extend_from_slice(&rkey.to_be_bytes());
                out.extend_from_slice(&va.to_be_bytes());
                out.extend_from_slice(&add.to_be_bytes());
            }
            Request::Race(r) => r.encode_body(&mut out),
            Request::CloverWalk(w) => w.encode_body(&mut out),
            Request::CloverLink(l) => l.encode_body(&mut out),
            Request::CloverCreate(c) => c.encode_body(&mut out),
            Request::InPlaceRead(r) => r.encode_body(&mut out),
            Request::InPlaceWrite(w) => w.encode_body(&mut out),
        }
        out
    }
}

/// Why a message is not a request (or not a reply) this module understands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum FrameError {
    /// Shorter than the header.
    #[error("the message has {0} bytes, shorter than the {RPC_HEADER_LEN}-byte header")]
    Truncated(usize),
    /// Another framing version.
    #[error("framing version {0} is not supported (this node speaks {RPC_VERSION})")]
    Version(u8),
    /// The flags field is not zero.
    #[error("reserved flags {0:#06x} are set")]
    Flags(u16),
    /// An operation code nobody defined.
    #[error("unknown operation {0}")]
    UnknownOp(u8),
    /// A status code nobody defined (replies).
    #[error("unknown status {0}")]
    UnknownStatus(u8),
    /// The body's size does not match its operation.
    #[error("the {op:?} body has {got} bytes, it must have {want}")]
    BodyLength {
        /// The operation.
        op: RpcOp,
        /// Bytes present.
        got: usize,
        /// Bytes its operation needs.
        want: usize,
    },
    /// A READ or WRITE of zero bytes or more than [`RPC_MAX_DATA`].
    #[error("a data length of {0} bytes is outside 1..={RPC_MAX_DATA}")]
    DataLength(u32),
}

impl FrameError {
    /// The status a worker answers this error with.
    pub fn status(&self) -> RpcStatus {
        match self {
            FrameError::Version(_) => RpcStatus::UnsupportedVersion,
            FrameError::UnknownOp(_) => RpcStatus::UnknownOperation,
            FrameError::DataLength(_) => RpcStatus::TooLarge,
            FrameError::Truncated(_)
            | FrameError::Flags(_)
            | FrameError::UnknownStatus(_)
            | FrameError::BodyLength { .. } => RpcStatus::Malformed,
        }
    }
}

/// The request id of a message, when it is long enough to carry one (0 otherwise):
/// what an error reply to a malformed request echoes.
pub fn request_id(message: &[u8]) -> u64 {
    message
        .get(4..RPC_HEADER_LEN)
        .and_then(|b| <[u8; 8]>::try_from(b).ok())
        .map(u64::from_be_bytes)
        .unwrap_or(0)
}

/// A checked reader of fixed-size big-endian fields.
struct Fields<'a>(&'a [u8]);

impl<'a> Fields<'a> {
    fn take<const N: usize>(&mut self) -> Option<[u8; N]> {
        let (head, rest) = self.0.split_first_chunk::<N>()?;
        self.0 = rest;
        Some(*head)
    }

    fn u32(&mut self) -> Option<u32> {
        self.take::<4>().map(u32::from_be_bytes)
    }

    fn u64(&mut self) -> Option<u64> {
        self.take::<8>().map(u64::from_be_bytes)
    }
}

/// The header fields common to requests and replies: (second byte, id, body).
fn split_header(message: &[u8]) -> Result<(u8, u64, &[u8]), FrameError> {
    let Some((head, body)) = message.split_first_chunk::<RPC_HEADER_LEN>() else {
        return Err(FrameError::Truncated(message.len()));
    };
    if head[0] != RPC_VERSION {
        return Err(FrameError::Version(head[0]));
    }
    let flags = u16::from_be_bytes([head[2], head[3]]);
    if flags != 0 {
        return Err(FrameError::Flags(flags));
    }
    Ok((head[1], request_id(message), body))
}

/// Parses one request message into its id and request.
pub fn parse_request(message: &[u8]) -> Result<(u64, Request<'_>), FrameError> {
    let (code, id, body) = split_header(message)?;
    let op = RpcOp::from_code(code).ok_or(FrameError::UnknownOp(code))?;
    let exact = |want: usize| {
        if body.len() == want {
            Ok(())
        } else {
            Err(FrameError::BodyLength {
                op,
                got: body.len(),
                want,
            })
        }
    };
    let data_len = |len: u32| {
        if len == 0 || len as usize > RPC_MAX_DATA {
            Err(FrameError::DataLength(len))
        } else {
            Ok(len)
        }
    };
    let mut f = Fields(body);
    let short = FrameError::BodyLength {
        op,
        got: body.len(),
        want: 0,
    };
    let request = match op {
        RpcOp::Ping => {
            exact(0)?;
            Request::Ping
        }
        RpcOp::Read => {
            exact(16)?;
            let (rkey, va, len) = (f.u32(), f.u64(), f.u32());
            let (Some(rkey), Some(va), Some(len)) = (rkey, va, len) else {
                return Err(short);
            };
            Request::Read {
                rkey,
                va,
                len: data_len(len)?,
            }
        }
        RpcOp::Write => {
            let (Some(rkey), Some(va), Some(len)) = (f.u32(), f.u64(), f.u32()) else {
                return Err(FrameError::BodyLength {
                    op,
                    got: body.len(),
                    want: WRITE_FIXED,
                });
            };
            let len = data_len(len)?;
            exact(WRITE_FIXED + len as usize)?;
            Request::Write {
                rkey,
                va,
                data: f.0,
            }
        }
        RpcOp::CompareSwap => {
            exact(28)?;
            let (Some(rkey), Some(va), Some(compare), Some(swap)) =
                (f.u32(), f.u64(), f.u64(), f.u64())
            else {
                return Err(short);
            };
            Request::CompareSwap {
                rkey,
                va,
                compare,
                swap,
            }
        }
        RpcOp::FetchAdd => {
            exact(20)?;
            let (Some(rkey), Some(va), Some(add)) = (f.u32(), f.u64(), f.u64()) else {
                return Err(short);
            };
            Request::FetchAdd { rkey, va, add }
        }
        RpcOp::Race => Request::Race(crate::rpc_race::parse_race(body).map_err(|e| match e {
            crate::rpc_race::RaceFrameError::Length { got, want } => {
                FrameError::BodyLength { op, got, want }
            }
            crate::rpc_race::RaceFrameError::Field(_) => FrameError::BodyLength {
                op,
                got: body.len(),
                want: 0,
            },
        })?),
        RpcOp::CloverWalk => {
            Request::CloverWalk(crate::rpc_clover::parse_walk(body).map_err(|want| {
                FrameError::BodyLength {
                    op,
                    got: body.len(),
                    want,
                }
            })?)
        }
        RpcOp::CloverLink => Request::CloverLink(
            crate::rpc_clover_link::parse_link(body).map_err(|e| link_frame_error(op, body, e))?,
        ),
        RpcOp::CloverCreate => Request::CloverCreate(
            crate::rpc_clover_create::parse_create(body)
                .map_err(|e| link_frame_error(op, body, e))?,
        ),
        RpcOp::InPlaceRead => Request::InPlaceRead(
            crate::rpc_inplace::parse_read(body).map_err(|e| inplace_frame_error(op, body, e))?,
        ),
        RpcOp::InPlaceWrite => Request::InPlaceWrite(
            crate::rpc_inplace::parse_write(body).map_err(|e| inplace_frame_error(op, body, e))?,
        ),
    };
    Ok((id, request))
}

/// The frame error of an in-place body that does not parse.
fn inplace_frame_error(
    op: RpcOp,
    body: &[u8],
    e: crate::rpc_inplace::InPlaceFrameError,
) -> FrameError {
    match e {
        crate::rpc_inplace::InPlaceFrameError::Length { got, want } => {
            FrameError::BodyLength { op, got, want }
        }
        crate::rpc_inplace::InPlaceFrameError::Field(_) => FrameError::BodyLength {
            op,
            got: body.len(),
            want: 0,
        },
    }
}

/// The frame error of a Clover write or insert body that does not parse.
fn link_frame_error(
    op: RpcOp,
    body: &[u8],
    e: crate::rpc_clover_link::LinkFrameError,
) -> FrameError {
    match e {
        crate::rpc_clover_link::LinkFrameError::Length { got, want } => {
            FrameError::BodyLength { op, got, want }
        }
        crate::rpc_clover_link::LinkFrameError::Field(_) => FrameError::BodyLength {
            op,
            got: body.len(),
            want: 0,
        },
    }
}

/// How a request ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RpcStatus {
    /// Done; the body carries the result.
    Ok,
    /// The request could not be parsed.
    Malformed,
    /// The request speaks another framing version.
    UnsupportedVersion,
    /// The operation is unknown.
    UnknownOperation,
    /// A data length is zero or above [`RPC_MAX_DATA`].
    TooLarge,
    /// The key is not this queue pair's (or no region has it).
    UnknownKey,
    /// The range is outside the region or the queue pair's windows.
    OutOfBounds,
    /// The queue pair's grant does not give the rights the access needs (or expired).
    AccessDenied,
    /// An atomic on a word that is not 8-byte aligned.
    Misaligned,
    /// The worker failed while executing the request (a fault of the node, not of
    /// the request). Every operation takes effect with one memory access (a memory
    /// primitive, or the slot CAS of an index operation), so the request took effect
    /// entirely or not at all; the client cannot tell which.
    Failed,
}

impl RpcStatus {
    /// Its code on the wire.
    pub fn code(self) -> u8 {
        match self {
            RpcStatus::Ok => 0,
            RpcStatus::Malformed => 1,
            RpcStatus::UnsupportedVersion => 2,
            RpcStatus::UnknownOperation => 3,
            RpcStatus::TooLarge => 4,
            RpcStatus::UnknownKey => 5,
            RpcStatus::OutOfBounds => 6,
            RpcStatus::AccessDenied => 7,
            RpcStatus::Misaligned => 8,
            RpcStatus::Failed => 9,
        }
    }

    /// The status with wire code `code`, if there is one.
    pub fn from_code(code: u8) -> Option<RpcStatus> {
        Some(match code {
            0 => RpcStatus::Ok,
            1 => RpcStatus::Malformed,
            2 => RpcStatus::UnsupportedVersion,
            3 => RpcStatus::UnknownOperation,
            4 => RpcStatus::TooLarge,
            5 => RpcStatus::UnknownKey,
            6 => RpcStatus::OutOfBounds,
            7 => RpcStatus::AccessDenied,
            8 => RpcStatus::Misaligned,
            9 => RpcStatus::Failed,
            _ => return None,
        })
    }

    /// The status of a memory access the node refused.
    pub fn of_access(e: &verbs::mem::AccessError) -> RpcStatus {
        use verbs::mem::AccessError;
        match e {
            AccessError::UnknownRkey(_) => RpcStatus::UnknownKey,
            AccessError::OutOfBounds { .. } => RpcStatus::OutOfBounds,
            AccessError::Misaligned { .. } => RpcStatus::Misaligned,
            AccessError::AccessDenied { .. } => RpcStatus::AccessDenied,
        }
    }
}

/// One reply, as parsed (data borrowed from the message).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Reply<'a> {
    /// The id of the request it answers.
    pub id: u64,
    /// How the request ended.
    pub status: RpcStatus,
    /// On success: a READ's bytes, an atomic's original word (8 bytes, big-endian);
    /// empty otherwise.
    pub body: &'a [u8],
}

impl<'a> Reply<'a> {
    /// A successful reply carrying `body`.
    pub fn ok(id: u64, body: &'a [u8]) -> Reply<'a> {
        Reply {
            id,
            status: RpcStatus::Ok,
            body,
        }
    }

    /// The error reply to request `id` (no body).
    pub fn error(id: u64, status: RpcStatus) -> Reply<'static> {
        Reply {
            id,
            status,
            body: &[],
        }
    }

    /// The error reply to a message that did not parse.
    pub fn refusal(message: &[u8], e: &FrameError) -> Reply<'static> {
        Reply::error(request_id(message), e.status())
    }

    /// The original word of an atomic, when the body is one.
    pub fn word(&self) -> Option<u64> {
        <[u8; 8]>::try_from(self.body).ok().map(u64::from_be_bytes)
    }

    /// The reply message.
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(RPC_HEADER_LEN + self.body.len());
        out.push(RPC_VERSION);
        out.push(self.status.code());
        out.extend_from_slice(&0u16.to_be_bytes());
        out.extend_from_slice(&self.id.to_be_bytes());
        out.extend_from_slice(self.body);
        out
    }
}

/// Parses one reply message.
pub fn parse_reply(message: &[u8]) -> Result<Reply<'_>, FrameError> {
    let (code, id, body) = split_header(message)?;
    let status = RpcStatus::from_code(code).ok_or(FrameError::UnknownStatus(code))?;
    Ok(Reply { id, status, body })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_request_round_trips() {
        let data = [7u8; 100];
        let all = [
            Request::Ping,
            Request::Read {
                rkey: 9,
                va: 0x1000,
                len: 64,
            },
            Request::Write {
                rkey: 9,
                va: 0x1040,
                data: &data,
            },
            Request::CompareSwap {
                rkey: 1,
                va: 8,
                compare: 2,
                swap: 3,
            },
            Request::FetchAdd {
                rkey: 1,
                va: 16,
                add: u64::MAX,
            },
        ];
        for (i, r) in all.iter().enumerate() {
            let bytes = r.encode(i as u64 + 100);
            assert_eq!(bytes.len(), r.encoded_len());
            assert_eq!(parse_request(&bytes), Ok((i as u64 + 100, *r)));
        }
    }

    #[test]
    fn malformed_requests_name_what_is_wrong() {
        assert_eq!(parse_request(&[1, 1]), Err(FrameError::Truncated(2)));
        let mut ping = Request::Ping.encode(5);
        ping[0] = 2;
        assert_eq!(parse_request(&ping), Err(FrameError::Version(2)));
        ping[0] = 1;
        ping[1] = 99;
        assert_eq!(parse_request(&ping), Err(FrameError::UnknownOp(99)));
        ping[1] = 1;
        ping[3] = 1;
        assert_eq!(parse_request(&ping), Err(FrameError::Flags(1)));
        ping[3] = 0;
        ping.push(0);
        assert!(matches!(
            parse_request(&ping),
            Err(FrameError::BodyLength { got: 1, .. })
        ));
        let big = Request::Read {
            rkey: 1,
            va: 0,
            len: RPC_MAX_DATA as u32 + 1,
        }
        .encode(1);
        assert_eq!(
            parse_request(&big),
            Err(FrameError::DataLength(RPC_MAX_DATA as u32 + 1))
        );
        let mut write = Request::Write {
            rkey: 1,
            va: 0,
            data: &[1, 2, 3],
        }
        .encode(1);
        write.pop();
        assert!(matches!(
            parse_request(&write),
            Err(FrameError::BodyLength {
                op: RpcOp::Write,
                ..
            })
        ));
        assert_eq!(
            Reply::refusal(&write, &FrameError::Truncated(0)).id,
            1,
            "the id is echoed when present"
        );
    }

    #[test]
    fn replies_round_trip() {
        let word = 42u64.to_be_bytes();
        let r = Reply::ok(77, &word);
        let bytes = r.encode();
        let back = parse_reply(&bytes).unwrap();
        assert_eq!(back, r);
        assert_eq!(back.word(), Some(42));
        let e = Reply::error(3, RpcStatus::AccessDenied).encode();
        assert_eq!(parse_reply(&e).unwrap().status, RpcStatus::AccessDenied);
        let mut bad = e.clone();
        bad[1] = 200;
        assert_eq!(parse_reply(&bad), Err(FrameError::UnknownStatus(200)));
    }
}
