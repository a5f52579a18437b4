//! The combined buckets this client's writes last read, kept per client: an insert of
//! a key whose two combined buckets are both here predicts the empty slot a fresh
//! look would pick and claims it in the round trip of that look
//! ([`super::predicted_claim`]). What is kept is only ever a guess: every decision
//! is taken on buckets READ after the claim's CAS, as without the cache.

use std::collections::HashMap;
use std::sync::{Mutex, MutexGuard};

use super::bucket::{CombinedBucket, Subtable};
use super::hash::KeyHash;
use super::net::View;
use crate::index::ClientIndex;
use crate::ptr::RemotePtr;

/// Combined buckets kept before the map is emptied (a crude bound: 2^18 buckets of
/// 128 bytes and their addresses, ~40 MB).
const LIMIT: usize = 1 << 18;

/// Per client: (table id, address of a combined bucket's main bucket) → the combined
/// bucket as last read.
#[derive(Default)]
pub(crate) struct BucketCache {
    buckets: Mutex<HashMap<(u64, RemotePtr), CombinedBucket>>,
}

impl ClientIndex for BucketCache {
    fn forget_table(&self, id: u64) {
        self.lock().retain(|(table, _), _| *table != id);
    }
}

impl BucketCache {
    fn lock(&self) -> MutexGuard<'_, HashMap<(u64, RemotePtr), CombinedBucket>> {
        self.buckets.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Keep the buckets of `view`, read from table `table`.
    pub(crate) fn remember(&self, table: u64, view: &View) {
        let mut map = self.lock();
        if map.len() >= LIMIT {
            map.clear();
        }
        for c in &view.buckets {
            map.insert((table, c.main_at), *c);
        }
    }

    /// The view of `hash`'s two combined buckets in `subtable` as last read, when
    /// both are kept.
    pub(crate) fn view(
        &self,
        table: u64,
        subtable: RemotePtr,
        geometry: Subtable,
        hash: &KeyHash,
    ) -> Option<View> {
        let [a, b] = geometry.candidates(hash);
        let choices = if a == b { 1 } else { 2 };
        let map = self.lock();
        let buckets = [a, b]
            .into_iter()
            .take(choices)
            .map(|bk| {
                let main_at = subtable.checked_add(Subtable::main_offset(bk))?;
                map.get(&(table, main_at)).copied()
            })
            .collect::<Option<Vec<_>>>()?;
        Some(View { subtable, buckets })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::race::bucket::BucketHeader;

    fn view_of(subtable: RemotePtr, geometry: Subtable, hash: &KeyHash, word: u64) -> View {
        let header = BucketHeader::new(0, 0).unwrap();
        View::with_main_slots(subtable, geometry, hash, header, &[(0, word)])
    }

    #[test]
    fn a_view_comes_back_only_whole_and_per_table() {
        let geometry = Subtable::new(64).unwrap();
        let subtable = RemotePtr::new(1, 1 << 20).unwrap();
        let hash = KeyHash::of(b"user:1");
        let cache = BucketCache::default();
        assert!(cache.view(7, subtable, geometry, &hash).is_none());
        let v = view_of(subtable, geometry, &hash, 0);
        cache.remember(7, &v);
        let back = cache.view(7, subtable, geometry, &hash).expect("kept");
        assert_eq!(back.buckets.len(), v.buckets.len());
        assert_eq!(back.buckets[0].main_at, v.buckets[0].main_at);
        // Another table, or another subtable: nothing.
        assert!(cache.view(8, subtable, geometry, &hash).is_none());
        let elsewhere = RemotePtr::new(1, 2 << 20).unwrap();
        assert!(cache.view(7, elsewhere, geometry, &hash).is_none());
        // Half a view is no view.
        let mut half = v.clone();
        half.buckets.truncate(1);
        let other = BucketCache::default();
        other.remember(7, &half);
        if v.buckets.len() == 2 {
            assert!(other.view(7, subtable, geometry, &hash).is_none());
        }
        // A newer read replaces the older; a dropped table is forgotten.
        let newer = view_of(subtable, geometry, &hash, 42 << 48);
        cache.remember(7, &newer);
        let back = cache.view(7, subtable, geometry, &hash).unwrap();
        assert_eq!(back.buckets[0].main.slots[0], 42 << 48);
        cache.forget_table(7);
        assert!(cache.view(7, subtable, geometry, &hash).is_none());
    }
}
