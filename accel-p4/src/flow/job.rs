//! One flow as a sans-IO state machine: what it knows of its rings, what it decided,
//! which verbs it issues when, and what the answers mean.
//!
//! * **Learning.** Every `poll_interval_us` (or at once after a doorbell) the job
//!   READs each producer's head and each consumer's tail on the ring's control queue
//!   pair ([`ControlQp`]).
//! * **Deciding.** While the policy ([`FlowPolicy`]) assigns items, the job takes the
//!   producer's next item and reserves the next slot of each chosen consumer. Room is
//!   counted conservatively: slots − (reserved − last tail read).
//! * **Moving.** Each (producer, consumer) pair has a [`Lane`]; an assigned item is
//!   queued on the lane of every consumer it goes to and moved by READ→WRITE.
//! * **Publishing.** A consumer's head is written once the moves into every slot below
//!   it are acknowledged; a producer's tail once every delivery of every item below it
//!   is published (so a producer slot is never reused while a move may still read it).
//!
//! The caller persists [`FlowJob::checkpoint`] after each [`FlowJob::poll`] and before
//! sending what it returned (write-ahead; see [`super::checkpoint`]).

use std::collections::BTreeSet;
use std::time::Instant;

use serde::{Deserialize, Serialize};
use verbs::wr::CompletionValue;

use super::checkpoint::{ConsumerMark, Delivery, FlowCheckpoint, ProducerMark};
use super::control_qp::{ControlPath, ControlQp};
use super::lane::{Lane, LaneEntry, LanePath};
use super::mcast_lane::{McastEntry, McastLane};
use super::policy::FlowKind;
use super::policy::{FlowPolicy, FlowView};
use super::request::FlowShape;
use super::ring::decode_word;
use crate::functions::zero_copy::CopyDigest;
use crate::model::Packet;

/// Where a flow stands.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum FlowState {
    /// Reading the published counters back from memory before moving anything.
    Syncing,
    /// Moving items as producers put them in.
    Running,
    /// Stopped: a verb failed for a reason retrying cannot fix.
    Failed(String),
    /// Stopped by the operator.
    Stopped,
}

/// A flow's progress, as the admin API reports it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct FlowProgress {
    /// Where it stands.
    pub state: FlowState,
    /// Deliveries retired (an item replicated to M consumers counts M times).
    pub delivered: u64,
    /// Item moves (READs) issued by this incarnation.
    pub reads: u64,
    /// Of which re-issued after a NAK or a timeout.
    pub rereads: u64,
    /// Items each producer holds that no consumer was given yet (as last read).
    pub waiting: Vec<u64>,
    /// Free slots per consumer (as last read; reserved slots counted as taken).
    pub room: Vec<u64>,
    /// Polls (head and tail READs) issued.
    pub polls: u64,
    /// Doorbells received.
    pub doorbells: u64,
}

#[derive(Debug, Default, Clone)]
struct ProducerState {
    head: u64,
    taken: u64,
    tail: u64,
    tail_sent: u64,
    polling: bool,
    last_poll_us: Option<u64>,
    doorbell: bool,
    /// Keys of waiting items read so far (key shuffle), by item.
    keys: std::collections::BTreeMap<u64, u64>,
    /// Items whose key READ is under way.
    key_reads: BTreeSet<u64>,
}

#[derive(Debug, Default, Clone)]
struct ConsumerState {
    tail: u64,
    reserved: u64,
    head: u64,
    head_sent: u64,
    filled: BTreeSet<u64>,
    polling: bool,
    last_poll_us: Option<u64>,
}

/// Work-request kinds on control queue pairs (the high byte of a wr id).
const WR_PRODUCER_HEAD: u64 = 1;
const WR_CONSUMER_TAIL: u64 = 2;
const WR_CONSUMER_HEAD: u64 = 3;
const WR_PRODUCER_TAIL: u64 = 4;
const WR_SYNC_CONSUMER_HEAD: u64 = 5;
const WR_SYNC_PRODUCER_TAIL: u64 = 6;
const WR_ITEM_KEY: u64 = 7;
/// Key READs under way per producer at most (key shuffle).
const KEY_READS_AHEAD: u64 = 4;

fn wr_id(kind: u64, value: u64) -> u64 {
    (kind << 56) | (value & ((1 << 56) - 1))
}

/// What [`FlowJob::poll`] asks the caller to do, in order: install the entries, then
/// send the packets.
#[derive(Debug, Default)]
pub struct FlowOutput {
    /// Lane table entries for the items starting now.
    pub entries: Vec<LaneEntry>,
    /// Multicast lane table entries for the items starting now (ordered replication).
    pub mcast_entries: Vec<McastEntry>,
    /// Packets to send (item READs and control verbs), through the pipeline.
    pub packets: Vec<Packet>,
}

/// The state machine of one flow.
pub struct FlowJob {
    shape: FlowShape,
    policy: Box<dyn FlowPolicy + Send>,
    control: Vec<ControlQp>,
    lanes: Vec<Lane>,
    /// Ordered replication: one multicast lane per producer (then `lanes` only lend
    /// their queue pairs and copy slots, and move nothing).
    mcast: Vec<McastLane>,
    producers: Vec<ProducerState>,
    consumers: Vec<ConsumerState>,
    pending: Vec<Delivery>,
    delivered: u64,
    state: FlowState,
    syncs_left: usize,
    polls: u64,
    doorbells: u64,
}

impl std::fmt::Debug for FlowJob {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FlowJob")
            .field("state", &self.state)
            .field("delivered", &self.delivered)
            .finish_non_exhaustive()
    }
}

impl FlowJob {
    /// A flow over `shape`'s rings, on the given control queue pairs (producers first,
    /// then consumers) and lanes (producer-major: lane `p * consumers + c`), resuming
    /// from `checkpoint` if this is a restart. `epoch` is the instant `now_us` counts
    /// from.
    pub fn new(
        shape: FlowShape,
        control: Vec<ControlPath>,
        lanes: Vec<LanePath>,
        checkpoint: Option<FlowCheckpoint>,
        epoch: Instant,
    ) -> Result<FlowJob, String> {
        let (n, m) = (shape.producers.len(), shape.consumers.len());
        shape.kind.check_shape(n, m)?;
        if control.len() != n + m || lanes.len() != n * m {
            return Err(format!(
                "a flow of {n} producers and {m} consumers needs {} control queue pairs and {} lanes",
                n + m,
                n * m
            ));
        }
        let ckpt = checkpoint.unwrap_or_default();
        let producers = (0..n)
            .map(|p| {
                let mark = ckpt.producers.get(p).copied().unwrap_or_default();
                ProducerState {
                    taken: mark.taken,
                    tail: mark.tail,
                    tail_sent: mark.tail,
                    head: mark.taken,
                    ..ProducerState::default()
                }
            })
            .collect();
        let consumers = (0..m)
            .map(|c| {
                let mark = ckpt.consumers.get(c).copied().unwrap_or_default();
                ConsumerState {
                    reserved: mark.reserved,
                    head: mark.head,
                    head_sent: mark.head,
                    tail: mark
                        .head
                        .saturating_sub(u64::from(shape.consumers[c].slots)),
                    ..ConsumerState::default()
                }
            })
            .collect();
        let mcast = if shape.kind == FlowKind::OrderedReplication {
            lanes
                .chunks(m.max(1))
                .filter_map(|c| McastLane::new(c.to_vec()))
                .collect()
        } else {
            Vec::new()
        };
        Ok(FlowJob {
            mcast,
            policy: shape.kind.policy(),
            control: control
                .into_iter()
                .map(|p| ControlQp::new(p, epoch))
                .collect(),
            lanes: lanes.into_iter().map(Lane::new).collect(),
            producers,
            consumers,
            pending: ckpt.pending,
            delivered: ckpt.delivered,
            state: FlowState::Syncing,
            syncs_left: n + m,
            polls: 0,
            doorbells: 0,
            shape,
        })
    }

    /// The shape.
    pub fn shape(&self) -> &FlowShape {
        &self.shape
    }

    /// Where it stands.
    pub fn state(&self) -> &FlowState {
        &self.state
    }

    /// The checkpoint to persist.
    pub fn checkpoint(&self) -> FlowCheckpoint {
        FlowCheckpoint {
            producers: self
                .producers
                .iter()
                .map(|p| ProducerMark {
                    taken: p.taken,
                    tail: p.tail,
                })
                .collect(),
            consumers: self
                .consumers
                .iter()
                .map(|c| ConsumerMark {
                    reserved: c.reserved,
                    head: c.head,
                })
                .collect(),
            pending: self.pending.clone(),
            delivered: self.delivered,
        }
    }

    /// Its progress.
    pub fn progress(&self) -> FlowProgress {
        let (reads, rereads) = self
            .lanes
            .iter()
            .map(Lane::reads)
            .chain(self.mcast.iter().map(McastLane::reads))
            .fold((0, 0), |(a, b), (r, rr)| (a + r, b + rr));
        FlowProgress {
            state: self.state.clone(),
            delivered: self.delivered,
            reads,
            rereads,
            waiting: self.waiting(),
            room: self.room(),
            polls: self.polls,
            doorbells: self.doorbells,
        }
    }

    fn waiting(&self) -> Vec<u64> {
        self.producers
            .iter()
            .map(|p| p.head.saturating_sub(p.taken))
            .collect()
    }

    fn room(&self) -> Vec<u64> {
        self.consumers
            .iter()
            .zip(&self.shape.consumers)
            .map(|(c, ring)| ring.room(c.reserved, c.tail))
            .collect()
    }

    /// Whether `copy_slot` is one of this flow's lanes.
    pub fn owns_copy_slot(&self, copy_slot: u8) -> bool {
        self.lanes.iter().any(|l| l.path().copy_slot == copy_slot)
    }

    /// A doorbell for producer `producer`: read its head at the next poll.
    pub fn on_doorbell(&mut self, producer: usize) {
        if let Some(p) = self.producers.get_mut(producer) {
            p.doorbell = true;
            self.doorbells += 1;
        }
    }

    /// Whether `(memnode, switch QPN)` is one of this flow's control queue pairs
    /// (the key of its `flow_punt` entry); returns its index.
    pub fn control_index(&self, memnode: std::net::SocketAddrV4, switch_qpn: u32) -> Option<usize> {
        self.control
            .iter()
            .position(|q| q.path().memnode == memnode && q.path().switch_qpn == switch_qpn)
    }

    /// An answer on control queue pair `index`, handed to the CPU by `flow_punt`.
    pub fn on_control_frame(&mut self, index: usize, frame: &[u8], now_us: u64) {
        let Some(qp) = self.control.get_mut(index) else {
            return;
        };
        qp.receive(now_us, frame);
        self.drain_completions(index);
    }

    fn fail(&mut self, why: String) {
        if !matches!(self.state, FlowState::Failed(_)) {
            self.state = FlowState::Failed(why);
        }
    }

    fn drain_completions(&mut self, index: usize) {
        let Some(qp) = self.control.get_mut(index) else {
            return;
        };
        let n = self.shape.producers.len();
        for c in qp.completions() {
            let kind = c.wr_id >> 56;
            let value = c.wr_id & ((1 << 56) - 1);
            let result = match c.result {
                Ok(v) => v,
                Err(e) => {
                    self.fail(format!("a control verb on ring {index} failed: {e:?}"));
                    continue;
                }
            };
            let word = match &result {
                CompletionValue::Read(bytes) => decode_word(bytes),
                _ => None,
            };
            match kind {
                WR_PRODUCER_HEAD => {
                    if let (Some(p), Some(w)) = (self.producers.get_mut(index), word) {
                        p.head = p.head.max(w);
                        p.polling = false;
                    }
                }
                WR_CONSUMER_TAIL => {
                    if let (Some(c), Some(w)) = (
                        index.checked_sub(n).and_then(|c| self.consumers.get_mut(c)),
                        word,
                    ) {
                        // A tail beyond what was published is a consumer's bug; never
                        // let it create room that is not there.
                        c.tail = c.tail.max(w.min(c.head));
                        c.polling = false;
                    }
                }
                WR_CONSUMER_HEAD => {
                    if let Some(c) = index.checked_sub(n).and_then(|c| self.consumers.get_mut(c)) {
                        c.head = c.head.max(value);
                    }
                    self.retire();
                }
                WR_PRODUCER_TAIL => {
                    if let Some(p) = self.producers.get_mut(index) {
                        p.tail = p.tail.max(value);
                    }
                }
                WR_SYNC_CONSUMER_HEAD => {
                    if let (Some(c), Some(w)) = (
                        index.checked_sub(n).and_then(|c| self.consumers.get_mut(c)),
                        word,
                    ) {
                        c.head = c.head.max(w);
                        c.head_sent = c.head;
                        c.reserved = c.reserved.max(c.head);
                        c.tail = c.tail.min(c.head);
                    }
                    self.synced();
                }
                WR_ITEM_KEY => {
                    if let Some(p) = self.producers.get_mut(index) {
                        p.key_reads.remove(&value);
                        if let Some(w) = word
                            && value >= p.taken
                        {
                            p.keys.insert(value, w);
                        }
                    }
                }
                WR_SYNC_PRODUCER_TAIL => {
                    if let (Some(p), Some(w)) = (self.producers.get_mut(index), word) {
                        p.tail = p.tail.max(w);
                        p.tail_sent = p.tail;
                        p.taken = p.taken.max(p.tail);
                        p.head = p.head.max(p.taken);
                    }
                    self.synced();
                }
                _ => {}
            }
        }
    }

    fn synced(&mut self) {
        self.syncs_left = self.syncs_left.saturating_sub(1);
        if self.syncs_left > 0 || self.state != FlowState::Syncing {
            return;
        }
        // Deliveries below a published head are done; move the others again.
        let consumers = &self.consumers;
        let before = self.pending.len();
        self.pending.retain(|d| {
            consumers
                .get(d.consumer as usize)
                .is_some_and(|c| d.slot >= c.head)
        });
        self.delivered += (before - self.pending.len()) as u64;
        let pending = self.pending.clone();
        self.queue_moves(&pending);
        self.state = FlowState::Running;
    }

    /// Digests of the data plane's copy slots (those of other slots are ignored).
    pub fn on_copy_digests(&mut self, digests: &[CopyDigest], now_us: u64) {
        for d in digests {
            let slot = match d {
                CopyDigest::Acked { slot, .. }
                | CopyDigest::TargetNak { slot, .. }
                | CopyDigest::SourceNak { slot, .. } => *slot,
            };
            if !self.mcast.is_empty() {
                let done = self
                    .mcast
                    .iter_mut()
                    .filter(|l| l.owns_copy_slot(slot))
                    .find_map(|l| l.on_digest(d, now_us));
                match done {
                    Some(Ok(group)) => {
                        for delivery in group {
                            if let Some(c) = self.consumers.get_mut(delivery.consumer as usize) {
                                c.filled.insert(delivery.slot);
                            }
                        }
                    }
                    Some(Err(why)) => self.fail(format!("an item move failed: {why}")),
                    None => {}
                }
                continue;
            }
            let Some(lane) = self.lanes.iter_mut().find(|l| l.path().copy_slot == slot) else {
                continue;
            };
            match lane.on_digest(d, now_us) {
                Some(Ok(delivery)) => {
                    if let Some(c) = self.consumers.get_mut(delivery.consumer as usize) {
                        c.filled.insert(delivery.slot);
                    }
                }
                Some(Err(why)) => self.fail(format!("an item move failed: {why}")),
                None => {}
            }
        }
    }

    /// Retire the deliveries the published heads cover.
    fn retire(&mut self) {
        let consumers = &self.consumers;
        let before = self.pending.len();
        self.pending.retain(|d| {
            consumers
                .get(d.consumer as usize)
                .is_some_and(|c| d.slot >= c.head)
        });
        self.delivered += (before - self.pending.len()) as u64;
    }

    /// What to do at `now_us`.
    pub fn poll(&mut self, now_us: u64) -> FlowOutput {
        let mut out = FlowOutput::default();
        if matches!(self.state, FlowState::Failed(_)) {
            return out;
        }
        if let Some(i) = self.control.iter().position(ControlQp::failed) {
            self.fail(format!(
                "the control queue pair of ring {i} gave up retrying"
            ));
            return out;
        }
        if self.state == FlowState::Syncing {
            if self.polls == 0 {
                self.start_sync();
            }
        } else {
            self.issue_polls(now_us);
            self.assign();
            self.publish();
            let rto = self.shape.rto_us;
            for lane in &mut self.lanes {
                let (entry, packets) =
                    lane.poll(now_us, &self.shape.producers, &self.shape.consumers, rto);
                out.entries.extend(entry);
                out.packets.extend(packets);
            }
            for lane in &mut self.mcast {
                let (entry, packets) =
                    lane.poll(now_us, &self.shape.producers, &self.shape.consumers, rto);
                out.mcast_entries.extend(entry);
                out.packets.extend(packets);
            }
        }
        for qp in &mut self.control {
            out.packets.extend(qp.transmit(now_us));
        }
        out
    }

    fn start_sync(&mut self) {
        let n = self.shape.producers.len();
        let mut errors = Vec::new();
        for (p, ring) in self.shape.producers.iter().enumerate() {
            if let Some(qp) = self.control.get_mut(p) {
                errors.extend(
                    qp.read_word(wr_id(WR_SYNC_PRODUCER_TAIL, 0), ring.tail_va(), ring.rkey)
                        .err(),
                );
            }
        }
        for (c, ring) in self.shape.consumers.iter().enumerate() {
            if let Some(qp) = self.control.get_mut(n + c) {
                errors.extend(
                    qp.read_word(wr_id(WR_SYNC_CONSUMER_HEAD, 0), ring.head_va(), ring.rkey)
                        .err(),
                );
            }
        }
        self.polls += (n + self.shape.consumers.len()) as u64;
        if let Some(e) = errors.pop() {
            self.fail(format!("could not post a control verb: {e}"));
        }
    }

    fn issue_polls(&mut self, now_us: u64) {
        let n = self.shape.producers.len();
        let interval = self.shape.poll_interval_us;
        let due = |last: Option<u64>| last.is_none_or(|t| now_us.saturating_sub(t) >= interval);
        let mut errors = Vec::new();
        for (p, st) in self.producers.iter_mut().enumerate() {
            if st.polling || !(st.doorbell || due(st.last_poll_us)) {
                continue;
            }
            let ring = &self.shape.producers[p];
            if let Some(qp) = self.control.get_mut(p) {
                errors.extend(
                    qp.read_word(wr_id(WR_PRODUCER_HEAD, 0), ring.head_va(), ring.rkey)
                        .err(),
                );
                st.polling = true;
                st.doorbell = false;
                st.last_poll_us = Some(now_us);
                self.polls += 1;
            }
        }
        for (c, st) in self.consumers.iter_mut().enumerate() {
            if st.polling || !due(st.last_poll_us) {
                continue;
            }
            let ring = &self.shape.consumers[c];
            if let Some(qp) = self.control.get_mut(n + c) {
                errors.extend(
                    qp.read_word(wr_id(WR_CONSUMER_TAIL, 0), ring.tail_va(), ring.rkey)
                        .err(),
                );
                st.polling = true;
                st.last_poll_us = Some(now_us);
                self.polls += 1;
            }
        }
        if self.shape.kind.reads_keys() {
            for (p, st) in self.producers.iter_mut().enumerate() {
                let ring = &self.shape.producers[p];
                let end = st.head.min(st.taken.saturating_add(KEY_READS_AHEAD));
                for item in st.taken..end {
                    if st.keys.contains_key(&item) || st.key_reads.contains(&item) {
                        continue;
                    }
                    if let Some(qp) = self.control.get_mut(p) {
                        errors.extend(
                            qp.read_word(wr_id(WR_ITEM_KEY, item), ring.slot_va(item), ring.rkey)
                                .err(),
                        );
                        st.key_reads.insert(item);
                    }
                }
            }
        }
        if let Some(e) = errors.pop() {
            self.fail(format!("could not post a control verb: {e}"));
        }
    }

    fn assign(&mut self) {
        loop {
            let waiting = self.waiting();
            let room = self.room();
            let next_keys: Vec<Option<u64>> = self
                .producers
                .iter()
                .map(|p| p.keys.get(&p.taken).copied())
                .collect();
            let Some(a) = self.policy.next(FlowView {
                waiting: &waiting,
                room: &room,
                next_keys: &next_keys,
            }) else {
                break;
            };
            // A policy may only pick a producer with an item and consumers with room.
            if waiting.get(a.producer).is_none_or(|&w| w == 0)
                || a.consumers.is_empty()
                || a.consumers
                    .iter()
                    .any(|&c| room.get(c).is_none_or(|&r| r == 0))
            {
                break;
            }
            let Some(p) = self.producers.get_mut(a.producer) else {
                break;
            };
            let item = p.taken;
            p.taken += 1;
            p.keys.remove(&item);
            let mut group = Vec::new();
            for &c in &a.consumers {
                let Some(cs) = self.consumers.get_mut(c) else {
                    continue;
                };
                let d = Delivery {
                    producer: a.producer as u32,
                    item,
                    consumer: c as u32,
                    slot: cs.reserved,
                };
                cs.reserved += 1;
                self.pending.push(d);
                group.push(d);
            }
            self.queue_moves(&group);
        }
    }

    /// Queue moves on the lanes: per (producer, consumer) lane, or, for ordered
    /// replication, each item (its run of deliveries of one producer and item) as one
    /// multicast move on its producer's multicast lane.
    fn queue_moves(&mut self, deliveries: &[Delivery]) {
        let m = self.consumers.len();
        if self.mcast.is_empty() {
            for d in deliveries {
                if let Some(lane) = self
                    .lanes
                    .get_mut(d.producer as usize * m + d.consumer as usize)
                {
                    lane.push(*d);
                }
            }
            return;
        }
        for group in deliveries.chunk_by(|a, b| a.producer == b.producer && a.item == b.item) {
            if let Some(first) = group.first()
                && let Some(lane) = self.mcast.get_mut(first.producer as usize)
            {
                lane.push(group.to_vec());
            }
        }
    }

    fn publish(&mut self) {
        let n = self.shape.producers.len();
        let mut errors = Vec::new();
        for (c, st) in self.consumers.iter_mut().enumerate() {
            let mut head = st.head_sent;
            while st.filled.remove(&head) {
                head += 1;
            }
            // Slots below the head sent are filled; forget any stale marks below it.
            st.filled.retain(|&s| s >= head);
            if head > st.head_sent {
                let ring = &self.shape.consumers[c];
                if let Some(qp) = self.control.get_mut(n + c) {
                    errors.extend(
                        qp.write_word(
                            wr_id(WR_CONSUMER_HEAD, head),
                            ring.head_va(),
                            ring.rkey,
                            head,
                        )
                        .err(),
                    );
                    st.head_sent = head;
                }
            }
        }
        for (p, st) in self.producers.iter_mut().enumerate() {
            // The tail passes an item once none of its deliveries is pending.
            let tail = self
                .pending
                .iter()
                .filter(|d| d.producer as usize == p)
                .map(|d| d.item)
                .min()
                .unwrap_or(st.taken);
            if tail > st.tail_sent {
                let ring = &self.shape.producers[p];
                if let Some(qp) = self.control.get_mut(p) {
                    errors.extend(
                        qp.write_word(
                            wr_id(WR_PRODUCER_TAIL, tail),
                            ring.tail_va(),
                            ring.rkey,
                            tail,
                        )
                        .err(),
                    );
                    st.tail_sent = tail;
                }
            }
        }
        if let Some(e) = errors.pop() {
            self.fail(format!("could not post a control verb: {e}"));
        }
    }
}
