//! Which values a key may hold, given the outcomes of the writes to it.
//!
//! Every key is written by one thread at a time, with values that are never reused,
//! so its writes are ordered. An acknowledged write replaces whatever came before; a
//! write that reported `OutcomeUnknown` may or may not have taken effect (it takes
//! effect before the next write of the key, if at all: a later writer puts it on the
//! primary before its own link), so it adds a value the key may hold; a write that
//! failed as `Unavailable` did not take effect and changes nothing.

/// How a write ended, for the model.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WriteOutcome {
    /// The write was acknowledged.
    Acknowledged,
    /// The write was sent and its queue pair failed before the acknowledgement.
    Unknown,
    /// The write failed without taking effect.
    Failed,
}

impl WriteOutcome {
    /// The outcome of a write that returned `result`.
    pub fn of<T>(result: &Result<T, kvstore::KvError>) -> WriteOutcome {
        match result {
            Ok(_) => WriteOutcome::Acknowledged,
            Err(kvstore::KvError::OutcomeUnknown(_)) => WriteOutcome::Unknown,
            Err(_) => WriteOutcome::Failed,
        }
    }
}

/// The values one key may hold.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KeyModel {
    /// `None` stands for "absent".
    allowed: Vec<Option<Vec<u8>>>,
    acknowledged: bool,
}

impl Default for KeyModel {
    fn default() -> Self {
        KeyModel::new()
    }
}

impl KeyModel {
    /// A key never written: it reads as absent.
    pub fn new() -> KeyModel {
        KeyModel {
            allowed: vec![None],
            acknowledged: false,
        }
    }

    /// Account for a write of `value` that ended with `outcome`.
    pub fn record_write(&mut self, value: &[u8], outcome: WriteOutcome) {
        match outcome {
            WriteOutcome::Acknowledged => {
                self.allowed = vec![Some(value.to_vec())];
                self.acknowledged = true;
            }
            WriteOutcome::Unknown => self.allowed.push(Some(value.to_vec())),
            WriteOutcome::Failed => {}
        }
    }

    /// Whether a read may return `read` now.
    pub fn admits(&self, read: Option<&[u8]>) -> bool {
        self.allowed.iter().any(|a| a.as_deref() == read)
    }

    /// Whether some write of the key was acknowledged (so reading anything not
    /// admitted loses an acknowledged write).
    pub fn has_acknowledged_write(&self) -> bool {
        self.acknowledged
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_acknowledged_write_replaces_everything_before_it() {
        let mut m = KeyModel::new();
        assert!(m.admits(None));
        assert!(!m.has_acknowledged_write());
        m.record_write(b"a", WriteOutcome::Unknown);
        assert!(m.admits(None) && m.admits(Some(b"a")));
        m.record_write(b"b", WriteOutcome::Acknowledged);
        assert!(m.has_acknowledged_write());
        assert!(m.admits(Some(b"b")));
        assert!(!m.admits(None) && !m.admits(Some(b"a")));
    }

    #[test]
    fn unknown_writes_may_be_read_and_failed_ones_may_not() {
        let mut m = KeyModel::new();
        m.record_write(b"a", WriteOutcome::Acknowledged);
        m.record_write(b"b", WriteOutcome::Unknown);
        m.record_write(b"c", WriteOutcome::Failed);
        m.record_write(b"d", WriteOutcome::Unknown);
        for v in [b"a", b"b", b"d"] {
            assert!(m.admits(Some(v)));
        }
        assert!(!m.admits(Some(b"c")));
        assert!(!m.admits(None));
    }

    #[test]
    fn outcomes_follow_the_error_kinds() {
        let unknown: Result<(), _> = Err(kvstore::KvError::OutcomeUnknown(kvstore::Cause::new(
            "qp failed",
        )));
        assert_eq!(WriteOutcome::of(&unknown), WriteOutcome::Unknown);
        let down: Result<(), _> = Err(kvstore::KvError::unavailable("down"));
        assert_eq!(WriteOutcome::of(&down), WriteOutcome::Failed);
        assert_eq!(
            WriteOutcome::of(&Ok::<(), kvstore::KvError>(())),
            WriteOutcome::Acknowledged
        );
    }
}
