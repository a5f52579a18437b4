//! Lease expiry, sans IO: given the leases and the time, which leases are active, which
//! are expired but still in their grace period, and which are due for reclamation.
//!
//! A lease expires at `expires_at_ms`; from then on it cannot be renewed. Its memory is
//! returned to the free map only `grace_ms` later, so that writes a slow or crashed
//! holder still has in flight cannot land in memory already handed to someone else.
//! The service calls [`crate::catalog::Catalog::reclaim_expired`] periodically with the
//! current time; tests call it with a fake one.
//!
//! What happens to a lease at the end of its grace period is [`disposal`]: a *data
//! lease* (one that names a table) may hold live values of that table — current
//! Clover tails, KV blocks RACE slots point to — which nobody but its holder knows
//! the layout of, so its memory is never reused while the table lives: the table
//! adopts it. Only leases that name no table, or whose table is gone, are reclaimed.

use crate::catalog::{LeaseRecord, Owner};

/// Where a lease is in its life.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LeaseState {
    /// Usable and renewable.
    Active,
    /// Past its expiry, memory not yet reused.
    Expired,
    /// Past expiry plus grace: its memory goes back to the free map.
    Reclaimable,
}

impl LeaseState {
    /// The state's name in the API (`active`, `expired`; a reclaimable lease shows as
    /// `expired` until the sweep removes it).
    pub fn label(self) -> &'static str {
        match self {
            LeaseState::Active => "active",
            LeaseState::Expired | LeaseState::Reclaimable => "expired",
        }
    }
}

/// The state of a lease expiring at `expires_at_ms` (`None`: never expires).
pub fn state(expires_at_ms: Option<u64>, now_ms: u64, grace_ms: u64) -> LeaseState {
    match expires_at_ms {
        None => LeaseState::Active,
        Some(t) if now_ms < t => LeaseState::Active,
        Some(t) if now_ms < t.saturating_add(grace_ms) => LeaseState::Expired,
        Some(_) => LeaseState::Reclaimable,
    }
}

/// The ids of the leases due for reclamation at `now_ms`, in iteration order.
pub fn due_for_reclaim<'a>(
    leases: impl IntoIterator<Item = &'a LeaseRecord>,
    now_ms: u64,
    grace_ms: u64,
) -> Vec<u64> {
    leases
        .into_iter()
        .filter(|l| state(l.expires_at_ms, now_ms, grace_ms) == LeaseState::Reclaimable)
        .map(|l| l.id)
        .collect()
}

/// What the sweep does with a lease past its expiry and grace.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Disposal {
    /// Its memory returns to the free map.
    Reclaim,
    /// Its table takes it over: the memory stays allocated until the table is dropped.
    Adopt(String),
}

/// The disposal of reclaimable lease `l`, given which tables exist.
pub fn disposal(l: &LeaseRecord, table_exists: impl Fn(&str) -> bool) -> Disposal {
    match (&l.owner, &l.table) {
        (Owner::Client, Some(t)) if table_exists(t) => Disposal::Adopt(t.clone()),
        _ => Disposal::Reclaim,
    }
}

/// When the next lease becomes reclaimable, if any will.
pub fn next_reclaim_at<'a>(
    leases: impl IntoIterator<Item = &'a LeaseRecord>,
    grace_ms: u64,
) -> Option<u64> {
    leases
        .into_iter()
        .filter_map(|l| l.expires_at_ms.map(|t| t.saturating_add(grace_ms)))
        .min()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lease(id: u64, expires: Option<u64>) -> LeaseRecord {
        LeaseRecord {
            id,
            client: "c".into(),
            owner: Owner::Client,
            memnode_id: 1,
            rkey: 1,
            va: 0,
            len: 64,
            ttl_ms: 1000,
            created_at_ms: 0,
            expires_at_ms: expires,
            table: None,
            adopted_at_ms: None,
            replicas: Vec::new(),
        }
    }

    #[test]
    fn data_leases_are_adopted_while_their_table_lives() {
        let plain = lease(1, Some(100));
        assert_eq!(disposal(&plain, |_| true), Disposal::Reclaim);
        let mut data = lease(2, Some(100));
        data.table = Some("t".into());
        assert_eq!(disposal(&data, |t| t == "t"), Disposal::Adopt("t".into()));
        assert_eq!(disposal(&data, |_| false), Disposal::Reclaim);
    }

    #[test]
    fn states_and_sweep() {
        assert_eq!(state(Some(100), 99, 10), LeaseState::Active);
        assert_eq!(state(Some(100), 100, 10), LeaseState::Expired);
        assert_eq!(state(Some(100), 109, 10), LeaseState::Expired);
        assert_eq!(state(Some(100), 110, 10), LeaseState::Reclaimable);
        assert_eq!(state(None, u64::MAX, 10), LeaseState::Active);
        assert_eq!(state(Some(u64::MAX), u64::MAX - 1, 10), LeaseState::Active);
        let ls = [lease(1, Some(100)), lease(2, Some(200)), lease(3, None)];
        assert!(due_for_reclaim(&ls, 105, 10).is_empty());
        assert_eq!(due_for_reclaim(&ls, 110, 10), vec![1]);
        assert_eq!(due_for_reclaim(&ls, 1_000_000, 10), vec![1, 2]);
        assert_eq!(next_reclaim_at(&ls, 10), Some(110));
    }
}
