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
//!
//! A hint also says when its slot was last seen holding the word (the time taken
//! before posting the READ or CAS that showed it): an update of a key whose slot was
//! seen moments ago CASes that slot directly ([`super::known_slot`]).

use std::sync::{Mutex, MutexGuard};
use std::time::Instant;

use crate::index::ClientIndex;
use crate::key_map::KeyMap;
use crate::ptr::RemotePtr;

/// Hints kept before the map is emptied (a crude bound).
const LIMIT: usize = 1 << 20;

/// Where a key's block was last seen: the slot word that named it, the slot, and
/// when.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Hint {
    /// The slot word (unmarked, confirmed).
    pub word: u64,
    /// The address of the slot that held it.
    pub slot: RemotePtr,
    /// When the slot was seen holding the word: taken before the READ or CAS that
    /// showed it was posted, so a late answer only makes the hint look older.
    pub seen: Instant,
}

impl Hint {
    /// The same slot and word, seen at `seen`.
    pub(crate) fn seen_at(self, seen: Instant) -> Hint {
        Hint { seen, ..self }
    }
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

    /// Remember that `hint.slot` named `key`'s block with `hint.word` at `hint.seen`.
    pub(crate) fn set(&self, table: u64, key: &[u8], hint: Hint) {
        self.lock().insert(table, key, hint);
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
        let now = Instant::now();
        let hint = |word| Hint {
            word,
            slot: at,
            seen: now,
        };
        h.set(1, b"a", hint(7));
        h.set(2, b"a", hint(8));
        assert_eq!(h.get(1, b"a"), Some(hint(7)));
        assert_eq!(h.get(2, b"a").map(|x| x.word), Some(8));
        assert_eq!(h.get(1, b"b"), None);
        h.forget(1, b"a");
        assert_eq!(h.get(1, b"a"), None);
        h.forget_table(2);
        assert_eq!(h.get(2, b"a"), None);
    }
}
