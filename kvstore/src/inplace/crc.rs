//! CRC-64 checksums (Jasny et al., TODS 2025, §4.3, Fig. 13b), with the relaxed consistent read
//! of §6.
//!
//! Layout: `payload | pad | crc u64 | … | version u64 | latch u64` with
//! `crc = CRC-64(payload ‖ version)` (crc64fast, the ECMA polynomial in its
//! reflected form). A tuple never written (version 0, crc 0) reads as zeros.
//!
//! * `crc` (latch semantics, 2 round trips): `[READ tuple]`, check the CRC, then
//!   `[READ version+latch]`: valid if unchanged and free — the value was still
//!   the current one when the validation READ ran.
//! * `crc-consistent` (§6, 1 round trip): `[READ tuple]`, check the CRC. Every
//!   mix of lines from different WRITEs fails the check (with probability
//!   1 − 2^−64), so what is returned is a snapshot some WRITE wrote whole — all a
//!   key-value get needs; no after-the-fact validation.
//!
//! The check is probabilistic: a collision would return a torn value undetected.
//! Write: see [`super::optimistic`].

use verbs::wr::WorkRequest;

use super::io::read_bytes;
use super::latch::{self, LeaseWatch};
use super::{
    Decide, LatchAt, Layout, LocalFuture, SchemeSpec, SlotIo, SyncScheme, Unlatch, lines,
    optimistic, put_word, word,
};
use crate::error::KvError;
use crate::stats::OpStats;

/// The CRC-64 scheme.
#[derive(Debug)]
pub(crate) struct Crc {
    spec: SchemeSpec,
    layout: Layout,
    validate: bool,
    unlatch: Unlatch,
    crc_at: usize,
}

/// CRC-64 of a payload and its version.
pub(crate) fn checksum(payload: &[u8], version: u64) -> u64 {
    let mut d = crc64fast::Digest::new();
    d.write(payload);
    d.write(&version.to_le_bytes());
    d.sum64()
}

impl Crc {
    /// The scheme `spec` for `payload`-byte payloads.
    pub(crate) fn new(spec: SchemeSpec, payload: usize) -> Crc {
        let (validate, unlatch) = match spec {
            SchemeSpec::Crc { validate, unlatch } => (validate, unlatch),
            _ => (true, Unlatch::Write),
        };
        let crc_at = payload.div_ceil(8) * 8;
        let tuple = lines(crc_at as u64 + 8 + 16);
        Crc {
            spec,
            layout: Layout {
                payload,
                tuple,
                stride: tuple,
                latch: LatchAt::InTuple(tuple - 8),
            },
            validate,
            unlatch,
            crc_at,
        }
    }

    fn tail(&self) -> usize {
        self.layout.tuple as usize - 16
    }

    /// The payload of a tuple image if its checksum holds.
    fn check(&self, t: &[u8]) -> Option<Vec<u8>> {
        let payload = t.get(..self.layout.payload)?;
        let (crc, version) = (word(t, self.crc_at), word(t, self.tail()));
        if version == 0 && crc == 0 {
            return Some(vec![0; self.layout.payload]);
        }
        (checksum(payload, version) == crc).then(|| payload.to_vec())
    }

    async fn do_read(
        &self,
        io: &SlotIo,
        slot: u64,
        stats: &mut OpStats,
    ) -> Result<Vec<u8>, KvError> {
        let at = io.tuple_addr(&self.layout, slot)?;
        let tail = self.tail();
        let deadline = io.deadline();
        let mut watch = LeaseWatch::default();
        let mut attempt = 0u32;
        loop {
            let mut done = io
                .round_trip(vec![WorkRequest::read(at, self.layout.tuple as u32)], stats)
                .await?;
            let t = read_bytes(done.first_mut())?;
            let latch = word(&t, tail + 8);
            let checked = self.check(&t);
            if checked.is_none() && latch::is_torn(latch) {
                return Err(KvError::corrupt(format!(
                    "slot {slot} fails its CRC-64 check: the client that last latched it \
                     stopped mid-write (its latch was broken after the lease)"
                )));
            }
            if let Some(payload) = checked {
                if !self.validate {
                    return Ok(payload);
                }
                let mut v = io
                    .round_trip(vec![WorkRequest::read(at.offset(tail as u64), 16)], stats)
                    .await?;
                let t2 = read_bytes(v.first_mut())?;
                if word(&t2, 0) == word(&t, tail) && !latch::is_exclusive(word(&t2, 8)) {
                    return Ok(payload);
                }
            }
            if latch::is_exclusive(latch) && watch.expired(latch, io.options().lease) {
                io.break_latch(at.offset(tail as u64 + 8), latch, stats)
                    .await?;
                watch.reset();
            }
            stats.restarts += 1;
            attempt += 1;
            if let Err(e) = io.check_deadline(deadline, attempt, stats) {
                return Err(if self.check(&t).is_none() && !latch::is_exclusive(latch) {
                    KvError::corrupt(format!(
                        "slot {slot} fails its CRC-64 check with no writer holding its latch"
                    ))
                } else {
                    e
                });
            }
            io.backoff(attempt - 1).await;
        }
    }
}

impl SyncScheme for Crc {
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
        let (payload, tail, crc_at) = (self.layout.payload, self.tail(), self.crc_at);
        Box::pin(optimistic::write(
            io,
            &self.layout,
            self.unlatch,
            slot,
            decide,
            move |t| optimistic::sized(t.get(..payload).unwrap_or_default(), payload),
            move |t, new| {
                let version = word(t, tail).wrapping_add(1);
                let body = optimistic::sized(new, payload);
                let mut image = optimistic::sized(&body, tail + 16);
                put_word(&mut image, crc_at, checksum(&body, version));
                put_word(&mut image, tail, version);
                put_word(&mut image, tail + 8, 0);
                image
            },
            stats,
        ))
    }
}
