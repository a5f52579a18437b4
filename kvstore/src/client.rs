//! The shared client: the link to the metadata service, the table and chain caches,
//! and the memory-node directory. Sessions ([`crate::Session`]) are made from it, one
//! per thread.

use std::any::Any;
use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};

use dmkv_api::metadata::{MemnodeInfo, TableDescription};
use dmkv_api::{ClientError, MetadataClient};
use verbs::mem::{LineGap, MemoryTable, ReadOrder};
use verbs::transport::TransportKind;

use crate::error::KvError;
use crate::index::ClientIndex;
use crate::options::ClientOptions;

/// A client of one dmkv cluster. `Send + Sync` and cheap to clone; make one
/// [`Session`](crate::Session) per thread with [`Client::session`].
#[derive(Clone)]
pub struct Client {
    pub(crate) inner: Arc<ClientInner>,
}

pub(crate) struct ClientInner {
    pub meta: MetadataClient,
    pub options: ClientOptions,
    /// The name leases are held under.
    pub lease_name: String,
    /// In-process memory of embedded memory nodes, by memnode id (`local` transport).
    pub local_memory: HashMap<u64, Arc<MemoryTable>>,
    tables: Mutex<HashMap<String, TableDescription>>,
    /// What the indexes keep for all sessions, one object per index kind.
    shared: Mutex<Vec<Arc<dyn ClientIndex>>>,
    next_session: Mutex<u64>,
    /// Keeps an in-process cluster running as long as the client lives.
    _cluster: Option<Box<dyn std::any::Any + Send + Sync>>,
}

impl std::fmt::Debug for Client {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Client")
            .field("metadata", &self.inner.meta.url())
            .field("transport", &self.inner.options.connection.transport)
            .finish()
    }
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// Turn a metadata-service error into a table API error.
pub(crate) fn meta_error(e: ClientError) -> KvError {
    match &e {
        ClientError::Http { code, .. } if code == "table_not_found" => {
            KvError::NoSuchTable(e.to_string())
        }
        ClientError::Http { status: 400, .. } | ClientError::Http { status: 422, .. } => {
            KvError::InvalidArgument(e.to_string())
        }
        // Too few memnodes for a table's replication: the request cannot be served
        // as it stands (nothing exists already).
        ClientError::Http { code, .. } if code == "too_few_memnodes" => {
            KvError::InvalidArgument(e.to_string())
        }
        ClientError::Http { status: 409, .. } => KvError::AlreadyExists,
        // A missing, wrong, revoked or expired credential, or one out of scope:
        // retrying does not help; the message names the scope needed.
        ClientError::Http { status: 401, .. } | ClientError::Http { status: 403, .. } => {
            KvError::InvalidArgument(format!("the metadata service refused the credential: {e}"))
        }
        _ => KvError::unavailable_because(format!("metadata service: {e}"), e),
    }
}

impl Client {
    /// A client of the cluster whose metadata service is at `metadata_url`
    /// (`http://host:port` or `host:port`). Checks that the service answers.
    ///
    /// The `local` transport needs in-process memory nodes: use [`Client::in_process`].
    pub fn connect(metadata_url: &str, options: ClientOptions) -> Result<Client, KvError> {
        if options.connection.transport == TransportKind::Local {
            return Err(KvError::InvalidArgument(
                "the local transport reaches in-process memory nodes only: use Client::in_process \
                 (an embedded cluster), \
                 or choose udp or shm"
                    .into(),
            ));
        }
        Client::build(metadata_url, options, HashMap::new(), None)
    }

    /// A client of a cluster whose memory nodes run in this process (an embedded
    /// cluster: `testbed::embedded_client` starts one). `memory` is each node's
    /// in-process memory by memnode id, which the `local` transport applies verbs to
    /// directly; `cluster` is dropped with the last clone of the client, so a cluster
    /// handed over here stops then.
    pub fn in_process(
        metadata_url: &str,
        options: ClientOptions,
        memory: HashMap<u64, Arc<MemoryTable>>,
        cluster: Box<dyn std::any::Any + Send + Sync>,
    ) -> Result<Client, KvError> {
        Client::build(metadata_url, options, memory, Some(cluster))
    }

    fn build(
        url: &str,
        options: ClientOptions,
        local_memory: HashMap<u64, Arc<MemoryTable>>,
        cluster: Option<Box<dyn std::any::Any + Send + Sync>>,
    ) -> Result<Client, KvError> {
        let meta = MetadataClient::new(url)
            .map_err(|e| KvError::InvalidArgument(e.to_string()))?
            .with_token(options.token.clone().filter(|t| !t.is_empty()));
        meta.health().map_err(meta_error)?;
        let lease_name = format!(
            "{}-{}-{:08x}",
            options.name,
            std::process::id(),
            rand::random::<u32>()
        );
        Ok(Client {
            inner: Arc::new(ClientInner {
                meta,
                options,
                lease_name,
                local_memory,
                tables: Mutex::new(HashMap::new()),
                shared: Mutex::new(Vec::new()),
                next_session: Mutex::new(0),
                _cluster: cluster,
            }),
        })
    }

    /// The metadata service's URL.
    pub fn metadata_url(&self) -> String {
        self.inner.meta.url()
    }

    /// The blocking metadata-service client this client uses.
    pub fn metadata(&self) -> &MetadataClient {
        &self.inner.meta
    }

    /// The options this client was made with.
    pub fn options(&self) -> &ClientOptions {
        &self.inner.options
    }

    /// The registered memory nodes.
    pub fn memnodes(&self) -> Result<Vec<MemnodeInfo>, KvError> {
        self.inner.meta.memnodes().map_err(meta_error)
    }

    /// Every table.
    pub fn tables(&self) -> Result<Vec<TableDescription>, KvError> {
        self.inner.meta.tables().map_err(meta_error)
    }

    /// Drop a table and forget what is cached about it.
    pub fn drop_table(&self, name: &str) -> Result<(), KvError> {
        let r = self.inner.meta.drop_table(name);
        let id = lock(&self.inner.tables).remove(name).map(|t| t.id);
        if let Some(id) = id {
            let shared = lock(&self.inner.shared).clone();
            for s in shared {
                s.forget_table(id);
            }
        }
        r.map_err(|e| match e.status() {
            Some(404) => KvError::NoSuchTable(name.to_owned()),
            _ => meta_error(e),
        })
    }

    /// Moves member `req.from` of replica set `req.set` of a replicated table to
    /// another memnode (`POST /v1/tables/{name}/moves`): the table as the move starts.
    pub fn move_copy(
        &self,
        name: &str,
        req: &dmkv_api::rereplication::MoveCopyRequest,
    ) -> Result<TableDescription, KvError> {
        self.inner.meta.move_copy(name, req).map_err(|e| match &e {
            ClientError::Http { code, .. } if code == "table_not_found" => {
                KvError::NoSuchTable(name.to_owned())
            }
            // No such set, member or memnode; one copy only; the set busy: the
            // request cannot be served as it stands, and the message says why.
            ClientError::Http {
                status: 404 | 409, ..
            } => KvError::InvalidArgument(e.to_string()),
            _ => meta_error(e),
        })
    }

    /// Set the read order and line gap of every region of the in-process memory nodes
    /// of a client made with [`Client::in_process`] (the `local` transport then sees
    /// them): for tests and experiments of the torn-read pitfall. Returns the regions
    /// changed (none for a client of a remote cluster).
    pub fn set_embedded_read_order(&self, order: ReadOrder, gap: LineGap) -> usize {
        let mut n = 0;
        for table in self.inner.local_memory.values() {
            for info in table.regions() {
                if let Some(r) = table.region(info.rkey) {
                    r.set_read_order(order);
                    r.set_line_gap(gap);
                    n += 1;
                }
            }
        }
        n
    }

    /// A table's description (cached after the first lookup).
    pub fn table(&self, name: &str) -> Result<TableDescription, KvError> {
        self.inner.table(name)
    }
}

impl ClientInner {
    /// Cache the description of a table this client created.
    pub(crate) fn remember(&self, t: &TableDescription) {
        lock(&self.tables).insert(t.name.clone(), t.clone());
    }

    /// A table's description (cached after the first lookup).
    pub(crate) fn table(&self, name: &str) -> Result<TableDescription, KvError> {
        if let Some(t) = lock(&self.tables).get(name) {
            return Ok(t.clone());
        }
        let t = self.meta.table(name).map_err(|e| match e.status() {
            Some(404) => KvError::NoSuchTable(name.to_owned()),
            _ => meta_error(e),
        })?;
        lock(&self.tables).insert(name.to_owned(), t.clone());
        Ok(t)
    }

    /// A table's description as the metadata service has it now (the cache is
    /// updated too): what a replicated table's handles follow after a failover.
    pub(crate) fn fresh_table(&self, name: &str) -> Result<TableDescription, KvError> {
        let t = self.meta.table(name).map_err(|e| match e.status() {
            Some(404) => KvError::NoSuchTable(name.to_owned()),
            _ => meta_error(e),
        })?;
        lock(&self.tables).insert(name.to_owned(), t.clone());
        Ok(t)
    }

    /// The number of the next session.
    pub(crate) fn next_session(&self) -> u64 {
        let mut g = lock(&self.next_session);
        *g += 1;
        *g
    }

    /// What index kind `T` keeps for all sessions of this client (made on first use).
    pub(crate) fn shared_state<T: ClientIndex + Default>(&self) -> Arc<T> {
        let mut all = lock(&self.shared);
        for s in all.iter() {
            let any: Arc<dyn Any + Send + Sync> = s.clone();
            if let Ok(t) = any.downcast::<T>() {
                return t;
            }
        }
        let t = Arc::new(T::default());
        all.push(t.clone());
        t
    }
}
