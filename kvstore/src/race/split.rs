//! Splitting a RACE subtable while other clients keep searching and writing.
//!
//! The subtable `S` (local depth `l`, suffix `s`, primary entry `p0 = s`) gives the
//! keys whose suffix bit `l` is one to a new subtable `N` (suffix `s | 2^l`, primary
//! entry `p1`). Every step is a CAS (or a WRITE of memory nobody can reach yet) and
//! is idempotent, so anyone can run the rest of a split whose lock looks abandoned:
//!
//! 1. **Lock**: CAS the primary entry `p0` from its word to the word with the lock
//!    bit. Only this entry is locked; it keeps depth `l` until the unlock, which is
//!    how a helper recognises a split in progress and its depth.
//! 2. **Child**: unless `p1` already names a child, write an empty `N` whose bucket
//!    headers say depth `l + 1`, suffix `s | 2^l` and *moving* (it is being
//!    filled), then CAS `p1` from `S` to `N`. Whoever wins decides `N`; a loser
//!    adopts the winner's (its own copy stays unused in its arena).
//! 3. **Re-point** the other entries of the moving half from `S` to `N` (CAS each).
//! 4. **Headers before slots**: CAS every bucket header of `S` from `(l, s)` to
//!    `(l + 1, s)`. From now on a client that reaches `S` for a moving key sees a
//!    header that does not cover it.
//! 5. **Freeze `S`**: CAS every empty slot to `FROZEN` and every occupied slot `w`
//!    to `w | MARK`, until a pass finds nothing left. A write that read `S` before
//!    compares against the unfrozen word and fails, so `S` stops changing; a write
//!    that got in before the freeze is frozen with it. A tentative slot (an insert
//!    not yet confirmed, [`super::slot::TENTATIVE`]) is frozen like a free one:
//!    that insert has not happened, and its inserter starts over.
//! 6. **Copy then clear**: for every marked slot whose key (read from its KV block)
//!    moves, CAS the word into an empty slot of `N` (the same position when free,
//!    else any empty slot of the key's buckets), then CAS the slot of `S` from
//!    `w | MARK` to `FROZEN`. A search reads `S` before `N`, so it finds the key in
//!    one of them. If two helpers copied the same slot, the clear succeeds once and
//!    the extra copy is undone: **undo** CASes every copy above the lowest identical
//!    one back to empty.
//! 7. CAS `N`'s headers to not moving, **unfreeze** `S` (`FROZEN` → empty,
//!    `w | MARK` → `w`), and **unlock** `p0` with depth `l + 1`.
//!
//! Writers do not write into a frozen or moving subtable: they back off, and after
//! `race_split_timeout` without a change of the lock word they run this procedure
//! themselves from the state they find (**lock breaking by helping**). A split
//! whose holder only paused must not resume after that timeout: like any
//! lease-based lock, the timeout must exceed the longest pause of a live client.

use std::collections::HashMap;
use std::rc::Rc;

use super::area::Entry;
use super::bucket::{BUCKET_BYTES, BucketHeader, Subtable};
use super::directory::LOCKED;
use super::hash::KeyHash;
use super::kv_block::KvBlock;
use super::net::{cas_bulk, exchange, exchange_bulk, read_wr, words_of, write_wr};
use super::slot::{EMPTY, FROZEN, MARK, Slot, is_tentative};
use super::state::TableState;
use crate::error::KvError;
use crate::ptr::RemotePtr;
use crate::remote::{read_bytes, write_done};
use crate::session::SessionCore;
use crate::stats::OpStats;

/// Passes a bulk step makes before giving up (each pass only retries what others
/// changed in between, which only other helpers of the same split do).
const MAX_PASSES: usize = 64;

/// Split the subtable at `subtable`, whose buckets carry `header`, because an
/// insert found no room. Returns when the split is done, or at once when another
/// client holds it (the caller backs off and retries).
pub(crate) async fn split(
    core: &Rc<SessionCore>,
    st: &TableState,
    subtable: RemotePtr,
    header: BucketHeader,
    stats: &mut OpStats,
) -> Result<(), KvError> {
    let l = header.local_depth();
    if l >= st.depth() {
        return Err(KvError::unavailable(format!(
            "table {} is full: a subtable at the directory's full depth {} has no room \
             (use larger subtables: race_subtable_groups)",
            st.name,
            st.depth()
        )));
    }
    let p0 = header.suffix() as usize;
    let (w, e) = st.refresh_entry(core, p0, stats).await?;
    if e.subtable != subtable || e.depth != l || e.locked {
        core.backoff(0).await;
        return Ok(());
    }
    let prev = cas_bulk(
        core,
        &st.table(),
        &[(st.entry_ptr(p0)?, w, w | LOCKED)],
        stats,
    )
    .await?;
    if prev.first() != Some(&w) {
        return Ok(());
    }
    finish(core, st, p0, subtable, l, w | LOCKED, stats).await
}

/// Run (or help finish) the split of `s_ptr` at depth `l` whose primary entry `p0`
/// holds the lock word `locked`.
pub(crate) async fn finish(
    core: &Rc<SessionCore>,
    st: &TableState,
    p0: usize,
    s_ptr: RemotePtr,
    l: u8,
    locked: u64,
    stats: &mut OpStats,
) -> Result<(), KvError> {
    let initial = st.ready.initial;
    let suffix = u32::try_from(p0).map_err(|_| KvError::corrupt("entry index"))?;
    let old = BucketHeader::new(l, suffix)?;
    let stay = BucketHeader::new(l + 1, suffix)?;
    let moved = BucketHeader::new(l + 1, suffix | (1 << l))?;
    let p1 = p0 | (1 << l);

    // 2. The child.
    let (p1_word, p1_entry) = st.refresh_entry(core, p1, stats).await?;
    let n_ptr = if p1_entry.subtable != s_ptr {
        p1_entry.subtable
    } else {
        let n = st.alloc_subtable(core, stats).await?;
        let image = st.subtable_image(moved.with_moving(true));
        let done = exchange(core, write_wr(core, &st.table(), n, image)?, stats).await?;
        for c in &done {
            write_done(Some(c))?;
        }
        let want = Entry {
            subtable: n,
            depth: l + 1,
            locked: false,
        }
        .pack(initial);
        let prev = cas_bulk(
            core,
            &st.table(),
            &[(st.entry_ptr(p1)?, p1_word, want)],
            stats,
        )
        .await?;
        match prev.first() {
            Some(&p) if p == p1_word => n,
            Some(&p) => {
                let e = Entry::unpack(p, initial)?;
                if e.subtable == s_ptr {
                    return Err(KvError::unavailable("split raced on its child entry"));
                }
                e.subtable
            }
            None => return Err(KvError::unavailable("missing completion")),
        }
    };

    // 3. Re-point the moving half of the entries.
    repoint(core, st, p1, l, s_ptr, n_ptr, stats).await?;

    // 4. Headers of S before any slot moves.
    let image = read_subtable(core, st, s_ptr, stats).await?;
    let cas: Vec<_> = headers(&image)
        .filter(|(_, w)| BucketHeader::unpack(*w) == Ok(old))
        .map(|(i, w)| Ok((line_ptr(s_ptr, i)?, w, stay.pack())))
        .collect::<Result<_, KvError>>()?;
    cas_bulk(core, &st.table(), &cas, stats).await?;

    // 5. Freeze S.
    freeze(core, st, s_ptr, stats).await?;

    // 6. Copy then clear, with undo of extra copies.
    move_slots(core, st, s_ptr, n_ptr, moved, stats).await?;
    undo_duplicates(core, st, n_ptr, stats).await?;

    // 7. The child is complete; thaw the parent; unlock.
    let image = read_subtable(core, st, n_ptr, stats).await?;
    let moving = moved.with_moving(true).pack();
    let cas: Vec<_> = headers(&image)
        .filter(|(_, w)| *w == moving)
        .map(|(i, w)| Ok((line_ptr(n_ptr, i)?, w, moved.pack())))
        .collect::<Result<_, KvError>>()?;
    cas_bulk(core, &st.table(), &cas, stats).await?;
    thaw(core, st, s_ptr, stats).await?;
    let unlocked = Entry {
        subtable: s_ptr,
        depth: l + 1,
        locked: false,
    }
    .pack(initial);
    let prev = cas_bulk(
        core,
        &st.table(),
        &[(st.entry_ptr(p0)?, locked, unlocked)],
        stats,
    )
    .await?;
    if let Some(&p) = prev.first() {
        st.set_entry(p0, if p == locked { unlocked } else { p });
    }
    Ok(())
}

/// Point every entry of the moving half (`p1` plus multiples of `2^(l+1)`) that
/// still names `s_ptr` at `n_ptr`: one read of the directory, then CASes; an
/// entry whose CAS fails is retried with the word found, until it names `n_ptr`.
async fn repoint(
    core: &Rc<SessionCore>,
    st: &TableState,
    p1: usize,
    l: u8,
    s_ptr: RemotePtr,
    n_ptr: RemotePtr,
    stats: &mut OpStats,
) -> Result<(), KvError> {
    let initial = st.ready.initial;
    let want = Entry {
        subtable: n_ptr,
        depth: l + 1,
        locked: false,
    }
    .pack(initial);
    st.refresh_all(core, stats).await?;
    let mut todo: Vec<(usize, u64)> = Vec::new();
    for j in (p1..1usize << st.depth()).step_by(1 << (l + 1)) {
        let e = st.entry(j)?;
        if e.subtable == s_ptr {
            todo.push((j, e.pack(initial)));
        }
    }
    for _ in 0..MAX_PASSES {
        if todo.is_empty() {
            return Ok(());
        }
        let cas = todo
            .iter()
            .map(|&(j, w)| Ok((st.entry_ptr(j)?, w, want)))
            .collect::<Result<Vec<_>, KvError>>()?;
        let prev = cas_bulk(core, &st.table(), &cas, stats).await?;
        let mut again = Vec::new();
        for (&(j, w), p) in todo.iter().zip(prev) {
            if p == w {
                st.set_entry(j, want);
                continue;
            }
            st.set_entry(j, p);
            if Entry::unpack(p, initial)?.subtable == s_ptr {
                again.push((j, p));
            }
        }
        todo = again;
    }
    Err(KvError::unavailable(
        "re-pointing directory entries did not settle",
    ))
}

/// The whole subtable at `at`, as words.
async fn read_subtable(
    core: &Rc<SessionCore>,
    st: &TableState,
    at: RemotePtr,
    stats: &mut OpStats,
) -> Result<Vec<u64>, KvError> {
    let done = exchange(
        core,
        vec![read_wr(core, &st.table(), at, st.geometry.bytes())?],
        stats,
    )
    .await?;
    Ok(words_of(read_bytes(done.first())?))
}

const WORDS_PER_BUCKET: usize = BUCKET_BYTES / 8;

/// `(bucket line, header word)` of every bucket in a subtable image.
fn headers(image: &[u64]) -> impl Iterator<Item = (usize, u64)> + '_ {
    image
        .chunks_exact(WORDS_PER_BUCKET)
        .map(|b| b.first().copied().unwrap_or(0))
        .enumerate()
}

/// `(word index, word)` of every slot in a subtable image.
fn slots(image: &[u64]) -> impl Iterator<Item = (usize, u64)> + '_ {
    image
        .iter()
        .copied()
        .enumerate()
        .filter(|(i, _)| i % WORDS_PER_BUCKET != 0)
}

fn line_ptr(base: RemotePtr, line: usize) -> Result<RemotePtr, KvError> {
    word_ptr(base, line * WORDS_PER_BUCKET)
}

fn word_ptr(base: RemotePtr, word: usize) -> Result<RemotePtr, KvError> {
    base.checked_add(8 * word as u64)
        .ok_or_else(|| KvError::corrupt("subtable outside the address space"))
}

async fn freeze(
    core: &Rc<SessionCore>,
    st: &TableState,
    s_ptr: RemotePtr,
    stats: &mut OpStats,
) -> Result<(), KvError> {
    for _ in 0..MAX_PASSES {
        let image = read_subtable(core, st, s_ptr, stats).await?;
        let cas: Vec<_> = slots(&image)
            .filter_map(|(i, w)| match w {
                EMPTY => Some((i, w, FROZEN)),
                FROZEN => None,
                // An unconfirmed insert is dropped: its inserter's finalising CAS
                // fails and it starts over once the split is done.
                w if is_tentative(w) => Some((i, w, FROZEN)),
                w if w & MARK == 0 => Some((i, w, w | MARK)),
                _ => None,
            })
            .map(|(i, w, s)| Ok((word_ptr(s_ptr, i)?, w, s)))
            .collect::<Result<_, KvError>>()?;
        if cas.is_empty() {
            return Ok(());
        }
        cas_bulk(core, &st.table(), &cas, stats).await?;
    }
    Err(KvError::unavailable("freezing a subtable did not settle"))
}

async fn thaw(
    core: &Rc<SessionCore>,
    st: &TableState,
    s_ptr: RemotePtr,
    stats: &mut OpStats,
) -> Result<(), KvError> {
    for _ in 0..MAX_PASSES {
        let image = read_subtable(core, st, s_ptr, stats).await?;
        let cas: Vec<_> = slots(&image)
            .filter_map(|(i, w)| match w {
                FROZEN => Some((i, w, EMPTY)),
                EMPTY => None,
                w if w & MARK != 0 => Some((i, w, w & !MARK)),
                _ => None,
            })
            .map(|(i, w, s)| Ok((word_ptr(s_ptr, i)?, w, s)))
            .collect::<Result<_, KvError>>()?;
        if cas.is_empty() {
            return Ok(());
        }
        cas_bulk(core, &st.table(), &cas, stats).await?;
    }
    Err(KvError::unavailable("thawing a subtable did not settle"))
}

async fn move_slots(
    core: &Rc<SessionCore>,
    st: &TableState,
    s_ptr: RemotePtr,
    n_ptr: RemotePtr,
    moved: BucketHeader,
    stats: &mut OpStats,
) -> Result<(), KvError> {
    let mut hashes: HashMap<u64, KeyHash> = HashMap::new();
    for _ in 0..MAX_PASSES {
        let (s_img, n_img) = {
            let done = exchange(
                core,
                vec![
                    read_wr(core, &st.table(), s_ptr, st.geometry.bytes())?,
                    read_wr(core, &st.table(), n_ptr, st.geometry.bytes())?,
                ],
                stats,
            )
            .await?;
            (
                words_of(read_bytes(done.first())?),
                words_of(read_bytes(done.get(1))?),
            )
        };
        // The keys of marked slots not seen yet, from their (immutable) KV blocks.
        let marked: Vec<(usize, u64, Slot)> = slots(&s_img)
            .filter(|(_, w)| *w != FROZEN && *w != EMPTY && w & MARK != 0)
            .filter_map(|(i, w)| Slot::unpack(w & !MARK).ok().flatten().map(|s| (i, w, s)))
            .collect();
        let unknown: Vec<Slot> = marked
            .iter()
            .map(|(_, _, s)| *s)
            .filter(|s| !hashes.contains_key(&s.pack()))
            .collect();
        let wrs = unknown
            .iter()
            .map(|s| read_wr(core, &st.table(), s.ptr(), s.read_len() as u64))
            .collect::<Result<Vec<_>, _>>()?;
        for (s, d) in unknown.iter().zip(exchange_bulk(core, wrs, stats).await?) {
            let b = KvBlock::parse(read_bytes(Some(&d))?)?;
            hashes.insert(s.pack(), KeyHash::of(b.key()));
        }
        let moving: Vec<(usize, u64, Slot)> = marked
            .into_iter()
            .filter(|(_, _, s)| hashes.get(&s.pack()).is_some_and(|h| moved.covers(h)))
            .collect();
        if moving.is_empty() {
            return Ok(());
        }
        // Copy: into N at the same position if free, else any free slot of the key's buckets.
        let mut taken: Vec<usize> = Vec::new();
        let mut copies = Vec::new();
        let mut ready = Vec::new();
        for &(i, w, s) in &moving {
            let v = s.pack();
            if n_img.contains(&v) {
                ready.push((i, w));
                continue;
            }
            let hash = hashes.get(&v).copied().unwrap_or(KeyHash { h1: 0, h2: 0 });
            let target = std::iter::once(i)
                .chain(candidate_words(st.geometry, &hash))
                .find(|&t| n_img.get(t) == Some(&EMPTY) && !taken.contains(&t));
            if let Some(t) = target {
                taken.push(t);
                copies.push((i, w, t, v));
            }
        }
        let cas: Vec<_> = copies
            .iter()
            .map(|&(_, _, t, v)| Ok((word_ptr(n_ptr, t)?, EMPTY, v)))
            .collect::<Result<_, KvError>>()?;
        let prev = cas_bulk(core, &st.table(), &cas, stats).await?;
        for (&(i, w, _, _), p) in copies.iter().zip(prev) {
            if p == EMPTY {
                ready.push((i, w));
            }
        }
        // Clear the parent's slots whose word is now in the child.
        let cas: Vec<_> = ready
            .iter()
            .map(|&(i, w)| Ok((word_ptr(s_ptr, i)?, w, FROZEN)))
            .collect::<Result<_, KvError>>()?;
        cas_bulk(core, &st.table(), &cas, stats).await?;
    }
    Err(KvError::unavailable("moving slots did not settle"))
}

/// Word indices of the slots of a key's two combined buckets in a subtable.
fn candidate_words(geometry: Subtable, hash: &KeyHash) -> Vec<usize> {
    let mut out = Vec::new();
    for b in geometry.candidates(hash) {
        for off in [Subtable::main_offset(b), Subtable::overflow_offset(b)] {
            let first = (off / 8) as usize + 1;
            out.extend(first..first + WORDS_PER_BUCKET - 1);
        }
    }
    out
}

/// Empty every copy of a word in `n_ptr` above its lowest copy (the undo of copies
/// whose clear another helper won).
async fn undo_duplicates(
    core: &Rc<SessionCore>,
    st: &TableState,
    n_ptr: RemotePtr,
    stats: &mut OpStats,
) -> Result<(), KvError> {
    let image = read_subtable(core, st, n_ptr, stats).await?;
    let mut first: HashMap<u64, usize> = HashMap::new();
    let mut cas = Vec::new();
    for (i, w) in slots(&image) {
        if w == EMPTY || w == FROZEN {
            continue;
        }
        if let std::collections::hash_map::Entry::Vacant(v) = first.entry(w) {
            v.insert(i);
        } else {
            cas.push((word_ptr(n_ptr, i)?, w, EMPTY));
        }
    }
    cas_bulk(core, &st.table(), &cas, stats).await?;
    Ok(())
}
