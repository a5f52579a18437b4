//! Replica sets: for each home memnode of a replicated table, the ordered list of
//! `r` distinct memnodes its data is mirrored on — the home first, then backups.
//!
//! Backups are chosen greedily per home, in the order of the homes: among the
//! memnodes not yet in the set, those whose zone no member has (memnodes that
//! declare no zone share none) come first; among those, the one used least as a
//! backup of this table so far; ties go to the first memnode after the home in id
//! order (wrapping), so sets of different homes spread over different backups.
//! When no memnode of a new zone is left, the backup shares a zone with a member
//! and the set is reported ([`ReplicaSets::shared_zones`]) so the caller can warn.

use std::collections::{BTreeMap, BTreeSet};

/// A memnode that can be a member of a replica set.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Member {
    /// Memnode id.
    pub id: u64,
    /// The zone it declared, if any.
    pub zone: Option<String>,
}

/// The sets chosen for a table.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReplicaSets {
    /// One set per home, in the homes' order, each its home first.
    pub sets: Vec<Vec<u64>>,
    /// Homes whose set has two members in one declared zone (not enough zones).
    pub shared_zones: Vec<u64>,
}

/// Why no replica sets could be chosen.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ReplicaSetError {
    /// Fewer memnodes than copies.
    #[error("replication {replication} needs {replication} memnodes, {registered} registered")]
    TooFewMemnodes {
        /// Copies asked for.
        replication: u32,
        /// Memnodes there are.
        registered: usize,
    },
    /// A home that is not among the members.
    #[error("memnode {0} is not registered")]
    UnknownHome(u64),
}

/// Replica sets of `replication` members for each of `homes`, chosen among
/// `members` (every memnode that may hold a copy, in any order).
pub fn replica_sets(
    homes: &[u64],
    members: &[Member],
    replication: u32,
) -> Result<ReplicaSets, ReplicaSetError> {
    let r = usize::try_from(replication).unwrap_or(usize::MAX);
    let by_id: BTreeMap<u64, &Member> = members.iter().map(|m| (m.id, m)).collect();
    if by_id.len() < r {
        return Err(ReplicaSetError::TooFewMemnodes {
            replication,
            registered: by_id.len(),
        });
    }
    let ids: Vec<u64> = by_id.keys().copied().collect();
    let mut backup_use: BTreeMap<u64, usize> = BTreeMap::new();
    let mut out = ReplicaSets {
        sets: Vec::with_capacity(homes.len()),
        shared_zones: Vec::new(),
    };
    for &home in homes {
        let home_member = by_id.get(&home).ok_or(ReplicaSetError::UnknownHome(home))?;
        let mut set = vec![home];
        let mut zones: BTreeSet<&str> = home_member.zone.as_deref().into_iter().collect();
        let start = ids.partition_point(|&id| id <= home);
        let mut shared = false;
        while set.len() < r {
            let pick = (0..ids.len())
                .map(|k| ids[(start + k) % ids.len()])
                .filter(|id| !set.contains(id))
                .enumerate()
                .min_by_key(|&(order, id)| {
                    let zone_taken = by_id[&id]
                        .zone
                        .as_deref()
                        .is_some_and(|z| zones.contains(z));
                    (zone_taken, backup_use.get(&id).copied().unwrap_or(0), order)
                })
                .map(|(_, id)| id);
            let Some(id) = pick else {
                break;
            };
            if let Some(z) = by_id[&id].zone.as_deref()
                && !zones.insert(z)
            {
                shared = true;
            }
            *backup_use.entry(id).or_default() += 1;
            set.push(id);
        }
        if shared {
            out.shared_zones.push(home);
        }
        out.sets.push(set);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn m(id: u64, zone: Option<&str>) -> Member {
        Member {
            id,
            zone: zone.map(str::to_owned),
        }
    }

    fn distinct(set: &[u64]) -> bool {
        set.iter().collect::<BTreeSet<_>>().len() == set.len()
    }

    #[test]
    fn members_are_distinct_home_first_and_backups_spread() {
        let ms: Vec<Member> = (1..=4).map(|i| m(i, None)).collect();
        let rs = replica_sets(&[1, 2, 3, 4], &ms, 3).unwrap();
        assert_eq!(
            rs.sets,
            vec![vec![1, 2, 3], vec![2, 4, 1], vec![3, 4, 1], vec![4, 2, 3]]
        );
        for (set, home) in rs.sets.iter().zip(1..) {
            assert_eq!(set[0], home);
            assert!(distinct(set));
        }
        // Every memnode is a backup of two sets: the load is even.
        let mut uses = BTreeMap::new();
        for s in &rs.sets {
            for b in &s[1..] {
                *uses.entry(*b).or_insert(0) += 1;
            }
        }
        assert!(uses.values().all(|&n| n == 2), "{uses:?}");
        assert!(rs.shared_zones.is_empty());
        assert_eq!(replica_sets(&[2], &ms, 1).unwrap().sets, vec![vec![2]]);
    }

    #[test]
    fn zones_are_honoured_when_there_are_enough() {
        let ms = [
            m(1, Some("a")),
            m(2, Some("a")),
            m(3, Some("b")),
            m(4, Some("b")),
            m(5, Some("c")),
        ];
        let rs = replica_sets(&[1, 2, 3], &ms, 3).unwrap();
        let zone = |id: u64| ms.iter().find(|x| x.id == id).unwrap().zone.clone();
        for set in &rs.sets {
            let zones: BTreeSet<_> = set.iter().map(|&id| zone(id)).collect();
            assert_eq!(zones.len(), 3, "{set:?} spans three zones");
        }
        assert!(rs.shared_zones.is_empty());
        // Two zones for three copies: distinct memnodes, and the set is reported.
        let two = [m(1, Some("a")), m(2, Some("a")), m(3, Some("b"))];
        let rs = replica_sets(&[1], &two, 3).unwrap();
        assert_eq!(rs.sets, vec![vec![1, 3, 2]], "the other zone first");
        assert_eq!(rs.shared_zones, vec![1]);
        // Memnodes without a zone share none.
        let rs = replica_sets(&[1], &[m(1, Some("a")), m(2, None), m(3, None)], 3).unwrap();
        assert!(rs.shared_zones.is_empty());
    }

    #[test]
    fn too_few_memnodes_or_an_unknown_home_is_refused() {
        let ms = [m(1, None), m(2, None)];
        let e = replica_sets(&[1], &ms, 3).unwrap_err();
        assert_eq!(
            e.to_string(),
            "replication 3 needs 3 memnodes, 2 registered"
        );
        assert_eq!(
            replica_sets(&[9], &ms, 2).unwrap_err(),
            ReplicaSetError::UnknownHome(9)
        );
    }
}
