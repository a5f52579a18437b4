//! Settings of a client: how sessions reach memory nodes and the policies of the indexes.
//!
//! [`ClientOptions`] groups them: [`ConnectionOptions`] (transport, queue pairs,
//! accelerator, [`ReconnectOptions`]), [`MemoryOptions`] (leases, reclamation), [`RetryOptions`] (bounded
//! retries, stale locks), and the index-specific [`CloverOptions`] and [`RaceOptions`].
//! Every struct is `#[non_exhaustive]`: start from `default()` and change what you
//! need with the `with_*` builders (or assign a field of a default value).
//!
//! ```
//! use std::time::Duration;
//! use kvstore::{ClientOptions, RetryOptions, TransportKind};
//!
//! let options = ClientOptions::with_transport(TransportKind::Udp)
//!     .with_name("my-service")
//!     .with_retry(RetryOptions::default().with_max_link_attempts(128))
//!     .with_grace(Duration::from_millis(50));
//! assert_eq!(options.retry.max_link_attempts, 128);
//! ```

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
#[non_exhaustive]
pub struct ClientOptions {
    /// Bearer secret for the metadata service (default: none): the cluster's root
    /// token, or a credential (`dmkv_…`) — a table credential with read-write access
    /// to its tables is all a client of those tables needs (read access for one that
    /// only reads). Never logged (`Debug` shows `***`).
    pub token: Option<String>,
    /// The name leases are held under (a random suffix is added per client; default
    /// `kvstore`).
    pub name: String,
    /// How sessions reach memory nodes.
    pub connection: ConnectionOptions,
    /// Leased memory and its reclamation.
    pub memory: MemoryOptions,
    /// Bounds of retry loops and of locks left by dead clients.
    pub retry: RetryOptions,
    /// Clover tables.
    pub clover: CloverOptions,
    /// RACE tables.
    pub race: RaceOptions,
    /// One-sided, RPC or hybrid access ([`crate::AccessMode`]).
    pub access: crate::AccessOptions,
}

/// How sessions reach memory nodes: transport, queue-pair and worker settings, and
/// the path through a middlebox or the switch accelerator.
#[derive(Clone)]
#[non_exhaustive]
pub struct ConnectionOptions {
    /// The transport of every session: `udp` (soft RoCE, the default), `shm` (memory
    /// nodes on this host serving a shared-memory file), or `local` (only with
    /// [`crate::Client::in_process`]).
    pub transport: TransportKind,
    /// Settings of each session's worker (credits, backoff, admission).
    pub worker: WorkerConfig,
    /// Reliable-connection settings of `udp` queue pairs (path MTU, timers, retries).
    pub rc: RcConfig,
    /// A middlebox between `udp` queue pairs and memory nodes, if any (default: none).
    pub udp_relay: Option<Arc<dyn UdpRelay>>,
    /// Whether `udp` queue pairs are created through the switch accelerator (its
    /// `POST /v1/qps`; default [`AcceleratorUse::Auto`]). Ignored with a `udp_relay`
    /// and on other transports.
    pub accelerator: AcceleratorUse,
    /// Replicated tables' data WRITEs (Clover nodes, RACE KV blocks) go once, to the
    /// primary, and the switch accelerator copies them to the backups, for the replica
    /// sets the operator installed on it (`POST /v1/mirrors`; default `false`: the
    /// client writes every copy). Only through the accelerator.
    pub switch_replication: bool,
    /// Replicated RACE tables' KV block READs (single-packet ones) go to the primary
    /// under the replica set's read alias key, for the switch accelerator to serve
    /// from any serving member, for the sets the operator installed with
    /// `balance_reads` (default `false`: the primary serves every READ). Only through
    /// the accelerator.
    pub balance_reads: bool,
    /// How sessions replace queue pairs they lose.
    pub reconnect: ReconnectOptions,
    /// The RDMA device of `rdma` sessions (e.g. `mlx5_0`; default: the first one).
    /// Each session opens it itself: its own device context, queue pairs and
    /// completion queue (needs the cargo feature `rdma`).
    pub rdma_device: Option<String>,
    /// The GID table index `rdma` queue pairs source packets from (default: the first
    /// RoCE v2 GID holding an IPv4-mapped address).
    pub rdma_gid_index: Option<u8>,
}

/// How a session replaces a queue pair that failed (its memory node restarted or
/// destroyed it) or reaches a memory node it could not reach when it opened.
///
/// An operation whose queue pair failed waits for a new one for at most `timeout`,
/// then fails; attempts to make one back off from `interval / 64` up to
/// `interval`, and a memory node the session could not reach when it opened is
/// tried at most once per `interval`.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct ReconnectOptions {
    /// How long an operation waits for a new queue pair after its own failed,
    /// before failing with `Unavailable` (default 10 s).
    pub timeout: Duration,
    /// The longest wait between two attempts to connect to one memory node, and the
    /// rate limit for nodes the session never reached (default 1 s).
    pub interval: Duration,
}

/// Leased memory: how much a session leases at a time, for how long, and how long
/// freed memory rests before it is reused.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct MemoryOptions {
    /// Bytes asked for per leased chunk (default 1 MiB).
    pub chunk_bytes: u64,
    /// Time to live of leases; sessions renew them when a third of it is left
    /// (default one hour).
    pub lease_ttl: Duration,
    /// How long a reclaimed node or KV block waits before its memory is reused, so
    /// reads in flight on it finish before it is rewritten (default 100 ms).
    pub grace: Duration,
}

/// Bounds of the retry loops, and how long a lock may look abandoned before others
/// take it over.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct RetryOptions {
    /// Attempts a write makes to link its node (Clover) or swing its slot (RACE)
    /// before failing with `Contended` (default 4096). A writer that keeps losing
    /// the race to others backs off between attempts (SMART), so under sustained
    /// contention on one key it may need many.
    pub max_link_attempts: u32,
    /// Traversal restarts a read makes before failing with `Unavailable` (default 64).
    pub max_restarts: u32,
    /// How long a lock — a RACE split lock, a table's initialisation, an in-place
    /// table's latch lease — may stay unchanged before other clients take over,
    /// assuming its holder died (default 2 s). Must exceed any pause of a live client.
    pub lock_timeout: Duration,
}

/// Settings of Clover tables.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct CloverOptions {
    /// A writer advances the key's shortcut word when it lags the new tail by at
    /// least this many versions (default 1: after every write).
    pub shortcut_lag: u32,
    /// How long a write waits for another client to publish a new key's root
    /// (default 2 s).
    pub root_wait: Duration,
    /// Create new keys' chains one-sidedly, by CAS in the table's chain directory,
    /// instead of with two metadata calls per key (default on). Off, a client asks
    /// the service not to give a table a directory when it has none yet; a table
    /// that has one is used through it by every client regardless.
    pub chain_directory: bool,
    /// A client publishes the key → chain mappings it claimed in a chain directory
    /// to the metadata service (for key listings) once this many are waiting
    /// (default 4096, the most one call takes; fewer when their keys are long:
    /// a call's body is at most 1 MiB) …
    pub publish_batch: usize,
    /// … or the oldest has waited this long, checked at its next insert or listing
    /// (default 1 s).
    pub publish_delay: Duration,
}

/// Settings of RACE tables.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct RaceOptions {
    /// Bucket groups per RACE subtable (rounded up to a power of two; 3 buckets of
    /// 7 slots each; default 256). Used by the client that initialises a table;
    /// every other client takes the table's own value from its directory.
    pub subtable_groups: u64,
    /// An insert into an empty slot uses a bucket view at most this old (from the
    /// READ being posted to the CAS being posted); an older view is read again
    /// (default 5 ms). Duplicates of one key are resolved by address, which is only
    /// right between inserts whose views are recent.
    pub insert_view_age: Duration,
}

impl std::fmt::Debug for ClientOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ClientOptions")
            .field("token", &self.token.as_ref().map(|_| "***"))
            .field("name", &self.name)
            .field("connection", &self.connection)
            .field("memory", &self.memory)
            .field("retry", &self.retry)
            .field("clover", &self.clover)
            .field("race", &self.race)
            .field("access", &self.access)
            .finish()
    }
}

impl std::fmt::Debug for ConnectionOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ConnectionOptions")
            .field("transport", &self.transport)
            .field("worker", &self.worker)
            .field("rc", &self.rc)
            .field("udp_relay", &self.udp_relay.is_some())
            .field("accelerator", &self.accelerator)
            .field("switch_replication", &self.switch_replication)
            .field("balance_reads", &self.balance_reads)
            .field("reconnect", &self.reconnect)
            .field("rdma_device", &self.rdma_device)
            .field("rdma_gid_index", &self.rdma_gid_index)
            .finish()
    }
}

impl Default for ClientOptions {
    fn default() -> Self {
        ClientOptions {
            token: None,
            name: "kvstore".to_owned(),
            connection: ConnectionOptions::default(),
            memory: MemoryOptions::default(),
            retry: RetryOptions::default(),
            clover: CloverOptions::default(),
            race: RaceOptions::default(),
            access: crate::AccessOptions::default(),
        }
    }
}

impl Default for ConnectionOptions {
    fn default() -> Self {
        ConnectionOptions {
            transport: TransportKind::Udp,
            worker: WorkerConfig::default(),
            rc: RcConfig::default(),
            udp_relay: None,
            accelerator: AcceleratorUse::Auto,
            switch_replication: false,
            balance_reads: false,
            reconnect: ReconnectOptions::default(),
            rdma_device: None,
            rdma_gid_index: None,
        }
    }
}

impl Default for ReconnectOptions {
    fn default() -> Self {
        ReconnectOptions {
            timeout: Duration::from_secs(10),
            interval: Duration::from_secs(1),
        }
    }
}

impl Default for MemoryOptions {
    fn default() -> Self {
        MemoryOptions {
            chunk_bytes: 1 << 20,
            lease_ttl: Duration::from_secs(3600),
            grace: Duration::from_millis(100),
        }
    }
}

impl Default for RetryOptions {
    fn default() -> Self {
        RetryOptions {
            max_link_attempts: 4096,
            max_restarts: 64,
            lock_timeout: Duration::from_secs(2),
        }
    }
}

impl Default for CloverOptions {
    fn default() -> Self {
        CloverOptions {
            shortcut_lag: 1,
            root_wait: Duration::from_secs(2),
            chain_directory: true,
            publish_batch: dmkv_api::metadata::MAX_PUBLISH_BATCH,
            publish_delay: Duration::from_secs(1),
        }
    }
}

impl Default for RaceOptions {
    fn default() -> Self {
        RaceOptions {
            subtable_groups: 256,
            insert_view_age: Duration::from_millis(5),
        }
    }
}

impl ClientOptions {
    /// Defaults with `transport`.
    pub fn with_transport(transport: TransportKind) -> ClientOptions {
        let mut o = ClientOptions::default();
        o.connection.transport = transport;
        o
    }

    /// These options with bearer token `token` (an empty token is no token).
    pub fn with_token(mut self, token: Option<String>) -> Self {
        self.token = token;
        self
    }

    /// These options with credential `secret` (`dmkv_…`, see
    /// [`dmkv_api::credentials`]) as the bearer secret: the same field as
    /// [`ClientOptions::with_token`], named for clients that hold a scoped credential.
    pub fn with_credential(self, secret: impl Into<String>) -> Self {
        self.with_token(Some(secret.into()))
    }

    /// These options with leases held under `name`.
    pub fn with_name(mut self, name: impl Into<String>) -> Self {
        self.name = name.into();
        self
    }

    /// These options with `connection`.
    pub fn with_connection(mut self, connection: ConnectionOptions) -> Self {
        self.connection = connection;
        self
    }

    /// These options with `memory`.
    pub fn with_memory(mut self, memory: MemoryOptions) -> Self {
        self.memory = memory;
        self
    }

    /// These options with `retry`.
    pub fn with_retry(mut self, retry: RetryOptions) -> Self {
        self.retry = retry;
        self
    }

    /// These options with `clover`.
    pub fn with_clover(mut self, clover: CloverOptions) -> Self {
        self.clover = clover;
        self
    }

    /// These options with access settings `access`.
    pub fn with_access(mut self, access: crate::AccessOptions) -> Self {
        self.access = access;
        self
    }

    /// These options with `race`.
    pub fn with_race(mut self, race: RaceOptions) -> Self {
        self.race = race;
        self
    }

    /// These options with queue-pair settings `rc` (shorthand for the connection's).
    pub fn with_rc(mut self, rc: RcConfig) -> Self {
        self.connection.rc = rc;
        self
    }

    /// These options with reclamation grace period `grace` (shorthand for the memory's).
    pub fn with_grace(mut self, grace: Duration) -> Self {
        self.memory.grace = grace;
        self
    }

    /// These options with reconnection settings `reconnect` (shorthand for the
    /// connection's).
    pub fn with_reconnect(mut self, reconnect: ReconnectOptions) -> Self {
        self.connection.reconnect = reconnect;
        self
    }
}

impl ConnectionOptions {
    /// These options with `transport`.
    pub fn with_transport(mut self, transport: TransportKind) -> Self {
        self.transport = transport;
        self
    }

    /// These options with worker settings `worker`.
    pub fn with_worker(mut self, worker: WorkerConfig) -> Self {
        self.worker = worker;
        self
    }

    /// These options with queue-pair settings `rc`.
    pub fn with_rc(mut self, rc: RcConfig) -> Self {
        self.rc = rc;
        self
    }

    /// These options with the middlebox `relay` between `udp` queue pairs and memory nodes.
    pub fn with_udp_relay(mut self, relay: Option<Arc<dyn UdpRelay>>) -> Self {
        self.udp_relay = relay;
        self
    }

    /// These options with accelerator use `accelerator`.
    pub fn with_accelerator(mut self, accelerator: AcceleratorUse) -> Self {
        self.accelerator = accelerator;
        self
    }

    /// These options with switch replication of writes on or off.
    pub fn with_switch_replication(mut self, on: bool) -> Self {
        self.switch_replication = on;
        self
    }

    /// These options with load-balanced READs of replicated tables on or off.
    pub fn with_balance_reads(mut self, on: bool) -> Self {
        self.balance_reads = on;
        self
    }

    /// These options with reconnection settings `reconnect`.
    pub fn with_reconnect(mut self, reconnect: ReconnectOptions) -> Self {
        self.reconnect = reconnect;
        self
    }

    /// These options with `rdma` sessions on `device` (`None`: the first one) and GID
    /// index `gid_index` (`None`: picked).
    pub fn with_rdma_device(mut self, device: Option<String>, gid_index: Option<u8>) -> Self {
        self.rdma_device = device;
        self.rdma_gid_index = gid_index;
        self
    }
}

impl ReconnectOptions {
    /// These options with operations waiting at most `timeout` for a new queue pair.
    pub fn with_timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

    /// These options with attempts at most `interval` apart.
    pub fn with_interval(mut self, interval: Duration) -> Self {
        self.interval = interval;
        self
    }
}

impl MemoryOptions {
    /// These options with chunks of `bytes`.
    pub fn with_chunk_bytes(mut self, bytes: u64) -> Self {
        self.chunk_bytes = bytes;
        self
    }

    /// These options with lease time to live `ttl`.
    pub fn with_lease_ttl(mut self, ttl: Duration) -> Self {
        self.lease_ttl = ttl;
        self
    }

    /// These options with reclamation grace period `grace`.
    pub fn with_grace(mut self, grace: Duration) -> Self {
        self.grace = grace;
        self
    }
}

impl RetryOptions {
    /// These options with at most `n` link attempts per write.
    pub fn with_max_link_attempts(mut self, n: u32) -> Self {
        self.max_link_attempts = n;
        self
    }

    /// These options with at most `n` restarts per read.
    pub fn with_max_restarts(mut self, n: u32) -> Self {
        self.max_restarts = n;
        self
    }

    /// These options with stale-lock timeout `timeout`.
    pub fn with_lock_timeout(mut self, timeout: Duration) -> Self {
        self.lock_timeout = timeout;
        self
    }
}

impl CloverOptions {
    /// These options with shortcut lag `lag`.
    pub fn with_shortcut_lag(mut self, lag: u32) -> Self {
        self.shortcut_lag = lag;
        self
    }

    /// These options with root wait `wait`.
    pub fn with_root_wait(mut self, wait: Duration) -> Self {
        self.root_wait = wait;
        self
    }

    /// These options with one-sided chain creation on (`true`) or off.
    pub fn with_chain_directory(mut self, on: bool) -> Self {
        self.chain_directory = on;
        self
    }

    /// These options publishing claimed mappings in batches of `batch` (at least 1)
    /// or after `delay`.
    pub fn with_publishing(mut self, batch: usize, delay: Duration) -> Self {
        self.publish_batch = batch.max(1);
        self.publish_delay = delay;
        self
    }
}

impl RaceOptions {
    /// These options with `groups` bucket groups per subtable.
    pub fn with_subtable_groups(mut self, groups: u64) -> Self {
        self.subtable_groups = groups;
        self
    }

    /// These options with insert view age `age`.
    pub fn with_insert_view_age(mut self, age: Duration) -> Self {
        self.insert_view_age = age;
        self
    }
}
