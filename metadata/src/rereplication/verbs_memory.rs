//! [`ReplicaMemory`] over soft RoCE: the metadata service as a one-sided client of
//! the memnodes, with one queue pair per memnode made the way sessions make
//! theirs ([`dmkv_api::qp::connect_udp_qp`]) and verbs posted and polled on the
//! copier's thread. Fencing lists a memnode's queue pairs through its admin API
//! and destroys every one but the copier's.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use dmkv_api::memnode_admin;
use dmkv_api::qp::{QpPath, connect_udp_qp_as};
use verbs::rc::RcConfig;
use verbs::transport::udp::UdpTransport;
use verbs::transport::{QpHandle, Transport};
use verbs::wr::{Completion, CompletionValue, RemoteAddr, WorkRequest};

use super::memory::ReplicaMemory;
use crate::catalog::Endpoint;

/// How long one verb may take before the copier gives up on the queue pair.
const VERB_TIMEOUT: Duration = Duration::from_secs(5);

/// A queue pair to one memnode.
struct Conn {
    transport: UdpTransport,
    qp: QpHandle,
    /// The memnode's responder (destroyed when the connection is dropped).
    remote_qpn: u32,
    admin_url: String,
    /// The memory node admin token the queue pair was created with.
    token: Option<String>,
}

impl Drop for Conn {
    fn drop(&mut self) {
        let _ =
            memnode_admin::delete_qp_as(&self.admin_url, self.token.as_deref(), self.remote_qpn);
    }
}

/// [`ReplicaMemory`] over the soft-RoCE transport.
#[derive(Default)]
pub struct VerbsMemory {
    conns: HashMap<u64, Conn>,
    next_wr: u64,
    /// The memory node admin token (`None`: memory nodes without authentication).
    token: Option<String>,
}

impl std::fmt::Debug for VerbsMemory {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("VerbsMemory")
            .field("memnodes", &self.conns.keys().collect::<Vec<_>>())
            .finish()
    }
}

fn connect(node: &Endpoint, token: Option<&str>) -> Result<Conn, String> {
    let info = memnode_admin::node_info_as(&node.admin_url, token)
        .map_err(|e| format!("memnode {} admin API: {e}", node.id))?;
    let addr = memnode_admin::data_addr(&node.admin_url, &info)
        .map_err(|e| format!("memnode {} data address: {e}", node.id))?;
    let mut transport = UdpTransport::for_remote(addr, RcConfig::default())
        .map_err(|e| format!("a transport towards memnode {} ({addr}): {e}", node.id))?;
    let c = connect_udp_qp_as(QpPath::Direct, &node.admin_url, &mut transport, token)
        .map_err(|e| format!("a queue pair to memnode {}: {e}", node.id))?;
    Ok(Conn {
        transport,
        qp: c.handle,
        remote_qpn: c.remote_qpn,
        admin_url: node.admin_url.clone(),
        token: token.map(str::to_owned),
    })
}

impl VerbsMemory {
    /// A copier's memory access with no queue pair yet (made on first use).
    pub fn new() -> VerbsMemory {
        VerbsMemory::default()
    }

    /// A copier's memory access that presents the memory node admin `token` when it
    /// creates, lists and deletes queue pairs.
    pub fn with_token(token: Option<String>) -> VerbsMemory {
        VerbsMemory {
            token,
            ..VerbsMemory::default()
        }
    }

    /// Posts `wr` to `node` and waits for its completion; a failed queue pair is
    /// dropped (the next call makes a new one).
    fn run(&mut self, node: &Endpoint, wr: WorkRequest) -> Result<CompletionValue, String> {
        if let std::collections::hash_map::Entry::Vacant(v) = self.conns.entry(node.id) {
            v.insert(connect(node, self.token.as_deref())?);
        }
        self.next_wr += 1;
        let id = self.next_wr;
        let result = match self.conns.get_mut(&node.id) {
            Some(c) => wait(c, id, wr),
            None => Err(format!("no queue pair to memnode {}", node.id)),
        };
        match result {
            Ok(c) => c
                .result
                .map_err(|e| format!("memnode {}: {e}", node.id))
                .inspect_err(|_| {
                    self.conns.remove(&node.id);
                }),
            Err(e) => {
                self.conns.remove(&node.id);
                Err(format!("memnode {}: {e}", node.id))
            }
        }
    }
}

fn wait(c: &mut Conn, id: u64, wr: WorkRequest) -> Result<Completion, String> {
    c.transport
        .post(c.qp, vec![(id, wr)])
        .map_err(|e| e.to_string())?;
    let deadline = Instant::now() + VERB_TIMEOUT;
    let mut out = Vec::new();
    loop {
        out.clear();
        c.transport.poll(Instant::now(), &mut out);
        if let Some((_, done)) = out.drain(..).find(|(_, d)| d.wr_id == id) {
            return Ok(done);
        }
        let now = Instant::now();
        if now >= deadline {
            return Err("no completion in time".into());
        }
        c.transport
            .wait((now + Duration::from_millis(1)).min(deadline));
    }
}

impl ReplicaMemory for VerbsMemory {
    fn read(&mut self, node: &Endpoint, rkey: u32, va: u64, len: u32) -> Result<Vec<u8>, String> {
        match self.run(node, WorkRequest::read(RemoteAddr::new(rkey, va), len))? {
            CompletionValue::Read(b) if b.len() == len as usize => Ok(b),
            other => Err(format!(
                "memnode {}: unexpected READ answer {other:?}",
                node.id
            )),
        }
    }

    fn write(&mut self, node: &Endpoint, rkey: u32, va: u64, bytes: Vec<u8>) -> Result<(), String> {
        match self.run(node, WorkRequest::write(RemoteAddr::new(rkey, va), bytes))? {
            CompletionValue::Write => Ok(()),
            other => Err(format!(
                "memnode {}: unexpected WRITE answer {other:?}",
                node.id
            )),
        }
    }

    fn cas(
        &mut self,
        node: &Endpoint,
        rkey: u32,
        va: u64,
        expect: u64,
        swap: u64,
    ) -> Result<u64, String> {
        match self.run(
            node,
            WorkRequest::cas(RemoteAddr::new(rkey, va), expect, swap),
        )? {
            CompletionValue::Atomic(v) => Ok(v),
            other => Err(format!(
                "memnode {}: unexpected CAS answer {other:?}",
                node.id
            )),
        }
    }

    fn fence(&mut self, node: &Endpoint) -> Result<usize, String> {
        let ours = self.conns.get(&node.id).map(|c| c.remote_qpn);
        let qps = memnode_admin::list_qps_as(&node.admin_url, self.token.as_deref())
            .map_err(|e| format!("listing the queue pairs of memnode {}: {e}", node.id))?;
        let mut destroyed = 0;
        for q in qps.iter().filter(|q| Some(q.qpn) != ours) {
            if memnode_admin::delete_qp_as(&node.admin_url, self.token.as_deref(), q.qpn).is_ok() {
                destroyed += 1;
            }
        }
        Ok(destroyed)
    }
}
