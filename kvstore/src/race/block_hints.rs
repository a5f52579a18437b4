//! Where a key's KV block was last found or written, kept per client: a search of a
//! key the client has found or written before READs that block in the same doorbell
//! as the key's buckets, so it takes one round trip instead of two when the key has
//! not moved; an update or delete does the same with its first look at the buckets,
//! so the block it must check is known without a round trip of its own (2 instead
//! of 3).
//!
//! The hint is the slot word that named the block and the address of that slot. A
//! search whose hinted slot is still one of the key's slots READs just that slot's
//! bucket with the block ([`super::hinted_read`]); otherwise both combined buckets
//! with the block. The block READ is posted after
//! the bucket READs on the same queue pair (only when all of them go to one memory
//! node), so it executes after them; when the buckets show that very word in one of
//! the key's slots, the block was named by a slot when the buckets were read, and
//! its bytes read within the grace period of that READ are the record the slot
//! named — the same argument as for the second round trip of an ordinary search
//! ([`super::net::lookup_all`]). The block is then checked like any other (CRC,
//! key). A hint that does not match — the key was updated, moved by a split,
//! deleted — costs the bytes of one block READ and nothing else: the search goes on
//! with the buckets it read, as it would have anyway.

use std::sync::{Mutex, MutexGuard};

use crate::index::ClientIndex;
use crate::key_map::KeyMap;
use crate::ptr::RemotePtr;

/// Hints kept before the map is emptied (a crude bound).
const LIMIT: usize = 1 << 20;

/// Where a key's block was last seen: the slot word that named it and the slot.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Hint {
    /// The slot word (unmarked, confirmed).
    pub word: u64,
    /// The address of the slot that held it.
    pub slot: RemotePtr,
}

/// Per client: table id and key → where the key's block was last seen.
pub(crate) struct BlockHints {
    words: Mutex<KeyMap<Hint>>,
}

impl Default for BlockHints {
    fn default() -> Self {
        BlockHints {
            words: Mutex::new(KeyMap::with_limit(LIMIT)),
        }
    }
}

impl ClientIndex for BlockHints {
    fn forget_table(&self, id: u64) {
        self.lock().forget_table(id);
    }
}

impl BlockHints {
    fn lock(&self) -> MutexGuard<'_, KeyMap<Hint>> {
        self.words.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Where `key`'s block in table `table` was last seen.
    pub(crate) fn get(&self, table: u64, key: &[u8]) -> Option<Hint> {
        self.lock().get(table, key).copied()
    }

    /// Remember that the slot at `slot` named `key`'s block with `word`.
    pub(crate) fn set(&self, table: u64, key: &[u8], word: u64, slot: RemotePtr) {
        self.lock().insert(table, key, Hint { word, slot });
    }

    /// Forget `key`'s hint.
    pub(crate) fn forget(&self, table: u64, key: &[u8]) {
        self.lock().remove(table, key);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hints_are_per_table_and_key_and_forgotten_with_the_table() {
        let h = BlockHints::default();
        let at = RemotePtr::new(1, 4096).unwrap();
        h.set(1, b"a", 7, at);
        h.set(2, b"a", 8, at);
        assert_eq!(h.get(1, b"a"), Some(Hint { word: 7, slot: at }));
        assert_eq!(h.get(2, b"a").map(|x| x.word), Some(8));
        assert_eq!(h.get(1, b"b"), None);
        h.forget(1, b"a");
        assert_eq!(h.get(1, b"a"), None);
        h.forget_table(2);
        assert_eq!(h.get(2, b"a"), None);
    }
}
