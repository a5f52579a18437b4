//! Which consumer(s) an item goes to: the flows' policies behind one trait, chosen by
//! [`FlowKind`]. A policy only decides; moving the item, accounting room and making it
//! visible is the flow job's mechanism (`flow::job`).

use serde::{Deserialize, Serialize};

use super::key_shuffle::KeyShuffle;
use super::load_balance::LoadBalance;
use super::one_to_one::OneToOne;
use super::ordered_replication::OrderedReplication;

/// The kinds of flow.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum FlowKind {
    /// One producer ring to one consumer ring, in order.
    OneToOne,
    /// N producers to M consumers: each item to one consumer that has room.
    LoadBalance,
    /// N producers to M consumers: every item to every consumer, in one global order,
    /// to all of them or to none.
    OrderedReplication,
    /// N producers to M consumers: each item to the consumer its key (first 8 bytes)
    /// hashes to.
    KeyShuffle,
}

/// What the policy sees when it decides: per producer, the items it holds that no
/// consumer was given yet; per consumer, the slots it has free (the switch's
/// conservative view: known tail, every assigned slot counted as taken).
#[derive(Debug, Clone, Copy)]
pub struct FlowView<'a> {
    /// Items waiting per producer.
    pub waiting: &'a [u64],
    /// Free slots per consumer.
    pub room: &'a [u64],
    /// Per producer, the key of its oldest waiting item if the switch read it (key
    /// shuffle only; other flows do not read keys).
    pub next_keys: &'a [Option<u64>],
}

/// One decision: the next waiting item of `producer` goes to `consumers`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Assignment {
    /// The producer whose oldest waiting item moves.
    pub producer: usize,
    /// The consumers it goes to (one slot reserved in each).
    pub consumers: Vec<usize>,
}

/// A flow policy: asked again and again while it returns assignments.
pub trait FlowPolicy {
    /// The next assignment, or `None` when nothing can move now.
    fn next(&mut self, view: FlowView<'_>) -> Option<Assignment>;
}

impl FlowKind {
    /// Checks the number of producers and consumers this kind takes.
    pub fn check_shape(&self, producers: usize, consumers: usize) -> Result<(), String> {
        if producers == 0 || consumers == 0 {
            return Err("a flow needs at least one producer and one consumer".into());
        }
        if *self == FlowKind::OneToOne && (producers != 1 || consumers != 1) {
            return Err(format!(
                "a one_to_one flow has one producer and one consumer, not {producers} and {consumers}"
            ));
        }
        let most = crate::spec::COPY_REPLICAS + 1;
        if *self == FlowKind::OrderedReplication && consumers > most {
            return Err(format!(
                "an ordered_replication flow multicasts to at most {most} consumers, not {consumers}"
            ));
        }
        Ok(())
    }

    /// A fresh policy of this kind.
    pub fn policy(&self) -> Box<dyn FlowPolicy + Send> {
        match self {
            FlowKind::OneToOne => Box::new(OneToOne),
            FlowKind::LoadBalance => Box::<LoadBalance>::default(),
            FlowKind::OrderedReplication => Box::<OrderedReplication>::default(),
            FlowKind::KeyShuffle => Box::<KeyShuffle>::default(),
        }
    }

    /// Whether the switch must read an item's key before deciding.
    pub fn reads_keys(&self) -> bool {
        *self == FlowKind::KeyShuffle
    }
}

/// The next producer with a waiting item, round robin from `*cursor` (which moves past
/// it).
pub(crate) fn next_waiting(waiting: &[u64], cursor: &mut usize) -> Option<usize> {
    let n = waiting.len();
    (0..n)
        .map(|i| (*cursor + i) % n)
        .find(|&p| waiting[p] > 0)
        .inspect(|&p| *cursor = (p + 1) % n)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shapes_are_checked() {
        assert!(FlowKind::OneToOne.check_shape(1, 1).is_ok());
        assert!(FlowKind::OneToOne.check_shape(2, 1).is_err());
        assert!(FlowKind::LoadBalance.check_shape(3, 2).is_ok());
        assert!(FlowKind::OrderedReplication.check_shape(0, 2).is_err());
    }

    #[test]
    fn producers_are_served_round_robin() {
        let mut c = 0;
        let w = [1, 0, 5];
        assert_eq!(next_waiting(&w, &mut c), Some(0));
        assert_eq!(next_waiting(&w, &mut c), Some(2));
        assert_eq!(next_waiting(&w, &mut c), Some(0));
        assert_eq!(next_waiting(&[0, 0], &mut c), None);
    }
}
