//! The policy of READ load balancing: which member of a replica set serves a READ
//! that a client marked as balanceable.
//!
//! This file holds the choice only — a pure function of the set's members, their
//! state and one cursor cell per set, written as a data plane can compute it (a fixed
//! number of members, compared in a fixed order, no data-dependent loop). The
//! mechanism that would carry a READ to the chosen member on a queue pair of the
//! switch and turn the member's answer back into a response on the client's queue
//! pair is not written; `docs/zero-sided.md` ("Load-balanced READs") describes it,
//! which READs of a replicated table may be served by a backup at all, and why.
//!
//! Rules every policy keeps:
//!
//! * only members that *serve* may be chosen: a member being filled by
//!   re-replication (syncing) lacks objects the primary already links, so it serves
//!   no balanced READ;
//! * the primary (member 0) always serves — it is where the client sent the READ —
//!   so there is always a choice;
//! * the choice depends on nothing but the arguments, so a test (or a P4 target)
//!   can reproduce it exactly.

/// The most members a replica set has (a primary and two backups: tables of one to
/// three copies).
pub const MAX_MEMBERS: usize = 3;

/// What the policy knows of one member of a replica set.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct MemberState {
    /// Whether the member serves balanced READs (false while it is syncing, and for
    /// positions a set of fewer members does not have).
    pub serving: bool,
    /// Balanced READs sent to the member and not answered yet.
    pub outstanding: u32,
}

/// How the member serving a balanced READ is chosen.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ReadBalancePolicy {
    /// Every serving member in turn, starting after the last one chosen.
    #[default]
    RoundRobin,
    /// The serving member with the fewest outstanding READs; among equals, the first
    /// in round-robin order.
    LeastOutstanding,
}

/// The member a policy chose and the set's cursor to store for the next choice.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Choice {
    /// Index of the chosen member (0 = primary).
    pub member: usize,
    /// The new value of the set's cursor cell.
    pub cursor: u32,
}

impl ReadBalancePolicy {
    /// The policy's name as the admin API would spell it.
    pub fn name(self) -> &'static str {
        match self {
            ReadBalancePolicy::RoundRobin => "round_robin",
            ReadBalancePolicy::LeastOutstanding => "least_outstanding",
        }
    }

    /// The policy named `name` (see [`ReadBalancePolicy::name`]).
    pub fn from_name(name: &str) -> Option<ReadBalancePolicy> {
        match name {
            "round_robin" => Some(ReadBalancePolicy::RoundRobin),
            "least_outstanding" => Some(ReadBalancePolicy::LeastOutstanding),
            _ => None,
        }
    }

    /// Choose the member for the next balanced READ of a set whose cursor cell holds
    /// `cursor`. Member 0 is the primary and is taken as serving whatever `members[0]`
    /// says. Never fails: with no backup serving, the primary is chosen.
    pub fn choose(self, cursor: u32, members: &[MemberState; MAX_MEMBERS]) -> Choice {
        let start = (cursor as usize) % MAX_MEMBERS;
        let serves = |m: usize| m == 0 || members[m].serving;
        let mut best: Option<usize> = None;
        // A fixed number of comparisons, in round-robin order from the cursor.
        for step in 0..MAX_MEMBERS {
            let m = (start + step) % MAX_MEMBERS;
            if !serves(m) {
                continue;
            }
            best = match (self, best) {
                (_, None) => Some(m),
                (ReadBalancePolicy::RoundRobin, Some(b)) => Some(b),
                (ReadBalancePolicy::LeastOutstanding, Some(b)) => {
                    if members[m].outstanding < members[b].outstanding {
                        Some(m)
                    } else {
                        Some(b)
                    }
                }
            };
        }
        let member = best.unwrap_or(0);
        Choice {
            member,
            cursor: ((member + 1) % MAX_MEMBERS) as u32,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use proptest::test_runner::{Config, RngAlgorithm, TestRng, TestRunner};

    fn set(serving: [bool; MAX_MEMBERS], outstanding: [u32; MAX_MEMBERS]) -> [MemberState; 3] {
        std::array::from_fn(|m| MemberState {
            serving: serving[m],
            outstanding: outstanding[m],
        })
    }

    /// The members chosen for `n` READs in a row, the cursor carried along.
    fn run(policy: ReadBalancePolicy, members: &[MemberState; 3], n: usize) -> Vec<usize> {
        let mut cursor = 0;
        (0..n)
            .map(|_| {
                let c = policy.choose(cursor, members);
                cursor = c.cursor;
                c.member
            })
            .collect()
    }

    #[test]
    fn round_robin_spreads_over_every_serving_member() {
        let members = set([true, true, true], [0; 3]);
        let picks = run(ReadBalancePolicy::RoundRobin, &members, 9);
        assert_eq!(picks, vec![0, 1, 2, 0, 1, 2, 0, 1, 2]);
    }

    #[test]
    fn a_syncing_backup_gets_no_read() {
        let members = set([true, true, false], [0; 3]);
        let picks = run(ReadBalancePolicy::RoundRobin, &members, 8);
        assert!(!picks.contains(&2), "{picks:?}");
        assert_eq!(picks.iter().filter(|&&m| m == 0).count(), 4);
        assert_eq!(picks.iter().filter(|&&m| m == 1).count(), 4);
        let picks = run(ReadBalancePolicy::LeastOutstanding, &members, 8);
        assert!(!picks.contains(&2), "{picks:?}");
    }

    #[test]
    fn with_no_backup_serving_the_primary_serves_everything() {
        for policy in [
            ReadBalancePolicy::RoundRobin,
            ReadBalancePolicy::LeastOutstanding,
        ] {
            // The primary's own flag does not matter: it is where the READ was sent.
            let members = set([false, false, false], [5, 0, 0]);
            assert_eq!(run(policy, &members, 5), vec![0; 5]);
        }
    }

    #[test]
    fn least_outstanding_takes_the_idlest_member_and_rotates_among_equals() {
        let p = ReadBalancePolicy::LeastOutstanding;
        assert_eq!(p.choose(0, &set([true; 3], [4, 1, 3])).member, 1);
        assert_eq!(p.choose(0, &set([true; 3], [4, 3, 1])).member, 2);
        // Equal loads: the cursor decides, so equal members take turns.
        assert_eq!(
            run(p, &set([true; 3], [2, 2, 2]), 6),
            vec![0, 1, 2, 0, 1, 2]
        );
    }

    #[test]
    fn names_round_trip() {
        for p in [
            ReadBalancePolicy::RoundRobin,
            ReadBalancePolicy::LeastOutstanding,
        ] {
            assert_eq!(ReadBalancePolicy::from_name(p.name()), Some(p));
        }
        assert_eq!(ReadBalancePolicy::from_name("random"), None);
    }

    fn members_strategy() -> impl Strategy<Value = [MemberState; 3]> {
        (
            proptest::array::uniform3(any::<bool>()),
            proptest::array::uniform3(0u32..8),
        )
            .prop_map(|(s, o)| set(s, o))
    }

    /// For any members and cursor: the chosen member serves, least-outstanding never
    /// passes over a serving member with fewer READs outstanding, and round robin
    /// gives every serving member the same share of a whole number of turns.
    #[test]
    fn every_choice_is_a_serving_member_and_shares_are_fair() {
        let config = Config {
            cases: 512,
            failure_persistence: None,
            ..Config::default()
        };
        let rng = TestRng::from_seed(RngAlgorithm::ChaCha, &[7u8; 32]);
        let mut runner = TestRunner::new_with_rng(config, rng);
        runner
            .run(&(members_strategy(), any::<u32>()), |(members, cursor)| {
                let serves = |m: usize| m == 0 || members[m].serving;
                for policy in [
                    ReadBalancePolicy::RoundRobin,
                    ReadBalancePolicy::LeastOutstanding,
                ] {
                    let c = policy.choose(cursor, &members);
                    prop_assert!(serves(c.member));
                    prop_assert!(c.member < MAX_MEMBERS);
                    if policy == ReadBalancePolicy::LeastOutstanding {
                        for m in (0..MAX_MEMBERS).filter(|&m| serves(m)) {
                            prop_assert!(members[c.member].outstanding <= members[m].outstanding);
                        }
                    }
                }
                let n = (0..MAX_MEMBERS).filter(|&m| serves(m)).count();
                let picks = run(ReadBalancePolicy::RoundRobin, &members, n * 4);
                for m in 0..MAX_MEMBERS {
                    let got = picks.iter().filter(|&&p| p == m).count();
                    prop_assert_eq!(got, if serves(m) { 4 } else { 0 });
                }
                Ok(())
            })
            .expect("read balancing policy");
    }
}
