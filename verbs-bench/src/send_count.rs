//! How many datagrams one side of a cell put into each send system call: the batching
//! that decides what a round trip costs in the kernel, counted for soft RoCE's client
//! and memory node and for the echo's client and server alike.

/// Datagrams sent and the system calls that sent them.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SendCount {
    /// Datagrams handed to the kernel.
    pub datagrams: u64,
    /// `sendmmsg` calls (a segmented run counts as one datagram per segment, one call).
    pub calls: u64,
}

impl SendCount {
    /// Datagrams per call (0 when nothing was sent).
    pub fn per_call(&self) -> f64 {
        if self.calls == 0 {
            0.0
        } else {
            self.datagrams as f64 / self.calls as f64
        }
    }

    /// What was counted since `earlier`.
    pub fn since(&self, earlier: SendCount) -> SendCount {
        SendCount {
            datagrams: self.datagrams.saturating_sub(earlier.datagrams),
            calls: self.calls.saturating_sub(earlier.calls),
        }
    }

    /// Both counts added.
    pub fn plus(&self, other: SendCount) -> SendCount {
        SendCount {
            datagrams: self.datagrams + other.datagrams,
            calls: self.calls + other.calls,
        }
    }

    /// A soft-RoCE client's sends, from its transport counters: every datagram beyond
    /// the first of a `sendmmsg` is counted as batched.
    pub fn of_transport(stats: &verbs::transport::TransportStats) -> SendCount {
        SendCount {
            datagrams: stats.packets_sent,
            calls: stats.packets_sent.saturating_sub(stats.batched_sends),
        }
    }

    /// A memory node's sends, from its metrics.
    pub fn of_memnode(m: &memnode::metrics::MetricsSnapshot) -> SendCount {
        SendCount {
            datagrams: m.sent,
            calls: m.sends,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn per_call_and_differences() {
        let a = SendCount {
            datagrams: 160,
            calls: 10,
        };
        assert_eq!(a.per_call(), 16.0);
        assert_eq!(SendCount::default().per_call(), 0.0);
        let b = SendCount {
            datagrams: 240,
            calls: 20,
        };
        assert_eq!(b.since(a).per_call(), 8.0);
        assert_eq!(a.plus(b).datagrams, 400);
        let stats = verbs::transport::TransportStats {
            packets_sent: 64,
            batched_sends: 56,
            ..Default::default()
        };
        assert_eq!(SendCount::of_transport(&stats).per_call(), 8.0);
    }
}
