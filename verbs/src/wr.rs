//! Work requests and their completions: the public vocabulary of the verbs a requester
//! posts — one-sided (READ, WRITE, CAS, FAA) and two-sided (SEND, with or without
//! immediate data). What the receiving side of a SEND sees is in [`crate::recv`].

use std::fmt;

/// Where a one-sided verb lands: a registered region's rkey and a virtual address inside it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct RemoteAddr {
    /// The remote key of the region.
    pub rkey: u32,
    /// The virtual address within the region.
    pub va: u64,
}

impl RemoteAddr {
    /// A remote address.
    pub fn new(rkey: u32, va: u64) -> RemoteAddr {
        RemoteAddr { rkey, va }
    }

    /// The same region, `delta` bytes further on (wrapping on overflow: the responder rejects it).
    pub fn offset(self, delta: u64) -> RemoteAddr {
        RemoteAddr {
            rkey: self.rkey,
            va: self.va.wrapping_add(delta),
        }
    }
}

/// Largest payload a WRITE may carry inline (copied into the work queue entry at post time).
pub const MAX_INLINE: usize = 220;

/// Largest single READ, WRITE or SEND: 1 GiB, so one message never spans more than a quarter of the PSN space.
pub const MAX_MESSAGE: usize = 1 << 30;

/// A verb, as posted to a queue pair's send queue.
#[derive(Clone, PartialEq, Eq)]
pub enum WorkRequest {
    /// SEND of `data` into the next receive buffer the responder's owner posted,
    /// with 32 bits of immediate data delivered beside it when `imm` is set.
    Send {
        /// The message.
        data: Vec<u8>,
        /// Immediate data (SEND with Immediate).
        imm: Option<u32>,
        /// Post the payload inline (at most [`MAX_INLINE`] bytes).
        inline: bool,
    },
    /// RDMA READ of `len` bytes from `remote`.
    Read {
        /// Source.
        remote: RemoteAddr,
        /// Bytes to read.
        len: u32,
    },
    /// RDMA WRITE of `data` to `remote`.
    Write {
        /// Destination.
        remote: RemoteAddr,
        /// Bytes to write.
        data: Vec<u8>,
        /// Post the payload inline (at most [`MAX_INLINE`] bytes).
        inline: bool,
    },
    /// 8-byte compare-and-swap: if the word equals `compare` it becomes `swap`; the old value is returned.
    CompareSwap {
        /// The 8-byte aligned word.
        remote: RemoteAddr,
        /// Expected value.
        compare: u64,
        /// New value.
        swap: u64,
    },
    /// 8-byte fetch-and-add (wrapping); the old value is returned.
    FetchAdd {
        /// The 8-byte aligned word.
        remote: RemoteAddr,
        /// Addend.
        add: u64,
    },
}

impl fmt::Debug for WorkRequest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            WorkRequest::Send { data, imm, inline } => {
                write!(f, "Send({} B", data.len())?;
                if let Some(imm) = imm {
                    write!(f, ", imm {imm:#x}")?;
                }
                write!(f, "{})", if *inline { ", inline" } else { "" })
            }
            WorkRequest::Read { remote, len } => write!(f, "Read({remote:?}, {len} B)"),
            WorkRequest::Write {
                remote,
                data,
                inline,
            } => write!(
                f,
                "Write({remote:?}, {} B{})",
                data.len(),
                if *inline { ", inline" } else { "" }
            ),
            WorkRequest::CompareSwap {
                remote,
                compare,
                swap,
            } => write!(f, "CompareSwap({remote:?}, {compare:#x} -> {swap:#x})"),
            WorkRequest::FetchAdd { remote, add } => write!(f, "FetchAdd({remote:?}, +{add})"),
        }
    }
}

impl WorkRequest {
    /// A READ.
    pub fn read(remote: RemoteAddr, len: u32) -> WorkRequest {
        WorkRequest::Read { remote, len }
    }

    /// A WRITE (inline when small enough).
    pub fn write(remote: RemoteAddr, data: Vec<u8>) -> WorkRequest {
        let inline = data.len() <= MAX_INLINE;
        WorkRequest::Write {
            remote,
            data,
            inline,
        }
    }

    /// A SEND (inline when small enough).
    pub fn send(data: Vec<u8>) -> WorkRequest {
        let inline = data.len() <= MAX_INLINE;
        WorkRequest::Send {
            data,
            imm: None,
            inline,
        }
    }

    /// A SEND with immediate data (inline when small enough).
    pub fn send_with_imm(data: Vec<u8>, imm: u32) -> WorkRequest {
        let inline = data.len() <= MAX_INLINE;
        WorkRequest::Send {
            data,
            imm: Some(imm),
            inline,
        }
    }

    /// A compare-and-swap.
    pub fn cas(remote: RemoteAddr, compare: u64, swap: u64) -> WorkRequest {
        WorkRequest::CompareSwap {
            remote,
            compare,
            swap,
        }
    }

    /// A fetch-and-add.
    pub fn faa(remote: RemoteAddr, add: u64) -> WorkRequest {
        WorkRequest::FetchAdd { remote, add }
    }

    /// Which verb this is.
    pub fn kind(&self) -> WrKind {
        match self {
            WorkRequest::Send { .. } => WrKind::Send,
            WorkRequest::Read { .. } => WrKind::Read,
            WorkRequest::Write { .. } => WrKind::Write,
            WorkRequest::CompareSwap { .. } => WrKind::CompareSwap,
            WorkRequest::FetchAdd { .. } => WrKind::FetchAdd,
        }
    }

    /// The remote address a one-sided verb targets (`None` for a SEND, which lands
    /// wherever the receiver's next buffer is).
    pub fn remote(&self) -> Option<RemoteAddr> {
        match self {
            WorkRequest::Send { .. } => None,
            WorkRequest::Read { remote, .. }
            | WorkRequest::Write { remote, .. }
            | WorkRequest::CompareSwap { remote, .. }
            | WorkRequest::FetchAdd { remote, .. } => Some(*remote),
        }
    }

    /// The remote address a one-sided verb targets, mutably (`None` for a SEND).
    pub fn remote_mut(&mut self) -> Option<&mut RemoteAddr> {
        match self {
            WorkRequest::Send { .. } => None,
            WorkRequest::Read { remote, .. }
            | WorkRequest::Write { remote, .. }
            | WorkRequest::CompareSwap { remote, .. }
            | WorkRequest::FetchAdd { remote, .. } => Some(remote),
        }
    }

    /// Checks that can be made before posting, as a NIC driver would at `post_send`.
    pub fn validate(&self) -> Result<(), PostError> {
        match self {
            WorkRequest::Read { len, .. } if *len as usize > MAX_MESSAGE => {
                Err(PostError::TooLong(*len as usize))
            }
            WorkRequest::Write { data, inline, .. } | WorkRequest::Send { data, inline, .. } => {
                if data.len() > MAX_MESSAGE {
                    Err(PostError::TooLong(data.len()))
                } else if *inline && data.len() > MAX_INLINE {
                    Err(PostError::InlineTooLong(data.len()))
                } else {
                    Ok(())
                }
            }
            _ => Ok(()),
        }
    }
}

/// The kind of a work request.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum WrKind {
    /// SEND (with or without immediate data).
    Send,
    /// RDMA READ.
    Read,
    /// RDMA WRITE.
    Write,
    /// Compare-and-swap.
    CompareSwap,
    /// Fetch-and-add.
    FetchAdd,
}

impl WrKind {
    /// Lower-case name, for metrics and reports.
    pub fn name(self) -> &'static str {
        match self {
            WrKind::Send => "send",
            WrKind::Read => "read",
            WrKind::Write => "write",
            WrKind::CompareSwap => "cas",
            WrKind::FetchAdd => "faa",
        }
    }
}

/// What a successful work request produced.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CompletionValue {
    /// The bytes a READ returned.
    Read(Vec<u8>),
    /// A WRITE was acknowledged.
    Write,
    /// A SEND was acknowledged: it landed in a receive buffer of the responder's owner.
    Send,
    /// The original value of the word a CAS or FAA operated on.
    Atomic(u64),
}

impl CompletionValue {
    /// The READ payload, if this is one.
    pub fn bytes(&self) -> Option<&[u8]> {
        match self {
            CompletionValue::Read(b) => Some(b),
            _ => None,
        }
    }

    /// The atomic's original value, if this is one.
    pub fn atomic(&self) -> Option<u64> {
        match self {
            CompletionValue::Atomic(v) => Some(*v),
            _ => None,
        }
    }
}

/// Why a work request failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum CompletionError {
    /// The responder refused the access: unknown rkey, out of bounds, or missing permission.
    #[error("remote access error (bad rkey, out-of-bounds address or missing permission)")]
    RemoteAccess,
    /// The responder found the request invalid (e.g. a misaligned atomic).
    #[error("remote invalid request (e.g. misaligned atomic or malformed request)")]
    RemoteInvalidRequest,
    /// The responder could not complete the operation.
    #[error("remote operational error")]
    RemoteOperational,
    /// The request was retransmitted the maximum number of times without an answer.
    #[error("transport retry counter exceeded: the memory node did not answer")]
    RetryExceeded,
    /// The queue pair went to the error state before this request completed.
    #[error("work request flushed: the queue pair is in the error state")]
    Flushed,
    /// The response did not have the expected shape (e.g. wrong READ length).
    #[error("malformed response from the memory node")]
    BadResponse,
    /// A SEND met no posted receive buffer more times than the queue pair's RNR retry
    /// count allows (IBA's RNR retry counter exceeded).
    #[error("receiver not ready: no receive buffer was posted within the RNR retry count")]
    RnrRetryExceeded,
}

/// A finished work request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Completion {
    /// The caller's identifier, as given at post time.
    pub wr_id: u64,
    /// Which verb it was.
    pub kind: WrKind,
    /// The outcome.
    pub result: Result<CompletionValue, CompletionError>,
}

/// Why a batch could not be posted.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PostError {
    /// The send queue is full; poll completions first.
    #[error("send queue full ({0} work requests outstanding)")]
    QueueFull(usize),
    /// The queue pair is in the error state; create a new one.
    #[error("queue pair is in the error state")]
    QpError,
    /// The message exceeds the maximum message size.
    #[error("message of {0} bytes exceeds the 1 GiB limit")]
    TooLong(usize),
    /// An inline WRITE or SEND exceeds the inline limit.
    #[error("inline WRITE or SEND of {0} bytes exceeds the {MAX_INLINE}-byte inline limit")]
    InlineTooLong(usize),
    /// The transport failed.
    #[error("transport error: {0}")]
    Transport(String),
}
