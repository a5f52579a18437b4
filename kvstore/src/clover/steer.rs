//! What the switch accelerator's Clover steering puts in front of a session, and how
//! the session reads it (only on sessions whose queue pairs go through the switch).
//!
//! * A link CAS the switch redirected to the key's committed tail comes back with a
//!   marker instead of the raw original value — a word no header has (no successor
//!   flag, non-zero successor fields): on success the tail's own generation and its
//!   address / 64 (the node was linked after that tail, and the switch gave the node
//!   the version after it), on failure tombstone flag + 1 (not linked: locate again and
//!   retry). A raw value without successor that differs from the compare may be a
//!   steered CAS whose record the switch lost: its outcome is unknown.
//! * A node READ the switch redirected to the committed tail comes back, when that node
//!   was still the tail, with the address it was read from / 64 in the header's
//!   successor fields. The session accepts such a node in place of the one it asked for
//!   when it belongs to the same chain with a later version, and takes its address
//!   from the marker.

use std::borrow::Cow;

use super::header::{HAS_SUCCESSOR, OWN_GEN_SHIFT, SUCCESSOR_FIELDS, TOMBSTONE};
use crate::ptr::RemotePtr;
use crate::session::SessionCore;

/// The original value of a failed steered link CAS.
pub(crate) const STEER_FAILED: u64 = TOMBSTONE | 1;

/// What a link CAS's original value says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum LinkOutcome {
    /// Linked after the node the writer read.
    Linked,
    /// Not linked; the value is the node's header as found.
    Failed,
    /// The switch linked the node after its committed tail at `va`, whose own
    /// generation is `generation`.
    SteeredLinked { va: u64, generation: u16 },
    /// The switch redirected the CAS and it failed: not linked.
    SteeredFailed,
    /// Possibly redirected with the switch's record lost: it may or may not be linked.
    Unknown,
}

/// Classify `previous` for a CAS whose compare was `compare`.
pub(crate) fn link_outcome(previous: u64, compare: u64, accelerated: bool) -> LinkOutcome {
    if previous == compare {
        return LinkOutcome::Linked;
    }
    if !accelerated || previous & HAS_SUCCESSOR != 0 {
        return LinkOutcome::Failed;
    }
    if previous == STEER_FAILED {
        return LinkOutcome::SteeredFailed;
    }
    let fields = previous & SUCCESSOR_FIELDS;
    if fields != 0 && previous & TOMBSTONE == 0 {
        return LinkOutcome::SteeredLinked {
            va: fields << 6,
            generation: (previous >> OWN_GEN_SHIFT) as u16,
        };
    }
    LinkOutcome::Unknown
}

/// A node READ's bytes with a read-steering marker removed, and the pointer it names.
pub(crate) fn unmark<'a>(
    core: &SessionCore,
    asked: RemotePtr,
    buf: &'a [u8],
) -> (Cow<'a, [u8]>, Option<RemotePtr>) {
    if !core.accelerated {
        return (Cow::Borrowed(buf), None);
    }
    let Some(word) = buf.get(0..8).and_then(|w| <[u8; 8]>::try_from(w).ok()) else {
        return (Cow::Borrowed(buf), None);
    };
    let word = u64::from_le_bytes(word);
    let fields = word & SUCCESSOR_FIELDS;
    if word & HAS_SUCCESSOR != 0 || fields == 0 {
        return (Cow::Borrowed(buf), None);
    }
    let Ok(ptr) = core.links.ptr_of(u64::from(asked.memnode()), fields << 6) else {
        return (Cow::Borrowed(buf), None);
    };
    let mut owned = buf.to_vec();
    owned[0..8].copy_from_slice(&(word & !SUCCESSOR_FIELDS).to_le_bytes());
    (Cow::Owned(owned), Some(ptr))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn outcomes() {
        let cmp = 7u64 << OWN_GEN_SHIFT;
        assert_eq!(link_outcome(cmp, cmp, true), LinkOutcome::Linked);
        assert_eq!(
            link_outcome(cmp | HAS_SUCCESSOR | 5, cmp, true),
            LinkOutcome::Failed
        );
        assert_eq!(
            link_outcome(STEER_FAILED, cmp, true),
            LinkOutcome::SteeredFailed
        );
        assert_eq!(
            link_outcome((9u64 << OWN_GEN_SHIFT) | 0x40, cmp, true),
            LinkOutcome::SteeredLinked {
                va: 0x1000,
                generation: 9
            }
        );
        assert_eq!(
            link_outcome(9u64 << OWN_GEN_SHIFT, cmp, true),
            LinkOutcome::Unknown
        );
        // Without the switch, a reused tail is an ordinary failure.
        assert_eq!(
            link_outcome(9u64 << OWN_GEN_SHIFT, cmp, false),
            LinkOutcome::Failed
        );
    }
}
