//! FaRM per-cache-line versions (Jasny et al., TODS 2025, §4.3, Fig. 12a), with the relaxed
//! consistent read of §6.
//!
//! Layout: every 64-byte line starts with the tuple's version (8 bytes) followed
//! by 56 payload bytes; the last line ends with the latch word instead of its last
//! 8 payload bytes. Callers see the payload contiguous: readers gather it from
//! the lines, writers scatter it. A line is read and written atomically and a
//! WRITE stores every line with the new version, so a READ whose lines all show
//! one version saw one WRITE's image — whatever order it observed them in.
//!
//! * `farm` (latch semantics, 2 round trips): `[READ tuple]`, all versions
//!   equal, then `[READ last line]`: version unchanged and latch free.
//! * `farm-consistent` (§6, 1 round trip): `[READ tuple]`, all versions equal.
//!
//! Storage overhead: 8 bytes per line (12.5%). Write: see [`super::optimistic`].

use verbs::wr::WorkRequest;

use super::io::read_bytes;
use super::latch::{self, LeaseWatch};
use super::{
    Decide, LatchAt, Layout, LocalFuture, SchemeSpec, SlotIo, SyncScheme, Unlatch, optimistic,
    put_word, word,
};
use crate::error::KvError;
use crate::stats::OpStats;

/// Payload bytes per line.
const PER_LINE: usize = 56;

/// The FaRM scheme.
#[derive(Debug)]
pub(crate) struct Farm {
    spec: SchemeSpec,
    layout: Layout,
    validate: bool,
    unlatch: Unlatch,
    lines: usize,
}

/// Where payload byte `i` lives in the tuple.
fn place(i: usize) -> usize {
    (i / PER_LINE) * 64 + 8 + i % PER_LINE
}

impl Farm {
    /// The scheme `spec` for `payload`-byte payloads.
    pub(crate) fn new(spec: SchemeSpec, payload: usize) -> Farm {
        let (validate, unlatch) = match spec {
            SchemeSpec::Farm { validate, unlatch } => (validate, unlatch),
            _ => (true, Unlatch::Write),
        };
        let n = (payload + 8).div_ceil(PER_LINE).max(1);
        let tuple = 64 * n as u64;
        Farm {
            spec,
            layout: Layout {
                payload,
                tuple,
                stride: tuple,
                latch: LatchAt::InTuple(tuple - 8),
            },
            validate,
            unlatch,
            lines: n,
        }
    }

    /// The common version of every line, if they agree.
    fn version(&self, t: &[u8]) -> Option<u64> {
        let v = word(t, 0);
        (1..self.lines).all(|l| word(t, 64 * l) == v).then_some(v)
    }

    fn gather(&self, t: &[u8]) -> Vec<u8> {
        let mut out = vec![0u8; self.layout.payload];
        let mut i = 0;
        while i < out.len() {
            let n = (PER_LINE - i % PER_LINE).min(out.len() - i);
            let src = place(i);
            if let (Some(d), Some(s)) = (out.get_mut(i..i + n), t.get(src..src + n)) {
                d.copy_from_slice(s);
            }
            i += n;
        }
        out
    }

    fn scatter(&self, payload: &[u8], version: u64) -> Vec<u8> {
        let mut image = vec![0u8; self.layout.tuple as usize];
        for l in 0..self.lines {
            put_word(&mut image, 64 * l, version);
        }
        let mut i = 0;
        let len = payload.len().min(self.layout.payload);
        while i < len {
            let n = (PER_LINE - i % PER_LINE).min(len - i);
            let dst = place(i);
            if let (Some(d), Some(s)) = (image.get_mut(dst..dst + n), payload.get(i..i + n)) {
                d.copy_from_slice(s);
            }
            i += n;
        }
        image
    }

    async fn do_read(
        &self,
        io: &SlotIo,
        slot: u64,
        stats: &mut OpStats,
    ) -> Result<Vec<u8>, KvError> {
        let at = io.tuple_addr(&self.layout, slot)?;
        let last = self.layout.tuple - 64;
        let latch_at = self.layout.tuple as usize - 8;
        let deadline = io.deadline();
        let mut watch = LeaseWatch::default();
        let mut attempt = 0u32;
        loop {
            let mut done = io
                .round_trip(vec![WorkRequest::read(at, self.layout.tuple as u32)], stats)
                .await?;
            let t = read_bytes(done.first_mut())?;
            let latch = word(&t, latch_at);
            let version = self.version(&t);
            if version.is_none() && latch::is_torn(latch) {
                return Err(KvError::corrupt(format!(
                    "slot {slot}'s cache-line versions disagree: the client that last latched \
                     it stopped mid-write (its latch was broken after the lease)"
                )));
            }
            if let Some(v) = version {
                if !self.validate {
                    return Ok(self.gather(&t));
                }
                let mut again = io
                    .round_trip(vec![WorkRequest::read(at.offset(last), 64)], stats)
                    .await?;
                let line = read_bytes(again.first_mut())?;
                if word(&line, 0) == v && !latch::is_exclusive(word(&line, 56)) {
                    return Ok(self.gather(&t));
                }
            }
            if latch::is_exclusive(latch) && watch.expired(latch, io.options().lease) {
                io.break_latch(at.offset(latch_at as u64), latch, stats)
                    .await?;
                watch.reset();
            }
            io.restart(deadline, &mut attempt, stats).await?;
        }
    }
}

impl SyncScheme for Farm {
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
        Box::pin(optimistic::write(
            io,
            &self.layout,
            self.unlatch,
            slot,
            decide,
            |t| self.gather(t),
            |t, new| self.scatter(new, word(t, 0).wrapping_add(1)),
            stats,
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scatter_gather() {
        for payload in [1usize, 40, 48, 49, 56, 100, 1000, 4072] {
            let f = Farm::new(SchemeSpec::catalog(false)[5], payload);
            assert!(f.layout.tuple as usize >= payload + 8 * f.lines + 8);
            let data: Vec<u8> = (0..payload).map(|i| (i * 7 + 1) as u8).collect();
            let img = f.scatter(&data, 9);
            assert_eq!(f.version(&img), Some(9));
            assert_eq!(word(&img, f.layout.tuple as usize - 8), 0);
            assert_eq!(f.gather(&img), data);
        }
    }
}
