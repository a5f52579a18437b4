//! One switch-initiated copy as a sans-IO state machine: which READs to issue when, and
//! what the target's acknowledgements and either end's NAKs mean for it.
//!
//! The copy is cut into *chunks* of `chunk_packets` PMTUs; chunk `c` is one READ of the
//! source at source PSN `src_psn + c * chunk_packets`, and its response packets become
//! the WRITEs at target PSNs `dst_psn + c * chunk_packets + i` (the data plane's rule,
//! `functions::zero_copy`). At most `window` chunks are unacknowledged at a time.
//!
//! Reliability is go-back-N over both queue pairs, with no buffered data: a sequence
//! NAK from the target (a WRITE is missing: its READ response or the WRITE was lost)
//! or from the source (a READ request was lost) sends the job back to the chunk holding
//! the refused packet, and so does a retransmission timeout without progress. A
//! re-issued READ carries the same PSN, address, key and length as the first: the
//! source executes it again (a duplicate READ) or for the first time, and its response
//! maps to the same target PSNs, which the target executes once. Acknowledgements are
//! cumulative, so a lost ACK is covered by any later one.

use crate::model::psn_diff;

/// A copy's sizes and PSNs (everything the state machine needs).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CopyShape {
    /// Bytes to copy (at least 1).
    pub len: u64,
    /// log2 of the path MTU.
    pub pmtu_log2: u8,
    /// PMTUs per READ.
    pub chunk_packets: u32,
    /// Chunks in flight at most.
    pub window: u32,
    /// Source-side PSN of the first byte.
    pub src_psn: u32,
    /// Retransmission timeout in microseconds.
    pub rto_us: u64,
}

impl CopyShape {
    /// Bytes per PMTU.
    pub fn pmtu(&self) -> u64 {
        1 << self.pmtu_log2
    }

    /// Packets (PMTUs) of the whole copy.
    pub fn packets(&self) -> u32 {
        self.len.div_ceil(self.pmtu()) as u32
    }

    /// Chunks (READs) of the whole copy.
    pub fn chunks(&self) -> u32 {
        self.packets().div_ceil(self.chunk_packets.max(1))
    }

    /// Byte offset and length of chunk `c`.
    pub fn chunk(&self, c: u32) -> (u64, u32) {
        let bytes = u64::from(self.chunk_packets) << self.pmtu_log2;
        let offset = u64::from(c) * bytes;
        (offset, bytes.min(self.len.saturating_sub(offset)) as u32)
    }
}

pub use dmkv_api::switch_copy::CopyState;

/// A READ to issue now: chunk `chunk` (its offset, length and source PSN).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ChunkRead {
    /// Chunk index.
    pub chunk: u32,
    /// Byte offset in the copy.
    pub offset: u64,
    /// Bytes.
    pub len: u32,
    /// Source-side PSN of the READ.
    pub psn: u32,
    /// Whether this chunk was issued before (a retransmission).
    pub again: bool,
}

/// The state machine of one copy.
#[derive(Debug, Clone)]
pub struct CopyJob {
    shape: CopyShape,
    acked: u32,
    next_chunk: u32,
    issued_max: u32,
    last_progress_us: u64,
    state: CopyState,
    reads: u64,
    rereads: u64,
    go_backs: u64,
}

impl CopyJob {
    /// A copy that has issued nothing yet, started at `now_us`.
    pub fn new(shape: CopyShape, now_us: u64) -> CopyJob {
        CopyJob {
            shape,
            acked: 0,
            next_chunk: 0,
            issued_max: 0,
            last_progress_us: now_us,
            state: CopyState::Running,
            reads: 0,
            rereads: 0,
            go_backs: 0,
        }
    }

    /// The shape.
    pub fn shape(&self) -> &CopyShape {
        &self.shape
    }

    /// Where it stands.
    pub fn state(&self) -> &CopyState {
        &self.state
    }

    /// Bytes acknowledged by the target (a prefix of the copy).
    pub fn bytes_done(&self) -> u64 {
        (u64::from(self.acked) << self.shape.pmtu_log2).min(self.shape.len)
    }

    /// READs issued, of which re-issued, and go-backs.
    pub fn reads(&self) -> (u64, u64, u64) {
        (self.reads, self.rereads, self.go_backs)
    }

    fn first_unacked_chunk(&self) -> u32 {
        self.acked / self.shape.chunk_packets.max(1)
    }

    /// The READs to issue at `now_us` (after a timeout: from the first unacknowledged
    /// chunk again).
    pub fn poll(&mut self, now_us: u64) -> Vec<ChunkRead> {
        if self.state != CopyState::Running {
            return Vec::new();
        }
        let first = self.first_unacked_chunk();
        if self.next_chunk > first
            && now_us.saturating_sub(self.last_progress_us) >= self.shape.rto_us
        {
            self.go_back(first, now_us);
        }
        let mut out = Vec::new();
        let end = self
            .shape
            .chunks()
            .min(first.saturating_add(self.shape.window.max(1)));
        while self.next_chunk < end {
            let c = self.next_chunk;
            let (offset, len) = self.shape.chunk(c);
            let again = c < self.issued_max;
            out.push(ChunkRead {
                chunk: c,
                offset,
                len,
                psn: crate::model::psn_add(self.shape.src_psn, c * self.shape.chunk_packets),
                again,
            });
            self.reads += 1;
            if again {
                self.rereads += 1;
            }
            self.next_chunk += 1;
            self.issued_max = self.issued_max.max(self.next_chunk);
        }
        out
    }

    fn go_back(&mut self, chunk: u32, now_us: u64) {
        let chunk = chunk.max(self.first_unacked_chunk());
        if chunk < self.next_chunk {
            self.next_chunk = chunk;
            self.go_backs += 1;
        }
        self.last_progress_us = now_us;
    }

    /// The target acknowledged `packets` packets (cumulative).
    pub fn on_acked(&mut self, packets: u32, now_us: u64) {
        if self.state != CopyState::Running || packets <= self.acked {
            return;
        }
        self.acked = packets.min(self.shape.packets());
        self.last_progress_us = now_us;
        self.next_chunk = self.next_chunk.max(self.first_unacked_chunk());
        if self.acked >= self.shape.packets() {
            self.state = CopyState::Done;
        }
    }

    /// The target refused packet `packet` (`sequence`: a packet before it is missing).
    pub fn on_target_nak(&mut self, packet: u32, sequence: bool, now_us: u64) {
        // A late answer to a packet already acknowledged says nothing new.
        if self.state != CopyState::Running || packet < self.acked {
            return;
        }
        if !sequence {
            self.state = CopyState::Failed(format!(
                "the target refused the WRITE of bytes from {} (access or request error)",
                u64::from(packet) << self.shape.pmtu_log2
            ));
            return;
        }
        self.go_back(packet / self.shape.chunk_packets.max(1), now_us);
    }

    /// The source refused the READ at source PSN `psn` (`sequence`: an earlier READ
    /// was lost).
    pub fn on_source_nak(&mut self, psn: u32, sequence: bool, now_us: u64) {
        if self.state != CopyState::Running {
            return;
        }
        let k = psn_diff(psn, self.shape.src_psn);
        if k < 0 {
            return;
        }
        let chunk = k as u32 / self.shape.chunk_packets.max(1);
        // A late answer to a READ whose bytes are acknowledged (a duplicate the source
        // no longer remembers, refused) says nothing new.
        if chunk < self.first_unacked_chunk() {
            return;
        }
        if !sequence {
            self.state = CopyState::Failed(format!(
                "the source refused the READ of bytes from {} (access or request error)",
                u64::from(chunk) * (u64::from(self.shape.chunk_packets) << self.shape.pmtu_log2)
            ));
            return;
        }
        self.go_back(chunk, now_us);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn shape(len: u64) -> CopyShape {
        CopyShape {
            len,
            pmtu_log2: 10,
            chunk_packets: 4,
            window: 2,
            src_psn: 0xFF_FFFE,
            rto_us: 1000,
        }
    }

    #[test]
    fn chunks_cover_the_copy_and_the_last_is_short() {
        let s = shape(3 * 4096 + 100);
        assert_eq!(s.packets(), 13);
        assert_eq!(s.chunks(), 4);
        assert_eq!(s.chunk(0), (0, 4096));
        assert_eq!(s.chunk(3), (3 * 4096, 100));
    }

    #[test]
    fn the_window_limits_reads_and_acks_open_it() {
        let mut j = CopyJob::new(shape(5 * 4096), 0);
        let r = j.poll(0);
        assert_eq!(r.iter().map(|r| r.chunk).collect::<Vec<_>>(), [0, 1]);
        // PSNs wrap at 24 bits.
        assert_eq!(r[1].psn, 2);
        assert!(j.poll(10).is_empty());
        j.on_acked(4, 20);
        assert_eq!(j.poll(20).iter().map(|r| r.chunk).collect::<Vec<_>>(), [2]);
        j.on_acked(20, 30);
        assert_eq!(j.state(), &CopyState::Done);
        assert_eq!(j.bytes_done(), 5 * 4096);
        assert!(j.poll(40).is_empty());
    }

    #[test]
    fn a_timeout_goes_back_to_the_first_unacked_chunk() {
        let mut j = CopyJob::new(shape(5 * 4096), 0);
        j.poll(0);
        j.on_acked(5, 10);
        let r = j.poll(2000);
        assert_eq!(
            r.iter().map(|r| (r.chunk, r.again)).collect::<Vec<_>>(),
            [(1, true), (2, false)]
        );
        assert_eq!(j.reads(), (4, 1, 1));
    }

    #[test]
    fn a_sequence_nak_goes_back_and_other_naks_fail() {
        let mut j = CopyJob::new(shape(5 * 4096), 0);
        j.poll(0);
        j.on_target_nak(6, true, 5);
        assert_eq!(j.poll(5).iter().map(|r| r.chunk).collect::<Vec<_>>(), [1]);
        j.on_source_nak(0xFF_FFFE, true, 6);
        assert_eq!(
            j.poll(6).iter().map(|r| r.chunk).collect::<Vec<_>>(),
            [0, 1]
        );
        j.on_source_nak(0xFF_FFFE, false, 7);
        assert!(matches!(j.state(), CopyState::Failed(_)));
    }

    #[test]
    fn late_naks_for_acknowledged_bytes_are_ignored() {
        let mut j = CopyJob::new(shape(5 * 4096), 0);
        j.poll(0);
        j.on_acked(8, 5);
        // A refused stale duplicate of chunk 0's READ, a NAK for an acknowledged WRITE.
        j.on_source_nak(0xFF_FFFE, false, 6);
        j.on_target_nak(3, false, 6);
        assert_eq!(j.state(), &CopyState::Running);
        assert_eq!(
            j.poll(6).iter().map(|r| r.chunk).collect::<Vec<_>>(),
            [2, 3]
        );
    }

    #[derive(Debug, Clone)]
    enum Event {
        Poll(u64),
        Ack(u32),
        TargetNak(u32),
        SourceNak(u32),
    }

    fn event() -> impl Strategy<Value = Event> {
        prop_oneof![
            (0u64..3000).prop_map(Event::Poll),
            (0u32..40).prop_map(Event::Ack),
            (0u32..40).prop_map(Event::TargetNak),
            (0u32..40).prop_map(Event::SourceNak),
        ]
    }

    proptest! {
        #![proptest_config(ProptestConfig {
            cases: 256,
            rng_algorithm: proptest::test_runner::RngAlgorithm::ChaCha,
            ..ProptestConfig::default()
        })]

        /// Whatever arrives in whatever order: reads stay inside the window and the
        /// copy, progress never goes backwards, and a copy acknowledged in full is done.
        #[test]
        fn reads_stay_in_the_window_and_progress_is_monotonic(
            events in proptest::collection::vec(event(), 0..80)
        ) {
            let s = shape(9 * 1024 + 1);
            let mut j = CopyJob::new(s, 0);
            let mut now = 0;
            let mut done = 0;
            for e in events {
                match e {
                    Event::Poll(dt) => {
                        now += dt;
                        for r in j.poll(now) {
                            prop_assert!(r.chunk < s.chunks());
                            prop_assert!(r.offset + u64::from(r.len) <= s.len);
                            let first = j.bytes_done() / (4 * 1024);
                            prop_assert!(u64::from(r.chunk) < first + 2);
                        }
                    }
                    Event::Ack(p) => j.on_acked(p, now),
                    Event::TargetNak(p) => j.on_target_nak(p, true, now),
                    Event::SourceNak(p) => j.on_source_nak(crate::model::psn_add(s.src_psn, p), true, now),
                }
                prop_assert!(j.bytes_done() >= done);
                done = j.bytes_done();
            }
            j.on_acked(s.packets(), now);
            prop_assert_eq!(j.state(), &CopyState::Done);
            prop_assert_eq!(j.bytes_done(), s.len);
        }
    }
}
