//! Placement policy: which memnode serves a new lease ([`Placement`]: [`RoundRobin`],
//! [`MostFree`], one file each), and which memnodes mirror a replicated table's data
//! ([`replica_sets`]). Where inside the memnode's regions the lease goes is the
//! allocation mechanism's business ([`crate::alloc`]).

mod most_free;
mod replica_sets;
mod round_robin;

pub use most_free::MostFree;
pub use replica_sets::{Member, ReplicaSetError, ReplicaSets, replica_sets};
pub use round_robin::RoundRobin;

/// A memnode that could serve a lease: healthy, and with a free extent large enough.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Candidate {
    /// Memnode id.
    pub memnode_id: u64,
    /// Free bytes on the memnode (all regions).
    pub free_bytes: u64,
}

/// Chooses among candidates (given in memnode-id order, never empty).
pub trait Placement: Send + Sync + std::fmt::Debug {
    /// The policy's name (`round_robin`, `most_free`).
    fn name(&self) -> &'static str;

    /// The index of the chosen candidate.
    fn choose(&self, candidates: &[Candidate]) -> usize;
}

/// The policies, by name (for configuration).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum PlacementKind {
    /// Rotate through the memnodes ([`RoundRobin`]).
    RoundRobin,
    /// The memnode with the most free bytes ([`MostFree`]).
    #[default]
    MostFree,
}

impl PlacementKind {
    /// The policy.
    pub fn build(self) -> Box<dyn Placement> {
        match self {
            PlacementKind::RoundRobin => Box::new(RoundRobin::default()),
            PlacementKind::MostFree => Box::new(MostFree),
        }
    }
}

impl std::str::FromStr for PlacementKind {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "round_robin" | "round-robin" => Ok(PlacementKind::RoundRobin),
            "most_free" | "most-free" => Ok(PlacementKind::MostFree),
            _ => Err(format!(
                "unknown placement {s:?}: expected round_robin or most_free"
            )),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn c(id: u64, free: u64) -> Candidate {
        Candidate {
            memnode_id: id,
            free_bytes: free,
        }
    }

    #[test]
    fn policies() {
        let cands = [c(1, 10), c(2, 30), c(3, 20)];
        assert_eq!(MostFree.choose(&cands), 1);
        let rr = RoundRobin::default();
        let picks: Vec<usize> = (0..4).map(|_| rr.choose(&cands)).collect();
        assert_eq!(picks, vec![0, 1, 2, 0]);
        assert_eq!(rr.choose(&cands[..1]), 0);
        assert_eq!("round-robin".parse(), Ok(PlacementKind::RoundRobin));
        assert!("random".parse::<PlacementKind>().is_err());
    }
}
