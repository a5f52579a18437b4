//! Moving a key's shortcut word forward, and noticing when it has moved.
//!
//! After linking a node, a writer CASes the key's shortcut from the value it read
//! to its new node, in the background (the write has already returned). The word
//! only ever moves to a later version: on a failed CAS the writer looks at what it
//! found and retries only while that is still older than its node (bounded). Each
//! value the session sees lets it reclaim the superseded nodes the word has moved
//! past ([`crate::clover::reclaim`]). A sweep re-reads the roots of nodes that have waited
//! long, so a key nobody writes again does not pin memory.

use std::rc::Rc;
use std::time::Instant;

use verbs::wr::WorkRequest;

use super::shortcut::{ROOT_READ, Shortcut, decode_root};
use super::state;
use crate::ptr::RemotePtr;
use crate::remote::{atomic_value, read_bytes};
use crate::session::SessionCore;
use crate::stats::OpStats;

/// CAS attempts of one advance.
const ADVANCE_ATTEMPTS: u32 = 4;
/// Superseded nodes a session holds before it sweeps.
const SWEEP_THRESHOLD: usize = 256;
/// Roots re-read per sweep.
const SWEEP_ROOTS: usize = 32;

/// Move the shortcut at `root` from `seen` (its raw value as last read) to `target`,
/// unless it already names `target` or a later node.
///
/// `copies` are the copies of the root word to move, the acting primary's first
/// (just `root` for an unreplicated table). The backups are moved first and the
/// primary only once every backup names `target` or a later node, so a primary
/// that moved past a node implies that every copy did: reclaiming the nodes the
/// primary's word moved past never leaves a backup pointing at reused memory.
pub(crate) async fn advance(
    core: Rc<SessionCore>,
    root: RemotePtr,
    copies: Vec<RemotePtr>,
    seen: u64,
    target: Shortcut,
) {
    let mut stats = OpStats::default();
    let mut primary_seen = seen;
    let mut order: Vec<(usize, RemotePtr)> = copies.iter().copied().enumerate().skip(1).collect();
    order.extend(copies.first().map(|&p| (0, p)));
    for (i, at) in order {
        let (moved, now) = advance_copy(&core, at, seen, target, &mut stats).await;
        if i == 0 {
            primary_seen = now;
        } else if !moved {
            // A backup could not be moved: leave the primary where it is.
            break;
        }
    }
    if let Ok(s) = Shortcut::unpack(primary_seen) {
        state::of(&core).shortcut_seen(&core, root, s);
    }
    core.add_background(&stats);
}

/// Move one copy of a shortcut word; whether it names `target` or a later node
/// afterwards, and its last known value.
async fn advance_copy(
    core: &Rc<SessionCore>,
    at: RemotePtr,
    seen: u64,
    target: Shortcut,
    stats: &mut OpStats,
) -> (bool, u64) {
    let mut seen = seen;
    let Some(t) = core.links.resolve(at, 8) else {
        return (false, seen);
    };
    for attempt in 0..ADVANCE_ATTEMPTS {
        let Ok(current) = Shortcut::unpack(seen) else {
            return (false, seen);
        };
        if !current.is_before(target.version) {
            return (true, seen);
        }
        if attempt > 0 {
            core.backoff(attempt - 1).await;
        }
        let done = core
            .links
            .round_trip(
                vec![(
                    t.memnode,
                    vec![WorkRequest::cas(t.addr, seen, target.pack())],
                )],
                stats,
            )
            .await;
        let Ok(old) = done.and_then(|d| atomic_value(d.first().and_then(|b| b.first()))) else {
            return (false, seen);
        };
        if old == seen {
            return (true, target.pack());
        }
        stats.cas_failures += 1;
        seen = old;
    }
    let moved = Shortcut::unpack(seen).is_ok_and(|s| !s.is_before(target.version));
    (moved, seen)
}

/// When many superseded nodes wait, re-read the roots of the oldest in the background.
pub(crate) fn sweep_if_needed(core: &Rc<SessionCore>) {
    if state::of(core).superseded() < SWEEP_THRESHOLD {
        return;
    }
    let before = Instant::now()
        .checked_sub(core.client.options.memory.grace)
        .unwrap_or_else(Instant::now);
    let roots = state::of(core).roots_to_check(before, SWEEP_ROOTS);
    if roots.is_empty() {
        return;
    }
    core.spawn_background(sweep(core.clone(), roots));
}

async fn sweep(core: Rc<SessionCore>, roots: Vec<RemotePtr>) {
    let mut stats = OpStats::default();
    let mut batches: Vec<(u64, Vec<WorkRequest>)> = Vec::new();
    let mut order: Vec<(usize, usize, RemotePtr)> = Vec::new();
    for r in roots {
        let Some(t) = core.links.resolve(r, ROOT_READ as u64) else {
            continue;
        };
        let b = match batches.iter().position(|(m, _)| *m == t.memnode) {
            Some(b) => b,
            None => {
                batches.push((t.memnode, Vec::new()));
                batches.len() - 1
            }
        };
        if let Some((_, wrs)) = batches.get_mut(b) {
            order.push((b, wrs.len(), r));
            wrs.push(WorkRequest::read(t.addr, ROOT_READ as u32));
        }
    }
    if let Ok(done) = core.links.round_trip(batches, &mut stats).await {
        for (b, i, root) in order {
            if let Ok(buf) = read_bytes(done.get(b).and_then(|x| x.get(i)))
                && let Ok((_, s, _)) = decode_root(buf)
            {
                state::of(&core).shortcut_seen(&core, root, s);
            }
        }
    }
    core.add_background(&stats);
}
