//! [`SledStore`]: the [`MetaStore`] on disk, in a sled database (`=0.34.7`).

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use super::{Batch, KeyValues, MetaStore, Op, StoreError};

/// How long [`SledStore::open`] waits for a lock held by this process to go.
pub const LOCK_WAIT: Duration = Duration::from_secs(3);

/// A sled database in a directory. Only one process may open a directory at a time.
#[derive(Debug, Clone)]
pub struct SledStore {
    db: sled::Db,
    path: PathBuf,
}

/// sled reports a held lock as an `Other` I/O error with this text.
fn is_lock_error(e: &sled::Error) -> bool {
    matches!(e, sled::Error::Io(io) if io.kind() == std::io::ErrorKind::WouldBlock
        || io.to_string().contains("could not acquire lock"))
}

fn engine(e: sled::Error) -> StoreError {
    StoreError::Engine(e.to_string())
}

impl SledStore {
    /// Opens (creating if needed) the database in `dir`.
    ///
    /// sled releases its file lock from a background thread shortly after the last
    /// handle is dropped, so a lock held by this process (an in-process restart) is
    /// waited for, up to [`LOCK_WAIT`]; a lock another process holds is reported then.
    pub fn open(dir: impl AsRef<Path>) -> Result<SledStore, StoreError> {
        let path = dir.as_ref().to_path_buf();
        let deadline = Instant::now() + LOCK_WAIT;
        loop {
            match sled::Config::new().path(&path).open() {
                Ok(db) => return Ok(SledStore { db, path }),
                Err(e) if is_lock_error(&e) && Instant::now() < deadline => {
                    std::thread::sleep(Duration::from_millis(20));
                }
                Err(e) => {
                    let hint = if is_lock_error(&e) {
                        " (is another metadata service using this data directory?)"
                    } else {
                        ""
                    };
                    return Err(StoreError::Engine(format!(
                        "cannot open the sled database in {}: {e}{hint}",
                        path.display()
                    )));
                }
            }
        }
    }

    /// The data directory.
    pub fn path(&self) -> &Path {
        &self.path
    }
}

impl MetaStore for SledStore {
    fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>, StoreError> {
        Ok(self.db.get(key).map_err(engine)?.map(|v| v.to_vec()))
    }

    fn scan_prefix(&self, prefix: &[u8]) -> Result<KeyValues, StoreError> {
        self.db
            .scan_prefix(prefix)
            .map(|r| r.map(|(k, v)| (k.to_vec(), v.to_vec())).map_err(engine))
            .collect()
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
        let mut out = Vec::new();
        for r in self.db.range::<Vec<u8>, _>((start, Bound::Unbounded)) {
            if out.len() >= limit {
                break;
            }
            let (k, v) = r.map_err(engine)?;
            if !k.starts_with(prefix) {
                break;
            }
            out.push((k.to_vec(), v.to_vec()));
        }
        Ok(out)
    }

    fn apply(&self, batch: &Batch) -> Result<(), StoreError> {
        let mut b = sled::Batch::default();
        for op in &batch.ops {
            match op {
                Op::Put(k, v) => b.insert(k.as_slice(), v.as_slice()),
                Op::Delete(k) => b.remove(k.as_slice()),
            }
        }
        self.db.apply_batch(b).map_err(engine)
    }

    fn compare_and_swap(
        &self,
        key: &[u8],
        expected: Option<&[u8]>,
        new: Option<&[u8]>,
    ) -> Result<bool, StoreError> {
        Ok(self
            .db
            .compare_and_swap(key, expected, new)
            .map_err(engine)?
            .is_ok())
    }

    fn flush(&self) -> Result<(), StoreError> {
        self.db.flush().map(|_| ()).map_err(engine)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn contract_and_reopen() {
        let dir = tempfile::tempdir().unwrap();
        {
            let s = SledStore::open(dir.path()).unwrap();
            super::super::check_contract(&s);
            s.put(b"kept", b"yes").unwrap();
            s.flush().unwrap();
        }
        let s = SledStore::open(dir.path()).unwrap();
        assert_eq!(s.get(b"kept").unwrap().as_deref(), Some(&b"yes"[..]));
        assert_eq!(s.scan_prefix(b"a/").unwrap().len(), 2);
    }
}
