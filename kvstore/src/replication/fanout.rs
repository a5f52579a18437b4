//! Where the verbs of a replicated table go, and deciding a control word across
//! its copies: the one place that sends writes to backups and syncing members.
//!
//! - A READ goes to the acting primary only ([`primary_target`]).
//! - A WRITE goes to every member and every syncing member, in the same round
//!   trip ([`write_targets`]).
//! - A CAS of a control word is decided across the members by FUSEE's SNAPSHOT
//!   rule ([`cas_words`], [`super::decide`]): the backups first, in one round trip,
//!   then the primary, whose CAS is the linearization point. Syncing members get
//!   the backups' CASes (and the winner's fixes) but what they return is ignored.
//!
//! For an unreplicated table every function degenerates to the single copy and a
//! CAS costs its one round trip.

use verbs::wr::{Completion, WorkRequest};

use dmkv_api::metadata::TableDescription;

use super::copies::{members, resolve_all};
use super::decide::{Decision, decide, decide_split};
use super::settle::{self, lost_result, primary_proposal};
use crate::error::KvError;
use crate::ptr::RemotePtr;
use crate::remote::{Links, Target, atomic_value, read_bytes};
use crate::session::SessionCore;
use crate::stats::OpStats;

/// The memnodes being brought up to date for the replica set of `home`
/// (`TableDescription::syncing` at the set's position); they never include a
/// member of the set.
pub(crate) fn syncing_members(table: &TableDescription, home: u64) -> Vec<u64> {
    let set = members(table, home);
    let mut joining = super::copies::syncing(table, home);
    joining.retain(|m| !set.contains(m));
    joining
}

/// The verbs address of the acting primary's copy of the `len` bytes at `ptr`.
pub(crate) fn primary_target(
    links: &Links,
    table: &TableDescription,
    ptr: RemotePtr,
    len: u64,
) -> Result<Target, KvError> {
    resolve_all(links, table, ptr, len)?
        .into_iter()
        .next()
        .ok_or_else(|| KvError::corrupt(format!("no copy of {ptr:?} is known")))
}

/// The copies of the `len` bytes at `ptr` on the syncing members of its set (a
/// syncing member this session cannot reach is left out: the copy it gets is
/// checked by whoever brings it up to date).
pub(crate) fn syncing_targets(
    links: &Links,
    table: &TableDescription,
    ptr: RemotePtr,
    len: u64,
) -> Vec<Target> {
    syncing_members(table, u64::from(ptr.memnode()))
        .into_iter()
        .filter_map(|m| {
            let copy = RemotePtr::new(u8::try_from(m).ok()?, ptr.offset()).ok()?;
            links.resolve(copy, len)
        })
        .collect()
}

/// Where a WRITE of the `len` bytes at `ptr` goes: every member (primary first),
/// then every syncing member.
pub(crate) fn write_targets(
    links: &Links,
    table: &TableDescription,
    ptr: RemotePtr,
    len: u64,
) -> Result<Vec<Target>, KvError> {
    let mut all = resolve_all(links, table, ptr, len)?;
    all.extend(syncing_targets(links, table, ptr, len));
    Ok(all)
}

/// Post every `(memnode, work request)` (one doorbell per memnode, in the given
/// order) and wait for all: one round trip. Completions come back in the order of
/// `wrs`.
pub(crate) async fn exchange_targets(
    core: &SessionCore,
    wrs: Vec<(u64, WorkRequest)>,
    stats: &mut OpStats,
) -> Result<Vec<Completion>, KvError> {
    if wrs.is_empty() {
        return Ok(Vec::new());
    }
    let mut batches: Vec<(u64, Vec<WorkRequest>)> = Vec::new();
    let mut place = Vec::with_capacity(wrs.len());
    for (memnode, wr) in wrs {
        let b = match batches.iter().position(|(m, _)| *m == memnode) {
            Some(b) => b,
            None => {
                batches.push((memnode, Vec::new()));
                batches.len() - 1
            }
        };
        let list = &mut batches[b].1;
        place.push((b, list.len()));
        list.push(wr);
    }
    let mut done: Vec<Vec<Option<Completion>>> = core
        .links
        .round_trip(batches, stats)
        .await?
        .into_iter()
        .map(|b| b.into_iter().map(Some).collect())
        .collect();
    place
        .into_iter()
        .map(|(b, i)| {
            done.get_mut(b)
                .and_then(|v| v.get_mut(i))
                .and_then(Option::take)
                .ok_or_else(|| KvError::unavailable("missing completion"))
        })
        .collect()
}

/// One control word to change by CAS on every copy.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct WordCas {
    /// The word (its home copy).
    pub ptr: RemotePtr,
    /// What the primary is expected to hold.
    pub compare: u64,
    /// The new value, on every copy.
    pub swap: u64,
    /// What the backups are expected to hold: `compare`, except for a word whose
    /// primary holds a mark the backups never get (a RACE insert's tentative slot,
    /// which only the primary's readers need).
    pub backup_compare: u64,
}

impl WordCas {
    /// A CAS expecting the same value on every copy.
    pub(crate) fn new(ptr: RemotePtr, compare: u64, swap: u64) -> WordCas {
        WordCas {
            ptr,
            compare,
            swap,
            backup_compare: compare,
        }
    }
}

/// What deciding one word needs between rounds.
struct Pending {
    primary: Target,
    backups: Vec<Target>,
    syncing: Vec<Target>,
    /// What each backup's CAS returned.
    seen: Vec<u64>,
    /// What each syncing member's CAS returned.
    synced: Vec<u64>,
    decision: Decision,
}

/// CAS every word of `words` on every copy, deciding each across the replicas
/// (see the [module documentation](self)); returns, per word, what a CAS of the
/// primary alone would have: `compare` when this call's value is now the word's
/// (on every member), else the value that won (or that the primary holds).
///
/// Round trips: one (the primary's CAS) for an unreplicated table; two
/// uncontended for a replicated one (the backups', then the primary's); a split
/// among three copies adds a READ of the primary, a decided loser a fix-up round.
///
/// A contender that finds every backup holding another value helps that value
/// onto the primary (CAS from the `compare` it expected), so that a writer that
/// failed between its backup CASes and its primary CAS blocks nobody. A value
/// already on the primary when our own CAS reaches it counts as ours when we own
/// its round: a helper may have put it there. Conversely, a contender whose CAS
/// installs a value that several proposed (a zero: two deletes of one key) only
/// helped when another contender owns the round ([`super::settle`]).
pub(crate) async fn cas_words(
    core: &SessionCore,
    table: &TableDescription,
    words: &[WordCas],
    stats: &mut OpStats,
) -> Result<Vec<u64>, KvError> {
    let mut pending = Vec::with_capacity(words.len());
    for w in words {
        let mut all = resolve_all(&core.links, table, w.ptr, 8)?.into_iter();
        let primary = all
            .next()
            .ok_or_else(|| KvError::corrupt("a replica set without members"))?;
        pending.push(Pending {
            primary,
            backups: all.collect(),
            syncing: syncing_targets(&core.links, table, w.ptr, 8),
            seen: Vec::new(),
            synced: Vec::new(),
            decision: Decision::Win { fix: Vec::new() },
        });
    }
    // Round 1: every backup (and syncing member) of every word.
    let mut round = Vec::new();
    for (w, p) in words.iter().zip(&pending) {
        for t in p.backups.iter().chain(&p.syncing) {
            round.push((
                t.memnode,
                WorkRequest::cas(t.addr, w.backup_compare, w.swap),
            ));
        }
    }
    if !round.is_empty() {
        let done = exchange_targets(core, round, stats).await?;
        let mut it = done.iter();
        for (w, p) in words.iter().zip(pending.iter_mut()) {
            for _ in &p.backups {
                p.seen.push(atomic_value(it.next())?);
            }
            for _ in &p.syncing {
                p.synced.push(atomic_value(it.next())?);
            }
            let seen: Vec<Option<u64>> = p.seen.iter().copied().map(Some).collect();
            p.decision = decide(w.backup_compare, w.swap, &seen);
        }
    }
    // A split among the backups: read the primaries (one round trip).
    let split: Vec<usize> = (0..pending.len())
        .filter(|&i| pending[i].decision == Decision::ReadPrimary)
        .collect();
    let mut primary_now = vec![None; pending.len()];
    if !split.is_empty() {
        let reads = split
            .iter()
            .map(|&i| {
                (
                    pending[i].primary.memnode,
                    WorkRequest::read(pending[i].primary.addr, 8),
                )
            })
            .collect();
        let done = exchange_targets(core, reads, stats).await?;
        for (&i, c) in split.iter().zip(&done) {
            let now = word_of(read_bytes(Some(c))?)?;
            let w = &words[i];
            let p = &mut pending[i];
            let seen: Vec<Option<u64>> = p.seen.iter().copied().map(Some).collect();
            // The round is over once the primary moved away from what we expected.
            let as_backup = if now == w.compare {
                w.backup_compare
            } else {
                w.backup_compare.wrapping_add(1)
            };
            p.decision = decide_split(w.backup_compare, w.swap, &seen, as_backup);
            primary_now[i] = Some(now);
        }
    }
    // Round 2 (only after a split): winners move the other backups to their value,
    // and the syncing members another contender reached first.
    let mut fixes = Vec::new();
    for (w, p) in words.iter().zip(&pending) {
        if let Decision::Win { fix } = &p.decision {
            for &(i, theirs) in fix {
                if let Some(t) = p.backups.get(i) {
                    fixes.push((t.memnode, WorkRequest::cas(t.addr, theirs, w.swap)));
                }
            }
            for (t, &was) in p.syncing.iter().zip(&p.synced) {
                if was != w.backup_compare && was != w.swap {
                    fixes.push((t.memnode, WorkRequest::cas(t.addr, was, w.swap)));
                }
            }
        }
    }
    if !fixes.is_empty() {
        exchange_targets(core, fixes, stats).await?;
    }
    // Round 3: the primaries — ours for the winners, the winner's for a loser that
    // finds every backup holding it.
    let mut result: Vec<u64> = vec![0; words.len()];
    let mut last = Vec::new();
    let mut posted = Vec::new();
    for (i, (w, p)) in words.iter().zip(&pending).enumerate() {
        match (&p.decision, primary_proposal(w, &p.decision, &p.seen)) {
            (Decision::ReadPrimary | Decision::ReplicaFailed, _) => {
                return Err(KvError::unavailable(
                    "a replica of a control word did not answer; the write may or may not \
                     take effect once the table's configuration changes",
                ));
            }
            (_, Some(v)) => {
                last.push((
                    p.primary.memnode,
                    WorkRequest::cas(p.primary.addr, w.compare, v),
                ));
                posted.push((i, v));
            }
            (Decision::Lose { winner }, None) => {
                result[i] = lost_result(w, *winner, &p.seen, primary_now[i]);
            }
            (Decision::Win { .. }, None) => {
                return Err(KvError::corrupt("a round's winner posted nothing"));
            }
        }
    }
    let done = exchange_targets(core, last, stats).await?;
    let mut undo = Vec::new();
    for (&(i, value), c) in posted.iter().zip(&done) {
        let was = atomic_value(Some(c))?;
        let w = &words[i];
        let p = &pending[i];
        let settled = settle::posted(w, &p.decision, &p.seen, value, was);
        if settled.helped {
            stats.helped_links += 1;
        }
        if settled.undo {
            for t in &p.backups {
                undo.push((
                    t.memnode,
                    WorkRequest::cas(t.addr, w.swap, w.backup_compare),
                ));
            }
        }
        result[i] = settled.result;
    }
    if !undo.is_empty() {
        exchange_targets(core, undo, stats).await?;
    }
    Ok(result)
}

fn word_of(b: &[u8]) -> Result<u64, KvError> {
    b.get(..8)
        .and_then(|s| s.try_into().ok())
        .map(u64::from_le_bytes)
        .ok_or_else(|| KvError::unavailable("short READ"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use dmkv_api::metadata::TableLayout;

    fn table(sets: Vec<Vec<u64>>, syncing: Vec<Vec<u64>>) -> TableDescription {
        TableDescription {
            name: "t".into(),
            id: 1,
            value_limit: 64,
            memnodes: sets.iter().filter_map(|s| s.first().copied()).collect(),
            replication: 2,
            created_at_ms: 0,
            layout: TableLayout::Clover,
            memory: Default::default(),
            health: Default::default(),
            replica_sets: sets,
            syncing,
            config_epoch: 0,
            writes_paused: false,
            rereplication: Vec::new(),
            feed: None,
        }
    }

    #[test]
    fn syncing_members_follow_their_sets_position() {
        let t = table(vec![vec![1, 2], vec![2, 3]], vec![vec![3], vec![]]);
        assert_eq!(syncing_members(&t, 1), vec![3]);
        assert!(syncing_members(&t, 2).is_empty());
        // A syncing member that is already a member is not written twice.
        let t = table(vec![vec![1, 2]], vec![vec![2, 4]]);
        assert_eq!(syncing_members(&t, 1), vec![4]);
        // Tables without the field (older services) have no syncing members.
        let t = table(vec![vec![1, 2]], vec![]);
        assert!(syncing_members(&t, 1).is_empty());
        assert!(syncing_members(&t, 9).is_empty());
    }

    #[test]
    fn a_word_cas_expects_the_same_value_on_every_copy_by_default() {
        let p = RemotePtr::new(1, 64).unwrap();
        let w = WordCas::new(p, 5, 6);
        assert_eq!(w.backup_compare, 5);
        assert_eq!((w.compare, w.swap), (5, 6));
    }
}
