//! Replica sets of a new replicated table: per home memnode, the members its data
//! is mirrored on, chosen among the registered memnodes by
//! [`crate::placement::replica_sets`] (distinct memnodes, distinct zones where
//! enough are declared). Too few memnodes is a conflict (409); zones that cannot
//! all be distinct are logged.

use super::error::{CatalogError, conflict};
use super::state::Catalog;
use crate::placement::{Member, ReplicaSetError, replica_sets};

impl Catalog {
    /// The replica sets of table `name` with `replication` copies homed on `homes`;
    /// empty for replication 1.
    pub(super) fn replica_sets_for(
        &self,
        name: &str,
        homes: &[u64],
        replication: u32,
    ) -> Result<Vec<Vec<u64>>, CatalogError> {
        if replication <= 1 {
            return Ok(Vec::new());
        }
        let members: Vec<Member> = self
            .memnodes
            .values()
            .map(|n| Member {
                id: n.rec.id,
                zone: n.rec.zone.clone(),
            })
            .collect();
        let chosen = replica_sets(homes, &members, replication).map_err(|e| match e {
            ReplicaSetError::TooFewMemnodes { .. } => conflict("too_few_memnodes", e.to_string()),
            ReplicaSetError::UnknownHome(_) => CatalogError::Invalid(e.to_string()),
        })?;
        for home in &chosen.shared_zones {
            tracing::warn!(
                table = name,
                home,
                "not enough zones for replication {replication}: the replica set of memnode \
                 {home} has members in one zone (they are distinct memnodes)"
            );
        }
        Ok(chosen.sets)
    }
}
