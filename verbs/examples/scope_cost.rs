//! What an access scope costs a responder per request: 64-byte READs handled (parsed,
//! ICRC-checked, executed, answered) by a responder without a scope, with a scope of one
//! window, and with a scope of 1024 windows (a table with that many leases on the node),
//! in interleaved rounds; prints the median nanoseconds per request of each. The clock is
//! read once per 32 requests, as the memory node's receive loop does per batch.
//!
//! `cargo run --release -p verbs --example scope_cost [REQUESTS_PER_ROUND] [ROUNDS]`

use std::net::{Ipv4Addr, SocketAddrV4};
use std::sync::Arc;
use std::time::{Duration, Instant};

use verbs::mem::{AccessFlags, AccessScope, MemoryTable, MemoryWindow, Region, ScopeViolations};
use verbs::rc::{MAX_PACKET, RcConfig, Responder};
use verbs::wire::{BthRepr, IcrcPath, Opcode, PacketRepr, RethRepr};

const BASE_VA: u64 = 0x7f00_0000_0000;
const REGION: u64 = 16 << 20;
const SCOPE_RKEY: u32 = 0x5c0b_e000;

fn path() -> IcrcPath {
    let client = SocketAddrV4::new(Ipv4Addr::new(10, 0, 0, 1), 49152);
    let node = SocketAddrV4::new(Ipv4Addr::new(10, 0, 0, 2), 4791);
    IcrcPath::new(client, node)
}

/// READ requests at PSNs `0..n`, 64 bytes each, spread over the region.
fn requests(n: u32, rkey: u32) -> Vec<Vec<u8>> {
    (0..n)
        .map(|psn| {
            let mut repr = PacketRepr::new(BthRepr::new(Opcode::ReadRequest, 2, psn, true));
            repr.reth = Some(RethRepr {
                va: BASE_VA + (u64::from(psn) * 4160) % (REGION - 64),
                rkey,
                dma_len: 64,
            });
            let mut buf = vec![0u8; repr.buffer_len()];
            match repr.emit(&mut buf, &path()) {
                Ok(_) => buf,
                Err(e) => panic!("cannot emit a request: {e}"),
            }
        })
        .collect()
}

/// Nanoseconds per request for `packets` through a fresh responder with `scope`.
fn run(table: &MemoryTable, packets: &[Vec<u8>], scope: Option<Arc<AccessScope>>) -> f64 {
    let mut resp = Responder::new(RcConfig::default(), 2, 1, 0, path());
    resp.set_scope(scope);
    let mut out = vec![0u8; MAX_PACKET];
    let started = Instant::now();
    for (i, p) in packets.iter().enumerate() {
        // As the memory node's receive loop does: one clock read per batch of 32.
        if i % 32 == 0 {
            resp.set_now(Some(Instant::now()));
        }
        if resp.handle_datagram(p, table).is_err() {
            panic!("a request was dropped");
        }
        while resp.poll_transmit(&mut out).is_some() {}
    }
    let elapsed = started.elapsed();
    assert_eq!(
        resp.stats().naks_access,
        0,
        "every READ is inside the scope"
    );
    elapsed.as_nanos() as f64 / packets.len() as f64
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn main() {
    let mut args = std::env::args().skip(1);
    let n: u32 = args.next().and_then(|a| a.parse().ok()).unwrap_or(200_000);
    let rounds: usize = args.next().and_then(|a| a.parse().ok()).unwrap_or(9);
    let table = MemoryTable::new();
    let region = match Region::anonymous(REGION as usize) {
        Ok(r) => Arc::new(r),
        Err(e) => panic!("cannot allocate the region: {e}"),
    };
    let info = match table.register(region, BASE_VA, AccessFlags::ALL) {
        Ok(i) => i,
        Err(e) => panic!("cannot register the region: {e}"),
    };
    let violations = Arc::new(ScopeViolations::default());
    let expires = if std::env::var_os("NO_EXPIRY").is_some() {
        None
    } else {
        Some(Instant::now() + Duration::from_secs(3600))
    };
    let whole = vec![MemoryWindow {
        start: BASE_VA,
        end: BASE_VA + REGION,
        rights: AccessFlags::ALL,
        expires,
    }];
    // 1024 adjacent windows covering the region, as many leases would.
    let step = REGION / 1024;
    let many: Vec<MemoryWindow> = (0..1024)
        .map(|i| MemoryWindow {
            start: BASE_VA + i * step,
            end: BASE_VA + (i + 1) * step,
            rights: AccessFlags::ALL,
            expires,
        })
        .collect();
    let one = Arc::new(AccessScope::new(
        SCOPE_RKEY,
        info.rkey,
        whole,
        violations.clone(),
    ));
    let thousand = Arc::new(AccessScope::new(SCOPE_RKEY, info.rkey, many, violations));
    let plain = requests(n, info.rkey);
    let scoped = requests(n, SCOPE_RKEY);
    let (mut none, mut w1, mut w1024) = (Vec::new(), Vec::new(), Vec::new());
    for _ in 0..rounds {
        none.push(run(&table, &plain, None));
        w1.push(run(&table, &scoped, Some(one.clone())));
        w1024.push(run(&table, &scoped, Some(thousand.clone())));
    }
    let base = median(none);
    println!("requests per round: {n}, rounds: {rounds}");
    println!("| responder | ns per 64-byte READ (median) | vs no scope |");
    println!("|---|---:|---:|");
    println!("| no scope | {base:.1} | — |");
    for (name, v) in [("scope, 1 window", w1), ("scope, 1024 windows", w1024)] {
        let m = median(v);
        println!("| {name} | {m:.1} | {:+.1} % |", (m / base - 1.0) * 100.0);
    }
}
