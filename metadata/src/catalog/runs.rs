//! Runs of adopted memory: when a table adopts a data lease (its holder handed it
//! over, or it expired), the extent is merged into the table's adopted records
//! that touch it on the same memnode and region, so a table holds one record per
//! contiguous run of data instead of one per session that ever wrote to it.
//!
//! Only adopted records merge: a RACE directory or an in-place tuple area is a
//! table-owned record too, but clients address it by its lease id and length, so it
//! keeps both. The merged record keeps the id, holder name and times of the
//! lowest-addressed piece; the ids of the other pieces are gone (`lease_not_found`).

use std::collections::BTreeMap;

use super::records::{LeaseRecord, Owner};

/// Whether `l` is memory its table adopted (a run piece that may merge).
fn is_adopted_data(l: &LeaseRecord) -> bool {
    matches!(l.owner, Owner::Table(_)) && l.adopted_at_ms.is_some()
}

/// Whether `a` and `b` are mirrored on the same members (copies lie at the same
/// offsets on each, so pieces adjacent on the first member are adjacent on all).
fn same_set(a: &LeaseRecord, b: &LeaseRecord) -> bool {
    a.replicas.len() == b.replicas.len()
        && a.replicas
            .iter()
            .zip(&b.replicas)
            .all(|(x, y)| x.memnode_id == y.memnode_id && x.rkey == y.rkey)
}

/// `adopted` (a record just adopted by its table) merged with the adopted records
/// of the same table in `leases` that end where it starts or start where it ends
/// (a record with `adopted`'s own id is ignored). Returns the merged record and the
/// ids of the records it absorbed (possibly `adopted.id` itself, when it extends
/// an older run).
pub(super) fn coalesce(
    leases: &BTreeMap<u64, LeaseRecord>,
    adopted: LeaseRecord,
) -> (LeaseRecord, Vec<u64>) {
    if !is_adopted_data(&adopted) {
        return (adopted, Vec::new());
    }
    let neighbour = |l: &&LeaseRecord| {
        l.id != adopted.id
            && is_adopted_data(l)
            && l.owner == adopted.owner
            && l.memnode_id == adopted.memnode_id
            && l.rkey == adopted.rkey
            && same_set(l, &adopted)
    };
    let end = adopted.va.saturating_add(adopted.len);
    let before = leases
        .values()
        .filter(neighbour)
        .find(|l| l.va.saturating_add(l.len) == adopted.va)
        .cloned();
    let after = leases
        .values()
        .filter(neighbour)
        .find(|l| l.va == end)
        .cloned();
    let mut absorbed = Vec::new();
    let mut merged = match before {
        Some(mut b) => {
            b.len += adopted.len;
            absorbed.push(adopted.id);
            b
        }
        None => adopted,
    };
    if let Some(a) = after {
        merged.len += a.len;
        merged.created_at_ms = merged.created_at_ms.min(a.created_at_ms);
        absorbed.push(a.id);
    }
    (merged, absorbed)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rec(id: u64, table: &str, va: u64, len: u64, adopted: bool) -> LeaseRecord {
        LeaseRecord {
            id,
            client: format!("c{id}"),
            owner: Owner::Table(table.into()),
            memnode_id: 1,
            rkey: 7,
            va,
            len,
            ttl_ms: 0,
            created_at_ms: id,
            expires_at_ms: None,
            table: Some(table.into()),
            adopted_at_ms: adopted.then_some(id),
            replicas: Vec::new(),
        }
    }

    fn map(recs: &[LeaseRecord]) -> BTreeMap<u64, LeaseRecord> {
        recs.iter().map(|l| (l.id, l.clone())).collect()
    }

    #[test]
    fn a_piece_between_two_runs_joins_them_under_the_lower_id() {
        let leases = map(&[rec(1, "t", 0, 64, true), rec(2, "t", 128, 192, true)]);
        let (m, gone) = coalesce(&leases, rec(3, "t", 64, 64, true));
        assert_eq!((m.id, m.va, m.len, m.created_at_ms), (1, 0, 320, 1));
        assert_eq!(gone, vec![3, 2]);
    }

    #[test]
    fn a_piece_before_a_run_absorbs_it() {
        let leases = map(&[rec(1, "t", 640, 64, true)]);
        let (m, gone) = coalesce(&leases, rec(5, "t", 576, 64, true));
        assert_eq!((m.id, m.va, m.len), (5, 576, 128));
        assert_eq!(gone, vec![1]);
    }

    #[test]
    fn other_tables_gaps_regions_and_directories_do_not_merge() {
        let mut other_region = rec(4, "t", 192, 64, true);
        other_region.rkey = 8;
        let mut other_node = rec(5, "t", 192, 64, true);
        other_node.memnode_id = 2;
        let leases = map(&[
            rec(1, "u", 0, 64, true),    // another table's run before it
            rec(2, "t", 128, 64, false), // the table's directory after it
            rec(3, "t", 256, 64, true),  // a gap away
            other_region,
            other_node,
        ]);
        let piece = rec(9, "t", 64, 64, true);
        let (m, gone) = coalesce(&leases, piece.clone());
        assert_eq!((m, gone), (piece, Vec::new()));
        // A directory itself never grows.
        let dir = rec(2, "t", 128, 64, false);
        let (m, gone) = coalesce(&map(&[rec(1, "t", 64, 64, true)]), dir.clone());
        assert_eq!((m, gone), (dir, Vec::new()));
    }

    #[test]
    fn the_pieces_own_older_version_is_not_its_neighbour() {
        let leases = map(&[rec(3, "t", 0, 4096, false)]);
        let (m, gone) = coalesce(&leases, rec(3, "t", 0, 64, true));
        assert_eq!((m.id, m.len), (3, 64));
        assert!(gone.is_empty());
    }
}
