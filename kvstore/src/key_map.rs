//! A map from (table id, key) to a value that is looked up by a borrowed key: one map
//! of keys per table, so a lookup hashes the key bytes in place instead of building an
//! owned `(u64, Vec<u8>)` first (the caches on every operation's path use it).

use std::collections::HashMap;

/// Values by table id and key, with a bound on the entries kept.
#[derive(Debug)]
pub(crate) struct KeyMap<V> {
    tables: HashMap<u64, HashMap<Vec<u8>, V>>,
    len: usize,
    limit: usize,
}

impl<V> KeyMap<V> {
    /// An empty map that empties itself when it would hold more than `limit` entries
    /// (a crude bound: these are caches).
    pub(crate) fn with_limit(limit: usize) -> KeyMap<V> {
        KeyMap {
            tables: HashMap::new(),
            len: 0,
            limit,
        }
    }

    /// The value of `key` in table `table`.
    pub(crate) fn get(&self, table: u64, key: &[u8]) -> Option<&V> {
        self.tables.get(&table)?.get(key)
    }

    /// The value of `key` in table `table`, to change in place.
    pub(crate) fn get_mut(&mut self, table: u64, key: &[u8]) -> Option<&mut V> {
        self.tables.get_mut(&table)?.get_mut(key)
    }

    /// Set the value of `key` in table `table`.
    pub(crate) fn insert(&mut self, table: u64, key: &[u8], value: V) {
        if let Some(v) = self.get_mut(table, key) {
            *v = value;
            return;
        }
        if self.len >= self.limit {
            self.clear();
        }
        self.tables
            .entry(table)
            .or_default()
            .insert(key.to_vec(), value);
        self.len += 1;
    }

    /// Drop `key` of table `table`.
    pub(crate) fn remove(&mut self, table: u64, key: &[u8]) {
        if let Some(t) = self.tables.get_mut(&table)
            && t.remove(key).is_some()
        {
            self.len -= 1;
        }
    }

    /// Drop every key of table `table`.
    pub(crate) fn forget_table(&mut self, table: u64) {
        if let Some(t) = self.tables.remove(&table) {
            self.len -= t.len();
        }
    }

    /// Drop everything.
    pub(crate) fn clear(&mut self) {
        self.tables.clear();
        self.len = 0;
    }

    /// Entries held.
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.len
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_per_table_counted_and_bounded() {
        let mut m = KeyMap::with_limit(3);
        m.insert(1, b"a", 1);
        m.insert(1, b"a", 2);
        m.insert(2, b"a", 3);
        assert_eq!(m.len(), 2);
        assert_eq!(m.get(1, b"a"), Some(&2));
        assert_eq!(m.get(2, b"a"), Some(&3));
        assert_eq!(m.get(3, b"a"), None);
        m.remove(1, b"a");
        m.remove(1, b"a");
        assert_eq!(m.len(), 1);
        m.insert(1, b"b", 4);
        m.insert(1, b"c", 5);
        assert_eq!(m.len(), 3);
        // Full: the next new key empties the map first.
        m.insert(1, b"d", 6);
        assert_eq!(m.len(), 1);
        assert_eq!(m.get(1, b"d"), Some(&6));
        m.insert(2, b"x", 7);
        m.forget_table(2);
        assert_eq!(m.len(), 1);
        assert_eq!(m.get(2, b"x"), None);
    }
}
