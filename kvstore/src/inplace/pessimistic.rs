//! The pessimistic latch (Jasny et al., TODS 2025, §3): a reader/writer latch in one 8-byte word
//! (CAS for exclusive, FAA on the reader count for shared) or an exclusive-only
//! latch (readers latch by CAS too), with the optimisation levels of §3.3 and the
//! latch placements of §3.2.
//!
//! Protocols, one bracket per doorbell (round trips in parentheses):
//!
//! | level | shared read | exclusive write |
//! |---|---|---|
//! | basic | `[FAA] [READ] [FAA−]` (3) | `[CAS] [READ] [WRITE] [CAS]` (4) |
//! | speculative read | `[FAA READ] [FAA−]` (2) | `[CAS READ] [WRITE] [CAS]` (3) |
//! | write combining | `[FAA READ] [FAA−]` (2) | `[CAS READ] [WRITE CAS]` (2) |
//! | asynchronous unlatch | `[FAA READ] post [FAA−]` (1) | `[CAS READ] post [WRITE CAS]` (1) |
//!
//! With the exclusive-only latch, reads use `CAS`/`CAS` instead of `FAA`/`FAA−`,
//! and write-unlatch replaces `[WRITE CAS]` by one WRITE whose last 8 bytes are
//! the unlatched latch word (the latch is then the tuple's last word).
//!
//! *Speculative read* is correct because an atomic is executed before later
//! verbs of the same queue pair: when the latch CAS/FAA succeeded, the READ
//! behind it saw the tuple under the latch (when it failed, the bytes are
//! discarded). *Asynchronous unlatch* posts the unlatch and returns; the next
//! operation's verbs on the same queue pair execute after it, and at most
//! [`IoOptions::async_depth`](super::IoOptions) unlatches are in flight per
//! queue pair (the per-QP buffer rotation: a slot is reused only after its
//! request completed).
//!
//! *Write-unlatch is refused with shared readers* ([`SchemeError::WriteUnlatchWithSharedReaders`]):
//! RDMA does not order a WRITE against atomics of other queue pairs. A NIC may
//! hold a copy of the latch word for an atomic: a reader's FAA can read the
//! exclusively latched value, the holder's unlatching WRITE lands, and the FAA
//! stores "latched + 1 reader" over it — the unlatch is lost and the latch stays
//! held forever. A CAS only stores when it matched, so with CAS-only latches a
//! stale copy can only make an acquire fail and retry (§3.3, anti-pattern #3).

use verbs::wr::WorkRequest;

use super::io::{Unlatching, all_ok, atomic, read_bytes};
use super::latch::{self, LeaseWatch};
use super::optimistic::sized;
use super::{
    Decide, LatchAt, Layout, Level, LocalFuture, Placement, Readers, SchemeError, SchemeSpec,
    SlotIo, SyncScheme, lines,
};
use crate::error::KvError;
use crate::stats::OpStats;

/// The pessimistic latch scheme.
#[derive(Debug)]
pub(crate) struct Pessimistic {
    spec: SchemeSpec,
    layout: Layout,
    readers: Readers,
    level: Level,
    write_unlatch: bool,
    /// Where the payload starts in the tuple.
    payload_at: u64,
}

impl Pessimistic {
    /// The scheme `spec` (a [`SchemeSpec::Pessimistic`]) for `payload`-byte payloads.
    pub(crate) fn new(spec: SchemeSpec, payload: usize) -> Result<Pessimistic, SchemeError> {
        spec.validate()?;
        let SchemeSpec::Pessimistic {
            readers,
            level,
            write_unlatch,
            placement,
        } = spec
        else {
            return Err(SchemeError::Unknown(spec.name()));
        };
        let p = payload as u64;
        let (payload_at, tuple, latch) = match placement {
            Placement::Separate => (0, lines(p.max(1)), LatchAt::Array),
            _ if write_unlatch => {
                let t = lines(p + 8);
                (0, t, LatchAt::InTuple(t - 8))
            }
            _ => (8, lines(p + 8), LatchAt::InTuple(0)),
        };
        let stride = if placement == Placement::Padded {
            tuple + 8
        } else {
            tuple
        };
        Ok(Pessimistic {
            spec,
            layout: Layout {
                payload,
                tuple,
                stride,
                latch,
            },
            readers,
            level,
            write_unlatch,
            payload_at,
        })
    }

    /// Latch `at` shared: FAA `+1 reader` (with `extra` in the same batch); if the
    /// latch was held exclusively, undo and retry. Returns what the FAA returned
    /// (needed to release) and the bytes `extra` read.
    async fn acquire_shared(
        &self,
        io: &SlotIo,
        at: verbs::wr::RemoteAddr,
        extra: Option<WorkRequest>,
        stats: &mut OpStats,
    ) -> Result<(u64, Option<Vec<u8>>), KvError> {
        let deadline = io.deadline();
        let mut watch = LeaseWatch::default();
        let mut attempt = 0u32;
        loop {
            let mut batch = vec![WorkRequest::faa(at, latch::READER)];
            batch.extend(extra.clone());
            let mut done = io.round_trip(batch, stats).await?;
            let old = atomic(done.first())?;
            if !latch::is_exclusive(old) {
                let read = match done.len() {
                    2 => Some(read_bytes(done.get_mut(1))?),
                    _ => None,
                };
                return Ok((old, read));
            }
            let undo = io
                .round_trip(
                    vec![WorkRequest::faa(at, latch::READER.wrapping_neg())],
                    stats,
                )
                .await?;
            atomic(undo.first())?;
            stats.cas_failures += 1;
            attempt += 1;
            if watch.expired(old, io.options().lease) {
                io.break_latch(at, old, stats).await?;
                watch.reset();
                continue;
            }
            io.check_deadline(deadline, attempt, stats)?;
            io.backoff(attempt - 1).await;
        }
    }

    async fn do_read(
        &self,
        io: &SlotIo,
        slot: u64,
        stats: &mut OpStats,
    ) -> Result<Vec<u8>, KvError> {
        let deadline = io.deadline();
        let mut attempt = 0u32;
        loop {
            match self.read_once(io, slot, stats).await? {
                Some(payload) => return Ok(payload),
                // Our shared count was broken while we read: a writer may have
                // written under it, so the bytes are not trusted; read again.
                None => io.restart(deadline, &mut attempt, stats).await?,
            }
        }
    }

    /// One latched read: the payload, or `None` when our shared count turned out to
    /// be broken at release (only the synchronous levels can tell).
    async fn read_once(
        &self,
        io: &SlotIo,
        slot: u64,
        stats: &mut OpStats,
    ) -> Result<Option<Vec<u8>>, KvError> {
        let at = io.latch_addr(&self.layout, slot)?;
        let data = io.tuple_addr(&self.layout, slot)?.offset(self.payload_at);
        let read = WorkRequest::read(data, self.layout.payload as u32);
        let speculative = self.level != Level::Basic;
        let extra = speculative.then(|| read.clone());
        enum Held {
            Shared { acquired: u64 },
            Exclusive { mine: u64, restore: u64 },
        }
        let (got, held, torn) = match self.readers {
            Readers::Shared => {
                let (acquired, got) = self.acquire_shared(io, at, extra, stats).await?;
                (got, Held::Shared { acquired }, latch::is_torn(acquired))
            }
            Readers::Exclusive => {
                let mut l = io.acquire_exclusive(at, extra, stats).await?;
                let held = Held::Exclusive {
                    mine: l.word,
                    restore: l.release_word(false),
                };
                let torn = l.torn();
                (l.read.take(), held, torn)
            }
        };
        let payload = match (got, torn) {
            (Some(p), _) => p,
            // A torn tuple is not worth reading.
            (None, true) => Vec::new(),
            (None, false) => {
                let mut done = io.round_trip(vec![read], stats).await?;
                read_bytes(done.first_mut())?
            }
        };
        let asynchronous = self.level == Level::AsyncUnlatch;
        let counted = match (held, asynchronous) {
            (Held::Shared { acquired }, true) => {
                let cas = WorkRequest::cas(at, acquired.wrapping_add(latch::READER), acquired);
                io.post_unlatch(vec![cas], Unlatching::Shared { at, acquired }, stats)
                    .await?;
                true
            }
            (Held::Shared { acquired }, false) => io.release_shared(at, acquired, stats).await?,
            (Held::Exclusive { mine, restore }, true) => {
                let cas = WorkRequest::cas(at, mine, restore);
                let unlatching = Unlatching::Exclusive { at, mine, restore };
                io.post_unlatch(vec![cas], unlatching, stats).await?;
                true
            }
            (Held::Exclusive { mine, restore }, false) => {
                io.release_exclusive(at, mine, restore, stats).await?;
                true
            }
        };
        if torn {
            return Err(torn_error(slot));
        }
        Ok(counted.then_some(payload))
    }

    async fn do_write(
        &self,
        io: &SlotIo,
        slot: u64,
        decide: Decide<'_>,
        stats: &mut OpStats,
    ) -> Result<bool, KvError> {
        let at = io.latch_addr(&self.layout, slot)?;
        let tuple = io.tuple_addr(&self.layout, slot)?;
        let data = tuple.offset(self.payload_at);
        let read = WorkRequest::read(data, self.layout.payload as u32);
        let speculative = self.level != Level::Basic;
        let mut held = io
            .acquire_exclusive(at, speculative.then(|| read.clone()), stats)
            .await?;
        let mine = held.word;
        let current = match held.read.take() {
            Some(p) => p,
            None => {
                let mut done = io.round_trip(vec![read], stats).await?;
                read_bytes(done.first_mut())?
            }
        };
        let asynchronous = self.level == Level::AsyncUnlatch;
        let Some(new) = decide(&current) else {
            let restore = held.release_word(false);
            if asynchronous {
                let unlatch = WorkRequest::cas(at, mine, restore);
                let unlatching = Unlatching::Exclusive { at, mine, restore };
                io.post_unlatch(vec![unlatch], unlatching, stats).await?;
            } else {
                io.release_exclusive(at, mine, restore, stats).await?;
            }
            return Ok(false);
        };
        // The whole payload is written: a torn tuple is whole again.
        let restore = held.release_word(true);
        let unlatch = WorkRequest::cas(at, mine, restore);
        let unlatching = Unlatching::Exclusive { at, mine, restore };
        let new = sized(&new, self.layout.payload);
        if self.write_unlatch {
            // The payload, padding, and the releasing latch word as the last 8 bytes.
            let mut image = new;
            image.resize(self.layout.tuple as usize, 0);
            let len = image.len();
            if let Some(last) = image.get_mut(len.saturating_sub(8)..) {
                last.copy_from_slice(&restore.to_le_bytes());
            }
            let write = WorkRequest::write(tuple, image);
            if asynchronous {
                io.post_unlatch(vec![write], Unlatching::Nothing, stats)
                    .await?;
            } else {
                let done = io.round_trip(vec![write], stats).await?;
                all_ok(&done)?;
            }
            return Ok(true);
        }
        let write = WorkRequest::write(data, new);
        match self.level {
            Level::Basic | Level::SpeculativeRead => {
                let done = io.round_trip(vec![write], stats).await?;
                all_ok(&done)?;
                io.release_exclusive(at, mine, restore, stats).await?;
            }
            Level::WriteCombining => {
                let done = io.round_trip(vec![write, unlatch], stats).await?;
                all_ok(&done[..1])?;
                let old = atomic(done.last())?;
                io.finish_release(at, old, mine, restore, stats).await?;
            }
            Level::AsyncUnlatch => {
                io.post_unlatch(vec![write, unlatch], unlatching, stats)
                    .await?
            }
        }
        Ok(true)
    }
}

/// The tuple behind a [`torn_error`]: its last exclusive holder was broken.
#[derive(Debug, thiserror::Error)]
#[error("slot {slot} is marked torn")]
pub(crate) struct TornTuple {
    slot: u64,
}

/// The error of a read of a tuple whose last exclusive holder was broken.
pub(crate) fn torn_error(slot: u64) -> KvError {
    KvError::Corrupt(crate::error::Cause::caused_by(
        format!(
            "slot {slot} may hold part of a write: the client that last latched it stopped \
             (its latch was broken after the lease) before it released it; the tuple reads \
             as corrupt until it is written again"
        ),
        TornTuple { slot },
    ))
}

/// Whether `e` is a [`torn_error`].
pub(crate) fn is_torn(e: &KvError) -> bool {
    matches!(e, KvError::Corrupt(c)
        if c.source().is_some_and(|s| s.downcast_ref::<TornTuple>().is_some()))
}

impl SyncScheme for Pessimistic {
    fn spec(&self) -> &SchemeSpec {
        &self.spec
    }

    fn layout(&self) -> &Layout {
        &self.layout
    }

    fn read<'a>(
        &'a self,
        io: &'a SlotIo,
        slot: u64,
        stats: &'a mut OpStats,
    ) -> LocalFuture<'a, Result<Vec<u8>, KvError>> {
        Box::pin(self.do_read(io, slot, stats))
    }

    fn write<'a>(
        &'a self,
        io: &'a SlotIo,
        slot: u64,
        decide: Decide<'a>,
        stats: &'a mut OpStats,
    ) -> LocalFuture<'a, Result<bool, KvError>> {
        Box::pin(self.do_write(io, slot, decide, stats))
    }

    fn node_latch(&self) -> Option<super::NodeLatch> {
        Some(super::NodeLatch {
            shared_readers: self.readers == Readers::Shared,
            payload_at: self.payload_at,
        })
    }
}
