//! Property tests of the write-based RPC request ring: whatever prefix of a WRITE has
//! landed, and whatever late duplicate of an earlier lap lands in a slot, the reader
//! takes every request exactly once, in order, with the bytes that were written.

use dmkv_api::rpc::{RPC_HEADER_LEN, RPC_VERSION};
use dmkv_api::rpc_ring::{
    RING_REQUEST_OFFSET, RPC_RING_SLOT_BYTES, RingCursor, SlotState, encode_slot, slot_index,
};
use proptest::prelude::*;
use proptest::test_runner::{Config, RngSeed};

fn config() -> Config {
    Config {
        cases: 256,
        rng_seed: RngSeed::Fixed(0x5707_2019),
        failure_persistence: None,
        ..Config::default()
    }
}

/// One request's life: its body, the cut points its WRITE lands in, and how many
/// bytes of the previous lap's image in its slot land again (late) before it.
#[derive(Debug, Clone)]
struct Step {
    body: Vec<u8>,
    cuts: Vec<usize>,
    duplicate_bytes: Option<usize>,
}

fn step() -> impl Strategy<Value = Step> {
    (
        proptest::collection::vec(any::<u8>(), RPC_HEADER_LEN..200),
        proptest::collection::vec(0usize..10_000, 0..4),
        proptest::option::of(0usize..10_000),
    )
        .prop_map(|(mut body, cuts, duplicate_bytes)| {
            body[0] = RPC_VERSION;
            Step {
                body,
                cuts,
                duplicate_bytes,
            }
        })
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn every_request_is_taken_once_in_order(
        slots in 1u32..5,
        steps in proptest::collection::vec(step(), 1..24),
    ) {
        let mut ring = vec![vec![0u8; RPC_RING_SLOT_BYTES]; slots as usize];
        let mut last_image: Vec<Option<Vec<u8>>> = vec![None; slots as usize];
        let mut cursor = RingCursor::new(slots).unwrap();
        for (i, step) in steps.iter().enumerate() {
            let seq = i as u64 + 1;
            let idx = slot_index(seq, slots).unwrap() as usize;
            prop_assert_eq!(idx as u32, cursor.next_slot());
            if let (Some(n), Some(old)) = (step.duplicate_bytes, &last_image[idx]) {
                let n = n % (old.len() + 1);
                ring[idx][..n].copy_from_slice(&old[..n]);
                prop_assert_eq!(cursor.inspect(&ring[idx]), SlotState::Pending);
            }
            let mut image = Vec::new();
            encode_slot(seq, &step.body, &mut image).unwrap();
            let mut cuts: Vec<usize> = step.cuts.iter().map(|c| c % image.len()).collect();
            cuts.sort_unstable();
            for cut in cuts {
                ring[idx][..cut].copy_from_slice(&image[..cut]);
                prop_assert_eq!(cursor.inspect(&ring[idx]), SlotState::Pending);
            }
            ring[idx][..image.len()].copy_from_slice(&image);
            let state = cursor.inspect(&ring[idx]);
            prop_assert_eq!(state, SlotState::Ready { len: step.body.len() });
            prop_assert_eq!(
                &ring[idx][RING_REQUEST_OFFSET..RING_REQUEST_OFFSET + step.body.len()],
                &step.body[..]
            );
            cursor.clear(&mut ring[idx], step.body.len());
            // The same WRITE landing again right away is not the next request.
            ring[idx][..image.len()].copy_from_slice(&image);
            prop_assert_eq!(cursor.inspect(&ring[idx]), SlotState::Pending);
            last_image[idx] = Some(image);
        }
        prop_assert_eq!(cursor.next_seq(), steps.len() as u64 + 1);
    }
}
