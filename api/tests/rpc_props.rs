//! Property tests of the RPC framing: every request and reply round-trips, no byte
//! string makes a parser panic, and every byte string that is not exactly an encoded
//! request is refused with a status a worker can answer.

use dmkv_api::rpc::{RPC_MAX_DATA, Reply, Request, RpcStatus, parse_reply, parse_request};
use proptest::prelude::*;
use proptest::test_runner::{Config, RngSeed};

fn config() -> Config {
    Config {
        cases: 512,
        rng_seed: RngSeed::Fixed(0x5707_2019),
        failure_persistence: None,
        ..Config::default()
    }
}

/// An owned request (the parsed form borrows its data).
#[derive(Debug, Clone)]
enum Owned {
    Ping,
    Read(u32, u64, u32),
    Write(u32, u64, Vec<u8>),
    Cas(u32, u64, u64, u64),
    Faa(u32, u64, u64),
}

impl Owned {
    fn view(&self) -> Request<'_> {
        match self {
            Owned::Ping => Request::Ping,
            Owned::Read(rkey, va, len) => Request::Read {
                rkey: *rkey,
                va: *va,
                len: *len,
            },
            Owned::Write(rkey, va, data) => Request::Write {
                rkey: *rkey,
                va: *va,
                data,
            },
            Owned::Cas(rkey, va, compare, swap) => Request::CompareSwap {
                rkey: *rkey,
                va: *va,
                compare: *compare,
                swap: *swap,
            },
            Owned::Faa(rkey, va, add) => Request::FetchAdd {
                rkey: *rkey,
                va: *va,
                add: *add,
            },
        }
    }
}

fn request() -> impl Strategy<Value = Owned> {
    prop_oneof![
        Just(Owned::Ping),
        (any::<u32>(), any::<u64>(), 1u32..=RPC_MAX_DATA as u32)
            .prop_map(|(k, va, len)| Owned::Read(k, va, len)),
        (
            any::<u32>(),
            any::<u64>(),
            proptest::collection::vec(any::<u8>(), 1..=RPC_MAX_DATA)
        )
            .prop_map(|(k, va, d)| Owned::Write(k, va, d)),
        (any::<u32>(), any::<u64>(), any::<u64>(), any::<u64>())
            .prop_map(|(k, va, c, s)| Owned::Cas(k, va, c, s)),
        (any::<u32>(), any::<u64>(), any::<u64>()).prop_map(|(k, va, a)| Owned::Faa(k, va, a)),
    ]
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn requests_round_trip(r in request(), id in any::<u64>()) {
        let bytes = r.view().encode(id);
        prop_assert_eq!(bytes.len(), r.view().encoded_len());
        prop_assert_eq!(parse_request(&bytes), Ok((id, r.view())));
    }

    #[test]
    fn any_bytes_parse_or_are_refused_without_panic(
        bytes in proptest::collection::vec(any::<u8>(), 0..64),
    ) {
        match parse_request(&bytes) {
            Ok((id, r)) => {
                // Whatever parses is exactly an encoding.
                prop_assert_eq!(r.encode(id), bytes.clone());
            }
            Err(e) => {
                let reply = Reply::refusal(&bytes, &e);
                prop_assert_ne!(reply.status, RpcStatus::Ok);
                prop_assert!(reply.body.is_empty());
            }
        }
        let _ = parse_reply(&bytes);
    }

    #[test]
    fn a_damaged_request_is_refused_or_still_an_exact_encoding(
        r in request(),
        id in any::<u64>(),
        cut in any::<prop::sample::Index>(),
        flip in any::<prop::sample::Index>(),
        xor in 1u8..,
        extra in proptest::collection::vec(any::<u8>(), 0..4),
    ) {
        let good = r.view().encode(id);
        // Truncated anywhere: refused.
        let short = &good[..cut.index(good.len())];
        prop_assert!(parse_request(short).is_err());
        // Bytes appended: refused.
        if !extra.is_empty() {
            let mut long = good.clone();
            long.extend_from_slice(&extra);
            prop_assert!(parse_request(&long).is_err());
        }
        // One byte changed: refused, or parsed into a request that encodes to it.
        let mut bent = good.clone();
        let at = flip.index(bent.len());
        bent[at] ^= xor;
        match parse_request(&bent) {
            Ok((id2, r2)) => prop_assert_eq!(r2.encode(id2), bent.clone()),
            Err(e) => prop_assert_ne!(Reply::refusal(&bent, &e).status, RpcStatus::Ok),
        }
    }

    #[test]
    fn replies_round_trip(
        id in any::<u64>(),
        code in 0u8..=9,
        body in proptest::collection::vec(any::<u8>(), 0..64),
    ) {
        let status = RpcStatus::from_code(code).expect("a defined status");
        prop_assert_eq!(status.code(), code);
        let r = Reply { id, status, body: &body };
        let encoded = r.encode();
        prop_assert_eq!(parse_reply(&encoded), Ok(r));
    }
}
