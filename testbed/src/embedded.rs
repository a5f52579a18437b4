//! An in-process cluster for tests, tools and demos: a metadata service with in-memory
//! state and memory nodes on loopback, registered with it and heartbeating, and a
//! client of it ([`embedded_client`]).

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use dmkv_api::grant::GrantKey;
use kvstore::{Client, ClientOptions, KvError};
use memnode::auth::AdminAuth;
use memnode::config::MemnodeConfig;
use memnode::rdma_serving::RdmaServeConfig;
use memnode::registrar::{HttpRegistrar, Registrar};
use memnode::server::{Memnode, MemnodeHandle};
use metadata::catalog::CatalogConfig;
use metadata::grant_issuer::{DEFAULT_GRANT_TTL, GrantIssuer};
use metadata::scrub::MemnodeScrubber;
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
    /// The name it registers under.
    name: String,
    /// Its region file, for a cluster started with region files.
    region_file: Option<PathBuf>,
}

/// The re-replication rate limit of an embedded cluster's metadata service, MB/s
/// (the service's default).
pub const REREPLICATION_RATE_MB: u64 = metadata::rereplication::DEFAULT_RATE_MB;

/// How often embedded memory nodes heartbeat.
const HEARTBEAT_INTERVAL: Duration = Duration::from_millis(500);

/// A running in-process cluster; stops when dropped.
pub struct Embedded {
    nodes: Vec<Node>,
    metadata: ServerHandle,
    /// What every memory node (a restarted one too) is started with.
    spec: MemnodeSpec,
    interval: Duration,
    /// The names (and region files) of crashed memory nodes, by memnode id, until
    /// they restart.
    crashed: HashMap<u64, (String, Option<PathBuf>)>,
    /// The metadata service's root token, which the memory nodes register with.
    root_token: Option<String>,
}

/// How an embedded cluster's memory nodes are started.
struct MemnodeSpec {
    capacity: u64,
    transport: TransportKind,
    /// The memory nodes' admin token ([`Embedded::start_secured`]; `None`: open).
    admin_token: Option<String>,
    /// Whether queue pairs created with grants are scoped to them.
    scoping: bool,
    /// RPC worker threads per memory node (0: passive nodes).
    rpc_workers: usize,
    /// Whether their memory is made resident at start.
    prefault: bool,
}

/// How an embedded cluster is secured.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Security {
    /// No admin token, no grants: anyone may call the memory nodes' admin API.
    #[default]
    Open,
    /// An admin token and grants: sessions' queue pairs are scoped to their tables.
    Grants,
    /// An admin token and grants, but queue pairs created with a grant get
    /// whole-region access (the memory nodes' `--unscoped-grants`): only to measure
    /// what scoping costs.
    UnscopedGrants,
}

/// A client of a new in-process cluster: a metadata service with in-memory state
/// and `options.memnodes` memory nodes, registered with it and reached over
/// `options.transport`. The cluster stops when the last clone of the client is
/// dropped.
pub fn embedded_client(options: EmbeddedOptions) -> Result<Client, KvError> {
    embedded_client_with(options, Security::Open)
}

/// [`embedded_client`] of a cluster secured as `security` says.
pub fn embedded_client_with(
    options: EmbeddedOptions,
    security: Security,
) -> Result<Client, KvError> {
    embedded_client_with_rpc_workers(options, security, 0)
}

/// [`embedded_client_with`], with `rpc_workers` RPC worker threads on every memory
/// node ([`Embedded::start_with_rpc_workers`]).
pub fn embedded_client_with_rpc_workers(
    options: EmbeddedOptions,
    security: Security,
    rpc_workers: usize,
) -> Result<Client, KvError> {
    let embedded = Embedded::start_with_rpc_workers(&options, security, rpc_workers)?;
    let url = embedded.metadata_url();
    let local = embedded.local_memory();
    let mut client_options = options.client;
    client_options.connection.transport = options.transport;
    if options.transport == TransportKind::Rdma && client_options.connection.rdma_device.is_none() {
        client_options.connection.rdma_device = std::env::var(RDMA_DEVICE_VAR)
            .ok()
            .filter(|d| !d.is_empty());
        client_options.connection.rdma_gid_index = rdma_gid_index();
    }
    Client::in_process(&url, client_options, local, Box::new(embedded))
}

fn no_such_node(id: u64) -> KvError {
    KvError::InvalidArgument(format!("memnode {id} is not in this embedded cluster"))
}

/// A registrar for `handle` under `name`, registered with the service at `url`.
fn register(
    url: &str,
    token: &Option<String>,
    name: &str,
    handle: &MemnodeHandle,
    interval: Duration,
) -> Result<HttpRegistrar, KvError> {
    let registrar = HttpRegistrar::new(url, token.clone(), Some(name.to_owned()))
        .map_err(|e| unavailable("registrar", e))?
        .with_interval(interval)
        .with_id_sink(handle.memnode_id_sink());
    registrar
        .register(&handle.node_info(), &handle.admin_url())
        .map_err(|e| unavailable("registration", e))?;
    Ok(registrar)
}

/// A new region file path in the temporary directory.
fn region_file_path() -> PathBuf {
    std::env::temp_dir().join(format!(
        "dmkv-embedded-region-{}-{:016x}",
        std::process::id(),
        rand::random::<u64>()
    ))
}

/// Start a memory node as `spec` says (file-backed for the `shm` transport; `i` tells
/// its file apart from its siblings'), on `region_file` if given.
fn start_memnode(
    spec: &MemnodeSpec,
    i: usize,
    region_file: Option<&PathBuf>,
) -> Result<(MemnodeHandle, Option<PathBuf>), KvError> {
    let transport = spec.transport;
    let mut config = MemnodeConfig::local(spec.capacity);
    config.rpc_workers = spec.rpc_workers;
    config.prefault = spec.prefault;
    config.region_file = region_file.cloned();
    if let Some(token) = &spec.admin_token {
        config.auth = AdminAuth::secured(token, None).map_err(|e| unavailable("admin token", e))?;
        config.auth.scoping = spec.scoping;
    }
    let shm = (transport == TransportKind::Shm).then(|| {
        std::env::temp_dir().join(format!(
            "dmkv-embedded-{}-{:08x}-{i}",
            std::process::id(),
            rand::random::<u32>()
        ))
    });
    config.shm = shm.clone();
    if transport == TransportKind::Rdma {
        config.rdma = Some(RdmaServeConfig {
            device: std::env::var(RDMA_DEVICE_VAR).unwrap_or_default(),
            gid_index: rdma_gid_index(),
            ib_port: 1,
        });
    }
    let handle = Memnode::start(config).map_err(|e| unavailable("memory node", e))?;
    Ok((handle, shm))
}

/// The environment variable naming the RDMA device of `rdma` clusters (default: the
/// first device listed).
pub const RDMA_DEVICE_VAR: &str = "DMKV_RDMA_DEVICE";

/// The environment variable giving the GID index of `rdma` clusters (default: picked).
pub const RDMA_GID_INDEX_VAR: &str = "DMKV_RDMA_GID_INDEX";

fn rdma_gid_index() -> Option<u8> {
    std::env::var(RDMA_GID_INDEX_VAR).ok()?.parse().ok()
}

fn unavailable(what: &str, e: impl std::fmt::Display) -> KvError {
    KvError::unavailable(format!("starting the embedded cluster: {what}: {e}"))
}

impl Embedded {
    /// Starts the metadata service and `options.memnodes` memory nodes, and waits
    /// until every node has registered.
    pub fn start(options: &EmbeddedOptions) -> Result<Embedded, KvError> {
        Embedded::start_with_catalog(
            options,
            CatalogConfig::default(),
            None,
            false,
            Security::Open,
            0,
        )
    }

    /// Like [`Embedded::start_with_security`], with `rpc_workers` RPC worker threads
    /// on every memory node (`memnode --rpc-workers N`), so clients may use the `rpc`
    /// and `hybrid` access modes (over `udp`).
    pub fn start_with_rpc_workers(
        options: &EmbeddedOptions,
        security: Security,
        rpc_workers: usize,
    ) -> Result<Embedded, KvError> {
        Embedded::start_with_catalog(
            options,
            CatalogConfig::default(),
            None,
            false,
            security,
            rpc_workers,
        )
    }

    /// Like [`Embedded::start`], with a metadata service that has root token
    /// `root_token`: the memory nodes register with it, and clients need it or a
    /// credential issued with it.
    pub fn start_with_root_token(
        options: &EmbeddedOptions,
        root_token: &str,
    ) -> Result<Embedded, KvError> {
        Embedded::start_with_catalog(
            options,
            CatalogConfig::default(),
            Some(root_token.to_owned()),
            false,
            Security::Open,
            0,
        )
    }

    /// Like [`Embedded::start`], with a generated memory node admin token: the memory
    /// nodes authenticate their admin API, the metadata service zeroes table memory
    /// with the token and issues grants (key derived from the token, the default TTL),
    /// and sessions reach the memory nodes through queue pairs scoped to their grants.
    pub fn start_secured(options: &EmbeddedOptions) -> Result<Embedded, KvError> {
        Embedded::start_with_security(options, Security::Grants)
    }

    /// Like [`Embedded::start`], secured as `security` says.
    pub fn start_with_security(
        options: &EmbeddedOptions,
        security: Security,
    ) -> Result<Embedded, KvError> {
        Embedded::start_with_catalog(options, CatalogConfig::default(), None, false, security, 0)
    }

    /// The memory nodes' admin token, when the cluster was started secured.
    pub fn admin_token(&self) -> Option<&str> {
        self.spec.admin_token.as_deref()
    }

    /// Memory node `id`'s handle (its queue pairs, counters and memory).
    pub fn memnode(&self, id: u64) -> Option<&MemnodeHandle> {
        self.node(id).map(|n| &n.handle)
    }

    /// Like [`Embedded::start`], with a metadata service that marks a memory node
    /// unhealthy after `timeout` without a heartbeat (default 3 s; the nodes
    /// heartbeat every 500 ms, or every third of a shorter timeout).
    pub fn start_with_heartbeat_timeout(
        options: &EmbeddedOptions,
        timeout: Duration,
    ) -> Result<Embedded, KvError> {
        let ms = u64::try_from(timeout.as_millis())
            .unwrap_or(u64::MAX)
            .max(3);
        let catalog = CatalogConfig {
            heartbeat_timeout_ms: ms,
            heartbeat_interval_ms: (ms / 3).min(1000),
            ..CatalogConfig::default()
        };
        Embedded::start_with_catalog(options, catalog, None, false, Security::Open, 0)
    }

    /// Like [`Embedded::start_with_heartbeat_timeout`], with every memory node
    /// keeping its memory in a region file (`--region-file`): a node that
    /// [crashed](Embedded::crash) [restarts](Embedded::restart) with its memory and
    /// rejoins under its id with the same regions.
    pub fn start_with_region_files(
        options: &EmbeddedOptions,
        timeout: Duration,
    ) -> Result<Embedded, KvError> {
        let ms = u64::try_from(timeout.as_millis())
            .unwrap_or(u64::MAX)
            .max(3);
        let catalog = CatalogConfig {
            heartbeat_timeout_ms: ms,
            heartbeat_interval_ms: (ms / 3).min(1000),
            ..CatalogConfig::default()
        };
        Embedded::start_with_catalog(options, catalog, None, true, Security::Open, 0)
    }

    fn start_with_catalog(
        options: &EmbeddedOptions,
        catalog: CatalogConfig,
        root_token: Option<String>,
        region_files: bool,
        security: Security,
        rpc_workers: usize,
    ) -> Result<Embedded, KvError> {
        let admin_token = (security != Security::Open)
            .then(|| format!("embedded-{:032x}", rand::random::<u128>()));
        let scoping = security != Security::UnscopedGrants;
        if options.memnodes == 0 {
            return Err(KvError::InvalidArgument(
                "an embedded cluster needs at least one memory node".into(),
            ));
        }
        let interval = Duration::from_millis(catalog.heartbeat_interval_ms).min(HEARTBEAT_INTERVAL);
        let mut config = ServerConfig::local(StoreConfig::Memory(MemStore::new()));
        config.catalog = catalog;
        config.token = root_token.clone();
        if let Some(token) = &admin_token {
            let key = GrantKey::derive_from_admin_token(token)
                .map_err(|e| unavailable("admin token", e))?;
            config.grants = Some(GrantIssuer::new(key, DEFAULT_GRANT_TTL));
            config.scrubber = Arc::new(MemnodeScrubber::with_token(Some(token.clone())));
            config.memnode_token = Some(token.clone());
        }
        let metadata =
            MetadataServer::start(config).map_err(|e| unavailable("metadata service", e))?;
        let url = metadata.url();
        let spec = MemnodeSpec {
            capacity: options.capacity,
            transport: options.transport,
            admin_token,
            scoping,
            rpc_workers,
            prefault: options.prefault,
        };
        let mut nodes = Vec::new();
        for i in 0..options.memnodes {
            let region_file = region_files.then(region_file_path);
            let (handle, shm) = start_memnode(&spec, i, region_file.as_ref())?;
            let name = format!("embedded-{i}-{}", handle.data_addr());
            let registrar = register(&url, &root_token, &name, &handle, interval)?;
            nodes.push(Node {
                registrar,
                handle,
                id: 0,
                shm,
                name,
                region_file,
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
        Ok(Embedded {
            nodes,
            metadata,
            spec,
            interval,
            crashed: HashMap::new(),
            root_token,
        })
    }

    /// The metadata service's URL.
    pub fn metadata_url(&self) -> String {
        self.metadata.url()
    }

    /// The metadata service itself (its shared state: catalog, re-replication
    /// progress, copy engine).
    pub fn metadata_server(&self) -> &ServerHandle {
        &self.metadata
    }

    /// The memnode ids, in the order the nodes were started.
    pub fn memnode_ids(&self) -> Vec<u64> {
        self.nodes.iter().map(|n| n.id).collect()
    }

    /// The admin URL of memory node `id`, if it is one of this cluster's.
    pub fn admin_url(&self, id: u64) -> Option<String> {
        self.node(id).map(|n| n.handle.admin_url())
    }

    fn node(&self, id: u64) -> Option<&Node> {
        self.nodes.iter().find(|n| n.id == id)
    }

    /// Stop memory node `id`'s heartbeats (it keeps serving): the metadata service
    /// marks it unhealthy after its heartbeat timeout, as if it had crashed.
    pub fn stop_heartbeats(&self, id: u64) -> Result<(), KvError> {
        let node = self.node(id).ok_or_else(|| no_such_node(id))?;
        node.registrar.stop();
        Ok(())
    }

    /// Register memory node `id` again (same name and regions, so the same id) and
    /// heartbeat from now on: it is healthy again, as after a restart.
    pub fn resume_heartbeats(&mut self, id: u64) -> Result<(), KvError> {
        let url = self.metadata_url();
        let node = self
            .nodes
            .iter_mut()
            .find(|n| n.id == id)
            .ok_or_else(|| no_such_node(id))?;
        node.registrar.stop();
        node.registrar = register(
            &url,
            &self.root_token,
            &node.name,
            &node.handle,
            HEARTBEAT_INTERVAL,
        )?;
        Ok(())
    }

    /// Crash memory node `id`: it stops heartbeating and serving at once (its
    /// queue pairs, admin API and memory are gone, as after `kill -9` of a node
    /// without a region file). The metadata service still lists it, unhealthy.
    pub fn crash(&mut self, id: u64) -> Result<(), KvError> {
        let at = self
            .nodes
            .iter()
            .position(|n| n.id == id)
            .ok_or_else(|| no_such_node(id))?;
        let node = self.nodes.remove(at);
        node.registrar.stop();
        node.handle.shutdown();
        if let Some(p) = node.shm {
            let _ = std::fs::remove_file(p);
        }
        self.crashed.insert(id, (node.name, node.region_file));
        Ok(())
    }

    /// Restart crashed memory node `id` under its name with new, empty memory (a new
    /// process on the same host without a region file): it registers again and keeps
    /// its memnode id, and the metadata service treats its memory as new (tables that
    /// still had data there are marked lost; replicated tables had failed it over).
    /// In a cluster started [with region files](Embedded::start_with_region_files)
    /// it restarts on its region file instead: same regions, same memory.
    /// Fails for a node that is running or not this cluster's.
    pub fn restart(&mut self, id: u64) -> Result<(), KvError> {
        if self.node(id).is_some() {
            return Err(KvError::InvalidArgument(format!(
                "memnode {id} is running; only a crashed memnode can be restarted"
            )));
        }
        let (name, region_file) = self
            .crashed
            .get(&id)
            .cloned()
            .ok_or_else(|| no_such_node(id))?;
        let (handle, shm) = start_memnode(&self.spec, self.nodes.len(), region_file.as_ref())?;
        let registrar = register(
            &self.metadata_url(),
            &self.root_token,
            &name,
            &handle,
            self.interval,
        )?;
        let deadline = Instant::now() + REGISTER_WAIT;
        let registered = loop {
            if let Some(registered) = registrar.memnode_id() {
                break registered;
            }
            if Instant::now() > deadline {
                return Err(unavailable(
                    "registration",
                    "the restarted memory node did not register in time",
                ));
            }
            std::thread::sleep(Duration::from_millis(5));
        };
        self.crashed.remove(&id);
        self.nodes.push(Node {
            registrar,
            handle,
            id: registered,
            shm,
            name,
            region_file,
        });
        Ok(())
    }

    /// Destroy every responder queue pair of memory node `id` (what clients see of
    /// a node that restarted with its memory, or reclaimed their queue pairs);
    /// returns how many there were.
    pub fn destroy_queue_pairs(&self, id: u64) -> Result<usize, KvError> {
        let qps = self.node(id).ok_or_else(|| no_such_node(id))?.handle.qps();
        Ok(qps.list().iter().filter(|q| qps.delete(q.qpn)).count())
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
            for p in [n.shm, n.region_file].into_iter().flatten() {
                let _ = std::fs::remove_file(p);
            }
        }
        for (_, file) in self.crashed.values() {
            if let Some(p) = file {
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
    /// loopback), `shm` (shared-memory files) or `rdma` (an RDMA device serves the
    /// memory nodes and the sessions: `$DMKV_RDMA_DEVICE`, else the first one; needs
    /// the `rdma` feature of `memnode` and `kvstore`).
    pub transport: TransportKind,
    /// Everything else about the client (its `transport` is overridden).
    pub client: ClientOptions,
    /// Make every memory node's memory resident at start (`memnode --prefault`), as
    /// registering it with an RDMA NIC pins it.
    pub prefault: bool,
}

impl Default for EmbeddedOptions {
    fn default() -> Self {
        EmbeddedOptions {
            memnodes: 1,
            capacity: 64 << 20,
            transport: TransportKind::Local,
            client: ClientOptions::default(),
            prefault: false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_crashed_memnode_restarts_under_its_id_with_new_memory() {
        let mut embedded = Embedded::start_with_heartbeat_timeout(
            &EmbeddedOptions {
                memnodes: 2,
                capacity: 4 << 20,
                transport: TransportKind::Udp,
                ..EmbeddedOptions::default()
            },
            Duration::from_millis(600),
        )
        .unwrap();
        let ids = embedded.memnode_ids();
        let client = Client::in_process(
            &embedded.metadata_url(),
            ClientOptions::with_transport(TransportKind::Udp),
            HashMap::new(),
            Box::new(()),
        )
        .unwrap();
        let before = client.memnodes().unwrap();
        let victim = ids[0];
        match embedded.restart(victim) {
            Err(KvError::InvalidArgument(m)) => assert!(m.contains("is running"), "{m}"),
            other => panic!("restarting a running node: {other:?}"),
        }
        embedded.crash(victim).unwrap();
        assert_eq!(embedded.memnode_ids(), vec![ids[1]]);
        embedded.restart(victim).unwrap();
        assert_eq!(embedded.memnode_ids(), vec![ids[1], victim]);
        assert!(embedded.admin_url(victim).is_some());
        let after = client.memnodes().unwrap();
        let old = before.iter().find(|m| m.id == victim).unwrap();
        let new = after.iter().find(|m| m.id == victim).unwrap();
        assert_eq!(new.name, old.name);
        assert!(new.healthy);
        assert_eq!(new.epoch, old.epoch + 1, "new memory: {new:?}");
        assert_ne!(new.data_addr, old.data_addr);
        // Nor can a node restart twice, or one the cluster never had.
        assert!(matches!(
            embedded.restart(victim),
            Err(KvError::InvalidArgument(_))
        ));
        match embedded.restart(9999) {
            Err(KvError::InvalidArgument(m)) => assert!(m.contains("not in this"), "{m}"),
            other => panic!("restarting an unknown node: {other:?}"),
        }
    }
}
