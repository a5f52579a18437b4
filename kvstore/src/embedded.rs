//! An in-process cluster for tests and demos: a metadata service with in-memory
//! state and memory nodes on loopback, registered with it and heartbeating.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use memnode::config::MemnodeConfig;
use memnode::registrar::{HttpRegistrar, Registrar};
use memnode::server::{Memnode, MemnodeHandle};
use metadata::server::{MetadataServer, ServerConfig, ServerHandle, StoreConfig};
use metadata::store::MemStore;
use verbs::mem::MemoryTable;
use verbs::transport::TransportKind;

use crate::error::KvError;
use crate::options::EmbeddedOptions;

/// How long startup waits for the memory nodes to register.
const REGISTER_WAIT: Duration = Duration::from_secs(10);

struct Node {
    // Dropped first: stops heartbeating before the node stops.
    registrar: HttpRegistrar,
    handle: MemnodeHandle,
    id: u64,
    shm: Option<PathBuf>,
}

/// A running in-process cluster; stops when dropped.
pub(crate) struct Embedded {
    nodes: Vec<Node>,
    metadata: ServerHandle,
}

fn unavailable(what: &str, e: impl std::fmt::Display) -> KvError {
    KvError::Unavailable(format!("starting the embedded cluster: {what}: {e}"))
}

impl Embedded {
    pub(crate) fn start(options: &EmbeddedOptions) -> Result<Embedded, KvError> {
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

    pub(crate) fn metadata_url(&self) -> String {
        self.metadata.url()
    }

    pub(crate) fn local_memory(&self) -> HashMap<u64, Arc<MemoryTable>> {
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
