//! The writer side every optimistic scheme shares (Jasny et al., TODS 2025, §4.1, §4.5): writers
//! latch exclusively — CAS `0 → mine` on the tuple's last word with a speculative
//! READ of the whole tuple in the same batch — then WRITE the new image with its
//! version(s) bumped and unlatch, by the image's last bytes (write-unlatch: the
//! latch is the highest word, and a WRITE lands in ascending address order) or by
//! a CAS posted in the same batch. Two round trips.

use verbs::wr::WorkRequest;

use super::io::{all_ok, atomic};
use super::{Decide, Layout, SlotIo, Unlatch};
use crate::error::KvError;
use crate::stats::OpStats;

/// Latch `slot`, show `decide` the payload `decode` extracts from the tuple image,
/// and write `encode(current image, new payload)` (a whole tuple; its last word,
/// the latch, is set here to the word that releases the latch).
#[allow(clippy::too_many_arguments)]
pub(crate) async fn write(
    io: &SlotIo,
    layout: &Layout,
    unlatch: Unlatch,
    slot: u64,
    decide: Decide<'_>,
    decode: impl Fn(&[u8]) -> Vec<u8>,
    encode: impl Fn(&[u8], &[u8]) -> Vec<u8>,
    stats: &mut OpStats,
) -> Result<bool, KvError> {
    let at = io.tuple_addr(layout, slot)?;
    let latch = io.latch_addr(layout, slot)?;
    let read = WorkRequest::read(at, layout.tuple as u32);
    let mut held = io.acquire_exclusive(latch, Some(read), stats).await?;
    let mine = held.word;
    let current = held.read.take().unwrap_or_default();
    let Some(new) = decide(&decode(&current)) else {
        io.release_exclusive(latch, mine, held.release_word(false), stats)
            .await?;
        return Ok(false);
    };
    // The whole tuple is written: a torn tuple is whole again.
    let restore = held.release_word(true);
    let mut image = encode(&current, &new);
    let len = image.len();
    if let Some(last) = image.get_mut(len.saturating_sub(8)..) {
        last.copy_from_slice(&restore.to_le_bytes());
    }
    match unlatch {
        Unlatch::Write => {
            let done = io
                .round_trip(vec![WorkRequest::write(at, image)], stats)
                .await?;
            all_ok(&done)?;
        }
        Unlatch::Cas => {
            image.truncate(image.len().saturating_sub(8));
            let batch = vec![
                WorkRequest::write(at, image),
                WorkRequest::cas(latch, mine, restore),
            ];
            let done = io.round_trip(batch, stats).await?;
            all_ok(&done[..1])?;
            let old = atomic(done.last())?;
            io.finish_release(latch, old, mine, restore, stats).await?;
        }
    }
    Ok(true)
}

/// Pads or cuts `payload` to exactly `len` bytes.
pub(crate) fn sized(payload: &[u8], len: usize) -> Vec<u8> {
    let mut v = payload.to_vec();
    v.resize(len, 0);
    v
}
