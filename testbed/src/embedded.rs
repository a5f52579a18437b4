//! An in-process cluster for tests, tools and demos: a metadata service with in-memory
//! state and memory nodes on loopback, registered with it and heartbeating, and a
//! client of it ([`embedded_client`]).

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use kvstore::{Client, ClientOptions, KvError};
use memnode::config::MemnodeConfig;
use memnode::registrar::{HttpRegistrar, Registrar};
use memnode::server::{Memnode, MemnodeHandle};
use metadata::server::{MetadataServer, ServerConfig, ServerHandle, StoreConfig};
use metadata::store::MemStore;
use verbs::mem::MemoryTable;
use verbs::transport::TransportKind;

/// How long startup waits for the memory nodes to register.
const REGISTER_WAIT: Duration = Duration::from_secs(10);

/// One memory node of the cluster.
struct Node {
    // Dropped first: stops heartbeating before the node stops.
    registrar: HttpRegistrar,
    handle: MemnodeHandle,
    id: u64,
    shm: Option<PathBuf>,
}

/// A running in-process cluster; stops when dropped.
pub struct Embedded {
    nodes: Vec<Node>,
    metadata: ServerHandle,
}

/// A client of a new in-process cluster: a metadata service with in-memory state
/// and `options.memnodes` memory nodes, registered with it and reached over
/// `options.transport`. The cluster stops when the last clone of the client is
/// dropped.
pub fn embedded_client(options: EmbeddedOptions) -> Result<Client, KvError> {
    let embedded = Embedded::start(&options)?;
    let url = embedded.metadata_url();
    let local = embedded.local_memory();
    let mut client_options = options.client;
    client_options.connection.transport = options.transport;
    Client::in_process(&url, client_options, local, Box::new(embedded))
}

fn unavailable(what: &str, e: impl std::fmt::Display) -> KvError {
    KvError::unavailable(format!("starting the embedded cluster: {what}: {e}"))
}

impl Embedded {
    /// Starts the metadata service and `options.memnodes` memory nodes, and waits
    /// until every node has registered.
    pub fn start(options: &EmbeddedOptions) -> Result<Embedded, KvError> {
        if options.memnodes == 0 {
            return Err(KvError::InvalidArgument(
                "an embedded cluster needs at least one memory node".into(),
            ));
        }
        let metadata =
            MetadataServer::start(ServerConfig::local(StoreConfig::Memory(MemStore::new())))
                .map_err(|e| unavailable("metadata service", e))?;
        let url = metadata.url();
        let mut nodes = Vec::new();
        for i in 0..options.memnodes {
            let mut config = MemnodeConfig::local(options.capacity);
            let shm = (options.transport == TransportKind::Shm).then(|| {
                std::env::temp_dir().join(format!(
                    "dmkv-embedded-{}-{:08x}-{i}",
                    std::process::id(),
                    rand::random::<u32>()
                ))
            });
            config.shm = shm.clone();
            let handle = Memnode::start(config).map_err(|e| unavailable("memory node", e))?;
            let name = format!("embedded-{i}-{}", handle.data_addr());
            let registrar = HttpRegistrar::new(&url, None, Some(name))
                .map_err(|e| unavailable("registrar", e))?
                .with_interval(Duration::from_millis(500));
            registrar
                .register(&handle.node_info(), &handle.admin_url())
                .map_err(|e| unavailable("registration", e))?;
            nodes.push(Node {
                registrar,
                handle,
                id: 0,
                shm,
            });
        }
        let deadline = Instant::now() + REGISTER_WAIT;
        for n in nodes.iter_mut() {
            n.id = loop {
                if let Some(id) = n.registrar.memnode_id() {
                    break id;
                }
                if Instant::now() > deadline {
                    return Err(unavailable(
                        "registration",
                        "the memory nodes did not register in time",
                    ));
                }
                std::thread::sleep(Duration::from_millis(5));
            };
        }
        Ok(Embedded { nodes, metadata })
    }

    /// The metadata service's URL.
    pub fn metadata_url(&self) -> String {
        self.metadata.url()
    }

    /// Each memory node's in-process memory, by memnode id (the `local` transport).
    pub fn local_memory(&self) -> HashMap<u64, Arc<MemoryTable>> {
        self.nodes
            .iter()
            .map(|n| (n.id, n.handle.memory().table.clone()))
            .collect()
    }
}

impl Drop for Embedded {
    fn drop(&mut self) {
        for n in self.nodes.drain(..) {
            n.registrar.stop();
            n.handle.shutdown();
            if let Some(p) = n.shm {
                let _ = std::fs::remove_file(p);
            }
        }
    }
}

/// What [`embedded_client`] (and [`Embedded::start`]) starts.
#[derive(Clone, Debug)]
pub struct EmbeddedOptions {
    /// Memory nodes to start.
    pub memnodes: usize,
    /// Bytes of memory per memory node.
    pub capacity: u64,
    /// How sessions reach them: `local` (in-process memory), `udp` (soft RoCE over
    /// loopback) or `shm` (shared-memory files).
    pub transport: TransportKind,
    /// Everything else about the client (its `transport` is overridden).
    pub client: ClientOptions,
}

impl Default for EmbeddedOptions {
    fn default() -> Self {
        EmbeddedOptions {
            memnodes: 1,
            capacity: 64 << 20,
            transport: TransportKind::Local,
            client: ClientOptions::default(),
        }
    }
}
