//! Versioning with sequential READs (Jasny et al., TODS 2025, §4.3, Fig. 13a).
//!
//! Layout: `payload | pad | version u64 | latch u64` (the last two in the tuple's
//! last line, so one READ sees them consistently).
//!
//! Read, three round trips, each READ posted only after the previous completed
//! (two READs of one queue pair are not ordered otherwise — anti-pattern #2):
//! `[READ version+latch]` — restart while latched; `[READ payload]`;
//! `[READ version+latch]` — the value is valid if the version is unchanged and
//! the latch word is the same free word. A latch word marked torn (its last
//! holder was broken mid-write, so the payload may be partly new while the
//! version, written last, is old) makes the read fail with `Corrupt`. Any writer whose WRITE overlapped the payload READ latched
//! after the first READ, so the third sees its latch or its new version.
//!
//! There is no relaxed "consistent read" variant: dropping the validation READ
//! would leave nothing that detects a WRITE overlapping the payload READ.
//!
//! Write: see [`super::optimistic`] (the version is bumped in the same WRITE).

use verbs::wr::WorkRequest;

use super::io::read_bytes;
use super::latch::{self, LeaseWatch};
use super::pessimistic::torn_error;
use super::{
    Decide, LatchAt, Layout, LocalFuture, SchemeSpec, SlotIo, SyncScheme, Unlatch, lines,
    optimistic, put_word, word,
};
use crate::error::KvError;
use crate::stats::OpStats;

/// The versioning scheme.
#[derive(Debug)]
pub(crate) struct Versioning {
    spec: SchemeSpec,
    layout: Layout,
    unlatch: Unlatch,
}

impl Versioning {
    /// The scheme `spec` for `payload`-byte payloads.
    pub(crate) fn new(spec: SchemeSpec, payload: usize) -> Versioning {
        let unlatch = match spec {
            SchemeSpec::Versioning { unlatch } => unlatch,
            _ => Unlatch::Write,
        };
        let tuple = lines(payload as u64 + 16);
        Versioning {
            spec,
            layout: Layout {
                payload,
                tuple,
                stride: tuple,
                latch: LatchAt::InTuple(tuple - 8),
            },
            unlatch,
        }
    }

    fn tail(&self) -> u64 {
        self.layout.tuple - 16
    }

    async fn do_read(
        &self,
        io: &SlotIo,
        slot: u64,
        stats: &mut OpStats,
    ) -> Result<Vec<u8>, KvError> {
        let at = io.tuple_addr(&self.layout, slot)?;
        let tail = at.offset(self.tail());
        let deadline = io.deadline();
        let mut watch = LeaseWatch::default();
        let mut attempt = 0u32;
        loop {
            let mut first = io
                .round_trip(vec![WorkRequest::read(tail, 16)], stats)
                .await?;
            let t1 = read_bytes(first.first_mut())?;
            let (v1, l1) = (word(&t1, 0), word(&t1, 8));
            if latch::is_torn(l1) {
                // The last writer was broken mid-write: its version bump, which
                // lands last, may be missing while part of its payload landed.
                return Err(torn_error(slot));
            }
            if !latch::is_exclusive(l1) {
                let mut data = io
                    .round_trip(
                        vec![WorkRequest::read(at, self.layout.payload as u32)],
                        stats,
                    )
                    .await?;
                let payload = read_bytes(data.first_mut())?;
                let mut last = io
                    .round_trip(vec![WorkRequest::read(tail, 16)], stats)
                    .await?;
                let t2 = read_bytes(last.first_mut())?;
                if word(&t2, 0) == v1 && word(&t2, 8) == l1 {
                    return Ok(payload);
                }
            } else if watch.expired(l1, io.options().lease) {
                io.break_latch(tail.offset(8), l1, stats).await?;
                watch.reset();
            }
            io.restart(deadline, &mut attempt, stats).await?;
        }
    }
}

impl SyncScheme for Versioning {
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
        let payload = self.layout.payload;
        let tail = self.tail() as usize;
        Box::pin(optimistic::write(
            io,
            &self.layout,
            self.unlatch,
            slot,
            decide,
            move |t| t.get(..payload).unwrap_or_default().to_vec(),
            move |t, new| {
                let mut image = optimistic::sized(new, tail + 16);
                put_word(&mut image, tail, word(t, tail).wrapping_add(1));
                put_word(&mut image, tail + 8, 0);
                image
            },
            stats,
        ))
    }
}
