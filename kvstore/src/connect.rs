//! Building a session's transport and its queue pair to one memory node, for each
//! transport kind: `local` (in-process memory of an embedded cluster), `shm` (the
//! memory node's shared-memory file), `udp` (soft RoCE, optionally through a relay
//! or the switch accelerator), `rdma` (an RDMA NIC, cargo feature `rdma`: the
//! session opens the device itself, so its queue pairs and completion queue are its
//! own, as SMART's thread-aware allocation prescribes). A session connects to every
//! memory node when it opens and again to one whose queue pair it lost
//! ([`crate::reconnect`]).

use std::collections::HashMap;
use std::net::SocketAddrV4;
use std::sync::Arc;
use std::time::{Duration, Instant};

use dmkv_api::metadata::MemnodeInfo;
use dmkv_api::qp::{QpPath, connect_udp_qp_with_ring_as};
use verbs::transport::local::DirectTransport;
use verbs::transport::shm::ShmTarget;
use verbs::transport::udp::UdpTransport;
use verbs::transport::{QpHandle, TransportKind};

use crate::address_map::AddressMap;
use crate::client::ClientInner;
use crate::error::KvError;
use crate::fabric::Fabric;
use crate::grants::QpGrants;

/// A memory node's region as the session addresses it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct RegionRef {
    pub rkey: u32,
    pub base_va: u64,
    pub len: u64,
}

/// A queue pair to clean up when it is replaced or the session ends (`udp`: the
/// node's responder).
#[derive(Debug, Clone)]
pub(crate) struct RemoteQp {
    pub admin_url: String,
    pub qpn: u32,
    /// The session's end of it (how the node lists it, as `client_qpn`).
    pub client_qpn: u32,
    /// The switch the queue pair goes through and its connection id there.
    pub switch: Option<(String, u8)>,
    /// The grants it was created with or last given (`None`: created without).
    pub grants: Option<QpGrants>,
    /// It is an RDMA queue pair (`/v1/rdma/qps`): it takes its grants at creation and
    /// is replaced, not re-granted.
    pub rdma: bool,
}

impl RemoteQp {
    /// What the session presents for the queue pair's admin calls: its grant, if any.
    fn credential(&self) -> Option<&str> {
        self.grants.as_ref().map(|g| g.credential.as_str())
    }

    /// Destroy the responder (and the switch's routes), best effort: the memory node
    /// may be gone. Through the switch, the switch made the responder with its own
    /// credential and the session removes its connection there.
    pub(crate) fn destroy(&self) {
        match &self.switch {
            Some((switch, conn)) => crate::accel::remove_route(switch, self.credential(), *conn),
            None if self.rdma => {
                let _ = dmkv_api::memnode_admin::delete_rdma_qp_as(
                    &self.admin_url,
                    self.credential(),
                    self.qpn,
                );
            }
            None => {
                let _ = dmkv_api::memnode_admin::delete_qp_as(
                    &self.admin_url,
                    self.credential(),
                    self.qpn,
                );
            }
        }
    }

    /// Where the queue pair's grants go: the switch's connection, or the node's
    /// responder.
    pub(crate) fn grant_target(&self) -> crate::grants::GrantTarget<'_> {
        match &self.switch {
            Some((switch, conn)) => crate::grants::GrantTarget::Switch {
                admin_url: switch,
                conn: *conn,
            },
            None => crate::grants::GrantTarget::Memnode {
                admin_url: &self.admin_url,
                qpn: self.qpn,
            },
        }
    }

    /// Destroy the responder when the node still has it for this session's end:
    /// a node that restarted may have given its number to another queue pair.
    pub(crate) fn destroy_if_ours(&self) {
        if self.rdma {
            // A NIC does not hand a destroyed queue pair's number out again soon; one
            // created with a grant can only be destroyed by its own client anyway.
            self.destroy();
            return;
        }
        match dmkv_api::memnode_admin::qp_info_as(&self.admin_url, self.credential(), self.qpn) {
            Ok(info) if info.client_qpn == self.client_qpn => self.destroy(),
            // Gone already, someone else's, or the node does not answer.
            _ => {
                if let Some((switch, conn)) = &self.switch {
                    crate::accel::remove_route(switch, self.credential(), *conn);
                }
            }
        }
    }
}

/// A queue pair to one memory node, just made.
#[derive(Debug, Clone)]
pub(crate) struct NewQp {
    /// The queue pair in the session's fabric.
    pub handle: QpHandle,
    /// The node's region.
    pub region: RegionRef,
    /// The responder to destroy when done with it, if there is one.
    pub remote: Option<RemoteQp>,
    /// How long the node lets the queue pair idle before destroying it.
    pub idle_timeout: Option<Duration>,
    /// It goes through the switch accelerator.
    pub accelerated: bool,
    /// How remote addresses posted on it are translated: the queue pair's own key
    /// (created with a grant) or an RDMA queue pair's windows; `None`: as posted.
    pub address_map: Option<AddressMap>,
    /// When it must be replaced (an RDMA queue pair whose grants are due for
    /// refreshing).
    pub replace_at: Option<Instant>,
    /// Where the memory node's RPC replies arrive, and the request ring if the queue
    /// pair has one (`None`: it runs no RPC workers, or the transport receives none).
    pub rpc: Option<crate::rpc_port::RpcSetup>,
}

/// What [`open`] builds.
pub(crate) struct Connected {
    pub fabric: Fabric,
    pub qps: HashMap<u64, NewQp>,
    /// Memory nodes this session could not reach, and why: tables whose data is
    /// elsewhere are not affected; operations on their data try again later.
    pub unreachable: HashMap<u64, String>,
    /// The region of every registered memory node, reached or not: enough to name
    /// memory on a node that is down (a replicated table's home whose backups
    /// serve in its place).
    pub regions: HashMap<u64, RegionRef>,
    /// Makes further queue pairs the same way.
    pub connector: Connector,
}

/// Makes a session's queue pairs: the client's transport, relay and accelerator.
pub(crate) struct Connector {
    client: Arc<ClientInner>,
    /// The accelerator `udp` queue pairs go through, decided when the session opened.
    accelerator: Option<String>,
}

fn unavailable(what: String) -> KvError {
    KvError::unavailable(what)
}

fn first_region(n: &MemnodeInfo) -> Result<RegionRef, KvError> {
    let r = n
        .regions
        .first()
        .ok_or_else(|| unavailable(format!("memnode {} registered no region", n.id)))?;
    Ok(RegionRef {
        rkey: r.rkey,
        base_va: r.base_va,
        len: r.len,
    })
}

fn parse_addr(n: &MemnodeInfo) -> Result<SocketAddrV4, KvError> {
    n.data_addr.parse().map_err(|_| {
        unavailable(format!(
            "memnode {} registered data address {:?}, not ip:port",
            n.id, n.data_addr
        ))
    })
}

/// Why a memory node is not worth connecting to, from its registration.
fn unhealthy(n: &MemnodeInfo) -> Option<String> {
    (!n.healthy).then(|| "the metadata service reports it unhealthy (no heartbeat)".to_owned())
}

/// Build the client's transport and connect to every registered memory node.
pub(crate) fn open(client: &Arc<ClientInner>) -> Result<Connected, KvError> {
    let nodes = client.meta.memnodes().map_err(crate::client::meta_error)?;
    let first = nodes.first().ok_or_else(|| {
        unavailable("no memory node is registered with the metadata service".into())
    })?;
    let (fabric, accelerator) = match client.options.connection.transport {
        TransportKind::Local => (Fabric::Direct(DirectTransport::local()), None),
        TransportKind::Shm => (Fabric::Direct(DirectTransport::shm()), None),
        TransportKind::Udp => {
            let t =
                UdpTransport::for_remote(parse_addr(first)?, client.options.connection.rc.clone())
                    .map_err(|e| {
                        KvError::unavailable_because(format!("creating the UDP transport: {e}"), e)
                    })?;
            (Fabric::Udp(Box::new(t)), crate::accel::resolve(client)?)
        }
        TransportKind::Rdma => (crate::connect_rdma::fabric(client)?, None),
    };
    let connector = Connector {
        client: client.clone(),
        accelerator,
    };
    let mut connected = Connected {
        fabric,
        qps: HashMap::new(),
        unreachable: HashMap::new(),
        regions: nodes
            .iter()
            .filter_map(|n| Some((n.id, first_region(n).ok()?)))
            .collect(),
        connector,
    };
    let udp = client.options.connection.transport == TransportKind::Udp;
    let mut first_error = None;
    for n in &nodes {
        // A memory node that is down must not keep this session from the tables
        // that hold nothing on it: skip it, and say why when its data is wanted.
        if udp && let Some(why) = unhealthy(n) {
            connected.unreachable.insert(n.id, why);
            continue;
        }
        match connected.connector.connect(&mut connected.fabric, n) {
            Ok(qp) => {
                connected.qps.insert(n.id, qp);
            }
            // The other transports reach every node or none.
            Err(e) if !udp => return Err(e),
            Err(error) => {
                tracing::warn!(memnode = n.id, admin = %n.admin_url, %error, "memory node unreachable; the session goes on without it");
                connected.unreachable.insert(n.id, error.to_string());
                first_error.get_or_insert(error);
            }
        }
    }
    if connected.qps.is_empty() {
        return Err(first_error.unwrap_or_else(|| {
            unavailable(format!(
                "no memory node is reachable: {}",
                connected
                    .unreachable
                    .iter()
                    .map(|(id, why)| format!("memnode {id}: {why}"))
                    .collect::<Vec<_>>()
                    .join("; ")
            ))
        }));
    }
    Ok(connected)
}

impl Connector {
    /// The client the session belongs to.
    pub(crate) fn client(&self) -> &Arc<ClientInner> {
        &self.client
    }

    /// Memory node `id` as the metadata service has it registered now.
    pub(crate) fn lookup(&self, id: u64) -> Result<MemnodeInfo, KvError> {
        let nodes = self
            .client
            .meta
            .memnodes()
            .map_err(crate::client::meta_error)?;
        let node = nodes
            .into_iter()
            .find(|n| n.id == id)
            .ok_or_else(|| unavailable(format!("memnode {id} is not registered")))?;
        if self.client.options.connection.transport == TransportKind::Udp
            && let Some(why) = unhealthy(&node)
        {
            return Err(unavailable(format!("memnode {id}: {why}")));
        }
        Ok(node)
    }

    /// A new queue pair in `fabric` to memory node `n`.
    pub(crate) fn connect(&self, fabric: &mut Fabric, n: &MemnodeInfo) -> Result<NewQp, KvError> {
        let region = first_region(n)?;
        let client = &self.client;
        match (client.options.connection.transport, fabric) {
            (TransportKind::Local, Fabric::Direct(t)) => {
                let mem = client.local_memory.get(&n.id).ok_or_else(|| {
                    unavailable(format!(
                        "memnode {} is not in this process: the local transport reaches \
                         embedded memory nodes only",
                        n.id
                    ))
                })?;
                Ok(NewQp {
                    handle: t.connect(mem.clone()),
                    region,
                    remote: None,
                    idle_timeout: None,
                    accelerated: false,
                    address_map: None,
                    replace_at: None,
                    rpc: None,
                })
            }
            (TransportKind::Shm, Fabric::Direct(t)) => {
                let path = n
                    .regions
                    .first()
                    .and_then(|r| r.path.clone())
                    .ok_or_else(|| {
                        unavailable(format!(
                            "memnode {} has no shared-memory file (start it with --shm, or use udp)",
                            n.id
                        ))
                    })?;
                let handle = t
                    .connect_shm(&ShmTarget {
                        path: path.into(),
                        rkey: region.rkey,
                        base_va: region.base_va,
                    })
                    .map_err(|e| {
                        KvError::unavailable_because(format!("memnode {}: {e}", n.id), e)
                    })?;
                Ok(NewQp {
                    handle,
                    region,
                    remote: None,
                    idle_timeout: None,
                    accelerated: false,
                    address_map: None,
                    replace_at: None,
                    rpc: None,
                })
            }
            (TransportKind::Udp, Fabric::Udp(t)) => self.connect_udp(t, n, region),
            #[cfg(feature = "rdma")]
            (TransportKind::Rdma, Fabric::Rdma(t)) => {
                crate::connect_rdma::connect(&self.client, t, n, region)
            }
            (kind, _) => Err(KvError::Unsupported(format!(
                "no queue pairs of the {kind} transport in this session"
            ))),
        }
    }

    fn connect_udp(
        &self,
        t: &mut UdpTransport,
        n: &MemnodeInfo,
        region: RegionRef,
    ) -> Result<NewQp, KvError> {
        let path = match (
            &self.client.options.connection.udp_relay,
            self.accelerator.as_deref(),
        ) {
            (Some(relay), _) => QpPath::Relay {
                relay: relay.as_ref(),
                memnode: parse_addr(n)?,
            },
            (None, Some(url)) => QpPath::ViaSwitch(url),
            (None, None) => QpPath::Direct,
        };
        // Through the switch, its control plane creates the responder with its own
        // credential and confines the connection to the session's grants in its
        // pipeline (the switch keeps the region's keys, which its functions match on).
        let grants = crate::grants::fetch(&self.client, n.id)?;
        let credential = grants
            .as_ref()
            .and_then(|g| g.first())
            .map(|g| g.grant.clone());
        let want_ring =
            self.client.options.access.transport == crate::rpc_transport::RpcTransport::Write;
        let c =
            connect_udp_qp_with_ring_as(path, &n.admin_url, t, credential.as_deref(), want_ring)
                .map_err(|e| match path {
                    QpPath::ViaSwitch(_) => KvError::unavailable_because(
                        format!("memnode {} through the accelerator: {e}", n.id),
                        e,
                    ),
                    _ => KvError::unavailable_because(format!("memnode {}: {e}", n.id), e),
                })?;
        let switch = match path {
            QpPath::ViaSwitch(url) => c.switch_conn.map(|conn| (url.to_owned(), conn)),
            _ => None,
        };
        // The node's own answer names the region this queue pair serves. The metadata
        // service's listing can still name the region of an earlier incarnation (a
        // node that restarted with new memory and has not registered again yet):
        // requests under that key would be refused until the queue pair is replaced.
        let region = match c.regions.first() {
            Some(r) if (r.rkey, r.base_va, r.len) != (region.rkey, region.base_va, region.len) => {
                tracing::info!(
                    memnode = n.id,
                    listed_rkey = region.rkey,
                    serving_rkey = r.rkey,
                    "the memory node serves another region than the metadata service lists; using the node's"
                );
                RegionRef {
                    rkey: r.rkey,
                    base_va: r.base_va,
                    len: r.len,
                }
            }
            _ => region,
        };
        // A node with RPC workers answers on this queue pair: receive its replies.
        let rpc = match c.rpc_psn {
            Some(psn) => {
                let replies = verbs::recv::RecvQueue::new(crate::rpc_port::REPLY_QUEUE_DEPTH);
                t.set_recv_queue(c.handle, Some(replies.clone()), psn)
                    .map_err(|e| {
                        KvError::unavailable_because(
                            format!("memnode {}: the RPC reply queue: {e}", n.id),
                            e,
                        )
                    })?;
                Some(crate::rpc_port::RpcSetup {
                    replies,
                    ring: c.rpc_ring,
                })
            }
            None => None,
        };
        let held = grants.as_deref().and_then(crate::grants::held);
        let remote = RemoteQp {
            admin_url: n.admin_url.clone(),
            qpn: c.remote_qpn,
            client_qpn: c.local_qpn,
            switch: switch.clone(),
            grants: held,
            rdma: false,
        };
        if let Some(g) = &grants
            && let Err(e) = crate::grants::install(remote.grant_target(), g, true)
        {
            remote.destroy();
            return Err(e);
        }
        Ok(NewQp {
            handle: c.handle,
            region,
            accelerated: switch.is_some(),
            remote: Some(remote),
            idle_timeout: c.idle_timeout_ms.map(Duration::from_millis),
            address_map: c.rkey.map(|own| AddressMap::Rekey {
                region: region.rkey,
                own,
            }),
            replace_at: None,
            rpc,
        })
    }
}
