//! The binding interface: YCSB's `DB` class adapted to per-thread asynchronous sessions.
//!
//! A run has N OS threads, each owning one [`Db`] (its session: connections, queue pairs, …) and
//! running M operation loops on it concurrently. The driver builds one future per thread that
//! drives the M loops and hands it to [`Db::run`], so the binding chooses the executor: the
//! default is the tiny poll loop of [`crate::executor`]; the redis binding uses the same loop with
//! its socket as the idle hook (pipelining the M loops' commands on one connection), and a binding
//! whose client library has its own `block_on` (dmkv's `Session`) runs the future there.
//!
//! Operations return boxed futures borrowing the `Db`, so the M loops share it by `&self`; a
//! binding keeps per-thread mutable state in `Cell`/`RefCell` (it is never shared across
//! threads: `Db` need not be `Send`). Operations never panic on a failure: they return a
//! [`Status`], like YCSB's.

use crate::props::Properties;

pub use crate::executor::LocalBoxFuture;

/// A record: field name → value, in the order the binding returns them.
pub type Record = Vec<(String, Vec<u8>)>;

/// YCSB's `Status`: the outcome of one operation, reported as `Return=NAME` lines.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Status {
    Ok,
    Error,
    NotFound,
    NotImplemented,
    UnexpectedState,
    BadRequest,
    Forbidden,
    ServiceUnavailable,
    BatchedOk,
}

impl Status {
    /// YCSB's status name (`OK`, `ERROR`, `NOT_FOUND`, …).
    pub fn name(self) -> &'static str {
        match self {
            Status::Ok => "OK",
            Status::Error => "ERROR",
            Status::NotFound => "NOT_FOUND",
            Status::NotImplemented => "NOT_IMPLEMENTED",
            Status::UnexpectedState => "UNEXPECTED_STATE",
            Status::BadRequest => "BAD_REQUEST",
            Status::Forbidden => "FORBIDDEN",
            Status::ServiceUnavailable => "SERVICE_UNAVAILABLE",
            Status::BatchedOk => "BATCHED_OK",
        }
    }

    pub fn is_ok(self) -> bool {
        matches!(self, Status::Ok | Status::BatchedOk)
    }
}

/// Cumulative protocol counters of one thread's session, for bindings whose transport has them.
/// The driver sums them over threads and reports them per operation.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct ProtocolCounters {
    /// Network round trips awaited.
    pub round_trips: u64,
    /// RPCs to memory nodes' workers (each also a round trip).
    #[serde(default)]
    pub rpcs: u64,
    /// Bytes sent on the wire.
    pub bytes_sent: u64,
    /// Bytes received from the wire.
    pub bytes_received: u64,
    /// Retries (failed CAS, restarts, retransmissions).
    pub retries: u64,
    /// Store operations made (a read-modify-write update is two).
    #[serde(default)]
    pub store_operations: u64,
    /// Store operations that took more than one round trip (an RPC counts as one).
    #[serde(default)]
    pub multi_round_trip_operations: u64,
}

impl ProtocolCounters {
    pub fn add(&mut self, other: &ProtocolCounters) {
        self.round_trips += other.round_trips;
        self.rpcs += other.rpcs;
        self.bytes_sent += other.bytes_sent;
        self.bytes_received += other.bytes_received;
        self.retries += other.retries;
        self.store_operations += other.store_operations;
        self.multi_round_trip_operations += other.multi_round_trip_operations;
    }
}

/// A binding error that stops the run (cannot connect, bad property, unsupported workload).
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct DbError(pub String);

impl DbError {
    pub fn new(msg: impl Into<String>) -> Self {
        DbError(msg.into())
    }
}

/// One thread's binding instance (YCSB's `DB`).
pub trait Db {
    /// Called once on the thread before any operation (YCSB's `init`).
    fn init(&mut self) -> Result<(), DbError> {
        Ok(())
    }

    /// Read `key`; `fields = None` reads all fields.
    fn read<'a>(
        &'a self,
        table: &'a str,
        key: &'a str,
        fields: Option<&'a [String]>,
    ) -> LocalBoxFuture<'a, (Status, Record)>;

    /// Read up to `count` records in key order starting at `start_key`.
    fn scan<'a>(
        &'a self,
        table: &'a str,
        start_key: &'a str,
        count: usize,
        fields: Option<&'a [String]>,
    ) -> LocalBoxFuture<'a, (Status, Vec<(String, Record)>)>;

    /// Overwrite the given fields of an existing record.
    fn update<'a>(
        &'a self,
        table: &'a str,
        key: &'a str,
        values: &'a Record,
    ) -> LocalBoxFuture<'a, Status>;

    /// Insert a record.
    fn insert<'a>(
        &'a self,
        table: &'a str,
        key: &'a str,
        values: &'a Record,
    ) -> LocalBoxFuture<'a, Status>;

    /// Delete a record.
    fn delete<'a>(&'a self, table: &'a str, key: &'a str) -> LocalBoxFuture<'a, Status>;

    /// Drive `fut` (the thread's M operation loops) to completion on this thread.
    fn run<'a>(&'a self, fut: LocalBoxFuture<'a, ()>) {
        crate::executor::block_on(fut, &mut crate::executor::park_idle);
    }

    /// Cumulative protocol counters of this session, if the transport has them.
    fn counters(&self) -> Option<ProtocolCounters> {
        None
    }

    /// Called once on the thread after the last operation (YCSB's `cleanup`).
    fn cleanup(&mut self) -> Result<(), DbError> {
        Ok(())
    }
}

/// Creates one [`Db`] per driver thread; shared by the threads.
pub trait Binding: Send + Sync {
    /// The name in reports and `--json` output.
    fn name(&self) -> &str;

    /// Whether `scan` returns records in key order. Workloads with `scanproportion > 0` are
    /// refused with a clear error otherwise.
    fn supports_scan(&self) -> bool;

    /// A new session for driver thread `thread` (called on that thread).
    fn create(&self, props: &Properties, thread: usize) -> Result<Box<dyn Db>, DbError>;
}
