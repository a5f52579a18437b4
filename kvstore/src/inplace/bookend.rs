//! Bookend versioning — **broken**, a demonstration only (Jasny et al., TODS 2025, §1, Fig. 1;
//! §6 "Other incorrect schemes"; anti-pattern #1).
//!
//! Layout: `head version u64 | payload | pad | tail version u64 | latch u64`.
//! Writers latch, then WRITE head, payload and tail with a new version in one
//! ascending WRITE (and unlatch). Readers READ the tuple once and accept it when
//! head = tail. That relies on the READ observing lines in ascending order, which
//! RDMA does not promise: a READ may fetch the head and tail lines before a
//! concurrent WRITE and the lines between after it (or the reverse), and accept
//! a torn value. With one or two lines head and tail cover every line, so tuples
//! of up to 128 bytes happen to be safe; from three lines on they are not.
//!
//! Only constructible through [`UnsafeDemo`](super::UnsafeDemo).

use verbs::wr::WorkRequest;

use super::io::read_bytes;
use super::{
    Decide, LatchAt, Layout, LocalFuture, SchemeSpec, SlotIo, SyncScheme, Unlatch, lines,
    optimistic, put_word, word,
};
use crate::error::KvError;
use crate::stats::OpStats;

/// The bookend scheme.
#[derive(Debug)]
pub(crate) struct Bookend {
    spec: SchemeSpec,
    layout: Layout,
}

impl Bookend {
    /// The scheme for `payload`-byte payloads (`spec` must be [`SchemeSpec::Bookend`]).
    pub(crate) fn new(spec: SchemeSpec, payload: usize) -> Bookend {
        let tuple = lines(8 + payload as u64 + 16);
        Bookend {
            spec,
            layout: Layout {
                payload,
                tuple,
                stride: tuple,
                latch: LatchAt::InTuple(tuple - 8),
            },
        }
    }

    fn tail(&self) -> usize {
        self.layout.tuple as usize - 16
    }

    async fn do_read(
        &self,
        io: &SlotIo,
        slot: u64,
        stats: &mut OpStats,
    ) -> Result<Vec<u8>, KvError> {
        let at = io.tuple_addr(&self.layout, slot)?;
        let deadline = io.deadline();
        let mut attempt = 0u32;
        loop {
            let mut done = io
                .round_trip(vec![WorkRequest::read(at, self.layout.tuple as u32)], stats)
                .await?;
            let t = read_bytes(done.first_mut())?;
            if word(&t, 0) == word(&t, self.tail()) {
                return Ok(t
                    .get(8..8 + self.layout.payload)
                    .unwrap_or_default()
                    .to_vec());
            }
            io.restart(deadline, &mut attempt, stats).await?;
        }
    }
}

impl SyncScheme for Bookend {
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
        let (payload, tail) = (self.layout.payload, self.tail());
        Box::pin(optimistic::write(
            io,
            &self.layout,
            Unlatch::Write,
            slot,
            decide,
            move |t| optimistic::sized(t.get(8..8 + payload).unwrap_or_default(), payload),
            move |t, new| {
                let version = word(t, 0).wrapping_add(1);
                let mut image = vec![0u8; tail + 16];
                put_word(&mut image, 0, version);
                if let Some(d) = image.get_mut(8..8 + payload) {
                    d.copy_from_slice(&optimistic::sized(new, payload));
                }
                put_word(&mut image, tail, version);
                image
            },
            stats,
        ))
    }
}
