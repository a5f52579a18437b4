//! Persistence: a small ordered key-value interface ([`MetaStore`]) with two
//! implementations, [`SledStore`] (on disk, the service's default) and [`MemStore`] (in
//! memory, for tests and embedded use).
//!
//! The catalog keeps its whole state in memory and writes every acknowledged change to
//! the store as one atomic [`Batch`] followed by [`MetaStore::flush`], so a restart
//! (even a crash) loses nothing that a client was told succeeded. Values are typed
//! records serialised as JSON ([`encode`], [`decode`]).

mod mem_store;
mod sled_store;

pub use mem_store::MemStore;
pub use sled_store::SledStore;

use serde::Serialize;
use serde::de::DeserializeOwned;

/// Key-value pairs, in key order.
pub type KeyValues = Vec<(Vec<u8>, Vec<u8>)>;

/// Why a store operation failed.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// The storage engine failed (I/O, corruption, lock held by another process).
    #[error("storage error: {0}")]
    Engine(String),
    /// A stored record could not be decoded.
    #[error("corrupt record under key {key:?}: {reason}")]
    Corrupt {
        /// The key (lossy UTF-8).
        key: String,
        /// Why.
        reason: String,
    },
}

/// One change in a [`Batch`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Op {
    /// Set `key` to `value`.
    Put(Vec<u8>, Vec<u8>),
    /// Remove `key` (no error if absent).
    Delete(Vec<u8>),
}

/// Changes applied atomically: all or none, and never observed half-applied.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Batch {
    /// The changes, applied in order.
    pub ops: Vec<Op>,
}

impl Batch {
    /// An empty batch.
    pub fn new() -> Batch {
        Batch::default()
    }

    /// Adds a put of raw bytes.
    pub fn put_raw(&mut self, key: impl Into<Vec<u8>>, value: Vec<u8>) -> &mut Batch {
        self.ops.push(Op::Put(key.into(), value));
        self
    }

    /// Adds a put of a JSON-encoded record.
    pub fn put<T: Serialize>(&mut self, key: impl Into<Vec<u8>>, value: &T) -> &mut Batch {
        let value = encode(value);
        self.put_raw(key, value)
    }

    /// Adds a delete.
    pub fn delete(&mut self, key: impl Into<Vec<u8>>) -> &mut Batch {
        self.ops.push(Op::Delete(key.into()));
        self
    }

    /// Whether there is nothing to apply.
    pub fn is_empty(&self) -> bool {
        self.ops.is_empty()
    }
}

/// A small ordered key-value store: what the metadata service needs from persistence.
///
/// Keys are compared as bytes. Implementations must make [`MetaStore::apply`] atomic
/// and [`MetaStore::flush`] durable (after it returns, every applied batch survives a
/// crash of the process).
pub trait MetaStore: Send + Sync + std::fmt::Debug + 'static {
    /// The value under `key`.
    fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>, StoreError>;

    /// Every `(key, value)` whose key starts with `prefix`, in key order.
    fn scan_prefix(&self, prefix: &[u8]) -> Result<KeyValues, StoreError>;

    /// At most `limit` `(key, value)` whose key starts with `prefix` and, when
    /// `after` is given, is greater than `after`, in key order (one page of a
    /// listing). The default scans the whole prefix; stores override it to start
    /// at `after`.
    fn scan_page(
        &self,
        prefix: &[u8],
        after: Option<&[u8]>,
        limit: usize,
    ) -> Result<KeyValues, StoreError> {
        Ok(self
            .scan_prefix(prefix)?
            .into_iter()
            .filter(|(k, _)| after.is_none_or(|a| k.as_slice() > a))
            .take(limit)
            .collect())
    }

    /// Applies `batch` atomically.
    fn apply(&self, batch: &Batch) -> Result<(), StoreError>;

    /// Sets `key` to `new` (or removes it when `None`) only if its current value is
    /// `expected` (`None` = absent). Returns `Ok(false)` on a mismatch.
    fn compare_and_swap(
        &self,
        key: &[u8],
        expected: Option<&[u8]>,
        new: Option<&[u8]>,
    ) -> Result<bool, StoreError>;

    /// Makes everything applied so far durable.
    fn flush(&self) -> Result<(), StoreError>;

    /// Sets one key.
    fn put(&self, key: &[u8], value: &[u8]) -> Result<(), StoreError> {
        let mut b = Batch::new();
        b.put_raw(key, value.to_vec());
        self.apply(&b)
    }

    /// Removes one key.
    fn delete(&self, key: &[u8]) -> Result<(), StoreError> {
        let mut b = Batch::new();
        b.delete(key);
        self.apply(&b)
    }
}

/// A record as stored.
pub fn encode<T: Serialize>(value: &T) -> Vec<u8> {
    serde_json::to_vec(value).expect("catalog records always serialise")
}

/// A stored record; `key` is for the error message.
pub fn decode<T: DeserializeOwned>(key: &[u8], value: &[u8]) -> Result<T, StoreError> {
    serde_json::from_slice(value).map_err(|e| StoreError::Corrupt {
        key: String::from_utf8_lossy(key).into_owned(),
        reason: e.to_string(),
    })
}

/// The behaviour every [`MetaStore`] must have; run by both implementations' tests.
#[cfg(test)]
pub(crate) fn check_contract(s: &dyn MetaStore) {
    assert_eq!(s.get(b"a").unwrap(), None);
    s.put(b"a/1", b"one").unwrap();
    s.put(b"a/2", b"two").unwrap();
    s.put(b"b/1", b"other").unwrap();
    assert_eq!(s.get(b"a/1").unwrap().as_deref(), Some(&b"one"[..]));
    let scan = s.scan_prefix(b"a/").unwrap();
    assert_eq!(
        scan,
        vec![
            (b"a/1".to_vec(), b"one".to_vec()),
            (b"a/2".to_vec(), b"two".to_vec())
        ]
    );
    let mut b = Batch::new();
    b.delete(b"a/1".to_vec())
        .put_raw(b"a/3".to_vec(), b"three".to_vec());
    s.apply(&b).unwrap();
    assert_eq!(s.get(b"a/1").unwrap(), None);
    assert_eq!(s.scan_prefix(b"a/").unwrap().len(), 2);
    assert!(!s.compare_and_swap(b"c", Some(b"x"), Some(b"y")).unwrap());
    assert!(s.compare_and_swap(b"c", None, Some(b"y")).unwrap());
    assert!(!s.compare_and_swap(b"c", None, Some(b"z")).unwrap());
    assert!(s.compare_and_swap(b"c", Some(b"y"), Some(b"z")).unwrap());
    assert_eq!(s.get(b"c").unwrap().as_deref(), Some(&b"z"[..]));
    assert!(s.compare_and_swap(b"c", Some(b"z"), None).unwrap());
    assert_eq!(s.get(b"c").unwrap(), None);
    s.delete(b"b/1").unwrap();
    assert!(s.scan_prefix(b"b/").unwrap().is_empty());
    check_pages(s);
    s.flush().unwrap();
}

/// [`MetaStore::scan_page`]: pages by prefix, after a key, with a limit.
#[cfg(test)]
fn check_pages(s: &dyn MetaStore) {
    for k in [&b"p/a"[..], b"p/b", b"p/c", b"p/d", b"q/a", b"o/z"] {
        s.put(k, k).unwrap();
    }
    let keys = |page: KeyValues| page.into_iter().map(|(k, _)| k).collect::<Vec<_>>();
    assert_eq!(
        keys(s.scan_page(b"p/", None, 10).unwrap()),
        vec![
            b"p/a".to_vec(),
            b"p/b".to_vec(),
            b"p/c".to_vec(),
            b"p/d".to_vec()
        ]
    );
    assert_eq!(
        keys(s.scan_page(b"p/", None, 2).unwrap()),
        vec![b"p/a".to_vec(), b"p/b".to_vec()]
    );
    assert_eq!(
        keys(s.scan_page(b"p/", Some(b"p/b"), 10).unwrap()),
        vec![b"p/c".to_vec(), b"p/d".to_vec()]
    );
    // An `after` between two keys, before the prefix, or past it.
    assert_eq!(
        keys(s.scan_page(b"p/", Some(b"p/bb"), 1).unwrap()),
        vec![b"p/c".to_vec()]
    );
    assert_eq!(
        keys(s.scan_page(b"p/", Some(b"a"), 1).unwrap()),
        vec![b"p/a".to_vec()]
    );
    assert!(s.scan_page(b"p/", Some(b"p/d"), 10).unwrap().is_empty());
    assert!(s.scan_page(b"p/", Some(b"z"), 10).unwrap().is_empty());
    assert!(s.scan_page(b"p/", None, 0).unwrap().is_empty());
}
