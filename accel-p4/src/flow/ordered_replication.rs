//! Ordered replication: every item to all M consumers, in one global order (the order
//! of the assignments, which the flow job keeps in the same slot order in every
//! consumer). An item moves only when the *minimum* free space over all consumers is
//! at least one slot, so it is delivered to all consumers or to none. Producers are
//! served round robin.

use super::policy::{Assignment, FlowPolicy, FlowView, next_waiting};

/// The ordered-replication policy.
#[derive(Debug, Clone, Default)]
pub struct OrderedReplication {
    producer_cursor: usize,
}

impl FlowPolicy for OrderedReplication {
    fn next(&mut self, view: FlowView<'_>) -> Option<Assignment> {
        let min_room = view.room.iter().copied().min()?;
        if min_room == 0 {
            return None;
        }
        let producer = next_waiting(view.waiting, &mut self.producer_cursor)?;
        Some(Assignment {
            producer,
            consumers: (0..view.room.len()).collect(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn all_or_none_by_the_minimum_room() {
        let mut p = OrderedReplication::default();
        assert_eq!(
            p.next(FlowView {
                waiting: &[4],
                room: &[3, 0, 9],
                next_keys: &[],
            }),
            None
        );
        assert_eq!(
            p.next(FlowView {
                waiting: &[4],
                room: &[3, 1, 9],
                next_keys: &[],
            }),
            Some(Assignment {
                producer: 0,
                consumers: vec![0, 1, 2]
            })
        );
    }
}
