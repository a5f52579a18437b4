//! In-place tables: keys to slots, served through [`crate::Table`].
//!
//! A table is one array of fixed-size tuples allocated when the table is created
//! and never resized. Each tuple's payload is
//!
//! ```text
//! state u8 (0 empty, 1 live, 2 deleted) | 0 u8 | key length u16 | value length u32 |
//! key (KEY_CAP bytes) | value (value_limit bytes)
//! ```
//!
//! A key hashes (xxHash64 seeded with the table id) to a home slot and lives in
//! the first slot of its probe sequence `home, home+1, …` (at most [`MAX_PROBE`])
//! that is empty or holds it. A slot that holds a key holds it for good (a delete
//! leaves a tombstone the key can revive), so the slots before a key's slot hold
//! other keys forever and one consistent read of a slot decides: *empty* means the
//! key is absent, *other key* means probe on. Writers read first (without
//! latching slots of other keys), then latch the candidate slot exclusively and
//! decide again on what they see under the latch.
//!
//! Memory: in-place tables are a table kind of the catalog (`index: inplace`).
//! `Client::create_table` with `TableSpec::InPlace` sends the scheme, the capacity (tuples), the tuple stride of
//! the scheme's layout and the latch placement; the service checks the scheme,
//! allocates table-owned memory for the tuple area (and, for a separate latch
//! array, a second piece on the same memory node) and describes where they are
//! (`TableDescription::inplace`). The tuple area starts with a 64-byte header
//! whose first word the first user CASes from zero to a fingerprint of the layout
//! (scheme, payload, slot count); a client with another layout refuses the table.
//! Capacity is fixed, and a key whose probe sequence is full gets `Unavailable`.
//!
//! The service zeroes the tuple area and latch array on their memory node before it
//! hands the table out (`metadata::scrub`), so the header word, every slot and every
//! latch start at zero even on memory a dropped table used.
//!
//! Latch leases last `ClientOptions::race_split_timeout` (the option for "how long
//! may a lock stay unchanged before others take over").

use std::cell::{Cell, RefCell};
use std::rc::Rc;
use std::time::Duration;

use dmkv_api::metadata::{InPlaceInfo, TableDescription};
use verbs::wr::{RemoteAddr, WorkRequest};

use super::io::atomic;
use super::rpc::{self, Answer, NodeTarget};
use super::{
    Area, IoOptions, KEY_CAP, LatchAt, SchemeSpec, SlotIo, SyncScheme, TUPLE_HEADER as HEADER,
    UnlatchWaiter,
};
use crate::access_mode::AccessMode;
use crate::error::KvError;
use crate::index::WriteKind;
use crate::index::{LocalFuture, SessionIndex};
use crate::replication::mirrors::primary_and_mirrors;
use crate::session::SessionCore;
use crate::stats::OpStats;
use crate::xxh64::xxh64;

/// Slots a key may be placed away from its home slot.
pub(crate) const MAX_PROBE: u64 = 32;
/// Bytes before tuple 0 in the tuple area (the layout fingerprint's line).
const HEADER_LINE: u64 = dmkv_api::layout::INPLACE_HEADER_BYTES;

/// The asynchronous unlatches of the in-place table handles one session opened
/// (the in-place tables' state in a session): `Session::quiesce` waits for them.
#[derive(Default)]
pub(crate) struct InPlaceSession {
    unlatches: RefCell<Vec<UnlatchWaiter>>,
}

impl InPlaceSession {
    /// Remember `waiter` (forgetting finished ones).
    fn track(&self, waiter: UnlatchWaiter) {
        let mut all = self.unlatches.borrow_mut();
        all.retain(|w| !w.is_done());
        all.push(waiter);
    }
}

impl SessionIndex for InPlaceSession {
    fn quiesce(&self) -> LocalFuture<'_> {
        let waiters = self.unlatches.borrow().clone();
        Box::pin(async move {
            for w in &waiters {
                w.drain().await;
            }
        })
    }
}

/// One in-place table as one session's table handle sees it.
pub(crate) struct InPlaceTable {
    scheme: Rc<dyn SyncScheme>,
    io: SlotIo,
    value_cap: usize,
    seed: u64,
    header: RemoteAddr,
    fingerprint: u64,
    formatted: Cell<bool>,
    name: String,
    /// Where the memory node's workers can run this table's operations: a table of
    /// one copy whose scheme the node executes ([`rpc`]).
    node: Option<NodeTarget>,
}

impl std::fmt::Debug for InPlaceTable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("InPlaceTable")
            .field("scheme", &self.scheme.spec().name())
            .field("slots", &self.io.area().slots)
            .finish()
    }
}

/// What a tuple holds.
enum View<'a> {
    Empty,
    Live(&'a [u8], &'a [u8]),
    Dead(&'a [u8]),
}

impl InPlaceTable {
    /// The handle of in-place table `info`, whose in-place part is `ip`.
    pub(crate) fn open(
        core: &SessionCore,
        info: &TableDescription,
        ip: &InPlaceInfo,
    ) -> Result<InPlaceTable, KvError> {
        let spec: SchemeSpec = ip.scheme.parse()?;
        if spec == SchemeSpec::SwitchOptimistic && crate::replication::copies::is_replicated(info) {
            // The switch holds one version per tuple and knows nothing of the copies.
            return Err(KvError::Unsupported(format!(
                "table {:?} keeps {} copies; switch-optimistic latching serves tables of \
                 one copy only",
                info.name, info.replication
            )));
        }
        let value_cap = usize::try_from(info.value_limit).unwrap_or(usize::MAX);
        let payload = HEADER + KEY_CAP + value_cap;
        let built = spec.build(payload)?;
        let dir = ip.area.as_ref().ok_or_else(|| {
            KvError::unavailable(format!(
                "the memory of in-place table {} is gone (its memory node left)",
                info.name
            ))
        })?;
        let layout = built.layout();
        if layout.stride != ip.tuple_bytes {
            return Err(KvError::corrupt(format!(
                "in-place table {} has tuples {} bytes apart, but scheme {} lays out values of \
                 {value_cap} bytes {} bytes apart",
                info.name,
                ip.tuple_bytes,
                spec.name(),
                layout.stride
            )));
        }
        // The acting primary's copy (the area's own memnode unless a failure
        // promoted a backup) and, for a replicated table, the other copies.
        let home = core.links.ptr_of(dir.memnode_id, dir.va)?;
        let (primary, mirrors) = primary_and_mirrors(&core.links, info, home, dir.len)?;
        let link = core
            .links
            .get(primary.memnode)
            .ok_or_else(|| core.links.missing(primary.memnode))?;
        let base = primary.addr;
        // Every piece of the table's memory sits at the same offset on each copy.
        let shift = base.va.wrapping_sub(dir.va);
        let fit = dir.len.saturating_sub(HEADER_LINE) / layout.stride.max(1);
        let slots = ip.capacity.min(fit);
        let latches = match (layout.latch, &ip.latches) {
            (LatchAt::Array, Some(l)) if l.memnode_id == dir.memnode_id && l.len >= 8 * slots => {
                Some(RemoteAddr::new(base.rkey, l.va.wrapping_add(shift)))
            }
            (LatchAt::Array, _) => {
                return Err(KvError::corrupt(format!(
                    "in-place table {} has no latch array (on its tuples' memory node) for \
                     scheme {}",
                    info.name,
                    spec.name()
                )));
            }
            (LatchAt::InTuple(_), _) => None,
        };
        let area = Area {
            data: base.offset(HEADER_LINE),
            latches,
            slots,
        };
        if area.slots == 0 {
            return Err(KvError::InvalidArgument(format!(
                "values of {value_cap} bytes do not fit table {}'s {} bytes of memory",
                info.name, dir.len
            )));
        }
        let lease = core.client.options.retry.lock_timeout;
        let options = IoOptions {
            lease,
            give_up_after: (4 * lease).max(Duration::from_secs(2)),
            seed: info.id,
            ..IoOptions::default()
        };
        let fingerprint = xxh64(
            format!("{}/{payload}/{}", spec.name(), area.slots).as_bytes(),
            0x1d,
        ) | 1;
        let node = match (built.node_latch(), mirrors.is_empty()) {
            (Some(latch), true) => Some(NodeTarget {
                memnode: primary.memnode,
                latch,
            }),
            _ => None,
        };
        let table = InPlaceTable {
            node,
            name: info.name.clone(),
            io: SlotIo::new(link.qp.clone(), area, options).with_mirrors(mirrors),
            scheme: built,
            value_cap,
            seed: info.id,
            header: base,
            fingerprint,
            formatted: Cell::new(false),
        };
        core.index_state::<InPlaceSession>()
            .track(table.io.unlatch_waiter());
        Ok(table)
    }

    /// Wait for every asynchronous unlatch of this handle.
    pub(crate) async fn flush(&self) {
        self.io.flush().await
    }

    /// Largest value.
    pub(crate) fn value_limit(&self) -> usize {
        self.value_cap
    }

    /// Why access mode `rpc` cannot serve this table (`None`: it can).
    pub(crate) fn rpc_refusal(&self) -> Option<String> {
        if self.node.is_some() {
            return None;
        }
        if self.scheme.node_latch().is_none() {
            return Some(format!(
                "the memory node's workers execute the pessimistic latch schemes only, not \
                 {} (its tables stay one-sided; hybrid is one-sided on them)",
                self.scheme.spec().name()
            ));
        }
        Some("the memory node executes on one copy; a replicated table stays one-sided".into())
    }

    /// Claim or check the layout fingerprint (once per handle).
    async fn ensure_format(&self, stats: &mut OpStats) -> Result<(), KvError> {
        if self.formatted.get() {
            return Ok(());
        }
        let done = self
            .io
            .round_trip(
                vec![WorkRequest::cas(self.header, 0, self.fingerprint)],
                stats,
            )
            .await?;
        let old = atomic(done.first())?;
        if old != 0 && old != self.fingerprint {
            return Err(KvError::corrupt(format!(
                "the table's memory is laid out for another scheme or value size \
                 (fingerprint {old:#x}, ours {:#x})",
                self.fingerprint
            )));
        }
        self.formatted.set(true);
        Ok(())
    }

    fn slots(&self, key: &[u8]) -> impl Iterator<Item = u64> + use<> {
        let n = self.io.area().slots;
        let home = xxh64(key, self.seed) % n;
        (0..MAX_PROBE.min(n)).map(move |i| (home + i) % n)
    }

    fn view<'a>(&self, p: &'a [u8]) -> Result<View<'a>, KvError> {
        let state = p.first().copied().unwrap_or(0);
        if state == 0 {
            return Ok(View::Empty);
        }
        let klen = u16::from_le_bytes([
            p.get(2).copied().unwrap_or(0),
            p.get(3).copied().unwrap_or(0),
        ]) as usize;
        let vlen = u32::from_le_bytes(
            p.get(4..8)
                .and_then(|b| <[u8; 4]>::try_from(b).ok())
                .unwrap_or([0; 4]),
        ) as usize;
        let corrupt = || KvError::corrupt("in-place tuple with impossible lengths");
        if klen == 0 || klen > KEY_CAP || vlen > self.value_cap {
            return Err(corrupt());
        }
        let key = p.get(HEADER..HEADER + klen).ok_or_else(corrupt)?;
        let at = HEADER + KEY_CAP;
        match state {
            1 => Ok(View::Live(key, p.get(at..at + vlen).ok_or_else(corrupt)?)),
            2 => Ok(View::Dead(key)),
            _ => Err(corrupt()),
        }
    }

    fn encode(&self, key: &[u8], value: Option<&[u8]>) -> Vec<u8> {
        let mut p = vec![0u8; HEADER + KEY_CAP + self.value_cap];
        p[0] = if value.is_some() { 1 } else { 2 };
        p[2..4].copy_from_slice(&(key.len() as u16).to_le_bytes());
        let v = value.unwrap_or_default();
        p[4..8].copy_from_slice(&(v.len() as u32).to_le_bytes());
        p[HEADER..HEADER + key.len()].copy_from_slice(key);
        p[HEADER + KEY_CAP..HEADER + KEY_CAP + v.len()].copy_from_slice(v);
        p
    }

    fn check_key(key: &[u8]) -> Result<(), KvError> {
        if key.len() > KEY_CAP {
            return Err(KvError::KeyTooLarge {
                len: key.len(),
                limit: KEY_CAP,
            });
        }
        Ok(())
    }

    /// A read in access mode `mode`: `rpc` reads each probed tuple at the node,
    /// `hybrid` reads one-sided and goes to the node when it finds a latch held; a
    /// read the node cannot serve or hands back is read one-sided.
    async fn get_in(
        &self,
        core: &SessionCore,
        mode: AccessMode,
        key: &[u8],
        stats: &mut OpStats,
    ) -> Result<Vec<u8>, KvError> {
        let Some(node) = self.node.filter(|_| mode != AccessMode::OneSided) else {
            return self.get_inner(key, stats).await;
        };
        if mode == AccessMode::Hybrid {
            stats.hand_back = true;
            let before = stats.handed_to_rpc;
            let r = self.get_inner(key, stats).await;
            stats.hand_back = false;
            match r {
                Err(KvError::Contended { .. }) if stats.handed_to_rpc > before => {}
                r => return r,
            }
        }
        match self.get_at_node(core, &node, key, stats).await? {
            Answer::Done(v) => Ok(v),
            Answer::Unreachable if mode == AccessMode::Rpc => {
                Err(crate::rpc_port::no_workers(&self.name))
            }
            Answer::HandedBack | Answer::Unreachable => self.get_inner(key, stats).await,
        }
    }

    /// The RPC read: each probed tuple read at the node (anything but `Done`: the
    /// node did not serve a tuple, nothing changed).
    async fn get_at_node(
        &self,
        core: &SessionCore,
        node: &NodeTarget,
        key: &[u8],
        stats: &mut OpStats,
    ) -> Result<Answer<Vec<u8>>, KvError> {
        Self::check_key(key)?;
        self.ensure_format(stats).await?;
        let layout = *self.scheme.layout();
        for slot in self.slots(key) {
            let p = match rpc::read(core, &self.io, &layout, node, slot, stats).await? {
                Answer::Done(p) => p,
                Answer::HandedBack => return Ok(Answer::HandedBack),
                Answer::Unreachable => return Ok(Answer::Unreachable),
            };
            match self.view(&p)? {
                View::Empty => return Err(KvError::NotFound),
                View::Live(k, v) if k == key => return Ok(Answer::Done(v.to_vec())),
                View::Dead(k) if k == key => return Err(KvError::NotFound),
                _ => {}
            }
        }
        Err(KvError::NotFound)
    }

    /// A write in access mode `mode` (see [`Self::get_in`]).
    async fn write_in(
        &self,
        core: &SessionCore,
        mode: AccessMode,
        key: &[u8],
        kind: WriteKind,
        value: &[u8],
        stats: &mut OpStats,
    ) -> Result<(), KvError> {
        let Some(node) = self.node.filter(|_| mode != AccessMode::OneSided) else {
            return self.write_inner(key, kind, value, stats).await;
        };
        if mode == AccessMode::Hybrid {
            // One-sided until a latch is found held; nothing is written before a
            // latch is held, so a handed-back write changed nothing.
            stats.hand_back = true;
            let before = stats.handed_to_rpc;
            let r = self.write_inner(key, kind, value, stats).await;
            stats.hand_back = false;
            match r {
                Err(KvError::Contended { .. }) if stats.handed_to_rpc > before => {}
                r => return r,
            }
        }
        match self
            .write_at_node(core, &node, key, kind, value, stats)
            .await?
        {
            Answer::Done(()) => Ok(()),
            Answer::Unreachable if mode == AccessMode::Rpc => {
                Err(crate::rpc_port::no_workers(&self.name))
            }
            Answer::HandedBack | Answer::Unreachable => {
                self.write_inner(key, kind, value, stats).await
            }
        }
    }

    /// The RPC write: the node latches each probed tuple, decides as
    /// [`Self::write_inner`] does under the latch, and writes (anything but `Done`:
    /// the node did not serve a tuple, nothing changed).
    async fn write_at_node(
        &self,
        core: &SessionCore,
        node: &NodeTarget,
        key: &[u8],
        kind: WriteKind,
        value: &[u8],
        stats: &mut OpStats,
    ) -> Result<Answer<()>, KvError> {
        use dmkv_api::rpc_inplace::WriteOutcome;
        Self::check_key(key)?;
        self.ensure_format(stats).await?;
        let layout = *self.scheme.layout();
        for slot in self.slots(key) {
            let outcome =
                rpc::write(core, &self.io, &layout, node, slot, kind, key, value, stats).await?;
            let outcome = match outcome {
                Answer::Done(o) => o,
                Answer::HandedBack => return Ok(Answer::HandedBack),
                Answer::Unreachable => return Ok(Answer::Unreachable),
            };
            match outcome {
                WriteOutcome::Deferred(_) => return Ok(Answer::HandedBack),
                WriteOutcome::Written => return Ok(Answer::Done(())),
                WriteOutcome::Exists => return Err(KvError::AlreadyExists),
                WriteOutcome::NotFound => return Err(KvError::NotFound),
                WriteOutcome::OtherKey => continue,
                WriteOutcome::Corrupt => {
                    return Err(KvError::corrupt(format!(
                        "slot {slot} holds a tuple that does not parse (the memory node's \
                         worker left it unchanged)"
                    )));
                }
                WriteOutcome::LatchLost => {
                    return Err(KvError::unavailable(
                        "the memory node's worker held our latch past its lease and it was \
                         broken by another client; the write happened",
                    ));
                }
            }
        }
        match kind {
            WriteKind::Put | WriteKind::Insert => Err(KvError::unavailable(format!(
                "in-place table full: the {MAX_PROBE} slots from this key's home slot hold \
                 other keys"
            ))),
            WriteKind::Update | WriteKind::Delete => Err(KvError::NotFound),
        }
    }

    async fn get_inner(&self, key: &[u8], stats: &mut OpStats) -> Result<Vec<u8>, KvError> {
        Self::check_key(key)?;
        self.ensure_format(stats).await?;
        for slot in self.slots(key) {
            let p = self.scheme.read(&self.io, slot, stats).await?;
            match self.view(&p)? {
                View::Empty => return Err(KvError::NotFound),
                View::Live(k, v) if k == key => return Ok(v.to_vec()),
                View::Dead(k) if k == key => return Err(KvError::NotFound),
                _ => {}
            }
        }
        Err(KvError::NotFound)
    }

    async fn write_inner(
        &self,
        key: &[u8],
        kind: WriteKind,
        value: &[u8],
        stats: &mut OpStats,
    ) -> Result<(), KvError> {
        Self::check_key(key)?;
        self.ensure_format(stats).await?;
        for slot in self.slots(key) {
            // A tuple marked torn (its last writer's latch was broken) is decided under
            // the latch on what it holds; a write of the whole payload makes it whole.
            let p = match self.scheme.read(&self.io, slot, stats).await {
                Ok(p) => Some(p),
                Err(e) if super::pessimistic::is_torn(&e) => None,
                Err(e) => return Err(e),
            };
            // What one consistent read already decides, without latching.
            if let Some(p) = &p {
                match (self.view(p)?, kind) {
                    (View::Live(k, _) | View::Dead(k), _) if k != key => continue,
                    (View::Empty | View::Dead(_), WriteKind::Update | WriteKind::Delete) => {
                        return Err(KvError::NotFound);
                    }
                    (View::Live(..), WriteKind::Insert) => return Err(KvError::AlreadyExists),
                    _ => {}
                }
            }
            let mut outcome: Option<Result<(), KvError>> = None;
            {
                let mut decide = |cur: &[u8]| -> Option<Vec<u8>> {
                    let (r, new) = match self.view(cur) {
                        Err(e) => (Some(Err(e)), None),
                        Ok(View::Live(k, _) | View::Dead(k)) if k != key => (None, None),
                        Ok(v) => {
                            let live = matches!(v, View::Live(..));
                            match (kind, live) {
                                (WriteKind::Put, _) | (WriteKind::Insert, false) => {
                                    (Some(Ok(())), Some(self.encode(key, Some(value))))
                                }
                                (WriteKind::Update, true) => {
                                    (Some(Ok(())), Some(self.encode(key, Some(value))))
                                }
                                (WriteKind::Delete, true) => {
                                    (Some(Ok(())), Some(self.encode(key, None)))
                                }
                                (WriteKind::Insert, true) => {
                                    (Some(Err(KvError::AlreadyExists)), None)
                                }
                                (WriteKind::Update | WriteKind::Delete, false) => {
                                    (Some(Err(KvError::NotFound)), None)
                                }
                            }
                        }
                    };
                    outcome = r;
                    new
                };
                self.scheme
                    .write(&self.io, slot, &mut decide, stats)
                    .await?;
            }
            if let Some(r) = outcome {
                return r;
            }
            // Another key claimed the slot between our read and our latch: probe on.
        }
        match kind {
            WriteKind::Put | WriteKind::Insert => Err(KvError::unavailable(format!(
                "in-place table full: the {MAX_PROBE} slots from this key's home slot hold \
                 other keys"
            ))),
            WriteKind::Update | WriteKind::Delete => Err(KvError::NotFound),
        }
    }
}

/// The value of `key`.
pub(crate) async fn get(
    core: &SessionCore,
    t: &InPlaceTable,
    key: &[u8],
    mode: AccessMode,
) -> Result<Vec<u8>, KvError> {
    let mut stats = OpStats::default();
    let r = t.get_in(core, mode, key, &mut stats).await;
    core.finish_op(stats);
    r
}

/// The live keys of an in-place table starting with `prefix`, in byte order: every
/// tuple is read consistently under the table's scheme (one read per tuple), and
/// those that hold a live key are listed (tombstones and empty tuples are not).
pub(crate) async fn keys(
    core: &SessionCore,
    t: &InPlaceTable,
    prefix: &[u8],
) -> Result<Vec<Vec<u8>>, KvError> {
    let mut stats = OpStats::default();
    let r = t.keys_inner(prefix, &mut stats).await;
    core.finish_op(stats);
    r
}

impl InPlaceTable {
    async fn keys_inner(
        &self,
        prefix: &[u8],
        stats: &mut OpStats,
    ) -> Result<Vec<Vec<u8>>, KvError> {
        self.ensure_format(stats).await?;
        let mut out = Vec::new();
        for slot in 0..self.io.area().slots {
            let p = self.scheme.read(&self.io, slot, stats).await?;
            if let View::Live(k, _) = self.view(&p)?
                && k.starts_with(prefix)
            {
                out.push(k.to_vec());
            }
        }
        out.sort();
        Ok(out)
    }
}

/// Apply a write of `kind`.
pub(crate) async fn write(
    core: &SessionCore,
    t: &InPlaceTable,
    key: &[u8],
    kind: WriteKind,
    value: &[u8],
    mode: AccessMode,
) -> Result<(), KvError> {
    // A copy whose queue pair failed: fail before anything is sent, so that the
    // write is repeated once the table fails over (or the copy is back) rather
    // than reported with an unknown outcome.
    let reconnects = core.links.reconnector().reconnects();
    for m in t.io.mirror_memnodes() {
        core.links.ready(m)?;
    }
    if core.links.reconnector().reconnects() != reconnects {
        // A copy's queue pair was just replaced: its member may have come back
        // with new memory, and this handle's copies name the old. Repeat the
        // write, nothing sent, on a handle opened again.
        return Err(core.links.routes().borrow().refuse_writes(
            "a copy's queue pair was replaced; the write is repeated on the table opened again",
        ));
    }
    let mut stats = OpStats::default();
    let r = t.write_in(core, mode, key, kind, value, &mut stats).await;
    core.finish_op(stats);
    // A copy that missed the write: the table's configuration must change (the
    // failed member dropped) before the write counts; report it as the failure
    // of that member's queue pair.
    match (t.io.take_mirror_failure(), r) {
        // The primary's batch went out after the copy failed (so that the latch
        // is released): the write may have taken effect.
        (Some(e @ KvError::OutcomeUnknown(_)), _) => Err(e),
        (Some(e), _) => Err(KvError::OutcomeUnknown(crate::error::Cause::caused_by(
            format!(
                "the {} of key \"{}\" may or may not have taken effect: a copy of the table \
                 missed it ({e})",
                kind.name(),
                key.escape_ascii()
            ),
            e,
        ))),
        (None, r) => r,
    }
}
