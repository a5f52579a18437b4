//! Where the copies of a replicated table's memory are.
//!
//! A table with replication r keeps, for each home memnode m its data is placed
//! on, a replica set `[m, b1, …]` (`TableDescription::replica_sets`, primary
//! first). Memory is mirrored: an object at offset o of m's region is at offset o
//! of every member's region, so a [`RemotePtr`] (which names the home memnode)
//! locates every copy without a lookup.

use dmkv_api::metadata::TableDescription;

use crate::error::KvError;
use crate::ptr::RemotePtr;
use crate::remote::{Links, Target};

/// The memnodes holding copies of what `table` places on `home`, primary first.
/// Just `[home]` for an unreplicated table (or a home the table lists no set for).
///
/// The set of `home` is the one at `home`'s position in `table.memnodes` (a set
/// keeps that position when a failure changes its members); a table that lists
/// sets by their first member only is understood too.
pub(crate) fn members(table: &TableDescription, home: u64) -> Vec<u64> {
    let by_position = table
        .memnodes
        .iter()
        .position(|&m| m == home)
        .and_then(|i| table.replica_sets.get(i));
    by_position
        .or_else(|| table.replica_sets.iter().find(|s| s.first() == Some(&home)))
        .filter(|set| !set.is_empty())
        .cloned()
        .unwrap_or_else(|| vec![home])
}

/// The syncing members of the replica set of `home` (see
/// `TableDescription::syncing`): written to like backups, never read, their CAS
/// results never decide anything.
pub(crate) fn syncing(table: &TableDescription, home: u64) -> Vec<u64> {
    table
        .memnodes
        .iter()
        .position(|&m| m == home)
        .and_then(|i| table.syncing.get(i))
        .cloned()
        .unwrap_or_default()
}

/// Refuses tables this client cannot serve with replication yet.
pub(crate) fn check_supported(table: &TableDescription, accelerated: bool) -> Result<(), KvError> {
    if !is_replicated(table) {
        return Ok(());
    }
    // Through the accelerator, its forwarding carries the verbs unchanged (and, with
    // switch replication, copies data WRITEs to the backups); its Clover steering,
    // atomic replacement and switch atomics are for unreplicated tables and must not
    // be set up for a replicated table's keys or words.
    let _ = accelerated;
    // Every index is served replicated: Clover and RACE decide their control words
    // across the copies, in-place tables mirror their writes before unlatching.
    Ok(())
}

/// The copy of `ptr` that readers read: the same offset on the acting primary of
/// the home memnode's replica set (the home itself until a failure promotes a
/// backup, and always for an unreplicated table).
pub(crate) fn primary(table: &TableDescription, ptr: RemotePtr) -> RemotePtr {
    if !is_replicated(table) {
        return ptr;
    }
    let home = u64::from(ptr.memnode());
    match members(table, home).first().map(|&m| u8::try_from(m)) {
        Some(Ok(m)) if u64::from(m) != home => RemotePtr::new(m, ptr.offset()).unwrap_or(ptr),
        _ => ptr,
    }
}

/// Every copy of `ptr` that writes go to, the acting primary's first (see
/// [`members`]), then the syncing members' (see [`syncing`]).
pub(crate) fn copies_of(table: &TableDescription, ptr: RemotePtr) -> Vec<RemotePtr> {
    let home = u64::from(ptr.memnode());
    members(table, home)
        .into_iter()
        .chain(syncing(table, home))
        .filter_map(|m| RemotePtr::new(u8::try_from(m).ok()?, ptr.offset()).ok())
        .collect()
}

/// Whether `table` keeps more than one copy of its data.
pub(crate) fn is_replicated(table: &TableDescription) -> bool {
    table.replication > 1
}

/// The verbs address of every copy of the `len` bytes at `ptr`, primary first.
pub(crate) fn resolve_all(
    links: &Links,
    table: &TableDescription,
    ptr: RemotePtr,
    len: u64,
) -> Result<Vec<Target>, KvError> {
    resolve_on(links, members(table, u64::from(ptr.memnode())), ptr, len)
}

/// The verbs address of the `len` bytes at `ptr` on each syncing member of its set.
pub(crate) fn resolve_syncing(
    links: &Links,
    table: &TableDescription,
    ptr: RemotePtr,
    len: u64,
) -> Result<Vec<Target>, KvError> {
    resolve_on(links, syncing(table, u64::from(ptr.memnode())), ptr, len)
}

/// The verbs address of every copy a write of the `len` bytes at `ptr` goes to:
/// the members' ([`resolve_all`]), then the syncing members'.
pub(crate) fn resolve_writes(
    links: &Links,
    table: &TableDescription,
    ptr: RemotePtr,
    len: u64,
) -> Result<Vec<Target>, KvError> {
    let mut all = resolve_all(links, table, ptr, len)?;
    all.extend(resolve_syncing(links, table, ptr, len)?);
    Ok(all)
}

fn resolve_on(
    links: &Links,
    on: Vec<u64>,
    ptr: RemotePtr,
    len: u64,
) -> Result<Vec<Target>, KvError> {
    on.into_iter()
        .map(|m| {
            let index = u8::try_from(m).map_err(|_| {
                KvError::Unsupported(format!(
                    "memnode id {m} does not fit the 8-bit memnode field of remote pointers"
                ))
            })?;
            let copy = RemotePtr::new(index, ptr.offset())?;
            links.resolve(copy, len).ok_or_else(|| {
                if links.get(m).is_none() {
                    links.missing(m)
                } else {
                    KvError::corrupt(format!(
                        "the copy on memnode {m} of {len} bytes at {ptr:?} lies outside its region"
                    ))
                }
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use dmkv_api::metadata::TableLayout;

    fn table(replication: u32, sets: Vec<Vec<u64>>) -> TableDescription {
        TableDescription {
            name: "t".into(),
            id: 1,
            value_limit: 64,
            memnodes: sets.iter().filter_map(|s| s.first().copied()).collect(),
            replication,
            created_at_ms: 0,
            layout: TableLayout::Clover,
            memory: Default::default(),
            health: Default::default(),
            replica_sets: sets,
            syncing: Vec::new(),
            config_epoch: 0,
            writes_paused: false,
            rereplication: Vec::new(),
            feed: None,
        }
    }

    #[test]
    fn members_follow_the_home_memnodes_set() {
        let t = table(2, vec![vec![1, 2], vec![2, 3], vec![3, 1]]);
        assert_eq!(members(&t, 2), vec![2, 3]);
        assert_eq!(members(&t, 3), vec![3, 1]);
        // After a failure the set at a home's position lists the survivors.
        let failed = TableDescription {
            replica_sets: vec![vec![2], vec![2, 3], vec![3]],
            memnodes: vec![1, 2, 3],
            ..t.clone()
        };
        assert_eq!(members(&failed, 1), vec![2]);
        assert_eq!(members(&t, 9), vec![9]);
        assert!(is_replicated(&t));
        let joining = TableDescription {
            syncing: vec![vec![], vec![1], vec![]],
            ..t.clone()
        };
        assert_eq!(syncing(&joining, 2), vec![1]);
        assert!(syncing(&joining, 1).is_empty());
        let ptr = RemotePtr::new(2, 64).unwrap();
        let on: Vec<u8> = copies_of(&joining, ptr)
            .iter()
            .map(|p| p.memnode())
            .collect();
        assert_eq!(on, vec![2, 3, 1], "members first, then the syncing member");
        let single = table(1, vec![]);
        assert_eq!(members(&single, 4), vec![4]);
        assert!(!is_replicated(&single));
    }
}
