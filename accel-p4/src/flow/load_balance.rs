//! Load balancing: N producers to M consumers, each item to one consumer that has room
//! — the one with the most free slots, so a slow consumer whose ring fills up stops
//! receiving and the others take its share. Producers are served round robin. Neither
//! producers nor consumers coordinate with each other; the switch's view of free space
//! is all that decides.

use super::policy::{Assignment, FlowPolicy, FlowView, next_waiting};

/// The load-balancing policy.
#[derive(Debug, Clone, Default)]
pub struct LoadBalance {
    producer_cursor: usize,
    consumer_cursor: usize,
}

impl FlowPolicy for LoadBalance {
    fn next(&mut self, view: FlowView<'_>) -> Option<Assignment> {
        let m = view.room.len();
        // Most room wins; ties go round robin so equal consumers share evenly.
        let consumer = (0..m)
            .map(|i| (self.consumer_cursor + i) % m)
            .filter(|&c| view.room[c] > 0)
            .max_by_key(|&c| {
                (
                    view.room[c],
                    std::cmp::Reverse((c + m - self.consumer_cursor) % m),
                )
            })?;
        let producer = next_waiting(view.waiting, &mut self.producer_cursor)?;
        self.consumer_cursor = (consumer + 1) % m;
        Some(Assignment {
            producer,
            consumers: vec![consumer],
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn items_go_to_the_consumer_with_most_room() {
        let mut p = LoadBalance::default();
        let a = p
            .next(FlowView {
                waiting: &[2, 2],
                room: &[1, 5, 0],
                next_keys: &[],
            })
            .expect("an assignment");
        assert_eq!(a.consumers, vec![1]);
        assert_eq!(a.producer, 0);
        let b = p
            .next(FlowView {
                waiting: &[2, 2],
                room: &[1, 5, 0],
                next_keys: &[],
            })
            .expect("an assignment");
        assert_eq!(b.producer, 1, "producers take turns");
    }

    #[test]
    fn a_full_consumer_gets_nothing_and_equal_ones_share() {
        let mut p = LoadBalance::default();
        assert_eq!(
            p.next(FlowView {
                waiting: &[1],
                room: &[0, 0],
                next_keys: &[],
            }),
            None
        );
        let mut seen = [0; 2];
        for _ in 0..10 {
            let a = p
                .next(FlowView {
                    waiting: &[1],
                    room: &[3, 3],
                    next_keys: &[],
                })
                .expect("an assignment");
            seen[a.consumers[0]] += 1;
        }
        assert_eq!(seen, [5, 5]);
    }
}
