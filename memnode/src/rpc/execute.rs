//! Executing one RPC: a request message in, a reply message out, no I/O.
//!
//! The memory is the node's memory as the requesting queue pair sees it: a
//! [`verbs::mem::ScopedMemory`] over the queue pair's access scope when it holds
//! grants, the whole registered memory when it was created with the admin token. Every
//! access therefore passes exactly the checks a one-sided verb on that queue pair
//! passes (key, bounds, rights, expiry, alignment), and a refused access touches
//! nothing. A message that does not parse is answered with an error reply and touches
//! nothing either.

use std::sync::atomic::AtomicBool;

use dmkv_api::rpc::{self, Reply, Request, RpcStatus};
use verbs::mem::RemoteMemory;

use super::race::{self, Stop};

/// How a request ended, for the counters.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// Executed.
    Done,
    /// Did not parse.
    Malformed,
    /// Its memory access was refused.
    Refused,
    /// The crash hook stopped the worker in the middle of the request: no reply.
    Crashed,
}

/// Executes the request in `message` against `memory` and returns the reply message.
pub fn serve(message: &[u8], memory: &dyn RemoteMemory) -> (Vec<u8>, Outcome) {
    serve_hooked(message, memory, &AtomicBool::new(false))
}

/// [`serve`], with the crash hook of index operations: when `crash` is set, the
/// first index write that changes a slot clears it and stops right after that
/// change, and the reply is empty ([`Outcome::Crashed`]).
pub fn serve_hooked(
    message: &[u8],
    memory: &dyn RemoteMemory,
    crash: &AtomicBool,
) -> (Vec<u8>, Outcome) {
    let (id, request) = match rpc::parse_request(message) {
        Ok(parsed) => parsed,
        Err(e) => return (Reply::refusal(message, &e).encode(), Outcome::Malformed),
    };
    let result = match request {
        Request::Ping => Ok(Vec::new()),
        Request::Read { rkey, va, len } => {
            let mut buf = vec![0u8; len as usize];
            memory.read(rkey, va, &mut buf).map(|()| buf)
        }
        Request::Write { rkey, va, data } => memory.write(rkey, va, data).map(|()| Vec::new()),
        Request::CompareSwap {
            rkey,
            va,
            compare,
            swap,
        } => memory
            .compare_swap(rkey, va, compare, swap)
            .map(|old| old.to_be_bytes().to_vec()),
        Request::FetchAdd { rkey, va, add } => memory
            .fetch_add(rkey, va, add)
            .map(|old| old.to_be_bytes().to_vec()),
        Request::Race(r) => match race::execute(&r, memory, crash) {
            Ok(outcome) => Ok(outcome.encode()),
            Err(Stop::Access(e)) => Err(e),
            Err(Stop::Crashed) => return (Vec::new(), Outcome::Crashed),
        },
        Request::CloverWalk(w) => super::clover::walk(&w, memory).map(|o| o.encode()),
        Request::CloverLink(l) => match super::clover_link::link(&l, memory, crash) {
            Ok(outcome) => Ok(outcome.encode()),
            Err(Stop::Access(e)) => Err(e),
            Err(Stop::Crashed) => return (Vec::new(), Outcome::Crashed),
        },
        Request::CloverCreate(c) => match super::clover_create::create(&c, memory, crash) {
            Ok(outcome) => Ok(outcome.encode()),
            Err(Stop::Access(e)) => Err(e),
            Err(Stop::Crashed) => return (Vec::new(), Outcome::Crashed),
        },
        Request::InPlaceRead(r) => super::inplace::read(&r, memory).map(|o| o.encode()),
        Request::InPlaceWrite(w) => match super::inplace::write(&w, memory, crash) {
            Ok(outcome) => Ok(outcome.encode()),
            Err(Stop::Access(e)) => Err(e),
            Err(Stop::Crashed) => return (Vec::new(), Outcome::Crashed),
        },
    };
    match result {
        Ok(body) => (Reply::ok(id, &body).encode(), Outcome::Done),
        Err(e) => (
            Reply::error(id, RpcStatus::of_access(&e)).encode(),
            Outcome::Refused,
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use dmkv_api::rpc::parse_reply;
    use proptest::prelude::*;
    use proptest::test_runner::{Config, RngSeed};
    use verbs::mem::{AccessFlags, MemoryTable, Region};

    const BASE: u64 = 0x1000_0000;
    const LEN: usize = 4096;

    fn memory() -> (MemoryTable, u32) {
        let table = MemoryTable::new();
        let region = Region::anonymous(LEN).expect("region");
        let info = table
            .register(std::sync::Arc::new(region), BASE, AccessFlags::ALL)
            .expect("register");
        (table, info.rkey)
    }

    fn snapshot(table: &MemoryTable, rkey: u32) -> Vec<u8> {
        let mut all = vec![0u8; LEN];
        table.read(rkey, BASE, &mut all).expect("read");
        all
    }

    #[test]
    fn every_operation_runs_against_memory() {
        let (mem, rkey) = memory();
        let w = Request::Write {
            rkey,
            va: BASE + 64,
            data: b"hello",
        };
        let (reply, outcome) = serve(&w.encode(1), &mem);
        assert_eq!(outcome, Outcome::Done);
        assert_eq!(parse_reply(&reply).unwrap(), Reply::ok(1, &[]));
        let r = Request::Read {
            rkey,
            va: BASE + 64,
            len: 5,
        };
        let (reply, _) = serve(&r.encode(2), &mem);
        assert_eq!(parse_reply(&reply).unwrap().body, b"hello");
        let cas = Request::CompareSwap {
            rkey,
            va: BASE + 128,
            compare: 0,
            swap: 9,
        };
        let (reply, _) = serve(&cas.encode(3), &mem);
        assert_eq!(parse_reply(&reply).unwrap().word(), Some(0));
        let (reply, _) = serve(&cas.encode(4), &mem);
        assert_eq!(parse_reply(&reply).unwrap().word(), Some(9), "failed CAS");
        let faa = Request::FetchAdd {
            rkey,
            va: BASE + 128,
            add: 1,
        };
        let (reply, _) = serve(&faa.encode(5), &mem);
        assert_eq!(parse_reply(&reply).unwrap().word(), Some(9));
        assert_eq!(
            parse_reply(&serve(&faa.encode(6), &mem).0).unwrap().word(),
            Some(10)
        );
    }

    #[test]
    fn refused_accesses_say_why_and_touch_nothing() {
        let (mem, rkey) = memory();
        let before = snapshot(&mem, rkey);
        let cases = [
            (
                Request::Write {
                    rkey: rkey ^ 1,
                    va: BASE,
                    data: b"x",
                },
                RpcStatus::UnknownKey,
            ),
            (
                Request::Write {
                    rkey,
                    va: BASE + LEN as u64 - 2,
                    data: b"xyz",
                },
                RpcStatus::OutOfBounds,
            ),
            (
                Request::CompareSwap {
                    rkey,
                    va: BASE + 3,
                    compare: 0,
                    swap: 1,
                },
                RpcStatus::Misaligned,
            ),
        ];
        for (i, (req, status)) in cases.iter().enumerate() {
            let (reply, outcome) = serve(&req.encode(i as u64), &mem);
            assert_eq!(outcome, Outcome::Refused);
            let reply = parse_reply(&reply).unwrap();
            assert_eq!((reply.id, reply.status), (i as u64, *status));
        }
        assert_eq!(snapshot(&mem, rkey), before);
    }

    proptest! {
        #![proptest_config(Config {
            cases: 512,
            rng_seed: RngSeed::Fixed(0x5707),
            failure_persistence: None,
            ..Config::default()
        })]

        /// A message that is not a request gets an error reply and leaves memory as it
        /// was, whatever its bytes (here: random bytes, and a valid WRITE damaged by
        /// truncation or one changed header byte).
        #[test]
        fn malformed_requests_get_an_error_and_never_change_memory(
            noise in proptest::collection::vec(any::<u8>(), 0..96),
            cut in 0usize..28,
            at in 0usize..12,
            xor in 1u8..,
        ) {
            let (mem, rkey) = memory();
            let before = snapshot(&mem, rkey);
            let write = Request::Write { rkey, va: BASE, data: &[0xAB; 12] }.encode(7);
            let mut bent = write.clone();
            bent[at] ^= xor;
            for message in [&noise[..], &write[..cut], &bent[..]] {
                let (reply, outcome) = serve(message, &mem);
                let reply = parse_reply(&reply).expect("a reply parses");
                if outcome == Outcome::Malformed {
                    prop_assert_ne!(reply.status, RpcStatus::Ok);
                    prop_assert_eq!(snapshot(&mem, rkey), before.clone());
                }
            }
        }
    }
}
