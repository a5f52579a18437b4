//! Table handles: the key-value API of one table for the tasks of one session.
//!
//! Keys are byte strings of 1 to [`MAX_KEY_LEN`](crate::MAX_KEY_LEN) bytes; values
//! are byte strings up to the table's value limit (and what the largest node holds
//! besides the key). Inputs are checked before anything is sent: a bad key or value
//! is an error, never a panic. The operations are `async` and run on the session's
//! worker ([`crate::Session::block_on`], [`crate::Session::spawn`]).

use std::cell::RefCell;
use std::rc::Rc;

use dmkv_api::metadata::{TableDescription, TableLayout};

use crate::AccessMode;
use crate::clover;
use crate::error::{KvError, check_table_key};
use crate::index::WriteKind;
use crate::inplace::table::{self as inplace, InPlaceTable};
use crate::race;
use crate::recovery::{Replay, recover};
use crate::session::{Session, SessionCore};

pub mod location;

/// Which index serves a table: one variant per index implementation.
#[derive(Debug, Clone)]
enum Index {
    /// Clover chains ([`crate::clover`]).
    Clover,
    /// RACE extendible hashing ([`crate::race`]).
    Race,
    /// Tuples updated in place under a latch scheme ([`crate::inplace`]).
    InPlace(Rc<InPlaceTable>),
}

impl Index {
    /// The index's name in spans.
    fn name(&self) -> &'static str {
        match self {
            Index::Clover => "clover",
            Index::Race => "race",
            Index::InPlace(_) => "inplace",
        }
    }
}

/// How an operation ended, for its span: `ok` or the error's [`KvError::kind`].
fn outcome<T>(r: &Result<T, KvError>) -> &'static str {
    match r {
        Ok(_) => "ok",
        Err(e) => e.kind(),
    }
}

/// How a read ended, for its span: `ok`, `not_found` (no value), or the error's kind.
fn read_outcome(r: &Result<Option<Vec<u8>>, KvError>) -> &'static str {
    match r {
        Ok(None) => KvError::NotFound.kind(),
        other => outcome(other),
    }
}

/// One table, as seen by one session. Cheap to clone; not `Send`.
#[derive(Clone)]
pub struct Table {
    core: Rc<SessionCore>,
    name: String,
    /// The catalog entry; replaced when a replicated table fails over.
    info: RefCell<Rc<TableDescription>>,
    /// The index serving it; an in-place table's is reopened on the new primary
    /// when the table fails over.
    index: RefCell<Index>,
    /// When this handle last asked the metadata service for the table.
    fetched_at: std::cell::Cell<Option<std::time::Instant>>,
    /// When this handle last asked whether the table has a change feed.
    feed_checked_at: std::cell::Cell<Option<std::time::Instant>>,
    /// The session's reconnect count when the in-place handle was opened (its
    /// copies' keys and addresses come from the queue pairs of that time).
    opened_at: std::cell::Cell<u64>,
    /// How operations reach the index ([`Table::set_access`]).
    access: std::cell::Cell<AccessMode>,
}

impl std::fmt::Debug for Table {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Table")
            .field("name", &self.name)
            .field("index", &self.index)
            .finish()
    }
}

impl Session {
    /// A handle on table `name` for this session's tasks.
    pub fn table(&self, name: &str) -> Result<Table, KvError> {
        let info = self.core.client.table(name)?;
        // A table created after the queue pairs got their grants needs its own.
        self.core
            .links
            .reconnector()
            .grant_table(name, std::time::Instant::now());
        let replicated = crate::replication::copies::is_replicated(&info);
        match Table::new(self.core.clone(), info) {
            // The client's cached description may name members a failover has
            // taken out since: ask for the table again before giving up.
            Err(KvError::Unavailable(_)) if replicated => {
                Table::new(self.core.clone(), self.core.client.fresh_table(name)?)
            }
            r => r,
        }
    }
}

/// How old a handle's knowledge of its table's change feed may be when a write starts.
pub const FEED_MAX_AGE: std::time::Duration = std::time::Duration::from_secs(1);

/// How often a writer asks whether a table's paused writes resumed.
const PAUSE_POLL: std::time::Duration = std::time::Duration::from_millis(10);

/// How old a replicated table's configuration may be when a write starts.
const CONFIG_MAX_AGE: std::time::Duration =
    std::time::Duration::from_millis(dmkv_api::metadata::WRITER_CONFIG_MAX_AGE_MS);

impl Table {
    pub(crate) fn new(core: Rc<SessionCore>, info: TableDescription) -> Result<Table, KvError> {
        crate::replication::copies::check_supported(&info, core.accelerated)?;
        let core_reconnects = core.links.reconnector().reconnects();
        let index = match &info.layout {
            TableLayout::Clover => Index::Clover,
            TableLayout::Race(_) => Index::Race,
            TableLayout::InPlace(ip) => {
                Index::InPlace(Rc::new(InPlaceTable::open(&core, &info, ip)?))
            }
        };
        let mode = core.client.options.access.mode;
        let table = Table {
            core,
            name: info.name.clone(),
            info: RefCell::new(Rc::new(info)),
            index: RefCell::new(index),
            fetched_at: std::cell::Cell::new(Some(std::time::Instant::now())),
            feed_checked_at: std::cell::Cell::new(Some(std::time::Instant::now())),
            opened_at: std::cell::Cell::new(core_reconnects),
            access: std::cell::Cell::new(AccessMode::OneSided),
        };
        table.set_access(mode)?;
        Ok(table)
    }

    /// Reach this table's index as `mode` says from now on ([`AccessMode`]; the
    /// client's [`crate::AccessOptions::mode`] when the handle opens). `rpc` is
    /// refused for replicated tables (the memory node executes on one copy) and for
    /// in-place tables whose latch scheme the node does not run (all but the
    /// pessimistic ones); `hybrid` on those stays one-sided. On Clover tables
    /// reads use an RPC for the walk to the tail, and a write is one RPC (the tail
    /// search and the link, or the creation of a new key's chain).
    pub fn set_access(&self, mode: AccessMode) -> Result<(), KvError> {
        if mode == AccessMode::Rpc {
            if let Index::InPlace(t) = &*self.index.borrow()
                && let Some(why) = t.rpc_refusal()
                && !self.replicated()
            {
                return Err(KvError::Unsupported(format!(
                    "table {:?}: access mode rpc is refused: {why}; use one-sided or hybrid",
                    self.name
                )));
            }
            if self.replicated() {
                return Err(KvError::Unsupported(format!(
                    "table {:?} has {} copies: access mode rpc executes on one memory node \
                     and is refused for replicated tables; use one-sided (hybrid stays \
                     one-sided on them)",
                    self.name,
                    self.info().replication
                )));
            }
        }
        self.access.set(mode);
        Ok(())
    }

    /// How operations reach this table's index.
    pub fn access(&self) -> AccessMode {
        self.access.get()
    }

    /// The mode the index operations use now: one-sided on replicated tables.
    fn index_access(&self) -> AccessMode {
        if self.replicated() {
            AccessMode::OneSided
        } else {
            self.access.get()
        }
    }

    /// The table's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The table's catalog entry as this handle last saw it (a replicated table's
    /// replica sets change when a memnode fails over).
    pub fn description(&self) -> TableDescription {
        TableDescription::clone(&self.info())
    }

    fn info(&self) -> Rc<TableDescription> {
        self.info.borrow().clone()
    }

    /// For a replicated table: fetch the catalog entry again and take it if its
    /// replica sets changed (a failed memnode was taken out of them, a member
    /// joined or was promoted).
    fn failed_over(&self) -> bool {
        let reconnects = self.core.links.reconnector().reconnects();
        let Ok(fresh) = self.core.client.fresh_table(&self.name) else {
            return false;
        };
        self.fetched_at.set(Some(std::time::Instant::now()));
        self.core
            .config_checks
            .borrow_mut()
            .insert(self.name.clone(), (fresh.config_epoch, reconnects));
        let info = self.info();
        if fresh.replica_sets == info.replica_sets
            && fresh.syncing == info.syncing
            && fresh.config_epoch == info.config_epoch
        {
            return false;
        }
        tracing::warn!(
            table = %self.name,
            replica_sets = ?fresh.replica_sets,
            syncing = ?fresh.syncing,
            epoch = fresh.config_epoch,
            "the table's replica sets changed: following them"
        );
        if let TableLayout::InPlace(ip) = &fresh.layout {
            // The tuples' queue pair and mirrors follow the new replica sets.
            match InPlaceTable::open(&self.core, &fresh, ip) {
                Ok(t) => {
                    *self.index.borrow_mut() = Index::InPlace(Rc::new(t));
                    self.opened_at.set(reconnects);
                }
                Err(e) => {
                    tracing::warn!(table = %self.name, error = %e, "reopening the in-place table");
                    return false;
                }
            }
        }
        *self.info.borrow_mut() = Rc::new(fresh);
        true
    }

    /// The catalog entry for an attempt: for a replicated table, fetched again
    /// first unless the session confirmed this configuration since it last
    /// replaced a queue pair (the metadata service destroys the queue pairs of a
    /// replica set's members when the set changes).
    fn current_info(&self) -> Rc<TableDescription> {
        let mut info = self.info();
        if self.replicated() {
            let reconnects = self.core.links.reconnector().reconnects();
            let known = self.core.config_checks.borrow().get(&self.name).copied();
            if known != Some((info.config_epoch, reconnects)) {
                self.failed_over();
                info = self.info();
            }
            self.reopen_in_place(&info, reconnects);
        }
        info
    }

    /// A replicated in-place handle opened before the session replaced a queue
    /// pair is opened again: a member that came back with new memory has a new
    /// key (and perhaps addresses) that its copies must be written under.
    fn reopen_in_place(&self, info: &TableDescription, reconnects: u64) {
        if self.opened_at.get() == reconnects {
            return;
        }
        if let (Index::InPlace(_), TableLayout::InPlace(ip)) = (&self.index(), &info.layout) {
            match InPlaceTable::open(&self.core, info, ip) {
                Ok(t) => {
                    *self.index.borrow_mut() = Index::InPlace(Rc::new(t));
                    self.opened_at.set(reconnects);
                }
                Err(e) => {
                    tracing::debug!(table = %self.name, error = %e, "reopening the in-place table")
                }
            }
        }
    }

    /// For a write of a replicated table: waits while the table's writes are
    /// paused (the last copy pass of a new member, see `docs/replication.md`),
    /// then limits the attempt's writes to the queue pairs the session has now,
    /// which all existed when the configuration `info` was confirmed.
    async fn writable_info(
        &self,
        mut info: Rc<TableDescription>,
    ) -> Result<Rc<TableDescription>, KvError> {
        let timeout = self.core.client.options.connection.reconnect.timeout;
        let deadline = std::time::Instant::now() + timeout;
        // Learn of a pause soon, so that writes are seldom in flight when the
        // metadata service fences the replica set for its paused pass.
        let stale = self
            .fetched_at
            .get()
            .is_none_or(|t| t.elapsed() >= CONFIG_MAX_AGE);
        if stale {
            self.failed_over();
            info = self.info();
        }
        while info.writes_paused {
            if std::time::Instant::now() >= deadline {
                return Err(KvError::unavailable(format!(
                    "writes to table {:?} are still paused after {} ms while a new copy of its \
                     data is finished; nothing was written",
                    self.name,
                    timeout.as_millis()
                )));
            }
            self.core.worker.sleep(PAUSE_POLL).await;
            self.failed_over();
            info = self.info();
        }
        self.core.links.routes().borrow().limit_writes();
        Ok(info)
    }

    /// The index serving the table now.
    fn index(&self) -> Index {
        self.index.borrow().clone()
    }

    fn replicated(&self) -> bool {
        crate::replication::copies::is_replicated(&self.info())
    }

    /// The largest value `key` may hold in this table.
    pub fn value_limit(&self, key: &[u8]) -> usize {
        let table = usize::try_from(self.info().value_limit).unwrap_or(usize::MAX);
        match &self.index() {
            Index::Clover => table.min(clover::node::max_value_len(key.len())),
            Index::Race => table.min(race::kv_block::max_value_len(key.len())),
            Index::InPlace(t) => table.min(t.value_limit()),
        }
    }

    fn check(&self, key: &[u8], value: &[u8]) -> Result<(), KvError> {
        check_table_key(key)?;
        let limit = self.value_limit(key);
        if value.len() > limit {
            return Err(KvError::ValueTooLarge {
                len: value.len(),
                limit,
            });
        }
        Ok(())
    }

    /// The value of `key`, or `None` when it has none (never written, or deleted).
    pub async fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>, KvError> {
        if !tracing::enabled!(tracing::Level::INFO) {
            return self.get_untraced(key).await;
        }
        let span = self.op_span("get", key);
        let r = tracing::Instrument::instrument(self.get_untraced(key), span.clone()).await;
        span.record("outcome", read_outcome(&r));
        r
    }

    async fn get_untraced(&self, key: &[u8]) -> Result<Option<Vec<u8>>, KvError> {
        let follow = || self.failed_over();
        let follow: Option<&dyn Fn() -> bool> = self.replicated().then_some(&follow);
        match recover(&self.core, Replay::Read, key, follow, || self.lookup(key)).await {
            Ok(v) => Ok(Some(v)),
            Err(KvError::NotFound) => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// The index's read: `NotFound` when `key` has no value.
    async fn lookup(&self, key: &[u8]) -> Result<Vec<u8>, KvError> {
        check_table_key(key)?;
        let info = self.current_info();
        match &self.index() {
            Index::Clover => clover::get::get(&self.core, &info, key, self.index_access()).await,
            Index::Race => race::ops::get(&self.core, &info, key, self.index_access()).await,
            Index::InPlace(t) => inplace::get(&self.core, t, key, self.index_access()).await,
        }
    }

    /// The live keys of this table that start with `prefix`, in byte order, at most
    /// `limit` of them (`None`: all).
    ///
    /// Every index can list: Clover asks the metadata service for the keys that
    /// have a chain (were ever written) and reads each one, listing those with a
    /// value; RACE reads every bucket and the KV blocks they name (see
    /// `race::scan`); in-place tables read every tuple. A listing is not a
    /// snapshot: a key present throughout is listed, one written or deleted
    /// meanwhile may or may not be. The cost grows with the table (Clover: one read
    /// per key ever written; RACE: the whole table; in-place: one read per tuple).
    pub async fn keys(&self, prefix: &[u8], limit: Option<usize>) -> Result<Vec<Vec<u8>>, KvError> {
        let limit = limit.unwrap_or(usize::MAX);
        let info = self.info();
        let mut keys = match &self.index() {
            Index::Clover => return self.clover_keys(prefix, limit).await,
            Index::Race => race::scan::keys(&self.core, &info, prefix).await?,
            Index::InPlace(t) => inplace::keys(&self.core, t, prefix).await?,
        };
        keys.truncate(limit);
        Ok(keys)
    }

    /// Clover: page through the keys with a chain and keep those with a value.
    async fn clover_keys(&self, prefix: &[u8], limit: usize) -> Result<Vec<Vec<u8>>, KvError> {
        let mut out = Vec::new();
        let mut after: Option<Vec<u8>> = None;
        while out.len() < limit {
            let page = clover::keys::page(&self.core, &self.name, prefix, after.as_deref()).await?;
            for k in &page.keys {
                let key = k.key_bytes().ok_or_else(|| {
                    KvError::corrupt("the metadata service sent a key that is not base64")
                })?;
                if out.len() < limit && self.get(&key).await?.is_some() {
                    out.push(key.clone());
                }
                after = Some(key);
            }
            if page.next_after.is_none() {
                break;
            }
        }
        Ok(out)
    }

    /// Set `key` to `value`, whether or not it had one (upsert).
    pub async fn put(&self, key: &[u8], value: &[u8]) -> Result<(), KvError> {
        self.write(key, WriteKind::Put, value).await
    }

    /// Create `key` with `value`; `AlreadyExists` when it has a value.
    pub async fn insert(&self, key: &[u8], value: &[u8]) -> Result<(), KvError> {
        self.write(key, WriteKind::Insert, value).await
    }

    /// Replace the value of `key`; `NotFound` when it has none.
    pub async fn update(&self, key: &[u8], value: &[u8]) -> Result<(), KvError> {
        self.write(key, WriteKind::Update, value).await
    }

    /// Remove `key`; `NotFound` when it has no value.
    pub async fn delete(&self, key: &[u8]) -> Result<(), KvError> {
        self.write(key, WriteKind::Delete, &[]).await
    }

    /// Wait until this handle's writes have fully completed at the memory nodes:
    /// in-place tables whose scheme unlatches asynchronously return from a write
    /// before its WRITE-and-unlatch batch completes (call this before the process
    /// exits); for other tables it returns at once.
    pub async fn flush(&self) {
        if let Index::InPlace(t) = &self.index() {
            t.flush().await;
        }
    }

    async fn write(&self, key: &[u8], kind: WriteKind, value: &[u8]) -> Result<(), KvError> {
        if !tracing::enabled!(tracing::Level::INFO) {
            return self.write_untraced(key, kind, value).await;
        }
        let op = kind.name();
        let span = self.op_span(op, key);
        if kind != WriteKind::Delete {
            span.record("value_len", i64::try_from(value.len()).unwrap_or(i64::MAX));
        }
        let r =
            tracing::Instrument::instrument(self.write_untraced(key, kind, value), span.clone())
                .await;
        span.record("outcome", outcome(&r));
        r
    }

    /// The `kv.op` span of one operation: table, index, operation and key length now;
    /// outcome, round trips, work requests and bytes when it finishes (the latter from
    /// the operation's own counters, see [`SessionCore::finish_op`]).
    fn op_span(&self, op: &'static str, key: &[u8]) -> tracing::Span {
        tracing::info_span!(
            "kv.op",
            op,
            table = %self.name,
            index = self.index().name(),
            key_len = i64::try_from(key.len()).unwrap_or(i64::MAX),
            value_len = tracing::field::Empty,
            outcome = tracing::field::Empty,
            round_trips = tracing::field::Empty,
            work_requests = tracing::field::Empty,
            bytes = tracing::field::Empty,
        )
    }

    async fn write_untraced(
        &self,
        key: &[u8],
        kind: WriteKind,
        value: &[u8],
    ) -> Result<(), KvError> {
        self.write_recorded(key, kind, value, true).await
    }

    /// A write, recorded in the table's change feed when the table has one and
    /// `record` says so (a [`crate::feed::FeedWriter`] records its writes itself).
    pub(crate) async fn write_recorded(
        &self,
        key: &[u8],
        kind: WriteKind,
        value: &[u8],
        record: bool,
    ) -> Result<(), KvError> {
        self.check(key, value)?;
        let feed = if record { self.feed() } else { None };
        if let Some(f) = &feed {
            if self.core.accelerated {
                return Err(KvError::Unsupported(format!(
                    "table {:?} has a change feed, whose writers must reach the memory nodes \
                     directly: a link the switch accelerator steers tells the session its \
                     version only later",
                    self.name
                )));
            }
            crate::feed::append::check_fits(f, key, value)?;
        }
        let follow = || self.failed_over();
        let follow: Option<&dyn Fn() -> bool> = self.replicated().then_some(&follow);
        recover(&self.core, Replay::Write(kind.name()), key, follow, || {
            self.index_write(key, kind, value)
        })
        .await?;
        let Some(feed) = feed else {
            return Ok(());
        };
        // Nothing ran on this session since the write linked: its node is the key's
        // hint, with the version the record carries.
        let record = crate::feed::append::record_of(&self.core, feed.table_id, key, kind, value)?;
        crate::feed::append::append(&self.core, &feed, record).await
    }

    /// The table's change feed as the catalog says, asked for again when this
    /// handle's answer is older than [`FEED_MAX_AGE`] (a writer learns of a feed
    /// created after it opened the table within that time). Clover tables only.
    fn feed(&self) -> Option<dmkv_api::feed_layout::FeedLayout> {
        if !matches!(&*self.index.borrow(), Index::Clover) {
            return None;
        }
        let stale = self
            .feed_checked_at
            .get()
            .is_none_or(|t| t.elapsed() >= FEED_MAX_AGE);
        if stale {
            self.feed_checked_at.set(Some(std::time::Instant::now()));
            match self.core.client.fresh_table(&self.name) {
                Ok(fresh) if fresh.id == self.info().id => {
                    let mut info = TableDescription::clone(&self.info());
                    if info.feed != fresh.feed {
                        info.feed = fresh.feed;
                        *self.info.borrow_mut() = Rc::new(info);
                    }
                }
                Ok(_) => {}
                Err(e) => {
                    tracing::debug!(table = %self.name, error = %e, "asking for the table's feed")
                }
            }
        }
        self.info().feed.clone()
    }

    /// The index's write.
    async fn index_write(&self, key: &[u8], kind: WriteKind, value: &[u8]) -> Result<(), KvError> {
        let mut info = self.current_info();
        if self.replicated() {
            info = self.writable_info(info).await?;
        }
        match &self.index() {
            Index::Clover => {
                clover::write::write(&self.core, &info, key, kind, value, self.index_access()).await
            }
            Index::Race => {
                race::ops::write(&self.core, &info, key, kind, value, self.index_access()).await
            }
            Index::InPlace(t) => {
                inplace::write(&self.core, t, key, kind, value, self.index_access()).await
            }
        }
    }
}
