//! The N:M key-based shuffle: every item goes to the consumer its key hashes to, so all
//! items of one key reach one consumer, in their producer's order. The key is the
//! item's first 8 bytes (little-endian); the switch learns it with a READ of those
//! bytes before it decides. Producers are served round robin; a producer whose next
//! item's consumer is full waits (its later items may not overtake it), while the
//! other producers go on.

use super::policy::{Assignment, FlowPolicy, FlowView, next_waiting};

/// The key-shuffle policy.
#[derive(Debug, Clone, Default)]
pub struct KeyShuffle {
    producer_cursor: usize,
}

/// The consumer of `key` among `consumers` (a fixed 64-bit mix, then modulo).
pub fn consumer_of(key: u64, consumers: usize) -> usize {
    let mut x = key ^ 0x9E37_79B9_7F4A_7C15;
    x = (x ^ (x >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    x ^= x >> 31;
    (x % consumers.max(1) as u64) as usize
}

impl FlowPolicy for KeyShuffle {
    fn next(&mut self, view: FlowView<'_>) -> Option<Assignment> {
        let m = view.room.len();
        // Producers whose next item's key is known and whose consumer has room.
        let ready: Vec<u64> = view
            .waiting
            .iter()
            .enumerate()
            .map(|(p, &w)| {
                let key = view.next_keys.get(p).copied().flatten();
                let fits =
                    key.is_some_and(|k| view.room.get(consumer_of(k, m)).is_some_and(|&r| r > 0));
                if w > 0 && fits { 1 } else { 0 }
            })
            .collect();
        let producer = next_waiting(&ready, &mut self.producer_cursor)?;
        let key = view.next_keys.get(producer).copied().flatten()?;
        Some(Assignment {
            producer,
            consumers: vec![consumer_of(key, m)],
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_key_always_goes_to_the_same_consumer_and_waits_for_its_room() {
        let mut p = KeyShuffle::default();
        let c = consumer_of(42, 3);
        assert!(c < 3);
        let mut room = [1, 1, 1];
        let a = p
            .next(FlowView {
                waiting: &[1],
                room: &room,
                next_keys: &[Some(42)],
            })
            .expect("an assignment");
        assert_eq!(a.consumers, vec![c]);
        room[c] = 0;
        assert_eq!(
            p.next(FlowView {
                waiting: &[1],
                room: &room,
                next_keys: &[Some(42)],
            }),
            None,
            "the key's consumer is full"
        );
        assert_eq!(
            p.next(FlowView {
                waiting: &[1],
                room: &[1, 1, 1],
                next_keys: &[None],
            }),
            None,
            "the key is not known yet"
        );
    }

    #[test]
    fn keys_spread_over_consumers() {
        let mut seen = [0u32; 4];
        for k in 0..400u64 {
            seen[consumer_of(k, 4)] += 1;
        }
        assert!(seen.iter().all(|&n| n > 60), "{seen:?}");
    }
}
