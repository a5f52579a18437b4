//! Memory for the experiments: an in-process region (the `local` transport, with
//! the read order, line gap and NIC lock-table model set directly) or an
//! in-process memory node reached over `udp` (soft RoCE).

use std::sync::Arc;

use kvstore::latch_schemes::{Area, IoOptions, Layout, SlotIo};
use memnode::config::MemnodeConfig;
use memnode::server::{Memnode, MemnodeHandle};
use verbs::mem::{AccessFlags, LineGap, MemoryTable, NicLockTable, ReadOrder, Region};
use verbs::rc::RcConfig;
use verbs::transport::local::DirectTransport;
use verbs::transport::udp::UdpTransport;
use verbs::worker::{Worker, WorkerConfig};
use verbs::wr::RemoteAddr;

/// Where the experiment's tuples live.
pub enum Mem {
    /// In this process, applied directly by each thread (`local` transport).
    Local {
        /// The registry the threads' transports use.
        table: Arc<MemoryTable>,
        /// The region.
        region: Arc<Region>,
        /// Its first byte.
        base: RemoteAddr,
    },
    /// An in-process memory node reached over soft RoCE.
    Udp {
        /// The running node (boxed: a handle is much larger than the local variant).
        node: Box<MemnodeHandle>,
        /// Its region's first byte.
        base: RemoteAddr,
    },
}

/// First VA of local regions.
const LOCAL_BASE: u64 = 0x1000_0000;

impl Mem {
    /// `bytes` of in-process memory with `order` and `gap`, and the NIC lock-table
    /// model if `lock_table` is given.
    pub fn local(
        bytes: u64,
        order: ReadOrder,
        gap: LineGap,
        lock_table: Option<NicLockTable>,
    ) -> Result<Mem, String> {
        let region =
            Arc::new(Region::anonymous(bytes.max(64) as usize).map_err(|e| e.to_string())?);
        region.set_read_order(order);
        region.set_line_gap(gap);
        let mut table = MemoryTable::new();
        if let Some(l) = lock_table {
            table = table.with_lock_table(l);
        }
        let info = table
            .register(region.clone(), LOCAL_BASE, AccessFlags::ALL)
            .map_err(|e| e.to_string())?;
        Ok(Mem::Local {
            table: Arc::new(table),
            region,
            base: RemoteAddr::new(info.rkey, info.base_va),
        })
    }

    /// A memory node of `bytes` on loopback whose region reads in `order`.
    pub fn udp(bytes: u64, order: ReadOrder) -> Result<Mem, String> {
        let mut config = MemnodeConfig::local(bytes.max(1 << 20));
        config.read_order = order;
        config.max_qps = 1 << 14;
        let node = Memnode::start(config).map_err(|e| e.to_string())?;
        let r = node
            .regions()
            .first()
            .cloned()
            .ok_or("the memory node has no region")?;
        Ok(Mem::Udp {
            base: RemoteAddr::new(r.rkey, r.base_va),
            node: Box::new(node),
        })
    }

    /// The transport's name.
    pub fn transport(&self) -> &'static str {
        match self {
            Mem::Local { .. } => "local",
            Mem::Udp { .. } => "udp",
        }
    }

    /// The NIC lock-table model of local memory, if any.
    pub fn lock_table(&self) -> Option<&NicLockTable> {
        match self {
            Mem::Local { table, .. } => table.lock_table(),
            Mem::Udp { .. } => None,
        }
    }

    /// A worker for the calling thread and its access to `slots` tuples of
    /// `layout` at the start of the memory.
    pub fn io(
        &self,
        layout: &Layout,
        slots: u64,
        options: IoOptions,
    ) -> Result<(Worker, SlotIo), String> {
        let (worker, h, base) = match self {
            Mem::Local { table, base, .. } => {
                let mut t = DirectTransport::local();
                let h = t.connect(table.clone());
                (Worker::new(Box::new(t), WorkerConfig::default()), h, *base)
            }
            Mem::Udp { node, base } => {
                let mut t = UdpTransport::for_remote(node.data_addr(), RcConfig::default())
                    .map_err(|e| e.to_string())?;
                let (h, _) = memnode::client::connect_udp(&node.admin_url(), &mut t)
                    .map_err(|e| e.to_string())?;
                (Worker::new(Box::new(t), WorkerConfig::default()), h, *base)
            }
        };
        let area = Area::with_slots(base, slots, layout);
        let io = SlotIo::new(worker.qp(h), area, options);
        Ok((worker, io))
    }
}

/// Zero the `bytes` of table memory `io` addresses (its latch array, then its
/// tuples), so a new layout never finds another layout's bytes where its latches
/// are (they would look held by a dead client).
pub async fn clear(io: &SlotIo, bytes: u64) -> Result<(), String> {
    let area = io.area();
    let start = area.latches.unwrap_or(area.data);
    let mut off = 0u64;
    while off < bytes {
        let n = (bytes - off).min(1 << 20);
        io.qp()
            .write(start.offset(off), vec![0u8; n as usize])
            .await
            .map_err(|e| e.to_string())?;
        off += n;
    }
    Ok(())
}
