//! Building a session's transport and one queue pair per memory node, for each
//! transport kind: `local` (in-process memory of an embedded cluster), `shm` (the
//! memory node's shared-memory file), `udp` (soft RoCE, optionally through a relay).

use std::collections::HashMap;
use std::net::SocketAddrV4;

use dmkv_api::metadata::MemnodeInfo;
use dmkv_api::qp::{QpPath, connect_udp_qp};
use verbs::transport::local::DirectTransport;
use verbs::transport::shm::ShmTarget;
use verbs::transport::udp::UdpTransport;
use verbs::transport::{QpHandle, Transport, TransportKind};

use crate::client::ClientInner;
use crate::error::KvError;

/// A memory node's region as the session addresses it.
#[derive(Debug, Clone, Copy)]
pub(crate) struct RegionRef {
    pub rkey: u32,
    pub base_va: u64,
    pub len: u64,
}

/// A queue pair to clean up when the session ends (`udp`: the node's responder).
#[derive(Debug, Clone)]
pub(crate) struct RemoteQp {
    pub admin_url: String,
    pub qpn: u32,
    /// The switch the queue pair goes through and its connection id there.
    pub switch: Option<(String, u8)>,
}

/// What [`connect`] builds.
pub(crate) struct Connected {
    pub transport: Box<dyn Transport>,
    pub qps: HashMap<u64, (QpHandle, RegionRef)>,
    pub remote_qps: Vec<RemoteQp>,
    /// Memory nodes this session could not reach, and why: tables whose data is
    /// elsewhere are not affected; operations on their data fail with the reason.
    pub unreachable: HashMap<u64, String>,
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

/// Connect to every registered memory node with the client's transport.
pub(crate) fn connect(client: &ClientInner) -> Result<Connected, KvError> {
    let nodes = client.meta.memnodes().map_err(crate::client::meta_error)?;
    if nodes.is_empty() {
        return Err(unavailable(
            "no memory node is registered with the metadata service".into(),
        ));
    }
    match client.options.connection.transport {
        TransportKind::Local => {
            let mut t = DirectTransport::local();
            let mut qps = HashMap::new();
            for n in &nodes {
                let mem = client.local_memory.get(&n.id).ok_or_else(|| {
                    unavailable(format!(
                        "memnode {} is not in this process: the local transport reaches \
                         embedded memory nodes only",
                        n.id
                    ))
                })?;
                let h = t.connect(mem.clone());
                qps.insert(n.id, (h, first_region(n)?));
            }
            Ok(Connected {
                transport: Box::new(t),
                qps,
                remote_qps: Vec::new(),
                unreachable: HashMap::new(),
            })
        }
        TransportKind::Shm => {
            let mut t = DirectTransport::shm();
            let mut qps = HashMap::new();
            for n in &nodes {
                let region = first_region(n)?;
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
                let h = t
                    .connect_shm(&ShmTarget {
                        path: path.into(),
                        rkey: region.rkey,
                        base_va: region.base_va,
                    })
                    .map_err(|e| {
                        KvError::unavailable_because(format!("memnode {}: {e}", n.id), e)
                    })?;
                qps.insert(n.id, (h, region));
            }
            Ok(Connected {
                transport: Box::new(t),
                qps,
                remote_qps: Vec::new(),
                unreachable: HashMap::new(),
            })
        }
        TransportKind::Udp => connect_udp(client, &nodes),
        TransportKind::Rdma => Err(KvError::Unsupported(
            "the kvstore client does not drive the rdma transport yet; use udp or shm".into(),
        )),
    }
}

fn parse_addr(n: &MemnodeInfo) -> Result<SocketAddrV4, KvError> {
    n.data_addr.parse().map_err(|_| {
        unavailable(format!(
            "memnode {} registered data address {:?}, not ip:port",
            n.id, n.data_addr
        ))
    })
}

fn connect_udp(client: &ClientInner, nodes: &[MemnodeInfo]) -> Result<Connected, KvError> {
    let first = nodes
        .first()
        .ok_or_else(|| unavailable("no memory node".into()))?;
    let mut t = UdpTransport::for_remote(parse_addr(first)?, client.options.connection.rc.clone())
        .map_err(|e| KvError::unavailable_because(format!("creating the UDP transport: {e}"), e))?;
    let mut qps = HashMap::new();
    let mut remote_qps = Vec::new();
    let mut unreachable = HashMap::new();
    let mut first_error = None;
    let accelerator = crate::accel::resolve(client)?;
    for n in nodes {
        // A memory node that is down must not keep this session from the tables
        // that hold nothing on it: skip it, and say why when its data is wanted.
        if !n.healthy {
            unreachable.insert(
                n.id,
                "the metadata service reports it unhealthy (no heartbeat)".to_owned(),
            );
            continue;
        }
        let region = first_region(n)?;
        let path = match (&client.options.connection.udp_relay, accelerator.as_deref()) {
            (Some(relay), _) => QpPath::Relay {
                relay: relay.as_ref(),
                memnode: parse_addr(n)?,
            },
            (None, Some(url)) => QpPath::ViaSwitch(url),
            (None, None) => QpPath::Direct,
        };
        let c = match connect_udp_qp(path, &n.admin_url, &mut t) {
            Ok(c) => c,
            Err(e) => {
                let error = match path {
                    QpPath::ViaSwitch(_) => KvError::unavailable_because(
                        format!("memnode {} through the accelerator: {e}", n.id),
                        e,
                    ),
                    _ => KvError::unavailable_because(format!("memnode {}: {e}", n.id), e),
                };
                tracing::warn!(memnode = n.id, admin = %n.admin_url, %error, "memory node unreachable; the session goes on without it");
                unreachable.insert(n.id, error.to_string());
                first_error.get_or_insert(error);
                continue;
            }
        };
        let switch = match path {
            QpPath::ViaSwitch(url) => c.switch_conn.map(|conn| (url.to_owned(), conn)),
            _ => None,
        };
        let (handle, remote_qpn) = (c.handle, c.remote_qpn);
        remote_qps.push(RemoteQp {
            admin_url: n.admin_url.clone(),
            qpn: remote_qpn,
            switch,
        });
        qps.insert(n.id, (handle, region));
    }
    if qps.is_empty() {
        return Err(first_error.unwrap_or_else(|| {
            unavailable(format!(
                "no memory node is reachable: {}",
                unreachable
                    .iter()
                    .map(|(id, why)| format!("memnode {id}: {why}"))
                    .collect::<Vec<_>>()
                    .join("; ")
            ))
        }));
    }
    Ok(Connected {
        transport: Box::new(t),
        qps,
        remote_qps,
        unreachable,
    })
}
