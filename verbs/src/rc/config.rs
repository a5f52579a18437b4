//! Configuration of a reliable connection.

use std::time::Duration;

/// Path MTU: the largest RoCE payload per packet (256, 512, 1024, 2048 or 4096 bytes).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Pmtu(u32);

impl Pmtu {
    /// The default, 1024 bytes (the Ethernet-friendly RoCE MTU).
    pub const DEFAULT: Pmtu = Pmtu(1024);

    /// A PMTU; only the five IBTA values are accepted.
    pub fn new(bytes: u32) -> Result<Pmtu, String> {
        match bytes {
            256 | 512 | 1024 | 2048 | 4096 => Ok(Pmtu(bytes)),
            other => Err(format!(
                "invalid path MTU {other}: use 256, 512, 1024, 2048 or 4096"
            )),
        }
    }

    /// Bytes per packet.
    pub fn bytes(self) -> u32 {
        self.0
    }

    /// Packets needed for a message of `len` bytes (a zero-length message still takes one).
    pub fn packets(self, len: u64) -> u32 {
        if len == 0 {
            1
        } else {
            len.div_ceil(self.0 as u64).min(u32::MAX as u64) as u32
        }
    }
}

impl Default for Pmtu {
    fn default() -> Self {
        Pmtu::DEFAULT
    }
}

impl std::str::FromStr for Pmtu {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let n: u32 = s
            .trim()
            .parse()
            .map_err(|_| format!("invalid path MTU {s:?}: expected a number"))?;
        Pmtu::new(n)
    }
}

/// Settings of a reliable-connection queue pair.
#[derive(Debug, Clone)]
pub struct RcConfig {
    /// Path MTU.
    pub pmtu: Pmtu,
    /// Time without progress after which unacknowledged packets are retransmitted.
    ///
    /// The default, 10 ms, is far above a loopback round trip (~10–100 µs) but below
    /// what a descheduled thread on a busy 2-core machine can take; shorter values turn
    /// scheduling hiccups into spurious go-back-N retransmissions. Hardware RC uses
    /// 4.096 µs × 2^timeout, commonly tens of milliseconds.
    pub retransmit_timeout: Duration,
    /// Retransmissions without progress before the queue pair goes to the error state.
    /// Consecutive timeouts back off exponentially: the n-th waits
    /// `retransmit_timeout × 2^min(n, 6)`.
    pub max_retries: u32,
    /// Work requests that may be outstanding (posted, not completed) at once: the send queue depth.
    pub max_outstanding: usize,
    /// Atomic results a responder remembers for answering retransmitted atomics.
    pub atomic_ring: usize,
    /// RNR retry count (IBA's 3-bit `rnr_retry`): how many times a requester sends a
    /// SEND again after RNR NAKs for it before completing it with
    /// [`crate::wr::CompletionError::RnrRetryExceeded`]. 7 means "retry forever", as
    /// in IBA; larger values count as 7.
    pub rnr_retry: u8,
    /// The RNR timer code (IBA's 5-bit `min_rnr_timer`, see [`rnr_delay`]) a responder
    /// puts in its RNR NAKs: how long the requester waits before trying again.
    pub min_rnr_timer: u8,
}

/// RNR retry count meaning "retry forever".
pub const RNR_RETRY_FOREVER: u8 = 7;

/// The delay an RNR NAK timer code asks for, by the IBA's encoding of the AETH timer
/// field: code 0 is 655.36 ms, codes 1–31 run from 0.01 ms to 491.52 ms. Codes are
/// masked to 5 bits.
pub fn rnr_delay(code: u8) -> Duration {
    const TENS_OF_MICROS: [u32; 32] = [
        65_536, 1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64, 96, 128, 192, 256, 384, 512, 768, 1_024,
        1_536, 2_048, 3_072, 4_096, 6_144, 8_192, 12_288, 16_384, 24_576, 32_768, 49_152,
    ];
    // Entries are in units of 10 µs.
    let units = TENS_OF_MICROS[usize::from(code & 0x1F)];
    Duration::from_micros(u64::from(units) * 10)
}

impl RcConfig {
    /// The longest a requester keeps sending copies of a packet that makes no
    /// progress before the queue pair goes to the error state: the sum of the
    /// backed-off timeouts, `retransmit_timeout × Σ 2^min(n, 6)` for `n` = 0 …
    /// `max_retries` (about 1.9 s with the defaults). After it no copy of a verb
    /// posted on the queue pair is sent again; a copy already on its way can still
    /// arrive within the network's packet lifetime.
    pub fn retransmission_window(&self) -> Duration {
        (0..=self.max_retries).fold(Duration::ZERO, |total, n| {
            total.saturating_add(self.retransmit_timeout.saturating_mul(1u32 << n.min(6)))
        })
    }
}

impl Default for RcConfig {
    fn default() -> Self {
        RcConfig {
            pmtu: Pmtu::DEFAULT,
            retransmit_timeout: Duration::from_millis(10),
            max_retries: 7,
            max_outstanding: 256,
            atomic_ring: 256,
            rnr_retry: RNR_RETRY_FOREVER,
            // 0.64 ms: long enough for a receiver's owner to post buffers again,
            // short against the retransmission timeout.
            min_rnr_timer: 12,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_retransmission_window_adds_the_backed_off_timeouts() {
        let c = RcConfig::default();
        // 10 ms × (1 + 2 + 4 + 8 + 16 + 32 + 64 + 64).
        assert_eq!(c.retransmission_window(), Duration::from_millis(1910));
        let quick = RcConfig {
            retransmit_timeout: Duration::from_millis(1),
            max_retries: 2,
            ..RcConfig::default()
        };
        assert_eq!(quick.retransmission_window(), Duration::from_millis(7));
    }

    #[test]
    fn rnr_timer_codes_follow_the_iba_encoding() {
        assert_eq!(rnr_delay(0), Duration::from_micros(655_360));
        assert_eq!(rnr_delay(1), Duration::from_micros(10));
        assert_eq!(rnr_delay(5), Duration::from_micros(60));
        assert_eq!(rnr_delay(12), Duration::from_micros(640));
        assert_eq!(rnr_delay(14), Duration::from_micros(1_280));
        assert_eq!(rnr_delay(31), Duration::from_micros(491_520));
        assert_eq!(rnr_delay(33), rnr_delay(1), "masked to 5 bits");
        // Strictly increasing from code 1 on.
        for c in 1..31u8 {
            assert!(rnr_delay(c) < rnr_delay(c + 1), "{c}");
        }
    }
}
