//! The 1:1 flow: every item of the one producer to the one consumer, in order, while
//! the consumer has room.

use super::policy::{Assignment, FlowPolicy, FlowView};

/// The 1:1 policy.
#[derive(Debug, Clone, Copy, Default)]
pub struct OneToOne;

impl FlowPolicy for OneToOne {
    fn next(&mut self, view: FlowView<'_>) -> Option<Assignment> {
        let waiting = *view.waiting.first()?;
        let room = *view.room.first()?;
        (waiting > 0 && room > 0).then(|| Assignment {
            producer: 0,
            consumers: vec![0],
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn moves_only_when_there_is_an_item_and_room() {
        let mut p = OneToOne;
        let next = |p: &mut OneToOne, w: u64, r: u64| {
            p.next(FlowView {
                waiting: &[w],
                room: &[r],
                next_keys: &[],
            })
        };
        assert_eq!(
            next(&mut p, 1, 1),
            Some(Assignment {
                producer: 0,
                consumers: vec![0]
            })
        );
        assert_eq!(next(&mut p, 0, 1), None);
        assert_eq!(next(&mut p, 3, 0), None);
    }
}
