//! The payload of an in-place table's tuple, as clients (`kvstore::inplace::table`)
//! and the memory node's in-place writes ([`crate::rpc_inplace`]) both read and
//! write it:
//!
//! ```text
//! state u8 (0 empty, 1 live, 2 deleted) | 0 u8 | key length u16 | value length u32 |
//! key (KEY_CAP bytes) | value (value capacity bytes)
//! ```
//!
//! Little-endian lengths. Where the payload lies in the tuple (and where its latch
//! is) is the latch scheme's business; this is only the payload's content.

/// Longest key an in-place table stores.
pub const KEY_CAP: usize = 64;
/// Bytes before the key: state, 0, key length, value length.
pub const TUPLE_HEADER: usize = 8;
/// State byte of a tuple that never held a key.
pub const EMPTY: u8 = 0;
/// State byte of a tuple holding a live key.
pub const LIVE: u8 = 1;
/// State byte of a tuple holding a deleted key (a tombstone the key can revive).
pub const DELETED: u8 = 2;

/// What a payload holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TupleView<'a> {
    /// Never written.
    Empty,
    /// A live key and its value.
    Live(&'a [u8], &'a [u8]),
    /// A deleted key.
    Dead(&'a [u8]),
}

/// Why a payload does not parse.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("in-place tuple with impossible lengths or state")]
pub struct BadTuple;

/// The value capacity of `payload`-byte payloads (0 if they cannot hold a key).
pub fn value_cap(payload: usize) -> usize {
    payload.saturating_sub(TUPLE_HEADER + KEY_CAP)
}

/// Parse payload `p`, whose values hold at most `value_cap` bytes.
pub fn view(p: &[u8], value_cap: usize) -> Result<TupleView<'_>, BadTuple> {
    let state = p.first().copied().unwrap_or(EMPTY);
    if state == EMPTY {
        return Ok(TupleView::Empty);
    }
    let klen = u16::from_le_bytes([
        p.get(2).copied().unwrap_or(0),
        p.get(3).copied().unwrap_or(0),
    ]) as usize;
    let vlen = u32::from_le_bytes(
        p.get(4..8)
            .and_then(|b| <[u8; 4]>::try_from(b).ok())
            .unwrap_or([0; 4]),
    ) as usize;
    if klen == 0 || klen > KEY_CAP || vlen > value_cap {
        return Err(BadTuple);
    }
    let key = p.get(TUPLE_HEADER..TUPLE_HEADER + klen).ok_or(BadTuple)?;
    let at = TUPLE_HEADER + KEY_CAP;
    match state {
        LIVE => Ok(TupleView::Live(key, p.get(at..at + vlen).ok_or(BadTuple)?)),
        DELETED => Ok(TupleView::Dead(key)),
        _ => Err(BadTuple),
    }
}

/// The `payload`-byte payload holding `key` live with `value`, or deleted (`None`).
/// `None` when the key is empty or too long, or the value does not fit.
pub fn encode(payload: usize, key: &[u8], value: Option<&[u8]>) -> Option<Vec<u8>> {
    let v = value.unwrap_or_default();
    if key.is_empty() || key.len() > KEY_CAP || v.len() > value_cap(payload) {
        return None;
    }
    let mut p = vec![0u8; payload];
    p[0] = if value.is_some() { LIVE } else { DELETED };
    p[2..4].copy_from_slice(&(key.len() as u16).to_le_bytes());
    p[4..8].copy_from_slice(&(v.len() as u32).to_le_bytes());
    p[TUPLE_HEADER..TUPLE_HEADER + key.len()].copy_from_slice(key);
    p[TUPLE_HEADER + KEY_CAP..TUPLE_HEADER + KEY_CAP + v.len()].copy_from_slice(v);
    Some(p)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use proptest::test_runner::{Config, RngSeed};

    #[test]
    fn encodes_and_views() {
        let p = encode(100, b"k", Some(b"val")).expect("fits");
        assert_eq!(view(&p, value_cap(100)), Ok(TupleView::Live(b"k", b"val")));
        let d = encode(100, b"k", None).expect("fits");
        assert_eq!(view(&d, value_cap(100)), Ok(TupleView::Dead(b"k")));
        assert_eq!(view(&[0u8; 100], 28), Ok(TupleView::Empty));
        assert_eq!(encode(100, b"k", Some(&[1; 29])), None);
        assert_eq!(encode(100, b"", Some(b"v")), None);
        assert_eq!(encode(100, &[1; 65], Some(b"v")), None);
    }

    proptest! {
        #![proptest_config(Config {
            cases: 256,
            rng_seed: RngSeed::Fixed(0x1b1a),
            failure_persistence: None,
            ..Config::default()
        })]

        /// Any bytes view without panicking, and what views as a key views again
        /// the same after encoding it.
        #[test]
        fn any_payload_views_or_is_refused(p in proptest::collection::vec(any::<u8>(), 0..160)) {
            let cap = value_cap(p.len());
            if let Ok(TupleView::Live(k, v)) = view(&p, cap) {
                let again = encode(p.len(), k, Some(v)).expect("fits");
                prop_assert_eq!(view(&again, cap), Ok(TupleView::Live(k, v)));
            }
        }
    }
}
