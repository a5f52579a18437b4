//! In-place tables and their latch schemes (Jasny et al., TODS 2025, §3–§4, §6; docs/architecture.md).
//!
//! An in-place table keeps fixed-size tuples in a slot array allocated when the
//! table is created and overwrites them in place. How concurrent readers and
//! writers synchronise is a per-table choice, the *latch scheme*; every scheme
//! implements [`SyncScheme`] and lives in its own file:
//!
//! | scheme (catalog name) | file | read | write (exclusive latch) |
//! |---|---|---|---|
//! | `pessimistic-…` | [`pessimistic`] | shared latch (FAA) or exclusive (CAS) | CAS latch, WRITE, unlatch |
//! | `versioning` | [`versioning`] | READ version, READ data, READ version | CAS, WRITE (+unlatch) |
//! | `crc`, `crc-consistent` | [`crc`] | one READ, CRC-64 check (+ validation READ) | CAS, WRITE (+unlatch) |
//! | `farm`, `farm-consistent` | [`farm`] | one READ, per-line versions (+ validation READ) | CAS, WRITE (+unlatch) |
//! | `bookend-unsafe-demo` | [`bookend`] | one READ, head = tail (**broken**) | CAS, WRITE (+unlatch) |
//! | `switch-optimistic` | [`switch_optimistic`] | one READ stamped by the switch | CAS answered by the switch, READ, WRITE (its ACK unlatches) |
//!
//! Round trips per operation (awaited doorbells, uncontended):
//!
//! | scheme | read | write |
//! |---|---|---|
//! | pessimistic basic | 3 | 4 |
//! | pessimistic speculative read | 2 | 3 |
//! | pessimistic write combining | 2 | 2 |
//! | pessimistic asynchronous unlatch | 1 | 1 |
//! | pessimistic exclusive-only + write-unlatch | as its level | 2 (1 with async) |
//! | versioning | 3 | 2 |
//! | crc / farm (latch semantics: validation READ) | 2 | 2 |
//! | crc-consistent / farm-consistent (§6 relaxed) | 1 | 2 |
//! | bookend-unsafe-demo | 1 | 2 |
//! | switch-optimistic (needs the accelerator in `opt_latch` mode) | 1 | 2.5 (latch ½) |
//!
//! # Memory semantics relied on
//!
//! The schemes use only what docs/architecture.md (memory semantics) and RDMA over PCIe guarantee: 8-byte
//! atomics are atomic; every aligned 64-byte line is read and written atomically;
//! a WRITE lands its lines in ascending address order; a multi-line READ observes
//! its lines in *any* order; verbs posted on one queue pair execute in order, and
//! an atomic is executed before later verbs of the same queue pair (speculative
//! read relies on that); two READs are ordered only if the second is posted after
//! the first completed (versioning's sequential READs).
//!
//! # Latch words
//!
//! Every latch is one 8-byte word changed by CAS/FAA (and by the last bytes of a
//! WRITE only under write-unlatch): bit 0 is the exclusive bit, bits 1–47 the
//! holder's 47-bit owner token (a client id and a per-acquisition sequence
//! number, so every acquisition stores a new word), bits 48–63 the
//! shared-reader count (FAA adds 2^48). See [`latch`].
//!
//! # Leases: a latch never leaks
//!
//! A client can die while holding a latch. A latch word whose exclusive holder
//! (or, for reader counts, whose whole value) stays unchanged for longer than the
//! *lease* ([`IoOptions::lease`]; for tables, `ClientOptions::race_split_timeout`)
//! is taken to belong to a dead client and is broken by the next client that
//! needs it, with a CAS from exactly the value it watched (so a live holder that
//! changed the word in the meantime is never broken). "Unchanged" must mean
//! "held by one acquisition": a client that releases and re-acquires a latch
//! between two polls of a waiter (its next operation runs right behind its
//! asynchronous unlatch on the same queue pair, or another of its tasks takes
//! over) stores a new owner token, so the waiter's lease restarts (with one
//! token per client, a hot latch passed among one session's tasks would look
//! unchanged to a waiter that never sees it free, and be broken while held).
//! A session also keeps driving its queue pairs until its asynchronous unlatches
//! complete ([`crate::Session::quiesce`]): a session dropped with one in flight
//! stops retransmitting it, so its write is lost although the operation
//! returned, and waiters break the latch after the lease. This assumes a live client
//! never holds a latch that long: operations hold a latch for one or two round
//! trips, and a verb that is not acknowledged within the transport's retry limit
//! fails.
//!
//! Breaking restores liveness, and never hands out what a dead writer left half
//! done: the broken word is marked *torn* (see [`latch`]), and until a writer has
//! written the whole tuple again, readers report `Corrupt` — at once for the
//! pessimistic schemes and versioning, which cannot check the bytes themselves;
//! CRC-64 and FaRM check them and serve the tuple if it is whole. A broken reader
//! count gets a new generation, so the late release of a live reader that held it
//! past the lease changes nothing (readers release by CAS, not by a blind FAA).
//! A reader whose count was broken while it read (synchronous levels) reads again.
//!
//! # Tables
//!
//! [`table`] maps keys to slots (open addressing with linear probing, keys stored
//! in the tuple, tombstones keep their slot) and serves the [`crate::Table`] API.
#![allow(clippy::manual_async_fn)]

pub(crate) mod bookend;
pub(crate) mod crc;
pub(crate) mod farm;
mod io;
pub mod latch;
mod optimistic;
pub(crate) mod pessimistic;
pub(crate) mod rpc;
pub(crate) mod switch_optimistic;
pub(crate) mod table;
pub(crate) mod versioning;

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::rc::Rc;

pub use io::{Area, AsyncStats, IoOptions, SlotIo, UnlatchWaiter};

/// Longest key an in-place table stores.
pub const KEY_CAP: usize = 64;
/// Bytes of a tuple's payload before its key: state, key length, value length.
pub(crate) const TUPLE_HEADER: usize = 8;

use crate::error::KvError;
use crate::stats::OpStats;

/// A boxed, non-`Send` future (schemes run on one session's worker).
pub type LocalFuture<'a, T> = Pin<Box<dyn Future<Output = T> + 'a>>;

/// A writer's decision, taken under the exclusive latch after seeing the current
/// payload: `Some(new payload)` to write it, `None` to leave the tuple unchanged.
pub type Decide<'a> = &'a mut dyn FnMut(&[u8]) -> Option<Vec<u8>>;

/// A latch scheme: how one tuple is read consistently and written exclusively.
///
/// Payloads are what callers see: `layout().payload` contiguous bytes, whatever
/// the scheme interleaves with them in memory. A never-written tuple reads as
/// zeros.
pub trait SyncScheme {
    /// What this scheme is (and its canonical catalog name).
    fn spec(&self) -> &SchemeSpec;

    /// Where tuples, payloads and latches lie.
    fn layout(&self) -> &Layout;

    /// Read slot `slot`'s payload consistently, charging round trips to `stats`.
    fn read<'a>(
        &'a self,
        io: &'a SlotIo,
        slot: u64,
        stats: &'a mut OpStats,
    ) -> LocalFuture<'a, Result<Vec<u8>, KvError>>;

    /// Latch slot `slot` exclusively, show `decide` its current payload, write what
    /// it returns (if anything) and unlatch. Returns whether a payload was written.
    fn write<'a>(
        &'a self,
        io: &'a SlotIo,
        slot: u64,
        decide: Decide<'a>,
        stats: &'a mut OpStats,
    ) -> LocalFuture<'a, Result<bool, KvError>>;

    /// How the memory node's RPC workers latch this scheme's tuples, when they can
    /// run its protocol ([`rpc`]); `None` (the default): the scheme is one-sided only.
    fn node_latch(&self) -> Option<NodeLatch> {
        None
    }
}

/// How the memory node's RPC workers latch a scheme's tuples: what an in-place RPC
/// needs to know of a scheme the node can execute ([`SyncScheme::node_latch`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NodeLatch {
    /// Readers share the latch (FAA on the reader count); otherwise they take it
    /// exclusively by CAS (the exclusive-only latch).
    pub shared_readers: bool,
    /// Where the payload starts in the tuple.
    pub payload_at: u64,
}

/// Optimisation level of the pessimistic latch (Jasny et al., TODS 2025, §3.3, Fig. 7).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Level {
    /// Every verb synchronous.
    Basic,
    /// Latch and READ in one batch (the atomic is executed before the READ).
    SpeculativeRead,
    /// Speculative read, and WRITE plus unlatch in one batch.
    WriteCombining,
    /// Write combining, and the next operation starts before the unlatch completes.
    AsyncUnlatch,
}

impl Level {
    /// Every level, lowest first.
    pub const ALL: [Level; 4] = [
        Level::Basic,
        Level::SpeculativeRead,
        Level::WriteCombining,
        Level::AsyncUnlatch,
    ];

    /// Name token.
    pub fn token(self) -> &'static str {
        match self {
            Level::Basic => "basic",
            Level::SpeculativeRead => "spec",
            Level::WriteCombining => "wc",
            Level::AsyncUnlatch => "async",
        }
    }
}

/// Who may share the pessimistic latch.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Readers {
    /// Reader/writer latch: readers share it by FAA on the reader count.
    Shared,
    /// Exclusive-only latch: readers take it exclusively by CAS too (RCC-NOWAIT).
    Exclusive,
}

/// Where a pessimistic latch lies relative to its tuple (Jasny et al., TODS 2025, §3.2, Fig. 6).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Placement {
    /// In the tuple (its first word; its last word under write-unlatch); tuples are
    /// line-aligned and back to back, so latches of 4 KiB tuples share NIC lock slots.
    Embedded,
    /// In the tuple, with 8 bytes of padding between tuples so latch addresses
    /// differ in their low 12 bits.
    Padded,
    /// In a separate array of back-to-back 8-byte latches.
    Separate,
}

impl Placement {
    /// Name token.
    pub fn token(self) -> &'static str {
        match self {
            Placement::Embedded => "embedded",
            Placement::Padded => "padded",
            Placement::Separate => "separate",
        }
    }
}

/// How an optimistic writer releases its exclusive latch.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Unlatch {
    /// By the last bytes of the data WRITE (the latch is the tuple's last word, §4.5).
    Write,
    /// By a CAS posted in the same batch as the WRITE.
    Cas,
}

/// Acknowledges that the bookend scheme returns torn values.
///
/// Bookend versioning (head and tail versions read with one READ, Jasny et al., TODS 2025
/// Fig. 1a) assumes a READ observes lines in ascending order. RDMA gives no such
/// guarantee (PCIe may fetch the lines of one READ in any order, §4.2), so a READ
/// can see matching head and tail versions around lines of another version: an
/// undetected torn read. It exists only to demonstrate that.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct UnsafeDemo(());

impl UnsafeDemo {
    /// Opt in to a scheme that is known to return torn values.
    pub fn acknowledge_torn_reads() -> UnsafeDemo {
        UnsafeDemo(())
    }
}

/// A latch scheme and its options; parsed from and printed as the catalog name.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum SchemeSpec {
    /// Pessimistic latch ([`pessimistic`]).
    Pessimistic {
        /// Shared (FAA) or exclusive-only readers.
        readers: Readers,
        /// Optimisation level.
        level: Level,
        /// Writers unlatch with the last bytes of the data WRITE (exclusive-only only).
        write_unlatch: bool,
        /// Latch placement.
        placement: Placement,
    },
    /// Versioning with sequential READs ([`versioning`]).
    Versioning {
        /// Writer unlatch.
        unlatch: Unlatch,
    },
    /// CRC-64 checksum ([`crc`]).
    Crc {
        /// Validation READ after the data READ (latch semantics); `false` is the
        /// relaxed consistent read of §6.
        validate: bool,
        /// Writer unlatch.
        unlatch: Unlatch,
    },
    /// FaRM per-cache-line versions ([`farm`]).
    Farm {
        /// Validation READ (latch semantics); `false`: consistent read (§6).
        validate: bool,
        /// Writer unlatch.
        unlatch: Unlatch,
    },
    /// Bookend versioning: broken, demo only ([`bookend`]).
    Bookend(UnsafeDemo),
    /// Switch-assisted optimistic latching ([`switch_optimistic`]): needs the table's
    /// queue pairs to go through the accelerator in `opt_latch` mode.
    SwitchOptimistic,
}

/// Why a scheme name or combination is refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SchemeError {
    /// Not a known scheme or option.
    #[error(
        "unknown latch scheme {0:?}: use pessimistic[-rw|-x][-basic|-spec|-wc|-async][-wu]\
         [-embedded|-padded|-separate], versioning, crc, crc-consistent, farm, \
         farm-consistent (optimistic ones take -cas-unlatch), switch-optimistic (through \
         the accelerator), or bookend-unsafe-demo"
    )]
    Unknown(String),
    /// Write-unlatch asked for together with shared (FAA) readers.
    #[error(
        "write-unlatch cannot be combined with shared FAA readers: the NIC may apply a \
         reader's FAA to a stale copy of the latch word that still shows the writer's \
         exclusive bit and store it back over the unlatching WRITE, losing the unlatch \
         (Jasny et al., TODS 2025, §3.3); use the exclusive-only latch (-x) with write-unlatch"
    )]
    WriteUnlatchWithSharedReaders,
    /// Write-unlatch asked for with the latch outside the tuple.
    #[error(
        "write-unlatch needs the latch at the end of its tuple: it cannot be combined with \
         a separate latch array"
    )]
    WriteUnlatchNeedsEmbeddedLatch,
    /// Bookend versioning asked for without the explicit demo flag.
    #[error(
        "bookend versioning is unsafe: one READ may observe the head and tail lines before \
         a concurrent WRITE and the lines between after it, so torn values pass its check \
         (Jasny et al., TODS 2025, §1, §4.2); it exists only as bookend-unsafe-demo"
    )]
    BookendIsUnsafe,
}

impl From<SchemeError> for KvError {
    fn from(e: SchemeError) -> KvError {
        KvError::InvalidArgument(e.to_string())
    }
}

impl SchemeSpec {
    /// The pessimistic reader/writer latch with every optimisation, embedded.
    pub const PESSIMISTIC: SchemeSpec = SchemeSpec::Pessimistic {
        readers: Readers::Shared,
        level: Level::AsyncUnlatch,
        write_unlatch: false,
        placement: Placement::Embedded,
    };

    /// Checks combinations the memory semantics forbid.
    pub fn validate(&self) -> Result<(), SchemeError> {
        if let SchemeSpec::Pessimistic {
            readers,
            write_unlatch: true,
            placement,
            ..
        } = self
        {
            if *readers == Readers::Shared {
                return Err(SchemeError::WriteUnlatchWithSharedReaders);
            }
            if *placement == Placement::Separate {
                return Err(SchemeError::WriteUnlatchNeedsEmbeddedLatch);
            }
        }
        Ok(())
    }

    /// The canonical name (what [`str::parse`] accepts back).
    pub fn name(&self) -> String {
        self.to_string()
    }

    /// Every correct scheme worth comparing, plus (if `with_bookend`) the broken one.
    pub fn catalog(with_bookend: bool) -> Vec<SchemeSpec> {
        let mut v = vec![
            SchemeSpec::PESSIMISTIC,
            SchemeSpec::Pessimistic {
                readers: Readers::Exclusive,
                level: Level::AsyncUnlatch,
                write_unlatch: true,
                placement: Placement::Embedded,
            },
            SchemeSpec::Versioning {
                unlatch: Unlatch::Write,
            },
            SchemeSpec::Crc {
                validate: true,
                unlatch: Unlatch::Write,
            },
            SchemeSpec::Crc {
                validate: false,
                unlatch: Unlatch::Write,
            },
            SchemeSpec::Farm {
                validate: true,
                unlatch: Unlatch::Write,
            },
            SchemeSpec::Farm {
                validate: false,
                unlatch: Unlatch::Write,
            },
        ];
        if with_bookend {
            v.push(SchemeSpec::Bookend(UnsafeDemo::acknowledge_torn_reads()));
        }
        v
    }

    /// Whether this scheme is known to return torn values.
    pub fn is_unsafe(&self) -> bool {
        matches!(self, SchemeSpec::Bookend(_))
    }

    /// Build the scheme for payloads of `payload` bytes.
    pub fn build(&self, payload: usize) -> Result<Rc<dyn SyncScheme>, SchemeError> {
        self.validate()?;
        Ok(match *self {
            SchemeSpec::Pessimistic { .. } => {
                Rc::new(pessimistic::Pessimistic::new(*self, payload)?)
            }
            SchemeSpec::Versioning { .. } => Rc::new(versioning::Versioning::new(*self, payload)),
            SchemeSpec::Crc { .. } => Rc::new(crc::Crc::new(*self, payload)),
            SchemeSpec::Farm { .. } => Rc::new(farm::Farm::new(*self, payload)),
            SchemeSpec::Bookend(_) => Rc::new(bookend::Bookend::new(*self, payload)),
            SchemeSpec::SwitchOptimistic => {
                Rc::new(switch_optimistic::SwitchOptimistic::new(*self, payload))
            }
        })
    }
}

impl fmt::Display for SchemeSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let unlatch = |u: &Unlatch| match u {
            Unlatch::Write => "",
            Unlatch::Cas => "-cas-unlatch",
        };
        match self {
            SchemeSpec::Pessimistic {
                readers,
                level,
                write_unlatch,
                placement,
            } => write!(
                f,
                "pessimistic-{}-{}{}-{}",
                match readers {
                    Readers::Shared => "rw",
                    Readers::Exclusive => "x",
                },
                level.token(),
                if *write_unlatch { "-wu" } else { "" },
                placement.token()
            ),
            SchemeSpec::Versioning { unlatch: u } => write!(f, "versioning{}", unlatch(u)),
            SchemeSpec::Crc {
                validate,
                unlatch: u,
            } => write!(
                f,
                "crc{}{}",
                if *validate { "" } else { "-consistent" },
                unlatch(u)
            ),
            SchemeSpec::Farm {
                validate,
                unlatch: u,
            } => write!(
                f,
                "farm{}{}",
                if *validate { "" } else { "-consistent" },
                unlatch(u)
            ),
            SchemeSpec::Bookend(_) => f.write_str("bookend-unsafe-demo"),
            SchemeSpec::SwitchOptimistic => f.write_str("switch-optimistic"),
        }
    }
}

impl std::str::FromStr for SchemeSpec {
    type Err = SchemeError;

    /// Parses a scheme name: a family followed by `-`-separated options in any order.
    fn from_str(s: &str) -> Result<SchemeSpec, SchemeError> {
        let unknown = || SchemeError::Unknown(s.to_owned());
        let lower = s.trim().to_ascii_lowercase();
        let mut tokens = lower.split('-');
        let family = tokens.next().ok_or_else(unknown)?;
        let rest: Vec<&str> = tokens.collect();
        let spec = match family {
            "pessimistic" => {
                let (mut readers, mut level, mut wu, mut placement) = (
                    Readers::Shared,
                    Level::AsyncUnlatch,
                    false,
                    Placement::Embedded,
                );
                for t in &rest {
                    match *t {
                        "rw" => readers = Readers::Shared,
                        "x" => readers = Readers::Exclusive,
                        "wu" => wu = true,
                        t => {
                            if let Some(l) = Level::ALL.iter().find(|l| l.token() == t) {
                                level = *l;
                            } else if let Some(p) =
                                [Placement::Embedded, Placement::Padded, Placement::Separate]
                                    .into_iter()
                                    .find(|p| p.token() == t)
                            {
                                placement = p;
                            } else {
                                return Err(unknown());
                            }
                        }
                    }
                }
                SchemeSpec::Pessimistic {
                    readers,
                    level,
                    write_unlatch: wu,
                    placement,
                }
            }
            "versioning" | "crc" | "farm" => {
                let (mut validate, mut unlatch) = (true, Unlatch::Write);
                let mut i = 0;
                while i < rest.len() {
                    match (rest[i], rest.get(i + 1)) {
                        ("consistent", _) if family != "versioning" => validate = false,
                        ("cas", Some(&"unlatch")) => {
                            unlatch = Unlatch::Cas;
                            i += 1;
                        }
                        _ => return Err(unknown()),
                    }
                    i += 1;
                }
                match family {
                    "versioning" => SchemeSpec::Versioning { unlatch },
                    "crc" => SchemeSpec::Crc { validate, unlatch },
                    _ => SchemeSpec::Farm { validate, unlatch },
                }
            }
            "switch" if rest == ["optimistic"] => SchemeSpec::SwitchOptimistic,
            "bookend" => {
                if rest == ["unsafe", "demo"] {
                    SchemeSpec::Bookend(UnsafeDemo::acknowledge_torn_reads())
                } else {
                    return Err(SchemeError::BookendIsUnsafe);
                }
            }
            _ => return Err(unknown()),
        };
        spec.validate()?;
        Ok(spec)
    }
}

/// Where a scheme's latch word lies.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LatchAt {
    /// At this byte offset within the tuple.
    InTuple(u64),
    /// In the area's latch array (slot `i` at `8 i`).
    Array,
}

/// Geometry of a scheme's tuples.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Layout {
    /// Payload bytes callers see.
    pub payload: usize,
    /// Bytes of one tuple in memory (a multiple of 64; tuples start line-aligned
    /// unless padded).
    pub tuple: u64,
    /// Distance between consecutive tuples.
    pub stride: u64,
    /// Where the latch word is.
    pub latch: LatchAt,
}

impl Layout {
    /// Bytes an area of `slots` tuples needs (latch array first, if any, padded to a line).
    pub fn area_bytes(&self, slots: u64) -> u64 {
        self.latch_array_bytes(slots) + slots * self.stride
    }

    /// Bytes of the separate latch array for `slots` tuples (0 if latches are embedded).
    pub fn latch_array_bytes(&self, slots: u64) -> u64 {
        match self.latch {
            LatchAt::Array => (8 * slots).div_ceil(64) * 64,
            LatchAt::InTuple(_) => 0,
        }
    }

    /// How many tuples fit in `bytes`.
    pub fn slots_in(&self, bytes: u64) -> u64 {
        let per = self.stride
            + match self.latch {
                LatchAt::Array => 8,
                LatchAt::InTuple(_) => 0,
            };
        let mut n = bytes / per.max(1);
        while n > 0 && self.area_bytes(n) > bytes {
            n -= 1;
        }
        n
    }
}

/// Rounds `n` up to a multiple of 64.
pub(crate) fn lines(n: u64) -> u64 {
    n.div_ceil(64) * 64
}

/// Little-endian `u64` at `at` in `b` (0 when out of range).
pub(crate) fn word(b: &[u8], at: usize) -> u64 {
    b.get(at..at + 8)
        .and_then(|s| <[u8; 8]>::try_from(s).ok())
        .map_or(0, u64::from_le_bytes)
}

/// Stores `v` little-endian at `at` in `b` (ignored when out of range).
pub(crate) fn put_word(b: &mut [u8], at: usize, v: u64) {
    if let Some(s) = b.get_mut(at..at + 8) {
        s.copy_from_slice(&v.to_le_bytes());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip() {
        for s in SchemeSpec::catalog(true) {
            assert_eq!(s.name().parse::<SchemeSpec>().unwrap(), s, "{s}");
        }
        for name in [
            "pessimistic-rw-basic-embedded",
            "pessimistic-x-spec-padded",
            "pessimistic-x-wc-wu-embedded",
            "pessimistic-rw-async-separate",
            "versioning-cas-unlatch",
            "crc-consistent-cas-unlatch",
            "farm",
            "switch-optimistic",
        ] {
            let s: SchemeSpec = name.parse().unwrap();
            assert_eq!(s.name(), name);
            assert!(s.name().len() <= 64);
        }
        assert_eq!(
            "pessimistic".parse::<SchemeSpec>().unwrap(),
            SchemeSpec::PESSIMISTIC
        );
    }

    #[test]
    fn refusals() {
        assert_eq!(
            "pessimistic-rw-wu".parse::<SchemeSpec>(),
            Err(SchemeError::WriteUnlatchWithSharedReaders)
        );
        assert_eq!(
            "pessimistic-wu".parse::<SchemeSpec>(),
            Err(SchemeError::WriteUnlatchWithSharedReaders)
        );
        assert_eq!(
            "pessimistic-x-wu-separate".parse::<SchemeSpec>(),
            Err(SchemeError::WriteUnlatchNeedsEmbeddedLatch)
        );
        assert_eq!(
            "bookend".parse::<SchemeSpec>(),
            Err(SchemeError::BookendIsUnsafe)
        );
        assert!(matches!(
            "versioning-consistent".parse::<SchemeSpec>(),
            Err(SchemeError::Unknown(_))
        ));
        assert!(matches!(
            "pessimistic-fast".parse::<SchemeSpec>(),
            Err(SchemeError::Unknown(_))
        ));
        let direct = SchemeSpec::Pessimistic {
            readers: Readers::Shared,
            level: Level::Basic,
            write_unlatch: true,
            placement: Placement::Embedded,
        };
        assert!(direct.build(64).is_err());
    }
}
