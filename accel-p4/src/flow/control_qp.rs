//! A ring's control queue pair: the switch's reliable connection to the memory node
//! holding a ring, on which it READs head and tail words (polling) and WRITEs them
//! (publishing items to a consumer, freeing slots of a producer). It is an ordinary RC
//! requester (`verbs::rc::Requester`, with its retransmission and go-back-N); its
//! packets leave through the pipeline like the copies' READs, and the memory node's
//! answers come back to the switch CPU through the `flow_punt` rule.

use std::net::SocketAddrV4;
use std::time::{Duration, Instant};

use verbs::rc::{QpState, RcConfig, Requester};
use verbs::wire::{EthernetFrame, FrameRepr, IcrcPath};
use verbs::wr::{Completion, RemoteAddr, WorkRequest};

use crate::model::{Packet, PacketId, parse};
use crate::spec::{DIR_UP, PORT_CPU, PORT_MEMNODE};

/// MAC addresses of generated packets (the soft switch has no link layer).
const GENERATED_MAC: [u8; 6] = [0x02, 0, 0, 0, 0, 0xFE];

/// Where a ring's control queue pair runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ControlPath {
    /// The switch's memnode-side address.
    pub switch: SocketAddrV4,
    /// The ring's memory node (its soft-RoCE address).
    pub memnode: SocketAddrV4,
    /// The switch's QPN (what the memnode's answers carry).
    pub switch_qpn: u32,
    /// The memnode's QPN of the connection.
    pub memnode_qpn: u32,
    /// First PSN.
    pub psn: u32,
}

/// One ring's control queue pair.
#[derive(Debug)]
pub struct ControlQp {
    path: ControlPath,
    requester: Requester,
    epoch: Instant,
}

impl ControlQp {
    /// A fresh connection; `epoch` is the instant the flow's microsecond clock counts
    /// from.
    pub fn new(path: ControlPath, epoch: Instant) -> ControlQp {
        let config = RcConfig {
            retransmit_timeout: Duration::from_millis(2),
            max_retries: 16,
            ..RcConfig::default()
        };
        let requester = Requester::new(
            config,
            path.switch_qpn,
            path.memnode_qpn,
            path.psn,
            IcrcPath::new(path.switch, path.memnode),
        );
        ControlQp {
            path,
            requester,
            epoch,
        }
    }

    /// The path.
    pub fn path(&self) -> &ControlPath {
        &self.path
    }

    /// Whether the connection failed (retries exhausted).
    pub fn failed(&self) -> bool {
        self.requester.state() == QpState::Error
    }

    fn at(&self, now_us: u64) -> Instant {
        self.epoch + Duration::from_micros(now_us)
    }

    /// READ the 8-byte word at `va`.
    pub fn read_word(&mut self, wr_id: u64, va: u64, rkey: u32) -> Result<(), String> {
        let wr = WorkRequest::Read {
            remote: RemoteAddr { rkey, va },
            len: 8,
        };
        self.requester.post(wr_id, wr).map_err(|e| e.to_string())
    }

    /// WRITE `value` to the 8-byte word at `va`.
    pub fn write_word(&mut self, wr_id: u64, va: u64, rkey: u32, value: u64) -> Result<(), String> {
        let wr = WorkRequest::Write {
            remote: RemoteAddr { rkey, va },
            data: super::ring::encode_word(value).to_vec(),
            inline: true,
        };
        self.requester.post(wr_id, wr).map_err(|e| e.to_string())
    }

    /// An answer the `flow_punt` rule handed to the CPU.
    pub fn receive(&mut self, now_us: u64, frame: &[u8]) {
        let Ok(eth) = EthernetFrame::parse_port(frame, self.path.memnode.port()) else {
            return;
        };
        let now = self.at(now_us);
        let _ = self.requester.handle_datagram(now, eth.roce);
    }

    /// Completed verbs.
    pub fn completions(&mut self) -> Vec<Completion> {
        std::iter::from_fn(|| self.requester.poll_completion()).collect()
    }

    /// Packets to send now (retransmissions after a timeout included), as pipeline
    /// packets leaving towards the memory nodes.
    pub fn transmit(&mut self, now_us: u64) -> Vec<Packet> {
        let now = self.at(now_us);
        if self.requester.poll_timeout().is_some_and(|t| t <= now) {
            self.requester.handle_timeout(now);
        }
        let mut out = Vec::new();
        let mut buf = vec![0u8; 2048];
        let path = IcrcPath::new(self.path.switch, self.path.memnode);
        while let Some(n) = self.requester.poll_transmit(now, &mut buf) {
            let Some(roce) = buf.get(..n) else { break };
            let frame = FrameRepr::build(GENERATED_MAC, GENERATED_MAC, 0, &path, roce);
            if let Ok(mut pkt) = parse(PacketId(0), PORT_CPU, &frame) {
                pkt.meta.dir = DIR_UP;
                pkt.meta.egress_port = PORT_MEMNODE;
                out.push(pkt);
            }
        }
        out
    }
}
