//! The `rdma` transport: real RDMA NICs through libibverbs (cargo feature `rdma`).
//!
//! Resources are set up with [`sideway`] (which `dlopen`s `libibverbs.so.1` at run time, so
//! the build needs no RDMA libraries): one device context, one protection domain, one
//! completion queue shared by every queue pair of the transport, and one registered
//! staging buffer. Queue pairs are reliable-connection (RC) queue pairs set up in two
//! phases like the `udp` transport: [`RdmaTransport::prepare`] creates one in INIT and
//! returns what the memory node needs ([`RdmaLocalParams`]); after the out-of-band
//! exchange, [`RdmaTransport::connect`] moves it to RTR and RTS with the memory node's
//! [`RdmaRemoteParams`].
//!
//! # Hot path
//!
//! A posted batch is validated completely first (all or nothing), then written with one
//! `start_post_send` … `post` sequence, i.e. one doorbell. When the provider supports the
//! extended `ibv_wr_*` interface (mlx5, rxe, …) the work requests are built directly in
//! the send queue, with no allocation per post; otherwise sideway's classic `ibv_post_send`
//! path is used. Every work request is signalled. The per-work-request bookkeeping
//! (caller's `wr_id`, verb, queue pair, length) lives in a table preallocated at
//! [`RdmaTransport::open`]; the NIC's `wr_id` is the table index plus a generation
//! counter, so a stale completion can never be matched to a reused entry.
//!
//! # Staging buffer
//!
//! READ targets, atomic results and the payload of non-inline WRITEs live in one
//! registered buffer of [`RdmaConfig::local_buffer_bytes`], carved into
//! [`RdmaConfig::cq_size`] fixed-size slots (the slot size is the buffer size divided by
//! the slot count, rounded down to a multiple of 64 bytes). Table entry *i* owns slot
//! *i*, so a work request holds exactly one slot from post to completion. Because every
//! work request is signalled, the number of slots is also the bound that keeps the shared
//! completion queue from overrunning. A READ or non-inline WRITE longer than one slot is
//! refused at post time with [`PostError::TooLong`] (see [`RdmaTransport::slot_bytes`]);
//! WRITEs posted inline need no slot payload. With the defaults (16 MiB, 1024 slots) a
//! slot holds 16 KiB.
//!
//! # Two-sided verbs
//!
//! A SEND (with or without immediate data) is posted like a WRITE (`IBV_WR_SEND`,
//! `IBV_WR_SEND_WITH_IMM`; inline or from its staging slot). A queue pair given a
//! [`RecvQueue`] ([`RdmaTransport::set_recv_queue`]) receives: at every poll the
//! transport moves the buffers its owner posted there onto the NIC's receive queue, each
//! backed by a staging slot (so one receive holds at most [`RdmaTransport::slot_bytes`]
//! bytes, whatever the buffer's own size); when a receive completes, the message is
//! copied into the owner's buffer and handed back through the [`RecvQueue`] with its byte
//! length and the queue pair numbers. RNR NAKs and their retries are the NIC's business
//! ([`RNR_RETRY`], [`MIN_RNR_TIMER`]); a NIC does not report them to software. sideway
//! does not expose a work completion's `IBV_WC_WITH_IMM` flag, so the immediate data of a
//! SEND with Immediate is not reported on this transport (`imm` stays `None`; only an
//! `IBV_WC_RECV_RDMA_WITH_IMM` completion carries it).
//!
//! # Errors
//!
//! Completion statuses map onto [`CompletionError`]. Unlike the soft transports, a real RC
//! queue pair goes to the error state on any failed work request (for example a remote
//! access error): the work requests behind it complete as [`CompletionError::Flushed`],
//! and later posts to it fail with [`PostError::QpError`]; prepare and connect a new
//! queue pair to continue.
//!
//! # Statistics
//!
//! The NIC does the I/O, so packet and byte counters are estimates: what the posted verbs
//! put on the wire as RoCEv2 without loss (see [`super::wire_cost`]), counted at post
//! time as the other direct transports do. Retransmissions, timeouts and NAKs stay zero.

use std::error::Error as StdError;
use std::ptr::NonNull;
use std::sync::Arc;
use std::sync::atomic::{Ordering, fence};
use std::time::{Duration, Instant};

use memmap2::MmapMut;
use rand::Rng;
use sideway::ibverbs::AccessFlags;
use sideway::ibverbs::address::{AddressHandleAttribute, Gid};
use sideway::ibverbs::completion::{
    GenericCompletionQueue, WorkCompletionOperationType, WorkCompletionStatus,
};
use sideway::ibverbs::device::{
    DeviceInfo, DeviceList, GetDeviceListError, GetDeviceListErrorKind,
};
use sideway::ibverbs::device_context::{DeviceContext, Mtu};
use sideway::ibverbs::memory_region::MemoryRegion;
use sideway::ibverbs::protection_domain::ProtectionDomain;
use sideway::ibverbs::queue_pair::{
    GenericQueuePair, PostSendGuard, QueuePair, QueuePairAttribute, QueuePairState,
    SendOperationFlags, SetInlineData, SetScatterGatherEntry, WorkRequestFlags,
};

use super::{ConnectError, QpHandle, Transport, TransportKind, TransportStats, wire_cost};
use crate::rc::Pmtu;
use crate::recv::{RecvCompletion, RecvError, RecvQueue};
use crate::wr::{
    Completion, CompletionError, CompletionValue, MAX_INLINE, PostError, WorkRequest, WrKind,
};

/// What to say when this transport cannot be used here.
pub const ALTERNATIVES: &str = "use the `udp` transport (soft RoCE over UDP), `shm` (same-host shared memory) or `local` (in-process) instead";

/// Local ACK timeout exponent set at RTS: 4.096 µs × 2^14 ≈ 67 ms before a retransmission,
/// long enough for a loaded memory node, short enough to notice a dead one in ≈ 0.5 s.
pub const ACK_TIMEOUT: u8 = 14;

/// Transport retries before a work request fails with [`CompletionError::RetryExceeded`]
/// (7 is the maximum the verbs allow).
pub const RETRY_COUNT: u8 = 7;

/// Receiver-not-ready retries of a SEND that finds no receive buffer posted; 7 means
/// "retry forever" (the peer is alive: it answers each try with an RNR NAK).
pub const RNR_RETRY: u8 = 7;

/// Outstanding READs and atomics per queue pair the requester asks for (clamped to the
/// device's `max_qp_init_rd_atom`). 16 is what current NICs offer; the NIC stalls the send
/// queue beyond it, it never fails a request for it.
pub const MAX_RD_ATOMIC: u8 = 16;

/// Minimum RNR NAK timer set at RTR (12 ≈ 0.64 ms): how long a peer's SEND that found
/// our receive queue empty waits before trying again.
pub const MIN_RNR_TIMER: u8 = 12;

/// GRH hop limit of RoCE v2 packets (routable across L3 hops).
pub const HOP_LIMIT: u8 = 64;

/// `IBV_PORT_ACTIVE`.
pub const PORT_STATE_ACTIVE: u32 = 4;
/// `IBV_LINK_LAYER_INFINIBAND`.
pub const LINK_LAYER_INFINIBAND: u8 = 1;
const GID_TYPE_SYSFS_ROCE_V2: u32 = 1;
/// `IBV_ATOMIC_NONE`.
pub const ATOMIC_CAP_NONE: u32 = 0;

/// Settings of an [`RdmaTransport`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RdmaConfig {
    /// The device to use by name (e.g. `mlx5_0`); `None` takes the first one listed.
    pub device: Option<String>,
    /// The physical port (numbered from 1).
    pub port: u8,
    /// The GID table index to source packets from. `None` picks one: on Ethernet
    /// (RoCE) the first RoCE v2 GID holding an IPv4-mapped address, else the first RoCE v2
    /// GID, else the first non-zero GID; on InfiniBand index 0.
    pub gid_index: Option<u8>,
    /// Send queue depth of each queue pair (clamped to the device's `max_qp_wr`).
    pub max_send_wr: u32,
    /// Largest WRITE posted inline; longer "inline" WRITEs go through the staging buffer.
    /// Lowered (halved until the device accepts) when the device takes less inline data.
    pub max_inline: u32,
    /// Completion queue entries, which is also the number of staging slots and so the
    /// bound on work requests outstanding over all queue pairs (clamped to `max_cqe`).
    pub cq_size: u32,
    /// Size of the registered staging buffer, split evenly into `cq_size` slots.
    pub local_buffer_bytes: usize,
}

impl Default for RdmaConfig {
    fn default() -> Self {
        RdmaConfig {
            device: None,
            port: 1,
            gid_index: None,
            max_send_wr: 256,
            max_inline: MAX_INLINE as u32,
            cq_size: 1024,
            local_buffer_bytes: 16 << 20,
        }
    }
}

/// What the client side of a queue pair tells the memory node (out of band) when connecting.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RdmaLocalParams {
    /// Our queue pair number.
    pub qpn: u32,
    /// The first PSN we will send (the memory node's expected PSN, its `rq_psn`).
    pub psn: u32,
    /// Our GID (RoCE: the IP address packets come from).
    pub gid: [u8; 16],
    /// Our port's LID (InfiniBand; 0 on RoCE).
    pub lid: u16,
    /// Our port's active MTU, the largest path MTU we can use.
    pub mtu: Pmtu,
}

/// What the memory node answers: where its queue pair is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RdmaRemoteParams {
    /// Its queue pair number.
    pub qpn: u32,
    /// The first PSN it will send (our `rq_psn`).
    pub psn: u32,
    /// Its GID (required on RoCE).
    pub gid: [u8; 16],
    /// Its LID (required on InfiniBand; ignored on RoCE).
    pub lid: u16,
    /// The path MTU to use (lowered to our port's active MTU if larger).
    pub mtu: Pmtu,
}

/// One outstanding work request.
#[derive(Debug, Clone, Copy)]
struct Pending {
    wr_id: u64,
    qp: QpHandle,
    kind: WrKind,
    len: u32,
    /// A receive (its buffer is in `RdmaTransport::recv_bufs`), not a send-queue entry.
    recv: bool,
    /// Part of a batch whose post failed half-way (classic `ibv_post_send` only): whatever
    /// completes is reclaimed but not reported.
    orphan: bool,
}

/// A bookkeeping entry; entry `i` owns staging slot `i`.
#[derive(Debug, Clone, Copy, Default)]
struct Entry {
    generation: u32,
    pending: Option<Pending>,
}

struct RdmaQp {
    qp: GenericQueuePair,
    qpn: u32,
    psn: u32,
    connected: bool,
    failed: bool,
    pmtu: Pmtu,
    outstanding: usize,
    remote_qpn: u32,
    /// Where received SENDs go, if this queue pair receives.
    recv: Option<RecvQueue>,
    /// Receives on the NIC's receive queue.
    recv_posted: usize,
}

/// Real RDMA over libibverbs: RC queue pairs sharing one completion queue and one
/// registered staging buffer.
pub struct RdmaTransport {
    // Field order is drop order: queue pairs before the memory region and completion
    // queue, those before the protection domain and context, and the staging memory last.
    qps: Vec<Option<RdmaQp>>,
    _mr: Arc<MemoryRegion>,
    cq: GenericCompletionQueue,
    pd: Arc<ProtectionDomain>,
    _ctx: Arc<DeviceContext>,
    device_name: String,
    port: u8,
    gid_index: u8,
    gid: [u8; 16],
    lid: u16,
    ethernet: bool,
    port_mtu: Pmtu,
    atomics: bool,
    max_rd_atomic: u8,
    max_send_wr: usize,
    max_inline: usize,
    slot_bytes: usize,
    lkey: u32,
    entries: Vec<Entry>,
    free: Vec<u32>,
    batch_ids: Vec<u32>,
    /// The owner's buffer of each entry that is a posted receive.
    recv_bufs: Vec<Option<Vec<u8>>>,
    /// Polled work completions: (wr_id, status, opcode, byte_len, imm_data).
    wc_scratch: Vec<(u64, u32, u32, u32, u32)>,
    stats: TransportStats,
    /// Start of the staging memory; only accessed through raw pointers because the NIC
    /// writes into it behind the compiler's back.
    base: NonNull<u8>,
    _buffer: MmapMut,
}

/// An error and its sources, joined with ": ".
pub fn chain(e: &dyn StdError) -> String {
    let mut s = e.to_string();
    let mut cur = e.source();
    while let Some(src) = cur {
        let text = src.to_string();
        if !s.ends_with(&text) {
            s.push_str(": ");
            s.push_str(&text);
        }
        cur = src.source();
    }
    s
}

fn no_device(detail: impl std::fmt::Display) -> ConnectError {
    ConnectError::Unavailable(format!("no RDMA device found ({detail}); {ALTERNATIVES}"))
}

fn unusable(device: &str, detail: impl std::fmt::Display) -> ConnectError {
    ConnectError::Unavailable(format!(
        "RDMA device {device} is unusable ({detail}); {ALTERNATIVES}"
    ))
}

/// Why libibverbs could not list devices, in words.
pub fn list_error(e: &GetDeviceListError) -> String {
    let GetDeviceListErrorKind::Ibverbs(io) = &e.0 else {
        return format!("libibverbs could not list devices: {}", chain(e));
    };
    match io.raw_os_error() {
        // rdma-mummy-sys reports a libibverbs it could not load as EOPNOTSUPP.
        Some(libc::EOPNOTSUPP) => {
            "libibverbs.so.1 could not be loaded: rdma-core is not installed".into()
        }
        Some(libc::ENOSYS) => "the kernel has no RDMA (uverbs) support".into(),
        _ => format!("libibverbs could not list devices: {}", chain(e)),
    }
}

/// The verbs' MTU code of a path MTU.
pub fn to_mtu(p: Pmtu) -> Mtu {
    match p.bytes() {
        256 => Mtu::Mtu256,
        512 => Mtu::Mtu512,
        2048 => Mtu::Mtu2048,
        4096 => Mtu::Mtu4096,
        _ => Mtu::Mtu1024,
    }
}

/// The `ibv_mtu` code of a port attribute (1 = 256 … 5 = 4096) as a [`Pmtu`].
pub fn from_ibv_mtu(code: u32) -> Pmtu {
    match code {
        1..=5 => Pmtu::new(128 << code).unwrap_or(Pmtu::DEFAULT),
        _ => Pmtu::DEFAULT,
    }
}

fn map_status(status: u32) -> CompletionError {
    const REM_ACCESS: u32 = WorkCompletionStatus::RemoteAccessError as u32;
    const REM_INV_REQ: u32 = WorkCompletionStatus::RemoteInvalidRequestError as u32;
    const REM_OP: u32 = WorkCompletionStatus::RemoteOperationError as u32;
    const RETRY: u32 = WorkCompletionStatus::RetryCounterExceededError as u32;
    const RNR_RETRY: u32 = WorkCompletionStatus::ResponderNotReadyRetryCounterExceededError as u32;
    const FLUSH: u32 = WorkCompletionStatus::WorkRequestFlushedError as u32;
    match status {
        REM_ACCESS => CompletionError::RemoteAccess,
        REM_INV_REQ => CompletionError::RemoteInvalidRequest,
        REM_OP => CompletionError::RemoteOperational,
        RETRY => CompletionError::RetryExceeded,
        RNR_RETRY => CompletionError::RnrRetryExceeded,
        FLUSH => CompletionError::Flushed,
        _ => CompletionError::BadResponse,
    }
}

impl RdmaTransport {
    /// Open a device and set up the protection domain, completion queue and staging buffer.
    ///
    /// Fails with [`ConnectError::Unavailable`] (naming the `udp`, `shm` and `local`
    /// transports) when libibverbs cannot be loaded, no device exists, or the chosen device
    /// or port cannot be used; with [`ConnectError::Invalid`] for an inconsistent config.
    pub fn open(config: RdmaConfig) -> Result<RdmaTransport, ConnectError> {
        if config.cq_size == 0 || config.max_send_wr == 0 {
            return Err(ConnectError::Invalid(
                "cq_size and max_send_wr must be at least 1".into(),
            ));
        }
        if config.port == 0 {
            return Err(ConnectError::Invalid("ports are numbered from 1".into()));
        }
        let list = DeviceList::new().map_err(|e| no_device(list_error(&e)))?;
        if list.is_empty() {
            return Err(no_device("libibverbs lists no devices"));
        }
        let device = match &config.device {
            Some(name) => list.iter().find(|d| d.name() == *name).ok_or_else(|| {
                let names: Vec<String> = list.iter().map(|d| d.name()).collect();
                no_device(format!("device {name:?} not among {}", names.join(", ")))
            })?,
            None => list
                .iter()
                .next()
                .ok_or_else(|| no_device("libibverbs lists no devices"))?,
        };
        let name = device.name();
        let ctx = device
            .open()
            .map_err(|e| unusable(&name, format!("opening it failed: {}", chain(&e))))?;
        drop(list);

        let dev = ctx.query_device().map_err(|e| unusable(&name, chain(&e)))?;
        let orig = &dev.attr.orig_attr;
        if config.port > orig.phys_port_cnt {
            return Err(ConnectError::Invalid(format!(
                "device {name} has {} port(s), not port {}",
                orig.phys_port_cnt, config.port
            )));
        }
        let atomics = orig.atomic_cap != ATOMIC_CAP_NONE;
        let max_rd_atomic = orig.max_qp_init_rd_atom.clamp(1, MAX_RD_ATOMIC as i32) as u8;
        let max_send_wr = (config.max_send_wr as i64).min(orig.max_qp_wr.max(1) as i64) as usize;
        let cq_size = (config.cq_size as i64).min(orig.max_cqe.max(1) as i64) as usize;

        let port = ctx
            .query_port(config.port)
            .map_err(|e| unusable(&name, chain(&e)))?;
        if port.attr.state != PORT_STATE_ACTIVE {
            return Err(unusable(
                &name,
                format!(
                    "port {} is not active (state {})",
                    config.port, port.attr.state
                ),
            ));
        }
        let ethernet = port.attr.link_layer != LINK_LAYER_INFINIBAND;
        let port_mtu = from_ibv_mtu(port.attr.active_mtu);
        let lid = if ethernet { 0 } else { port.attr.lid };
        let gid_index = match config.gid_index {
            Some(i) => i,
            None if !ethernet => 0,
            None => pick_gid(&ctx, config.port, port.attr.gid_tbl_len).ok_or_else(|| {
                unusable(&name, format!("port {} has no usable GID", config.port))
            })?,
        };
        let gid = ctx
            .query_gid(config.port, gid_index as u32)
            .map_err(|e| unusable(&name, chain(&e)))?
            .raw;
        if ethernet && gid.iter().all(|&b| b == 0) {
            return Err(unusable(
                &name,
                format!(
                    "GID {gid_index} of port {} is empty (no IP address configured?)",
                    config.port
                ),
            ));
        }

        let slot_bytes = (config.local_buffer_bytes / cq_size) & !63;
        if slot_bytes < 64 {
            return Err(ConnectError::Invalid(format!(
                "local_buffer_bytes {} gives less than 64 bytes to each of {cq_size} slots",
                config.local_buffer_bytes
            )));
        }
        let buffer_len = slot_bytes * cq_size;
        let mut buffer = MmapMut::map_anon(buffer_len).map_err(|e| ConnectError::Io {
            context: format!("mapping a {buffer_len}-byte staging buffer"),
            source: e,
        })?;
        let base = NonNull::new(buffer.as_mut_ptr()).ok_or_else(|| {
            ConnectError::Invalid("the staging buffer mapping is at address 0".into())
        })?;

        let pd = ctx.alloc_pd().map_err(|e| unusable(&name, chain(&e)))?;
        // SAFETY: `base` points to `buffer_len` bytes of an anonymous mapping owned by the
        // transport. The memory region is declared before the mapping in `RdmaTransport`, so it
        // is deregistered before the mapping is unmapped, and the mapping never moves.
        let mr = unsafe { pd.reg_mr(base.as_ptr() as usize, buffer_len, AccessFlags::LocalWrite) }
            .map_err(|e| {
                unusable(
                    &name,
                    format!(
                        "registering the {buffer_len}-byte staging buffer: {} (check the locked-memory limit, `ulimit -l`)",
                        chain(&e)
                    ),
                )
            })?;
        let lkey = mr.lkey();

        let mut cq_builder = ctx.create_cq_builder();
        cq_builder.setup_cqe(cq_size as u32);
        let cq = match cq_builder.build_ex() {
            Ok(cq) => GenericCompletionQueue::from(cq),
            Err(_) => GenericCompletionQueue::from(
                cq_builder.build().map_err(|e| unusable(&name, chain(&e)))?,
            ),
        };

        Ok(RdmaTransport {
            qps: Vec::new(),
            _mr: mr,
            cq,
            pd,
            _ctx: ctx,
            device_name: name,
            port: config.port,
            gid_index,
            gid,
            lid,
            ethernet,
            port_mtu,
            atomics,
            max_rd_atomic,
            max_send_wr,
            max_inline: (config.max_inline as usize).min(MAX_INLINE),
            slot_bytes,
            lkey,
            entries: vec![Entry::default(); cq_size],
            free: (0..cq_size as u32).rev().collect(),
            batch_ids: Vec::with_capacity(max_send_wr),
            recv_bufs: vec![None; cq_size],
            wc_scratch: Vec::with_capacity(cq_size),
            stats: TransportStats::default(),
            base,
            _buffer: buffer,
        })
    }

    /// The name of the device in use.
    pub fn device_name(&self) -> &str {
        &self.device_name
    }

    /// The GID table index packets are sourced from.
    pub fn gid_index(&self) -> u8 {
        self.gid_index
    }

    /// Largest READ or non-inline WRITE one work request may carry (one staging slot).
    pub fn slot_bytes(&self) -> usize {
        self.slot_bytes
    }

    /// Work requests that may be outstanding over all queue pairs (staging slots).
    pub fn slots(&self) -> usize {
        self.entries.len()
    }

    /// Whether the device supports the 8-byte atomics (CAS and FAA).
    pub fn supports_atomics(&self) -> bool {
        self.atomics
    }

    /// Whether a queue pair is in the error state (a work request on it failed).
    pub fn is_failed(&self, qp: QpHandle) -> bool {
        self.qps
            .get(qp)
            .and_then(Option::as_ref)
            .is_some_and(|q| q.failed)
    }

    /// Create a queue pair in INIT and return the parameters to send to the memory node.
    pub fn prepare(&mut self) -> Result<RdmaLocalParams, ConnectError> {
        let name = self.device_name.clone();
        let mut ops = SendOperationFlags::Write
            | SendOperationFlags::Read
            | SendOperationFlags::Send
            | SendOperationFlags::SendWithImmediate;
        if self.atomics {
            ops |= SendOperationFlags::AtomicCompareAndSwap | SendOperationFlags::AtomicFetchAndAdd;
        }
        let mut builder = self.pd.create_qp_builder();
        builder
            .setup_max_send_wr(self.max_send_wr as u32)
            .setup_max_recv_wr(self.max_send_wr as u32)
            .setup_max_send_sge(1)
            .setup_max_recv_sge(1)
            .setup_max_inline_data(self.max_inline as u32)
            .setup_send_cq(self.cq.clone())
            .setup_recv_cq(self.cq.clone())
            .setup_send_ops_flags(ops);
        // The extended interface writes work requests straight into the send queue; fall
        // back to classic `ibv_post_send` for providers without it. A device that takes
        // less inline data than asked refuses the queue pair: ask for half as much until
        // it accepts (the lower limit then holds for every later queue pair too).
        let mut qp = loop {
            builder.setup_max_inline_data(self.max_inline as u32);
            let made = match builder.build_ex() {
                Ok(qp) => Ok(GenericQueuePair::from(qp)),
                Err(_) => builder.build().map(GenericQueuePair::from),
            };
            match made {
                Ok(qp) => break qp,
                Err(_) if self.max_inline > 0 => self.max_inline /= 2,
                Err(e) => {
                    return Err(unusable(
                        &name,
                        format!("creating a queue pair: {}", chain(&e)),
                    ));
                }
            }
        };
        let mut attr = QueuePairAttribute::new();
        attr.setup_state(QueuePairState::Init)
            .setup_pkey_index(0)
            .setup_port(self.port)
            // The client is never the target of a one-sided verb.
            .setup_access_flags(AccessFlags::none());
        qp.modify(&attr)
            .map_err(|e| unusable(&name, format!("queue pair to INIT: {}", chain(&e))))?;
        let qpn = qp.qp_number();
        let psn = rand::rng().random_range(0..(1u32 << 24));
        self.qps.push(Some(RdmaQp {
            qp,
            qpn,
            psn,
            connected: false,
            failed: false,
            pmtu: self.port_mtu,
            outstanding: 0,
            remote_qpn: 0,
            recv: None,
            recv_posted: 0,
        }));
        Ok(RdmaLocalParams {
            qpn,
            psn,
            gid: self.gid,
            lid: self.lid,
            mtu: self.port_mtu,
        })
    }

    /// Connect the queue pair prepared as `local` to the memory node's queue pair `remote`
    /// (INIT → RTR → RTS); on failure the queue pair is destroyed.
    pub fn connect(
        &mut self,
        local: RdmaLocalParams,
        remote: RdmaRemoteParams,
    ) -> Result<QpHandle, ConnectError> {
        if remote.qpn > 0xFF_FFFF || remote.psn > 0xFF_FFFF {
            return Err(ConnectError::Invalid(format!(
                "QPN {:#x} / PSN {:#x} exceed 24 bits",
                remote.qpn, remote.psn
            )));
        }
        if self.ethernet && remote.gid.iter().all(|&b| b == 0) {
            return Err(ConnectError::Invalid(
                "RoCE needs the memory node's GID".into(),
            ));
        }
        if !self.ethernet && remote.lid == 0 {
            return Err(ConnectError::Invalid(
                "InfiniBand needs the memory node's LID".into(),
            ));
        }
        let Some(handle) = self.qps.iter().position(|q| {
            q.as_ref()
                .is_some_and(|q| q.qpn == local.qpn && !q.connected)
        }) else {
            return Err(ConnectError::Invalid(format!(
                "no prepared, unconnected queue pair {:#x}",
                local.qpn
            )));
        };
        let pmtu = if remote.mtu.bytes() < self.port_mtu.bytes() {
            remote.mtu
        } else {
            self.port_mtu
        };
        let (port, gid_index, ethernet, max_rd_atomic) =
            (self.port, self.gid_index, self.ethernet, self.max_rd_atomic);
        let name = self.device_name.clone();
        let Some(q) = self.qps.get_mut(handle).and_then(Option::as_mut) else {
            return Err(ConnectError::Invalid("queue pair vanished".into()));
        };
        if q.psn != local.psn {
            return Err(ConnectError::Invalid(format!(
                "queue pair {:#x} was prepared with PSN {:#x}, not {:#x}",
                local.qpn, q.psn, local.psn
            )));
        }

        let mut rtr = QueuePairAttribute::new();
        rtr.setup_state(QueuePairState::ReadyToReceive)
            .setup_path_mtu(to_mtu(pmtu))
            .setup_dest_qp_num(remote.qpn)
            .setup_rq_psn(remote.psn)
            .setup_max_dest_read_atomic(0)
            .setup_min_rnr_timer(MIN_RNR_TIMER);
        let mut ah = AddressHandleAttribute::new();
        ah.setup_dest_lid(remote.lid)
            .setup_port(port)
            .setup_service_level(0);
        if ethernet {
            ah.setup_grh(&Gid { raw: remote.gid }, 0, gid_index, HOP_LIMIT, 0);
        }
        rtr.setup_address_vector(&ah);

        let mut rts = QueuePairAttribute::new();
        rts.setup_state(QueuePairState::ReadyToSend)
            .setup_sq_psn(local.psn)
            .setup_timeout(ACK_TIMEOUT)
            .setup_retry_cnt(RETRY_COUNT)
            .setup_rnr_retry(RNR_RETRY)
            .setup_max_read_atomic(max_rd_atomic);

        let result =
            q.qp.modify(&rtr)
                .map_err(|e| format!("queue pair to RTR: {}", chain(&e)))
                .and_then(|()| {
                    q.qp.modify(&rts)
                        .map_err(|e| format!("queue pair to RTS: {}", chain(&e)))
                });
        match result {
            Ok(()) => {
                q.connected = true;
                q.pmtu = pmtu;
                q.remote_qpn = remote.qpn;
                Ok(handle)
            }
            Err(detail) => {
                if let Some(slot) = self.qps.get_mut(handle) {
                    *slot = None;
                }
                Err(ConnectError::Unavailable(format!(
                    "connecting over RDMA device {name} failed: {detail}"
                )))
            }
        }
    }

    /// Destroy the queue pair numbered `qpn` (prepared or connected). One with work
    /// outstanding is moved to the error state instead, so its work requests flush and
    /// their staging slots come back; it stays failed. Returns whether it was destroyed.
    pub fn discard(&mut self, qpn: u32) -> bool {
        let Some(slot) = self
            .qps
            .iter_mut()
            .find(|q| q.as_ref().is_some_and(|q| q.qpn == qpn))
        else {
            return false;
        };
        let busy = slot
            .as_ref()
            .is_some_and(|q| q.outstanding > 0 || q.recv_posted > 0);
        if !busy {
            *slot = None;
            return true;
        }
        if let Some(q) = slot.as_mut() {
            q.failed = true;
            let mut err = QueuePairAttribute::new();
            err.setup_state(QueuePairState::Error);
            let _ = q.qp.modify(&err);
        }
        false
    }

    /// The largest WRITE this transport posts inline (the device's and the config's
    /// limit, at most [`MAX_INLINE`]).
    pub fn max_inline(&self) -> usize {
        self.max_inline
    }

    fn room(&self, q: &RdmaQp) -> usize {
        self.max_send_wr
            .saturating_sub(q.outstanding)
            .min(self.free.len())
    }

    /// Checks made before anything is posted.
    fn check(&self, wr: &WorkRequest) -> Result<(), PostError> {
        wr.validate()?;
        match wr {
            WorkRequest::Read { len, .. } if *len as usize > self.slot_bytes => {
                Err(PostError::TooLong(*len as usize))
            }
            WorkRequest::Write { data, inline, .. } | WorkRequest::Send { data, inline, .. }
                if !(*inline && data.len() <= self.max_inline) && data.len() > self.slot_bytes =>
            {
                Err(PostError::TooLong(data.len()))
            }
            WorkRequest::CompareSwap { .. } | WorkRequest::FetchAdd { .. } if !self.atomics => {
                Err(PostError::Transport(format!(
                    "RDMA device {} does not support atomics",
                    self.device_name
                )))
            }
            _ => Ok(()),
        }
    }

    /// Attach (or detach) the receive queue SENDs arriving on `qp` land in. Buffers
    /// already on the NIC stay there until they complete or the queue pair is flushed.
    pub fn set_recv_queue(&mut self, qp: QpHandle, recv: Option<RecvQueue>) {
        if let Some(q) = self.qps.get_mut(qp).and_then(Option::as_mut) {
            q.recv = recv;
        }
    }

    /// Move the buffers owners posted to receive queues onto the NIC, one staging slot
    /// each, while slots are free.
    fn replenish_receives(&mut self) {
        let (lkey, slot_bytes, base) = (self.lkey, self.slot_bytes, self.base.as_ptr() as u64);
        let limit = self.max_send_wr;
        for h in 0..self.qps.len() {
            while let Some(q) = self.qps.get(h).and_then(Option::as_ref) {
                if !q.connected || q.failed || q.recv_posted >= limit {
                    break;
                }
                // Keep a slot free for the send queue.
                if self.free.len() < 2 {
                    break;
                }
                let Some((wr_id, buf)) = q.recv.as_ref().and_then(RecvQueue::pop_posted) else {
                    break;
                };
                let Some(idx) = self.free.pop() else {
                    break;
                };
                let len = buf.len().min(slot_bytes) as u32;
                let generation = self.entries.get(idx as usize).map_or(0, |e| e.generation);
                if let Some(e) = self.entries.get_mut(idx as usize) {
                    e.pending = Some(Pending {
                        wr_id,
                        qp: h,
                        kind: WrKind::Send,
                        len,
                        recv: true,
                        orphan: false,
                    });
                }
                if let Some(b) = self.recv_bufs.get_mut(idx as usize) {
                    *b = Some(buf);
                }
                let nic_id = (u64::from(generation) << 32) | u64::from(idx);
                let slot = base + (idx as usize * slot_bytes) as u64;
                let Some(q) = self.qps.get_mut(h).and_then(Option::as_mut) else {
                    break;
                };
                let mut guard = q.qp.start_post_recv();
                let wr = guard.construct_wr(nic_id);
                if len == 0 {
                    // SAFETY: an empty scatter list references no memory.
                    unsafe { wr.setup_sge_list(&[]) };
                } else {
                    // SAFETY: the slot lies in the registered staging buffer (lkey), holds
                    // `len <= slot_bytes` bytes, and stays reserved until this receive
                    // completes.
                    unsafe { wr.setup_sge(lkey, slot, len) };
                }
                match guard.post() {
                    Ok(()) => q.recv_posted += 1,
                    Err(_) => {
                        // The queue pair cannot take receives: give the buffer back.
                        let recv = q.recv.clone();
                        q.failed = true;
                        let buf = self.recv_bufs.get_mut(idx as usize).and_then(Option::take);
                        self.release(idx);
                        if let (Some(recv), Some(data)) = (recv, buf) {
                            recv.complete(RecvCompletion {
                                wr_id,
                                qpn: 0,
                                remote_qpn: 0,
                                byte_len: 0,
                                imm: None,
                                data,
                                result: Err(RecvError::Flushed),
                            });
                        }
                        break;
                    }
                }
            }
        }
    }

    /// Finish a receive entry: copy the message into the owner's buffer and hand it back.
    fn complete_receive(&mut self, idx: u32, p: Pending, status: u32, wc: (u32, u32, u32)) {
        let (opcode, byte_len, imm_data) = wc;
        let mut data = self
            .recv_bufs
            .get_mut(idx as usize)
            .and_then(Option::take)
            .unwrap_or_default();
        let Some(q) = self.qps.get_mut(p.qp).and_then(Option::as_mut) else {
            return;
        };
        q.recv_posted = q.recv_posted.saturating_sub(1);
        let (qpn, remote_qpn) = (q.qpn, q.remote_qpn);
        let ok = status == WorkCompletionStatus::Success as u32;
        if !ok && status != WorkCompletionStatus::WorkRequestFlushedError as u32 {
            q.failed = true;
        }
        let Some(recv) = q.recv.clone() else {
            return;
        };
        let len = (byte_len as usize).min(p.len as usize);
        let result = if ok && len <= data.len() {
            // SAFETY: the slot is inside the staging mapping and holds `p.len >= len`
            // bytes that the NIC finished writing (its completion was just polled).
            unsafe {
                std::ptr::copy_nonoverlapping(
                    self.base.as_ptr().add(idx as usize * self.slot_bytes),
                    data.as_mut_ptr(),
                    len,
                );
            }
            data.truncate(len);
            Ok(())
        } else if ok || status == WorkCompletionStatus::LocalLengthError as u32 {
            Err(RecvError::LocalLength)
        } else {
            Err(RecvError::Flushed)
        };
        let imm = (result.is_ok()
            && opcode == WorkCompletionOperationType::ReceiveWithImmediate as u32)
            .then_some(imm_data);
        recv.complete(RecvCompletion {
            wr_id: p.wr_id,
            qpn,
            remote_qpn,
            byte_len: if result.is_ok() { len as u32 } else { 0 },
            imm,
            data,
            result,
        });
    }

    fn release(&mut self, idx: u32) {
        if let Some(e) = self.entries.get_mut(idx as usize) {
            e.pending = None;
            e.generation = e.generation.wrapping_add(1);
            self.free.push(idx);
        }
    }
}

/// Whether an RDMA device can be opened here, for tests that need one: the device's
/// name, or why not. The device is `$DMKV_RDMA_DEVICE` when set, else the first one.
pub fn probe() -> Result<String, String> {
    let device = std::env::var("DMKV_RDMA_DEVICE")
        .ok()
        .filter(|d| !d.is_empty());
    let config = RdmaConfig {
        device,
        ..RdmaConfig::default()
    };
    RdmaTransport::open(config)
        .map(|t| t.device_name().to_owned())
        .map_err(|e| e.to_string())
}

/// The preferred GID of an Ethernet port: RoCE v2 with an IPv4-mapped address first.
pub fn pick_gid(ctx: &Arc<DeviceContext>, port: u8, table_len: i32) -> Option<u8> {
    let mut best: Option<(u8, u8)> = None;
    for index in 0..table_len.clamp(0, 256) as u32 {
        let Ok(gid) = ctx.query_gid(port, index) else {
            continue;
        };
        if gid.raw.iter().all(|&b| b == 0) {
            continue;
        }
        let v2 = ctx
            .query_gid_type(port, index)
            .is_ok_and(|t| t == GID_TYPE_SYSFS_ROCE_V2);
        let ipv4 = gid.raw[..10].iter().all(|&b| b == 0) && gid.raw[10..12] == [0xff, 0xff];
        let score = u8::from(v2) * 2 + u8::from(ipv4);
        if best.is_none_or(|(s, _)| score > s) {
            best = Some((score, index as u8));
        }
    }
    best.map(|(_, i)| i)
}

impl Transport for RdmaTransport {
    fn wire_cost(&self, qp: QpHandle, wr: &WorkRequest) -> super::WireCost {
        let pmtu = self
            .qps
            .get(qp)
            .and_then(Option::as_ref)
            .map_or(self.port_mtu, |q| q.pmtu);
        wire_cost(wr, pmtu)
    }

    fn kind(&self) -> TransportKind {
        TransportKind::Rdma
    }

    fn post(&mut self, qp: QpHandle, batch: Vec<(u64, WorkRequest)>) -> Result<(), PostError> {
        let Some(q) = self.qps.get(qp).and_then(Option::as_ref) else {
            return Err(PostError::QpError);
        };
        if !q.connected || q.failed {
            return Err(PostError::QpError);
        }
        for (_, wr) in &batch {
            self.check(wr)?;
        }
        let (outstanding, pmtu) = (q.outstanding, q.pmtu);
        if batch.len() > self.room(q) {
            return Err(PostError::QueueFull(outstanding));
        }
        if batch.is_empty() {
            return Ok(());
        }

        // Reserve an entry (and its staging slot) per work request, stage WRITE payloads.
        self.batch_ids.clear();
        for (wr_id, wr) in &batch {
            let Some(idx) = self.free.pop() else {
                // Cannot happen after the room check; undo and report.
                while let Some(i) = self.batch_ids.pop() {
                    self.release(i);
                }
                return Err(PostError::QueueFull(outstanding));
            };
            let len = match wr {
                WorkRequest::Read { len, .. } => *len,
                WorkRequest::Write { data, .. } | WorkRequest::Send { data, .. } => {
                    data.len() as u32
                }
                _ => 8,
            };
            if let Some(e) = self.entries.get_mut(idx as usize) {
                e.pending = Some(Pending {
                    wr_id: *wr_id,
                    qp,
                    kind: wr.kind(),
                    len,
                    recv: false,
                    orphan: false,
                });
            }
            if let WorkRequest::Write { data, inline, .. } | WorkRequest::Send { data, inline, .. } =
                wr
                && !(*inline && data.len() <= self.max_inline)
                && !data.is_empty()
            {
                // SAFETY: slot `idx` spans `slot_bytes` bytes inside the staging mapping
                // (`idx < slots`), `data.len() <= slot_bytes` was checked, and the slot was just
                // taken from the free list, so neither the NIC nor another entry uses it.
                unsafe {
                    std::ptr::copy_nonoverlapping(
                        data.as_ptr(),
                        self.base.as_ptr().add(idx as usize * self.slot_bytes),
                        data.len(),
                    );
                }
            }
            self.batch_ids.push(idx);
        }

        // One post sequence, one doorbell.
        let base = self.base.as_ptr() as u64;
        let (lkey, slot_bytes, max_inline) = (self.lkey, self.slot_bytes, self.max_inline);
        if self.qps.get(qp).and_then(Option::as_ref).is_none() {
            while let Some(i) = self.batch_ids.pop() {
                self.release(i);
            }
            return Err(PostError::QpError);
        }
        let Some(q) = self.qps.get_mut(qp).and_then(Option::as_mut) else {
            return Err(PostError::QpError);
        };
        let classic = matches!(q.qp, GenericQueuePair::Basic(_));
        let mut guard = q.qp.start_post_send();
        for ((_, wr), &idx) in batch.iter().zip(&self.batch_ids) {
            let generation = self.entries.get(idx as usize).map_or(0, |e| e.generation);
            let nic_id = (u64::from(generation) << 32) | u64::from(idx);
            let slot = base + (idx as usize * slot_bytes) as u64;
            let h = guard.construct_wr(nic_id, WorkRequestFlags::Signaled);
            match wr {
                WorkRequest::Send { data, imm, inline } => {
                    let b = match imm {
                        Some(imm) => h.setup_send_imm(*imm),
                        None => h.setup_send(),
                    };
                    if *inline && data.len() <= max_inline {
                        b.setup_inline_data(data);
                    } else if data.is_empty() {
                        // SAFETY: an empty scatter list references no memory.
                        unsafe { b.setup_sge_list(&[]) };
                    } else {
                        // SAFETY: the payload was staged in this reserved slot above; the slot
                        // is registered (lkey) and untouched until the completion.
                        unsafe { b.setup_sge(lkey, slot, data.len() as u32) };
                    }
                }
                WorkRequest::Read { remote, len } => {
                    let b = h.setup_read(remote.rkey, remote.va);
                    if *len == 0 {
                        // SAFETY: an empty scatter list references no memory.
                        unsafe { b.setup_sge_list(&[]) };
                    } else {
                        // SAFETY: the slot lies in the registered staging buffer (lkey), holds
                        // at least `len` bytes, and stays reserved until this work request
                        // completes.
                        unsafe { b.setup_sge(lkey, slot, *len) };
                    }
                }
                WorkRequest::Write {
                    remote,
                    data,
                    inline,
                } => {
                    let b = h.setup_write(remote.rkey, remote.va);
                    if *inline && data.len() <= max_inline {
                        // Copied into the work queue entry now.
                        b.setup_inline_data(data);
                    } else if data.is_empty() {
                        // SAFETY: an empty scatter list references no memory.
                        unsafe { b.setup_sge_list(&[]) };
                    } else {
                        // SAFETY: the payload was staged in this reserved slot above; the slot
                        // is registered (lkey) and untouched until the completion.
                        unsafe { b.setup_sge(lkey, slot, data.len() as u32) };
                    }
                }
                WorkRequest::CompareSwap {
                    remote,
                    compare,
                    swap,
                } => {
                    let b = h.setup_atomic_compare_swap(remote.rkey, remote.va, *compare, *swap);
                    // SAFETY: the NIC writes the 8-byte original value into the reserved,
                    // registered, 64-byte aligned slot.
                    unsafe { b.setup_sge(lkey, slot, 8) };
                }
                WorkRequest::FetchAdd { remote, add } => {
                    let b = h.setup_atomic_fetch_add(remote.rkey, remote.va, *add);
                    // SAFETY: as for compare-and-swap.
                    unsafe { b.setup_sge(lkey, slot, 8) };
                }
            }
        }
        match guard.post() {
            Ok(()) => {
                q.outstanding += batch.len();
                self.stats.doorbells += 1;
                for (_, wr) in &batch {
                    let cost = wire_cost(wr, pmtu);
                    self.stats.work_requests += 1;
                    self.stats.packets_sent += cost.request_packets;
                    self.stats.bytes_sent += cost.request_bytes;
                    self.stats.packets_received += cost.response_packets;
                    self.stats.bytes_received += cost.response_bytes;
                }
                Ok(())
            }
            Err(e) => {
                let detail = chain(&e);
                if classic {
                    // `ibv_post_send` may have posted a prefix of the batch. Put the queue pair
                    // in the error state so whatever was posted is flushed, and keep those
                    // entries reserved until their completions arrive (entries never posted
                    // stay reserved: at most one batch per failed queue pair).
                    q.failed = true;
                    q.outstanding += batch.len();
                    let mut err = QueuePairAttribute::new();
                    err.setup_state(QueuePairState::Error);
                    let _ = q.qp.modify(&err);
                    for &idx in &self.batch_ids {
                        if let Some(p) = self
                            .entries
                            .get_mut(idx as usize)
                            .and_then(|e| e.pending.as_mut())
                        {
                            p.orphan = true;
                        }
                    }
                } else {
                    // `ibv_wr_complete` posts all or nothing: nothing reached the NIC.
                    let ids = std::mem::take(&mut self.batch_ids);
                    for &idx in &ids {
                        self.release(idx);
                    }
                    self.batch_ids = ids;
                }
                Err(PostError::Transport(format!("ibv post send: {detail}")))
            }
        }
    }

    fn send_queue_room(&self, qp: QpHandle) -> usize {
        self.qps
            .get(qp)
            .and_then(Option::as_ref)
            .map_or(0, |q| self.room(q))
    }

    fn poll(&mut self, _now: Instant, out: &mut Vec<(QpHandle, Completion)>) -> usize {
        self.replenish_receives();
        self.wc_scratch.clear();
        if let Ok(poller) = self.cq.start_poll() {
            for wc in poller {
                self.wc_scratch.push((
                    wc.wr_id(),
                    wc.status(),
                    wc.opcode(),
                    wc.byte_len(),
                    wc.imm_data(),
                ));
            }
        }
        if self.wc_scratch.is_empty() {
            return 0;
        }
        // The provider orders CQE reads before data reads; this keeps the compiler from
        // hoisting staging-buffer reads above the poll.
        fence(Ordering::Acquire);
        let mut n = 0;
        let scratch = std::mem::take(&mut self.wc_scratch);
        for &(nic_id, status, opcode, byte_len, imm_data) in &scratch {
            let idx = (nic_id & 0xFFFF_FFFF) as u32;
            let generation = (nic_id >> 32) as u32;
            let Some(p) = self
                .entries
                .get(idx as usize)
                .filter(|e| e.generation == generation)
                .and_then(|e| e.pending)
            else {
                self.stats.dropped += 1;
                continue;
            };
            if p.recv {
                self.complete_receive(idx, p, status, (opcode, byte_len, imm_data));
                self.release(idx);
                continue;
            }
            let ok = status == WorkCompletionStatus::Success as u32;
            let result = if ok {
                let slot = idx as usize * self.slot_bytes;
                match p.kind {
                    WrKind::Write => Ok(CompletionValue::Write),
                    WrKind::Send => Ok(CompletionValue::Send),
                    WrKind::Read => {
                        let len = (p.len as usize).min(self.slot_bytes);
                        let mut bytes = vec![0u8; len];
                        // SAFETY: the slot is inside the staging mapping, holds `len` bytes,
                        // and the NIC finished writing it (its completion was just polled).
                        unsafe {
                            std::ptr::copy_nonoverlapping(
                                self.base.as_ptr().add(slot),
                                bytes.as_mut_ptr(),
                                len,
                            );
                        }
                        Ok(CompletionValue::Read(bytes))
                    }
                    WrKind::CompareSwap | WrKind::FetchAdd => {
                        let mut word = [0u8; 8];
                        // SAFETY: as for READ; the NIC wrote the 8-byte original value here in
                        // host byte order.
                        unsafe {
                            std::ptr::copy_nonoverlapping(
                                self.base.as_ptr().add(slot),
                                word.as_mut_ptr(),
                                8,
                            );
                        }
                        Ok(CompletionValue::Atomic(u64::from_ne_bytes(word)))
                    }
                }
            } else {
                Err(map_status(status))
            };
            self.release(idx);
            if let Some(q) = self.qps.get_mut(p.qp).and_then(Option::as_mut) {
                q.outstanding = q.outstanding.saturating_sub(1);
                if !ok {
                    // Any failed work request moves a real RC queue pair to the error state.
                    q.failed = true;
                }
            }
            if p.orphan {
                continue;
            }
            self.stats.completions += 1;
            if result.is_err() {
                self.stats.errors += 1;
            }
            out.push((
                p.qp,
                Completion {
                    wr_id: p.wr_id,
                    kind: p.kind,
                    result,
                },
            ));
            n += 1;
        }
        self.wc_scratch = scratch;
        n
    }

    /// With work outstanding this returns at once, so the caller busy-polls the completion
    /// queue (the usual way to drive a NIC: completions arrive within microseconds and polling
    /// costs no system call). With nothing outstanding no completion can arrive, so it
    /// sleeps until `until`, in steps of at most a millisecond.
    fn wait(&mut self, until: Instant) {
        let receiving: usize = self.qps.iter().flatten().map(|q| q.recv_posted).sum();
        if self.free.len() + receiving < self.entries.len() {
            std::hint::spin_loop();
            return;
        }
        let left = until.saturating_duration_since(Instant::now());
        if !left.is_zero() {
            std::thread::sleep(left.min(Duration::from_millis(1)));
        }
    }

    fn stats(&self) -> TransportStats {
        self.stats
    }
}
