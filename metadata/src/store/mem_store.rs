//! [`MemStore`]: the [`MetaStore`] in memory, for tests and embedded clusters.
//!
//! Clones share the same map, so a test can "restart" a service on the same state by
//! handing the clone to a new server.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use super::{Batch, KeyValues, MetaStore, Op, StoreError};

/// An in-memory ordered map behind a mutex. Durable only as long as the process lives.
#[derive(Debug, Clone, Default)]
pub struct MemStore {
    map: Arc<Mutex<BTreeMap<Vec<u8>, Vec<u8>>>>,
}

impl MemStore {
    /// An empty store.
    pub fn new() -> MemStore {
        MemStore::default()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, BTreeMap<Vec<u8>, Vec<u8>>> {
        self.map.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Number of keys stored.
    pub fn len(&self) -> usize {
        self.lock().len()
    }

    /// Whether no key is stored.
    pub fn is_empty(&self) -> bool {
        self.lock().is_empty()
    }
}

impl MetaStore for MemStore {
    fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>, StoreError> {
        Ok(self.lock().get(key).cloned())
    }

    fn scan_prefix(&self, prefix: &[u8]) -> Result<KeyValues, StoreError> {
        Ok(self
            .lock()
            .range(prefix.to_vec()..)
            .take_while(|(k, _)| k.starts_with(prefix))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect())
    }

    fn scan_page(
        &self,
        prefix: &[u8],
        after: Option<&[u8]>,
        limit: usize,
    ) -> Result<KeyValues, StoreError> {
        use std::ops::Bound;
        let start = match after {
            Some(a) if a >= prefix => Bound::Excluded(a.to_vec()),
            _ => Bound::Included(prefix.to_vec()),
        };
        Ok(self
            .lock()
            .range((start, Bound::Unbounded))
            .take_while(|(k, _)| k.starts_with(prefix))
            .take(limit)
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect())
    }

    fn apply(&self, batch: &Batch) -> Result<(), StoreError> {
        let mut map = self.lock();
        for op in &batch.ops {
            match op {
                Op::Put(k, v) => {
                    map.insert(k.clone(), v.clone());
                }
                Op::Delete(k) => {
                    map.remove(k);
                }
            }
        }
        Ok(())
    }

    fn compare_and_swap(
        &self,
        key: &[u8],
        expected: Option<&[u8]>,
        new: Option<&[u8]>,
    ) -> Result<bool, StoreError> {
        let mut map = self.lock();
        if map.get(key).map(Vec::as_slice) != expected {
            return Ok(false);
        }
        match new {
            Some(v) => map.insert(key.to_vec(), v.to_vec()),
            None => map.remove(key),
        };
        Ok(true)
    }

    fn flush(&self) -> Result<(), StoreError> {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn contract() {
        super::super::check_contract(&super::MemStore::new());
    }
}
