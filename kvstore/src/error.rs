//! Typed errors: what the table API returns, and why a remote layout failed to parse.

use std::sync::Arc;

use thiserror::Error;

/// Largest key, in bytes, that any table accepts. Keys are byte strings of 1 to
/// `MAX_KEY_LEN` bytes; the table API rejects empty keys ([`check_table_key`]).
///
/// Keys are stored inline in every Clover node and RACE KV block, and the switch
/// accelerator parses them out of packets, so they are kept short.
pub const MAX_KEY_LEN: usize = 256;

/// Why an operation failed with [`KvError::Unavailable`], [`KvError::OutcomeUnknown`]
/// or [`KvError::Corrupt`]: a
/// message and, when another error caused it (the transport, the metadata service's
/// HTTP client, a remote layout that failed to parse), that error, which
/// [`std::error::Error::source`] of the [`KvError`] returns.
///
/// Two causes are equal when their messages are.
#[derive(Debug, Clone)]
pub struct Cause {
    message: String,
    source: Option<Arc<dyn std::error::Error + Send + Sync + 'static>>,
}

impl Cause {
    /// A cause that is only a message.
    pub fn new(message: impl Into<String>) -> Cause {
        Cause {
            message: message.into(),
            source: None,
        }
    }

    /// A cause with the error `source` behind it.
    pub fn caused_by(
        message: impl Into<String>,
        source: impl std::error::Error + Send + Sync + 'static,
    ) -> Cause {
        Cause {
            message: message.into(),
            source: Some(Arc::new(source)),
        }
    }

    /// The message.
    pub fn message(&self) -> &str {
        &self.message
    }

    /// The error behind it, if another error caused it.
    pub fn source(&self) -> Option<&(dyn std::error::Error + Send + Sync + 'static)> {
        self.source.as_deref()
    }
}

impl std::fmt::Display for Cause {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

impl PartialEq for Cause {
    fn eq(&self, other: &Cause) -> bool {
        self.message == other.message
    }
}

impl Eq for Cause {}

impl From<String> for Cause {
    fn from(message: String) -> Cause {
        Cause::new(message)
    }
}

impl From<&str> for Cause {
    fn from(message: &str) -> Cause {
        Cause::new(message)
    }
}

/// An error returned by the table API.
///
/// Bad input is reported here and never panics. `NotFound` and `AlreadyExists`
/// are ordinary outcomes of `get`/`update`/`delete` and `insert`. `Unavailable`,
/// `OutcomeUnknown` and `Corrupt` carry a [`Cause`], whose error (if another error caused them) is this
/// error's [`source`](std::error::Error::source).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum KvError {
    /// The key has no value (never written, or deleted).
    NotFound,
    /// `insert` found the key already present.
    AlreadyExists,
    /// The key is longer than [`MAX_KEY_LEN`].
    KeyTooLarge {
        /// Length of the rejected key.
        len: usize,
        /// The limit it exceeded.
        limit: usize,
    },
    /// The value is longer than the table (or index layout) allows for this key.
    ValueTooLarge {
        /// Length of the rejected value.
        len: usize,
        /// The limit it exceeded.
        limit: usize,
    },
    /// No table by that name exists.
    NoSuchTable(String),
    /// A memory node or the metadata service could not be reached, or an
    /// operation timed out. A read or write failing this way after its queue pair
    /// failed did not take effect (writes that may have are [`KvError::OutcomeUnknown`]).
    Unavailable(Cause),
    /// A write was sent to a memory node whose queue pair then failed before it
    /// was acknowledged: it may or may not have taken effect. Read the key to find
    /// out; the session has replaced the queue pair (or does so on its next use).
    OutcomeUnknown(Cause),
    /// Remote memory held something that failed validation (bad CRC, wrong key,
    /// impossible lengths) even after re-reading.
    Corrupt(Cause),
    /// Bounded retries under contention were exhausted; nothing was changed.
    Contended {
        /// How many attempts were made.
        attempts: u32,
    },
    /// An argument was invalid for a reason not covered above.
    InvalidArgument(String),
    /// The request needs something this client does not offer (an index or
    /// transport it does not implement, a cluster larger than its pointers address).
    Unsupported(String),
}

impl std::fmt::Display for KvError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            KvError::NotFound => write!(f, "key not found"),
            KvError::AlreadyExists => write!(f, "key already exists"),
            KvError::KeyTooLarge { len, limit } => {
                write!(f, "key of {len} bytes exceeds the limit of {limit} bytes")
            }
            KvError::ValueTooLarge { len, limit } => {
                write!(f, "value of {len} bytes exceeds the limit of {limit} bytes")
            }
            KvError::NoSuchTable(t) => write!(f, "no such table: {t}"),
            KvError::Unavailable(c) => write!(f, "unavailable: {c}"),
            KvError::OutcomeUnknown(c) => write!(f, "outcome unknown: {c}"),
            KvError::Corrupt(c) => write!(f, "corrupt remote data: {c}"),
            KvError::Contended { attempts } => {
                write!(f, "gave up after {attempts} contended attempts")
            }
            KvError::InvalidArgument(m) => write!(f, "invalid argument: {m}"),
            KvError::Unsupported(m) => write!(f, "unsupported: {m}"),
        }
    }
}

impl std::error::Error for KvError {
    /// The error that caused an `Unavailable`, `OutcomeUnknown` or `Corrupt`, if
    /// another error did.
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            KvError::Unavailable(c) | KvError::OutcomeUnknown(c) | KvError::Corrupt(c) => {
                c.source().map(|e| e as &(dyn std::error::Error + 'static))
            }
            _ => None,
        }
    }
}

impl KvError {
    /// `Unavailable` with message `message`.
    pub fn unavailable(message: impl Into<String>) -> KvError {
        KvError::Unavailable(Cause::new(message))
    }

    /// `Unavailable` with message `message`, caused by `source`.
    pub fn unavailable_because(
        message: impl Into<String>,
        source: impl std::error::Error + Send + Sync + 'static,
    ) -> KvError {
        KvError::Unavailable(Cause::caused_by(message, source))
    }

    /// `Corrupt` with message `message`.
    pub fn corrupt(message: impl Into<String>) -> KvError {
        KvError::Corrupt(Cause::new(message))
    }

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
            KvError::OutcomeUnknown(_) => "outcome_unknown",
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
        KvError::Corrupt(Cause::caused_by(e.to_string(), e))
    }
}

/// Check a key against [`MAX_KEY_LEN`].
pub(crate) fn check_key(key: &[u8]) -> Result<(), KvError> {
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
pub(crate) fn check_table_key(key: &[u8]) -> Result<(), KvError> {
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
        assert_eq!(e, KvError::corrupt("truncated: need 8 bytes, have 3"));
        // The layout error stays reachable as the source.
        let source = std::error::Error::source(&e).expect("a source");
        assert_eq!(source.to_string(), "truncated: need 8 bytes, have 3");
        assert_eq!(
            KvError::ValueTooLarge { len: 10, limit: 4 }.to_string(),
            "value of 10 bytes exceeds the limit of 4 bytes"
        );
    }

    #[test]
    fn causes_keep_their_source_and_compare_by_message() {
        let io = std::io::Error::other("connection refused");
        let e = KvError::unavailable_because("metadata service: connection refused", io);
        assert_eq!(
            e.to_string(),
            "unavailable: metadata service: connection refused"
        );
        let source = std::error::Error::source(&e).expect("a source");
        assert!(source.downcast_ref::<std::io::Error>().is_some());
        assert_eq!(
            e,
            KvError::unavailable("metadata service: connection refused")
        );
        assert!(matches!(&e, KvError::Unavailable(c) if c.message().contains("refused")));
        assert!(std::error::Error::source(&KvError::NotFound).is_none());
    }

    #[test]
    fn outcome_unknown_is_its_own_kind_with_its_cause() {
        let e = KvError::OutcomeUnknown(Cause::caused_by(
            "the put of key \"a\" may or may not have taken effect",
            std::io::Error::other("retry counter exceeded"),
        ));
        assert_eq!(e.kind(), "outcome_unknown");
        assert_ne!(
            e,
            KvError::unavailable("the put of key \"a\" may or may not have taken effect")
        );
        assert!(e.to_string().starts_with("outcome unknown: the put of key"));
        assert!(std::error::Error::source(&e).is_some());
    }
}
