//! Deciding one 8-byte control word across its replicas (FUSEE's SNAPSHOT rule,
//! Shen et al., FAST'23 §4.3), as a pure function: no I/O, so every interleaving
//! can be checked exhaustively.
//!
//! Every contender of a round read the same value `old` from the primary and
//! proposes its own, distinct `new` (a pointer to memory only it wrote). Each
//! contender CASes every **backup** from `old` to its `new` in parallel and
//! collects what each CAS returned. A backup changes at most once per round (all
//! CASes of a round expect `old`), so all contenders see the same values on the
//! backups and, applying the same rules, agree on one winner:
//!
//! 1. every backup holds the same value: that value's proposer wins;
//! 2. one value holds a strict majority of the backups: its proposer wins;
//! 3. otherwise, if the primary still holds `old`, the smallest value present wins,
//!    the zero counting as the largest (if the primary moved on, the round was
//!    decided already and we lost).
//!
//! The winner CASes the backups that hold another contender's value over to its
//! own (expecting the value it saw there), then CASes the primary from `old` to
//! its value: that primary CAS is the write's linearization point. Readers read
//! the primary only, so they see a value once every backup holds it; backups are
//! never older than the primary, which is what promotion after a failure relies
//! on.

/// What one backup's CAS returned: the value the word held before (the CAS
/// succeeded iff that equals the expected `old`), or `None` if the replica did not
/// answer (its memnode failed).
pub(crate) type BackupSeen = Option<u64>;

/// The outcome of [`decide`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Decision {
    /// We won: CAS each listed backup `(index, expected)` to our value, then the
    /// primary from `old` to our value.
    Win {
        /// Backups holding another contender's value, with that value.
        fix: Vec<(usize, u64)>,
    },
    /// Another contender won (its value is given when the backups name it); our
    /// value is not linked anywhere the readers look.
    Lose {
        /// The winning value, if the backups decided it.
        winner: Option<u64>,
    },
    /// The backups split without a majority: read the primary and call
    /// [`decide_split`].
    ReadPrimary,
    /// A backup did not answer: the configuration must change before this word
    /// can be decided (the write's outcome is open until then).
    ReplicaFailed,
}

/// Decides a round from what our backup CASes returned (`seen`, one per backup,
/// in replica order) given the expected `old` and our proposal `new`.
pub(crate) fn decide(old: u64, new: u64, seen: &[BackupSeen]) -> Decision {
    let mut values = Vec::with_capacity(seen.len());
    for s in seen {
        match s {
            None => return Decision::ReplicaFailed,
            // Our CAS succeeded (or a re-executed CAS of ours found our value).
            Some(v) if *v == old || *v == new => values.push(new),
            Some(v) => values.push(*v),
        }
    }
    let Some(&first) = values.first() else {
        // No backups: the primary CAS alone decides (replication 1).
        return Decision::Win { fix: Vec::new() };
    };
    if values.iter().all(|&v| v == first) {
        return if first == new {
            Decision::Win { fix: Vec::new() }
        } else {
            Decision::Lose {
                winner: Some(first),
            }
        };
    }
    if let Some(major) = strict_majority(&values) {
        return if major == new {
            Decision::Win {
                fix: to_fix(&values, new),
            }
        } else {
            Decision::Lose {
                winner: Some(major),
            }
        };
    }
    if !values.contains(&new) {
        return Decision::Lose { winner: None };
    }
    Decision::ReadPrimary
}

/// Rule 3, after [`Decision::ReadPrimary`]: `primary` is what the primary holds now.
///
/// If the primary moved away from `old`, the round was decided already and we
/// lost. Otherwise the smallest value present wins, the zero counting as the
/// largest ([`rank`]).
pub(crate) fn decide_split(old: u64, new: u64, seen: &[BackupSeen], primary: u64) -> Decision {
    if primary != old {
        return Decision::Lose { winner: None };
    }
    let values: Vec<u64> = seen
        .iter()
        .map(|s| match s {
            Some(v) if *v == old || *v == new => new,
            Some(v) => *v,
            None => new,
        })
        .collect();
    match values.iter().copied().min_by_key(|&v| rank(v)) {
        Some(min) if min == new => Decision::Win {
            fix: to_fix(&values, new),
        },
        other => Decision::Lose { winner: other },
    }
}

/// The order in which a split goes to a value: the smallest wins, but the zero
/// ranks last. The zero is the one value several contenders of a round propose
/// (deletes of one key all empty its slot), and exactly one of them must own the
/// round: the one whose CAS took effect on the first backup that took a zero
/// (`super::settle`). That needs every zero a backup holds in a round to come
/// from a contender's own CAS, never from a winner's fix-up: ranked last, a zero
/// never wins a split, so it wins only when every backup took a zero by a
/// contender's CAS (rules 1 and 2), and no fix-up ever writes one.
fn rank(v: u64) -> u64 {
    v.wrapping_sub(1)
}

fn strict_majority(values: &[u64]) -> Option<u64> {
    values
        .iter()
        .find(|&&v| values.iter().filter(|&&w| w == v).count() * 2 > values.len())
        .copied()
}

fn to_fix(values: &[u64], new: u64) -> Vec<(usize, u64)> {
    values
        .iter()
        .enumerate()
        .filter(|&(_, &v)| v != new)
        .map(|(i, &v)| (i, v))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const OLD: u64 = 100;

    #[test]
    fn one_backup_decides_by_its_cas() {
        assert_eq!(decide(OLD, 7, &[Some(OLD)]), Decision::Win { fix: vec![] });
        assert_eq!(
            decide(OLD, 7, &[Some(9)]),
            Decision::Lose { winner: Some(9) }
        );
        assert_eq!(decide(OLD, 7, &[None]), Decision::ReplicaFailed);
        assert_eq!(decide(OLD, 7, &[]), Decision::Win { fix: vec![] });
    }

    #[test]
    fn a_split_of_two_backups_goes_to_the_smallest_value() {
        // We hold backup 0, value 9 holds backup 1.
        assert_eq!(decide(OLD, 7, &[Some(OLD), Some(9)]), Decision::ReadPrimary);
        assert_eq!(
            decide_split(OLD, 7, &[Some(OLD), Some(9)], OLD),
            Decision::Win { fix: vec![(1, 9)] }
        );
        assert_eq!(
            decide_split(OLD, 11, &[Some(OLD), Some(9)], OLD),
            Decision::Lose { winner: Some(9) }
        );
        // The primary moved on: the round is over.
        assert_eq!(
            decide_split(OLD, 7, &[Some(OLD), Some(9)], 9),
            Decision::Lose { winner: None }
        );
        // A zero (a delete) ranks last: a split between it and another value goes
        // to the other value, so no fix-up ever writes a zero.
        assert_eq!(decide(OLD, 0, &[Some(OLD), Some(9)]), Decision::ReadPrimary);
        assert_eq!(
            decide_split(OLD, 0, &[Some(OLD), Some(9)], OLD),
            Decision::Lose { winner: Some(9) }
        );
        assert_eq!(
            decide_split(OLD, 9, &[Some(0), Some(OLD)], OLD),
            Decision::Win { fix: vec![(0, 0)] }
        );
    }

    /// Simulates one round: contenders CAS the backups in an arbitrary order, each
    /// then decides; exactly one wins, and after the winner's fixes every backup
    /// holds its value.
    fn round(backups: usize, proposals: &[u64], order: &[(usize, usize)]) -> Vec<Decision> {
        let mut word = vec![OLD; backups];
        let mut seen: Vec<Vec<Option<u64>>> = vec![vec![None; backups]; proposals.len()];
        for &(c, b) in order {
            let v = word[b];
            if v == OLD {
                word[b] = proposals[c];
            }
            seen[c][b] = Some(v);
        }
        proposals
            .iter()
            .zip(&seen)
            .map(|(&p, s)| match decide(OLD, p, s) {
                Decision::ReadPrimary => decide_split(OLD, p, s, OLD),
                d => d,
            })
            .collect()
    }

    proptest! {
        #[test]
        fn exactly_one_contender_wins_a_round(
            backups in 1usize..=2,
            n in 1usize..=4,
            seed in any::<u64>(),
        ) {
            let proposals: Vec<u64> = (0..n as u64).map(|i| 1000 + i * 7 + seed % 5).collect();
            // Every contender CASes every backup once, in a seeded interleaving.
            let mut order: Vec<(usize, usize)> =
                (0..n).flat_map(|c| (0..backups).map(move |b| (c, b))).collect();
            let mut x = seed | 1;
            for i in (1..order.len()).rev() {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                order.swap(i, (x % (i as u64 + 1)) as usize);
            }
            let decisions = round(backups, &proposals, &order);
            let winners: Vec<usize> = decisions
                .iter()
                .enumerate()
                .filter(|(_, d)| matches!(d, Decision::Win { .. }))
                .map(|(i, _)| i)
                .collect();
            prop_assert_eq!(winners.len(), 1, "decisions: {:?}", decisions);
            let w = winners[0];
            for d in &decisions {
                if let Decision::Lose { winner: Some(v) } = d {
                    prop_assert_eq!(*v, proposals[w]);
                }
            }
        }
    }
}
