//! The software baseline of 1 → N replication: a CPU thread that does with one-sided
//! verbs what the switch's ordered-replication flow does in the network — polls the
//! producer ring's head and the consumers' tails, READs new items into its own memory,
//! WRITEs each to every consumer ring (item, then head, on the consumer node's queue
//! pair, so the head never names an item not yet written), and WRITEs the producer's
//! tail once every consumer has the items.
//!
//! - **ordered**: the consumers advance in lockstep — an item goes to all consumers at
//!   once, only when every one has room (one global order, all-or-nothing per item, as
//!   the switch's flow);
//! - **unordered**: each consumer takes items as fast as it has room; the thread keeps
//!   an item until the slowest consumer has it.
//!
//! One step is three round trips: READ the words, READ the items, WRITE items, heads
//! and the producer's tail.

use std::collections::VecDeque;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use accel_p4::flow::ring::{HEAD_OFFSET, SLOTS_OFFSET, TAIL_OFFSET};
use dmkv_api::qp::{QpPath, connect_udp_qp_as};
use verbs::rc::RcConfig;
use verbs::transport::udp::UdpTransport;
use verbs::transport::{QpHandle, Transport};
use verbs::wr::{Completion, CompletionValue, RemoteAddr, WorkRequest};

/// Items moved per step at most.
const BATCH: u64 = 16;

/// A ring as the replicator reaches it.
#[derive(Debug, Clone, Copy)]
pub struct RemoteRing {
    /// Index of the memory node's queue pair.
    pub node: usize,
    /// The ring's first byte.
    pub va: u64,
    /// Its region's key.
    pub rkey: u32,
}

impl RemoteRing {
    fn word(&self, offset: u64) -> RemoteAddr {
        RemoteAddr::new(self.rkey, self.va + offset)
    }
}

/// What a run moved.
#[derive(Debug, Clone, Copy, Default)]
pub struct Moved {
    /// Items read from the producer.
    pub items: u64,
    /// Round trips (steps × phases that posted anything).
    pub round_trips: u64,
}

/// The replicator: one queue pair to each memory node.
pub struct Replicator {
    transport: UdpTransport,
    qps: Vec<QpHandle>,
    next_wr: u64,
    slot: u32,
    slots: u32,
}

impl Replicator {
    /// Connects to the memory nodes at `admin_urls` (queue pair `i` for node `i`).
    pub fn connect(
        admin_urls: &[String],
        token: Option<&str>,
        slot: u32,
        slots: u32,
    ) -> Result<Replicator, String> {
        let first = admin_urls.first().ok_or("no memory node")?;
        let info = dmkv_api::memnode_admin::node_info_as(first, token)
            .map_err(|e| format!("memnode {first}: {e}"))?;
        let addr = dmkv_api::memnode_admin::data_addr(first, &info)
            .map_err(|e| format!("memnode {first}: {e}"))?;
        let mut transport = UdpTransport::for_remote(addr, RcConfig::default())
            .map_err(|e| format!("a transport: {e}"))?;
        let mut qps = Vec::new();
        for url in admin_urls {
            let c = connect_udp_qp_as(QpPath::Direct, url, &mut transport, token)
                .map_err(|e| format!("a queue pair to {url}: {e}"))?;
            qps.push(c.handle);
        }
        Ok(Replicator {
            transport,
            qps,
            next_wr: 0,
            slot,
            slots,
        })
    }

    /// Posts `wrs` (node, request) in one doorbell per node and waits for every
    /// completion; returns them in the order of `wrs`.
    fn round_trip(
        &mut self,
        wrs: Vec<(usize, WorkRequest)>,
    ) -> Result<Vec<CompletionValue>, String> {
        let first_id = self.next_wr + 1;
        let n = wrs.len();
        let mut per_node: Vec<Vec<(u64, WorkRequest)>> = vec![Vec::new(); self.qps.len()];
        for (node, wr) in wrs {
            self.next_wr += 1;
            per_node
                .get_mut(node)
                .ok_or("no queue pair for that node")?
                .push((self.next_wr, wr));
        }
        for (node, batch) in per_node.into_iter().enumerate() {
            if !batch.is_empty() {
                self.transport
                    .post(self.qps[node], batch)
                    .map_err(|e| format!("posting: {e}"))?;
            }
        }
        let mut results: Vec<Option<CompletionValue>> = vec![None; n];
        let mut got = 0;
        let mut out: Vec<(QpHandle, Completion)> = Vec::new();
        let deadline = Instant::now() + Duration::from_secs(10);
        while got < n {
            if Instant::now() >= deadline {
                return Err("no completion in time".into());
            }
            out.clear();
            self.transport.poll(Instant::now(), &mut out);
            if out.is_empty() {
                self.transport
                    .wait(Instant::now() + Duration::from_micros(200));
                continue;
            }
            for (_, c) in out.drain(..) {
                let i = c.wr_id.wrapping_sub(first_id) as usize;
                if i < n && results[i].is_none() {
                    results[i] = Some(c.result.map_err(|e| format!("a verb failed: {e}"))?);
                    got += 1;
                }
            }
        }
        Ok(results.into_iter().flatten().collect())
    }

    fn slot_addr(&self, ring: &RemoteRing, i: u64) -> RemoteAddr {
        ring.word(SLOTS_OFFSET + (i % u64::from(self.slots)) * u64::from(self.slot))
    }

    /// Moves `items` items from `producer` to every consumer, `ordered` or not, until
    /// done or `stop` is set.
    pub fn run(
        &mut self,
        producer: RemoteRing,
        consumers: &[RemoteRing],
        ordered: bool,
        items: u64,
        stop: &Arc<AtomicBool>,
    ) -> Result<Moved, String> {
        let mut moved = Moved::default();
        // Items read from the producer and not yet given to every consumer: (seq, bytes).
        let mut held: VecDeque<(u64, Vec<u8>)> = VecDeque::new();
        let mut read_from_producer = 0u64;
        let mut released = 0u64;
        let mut given = vec![0u64; consumers.len()];
        let slots = u64::from(self.slots);
        while released < items && !stop.load(Ordering::Relaxed) {
            // 1. The producer's head and the consumers' tails.
            let mut wrs = vec![(
                producer.node,
                WorkRequest::read(producer.word(HEAD_OFFSET), 8),
            )];
            for c in consumers {
                wrs.push((c.node, WorkRequest::read(c.word(TAIL_OFFSET), 8)));
            }
            let words: Vec<u64> = self
                .round_trip(wrs)?
                .into_iter()
                .map(|v| match v {
                    CompletionValue::Read(b) => b
                        .get(..8)
                        .and_then(|b| <[u8; 8]>::try_from(b).ok())
                        .map(u64::from_le_bytes)
                        .unwrap_or(0),
                    _ => 0,
                })
                .collect();
            moved.round_trips += 1;
            let head = words[0];
            let room: Vec<u64> = consumers
                .iter()
                .enumerate()
                .map(|(c, _)| slots.saturating_sub(given[c] - words[1 + c].min(given[c])))
                .collect();
            // 2. New items, while the thread holds fewer than a ring's worth.
            let want = head
                .saturating_sub(read_from_producer)
                .min(BATCH)
                .min(slots.saturating_sub(held.len() as u64));
            if want > 0 {
                let wrs = (0..want)
                    .map(|k| {
                        let at = self.slot_addr(&producer, read_from_producer + k);
                        (producer.node, WorkRequest::read(at, self.slot))
                    })
                    .collect();
                for (k, v) in self.round_trip(wrs)?.into_iter().enumerate() {
                    match v {
                        CompletionValue::Read(b) => {
                            held.push_back((read_from_producer + k as u64, b.to_vec()))
                        }
                        other => return Err(format!("a READ answered {other:?}")),
                    }
                }
                moved.round_trips += 1;
                read_from_producer += want;
                moved.items += want;
            }
            // 3. Give items to the consumers, then release what all have.
            let mut wrs = Vec::new();
            let lockstep = room.iter().copied().min().unwrap_or(0);
            for (c, ring) in consumers.iter().enumerate() {
                let upto = if ordered {
                    released + (held.len() as u64).min(lockstep)
                } else {
                    (given[c] + room[c]).min(read_from_producer)
                };
                if upto <= given[c] {
                    continue;
                }
                for (seq, bytes) in held.iter().filter(|(s, _)| *s >= given[c] && *s < upto) {
                    wrs.push((
                        ring.node,
                        WorkRequest::write(self.slot_addr(ring, *seq), bytes.clone()),
                    ));
                }
                given[c] = upto;
                wrs.push((
                    ring.node,
                    WorkRequest::write(ring.word(HEAD_OFFSET), upto.to_le_bytes().to_vec()),
                ));
            }
            let all = given.iter().copied().min().unwrap_or(released);
            if all > released {
                while held.front().is_some_and(|(s, _)| *s < all) {
                    held.pop_front();
                }
                released = all;
                wrs.push((
                    producer.node,
                    WorkRequest::write(producer.word(TAIL_OFFSET), released.to_le_bytes().to_vec()),
                ));
            }
            if !wrs.is_empty() {
                self.round_trip(wrs)?;
                moved.round_trips += 1;
            } else if want == 0 {
                std::thread::sleep(Duration::from_micros(20));
            }
        }
        Ok(moved)
    }
}
