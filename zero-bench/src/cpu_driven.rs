//! The CPU-driven copy: a client READs each item from the source memory node into
//! its own memory and WRITEs it to the target, keeping `window` READs in flight —
//! what a compute node does without zero-sided support. The same queue pairs fill
//! the source before a run and check the target after it (not timed).

use std::collections::VecDeque;
use std::time::{Duration, Instant};

use dmkv_api::memnode_admin;
use dmkv_api::qp::{QpPath, connect_udp_qp_as};
use rand::{RngCore, SeedableRng};
use verbs::rc::RcConfig;
use verbs::transport::udp::UdpTransport;
use verbs::transport::{QpHandle, Transport};
use verbs::wr::{Completion, CompletionValue, RemoteAddr, WorkRequest};

/// How long one verb may take before the run fails.
const VERB_TIMEOUT: Duration = Duration::from_secs(10);
/// Bytes per verb when filling and checking.
const BULK: u32 = 64 << 10;

/// Where a copy's bytes are on one memory node.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Place {
    /// The memory node's admin URL.
    pub admin_url: String,
    /// First byte.
    pub va: u64,
    /// Its region's key.
    pub rkey: u32,
}

impl Place {
    /// The start of memory node `admin_url`'s first region.
    pub fn region_start(admin_url: &str) -> Result<Place, String> {
        let info = memnode_admin::node_info_as(admin_url, None)
            .map_err(|e| format!("memnode {admin_url}: {e}"))?;
        let region = info
            .regions
            .first()
            .ok_or_else(|| format!("memnode {admin_url} has no region"))?;
        Ok(Place {
            admin_url: admin_url.to_owned(),
            va: region.base_va,
            rkey: region.rkey,
        })
    }
}

/// A client with one queue pair to each of two memory nodes.
pub struct Client {
    transport: UdpTransport,
    source: QpHandle,
    target: QpHandle,
    next_wr: u64,
}

impl std::fmt::Debug for Client {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Client").finish_non_exhaustive()
    }
}

/// Which of the client's queue pairs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Side {
    /// To the source memory node.
    Source,
    /// To the target memory node.
    Target,
}

impl Client {
    /// Connects to the memory nodes of `source` and `target`.
    pub fn connect(source: &Place, target: &Place) -> Result<Client, String> {
        let info = memnode_admin::node_info_as(&source.admin_url, None)
            .map_err(|e| format!("memnode {}: {e}", source.admin_url))?;
        let addr = memnode_admin::data_addr(&source.admin_url, &info)
            .map_err(|e| format!("memnode {}: {e}", source.admin_url))?;
        let mut transport = UdpTransport::for_remote(addr, RcConfig::default())
            .map_err(|e| format!("a transport: {e}"))?;
        let s = connect_udp_qp_as(QpPath::Direct, &source.admin_url, &mut transport, None)
            .map_err(|e| format!("a queue pair to {}: {e}", source.admin_url))?;
        let t = connect_udp_qp_as(QpPath::Direct, &target.admin_url, &mut transport, None)
            .map_err(|e| format!("a queue pair to {}: {e}", target.admin_url))?;
        Ok(Client {
            transport,
            source: s.handle,
            target: t.handle,
            next_wr: 0,
        })
    }

    fn qp(&self, side: Side) -> QpHandle {
        match side {
            Side::Source => self.source,
            Side::Target => self.target,
        }
    }

    fn post(&mut self, side: Side, wr: WorkRequest) -> Result<u64, String> {
        self.next_wr += 1;
        let id = self.next_wr;
        self.transport
            .post(self.qp(side), vec![(id, wr)])
            .map_err(|e| format!("posting: {e}"))?;
        Ok(id)
    }

    /// Completions, waiting up to `VERB_TIMEOUT` for at least one.
    fn completions(&mut self, out: &mut Vec<(QpHandle, Completion)>) -> Result<(), String> {
        let deadline = Instant::now() + VERB_TIMEOUT;
        loop {
            self.transport.poll(Instant::now(), out);
            if !out.is_empty() {
                return Ok(());
            }
            let now = Instant::now();
            if now >= deadline {
                return Err("no completion in time".into());
            }
            self.transport
                .wait((now + Duration::from_millis(1)).min(deadline));
        }
    }

    /// One verb, waited for.
    fn run(&mut self, side: Side, wr: WorkRequest) -> Result<CompletionValue, String> {
        let id = self.post(side, wr)?;
        let mut out = Vec::new();
        loop {
            out.clear();
            self.completions(&mut out)?;
            for (_, c) in out.drain(..) {
                if c.wr_id == id {
                    return c.result.map_err(|e| format!("verb failed: {e}"));
                }
            }
        }
    }

    /// WRITEs `bytes` at `at`, in pieces.
    pub fn put(&mut self, side: Side, at: &Place, bytes: &[u8]) -> Result<(), String> {
        for (i, piece) in bytes.chunks(BULK as usize).enumerate() {
            let va = at.va + i as u64 * u64::from(BULK);
            self.run(
                side,
                WorkRequest::write(RemoteAddr::new(at.rkey, va), piece.to_vec()),
            )?;
        }
        Ok(())
    }

    /// READs `len` bytes at `at`, in pieces.
    pub fn get(&mut self, side: Side, at: &Place, len: u64) -> Result<Vec<u8>, String> {
        let mut out = Vec::with_capacity(usize::try_from(len).unwrap_or(0));
        let mut off = 0u64;
        while off < len {
            let n = (len - off).min(u64::from(BULK)) as u32;
            match self.run(
                side,
                WorkRequest::read(RemoteAddr::new(at.rkey, at.va + off), n),
            )? {
                CompletionValue::Read(b) => out.extend_from_slice(&b),
                other => return Err(format!("a READ answered {other:?}")),
            }
            off += u64::from(n);
        }
        Ok(out)
    }

    /// Fills `len` bytes at the source with seeded random bytes and zeroes the target;
    /// returns the bytes.
    pub fn prepare(
        &mut self,
        source: &Place,
        target: &Place,
        len: u64,
        seed: u64,
    ) -> Result<Vec<u8>, String> {
        let mut data = vec![0u8; usize::try_from(len).map_err(|e| e.to_string())?];
        rand::rngs::StdRng::seed_from_u64(seed).fill_bytes(&mut data);
        self.put(Side::Source, source, &data)?;
        self.put(Side::Target, target, &vec![0u8; data.len()])?;
        Ok(data)
    }

    /// Whether the target holds `want`; the offset of the first differing byte if not.
    pub fn check(&mut self, target: &Place, want: &[u8]) -> Result<Option<usize>, String> {
        let got = self.get(Side::Target, target, want.len() as u64)?;
        Ok(got.iter().zip(want).position(|(a, b)| a != b))
    }

    /// Copies `len` bytes from `source` to `target` through this client, `item` bytes
    /// per READ and WRITE, at most `window` READs and `window` WRITEs in flight.
    pub fn copy(
        &mut self,
        source: &Place,
        target: &Place,
        len: u64,
        item: u32,
        window: usize,
    ) -> Result<(), String> {
        let item64 = u64::from(item.max(1));
        let window = window.max(1);
        let mut next = 0u64;
        // wr id → offset of the READs and WRITEs in flight.
        let mut reads: VecDeque<(u64, u64)> = VecDeque::new();
        let mut writes = 0usize;
        let mut written = 0u64;
        let mut out = Vec::new();
        while written < len {
            while reads.len() < window && writes < window && next < len {
                let n = (len - next).min(item64) as u32;
                let id = self.post(
                    Side::Source,
                    WorkRequest::read(RemoteAddr::new(source.rkey, source.va + next), n),
                )?;
                reads.push_back((id, next));
                next += u64::from(n);
            }
            out.clear();
            self.completions(&mut out)?;
            for (_, c) in out.drain(..) {
                let value = c.result.map_err(|e| format!("verb failed: {e}"))?;
                match value {
                    CompletionValue::Read(bytes) => {
                        let Some(i) = reads.iter().position(|(id, _)| *id == c.wr_id) else {
                            return Err(format!("an unknown READ completion {}", c.wr_id));
                        };
                        let Some((_, off)) = reads.remove(i) else {
                            return Err("a READ vanished".into());
                        };
                        let wr = WorkRequest::write(
                            RemoteAddr::new(target.rkey, target.va + off),
                            bytes,
                        );
                        self.post(Side::Target, wr)?;
                        writes += 1;
                    }
                    CompletionValue::Write => {
                        writes = writes.saturating_sub(1);
                        written += item64.min(len - written);
                    }
                    other => return Err(format!("unexpected completion {other:?}")),
                }
            }
        }
        Ok(())
    }
}
