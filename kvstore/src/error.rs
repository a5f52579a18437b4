//! Typed errors: what the table API returns, and why a remote layout failed to parse.

use thiserror::Error;

/// Largest key, in bytes, that any table accepts. Keys are byte strings of 1 to
/// `MAX_KEY_LEN` bytes; the table API rejects empty keys ([`check_table_key`]).
///
/// Keys are stored inline in every Clover node and RACE KV block, and the switch
/// accelerator parses them out of packets, so they are kept short.
pub const MAX_KEY_LEN: usize = 256;

/// An error returned by the table API.
///
/// Bad input is reported here and never panics. `NotFound` and `AlreadyExists`
/// are ordinary outcomes of `get`/`update`/`delete` and `insert`.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum KvError {
    /// The key has no value (never written, or deleted).
    #[error("key not found")]
    NotFound,
    /// `insert` found the key already present.
    #[error("key already exists")]
    AlreadyExists,
    /// The key is longer than [`MAX_KEY_LEN`].
    #[error("key of {len} bytes exceeds the limit of {limit} bytes")]
    KeyTooLarge {
        /// Length of the rejected key.
        len: usize,
        /// The limit it exceeded.
        limit: usize,
    },
    /// The value is longer than the table (or index layout) allows for this key.
    #[error("value of {len} bytes exceeds the limit of {limit} bytes")]
    ValueTooLarge {
        /// Length of the rejected value.
        len: usize,
        /// The limit it exceeded.
        limit: usize,
    },
    /// No table by that name exists.
    #[error("no such table: {0}")]
    NoSuchTable(String),
    /// A memory node or the metadata service could not be reached, or an
    /// operation timed out; the operation may or may not have taken effect.
    #[error("unavailable: {0}")]
    Unavailable(String),
    /// Remote memory held something that failed validation (bad CRC, wrong key,
    /// impossible lengths) even after re-reading.
    #[error("corrupt remote data: {0}")]
    Corrupt(String),
    /// Bounded retries under contention were exhausted; nothing was changed.
    #[error("gave up after {attempts} contended attempts")]
    Contended {
        /// How many attempts were made.
        attempts: u32,
    },
    /// An argument was invalid for a reason not covered above.
    #[error("invalid argument: {0}")]
    InvalidArgument(String),
    /// The request needs something this client does not offer (an index or
    /// transport it does not implement, a cluster larger than its pointers address).
    #[error("unsupported: {0}")]
    Unsupported(String),
}

impl KvError {
    /// A short name of the error's kind (`not_found`, `unavailable`, …), for spans
    /// and metrics.
    pub fn kind(&self) -> &'static str {
        match self {
            KvError::NotFound => "not_found",
            KvError::AlreadyExists => "already_exists",
            KvError::KeyTooLarge { .. } => "key_too_large",
            KvError::ValueTooLarge { .. } => "value_too_large",
            KvError::NoSuchTable(_) => "no_such_table",
            KvError::Unavailable(_) => "unavailable",
            KvError::Corrupt(_) => "corrupt",
            KvError::Contended { .. } => "contended",
            KvError::InvalidArgument(_) => "invalid_argument",
            KvError::Unsupported(_) => "unsupported",
        }
    }
}

/// Why a remote memory layout (node, bucket, slot, KV block, directory) was rejected.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum LayoutError {
    /// The buffer is shorter than the layout requires.
    #[error("truncated: need {need} bytes, have {have}")]
    Truncated {
        /// Bytes required.
        need: usize,
        /// Bytes available.
        have: usize,
    },
    /// A length field is impossible (exceeds a limit or the buffer).
    #[error("bad length: {0}")]
    BadLength(String),
    /// The stored checksum does not match the contents.
    #[error("checksum mismatch: stored {stored:#010x}, computed {computed:#010x}")]
    Checksum {
        /// CRC-32 found in the buffer.
        stored: u32,
        /// CRC-32 computed over the contents.
        computed: u32,
    },
    /// A field that must be zero (reserved bits or bytes) is not.
    #[error("reserved field is non-zero: {0}")]
    Reserved(String),
    /// A field is outside its representable range (address, depth, size class).
    #[error("out of range: {0}")]
    OutOfRange(String),
}

impl From<LayoutError> for KvError {
    fn from(e: LayoutError) -> KvError {
        KvError::Corrupt(e.to_string())
    }
}

/// Check a key against [`MAX_KEY_LEN`].
pub fn check_key(key: &[u8]) -> Result<(), KvError> {
    if key.len() > MAX_KEY_LEN {
        Err(KvError::KeyTooLarge {
            len: key.len(),
            limit: MAX_KEY_LEN,
        })
    } else {
        Ok(())
    }
}

/// Check a key as the table API takes it: 1 to [`MAX_KEY_LEN`] bytes.
///
/// The metadata service names Clover chains by key and needs at least one byte.
pub fn check_table_key(key: &[u8]) -> Result<(), KvError> {
    if key.is_empty() {
        return Err(KvError::InvalidArgument(
            "keys must be at least one byte long".into(),
        ));
    }
    check_key(key)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn key_limit_is_inclusive() {
        assert_eq!(check_key(&[0; MAX_KEY_LEN]), Ok(()));
        assert_eq!(check_key(b""), Ok(()));
        assert!(matches!(
            check_table_key(b""),
            Err(KvError::InvalidArgument(_))
        ));
        assert_eq!(check_table_key(b"k"), Ok(()));
        assert_eq!(
            check_key(&[0; MAX_KEY_LEN + 1]),
            Err(KvError::KeyTooLarge {
                len: MAX_KEY_LEN + 1,
                limit: MAX_KEY_LEN
            })
        );
    }

    #[test]
    fn layout_errors_become_corrupt() {
        let e: KvError = LayoutError::Truncated { need: 8, have: 3 }.into();
        assert_eq!(
            e,
            KvError::Corrupt("truncated: need 8 bytes, have 3".into())
        );
        assert_eq!(
            KvError::ValueTooLarge { len: 10, limit: 4 }.to_string(),
            "value of 10 bytes exceeds the limit of 4 bytes"
        );
    }
}
