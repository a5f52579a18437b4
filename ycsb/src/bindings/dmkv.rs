//! `dmkv`: the binding for dmkv itself, over the `kvstore` client library.
//!
//! One [`kvstore::Client`] per binding (so per process): either a running cluster
//! (`dmkv.metadata=URL`) or an embedded one started when the binding is made — a metadata service
//! and `dmkv.memnodes` memory nodes on loopback, shared by every driver thread and phase of the
//! process (so `ycsb loadrun dmkv` loads and runs against the same data). Each driver thread opens
//! its own [`kvstore::Session`] (its worker and queue pairs) and runs its M operation loops on the
//! session's executor ([`kvstore::Session::block_on`]); the loops' operations are in flight
//! together on the session's queue pairs.
//!
//! Records: a YCSB record is stored as one value in the compact encoding of
//! [`super::record_codec`] (≈1082 bytes for 10 × 100-byte fields). A read of a field subset
//! decodes the value and keeps those fields. An update of some fields is, by default
//! (`dmkv.update=merge`), a read-modify-write: get, replace the fields, `Table::update` — two
//! table operations, and not atomic: two clients updating different fields of one key at once may
//! lose one of the updates (the value itself is never torn). `dmkv.update=overwrite` instead
//! replaces the whole value with the given fields only, like YCSB's bindings for stores without
//! hashes do; later reads then return only those fields. Inserts use `Table::insert` (a present
//! key is an `ERROR`), deletes `Table::delete`. The hash indexes have no key order, so
//! [`Binding::supports_scan`] is false and workloads with scans (E) are refused before they start.
//!
//! Properties:
//!
//! | property | default | meaning |
//! |---|---|---|
//! | `dmkv.metadata` | (embedded) | metadata service URL of a running cluster |
//! | `dmkv.credential_file` | `$DMKV_CREDENTIAL`, else `$DMKV_TOKEN` | file holding the secret to present to the metadata service: a credential (`dmkv_…`; a table credential with read-write access to `dmkv.table` suffices when the table exists) or the root token. Secrets never go in properties, which the command line shows in the process list: `dmkv.token` is refused |
//! | `dmkv.transport` | `udp` | `udp` (soft RoCE), `shm` (same-host shared memory), `local` (embedded only), `rdma` (an RDMA device, `$DMKV_RDMA_DEVICE` or the first; build with `--features rdma`) |
//! | `dmkv.index` | `clover` | `clover`, `race` or `inplace` for a table this binding creates |
//! | `dmkv.chaindirectory` | `true` | Clover: new keys get their chains by CAS in the table's chain directory (`false`: two metadata calls per new key, and a table this client creates keeps that path for good) |
//! | `dmkv.replication` | 1 | copies of a created table's data, 1 to 3: Clover, RACE and in-place tables of 2 and 3 copies are served (they survive one and two successive memory-node crashes); a replicated table opened through the switch accelerator is created, then refused when opened |
//! | `dmkv.latch` | `pessimistic-rw-async-embedded` | `inplace`: the latch scheme (`kvstore::SchemeSpec` names, e.g. `versioning`, `crc-consistent`, `farm`) |
//! | `dmkv.tuples` | twice the records and inserts | `inplace`: the table's capacity in tuples (fixed; open addressing) |
//! | `dmkv.table` | `table` (`usertable`) | the dmkv table; created when absent |
//! | `dmkv.valuelimit` | from the record size | value limit of a created table |
//! | `dmkv.update` | `merge` | `merge` (read-modify-write) or `overwrite` |
//! | `dmkv.memnodes` | 1 | embedded: memory nodes to start |
//! | `dmkv.grants` | `off` | embedded: `on` (memory nodes with an admin token, sessions' queue pairs scoped to their grants), `unscoped` (grants checked, whole-region queue pairs: only to measure what scoping costs) |
//! | `dmkv.pmtu` | 4096 embedded, else 1024 | path MTU of `udp` queue pairs: 256, 512, 1024, 2048 or 4096 (RoCE's sizes; 1024 fits a 1500-byte Ethernet MTU, 4096 needs jumbo frames or loopback, where the embedded cluster runs) |
//! | `dmkv.capacity` | from the workload | embedded: bytes per memory node (`K`/`M`/`G` suffixes) |
//! | `dmkv.prefault` | `on` | embedded: make the memory nodes' memory resident before the run (`memnode --prefault`), as registering it with an RDMA NIC pins it, so a load into fresh memory takes no first-touch page faults: `on` or `off`; skipped (with a note) when the capacity is more than half of the machine's available memory |
//! | `dmkv.switch` | `auto` | queue pairs through the switch accelerator: `auto` (the one the metadata service advertises, if any), `true` (embedded: start an in-process `accel-p4` soft switch; udp only), `false` (directly) |
//! | `dmkv.switch.url` | | admin URL of a running switch to go through (implies `dmkv.switch=true`) |
//! | `dmkv.switch.mode` | | embedded switch: functions to enable, comma-separated (`accel-p4 serve --mode` names) |
//! | `dmkv.switch.busypoll` | 50 | embedded switch: µs its data plane busy-polls before sleeping (`accel-p4 serve --busy-poll-us`) |
//! | `dmkv.credits` | `off` | work-request credits per session: `off`, `adaptive` (SMART's C_max), or a fixed C_max |
//! | `dmkv.backoff` | `on` | SMART's truncated exponential backoff (dynamic limit) before retrying a failed index CAS: `on` or `off` (retry at once) |
//! | `dmkv.access` | `one-sided` | how operations reach the index ([`kvstore::AccessMode`]): `one-sided` (verbs only), `rpc` (RACE: one RPC per operation, executed by the memory node's workers; Clover: reads walk to the tail by RPC, a write is one RPC (tail search and link, or a new key's chain created at the node); in-place tables of a pessimistic scheme: each probed tuple read or written at the node; needs workers and one copy; refused for other latch schemes), `hybrid` (one-sided first, RPC past `dmkv.hybrid.k` round trips; one-sided on tables without RPC) |
//! | `dmkv.hybrid.k` | 3 | `hybrid`: the most round trips an operation takes one-sided before it turns to an RPC |
//! | `dmkv.rpc.transport` | `send` | how RPC requests travel ([`kvstore::RpcTransport`]): `send` (a SEND on the queue pair) or `write` (one WRITE into the queue pair's request ring at the memory node, which its workers poll; replies by SEND either way) |
//! | `dmkv.rpc.workers` | 2 with `rpc`/`hybrid`, else 0 | embedded: RPC worker threads per memory node (`memnode --rpc-workers`) |
//! | `dmkv.race.groups` | from `recordcount` | RACE: bucket groups (21 slots each) per subtable of a table this client initialises: by default enough for the records to fill the first subtable about half (at least 256), so a load does not split |
//! | `dmkv.admission` | `on` | SMART's per-session admission throttling of concurrent operations, moved by the retry rate: `on` or `off` |
//!
//! Protocol counters ([`Db::counters`]): round trips awaited by operations (the session's op
//! statistics; an RPC counts as one), RPCs to memory nodes' workers, RoCE bytes each way and retransmissions from the transport (so they include the
//! sessions' background work and what loss cost), plus failed link CASes, restarted traversals
//! and replaced queue pairs (`SessionStats::reconnects`) as retries.
//!
//! Statuses: a missing key is `NOT_FOUND`; an unreachable cluster (nothing happened) is
//! `SERVICE_UNAVAILABLE`; a write whose queue pair failed after it was sent, so that it may or
//! may not have taken effect (`KvError::OutcomeUnknown`), is `UNEXPECTED_STATE`, as is a stored
//! value that does not decode as a record.

use super::record_codec::{self, CodecError};
use crate::db::{Binding, Db, DbError, LocalBoxFuture, ProtocolCounters, Record, Status};
use crate::executor;
use crate::props::Properties;
use accel_p4::switch::{SoftSwitch, SwitchConfig, SwitchHandle};
use dmkv_api::secret_file::{read_secret_file, secret_from_env};
use kvstore::{
    AcceleratorUse, AccessMode, Client, ClientOptions, IndexKind, KvError, SchemeSpec, Session,
    Table, TableSpec, TransportKind,
};
use std::cell::Cell;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::Poll;
use std::time::Instant;
use testbed::{EmbeddedOptions, Security};

/// A session timer armed for a driver sleep's deadline.
type Timer = Pin<Box<dyn Future<Output = ()>>>;

/// Errors printed per thread before the binding goes quiet (the report still counts them all).
const ERRORS_SHOWN: u32 = 3;

/// How a partial update is applied.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum UpdateMode {
    /// Read the record, replace the given fields, write it back.
    Merge,
    /// Replace the record by the given fields.
    Overwrite,
}

/// How a session's worker limits outstanding work requests.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Credits {
    /// Unlimited: the driver already bounds what is in flight by `-concurrency`.
    Off,
    /// SMART's adaptive C_max.
    Adaptive,
    /// A fixed C_max.
    Fixed(u32),
}

/// The latch scheme of an in-place table when `dmkv.latch` is not set: a pessimistic
/// reader/writer latch with asynchronous unlatch (one round trip per read).
pub const DEFAULT_LATCH: &str = "pessimistic-rw-async-embedded";

/// What the binding was asked to connect to.
#[derive(Debug, Clone, PartialEq)]
pub struct DmkvConfig {
    pub metadata: Option<String>,
    /// The secret presented to the metadata service (root token or credential).
    pub token: Option<String>,
    pub transport: TransportKind,
    /// `None`: the existing table's, else clover.
    pub index: Option<IndexKind>,
    /// In-place tables: the latch scheme and the capacity in tuples.
    pub inplace: Option<(SchemeSpec, u64)>,
    pub table: String,
    pub value_limit: u64,
    pub update: UpdateMode,
    pub memnodes: usize,
    pub capacity: u64,
    pub credits: Credits,
    /// SMART's backoff of failed CASes (`dmkv.backoff`).
    pub backoff: bool,
    /// SMART's admission throttling (`dmkv.admission`).
    pub admission: bool,
    /// Path MTU of `udp` queue pairs.
    pub pmtu: kvstore::Pmtu,
    /// Whether queue pairs go through the switch accelerator.
    pub switch: SwitchUse,
    /// Mode bits of an in-process switch.
    pub switch_mode: u32,
    /// How long an in-process switch busy-polls before sleeping
    /// (`dmkv.switch.busypoll`, µs).
    pub switch_busy_poll: std::time::Duration,
    /// Copies of a created table's data (`dmkv.replication`).
    pub replication: u32,
    /// Embedded cluster: how it is secured (`dmkv.grants`: `off`, `on` (admin token,
    /// queue pairs scoped to grants), `unscoped` (grants checked, whole-region access;
    /// only to measure what scoping costs)).
    pub security: Security,
    /// Clover: create new keys' chains through the table's chain directory
    /// (`dmkv.chaindirectory`).
    pub chain_directory: bool,
    /// How operations reach the index (`dmkv.access`).
    pub access: AccessMode,
    /// Hybrid's threshold in round trips (`dmkv.hybrid.k`).
    pub hybrid_k: u32,
    /// How RPC requests travel (`dmkv.rpc.transport`).
    pub rpc_transport: kvstore::RpcTransport,
    /// Embedded: RPC worker threads per memory node (`dmkv.rpc.workers`).
    pub rpc_workers: usize,
    /// Embedded cluster: whether the memory nodes' memory is made resident at start
    /// (`dmkv.prefault`).
    pub prefault: bool,
    /// RACE: bucket groups per subtable of a table this client initialises
    /// (`dmkv.race.groups`).
    pub race_groups: u64,
}

/// RACE bucket groups per subtable for `records` keys: each group has 21 slots; a
/// table loaded with `records` keys fills its first subtable to about half, so a load
/// does not spend its round trips splitting (at least kvstore's default of 256 groups,
/// at most 2^20).
pub fn race_groups_for(records: u64) -> u64 {
    (records.saturating_mul(2) / 21)
        .max(256)
        .next_power_of_two()
        .min(1 << 20)
}

/// Path MTU of the embedded cluster's queue pairs (loopback) unless `dmkv.pmtu` says.
pub const EMBEDDED_PMTU: u32 = 4096;

/// `dmkv.switch` / `dmkv.switch.url`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SwitchUse {
    /// The accelerator the metadata service advertises, if any.
    Auto,
    /// Directly to the memory nodes.
    Off,
    /// Embedded cluster: through an in-process soft switch; running cluster: the
    /// advertised accelerator.
    On,
    /// Through the switch with this admin URL.
    Via(String),
}

fn bad(key: &str, value: &str, why: impl std::fmt::Display) -> DbError {
    DbError::new(format!("dmkv: property {key}={value}: {why}"))
}

/// Parse `512M`, `2G`, `1048576`, `64KiB`.
pub fn parse_bytes(s: &str) -> Option<u64> {
    let t = s.trim();
    let t = t
        .strip_suffix("iB")
        .or_else(|| t.strip_suffix('B'))
        .unwrap_or(t);
    let (num, mult) = match t.char_indices().last() {
        Some((i, c)) if c.is_ascii_alphabetic() => {
            let m: u64 = match c.to_ascii_uppercase() {
                'K' => 1 << 10,
                'M' => 1 << 20,
                'G' => 1 << 30,
                'T' => 1 << 40,
                _ => return None,
            };
            (&t[..i], m)
        }
        _ => (t, 1),
    };
    num.trim().parse::<u64>().ok()?.checked_mul(mult)
}

/// The largest record the workload writes, encoded ([`record_codec`]).
pub fn record_bound(props: &Properties) -> Result<usize, DbError> {
    let e = |e: crate::props::PropError| DbError::new(e.to_string());
    let fieldcount = props.get_u64("fieldcount", 10).map_err(e)? as usize;
    let fieldlength = props.get_u64("fieldlength", 100).map_err(e)? as usize;
    let prefix = props.get_or("fieldnameprefix", "field").len();
    Ok(record_codec::encoded_len(
        (0..fieldcount).map(|i| (prefix + i.to_string().len(), fieldlength)),
    ))
}

/// The size class a record of `bound` encoded bytes occupies (with a Clover node's or RACE KV
/// block's header and a key).
fn object_bytes(bound: usize) -> u64 {
    kvstore::object_bytes(64, bound)
}

/// Bytes of remote memory for `objects` records of `bound` encoded bytes written by `threads`
/// sessions: twice the objects (superseded versions waiting for reclamation, allocator slack),
/// a few leased chunks per session, and a fixed reserve for index structures.
pub fn capacity_for(objects: u64, bound: usize, threads: u64) -> u64 {
    let bytes = 2 * objects * object_bytes(bound) + threads * (16 << 20) + (64 << 20);
    bytes.div_ceil(1 << 20) << 20
}

/// Whether an embedded cluster may make `bytes` of memory-node memory resident at
/// start (`dmkv.prefault`): when it is at most half of what the machine has available
/// (`available`, from `MemAvailable`), so that a big cluster sized for its workload does
/// not push the machine into swapping or the OOM killer; unknown: yes.
pub fn prefault_fits(bytes: u64, available: Option<u64>) -> bool {
    available.is_none_or(|a| bytes <= a / 2)
}

/// Bytes the kernel says are available for new allocations (`MemAvailable` in
/// `/proc/meminfo`), where it says so.
fn mem_available() -> Option<u64> {
    let info = std::fs::read_to_string("/proc/meminfo").ok()?;
    let kib = info
        .lines()
        .find_map(|l| l.strip_prefix("MemAvailable:"))?
        .trim()
        .trim_end_matches("kB")
        .trim()
        .parse::<u64>()
        .ok()?;
    Some(kib * 1024)
}

/// The objects a run of these properties may hold at once: the loaded records, the run phase's
/// expected inserts, and as many superseded versions as records (updates write new versions;
/// old ones are reclaimed once the key's shortcut has passed them and a grace period is over).
pub fn objects_for(props: &Properties) -> Result<u64, DbError> {
    let e = |e: crate::props::PropError| DbError::new(e.to_string());
    let records = props.get_u64("recordcount", 0).map_err(e)?;
    let ops = props.get_u64("operationcount", 0).map_err(e)?;
    let inserts = props
        .get_f64("insertproportion", 0.0)
        .map_err(e)?
        .clamp(0.0, 1.0);
    Ok(2 * records.max(1000) + (ops as f64 * inserts).ceil() as u64)
}

/// The environment variable the root token is read from when neither
/// `dmkv.credential_file` nor [`CREDENTIAL_ENV`] is given (the same one the `dmkv`
/// command line reads).
pub const TOKEN_ENV: &str = "DMKV_TOKEN";

/// The environment variable a credential (`dmkv_…`) is read from when
/// `dmkv.credential_file` is not given.
pub const CREDENTIAL_ENV: &str = "DMKV_CREDENTIAL";

/// The secret to present to the metadata service: from the file named by
/// `dmkv.credential_file`, else [`CREDENTIAL_ENV`], else [`TOKEN_ENV`].
fn secret(props: &Properties) -> Result<Option<String>, DbError> {
    if props.get("dmkv.token").is_some() {
        return Err(DbError::new(
            "dmkv: property dmkv.token is not accepted (properties show in the process list): \
             put the secret in a file and give dmkv.credential_file=PATH, or set DMKV_CREDENTIAL \
             (a credential) or DMKV_TOKEN (the root token)"
                .to_owned(),
        ));
    }
    match props.get("dmkv.credential_file").map(str::trim) {
        Some(path) if !path.is_empty() => read_secret_file(std::path::Path::new(path))
            .map(Some)
            .map_err(|e| bad("dmkv.credential_file", path, e)),
        _ => Ok(secret_from_env(CREDENTIAL_ENV).or_else(|| secret_from_env(TOKEN_ENV))),
    }
}

impl DmkvConfig {
    /// Read the `dmkv.*` properties (and the workload's, for sizing).
    pub fn from_props(props: &Properties) -> Result<DmkvConfig, DbError> {
        let metadata = props
            .get("dmkv.metadata")
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .map(String::from);
        let token = secret(props)?;
        let transport = match props.get("dmkv.transport") {
            None => TransportKind::Udp,
            Some(t) => t
                .trim()
                .parse::<TransportKind>()
                .map_err(|e| bad("dmkv.transport", t, e))?,
        };
        let index = match props
            .get("dmkv.index")
            .map(|s| s.trim().to_ascii_lowercase())
        {
            None => None,
            Some(i) => Some(match i.as_str() {
                "clover" => IndexKind::Clover,
                "race" => IndexKind::Race,
                "in-place" | "inplace" | "in_place" => IndexKind::InPlace,
                _ => return Err(bad("dmkv.index", &i, "choose clover, race or inplace")),
            }),
        };
        let inplace = if index == Some(IndexKind::InPlace) {
            let name = props.get_or("dmkv.latch", DEFAULT_LATCH);
            let scheme: SchemeSpec = name
                .trim()
                .parse()
                .map_err(|e: kvstore::SchemeError| bad("dmkv.latch", name, e))?;
            scheme.validate().map_err(|e| bad("dmkv.latch", name, e))?;
            let tuples = match props.get("dmkv.tuples") {
                None => objects_for(props)?,
                Some(t) => match t.trim().parse::<u64>() {
                    Ok(t) if t >= 1 => t,
                    _ => return Err(bad("dmkv.tuples", t, "need a count of at least 1")),
                },
            };
            Some((scheme, tuples))
        } else {
            if let Some(s) = props.get("dmkv.latch") {
                return Err(bad(
                    "dmkv.latch",
                    s,
                    "latch schemes belong to in-place tables: set dmkv.index=inplace",
                ));
            }
            None
        };
        let switch = match (
            props
                .get("dmkv.switch")
                .map(|s| s.trim().to_ascii_lowercase()),
            props
                .get("dmkv.switch.url")
                .map(str::trim)
                .filter(|u| !u.is_empty()),
        ) {
            (Some(s), Some(_)) if s == "false" => {
                return Err(bad(
                    "dmkv.switch",
                    &s,
                    "contradicts dmkv.switch.url; drop one of them",
                ));
            }
            (_, Some(url)) => SwitchUse::Via(url.to_owned()),
            (None, None) => SwitchUse::Auto,
            (Some(s), None) => match s.as_str() {
                "auto" => SwitchUse::Auto,
                "true" | "on" | "yes" => SwitchUse::On,
                "false" | "off" | "no" => SwitchUse::Off,
                _ => return Err(bad("dmkv.switch", &s, "choose auto, true or false")),
            },
        };
        if switch != SwitchUse::Off && switch != SwitchUse::Auto && transport != TransportKind::Udp
        {
            return Err(bad(
                "dmkv.switch",
                props.get("dmkv.switch").unwrap_or("true"),
                format!(
                    "the switch accelerator carries soft-RoCE (udp) queue pairs, not {transport}"
                ),
            ));
        }
        let switch_mode = match props.get("dmkv.switch.mode") {
            None => 0,
            Some(m) => {
                let names: Vec<String> = m
                    .split(',')
                    .map(|n| n.trim().to_owned())
                    .filter(|n| !n.is_empty())
                    .collect();
                accel_p4::admin::parse_functions(&names)
                    .map_err(|e| bad("dmkv.switch.mode", m, e))?
            }
        };
        let switch_busy_poll = match props.get("dmkv.switch.busypoll") {
            None => accel_p4::switch::DEFAULT_BUSY_POLL,
            Some(us) => match us.trim().parse::<u64>() {
                Ok(us) => std::time::Duration::from_micros(us),
                Err(_) => {
                    return Err(bad(
                        "dmkv.switch.busypoll",
                        us,
                        "need microseconds (0 sleeps at once)",
                    ));
                }
            },
        };
        let table = props
            .get("dmkv.table")
            .or_else(|| props.get("table"))
            .unwrap_or("usertable")
            .to_string();
        let bound = record_bound(props)?;
        let value_limit = match props.get("dmkv.valuelimit") {
            // An in-place tuple holds the largest value in place: no size classes to round to.
            None if inplace.is_some() => bound as u64,
            None => (bound as u64).next_power_of_two().max(1024),
            Some(v) => parse_bytes(v).ok_or_else(|| bad("dmkv.valuelimit", v, "not a size"))?,
        };
        let update = match props.get_or("dmkv.update", "merge").trim() {
            "merge" => UpdateMode::Merge,
            "overwrite" => UpdateMode::Overwrite,
            u => return Err(bad("dmkv.update", u, "choose merge or overwrite")),
        };
        let memnodes = match props.get("dmkv.memnodes") {
            None => 1,
            Some(n) => match n.trim().parse::<usize>() {
                Ok(n) if n >= 1 => n,
                _ => return Err(bad("dmkv.memnodes", n, "need a count of at least 1")),
            },
        };
        let capacity = match props.get("dmkv.capacity") {
            Some(c) => match parse_bytes(c) {
                Some(c) if c >= 1 << 20 => c,
                _ => return Err(bad("dmkv.capacity", c, "need a size of at least 1M")),
            },
            None => {
                let threads = props.get_u64("threadcount", 1).unwrap_or(1).max(1);
                let mut bytes = capacity_for(objects_for(props)?, bound, threads);
                if let Some((_, tuples)) = &inplace {
                    // The tuple area: header, key and value per tuple, latch and version
                    // words generously.
                    let tuple = (bound + kvstore::INPLACE_KEY_CAP + 256) as u64;
                    bytes += (tuples * tuple).div_ceil(1 << 20) << 20;
                }
                bytes.div_ceil(memnodes as u64)
            }
        };
        // Off by default: each driver thread has at most `concurrency` operations in flight
        // anyway; `adaptive` turns SMART's credit throttling on for ablations.
        let credits = match props.get_or("dmkv.credits", "off").trim() {
            "off" => Credits::Off,
            "adaptive" => Credits::Adaptive,
            n => match n.parse::<u32>() {
                Ok(n) if n >= 1 => Credits::Fixed(n),
                _ => return Err(bad("dmkv.credits", n, "choose off, adaptive or a count")),
            },
        };
        // On by default: with many updates in flight (Zipf 0.99, 32 loops per session)
        // they cut RACE's failed CASes per update by 46-67 % and its round trips by
        // 34-59 %, Clover's round trips by 18-45 % with 4 and 8 sessions; with few they
        // change little (docs/results/sync-bench-retries.md). `off` is for ablations.
        let on_off = |name: &str| match props.get_or(name, "on").trim() {
            "on" => Ok(true),
            "off" => Ok(false),
            v => Err(bad(name, v, "choose on or off")),
        };
        let backoff = on_off("dmkv.backoff")?;
        let admission = on_off("dmkv.admission")?;
        // On: a memory node's memory is registered (pinned) memory on an RDMA NIC; here
        // it is what keeps a load's first touches of fresh pages out of the data plane.
        let prefault = on_off("dmkv.prefault")?;
        let pmtu = match props.get("dmkv.pmtu") {
            // The embedded cluster is on loopback, whose MTU holds 4096-byte packets: a
            // 1 KB record then comes back in one packet instead of two.
            None if metadata.is_none() => {
                kvstore::Pmtu::new(EMBEDDED_PMTU).unwrap_or(kvstore::Pmtu::DEFAULT)
            }
            None => kvstore::Pmtu::DEFAULT,
            Some(v) => v
                .trim()
                .parse::<u32>()
                .map_err(|e| e.to_string())
                .and_then(kvstore::Pmtu::new)
                .map_err(|e| bad("dmkv.pmtu", v, e))?,
        };
        let replication = match props.get("dmkv.replication") {
            None => 1,
            Some(r) => match r.trim().parse::<u32>() {
                Ok(r @ 1..=3) => r,
                _ => return Err(bad("dmkv.replication", r, "need 1, 2 or 3 copies")),
            },
        };
        let security = match props.get("dmkv.grants").map(|g| g.trim()) {
            None | Some("off") => Security::Open,
            Some("on") => Security::Grants,
            Some("unscoped") => Security::UnscopedGrants,
            Some(g) => return Err(bad("dmkv.grants", g, "need off, on or unscoped")),
        };
        let access = match props.get("dmkv.access") {
            None => AccessMode::OneSided,
            Some(a) => a
                .trim()
                .parse::<AccessMode>()
                .map_err(|e| bad("dmkv.access", a, e))?,
        };
        let hybrid_k = match props.get("dmkv.hybrid.k") {
            None => kvstore::AccessOptions::default().hybrid_k,
            Some(k) => match k.trim().parse::<u32>() {
                Ok(k) if k >= 1 => k,
                _ => {
                    return Err(bad(
                        "dmkv.hybrid.k",
                        k,
                        "need a round-trip count of at least 1",
                    ));
                }
            },
        };
        let rpc_transport = match props.get("dmkv.rpc.transport") {
            None => kvstore::RpcTransport::Send,
            Some(t) => t
                .trim()
                .parse::<kvstore::RpcTransport>()
                .map_err(|e| bad("dmkv.rpc.transport", t, e))?,
        };
        let rpc_workers = match props.get("dmkv.rpc.workers") {
            None if access == AccessMode::OneSided => 0,
            None => 2,
            Some(w) => match w.trim().parse::<usize>() {
                Ok(w) if w <= 64 => w,
                _ => return Err(bad("dmkv.rpc.workers", w, "need 0 to 64 worker threads")),
            },
        };
        let race_groups = match props.get("dmkv.race.groups") {
            None => race_groups_for(
                props
                    .get_u64("recordcount", 0)
                    .map_err(|e| DbError::new(e.to_string()))?,
            ),
            Some(g) => match g.trim().parse::<u64>() {
                Ok(g) if (1..=1 << 24).contains(&g) => g,
                _ => {
                    return Err(bad(
                        "dmkv.race.groups",
                        g,
                        "need 1 to 16777216 bucket groups",
                    ));
                }
            },
        };
        Ok(DmkvConfig {
            access,
            hybrid_k,
            rpc_transport,
            rpc_workers,
            prefault,
            race_groups,
            security,
            replication,
            chain_directory: props.get_bool("dmkv.chaindirectory", true),
            pmtu,
            switch,
            switch_mode,
            switch_busy_poll,
            credits,
            backoff,
            admission,
            metadata,
            token,
            transport,
            index,
            inplace,
            table,
            value_limit,
            update,
            memnodes,
            capacity,
        })
    }

    /// Whether the embedded cluster about to start makes its memory resident:
    /// `dmkv.prefault`, unless the memory nodes' capacity is more than half of what the
    /// machine has available (then it says so and starts without).
    fn prefault_now(&self) -> bool {
        if !self.prefault {
            return false;
        }
        let bytes = self.capacity.saturating_mul(self.memnodes as u64);
        let available = mem_available();
        let fits = prefault_fits(bytes, available);
        if !fits {
            eprintln!(
                "dmkv: not making the memory nodes' {} MiB resident (dmkv.prefault): more \
                 than half of the {} MiB this machine has available",
                bytes >> 20,
                available.unwrap_or(0) >> 20
            );
        }
        fits
    }

    /// Connect to the configured cluster, or start the embedded one. With
    /// `dmkv.switch=true` on an embedded cluster use [`DmkvConfig::connect`], which
    /// also starts the switch.
    pub fn client(&self) -> Result<Client, DbError> {
        if self.switch == SwitchUse::On && self.metadata.is_none() {
            return Err(DbError::new(
                "dmkv: dmkv.switch=true starts an in-process switch: connect with                  DmkvConfig::connect"
                    .to_owned(),
            ));
        }
        self.client_via(None)
    }

    /// Connect (or start the embedded cluster), starting an in-process soft switch first
    /// when `dmkv.switch=true` on an embedded cluster. The switch must outlive the client.
    pub fn connect(&self) -> Result<(Client, Option<Arc<SwitchHandle>>), DbError> {
        if self.switch != SwitchUse::On || self.metadata.is_some() {
            return Ok((self.client_via(None)?, None));
        }
        let mut config = SwitchConfig::local();
        config.initial.mode = self.switch_mode;
        config.busy_poll = self.switch_busy_poll;
        let switch = SoftSwitch::start(config)
            .map_err(|e| DbError::new(format!("dmkv: cannot start the soft switch: {e}")))?;
        let client = self.client_via(Some(switch.admin_url()))?;
        Ok((client, Some(Arc::new(switch))))
    }

    fn client_via(&self, switch: Option<String>) -> Result<Client, DbError> {
        let accelerator = match (&self.switch, switch) {
            (_, Some(url)) => AcceleratorUse::Via(url),
            (SwitchUse::Off, None) => AcceleratorUse::Off,
            (SwitchUse::Via(url), None) => AcceleratorUse::Via(url.clone()),
            (SwitchUse::Auto | SwitchUse::On, None) => AcceleratorUse::Auto,
        };
        let mut options = ClientOptions::with_transport(self.transport)
            .with_token(self.token.clone())
            .with_name("ycsb")
            .with_clover(
                kvstore::CloverOptions::default().with_chain_directory(self.chain_directory),
            )
            .with_access(
                kvstore::AccessOptions::default()
                    .with_mode(self.access)
                    .with_hybrid_k(self.hybrid_k)
                    .with_transport(self.rpc_transport),
            )
            .with_race(kvstore::RaceOptions::default().with_subtable_groups(self.race_groups));
        let c = &mut options.connection;
        c.accelerator = accelerator;
        c.rc.pmtu = self.pmtu;
        c.worker.backoff.enabled = self.backoff;
        c.worker.admission.enabled = self.admission;
        match self.credits {
            Credits::Off => c.worker.credits.enabled = false,
            Credits::Adaptive => {}
            Credits::Fixed(n) => {
                c.worker.credits.adaptive = false;
                c.worker.credits.initial_cmax = n;
            }
        }
        match &self.metadata {
            Some(url) => Client::connect(url, options).map_err(|e| {
                DbError::new(format!(
                    "dmkv: cannot reach the cluster at {url} (dmkv.metadata) over {}: {e}",
                    self.transport
                ))
            }),
            None => testbed::embedded_client_with_rpc_workers(
                EmbeddedOptions {
                    memnodes: self.memnodes,
                    capacity: self.capacity,
                    transport: self.transport,
                    client: options,
                    prefault: self.prefault_now(),
                },
                self.security,
                self.rpc_workers,
            )
            .map_err(|e| {
                DbError::new(format!(
                    "dmkv: cannot start the embedded cluster ({} memory node(s) of {} MiB over \
                     {}): {e}",
                    self.memnodes,
                    self.capacity >> 20,
                    self.transport
                ))
            }),
        }
    }
}

/// The dmkv binding factory: holds the client (and with it an embedded cluster).
pub struct DmkvBinding {
    client: Client,
    /// The in-process switch of `dmkv.switch=true` (dropped after the client).
    switch: Option<Arc<SwitchHandle>>,
    config: DmkvConfig,
    index: IndexKind,
    name: String,
}

impl std::fmt::Debug for DmkvBinding {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DmkvBinding")
            .field("name", &self.name)
            .field("config", &self.config)
            .finish()
    }
}

impl DmkvBinding {
    /// Connect (or start the embedded cluster) and make sure the table exists.
    pub fn new(props: &Properties) -> Result<DmkvBinding, DbError> {
        let config = DmkvConfig::from_props(props)?;
        let (client, switch) = config.connect()?;
        let mut binding = DmkvBinding::with_client(client, config)?;
        binding.switch = switch;
        Ok(binding)
    }

    /// The in-process soft switch of `dmkv.switch=true`, if one was started.
    pub fn switch(&self) -> Option<&Arc<SwitchHandle>> {
        self.switch.as_ref()
    }

    /// Use `client` (e.g. one embedded cluster shared by several bindings) for `config`'s table.
    pub fn with_client(client: Client, config: DmkvConfig) -> Result<DmkvBinding, DbError> {
        let want = config.index.unwrap_or(IndexKind::Clover);
        let spec = match (&config.inplace, want) {
            (Some((scheme, tuples)), _) => {
                TableSpec::in_place(*scheme, config.value_limit, *tuples)
            }
            (None, IndexKind::Race) => TableSpec::race(config.value_limit),
            (None, IndexKind::Clover) => TableSpec::clover(config.value_limit),
            (None, IndexKind::InPlace) => {
                return Err(DbError::new(format!(
                    "dmkv: in-place table {} needs a latch scheme (dmkv.latch)",
                    config.table
                )));
            }
        };
        // An existing table is used as it is, so that a table credential (which may
        // not create tables) suffices; an absent one is created.
        let describe = || {
            client
                .table(&config.table)
                .map_err(|e| DbError::new(format!("dmkv: table {}: {e}", config.table)))
        };
        let table = match client.table(&config.table) {
            Ok(t) => t,
            Err(KvError::NoSuchTable(_)) => {
                match client.create_replicated_table(&config.table, &spec, config.replication) {
                    Ok(t) => t,
                    Err(KvError::AlreadyExists) => describe()?,
                    Err(e) => {
                        return Err(DbError::new(format!(
                            "dmkv: cannot create table {} ({}, value limit {}): {e}",
                            config.table,
                            want.as_str(),
                            config.value_limit
                        )));
                    }
                }
            }
            Err(e) => return Err(DbError::new(format!("dmkv: table {}: {e}", config.table))),
        };
        if let Some(i) = config.index
            && i != table.index()
        {
            return Err(DbError::new(format!(
                "dmkv: table {} exists with the {} index, not {} (dmkv.index); choose another \
                 dmkv.table",
                table.name,
                table.index().as_str(),
                i.as_str()
            )));
        }
        Ok(DmkvBinding {
            name: format!("dmkv-{}", table.index().as_str()),
            index: table.index(),
            client,
            switch: None,
            config,
        })
    }

    /// The client (and embedded cluster) this binding uses.
    pub fn client(&self) -> &Client {
        &self.client
    }

    pub fn config(&self) -> &DmkvConfig {
        &self.config
    }

    pub fn index(&self) -> IndexKind {
        self.index
    }

    /// One line on where the data lives, for the console.
    pub fn describe(&self) -> String {
        let c = &self.config;
        let cluster = match &c.metadata {
            Some(url) => format!("cluster at {url}"),
            None => format!(
                "embedded cluster (metadata service + {} memory node(s) of {} MiB on 127.0.0.1)",
                c.memnodes,
                c.capacity >> 20
            ),
        };
        format!(
            "dmkv: {cluster} over {}, table {} ({} index), partial updates by {}",
            c.transport,
            c.table,
            self.index.as_str(),
            match c.update {
                UpdateMode::Merge => "read-modify-write",
                UpdateMode::Overwrite => "overwrite",
            }
        )
    }

    /// Open a session and the table on this thread, as every driver thread will: fails with
    /// the client's error (e.g. `Unsupported` for an index this client does not serve).
    pub fn check(&self) -> Result<(), KvError> {
        let s = self.client.session()?;
        s.table(&self.config.table).map(|_| ())
    }
}

impl Binding for DmkvBinding {
    fn name(&self) -> &str {
        &self.name
    }

    fn supports_scan(&self) -> bool {
        false
    }

    fn create(&self, _props: &Properties, thread: usize) -> Result<Box<dyn Db>, DbError> {
        let session = self.client.session().map_err(|e| {
            DbError::new(format!("dmkv: thread {thread}: cannot open a session: {e}"))
        })?;
        let table = session.table(&self.config.table).map_err(|e| {
            DbError::new(format!("dmkv: cannot use table {}: {e}", self.config.table))
        })?;
        Ok(Box::new(DmkvDb {
            table,
            session,
            update: self.config.update,
            errors: Cell::new(0),
        }))
    }
}

struct DmkvDb {
    // Declared before the session it belongs to.
    table: Table,
    session: Session,
    update: UpdateMode,
    errors: Cell<u32>,
}

/// YCSB's status for a client error.
pub fn status_of(e: &KvError) -> Status {
    match e {
        KvError::NotFound => Status::NotFound,
        KvError::AlreadyExists => Status::Error,
        KvError::KeyTooLarge { .. }
        | KvError::ValueTooLarge { .. }
        | KvError::InvalidArgument(_) => Status::BadRequest,
        KvError::Unavailable(_) | KvError::Contended { .. } => Status::ServiceUnavailable,
        // A write that may or may not have taken effect: not "nothing happened".
        KvError::OutcomeUnknown(_) => Status::UnexpectedState,
        KvError::Unsupported(_) => Status::NotImplemented,
        KvError::NoSuchTable(_) | KvError::Corrupt(_) => Status::Error,
    }
}

impl DmkvDb {
    fn fail(&self, op: &str, key: &str, e: &dyn std::fmt::Display, status: Status) -> Status {
        let n = self.errors.get();
        if n < ERRORS_SHOWN {
            eprintln!("dmkv: {op} {key}: {e}");
            if n + 1 == ERRORS_SHOWN {
                eprintln!("dmkv: (further errors of this thread are only counted)");
            }
        }
        self.errors.set(n + 1);
        status
    }

    fn kv_fail(&self, op: &str, key: &str, e: KvError) -> Status {
        let status = status_of(&e);
        if status == Status::NotFound {
            return status;
        }
        self.fail(op, key, &e, status)
    }

    fn decode_fail(&self, op: &str, key: &str, e: CodecError) -> Status {
        self.fail(
            op,
            key,
            &format!("stored value is not a record: {e}"),
            Status::UnexpectedState,
        )
    }

    async fn get_record(&self, op: &str, key: &str) -> Result<Record, Status> {
        let bytes = self
            .table
            .get(key.as_bytes())
            .await
            .map_err(|e| self.kv_fail(op, key, e))?
            .ok_or(Status::NotFound)?;
        record_codec::decode(&bytes).map_err(|e| self.decode_fail(op, key, e))
    }

    fn done(&self, op: &str, key: &str, r: Result<(), KvError>) -> Status {
        match r {
            Ok(()) => Status::Ok,
            Err(e) => self.kv_fail(op, key, e),
        }
    }
}

impl Db for DmkvDb {
    fn read<'a>(
        &'a self,
        _table: &'a str,
        key: &'a str,
        fields: Option<&'a [String]>,
    ) -> LocalBoxFuture<'a, (Status, Record)> {
        Box::pin(async move {
            match self.get_record("read", key).await {
                Ok(rec) => (Status::Ok, record_codec::project(rec, fields)),
                Err(s) => (s, Vec::new()),
            }
        })
    }

    fn scan<'a>(
        &'a self,
        _table: &'a str,
        _start_key: &'a str,
        _count: usize,
        _fields: Option<&'a [String]>,
    ) -> LocalBoxFuture<'a, (Status, Vec<(String, Record)>)> {
        Box::pin(async { (Status::NotImplemented, Vec::new()) })
    }

    fn update<'a>(
        &'a self,
        _table: &'a str,
        key: &'a str,
        values: &'a Record,
    ) -> LocalBoxFuture<'a, Status> {
        Box::pin(async move {
            let value = match self.update {
                UpdateMode::Overwrite => record_codec::encode(values),
                UpdateMode::Merge => {
                    let mut rec = match self.get_record("update", key).await {
                        Ok(r) => r,
                        Err(s) => return s,
                    };
                    record_codec::merge(&mut rec, values);
                    record_codec::encode(&rec)
                }
            };
            let r = self.table.update(key.as_bytes(), &value).await;
            self.done("update", key, r)
        })
    }

    fn insert<'a>(
        &'a self,
        _table: &'a str,
        key: &'a str,
        values: &'a Record,
    ) -> LocalBoxFuture<'a, Status> {
        Box::pin(async move {
            let r = self
                .table
                .insert(key.as_bytes(), &record_codec::encode(values))
                .await;
            self.done("insert", key, r)
        })
    }

    fn delete<'a>(&'a self, _table: &'a str, key: &'a str) -> LocalBoxFuture<'a, Status> {
        Box::pin(async move {
            let r = self.table.delete(key.as_bytes()).await;
            self.done("delete", key, r)
        })
    }

    /// The loops run on the session's executor; the driver's own sleeps (throttling, insertion
    /// retries) get a session timer for their deadline, since that executor only re-polls when
    /// woken.
    fn run<'a>(&'a self, mut fut: LocalBoxFuture<'a, ()>) {
        let session = &self.session;
        let mut timer: Option<(Instant, Timer)> = None;
        session.block_on(std::future::poll_fn(move |cx| {
            let (poll, deadline) = executor::poll_with_deadline(fut.as_mut(), cx);
            if poll.is_ready() {
                return Poll::Ready(());
            }
            match deadline {
                None => timer = None,
                Some(d) => {
                    if timer.as_ref().is_none_or(|(t, _)| *t != d) {
                        let sleep = session.sleep(d.saturating_duration_since(Instant::now()));
                        timer = Some((d, Box::pin(sleep)));
                    }
                    if let Some((_, sleep)) = timer.as_mut()
                        && sleep.as_mut().poll(cx).is_ready()
                    {
                        timer = None;
                        cx.waker().wake_by_ref();
                    }
                }
            }
            Poll::Pending
        }))
    }

    fn counters(&self) -> Option<ProtocolCounters> {
        let s = self.session.stats();
        let t = self.session.transport_stats();
        Some(ProtocolCounters {
            round_trips: s.foreground.round_trips,
            rpcs: s.foreground.rpcs,
            bytes_sent: t.bytes_sent,
            bytes_received: t.bytes_received,
            retries: s.foreground.cas_failures
                + s.foreground.restarts
                + t.retransmissions
                + s.reconnects,
            store_operations: s.operations,
            multi_round_trip_operations: s.multi_round_trip_operations,
        })
    }

    fn cleanup(&mut self) -> Result<(), DbError> {
        // Finish background work (shortcuts) so the next phase starts from a quiet store.
        self.session.quiesce();
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_unknown_outcome_is_its_own_status() {
        let unknown = KvError::OutcomeUnknown(kvstore::Cause::new("may or may not"));
        assert_eq!(status_of(&unknown), Status::UnexpectedState);
        assert_eq!(
            status_of(&KvError::unavailable("may or may not")),
            Status::ServiceUnavailable
        );
    }

    #[test]
    fn sizes() {
        assert_eq!(parse_bytes("1048576"), Some(1 << 20));
        assert_eq!(parse_bytes("512M"), Some(512 << 20));
        assert_eq!(parse_bytes("2GiB"), Some(2 << 30));
        assert_eq!(parse_bytes("64 KB"), Some(64 << 10));
        assert_eq!(parse_bytes("64KB"), Some(64 << 10));
        assert_eq!(parse_bytes("x"), None);
        let p = Properties::new();
        assert_eq!(record_bound(&p).unwrap(), 1082);
        let c = DmkvConfig::from_props(&p).unwrap();
        assert_eq!(c.transport, TransportKind::Udp);
        assert_eq!(c.value_limit, 2048);
        assert_eq!(c.table, "usertable");
        assert_eq!(c.index, None);
        assert!(c.capacity >= 64 << 20 && c.capacity.is_multiple_of(1 << 20));
    }

    #[test]
    fn property_errors_are_clear() {
        let props = |kv: &[(&str, &str)]| {
            let mut p = Properties::new();
            for (k, v) in kv {
                p.set(*k, *v);
            }
            p
        };
        let errs =
            |kv: &[(&str, &str)]| DmkvConfig::from_props(&props(kv)).unwrap_err().to_string();
        let err = |k: &str, v: &str| errs(&[(k, v)]);
        assert!(err("dmkv.index", "btree").contains("choose clover, race or inplace"));
        assert!(err("dmkv.latch", "basic").contains("dmkv.index=inplace"));
        let inplace = [("dmkv.index", "inplace"), ("dmkv.latch", "versioning")];
        let e = errs(&[inplace[0], ("dmkv.latch", "sorcery")]);
        assert!(e.contains("dmkv.latch=sorcery"), "{e}");
        let e = errs(&[inplace[0], inplace[1], ("dmkv.tuples", "0")]);
        assert!(e.contains("at least 1"), "{e}");
        let c = DmkvConfig::from_props(&props(&[inplace[0], inplace[1], ("dmkv.tuples", "5000")]))
            .unwrap();
        assert_eq!(c.index, Some(IndexKind::InPlace));
        assert_eq!(
            c.inplace.as_ref().map(|(s, t)| (s.name(), *t)),
            Some(("versioning".into(), 5000))
        );
        assert_eq!(c.value_limit, 1082);
        assert!(err("dmkv.transport", "carrier-pigeon").contains("udp"));
        assert!(err("dmkv.update", "patch").contains("merge or overwrite"));
        assert!(err("dmkv.memnodes", "0").contains("at least 1"));
        assert!(err("dmkv.capacity", "12").contains("at least 1M"));
        assert!(err("dmkv.race.groups", "0").contains("bucket groups"));
        assert!(err("dmkv.race.groups", "lots").contains("bucket groups"));
        let c = DmkvConfig::from_props(&props(&[("dmkv.race.groups", "4096")])).unwrap();
        assert_eq!(c.race_groups, 4096);
        let c = DmkvConfig::from_props(&props(&[("recordcount", "100000")])).unwrap();
        assert_eq!(c.race_groups, 16384);
        assert_eq!(race_groups_for(0), 256);
        assert_eq!(race_groups_for(1000), 256);
        assert_eq!(race_groups_for(u64::MAX), 1 << 20);
        // Half full at most: 21 slots per group.
        for n in [3000u64, 20_000, 100_000, 1_000_000] {
            assert!(race_groups_for(n) * 21 >= 2 * n, "{n}");
        }
        assert!(err("dmkv.switch", "maybe").contains("auto, true or false"));
        assert!(err("dmkv.switch.mode", "teleport").contains("unknown function"));
        assert!(err("dmkv.switch.busypoll", "-1").contains("microseconds"));
        let e = errs(&[("dmkv.switch", "true"), ("dmkv.transport", "shm")]);
        assert!(e.contains("not shm"), "{e}");
        assert!(err("dmkv.credits", "many").contains("adaptive"));
        assert!(err("dmkv.backoff", "sometimes").contains("on or off"));
        assert!(err("dmkv.admission", "1").contains("dmkv.admission=1"));
        let c = DmkvConfig::from_props(&props(&[])).unwrap();
        assert!(c.backoff && c.admission, "on by default");
        let c = DmkvConfig::from_props(&props(&[
            ("dmkv.backoff", "off"),
            ("dmkv.admission", "off"),
        ]))
        .unwrap();
        assert!(!c.backoff && !c.admission);
        assert!(
            DmkvConfig::from_props(&props(&[])).unwrap().prefault,
            "on by default"
        );
        let c = DmkvConfig::from_props(&props(&[("dmkv.prefault", "off")])).unwrap();
        assert!(!c.prefault);
        assert!(err("dmkv.prefault", "yes").contains("on or off"));
        assert!(prefault_fits(1 << 30, None));
        assert!(prefault_fits(1 << 30, Some(2 << 30)));
        assert!(!prefault_fits((1 << 30) + 1, Some(2 << 30)));
        assert!(mem_available().is_some_and(|a| a > 0), "/proc/meminfo");
        assert!(err("dmkv.pmtu", "1500").contains("dmkv.pmtu=1500"));
        assert!(err("dmkv.pmtu", "big").contains("dmkv.pmtu=big"));
        assert!(err("dmkv.replication", "4").contains("1, 2 or 3"));
        assert!(err("dmkv.replication", "two").contains("dmkv.replication=two"));
        let p = props(&[("dmkv.replication", "2")]);
        assert_eq!(DmkvConfig::from_props(&p).unwrap().replication, 2);
        assert_eq!(DmkvConfig::from_props(&props(&[])).unwrap().replication, 1);
        assert_eq!(
            DmkvConfig::from_props(&props(&[])).unwrap().security,
            Security::Open
        );
        let p = props(&[("dmkv.grants", "unscoped")]);
        assert_eq!(
            DmkvConfig::from_props(&p).unwrap().security,
            Security::UnscopedGrants
        );
        assert!(err("dmkv.grants", "maybe").contains("off, on or unscoped"));
        let p = props(&[("dmkv.pmtu", "4096")]);
        assert_eq!(DmkvConfig::from_props(&p).unwrap().pmtu.bytes(), 4096);
        // Embedded (loopback): 4096 unless set; a cluster elsewhere: 1024.
        let p = props(&[]);
        assert_eq!(DmkvConfig::from_props(&p).unwrap().pmtu.bytes(), 4096);
        let p = props(&[("dmkv.pmtu", "1024")]);
        assert_eq!(DmkvConfig::from_props(&p).unwrap().pmtu.bytes(), 1024);
        let p = props(&[("dmkv.metadata", "http://127.0.0.1:1")]);
        assert_eq!(DmkvConfig::from_props(&p).unwrap().pmtu.bytes(), 1024);
    }

    #[test]
    fn secrets_come_from_a_file_never_from_a_property() {
        let mut p = Properties::new();
        p.set("dmkv.token", "s3cret");
        let e = DmkvConfig::from_props(&p).unwrap_err().to_string();
        assert!(
            e.contains("dmkv.credential_file") && e.contains("DMKV_CREDENTIAL"),
            "{e}"
        );
        let dir = std::env::temp_dir().join(format!("ycsb-cred-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join("cred");
        std::fs::write(&file, "dmkv_abc\n").unwrap();
        let mut p = Properties::new();
        p.set("dmkv.credential_file", file.to_str().unwrap());
        assert_eq!(
            DmkvConfig::from_props(&p).unwrap().token.as_deref(),
            Some("dmkv_abc")
        );
        let mut p = Properties::new();
        p.set(
            "dmkv.credential_file",
            dir.join("missing").to_str().unwrap(),
        );
        let e = DmkvConfig::from_props(&p).unwrap_err().to_string();
        assert!(
            e.contains("dmkv.credential_file") && e.contains("cannot read"),
            "{e}"
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
