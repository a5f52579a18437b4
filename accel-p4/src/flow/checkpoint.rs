//! What a flow must keep across a switch restart to deliver every item exactly once:
//! the counters it published and the deliveries it decided but has not yet retired.
//!
//! The rule is write-ahead: the flow job's decisions (slots reserved in consumer rings,
//! items taken from producer rings) are kept in the checkpoint *before* the packets
//! that act on them leave the switch. A restarted switch then
//!
//! 1. reads every consumer's head and every producer's tail word back from memory (the
//!    switch is their only writer, so memory says what was published) and takes the
//!    larger of memory and checkpoint;
//! 2. forgets the deliveries whose consumer slot is already below the published head
//!    (a head is published only after the move into every slot below it was
//!    acknowledged, so they are done);
//! 3. moves the other deliveries again on fresh queue pairs: the same producer slot —
//!    not yet freed, since the producer's tail only passes an item once all its
//!    deliveries are published — to the same consumer slot, which no consumer reads
//!    before the head passes it. Rewriting it is idempotent.
//!
//! No slot is reserved twice (reservations survive in the checkpoint) and no item is
//! taken twice (the count of taken items survives), so each item lands once per
//! consumer it was assigned to, in the slot it was assigned.

use serde::{Deserialize, Serialize};

/// One decided move: item `item` of producer `producer` into slot `slot` (a head
/// counter value) of consumer `consumer`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct Delivery {
    /// Producer index in the flow.
    pub producer: u32,
    /// The item (the producer ring's counter value).
    pub item: u64,
    /// Consumer index in the flow.
    pub consumer: u32,
    /// The consumer slot (the consumer ring's counter value).
    pub slot: u64,
}

/// A producer ring's counters as the flow last knew them.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct ProducerMark {
    /// Items taken (assigned to consumers).
    pub taken: u64,
    /// The tail the memory node acknowledged.
    pub tail: u64,
}

/// A consumer ring's counters as the flow last knew them.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct ConsumerMark {
    /// Slots reserved.
    pub reserved: u64,
    /// The head the memory node acknowledged.
    pub head: u64,
}

/// A flow's checkpoint.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct FlowCheckpoint {
    /// Per producer.
    pub producers: Vec<ProducerMark>,
    /// Per consumer.
    pub consumers: Vec<ConsumerMark>,
    /// Deliveries decided and not yet retired, in the order they were decided.
    pub pending: Vec<Delivery>,
    /// Deliveries retired so far (over every incarnation).
    pub delivered: u64,
}
