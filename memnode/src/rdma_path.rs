//! The NIC serving path (cargo feature `rdma`): the node's region registered with an
//! RDMA device through libibverbs (dlopened by `sideway`), and RC responder queue pairs
//! created and connected on request through the admin API.
//!
//! * The region's data is registered once, in the node's protection domain, with
//!   remote READ, WRITE and atomic access; queue pairs created with the admin token
//!   reach the whole region under that memory region's rkey.
//! * A queue pair created with a grant gets a protection domain of its own and one
//!   memory region per granted extent (READ only for read-only grants): its keys are
//!   useless on any other queue pair, and the NIC refuses anything outside the
//!   extents with a remote access error, as the soft-RoCE responder does. The node
//!   destroys it when the grant expires ([`RdmaServing::expire`]).
//! * NIC addresses are the host addresses of the mapping (libibverbs' `ibv_reg_mr`
//!   registers at the buffer's own address); each [`RdmaWindow`] says both the
//!   region address and the NIC address, and clients translate.
//! * Responders post nothing: their send and receive queues hold one entry each and
//!   share one completion queue nobody polls (a responder of one-sided verbs produces
//!   no completions). The node's CPU does nothing on the data path.
//!
//! NIC accesses bypass the per-line seqlocks of [`verbs::mem::Region`]: while a NIC
//! writes the region, soft-RoCE readers of the same lines get the NIC's (PCIe)
//! atomicity, not the region's. Serve one table's clients through one transport.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, MutexGuard, Weak};
use std::time::Duration;

use dmkv_api::grant::GrantAccess;
use dmkv_api::memnode::RegionDescriptor;
use dmkv_api::memnode_rdma::{
    CreateRdmaQpRequest, CreateRdmaQpResponse, RdmaQpInfo, RdmaWindow, gid_from_hex, gid_to_hex,
};
use rand::Rng;
use sideway::ibverbs::AccessFlags;
use sideway::ibverbs::address::{AddressHandleAttribute, Gid};
use sideway::ibverbs::completion::GenericCompletionQueue;
use sideway::ibverbs::device::{DeviceInfo, DeviceList};
use sideway::ibverbs::device_context::DeviceContext;
use sideway::ibverbs::memory_region::MemoryRegion;
use sideway::ibverbs::protection_domain::ProtectionDomain;
use sideway::ibverbs::queue_pair::{BasicQueuePair, QueuePair, QueuePairAttribute, QueuePairState};
use verbs::mem::Region;
use verbs::rc::Pmtu;
use verbs::transport::rdma::{
    ACK_TIMEOUT, ATOMIC_CAP_NONE, HOP_LIMIT, LINK_LAYER_INFINIBAND, MAX_RD_ATOMIC, MIN_RNR_TIMER,
    PORT_STATE_ACTIVE, RETRY_COUNT, RNR_RETRY, chain, from_ibv_mtu, list_error, pick_gid, to_mtu,
};

use crate::memory::NodeMemory;
use crate::rdma_serving::{RdmaQpError, RdmaScope, RdmaServeConfig, RdmaServing};

/// What the node says when it cannot serve RDMA: the soft-RoCE path still exists.
const OTHER_TRANSPORTS: &str =
    "the memory node also serves `udp` (soft RoCE over UDP): start it with --transport udp";

/// How often expired grants' queue pairs are looked for.
const EXPIRY_SWEEP: Duration = Duration::from_secs(1);

/// One responder queue pair. Field order is drop order: the queue pair before the
/// memory regions, those before its protection domain.
struct ServedQp {
    _qp: BasicQueuePair,
    client_qpn: u32,
    client_id: Option<String>,
    windows: Vec<RdmaWindow>,
    expires_at_ms: Option<u64>,
    _mrs: Vec<Arc<MemoryRegion>>,
    _pd: Option<Arc<ProtectionDomain>>,
}

/// The port the node serves from.
#[derive(Debug, Clone, Copy)]
struct PortFacts {
    gid: [u8; 16],
    gid_index: u8,
    lid: u16,
    ethernet: bool,
    mtu: Pmtu,
    max_dest_rd_atomic: u8,
    atomics: bool,
}

/// The node's region registered with an RDMA device, and its responder queue pairs.
pub struct RdmaPath {
    // Field order is drop order: queue pairs, then the region's registration, the
    // completion queue, the protection domain, the device, and the memory last.
    qps: Mutex<BTreeMap<u32, ServedQp>>,
    mr: Arc<MemoryRegion>,
    cq: GenericCompletionQueue,
    pd: Arc<ProtectionDomain>,
    ctx: Arc<DeviceContext>,
    device: String,
    ib_port: u8,
    port: PortFacts,
    region: RegionDescriptor,
    max_qps: usize,
    /// Keeps the registered memory mapped for as long as the NIC may touch it.
    memory: Arc<Region>,
}

impl std::fmt::Debug for RdmaPath {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RdmaPath")
            .field("device", &self.device)
            .field("ib_port", &self.ib_port)
            .field("gid_index", &self.port.gid_index)
            .field("qps", &self.len())
            .finish_non_exhaustive()
    }
}

fn unavailable(what: impl std::fmt::Display) -> String {
    format!("{what}; {OTHER_TRANSPORTS}")
}

impl RdmaPath {
    /// Open `config.device`, register the node's region with it and start the thread
    /// that destroys queue pairs whose grant expired. The error names the device looked
    /// for and the `udp` transport.
    pub fn open(
        config: &RdmaServeConfig,
        memory: &NodeMemory,
        max_qps: usize,
    ) -> Result<Arc<RdmaPath>, String> {
        if cfg!(target_endian = "big") {
            return Err(unavailable(
                "serving RDMA needs a little-endian host (the region's byte image is little-endian)",
            ));
        }
        if config.ib_port == 0 {
            return Err("--ib-port: ports are numbered from 1".into());
        }
        let name = config.device.as_str();
        let list = DeviceList::new()
            .map_err(|e| unavailable(format!("no RDMA device {name:?} ({})", list_error(&e))))?;
        let device = list
            .iter()
            .find(|d| name.is_empty() || d.name() == name)
            .ok_or_else(|| {
                let names: Vec<String> = list.iter().map(|d| d.name()).collect();
                unavailable(if names.is_empty() {
                    format!("no RDMA device {name:?}: libibverbs lists no devices")
                } else {
                    format!("no RDMA device {name:?} among {}", names.join(", "))
                })
            })?;
        let device_name = device.name();
        let name = device_name.as_str();
        let fail = |what: &str, detail: String| {
            unavailable(format!("RDMA device {name}: {what}: {detail}"))
        };
        let ctx = device.open().map_err(|e| fail("opening it", chain(&e)))?;
        drop(list);
        let attr = ctx
            .query_device()
            .map_err(|e| fail("querying it", chain(&e)))?;
        let orig = &attr.attr.orig_attr;
        if config.ib_port > orig.phys_port_cnt {
            return Err(fail(
                "port",
                format!(
                    "it has {} port(s), not port {}",
                    orig.phys_port_cnt, config.ib_port
                ),
            ));
        }
        let atomics = orig.atomic_cap != ATOMIC_CAP_NONE;
        let max_dest_rd_atomic = orig.max_qp_rd_atom.clamp(1, i32::from(MAX_RD_ATOMIC)) as u8;
        let port_attr = ctx
            .query_port(config.ib_port)
            .map_err(|e| fail("querying the port", chain(&e)))?;
        if port_attr.attr.state != PORT_STATE_ACTIVE {
            return Err(fail(
                "port",
                format!(
                    "port {} is not active (state {})",
                    config.ib_port, port_attr.attr.state
                ),
            ));
        }
        let ethernet = port_attr.attr.link_layer != LINK_LAYER_INFINIBAND;
        let gid_index = match config.gid_index {
            Some(i) => i,
            None if !ethernet => 0,
            None => pick_gid(&ctx, config.ib_port, port_attr.attr.gid_tbl_len)
                .ok_or_else(|| fail("GID", format!("port {} has no usable GID", config.ib_port)))?,
        };
        let gid = ctx
            .query_gid(config.ib_port, u32::from(gid_index))
            .map_err(|e| fail("querying the GID", chain(&e)))?
            .raw;
        if ethernet && gid.iter().all(|&b| b == 0) {
            return Err(fail(
                "GID",
                format!("GID {gid_index} is empty (no IP address on the port's interface?)"),
            ));
        }
        let port = PortFacts {
            gid,
            gid_index,
            lid: if ethernet { 0 } else { port_attr.attr.lid },
            ethernet,
            mtu: from_ibv_mtu(port_attr.attr.active_mtu),
            max_dest_rd_atomic,
            atomics,
        };

        let region = memory
            .descriptors()
            .into_iter()
            .next()
            .ok_or_else(|| "the node registered no region".to_owned())?;
        let len = usize::try_from(region.len).map_err(|_| "the region is too large".to_owned())?;
        let pd = ctx
            .alloc_pd()
            .map_err(|e| fail("allocating a protection domain", chain(&e)))?;
        let mut access =
            AccessFlags::LocalWrite | AccessFlags::RemoteRead | AccessFlags::RemoteWrite;
        if atomics {
            access |= AccessFlags::RemoteAtomic;
        }
        // SAFETY: the region's data mapping spans `len` bytes from `data_ptr` and stays
        // mapped while `memory` (held by the returned path, dropped after the memory
        // region) lives; the NIC's accesses race only with atomics and seqlocked
        // accesses of the region, never with a Rust reference to plain bytes.
        let mr = unsafe { pd.reg_mr(memory.region.data_ptr() as usize, len, access) }.map_err(
            |e| {
                fail(
                    "registering the region",
                    format!(
                        "{} ({len} bytes; check the locked-memory limit, `ulimit -l`, or give the container IPC_LOCK)",
                        chain(&e)
                    ),
                )
            },
        )?;
        let mut cq_builder = ctx.create_cq_builder();
        cq_builder.setup_cqe(16);
        let cq = GenericCompletionQueue::from(
            cq_builder
                .build()
                .map_err(|e| fail("creating a completion queue", chain(&e)))?,
        );
        let path = Arc::new(RdmaPath {
            qps: Mutex::new(BTreeMap::new()),
            mr,
            cq,
            pd,
            ctx,
            device: name.to_owned(),
            ib_port: config.ib_port,
            port,
            region,
            max_qps,
            memory: memory.region.clone(),
        });
        spawn_expiry(Arc::downgrade(&path))
            .map_err(|e| format!("cannot start the RDMA grant expiry thread: {e}"))?;
        Ok(path)
    }

    /// The GID table index in use.
    pub fn gid_index(&self) -> u8 {
        self.port.gid_index
    }

    /// The region's key on the NIC (whole-region access).
    pub fn region_rkey(&self) -> u32 {
        self.mr.rkey()
    }

    fn table(&self) -> MutexGuard<'_, BTreeMap<u32, ServedQp>> {
        self.qps
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn device_error(&self, what: &str, detail: String) -> RdmaQpError {
        RdmaQpError::Device {
            device: self.device.clone(),
            detail: format!("{what}: {detail}"),
        }
    }

    /// The NIC address of region address `va`.
    fn nic_va(&self, va: u64) -> u64 {
        self.memory.data_ptr() as u64 + (va - self.region.base_va)
    }

    /// The keys and windows `scope` gives: the region's, or new memory regions in a
    /// new protection domain.
    #[allow(clippy::type_complexity)]
    fn windows(
        &self,
        scope: &RdmaScope<'_>,
    ) -> Result<
        (
            Arc<ProtectionDomain>,
            Option<Arc<ProtectionDomain>>,
            Vec<Arc<MemoryRegion>>,
            Vec<RdmaWindow>,
        ),
        RdmaQpError,
    > {
        let grants = match scope {
            RdmaScope::WholeRegion => {
                let window = RdmaWindow {
                    rkey: self.mr.rkey(),
                    va: self.region.base_va,
                    nic_va: self.nic_va(self.region.base_va),
                    len: self.region.len,
                    writable: true,
                };
                return Ok((self.pd.clone(), None, Vec::new(), vec![window]));
            }
            RdmaScope::Grants(g) => *g,
        };
        let pd = self
            .ctx
            .alloc_pd()
            .map_err(|e| self.device_error("allocating a protection domain", chain(&e)))?;
        let (mut mrs, mut windows) = (Vec::new(), Vec::new());
        for grant in grants {
            let writable = grant.access == GrantAccess::ReadWrite;
            let mut access = AccessFlags::RemoteRead;
            if writable {
                access |= AccessFlags::LocalWrite | AccessFlags::RemoteWrite;
                if self.port.atomics {
                    access |= AccessFlags::RemoteAtomic;
                }
            }
            for w in &grant.windows {
                // Extents outside the region name no memory here: dropped, as on soft RoCE.
                let end = w.offset.saturating_add(w.len).min(self.region.len);
                if w.offset >= end {
                    continue;
                }
                let len = end - w.offset;
                let va = self.region.base_va + w.offset;
                let nic_va = self.nic_va(va);
                // SAFETY: `[nic_va, nic_va + len)` lies inside the registered data
                // mapping (clipped to the region above), which outlives every queue
                // pair's memory regions (dropped with their queue pair, before `memory`).
                let mr = unsafe { pd.reg_mr(nic_va as usize, len as usize, access) }
                    .map_err(|e| self.device_error("registering a granted extent", chain(&e)))?;
                windows.push(RdmaWindow {
                    rkey: mr.rkey(),
                    va,
                    nic_va,
                    len,
                    writable,
                });
                mrs.push(mr);
            }
        }
        if windows.is_empty() {
            return Err(RdmaQpError::Invalid(
                "the grant names no memory inside this node's region".into(),
            ));
        }
        Ok((pd.clone(), Some(pd), mrs, windows))
    }
}

/// Checks a request's numbers and returns the client's GID and the path MTU.
fn check_request(
    req: &CreateRdmaQpRequest,
    port: &PortFacts,
) -> Result<([u8; 16], Pmtu), RdmaQpError> {
    let invalid = |m: String| Err(RdmaQpError::Invalid(m));
    if req.qpn == 0 || req.qpn > 0xFF_FFFF {
        return invalid(format!(
            "qpn {:#x} is not a non-zero 24-bit number",
            req.qpn
        ));
    }
    if req.psn > 0xFF_FFFF {
        return invalid(format!("psn {:#x} exceeds 24 bits", req.psn));
    }
    let Some(gid) = gid_from_hex(&req.gid) else {
        return invalid(format!("gid {:?} is not 32 hexadecimal digits", req.gid));
    };
    if port.ethernet && gid.iter().all(|&b| b == 0) {
        return invalid("RoCE needs the client's GID; it is all zeros".into());
    }
    if !port.ethernet && req.lid == 0 {
        return invalid("InfiniBand needs the client's LID".into());
    }
    let Ok(mtu) = Pmtu::new(req.mtu) else {
        return invalid(format!(
            "mtu {} is not 256, 512, 1024, 2048 or 4096",
            req.mtu
        ));
    };
    let mtu = if mtu.bytes() < port.mtu.bytes() {
        mtu
    } else {
        port.mtu
    };
    Ok((gid, mtu))
}

impl RdmaServing for RdmaPath {
    fn device(&self) -> &str {
        &self.device
    }

    fn create(
        &self,
        req: &CreateRdmaQpRequest,
        scope: RdmaScope<'_>,
    ) -> Result<CreateRdmaQpResponse, RdmaQpError> {
        let (client_gid, mtu) = check_request(req, &self.port)?;
        if self.len() >= self.max_qps {
            return Err(RdmaQpError::TooMany(self.max_qps));
        }
        let (pd, own_pd, mrs, windows) = self.windows(&scope)?;
        let mut builder = pd.create_qp_builder();
        builder
            .setup_max_send_wr(1)
            .setup_max_recv_wr(1)
            .setup_max_send_sge(1)
            .setup_max_recv_sge(1)
            .setup_send_cq(self.cq.clone())
            .setup_recv_cq(self.cq.clone());
        let mut qp = builder
            .build()
            .map_err(|e| self.device_error("creating a queue pair", chain(&e)))?;
        let mut remote = AccessFlags::RemoteRead | AccessFlags::RemoteWrite;
        if self.port.atomics {
            remote |= AccessFlags::RemoteAtomic;
        }
        let mut init = QueuePairAttribute::new();
        init.setup_state(QueuePairState::Init)
            .setup_pkey_index(0)
            .setup_port(self.ib_port)
            .setup_access_flags(remote);
        let psn = rand::rng().random_range(0..(1u32 << 24));
        let mut rtr = QueuePairAttribute::new();
        rtr.setup_state(QueuePairState::ReadyToReceive)
            .setup_path_mtu(to_mtu(mtu))
            .setup_dest_qp_num(req.qpn)
            .setup_rq_psn(req.psn)
            .setup_max_dest_read_atomic(self.port.max_dest_rd_atomic)
            .setup_min_rnr_timer(MIN_RNR_TIMER);
        let mut ah = AddressHandleAttribute::new();
        ah.setup_dest_lid(req.lid)
            .setup_port(self.ib_port)
            .setup_service_level(0);
        if self.port.ethernet {
            ah.setup_grh(
                &Gid { raw: client_gid },
                0,
                self.port.gid_index,
                HOP_LIMIT,
                0,
            );
        }
        rtr.setup_address_vector(&ah);
        let mut rts = QueuePairAttribute::new();
        rts.setup_state(QueuePairState::ReadyToSend)
            .setup_sq_psn(psn)
            .setup_timeout(ACK_TIMEOUT)
            .setup_retry_cnt(RETRY_COUNT)
            .setup_rnr_retry(RNR_RETRY)
            .setup_max_read_atomic(1);
        for (attr, step) in [(&init, "to INIT"), (&rtr, "to RTR"), (&rts, "to RTS")] {
            qp.modify(attr)
                .map_err(|e| self.device_error(&format!("queue pair {step}"), chain(&e)))?;
        }
        let (client_id, expires_at_ms) = match scope {
            RdmaScope::WholeRegion => (None, None),
            RdmaScope::Grants(g) => (
                g.first().map(|g| g.client_id.clone()),
                g.iter().map(|g| g.expires_at_ms).min(),
            ),
        };
        let qpn = qp.qp_number();
        let mut table = self.table();
        if table.len() >= self.max_qps {
            return Err(RdmaQpError::TooMany(self.max_qps));
        }
        table.insert(
            qpn,
            ServedQp {
                _qp: qp,
                client_qpn: req.qpn,
                client_id,
                windows: windows.clone(),
                expires_at_ms,
                _mrs: mrs,
                _pd: own_pd,
            },
        );
        Ok(CreateRdmaQpResponse {
            qpn,
            psn,
            gid: gid_to_hex(&self.port.gid),
            lid: self.port.lid,
            mtu: mtu.bytes(),
            client_qpn: req.qpn,
            device: self.device.clone(),
            windows,
            expires_at_ms,
        })
    }

    fn list(&self) -> Vec<RdmaQpInfo> {
        self.table()
            .iter()
            .map(|(&qpn, q)| RdmaQpInfo {
                qpn,
                client_qpn: q.client_qpn,
                client_id: q.client_id.clone(),
                windows: q.windows.clone(),
                expires_at_ms: q.expires_at_ms,
            })
            .collect()
    }

    fn delete(&self, qpn: u32, client: Option<&str>) -> Result<(), RdmaQpError> {
        let mut table = self.table();
        let q = table.get(&qpn).ok_or(RdmaQpError::NotFound(qpn))?;
        if let Some(client) = client
            && q.client_id.as_deref() != Some(client)
        {
            return Err(RdmaQpError::NotOwner {
                qpn,
                client: client.to_owned(),
            });
        }
        table.remove(&qpn);
        Ok(())
    }

    fn expire(&self, now_ms: u64) -> usize {
        let mut table = self.table();
        let before = table.len();
        table.retain(|_, q| q.expires_at_ms.is_none_or(|t| t > now_ms));
        before - table.len()
    }

    fn len(&self) -> usize {
        self.table().len()
    }
}

/// Destroys expired grants' queue pairs every [`EXPIRY_SWEEP`] until the path is dropped.
fn spawn_expiry(path: Weak<RdmaPath>) -> std::io::Result<()> {
    std::thread::Builder::new()
        .name("memnode-rdma-expiry".into())
        .spawn(move || {
            loop {
                std::thread::sleep(EXPIRY_SWEEP);
                let Some(path) = path.upgrade() else {
                    return;
                };
                let n = path.expire(crate::auth::now_ms());
                if n > 0 {
                    tracing::info!(qps = n, "RDMA queue pairs destroyed: their grants expired");
                }
            }
        })
        .map(|_| ())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn port(ethernet: bool) -> PortFacts {
        PortFacts {
            gid: [1; 16],
            gid_index: 1,
            lid: 0,
            ethernet,
            mtu: Pmtu::new(1024).unwrap(),
            max_dest_rd_atomic: 16,
            atomics: true,
        }
    }

    fn request() -> CreateRdmaQpRequest {
        CreateRdmaQpRequest {
            qpn: 0x11,
            psn: 7,
            gid: gid_to_hex(&[2; 16]),
            lid: 0,
            mtu: 4096,
            grants: Vec::new(),
        }
    }

    #[test]
    fn requests_are_checked_and_the_path_mtu_is_the_smaller() {
        let (gid, mtu) = check_request(&request(), &port(true)).unwrap();
        assert_eq!((gid, mtu.bytes()), ([2; 16], 1024));
        let bad = [
            CreateRdmaQpRequest {
                qpn: 0,
                ..request()
            },
            CreateRdmaQpRequest {
                qpn: 1 << 24,
                ..request()
            },
            CreateRdmaQpRequest {
                psn: 1 << 24,
                ..request()
            },
            CreateRdmaQpRequest {
                gid: "zz".into(),
                ..request()
            },
            CreateRdmaQpRequest {
                gid: gid_to_hex(&[0; 16]),
                ..request()
            },
            CreateRdmaQpRequest {
                mtu: 1500,
                ..request()
            },
        ];
        for req in bad {
            assert!(
                matches!(
                    check_request(&req, &port(true)),
                    Err(RdmaQpError::Invalid(_))
                ),
                "{req:?}"
            );
        }
        // InfiniBand needs a LID, not a GID.
        assert!(check_request(&request(), &port(false)).is_err());
        let ib = CreateRdmaQpRequest {
            lid: 3,
            ..request()
        };
        assert!(check_request(&ib, &port(false)).is_ok());
    }
}
