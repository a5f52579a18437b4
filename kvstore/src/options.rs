//! Settings of a client: how sessions reach memory nodes and the policies of the indexes.

use std::sync::Arc;
use std::time::Duration;

use verbs::rc::RcConfig;
use verbs::transport::TransportKind;
use verbs::worker::WorkerConfig;

pub use dmkv_api::qp::{UdpRelay, UdpRoute};

/// Whether `udp` queue pairs go through the switch accelerator.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum AcceleratorUse {
    /// Through the accelerator the metadata service advertises (`GET /v1/accelerator`),
    /// directly when it advertises none.
    #[default]
    Auto,
    /// Always directly to the memory nodes.
    Off,
    /// Through the accelerator whose admin URL this is, whatever the metadata service says.
    Via(String),
}

/// How a client reaches memory nodes and how its indexes behave.
#[derive(Clone)]
pub struct ClientOptions {
    /// Bearer token for the metadata service's mutating endpoints.
    pub token: Option<String>,
    /// The transport of every session: `udp` (soft RoCE), `shm` (memory nodes on this
    /// host serving a shared-memory file), or `local` (only with [`crate::Client::in_process`]).
    pub transport: TransportKind,
    /// Settings of each session's worker (credits, backoff, admission).
    pub worker: WorkerConfig,
    /// Reliable-connection settings of `udp` queue pairs.
    pub rc: RcConfig,
    /// A middlebox between `udp` queue pairs and memory nodes, if any.
    pub udp_relay: Option<Arc<dyn UdpRelay>>,
    /// Whether `udp` queue pairs are created through the switch accelerator (its
    /// `POST /v1/qps`). Ignored with a `udp_relay` and on other transports.
    pub accelerator: AcceleratorUse,
    /// The name leases are held under (a random suffix is added per client).
    pub name: String,
    /// Bytes asked for per leased chunk.
    pub chunk_bytes: u64,
    /// Time to live of leases; sessions renew them when a third of it is left.
    pub lease_ttl: Duration,
    /// How long a reclaimed node waits before its memory is reused, so reads in
    /// flight on it finish before it is rewritten.
    pub grace: Duration,
    /// Attempts a write makes to link its node before failing with `Contended`.
    /// A writer that keeps losing the race to others backs off between attempts
    /// (SMART), so under sustained contention on one key it may need many.
    pub max_link_attempts: u32,
    /// Traversal restarts a read makes before failing with `Unavailable`.
    pub max_restarts: u32,
    /// A writer advances the key's shortcut word when it lags the new tail by at
    /// least this many versions (1: after every write).
    pub shortcut_lag: u32,
    /// How long a write waits for another client to publish a new key's root.
    pub root_wait: Duration,
    /// Bucket groups per RACE subtable (rounded up to a power of two; 3 buckets of
    /// 7 slots each). Used by the client that initialises a table; every other
    /// client takes the table's own value from its directory.
    pub race_subtable_groups: u64,
    /// How long a RACE split lock (or a table's initialisation) may stay unchanged
    /// before other clients take over, assuming its holder died. Must exceed any
    /// pause of a live client.
    pub race_split_timeout: Duration,
    /// An insert into an empty RACE slot uses a bucket view at most this old
    /// (from the READ being posted to the CAS being posted); an older view is read
    /// again. Duplicates of one key are resolved by address, which is only right
    /// between inserts whose views are recent.
    pub race_insert_view_age: Duration,
}

impl std::fmt::Debug for ClientOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ClientOptions")
            .field("token", &self.token.as_ref().map(|_| "***"))
            .field("transport", &self.transport)
            .field("worker", &self.worker)
            .field("rc", &self.rc)
            .field("udp_relay", &self.udp_relay.is_some())
            .field("accelerator", &self.accelerator)
            .field("name", &self.name)
            .field("chunk_bytes", &self.chunk_bytes)
            .field("lease_ttl", &self.lease_ttl)
            .field("grace", &self.grace)
            .field("max_link_attempts", &self.max_link_attempts)
            .field("max_restarts", &self.max_restarts)
            .field("shortcut_lag", &self.shortcut_lag)
            .field("root_wait", &self.root_wait)
            .field("race_subtable_groups", &self.race_subtable_groups)
            .field("race_split_timeout", &self.race_split_timeout)
            .field("race_insert_view_age", &self.race_insert_view_age)
            .finish()
    }
}

impl Default for ClientOptions {
    fn default() -> Self {
        ClientOptions {
            token: None,
            transport: TransportKind::Udp,
            worker: WorkerConfig::default(),
            rc: RcConfig::default(),
            udp_relay: None,
            accelerator: AcceleratorUse::Auto,
            name: "kvstore".to_owned(),
            chunk_bytes: 1 << 20,
            lease_ttl: Duration::from_secs(3600),
            grace: Duration::from_millis(100),
            max_link_attempts: 4096,
            max_restarts: 64,
            shortcut_lag: 1,
            root_wait: Duration::from_secs(2),
            race_subtable_groups: 256,
            race_split_timeout: Duration::from_secs(2),
            race_insert_view_age: Duration::from_millis(5),
        }
    }
}

impl ClientOptions {
    /// Defaults with `transport`.
    pub fn with_transport(transport: TransportKind) -> ClientOptions {
        ClientOptions {
            transport,
            ..ClientOptions::default()
        }
    }
}
