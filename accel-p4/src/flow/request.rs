//! What a flow is: its kind, its rings and its timing.

use serde::{Deserialize, Serialize};

use super::policy::FlowKind;
use super::ring::RingLayout;

/// Most producers or consumers in one flow.
pub const MAX_RINGS: usize = 8;
/// Poll interval when not given, in microseconds.
pub const DEFAULT_POLL_INTERVAL_US: u64 = 100;

/// A flow's kind, rings and timing.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct FlowShape {
    /// Which flow.
    pub kind: FlowKind,
    /// Producer rings (items are taken from them).
    pub producers: Vec<RingLayout>,
    /// Consumer rings (items are put into them).
    pub consumers: Vec<RingLayout>,
    /// How often each ring's counter is polled, in microseconds.
    pub poll_interval_us: u64,
    /// Retransmission timeout of an item move, in microseconds.
    pub rto_us: u64,
}

impl FlowShape {
    /// Checks the rings and timing.
    pub fn checked(&self) -> Result<(), String> {
        self.kind
            .check_shape(self.producers.len(), self.consumers.len())?;
        if self.producers.len() > MAX_RINGS || self.consumers.len() > MAX_RINGS {
            return Err(format!(
                "at most {MAX_RINGS} producers and {MAX_RINGS} consumers per flow"
            ));
        }
        for r in self.producers.iter().chain(&self.consumers) {
            r.checked()?;
        }
        for (p, producer) in self.producers.iter().enumerate() {
            for (c, consumer) in self.consumers.iter().enumerate() {
                if consumer.slot_size < producer.slot_size {
                    return Err(format!(
                        "consumer {c}'s slots ({} bytes) are smaller than producer {p}'s ({} bytes)",
                        consumer.slot_size, producer.slot_size
                    ));
                }
            }
        }
        if self.poll_interval_us == 0 || self.poll_interval_us > 10_000_000 {
            return Err(format!(
                "poll_interval_us {} is out of range: 1 ..= 10000000",
                self.poll_interval_us
            ));
        }
        if self.rto_us == 0 || self.rto_us > 60_000_000 {
            return Err(format!(
                "rto_us {} is out of range: 1 ..= 60000000",
                self.rto_us
            ));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ring(slot_size: u32) -> RingLayout {
        RingLayout {
            va: 0x1000,
            rkey: 1,
            slot_size,
            slots: 8,
        }
    }

    #[test]
    fn shapes_are_checked() {
        let mut s = FlowShape {
            kind: FlowKind::LoadBalance,
            producers: vec![ring(256)],
            consumers: vec![ring(256), ring(512)],
            poll_interval_us: 100,
            rto_us: 2000,
        };
        assert!(s.checked().is_ok());
        s.consumers[0].slot_size = 128;
        assert!(
            s.checked().is_err(),
            "a consumer slot too small for the items"
        );
        s.consumers[0].slot_size = 256;
        s.kind = FlowKind::OneToOne;
        assert!(s.checked().is_err(), "1:1 with two consumers");
        s.kind = FlowKind::OrderedReplication;
        s.poll_interval_us = 0;
        assert!(s.checked().is_err());
    }
}
