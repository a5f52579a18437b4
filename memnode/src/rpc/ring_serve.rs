//! A worker's pass over the request rings: it takes each owned ring's requests in
//! order, executes them as SEND-carried ones (the same [`super::execute`], the queue
//! pair's access scope), clears each slot and replies with a SEND on the ring's
//! queue pair.

use std::sync::atomic::{AtomicBool, Ordering};

use super::pool::Worker;
use super::rings::RequestRings;

impl Worker {
    /// One pass over `rings`: executes every request that has landed whole in an
    /// owned ring no other worker holds. Returns how many it executed.
    pub(super) fn poll_rings(&mut self, rings: &RequestRings, stop: &AtomicBool) -> usize {
        self.shared.stats.on_ring_poll();
        let mut executed = 0;
        for index in 0..rings.count() as u32 {
            if stop.load(Ordering::Relaxed) || self.dead {
                break;
            }
            let Some(mut turn) = rings.try_turn(index) else {
                continue;
            };
            let qpn = turn.owner();
            let mut request = std::mem::take(&mut self.ring_request);
            let mut scope = None;
            while turn.next_request(&mut request) {
                // The queue pair's current scope, looked up once per turn; a queue
                // pair that is gone (its ring not freed yet) gets nothing executed.
                if scope.is_none() {
                    let qps = self.shared.qps.lock();
                    match qps.get(&qpn) {
                        Some(e) if e.ring.is_some_and(|r| r.index == index) => {
                            scope = Some(e.responder.scope().cloned());
                        }
                        _ => break,
                    }
                }
                let seq = turn.next_seq();
                self.shared.stats.on_ring_request();
                let reply = self.execute(qpn, &request, scope.as_ref().and_then(|s| s.as_deref()));
                // Executed (or, with the crash hook, taken by a worker that stopped):
                // never again, whatever lands in the slot later.
                turn.done();
                let Some(reply) = reply else { break };
                self.reply(qpn, seq, reply);
                executed += 1;
                if stop.load(Ordering::Relaxed) {
                    break;
                }
            }
            self.ring_request = request;
        }
        executed
    }
}
