//! The real ConnectX-5 RoCEv2 trace shared by the wire-format tests.
#![allow(dead_code)]

/// Path of the trace, kept in the repository with its provenance and licence
/// (`tests/data/roce-traces/README.md`).
pub const TRACE: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/tests/data/roce-traces/connectx5-clover-2clients.pcap"
);

/// Number of frames in the trace.
pub const FRAMES: usize = 85;

/// The trace's Ethernet frames, in capture order.
pub fn frames() -> Vec<Vec<u8>> {
    let records = verbs::wire::pcap::read_file(TRACE)
        .unwrap_or_else(|e| panic!("cannot read the ConnectX-5 trace {TRACE}: {e}"));
    records.into_iter().map(|r| r.data).collect()
}

/// A small deterministic generator (SplitMix64) for seeded sampling.
pub struct SplitMix(pub u64);

impl SplitMix {
    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// A value in `0..n` (`n > 0`).
    pub fn below(&mut self, n: usize) -> usize {
        (self.next_u64() % n as u64) as usize
    }
}
