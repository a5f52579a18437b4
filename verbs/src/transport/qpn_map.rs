//! A map keyed by queue pair number, hashed with one multiplication.
//!
//! Every received datagram is routed to its queue pair by the 24-bit destination QPN in
//! its BTH. The standard library's SipHash costs tens of nanoseconds per lookup, and
//! buys resistance to hash flooding that QPNs — chosen by the side that does the
//! lookups, never by the peer — do not need.

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};

/// Hashes a queue pair number by multiplying it with a 64-bit odd constant (Fibonacci
/// hashing): consecutive and random QPNs alike spread over every bit of the hash.
#[derive(Debug, Default, Clone, Copy)]
pub struct QpnHasher(u64);

impl Hasher for QpnHasher {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        for b in bytes {
            self.0 = (self.0.rotate_left(8) ^ u64::from(*b)).wrapping_mul(0x9E37_79B9_7F4A_7C15);
        }
    }

    fn write_u32(&mut self, qpn: u32) {
        self.0 = (self.0 ^ u64::from(qpn)).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    }
}

/// A hash map from queue pair number to `V`, using [`QpnHasher`].
pub type QpnMap<V> = HashMap<u32, V, BuildHasherDefault<QpnHasher>>;

#[cfg(test)]
mod tests {
    use super::*;
    use std::hash::BuildHasher;

    #[test]
    fn holds_many_queue_pairs() {
        let mut m: QpnMap<u32> = QpnMap::default();
        for q in (1..5000u32).map(|i| i.wrapping_mul(2_654_435_761) & 0x00FF_FFFF) {
            m.insert(q, q ^ 7);
        }
        for q in (1..5000u32).map(|i| i.wrapping_mul(2_654_435_761) & 0x00FF_FFFF) {
            assert_eq!(m.get(&q), Some(&(q ^ 7)));
        }
        assert_eq!(m.get(&0), None);
    }

    #[test]
    fn consecutive_qpns_differ_in_the_top_bits() {
        // hashbrown takes its 7-bit tag from the top of the hash and the bucket from
        // the bottom: both must change between neighbouring QPNs.
        let b = BuildHasherDefault::<QpnHasher>::default();
        let h: Vec<u64> = (0x100..0x140u32).map(|q| b.hash_one(q)).collect();
        let tags: std::collections::HashSet<u64> = h.iter().map(|x| x >> 57).collect();
        let buckets: std::collections::HashSet<u64> = h.iter().map(|x| x & 0x3F).collect();
        assert!(tags.len() > 16, "{tags:?}");
        assert!(buckets.len() > 16, "{buckets:?}");
    }
}
