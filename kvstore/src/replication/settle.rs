//! The end of a round of a replicated control word ([`super::fanout::cas_words`]):
//! what a contender CASes onto the primary once the backups decided the round,
//! and what the primary's answer means for the write it carried. Pure functions,
//! so that whole rounds can be simulated step by step (see the tests).
//!
//! Every contender of a round expects the same `compare` on the primary. The
//! primary leaves `compare` by exactly one CAS, and it carries the round's value
//! — posted by the round's winner, or by a contender that helps it (a loser that
//! finds every backup holding the value, or another proposer of the same value).
//! So the contender whose CAS changed the primary is not always the one whose
//! write happened: a write is the **owner's** ([`owns`]), and a contender that
//! does not own the round's value reports its write as lost even when its own CAS
//! installed that value.

use super::decide::Decision;
use super::fanout::WordCas;

/// What a contender CASes onto the primary, from `w.compare`, after deciding the
/// round: its own value when it won, the winner's when it lost and every backup
/// already holds the winner's value (the winner may have failed before its
/// primary CAS: helping it means nobody is blocked), nothing otherwise. `seen` is
/// what its backup CASes returned.
pub(crate) fn primary_proposal(w: &WordCas, decision: &Decision, seen: &[u64]) -> Option<u64> {
    match decision {
        Decision::Win { .. } => Some(w.swap),
        Decision::Lose { winner: Some(v) } if !seen.is_empty() && seen.iter().all(|s| s == v) => {
            Some(*v)
        }
        _ => None,
    }
}

/// What a contender that lost without posting a primary CAS reports: the
/// primary's value if it read one other than `compare` (the round is over), else
/// the winner the backups named, else the smallest other value on them.
pub(crate) fn lost_result(
    w: &WordCas,
    winner: Option<u64>,
    seen: &[u64],
    primary_now: Option<u64>,
) -> u64 {
    primary_now
        .filter(|&now| now != w.compare)
        .or(winner)
        .or_else(|| seen.iter().copied().filter(|&s| s != w.swap).min())
        .unwrap_or(w.swap)
}

/// What a contender's primary CAS of `value` (from [`primary_proposal`]) that
/// answered `was` means for its write.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Posted {
    /// What `cas_words` answers for the word: `w.compare` iff the write happened.
    pub result: u64,
    /// The backups hold our value although the write did not happen: put them
    /// back to `w.backup_compare`.
    pub undo: bool,
    /// Our CAS put another contender's value on the primary.
    pub helped: bool,
}

/// Settles a contender's primary CAS: `decision` is how it decided the round,
/// `seen` what its backup CASes returned, `value` what it CASed onto the primary
/// and `was` what the primary answered.
pub(crate) fn posted(
    w: &WordCas,
    decision: &Decision,
    seen: &[u64],
    value: u64,
    was: u64,
) -> Posted {
    let won = value == w.swap && matches!(decision, Decision::Win { .. });
    if !won {
        // Helping the winner: its value is on the primary now, or the primary
        // had already moved on.
        let helped = was == w.compare;
        return Posted {
            result: if helped { value } else { was },
            undo: false,
            helped,
        };
    }
    match settle(w, seen, was) {
        Settled::Ours => Posted {
            result: w.compare,
            undo: false,
            helped: false,
        },
        Settled::Helped => Posted {
            result: w.swap,
            undo: false,
            helped: true,
        },
        Settled::Lost { undo } => Posted {
            result: was,
            undo,
            helped: false,
        },
    }
}

/// What the primary's answer `was` to the CAS of a contender whose value won the
/// backups' round means.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Settled {
    /// The word took our value and the write is ours (our CAS, or a helper's).
    Ours,
    /// Our CAS installed the round's value, but the round is another proposer's
    /// of the same value (two deletes of one key): we helped it, our write did
    /// not happen.
    Helped,
    /// It did not; `undo`: put the backups back to what they expected.
    Lost {
        /// The backups hold our value and must be put back.
        undo: bool,
    },
}

/// Settle the primary CAS of a contender whose value won the backups' round;
/// `seen` is what its backup CASes returned.
fn settle(w: &WordCas, seen: &[u64], was: u64) -> Settled {
    if seen.is_empty() {
        // No backups (one copy, or a set a failure left with one member): the
        // primary's CAS alone decides, and nothing else holds our value.
        return if was == w.compare {
            Settled::Ours
        } else {
            Settled::Lost { undo: false }
        };
    }
    if !owns(w, seen) {
        // Another proposer of the same value (a zero) owns the round: the backups
        // hold the round's value either way. If our CAS is the one that moved the
        // primary, it installed the owner's write, not ours — counting it as ours
        // too would let two deletes of one value both succeed.
        return if was == w.compare {
            Settled::Helped
        } else {
            Settled::Lost { undo: false }
        };
    }
    if was == w.compare || was == w.swap || helped_then_replaced(w) {
        // Ours: our CAS, or a helper put our value there (and, in the last case, a
        // later round has already replaced it).
        Settled::Ours
    } else {
        // The primary moved on while the backups held our value: the write did
        // not happen; put the backups back.
        Settled::Lost { undo: true }
    }
}

/// Whether a round that `w`'s value won is this contender's, when the value is
/// already on the primary (a helper put it there): a non-zero value is proposed by
/// one contender, or by several that want the same thing (a split's marks); a
/// zero (a delete) may be proposed by several contenders of which one must win.
/// That one is the contender whose CAS took effect on the first backup holding
/// the zero (every contender sees the same backup values, and one CAS per backup
/// takes effect in a round). Without backups only our own primary CAS counts.
fn owns(w: &WordCas, seen: &[u64]) -> bool {
    if w.swap != 0 {
        return true;
    }
    seen.iter()
        .find(|&&v| v == w.backup_compare || v == w.swap)
        .is_some_and(|&v| v == w.backup_compare)
}

/// Whether a round that `w`'s value won, finding the primary neither at
/// `compare` nor at our value, was nevertheless ours: true when the word has no
/// marks the backups do not get and is not zero — then only the round's winner
/// (or a helper putting the winner's value there) moves the primary away from
/// `compare`, and a later round replaced our value. A zero word may meanwhile
/// have taken a mark on the primary alone (a RACE insert's tentative slot), and a
/// word whose primary carries such a mark may have been cleared: those report the
/// CAS as lost and put the backups back.
fn helped_then_replaced(w: &WordCas) -> bool {
    w.compare != 0 && w.backup_compare == w.compare
}

#[cfg(test)]
mod tests {
    use super::super::decide::{decide, decide_split};
    use super::*;
    use crate::ptr::RemotePtr;
    use proptest::prelude::*;

    fn word(compare: u64, swap: u64) -> WordCas {
        WordCas::new(RemotePtr::new(1, 64).unwrap(), compare, swap)
    }

    #[test]
    fn a_winner_settles_by_what_the_primary_answers() {
        let update = word(5, 6);
        // Without backups the primary's CAS alone decides.
        assert_eq!(settle(&update, &[], 5), Settled::Ours);
        assert_eq!(settle(&update, &[], 6), Settled::Lost { undo: false });
        assert_eq!(settle(&update, &[], 9), Settled::Lost { undo: false });
        // Our CAS, or a helper's with our value.
        assert_eq!(settle(&update, &[5], 5), Settled::Ours);
        assert_eq!(settle(&update, &[5], 6), Settled::Ours);
        // A helper put our value there and a later round replaced it: the write
        // happened (reporting it lost would free its block twice).
        assert_eq!(settle(&update, &[5], 9), Settled::Ours);
        // Two deletes of one value: the one whose CAS took the first backup owns it.
        let delete = word(5, 0);
        assert_eq!(settle(&delete, &[5, 0], 0), Settled::Ours);
        assert_eq!(settle(&delete, &[0, 5], 0), Settled::Lost { undo: false });
        assert_eq!(settle(&delete, &[5], 9), Settled::Ours);
        assert_eq!(settle(&delete, &[0], 9), Settled::Lost { undo: false });
        // An empty word may have taken a mark on the primary alone: lost, and the
        // backups are put back.
        let fill = word(0, 6);
        assert_eq!(settle(&fill, &[0], 2), Settled::Lost { undo: true });
        // A tentative confirmation whose tentative word was cleared meanwhile.
        let confirm = WordCas {
            backup_compare: 0,
            ..word(6 | 2, 6)
        };
        assert_eq!(settle(&confirm, &[0], 0), Settled::Lost { undo: true });
        assert_eq!(settle(&confirm, &[0], 6 | 2), Settled::Ours);
    }

    /// Two deletes X and Y of the word 5, three copies: X's CASes take both
    /// backups, Y's find the zero there, so both decide the round for the zero.
    /// Y's primary CAS lands first and installs it; X's then finds the zero. Only
    /// X's delete happened: Y only helped it.
    #[test]
    fn two_deletes_of_one_word_never_both_succeed() {
        let delete = word(5, 0);
        let (x_seen, y_seen) = ([5, 5], [0, 0]);
        let x = decide(5, 0, &[Some(5), Some(5)]);
        let y = decide(5, 0, &[Some(0), Some(0)]);
        assert_eq!(x, Decision::Win { fix: vec![] });
        assert_eq!(y, Decision::Win { fix: vec![] });
        assert_eq!(primary_proposal(&delete, &y, &y_seen), Some(0));
        // Y's CAS moves the primary from 5 to the zero: a helping CAS.
        let y_done = posted(&delete, &y, &y_seen, 0, 5);
        assert_eq!(
            y_done,
            Posted {
                result: 0,
                undo: false,
                helped: true
            }
        );
        // X's CAS finds the zero: X's delete, installed by Y.
        let x_done = posted(&delete, &x, &x_seen, 0, 0);
        assert_eq!(x_done.result, 5);
        // Split ownership (X took the first backup, Y the second): the same.
        let y_split = posted(&delete, &y, &[0, 5], 0, 5);
        assert_ne!(y_split.result, 5);
        assert_eq!(posted(&delete, &x, &[5, 0], 0, 0).result, 5);
    }

    /// Where a simulated contender is in its round.
    #[derive(Debug, Clone)]
    enum Step {
        /// CAS backup `0..n` (the ones not yet done, in any order).
        Backups(Vec<usize>),
        /// Read the primary (a split).
        ReadPrimary,
        /// CAS these backups `(index, expected)` over to our value.
        Fix(Vec<(usize, u64)>),
        /// CAS the primary.
        Primary(u64),
        /// Put these backups back.
        Undo(Vec<usize>),
        /// Finished with this result.
        Done(u64),
    }

    struct Contender {
        w: WordCas,
        seen: Vec<Option<u64>>,
        decision: Decision,
        primary_now: Option<u64>,
        step: Step,
    }

    fn flat(seen: &[Option<u64>]) -> Vec<u64> {
        seen.iter().map(|s| s.unwrap_or(OLD)).collect()
    }

    const OLD: u64 = 100;

    /// Runs one round of `proposals` (0 is a delete; every other value is proposed
    /// once) over a primary and `backups` backups, every contender's next atomic
    /// step chosen by a seeded scheduler, as `cas_words` takes them. Returns the
    /// results, the primary and the backups afterwards.
    fn simulate(backups: usize, proposals: &[u64], seed: u64) -> (Vec<u64>, u64, Vec<u64>) {
        let mut primary = OLD;
        let mut copies = vec![OLD; backups];
        let mut cs: Vec<Contender> = proposals
            .iter()
            .map(|&p| Contender {
                w: word(OLD, p),
                seen: vec![None; backups],
                decision: Decision::ReplicaFailed,
                primary_now: None,
                step: Step::Backups((0..backups).collect()),
            })
            .collect();
        let mut x = seed | 1;
        let mut next = move |n: usize| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (x % n as u64) as usize
        };
        fn cas(word: &mut u64, expect: u64, swap: u64) -> u64 {
            let was = *word;
            if was == expect {
                *word = swap;
            }
            was
        }
        loop {
            let live: Vec<usize> = (0..cs.len())
                .filter(|&i| !matches!(cs[i].step, Step::Done(_)))
                .collect();
            if live.is_empty() {
                break;
            }
            let c = &mut cs[live[next(live.len())]];
            let w = c.w;
            c.step = match std::mem::replace(&mut c.step, Step::Done(0)) {
                Step::Backups(mut left) => {
                    let b = left.remove(next(left.len()));
                    c.seen[b] = Some(cas(&mut copies[b], w.backup_compare, w.swap));
                    if left.is_empty() {
                        c.decision = decide(w.backup_compare, w.swap, &c.seen);
                        match &c.decision {
                            Decision::ReadPrimary => Step::ReadPrimary,
                            Decision::Win { fix } => Step::Fix(fix.clone()),
                            _ => Step::Fix(Vec::new()),
                        }
                    } else {
                        Step::Backups(left)
                    }
                }
                Step::ReadPrimary => {
                    let now = primary;
                    let as_backup = if now == w.compare {
                        w.backup_compare
                    } else {
                        w.backup_compare.wrapping_add(1)
                    };
                    c.decision = decide_split(w.backup_compare, w.swap, &c.seen, as_backup);
                    c.primary_now = Some(now);
                    match &c.decision {
                        Decision::Win { fix } => Step::Fix(fix.clone()),
                        _ => Step::Fix(Vec::new()),
                    }
                }
                Step::Fix(mut fix) => {
                    if let Some((b, theirs)) = fix.pop() {
                        cas(&mut copies[b], theirs, w.swap);
                        Step::Fix(fix)
                    } else {
                        let s = flat(&c.seen);
                        match primary_proposal(&w, &c.decision, &s) {
                            Some(v) => Step::Primary(v),
                            None => match &c.decision {
                                Decision::Lose { winner } => {
                                    Step::Done(lost_result(&w, *winner, &s, c.primary_now))
                                }
                                d => panic!("nothing to post after {d:?}"),
                            },
                        }
                    }
                }
                Step::Primary(v) => {
                    let was = cas(&mut primary, w.compare, v);
                    let p = posted(&w, &c.decision, &flat(&c.seen), v, was);
                    if p.undo {
                        Step::Undo((0..backups).collect())
                    } else {
                        Step::Done(p.result)
                    }
                }
                Step::Undo(mut left) => match left.pop() {
                    Some(b) => {
                        cas(&mut copies[b], w.swap, w.backup_compare);
                        Step::Undo(left)
                    }
                    None => Step::Done(primary),
                },
                Step::Done(r) => Step::Done(r),
            };
        }
        let results = cs
            .iter()
            .map(|c| match c.step {
                Step::Done(r) => r,
                _ => unreachable!(),
            })
            .collect();
        (results, primary, copies)
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(4096))]

        /// A round of updates and deletes of one word, on two or three copies, in
        /// any interleaving of its contenders' verbs: exactly one write happens,
        /// its value is on the primary and on every backup afterwards, and every
        /// other contender reports a lost CAS.
        #[test]
        fn exactly_one_write_of_a_round_happens(
            backups in 1usize..=2,
            kinds in proptest::collection::vec(any::<bool>(), 1..=4),
            seed in any::<u64>(),
        ) {
            // `true` is a delete (every delete proposes the zero).
            let proposals: Vec<u64> = kinds
                .iter()
                .enumerate()
                .map(|(i, &delete)| if delete { 0 } else { 1000 + i as u64 })
                .collect();
            let (results, primary, copies) = simulate(backups, &proposals, seed);
            let happened: Vec<usize> =
                (0..results.len()).filter(|&i| results[i] == OLD).collect();
            prop_assert_eq!(happened.len(), 1, "results {:?} of {:?}", results, proposals);
            prop_assert_eq!(primary, proposals[happened[0]]);
            prop_assert!(copies.iter().all(|&c| c == primary), "{:?} vs {}", copies, primary);
        }
    }
}
