//! The pessimistic latch (sync seed §3): a reader/writer latch in one 8-byte word
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

use super::io::{all_ok, atomic, read_bytes};
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
pub struct Pessimistic {
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
    pub fn new(spec: SchemeSpec, payload: usize) -> Result<Pessimistic, SchemeError> {
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
    /// latch was held exclusively, undo and retry.
    async fn acquire_shared(
        &self,
        io: &SlotIo,
        at: verbs::wr::RemoteAddr,
        extra: Option<WorkRequest>,
        stats: &mut OpStats,
    ) -> Result<Option<Vec<u8>>, KvError> {
        let deadline = io.deadline();
        let mut watch = LeaseWatch::default();
        let mut attempt = 0u32;
        loop {
            let mut batch = vec![WorkRequest::faa(at, latch::READER)];
            batch.extend(extra.clone());
            let mut done = io.round_trip(batch, stats).await?;
            let old = atomic(done.first())?;
            if !latch::is_exclusive(old) {
                return match done.len() {
                    2 => read_bytes(done.get_mut(1)).map(Some),
                    _ => Ok(None),
                };
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
            io.check_deadline(deadline, attempt)?;
            io.backoff(attempt - 1).await;
        }
    }

    async fn do_read(
        &self,
        io: &SlotIo,
        slot: u64,
        stats: &mut OpStats,
    ) -> Result<Vec<u8>, KvError> {
        let at = io.latch_addr(&self.layout, slot)?;
        let data = io.tuple_addr(&self.layout, slot)?.offset(self.payload_at);
        let read = WorkRequest::read(data, self.layout.payload as u32);
        let speculative = self.level != Level::Basic;
        let extra = speculative.then(|| read.clone());
        // `held`: the latch word of an exclusive latch (None: a shared one).
        let (got, held) = match self.readers {
            Readers::Shared => (self.acquire_shared(io, at, extra, stats).await?, None),
            Readers::Exclusive => {
                let l = io.acquire_exclusive(at, extra, stats).await?;
                (l.read, Some(l.word))
            }
        };
        let payload = match got {
            Some(p) => p,
            None => {
                let mut done = io.round_trip(vec![read], stats).await?;
                read_bytes(done.first_mut())?
            }
        };
        let asynchronous = self.level == Level::AsyncUnlatch;
        match (held, asynchronous) {
            (None, true) => {
                let undo = WorkRequest::faa(at, latch::READER.wrapping_neg());
                io.post_unlatch(vec![undo], None, stats).await?;
            }
            (None, false) => {
                let undo = WorkRequest::faa(at, latch::READER.wrapping_neg());
                let done = io.round_trip(vec![undo], stats).await?;
                atomic(done.first())?;
            }
            (Some(mine), true) => {
                let cas = WorkRequest::cas(at, mine, 0);
                io.post_unlatch(vec![cas], Some((at, mine)), stats).await?;
            }
            (Some(mine), false) => io.release_exclusive(at, mine, stats).await?,
        }
        Ok(payload)
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
        let held = io
            .acquire_exclusive(at, speculative.then(|| read.clone()), stats)
            .await?;
        let mine = held.word;
        let current = match held.read {
            Some(p) => p,
            None => {
                let mut done = io.round_trip(vec![read], stats).await?;
                read_bytes(done.first_mut())?
            }
        };
        let asynchronous = self.level == Level::AsyncUnlatch;
        let unlatch = WorkRequest::cas(at, mine, 0);
        let Some(new) = decide(&current) else {
            if asynchronous {
                io.post_unlatch(vec![unlatch], Some((at, mine)), stats)
                    .await?;
            } else {
                io.release_exclusive(at, mine, stats).await?;
            }
            return Ok(false);
        };
        let new = sized(&new, self.layout.payload);
        if self.write_unlatch {
            // The payload, padding, and the unlatched latch word as the last 8 bytes.
            let mut image = new;
            image.resize(self.layout.tuple as usize, 0);
            let write = WorkRequest::write(tuple, image);
            if asynchronous {
                io.post_unlatch(vec![write], None, stats).await?;
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
                io.release_exclusive(at, mine, stats).await?;
            }
            Level::WriteCombining => {
                let done = io.round_trip(vec![write, unlatch], stats).await?;
                all_ok(&done[..1])?;
                let old = atomic(done.last())?;
                io.finish_release(at, old, mine, stats).await?;
            }
            Level::AsyncUnlatch => {
                io.post_unlatch(vec![write, unlatch], Some((at, mine)), stats)
                    .await?
            }
        }
        Ok(true)
    }
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
}
