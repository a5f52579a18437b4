//! Write-based RPC request rings: a small dedicated region of per-queue-pair rings
//! that clients WRITE requests into and the workers poll (Storm's second request
//! transport, beside SEND/RECV).
//!
//! A node with RPC workers and `--rpc-rings N` holds N rings of [`RING_SLOTS`] slots of
//! [`RPC_RING_SLOT_BYTES`] each, in a region of their own placed at virtual addresses
//! no registered region uses ([`RequestRings::span`]). The region is not in the node's
//! memory table, so no verb and no RPC reaches it through a region's key; only a
//! [`RingGate`] does, and only for the queue pair that owns the ring: a queue pair
//! created with `?rpc_ring=true` is given a free ring ([`RequestRings::assign`]), its
//! responder executes one-sided verbs through a gate that lets WRITEs (and nothing
//! else) into that ring, and a grant-scoped queue pair's access scope gets the ring as
//! one more write-only window ([`RequestRings::window`]) whatever its grants say.
//!
//! Each slot holds one request framed as [`dmkv_api::rpc`] between a head and a tail
//! carrying its sequence number ([`dmkv_api::rpc_ring`]). A worker takes the ring's
//! next request only once the tail of the expected number has landed (a WRITE lands
//! its lines in ascending address order, so everything before it has landed too),
//! copies it out, executes it, clears the slot and only then replies: the client
//! reuses a slot only after the reply to its previous request, and a duplicated or
//! late WRITE of an executed request carries a number the ring no longer expects.

use std::sync::atomic::{AtomicU32, AtomicUsize, Ordering};
use std::sync::{Mutex, MutexGuard, TryLockError};

use dmkv_api::memnode::{RegionDescriptor, RpcRingInfo};
use dmkv_api::rpc::{RPC_HEADER_LEN, RPC_MAX_REQUEST};
use dmkv_api::rpc_ring::{
    RING_REQUEST_OFFSET, RING_SLOT_OVERHEAD, RPC_RING_SLOT_BYTES, RingCursor, SlotState,
};
use verbs::mem::{AccessError, AccessFlags, MemoryWindow, Region, RemoteMemory};

/// Slots per ring: the requests one queue pair may have outstanding by WRITE.
pub const RING_SLOTS: u32 = 8;

/// Bytes of one ring.
pub const RING_BYTES: u64 = RING_SLOTS as u64 * RPC_RING_SLOT_BYTES as u64;

/// The rings start this far (rounded up to it) past the end of the node's region.
const RING_SPAN_GAP: u64 = 1 << 30;

/// Why the rings could not be set up.
#[derive(Debug, thiserror::Error)]
pub enum RingsError {
    /// No virtual addresses are left above the region for them.
    #[error("no virtual addresses are left above the region for {0} request rings")]
    NoAddresses(usize),
    /// Their memory could not be allocated.
    #[error("allocating {bytes} bytes for the request rings: {source}")]
    Memory {
        /// How much was asked for.
        bytes: u64,
        /// Why it failed.
        source: verbs::mem::RegionError,
    },
}

/// One queue pair's ring: which, and where.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RingGrant {
    /// Its index among the node's rings.
    pub index: u32,
    /// Virtual address of its first slot.
    pub va: u64,
}

impl RingGrant {
    /// One past its last virtual address.
    pub fn end(&self) -> u64 {
        self.va + RING_BYTES
    }

    fn contains(&self, va: u64, end: u64) -> bool {
        va >= self.va && end <= self.end()
    }
}

struct Ring {
    /// The owning queue pair's number; 0: free.
    owner: AtomicU32,
    cursor: Mutex<RingCursor>,
}

/// The node's request rings.
pub struct RequestRings {
    memory: Region,
    base_va: u64,
    region_rkey: u32,
    rings: Vec<Ring>,
    owned: AtomicUsize,
}

impl std::fmt::Debug for RequestRings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RequestRings")
            .field("base_va", &format_args!("{:#x}", self.base_va))
            .field("rings", &self.rings.len())
            .field("owned", &self.owned())
            .finish()
    }
}

impl RequestRings {
    /// `count` rings (at least one) above `region`, the node's region, whose key
    /// WRITEs to a ring carry (a grant-scoped queue pair's scope maps its own key to it).
    pub fn new(count: usize, region: &RegionDescriptor) -> Result<RequestRings, RingsError> {
        let count = count.max(1);
        let bytes = RING_BYTES
            .checked_mul(count as u64)
            .ok_or(RingsError::NoAddresses(count))?;
        let base_va = region
            .base_va
            .checked_add(region.len)
            .and_then(|end| end.checked_next_multiple_of(RING_SPAN_GAP))
            .and_then(|end| end.checked_add(RING_SPAN_GAP))
            .filter(|base| base.checked_add(bytes).is_some())
            .ok_or(RingsError::NoAddresses(count))?;
        let len = usize::try_from(bytes).map_err(|_| RingsError::NoAddresses(count))?;
        let memory =
            Region::anonymous(len).map_err(|source| RingsError::Memory { bytes, source })?;
        let mut rings = Vec::with_capacity(count);
        for _ in 0..count {
            rings.push(Ring {
                owner: AtomicU32::new(0),
                cursor: Mutex::new(fresh_cursor()),
            });
        }
        Ok(RequestRings {
            memory,
            base_va,
            region_rkey: region.rkey,
            rings,
            owned: AtomicUsize::new(0),
        })
    }

    /// Rings held.
    pub fn count(&self) -> usize {
        self.rings.len()
    }

    /// Rings owned by a queue pair now (the workers poll only while some are).
    pub fn owned(&self) -> usize {
        self.owned.load(Ordering::Relaxed)
    }

    /// `[first, end)` of the rings' virtual addresses.
    pub fn span(&self) -> (u64, u64) {
        (
            self.base_va,
            self.base_va + RING_BYTES * self.rings.len() as u64,
        )
    }

    /// The key WRITEs to a ring carry on a queue pair without a scope of its own.
    pub fn region_rkey(&self) -> u32 {
        self.region_rkey
    }

    /// The queue pair owning ring `index` (0: none).
    pub fn owner(&self, index: u32) -> u32 {
        self.rings
            .get(index as usize)
            .map_or(0, |r| r.owner.load(Ordering::Acquire))
    }

    /// Gives queue pair `qpn` (non-zero) a free ring, emptied; `None` when all are taken.
    pub fn assign(&self, qpn: u32) -> Option<RingGrant> {
        if qpn == 0 {
            return None;
        }
        for (i, ring) in self.rings.iter().enumerate() {
            if ring.owner.load(Ordering::Relaxed) != 0 {
                continue;
            }
            // A worker still finishing with the previous owner holds the cursor: skip.
            let Some(mut cursor) = try_lock(&ring.cursor) else {
                continue;
            };
            if ring
                .owner
                .compare_exchange(0, qpn, Ordering::AcqRel, Ordering::Relaxed)
                .is_err()
            {
                continue;
            }
            let grant = RingGrant {
                index: i as u32,
                va: self.base_va + i as u64 * RING_BYTES,
            };
            // The previous owner's requests must not be read as the new one's.
            let zeros = vec![0u8; RING_BYTES as usize];
            let _ = self.memory.write(grant.va - self.base_va, &zeros);
            *cursor = fresh_cursor();
            self.owned.fetch_add(1, Ordering::Relaxed);
            return Some(grant);
        }
        None
    }

    /// Frees `grant`'s ring of queue pair `qpn` (when the queue pair is destroyed).
    pub fn release(&self, grant: &RingGrant, qpn: u32) {
        if let Some(ring) = self.rings.get(grant.index as usize)
            && ring
                .owner
                .compare_exchange(qpn, 0, Ordering::AcqRel, Ordering::Relaxed)
                .is_ok()
        {
            self.owned.fetch_sub(1, Ordering::Relaxed);
        }
    }

    /// What the client is told of `grant`, whose WRITEs carry `rkey`.
    pub fn info(&self, grant: &RingGrant, rkey: u32) -> RpcRingInfo {
        RpcRingInfo {
            va: grant.va,
            rkey,
            slots: RING_SLOTS,
            slot_bytes: RPC_RING_SLOT_BYTES as u32,
        }
    }

    /// The window a scoped queue pair's access scope gets for its ring: write only,
    /// never expiring.
    pub fn window(grant: &RingGrant) -> MemoryWindow {
        MemoryWindow {
            start: grant.va,
            end: grant.end(),
            rights: AccessFlags::REMOTE_WRITE,
            expires: None,
        }
    }

    /// `inner` as the owner of `own` reaches memory: its ring writable, the other
    /// rings refused, everything else `inner`'s.
    pub fn gate<'a>(&'a self, own: Option<RingGrant>, inner: &'a dyn RemoteMemory) -> RingGate<'a> {
        RingGate {
            rings: self,
            own,
            inner,
        }
    }

    /// Ring `index`'s turn, if it has an owner and no other worker holds it.
    pub fn try_turn(&self, index: u32) -> Option<RingTurn<'_>> {
        let ring = self.rings.get(index as usize)?;
        if ring.owner.load(Ordering::Relaxed) == 0 {
            return None;
        }
        let cursor = try_lock(&ring.cursor)?;
        // Read under the cursor lock: assign changes the owner only while holding it.
        let owner = ring.owner.load(Ordering::Acquire);
        (owner != 0).then_some(RingTurn {
            rings: self,
            index,
            owner,
            cursor,
            taken: None,
        })
    }

    fn slot_offset(&self, index: u32, slot: u32) -> u64 {
        u64::from(index) * RING_BYTES + u64::from(slot) * RPC_RING_SLOT_BYTES as u64
    }
}

fn fresh_cursor() -> RingCursor {
    // RING_SLOTS is non-zero.
    RingCursor::new(RING_SLOTS).unwrap_or_else(|_| unreachable!("a ring has slots"))
}

fn try_lock<T>(m: &Mutex<T>) -> Option<MutexGuard<'_, T>> {
    match m.try_lock() {
        Ok(g) => Some(g),
        Err(TryLockError::Poisoned(p)) => Some(p.into_inner()),
        Err(TryLockError::WouldBlock) => None,
    }
}

/// One worker's exclusive turn at a ring: it takes the ring's requests in order.
pub struct RingTurn<'a> {
    rings: &'a RequestRings,
    index: u32,
    owner: u32,
    cursor: MutexGuard<'a, RingCursor>,
    /// The length of the request taken and not yet done.
    taken: Option<usize>,
}

impl RingTurn<'_> {
    /// The queue pair that owns the ring.
    pub fn owner(&self) -> u32 {
        self.owner
    }

    /// The ring's index.
    pub fn index(&self) -> u32 {
        self.index
    }

    /// The sequence number of the request expected next.
    pub fn next_seq(&self) -> u64 {
        self.cursor.next_seq()
    }

    /// Copies the next request into `buf` if it has landed whole; false if not (yet).
    /// The request stays in its slot until [`RingTurn::done`].
    pub fn next_request(&mut self, buf: &mut Vec<u8>) -> bool {
        let offset = self.rings.slot_offset(self.index, self.cursor.next_slot());
        // The head first (one line): most polls stop here.
        let mut head = [0u8; RING_REQUEST_OFFSET];
        if self.rings.memory.read(offset, &mut head).is_err()
            || head[..8] != self.cursor.next_seq().to_be_bytes()
        {
            return false;
        }
        let len = u32::from_be_bytes([head[8], head[9], head[10], head[11]]) as usize;
        if !(RPC_HEADER_LEN..=RPC_MAX_REQUEST).contains(&len) {
            return false;
        }
        buf.clear();
        buf.resize(len + RING_SLOT_OVERHEAD, 0);
        if self.rings.memory.read(offset, buf).is_err() {
            return false;
        }
        match self.cursor.inspect(buf) {
            SlotState::Ready { len } => {
                buf.truncate(RING_REQUEST_OFFSET + len);
                buf.drain(..RING_REQUEST_OFFSET);
                self.taken = Some(len);
                true
            }
            SlotState::Pending => false,
        }
    }

    /// Marks the request taken by [`RingTurn::next_request`] executed: clears its slot
    /// and expects the next one.
    pub fn done(&mut self) {
        let Some(len) = self.taken.take() else {
            return;
        };
        let offset = self.rings.slot_offset(self.index, self.cursor.next_slot());
        let zeros = [0u8; RPC_RING_SLOT_BYTES];
        let used = (len + RING_SLOT_OVERHEAD).min(zeros.len());
        let _ = self.rings.memory.write(offset, &zeros[..used]);
        self.cursor.clear(&mut [], len);
    }
}

/// Node memory as one queue pair's one-sided verbs reach it when the node has
/// request rings: WRITEs into the queue pair's own ring go to the ring, any other
/// access to the rings is refused, and everything else is `inner`'s.
pub struct RingGate<'a> {
    rings: &'a RequestRings,
    own: Option<RingGrant>,
    inner: &'a dyn RemoteMemory,
}

impl RingGate<'_> {
    /// `Ok(None)`: not the rings' (goes to `inner`); `Ok(Some(offset))`: into the own
    /// ring, at this offset of the rings' memory.
    fn route(
        &self,
        rkey: u32,
        va: u64,
        len: u64,
        needed: AccessFlags,
    ) -> Result<Option<u64>, AccessError> {
        if rkey != self.rings.region_rkey {
            return Ok(None);
        }
        let (first, last) = self.rings.span();
        let Some(end) = va.checked_add(len.max(1)) else {
            return Ok(None);
        };
        if end <= first || va >= last {
            return Ok(None);
        }
        match self.own {
            Some(own) if own.contains(va, end) => {
                if AccessFlags::REMOTE_WRITE.contains(needed) {
                    Ok(Some(va - self.rings.base_va))
                } else {
                    Err(AccessError::AccessDenied { needed })
                }
            }
            _ => Err(AccessError::OutOfBounds { va, len }),
        }
    }
}

impl RemoteMemory for RingGate<'_> {
    fn read(&self, rkey: u32, va: u64, buf: &mut [u8]) -> Result<(), AccessError> {
        match self.route(rkey, va, buf.len() as u64, AccessFlags::REMOTE_READ)? {
            None => self.inner.read(rkey, va, buf),
            // Refused by route: a ring is write-only.
            Some(_) => Err(AccessError::AccessDenied {
                needed: AccessFlags::REMOTE_READ,
            }),
        }
    }

    fn write(&self, rkey: u32, va: u64, data: &[u8]) -> Result<(), AccessError> {
        match self.route(rkey, va, data.len() as u64, AccessFlags::REMOTE_WRITE)? {
            None => self.inner.write(rkey, va, data),
            Some(offset) => self.rings.memory.write(offset, data),
        }
    }

    fn compare_swap(
        &self,
        rkey: u32,
        va: u64,
        compare: u64,
        swap: u64,
    ) -> Result<u64, AccessError> {
        match self.route(rkey, va, 8, AccessFlags::REMOTE_ATOMIC)? {
            None => self.inner.compare_swap(rkey, va, compare, swap),
            Some(_) => Err(AccessError::AccessDenied {
                needed: AccessFlags::REMOTE_ATOMIC,
            }),
        }
    }

    fn fetch_add(&self, rkey: u32, va: u64, add: u64) -> Result<u64, AccessError> {
        match self.route(rkey, va, 8, AccessFlags::REMOTE_ATOMIC)? {
            None => self.inner.fetch_add(rkey, va, add),
            Some(_) => Err(AccessError::AccessDenied {
                needed: AccessFlags::REMOTE_ATOMIC,
            }),
        }
    }

    fn check(&self, rkey: u32, va: u64, len: u64, needed: AccessFlags) -> Result<(), AccessError> {
        match self.route(rkey, va, len, needed)? {
            None => self.inner.check(rkey, va, len, needed),
            Some(_) => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use dmkv_api::rpc::{RPC_VERSION, Request};
    use dmkv_api::rpc_ring::encode_slot;
    use std::sync::Arc;
    use verbs::mem::MemoryTable;

    const BASE: u64 = 0x1000_0000;
    const LEN: usize = 1 << 16;

    fn node() -> (MemoryTable, RegionDescriptor) {
        let table = MemoryTable::new();
        let region = Region::anonymous(LEN).expect("region");
        let info = table
            .register(Arc::new(region), BASE, AccessFlags::ALL)
            .expect("register");
        let desc = RegionDescriptor {
            rkey: info.rkey,
            base_va: BASE,
            len: LEN as u64,
            flags: String::new(),
            read_order: String::new(),
            backing: String::new(),
            path: None,
            instance: 0,
        };
        (table, desc)
    }

    fn image(seq: u64, id: u64) -> Vec<u8> {
        let mut out = Vec::new();
        encode_slot(seq, &Request::Ping.encode(id), &mut out).expect("encode");
        out
    }

    fn slot_va(grant: &RingGrant, seq: u64) -> u64 {
        grant.va + ((seq - 1) % u64::from(RING_SLOTS)) * RPC_RING_SLOT_BYTES as u64
    }

    /// Takes every request that is ready in `grant`'s ring; their request ids.
    fn take_all(rings: &RequestRings, grant: &RingGrant) -> Vec<u64> {
        let mut turn = rings.try_turn(grant.index).expect("the ring's turn");
        let mut buf = Vec::new();
        let mut ids = Vec::new();
        while turn.next_request(&mut buf) {
            assert_eq!(buf[0], RPC_VERSION);
            ids.push(dmkv_api::rpc::request_id(&buf));
            turn.done();
        }
        ids
    }

    #[test]
    fn rings_sit_above_the_region_and_are_handed_out_once() {
        let (_, desc) = node();
        let rings = RequestRings::new(2, &desc).expect("rings");
        let (first, last) = rings.span();
        assert!(first >= BASE + LEN as u64);
        assert_eq!(last - first, 2 * RING_BYTES);
        let a = rings.assign(7).expect("a ring");
        let b = rings.assign(8).expect("another ring");
        assert_ne!(a.index, b.index);
        assert_eq!(rings.assign(9), None, "both are taken");
        assert_eq!(rings.owned(), 2);
        assert_eq!(rings.owner(a.index), 7);
        // Only the owner frees it.
        rings.release(&a, 8);
        assert_eq!(rings.owner(a.index), 7);
        rings.release(&a, 7);
        assert_eq!(rings.owned(), 1);
        assert_eq!(rings.assign(0), None, "QPN 0 names no queue pair");
        let info = rings.info(&b, 0x55);
        assert_eq!(
            (info.va, info.rkey, info.slots, info.slot_bytes as usize),
            (b.va, 0x55, RING_SLOTS, RPC_RING_SLOT_BYTES)
        );
    }

    #[test]
    fn half_written_requests_are_not_taken() {
        let (table, desc) = node();
        let rings = RequestRings::new(1, &desc).expect("rings");
        let own = rings.assign(3).expect("ring");
        let gate = rings.gate(Some(own), &table);
        let img = image(1, 0xAA);
        // Every prefix of the WRITE (lines land in ascending order) is not a request.
        for landed in 0..img.len() {
            gate.write(desc.rkey, own.va, &img[..landed])
                .expect("write");
            assert!(take_all(&rings, &own).is_empty(), "{landed} bytes landed");
        }
        gate.write(desc.rkey, own.va, &img).expect("write");
        assert_eq!(take_all(&rings, &own), vec![0xAA]);
    }

    #[test]
    fn an_executed_request_written_again_is_not_executed_again() {
        let (table, desc) = node();
        let rings = RequestRings::new(1, &desc).expect("rings");
        let own = rings.assign(3).expect("ring");
        let gate = rings.gate(Some(own), &table);
        let first = image(1, 1);
        gate.write(desc.rkey, own.va, &first).expect("write");
        assert_eq!(take_all(&rings, &own), vec![1]);
        // The slot was cleared, and the same WRITE again (a duplicate) is ignored,
        // now and on every later lap until request 1 + slots really comes.
        let mut head = [0u8; 8];
        rings.memory.read(0, &mut head).expect("read");
        assert_eq!(head, [0; 8]);
        gate.write(desc.rkey, own.va, &first).expect("write");
        assert!(take_all(&rings, &own).is_empty());
        for seq in 2..=u64::from(RING_SLOTS) {
            gate.write(desc.rkey, slot_va(&own, seq), &image(seq, seq))
                .expect("write");
        }
        assert_eq!(
            take_all(&rings, &own),
            (2..=u64::from(RING_SLOTS)).collect::<Vec<_>>()
        );
        // Slot 0 still holds the duplicate of request 1: not request 1 + slots.
        assert!(take_all(&rings, &own).is_empty());
        let next = u64::from(RING_SLOTS) + 1;
        gate.write(desc.rkey, own.va, &image(next, 99))
            .expect("write");
        assert_eq!(take_all(&rings, &own), vec![99]);
    }

    #[test]
    fn requests_wrap_around_in_order_and_wait_for_their_turn() {
        let (table, desc) = node();
        let rings = RequestRings::new(1, &desc).expect("rings");
        let own = rings.assign(3).expect("ring");
        let gate = rings.gate(Some(own), &table);
        let total = 3 * u64::from(RING_SLOTS) + 2;
        let mut seen = Vec::new();
        let mut seq = 1;
        while seq <= total {
            // Write the next two requests, the later one first: nothing runs out of
            // order, and both run once the earlier one landed.
            let later = seq + 1;
            if later <= total {
                gate.write(desc.rkey, slot_va(&own, later), &image(later, later))
                    .expect("write");
                assert!(
                    take_all(&rings, &own).is_empty(),
                    "{later} ran before {seq}"
                );
            }
            gate.write(desc.rkey, slot_va(&own, seq), &image(seq, seq))
                .expect("write");
            seen.extend(take_all(&rings, &own));
            seq += 2;
        }
        assert_eq!(seen, (1..=total).collect::<Vec<_>>());
    }

    #[test]
    fn a_ring_is_written_only_by_its_own_queue_pair_and_only_written() {
        let (table, desc) = node();
        let rings = RequestRings::new(2, &desc).expect("rings");
        let a = rings.assign(10).expect("ring");
        let b = rings.assign(11).expect("ring");
        let img = image(1, 5);
        // Queue pair 11 (and one without a ring) cannot write queue pair 10's ring.
        for gate in [rings.gate(Some(b), &table), rings.gate(None, &table)] {
            assert!(matches!(
                gate.write(desc.rkey, a.va, &img),
                Err(AccessError::OutOfBounds { .. })
            ));
            assert!(
                gate.check(desc.rkey, a.va, 64, AccessFlags::REMOTE_WRITE)
                    .is_err()
            );
        }
        // A WRITE straddling the end of the own ring into the next one is refused too.
        let gate_a = rings.gate(Some(a), &table);
        assert!(gate_a.write(desc.rkey, a.end() - 8, &[1; 16]).is_err());
        // The owner may not read or use atomics on it.
        let mut buf = [0u8; 8];
        assert!(matches!(
            gate_a.read(desc.rkey, a.va, &mut buf),
            Err(AccessError::AccessDenied { .. })
        ));
        assert!(gate_a.compare_swap(desc.rkey, a.va, 0, 1).is_err());
        assert!(gate_a.fetch_add(desc.rkey, a.va, 1).is_err());
        assert!(take_all(&rings, &a).is_empty());
        // The node's memory is reached as before, through the gate.
        gate_a
            .write(desc.rkey, BASE + 64, b"data")
            .expect("region write");
        let mut got = [0u8; 4];
        gate_a
            .read(desc.rkey, BASE + 64, &mut got)
            .expect("region read");
        assert_eq!(&got, b"data");
        // Without the gate (the node's memory table) the rings do not exist.
        assert!(table.write(desc.rkey, a.va, &img).is_err());
        gate_a.write(desc.rkey, a.va, &img).expect("own ring");
        assert_eq!(take_all(&rings, &a), vec![5]);
    }

    #[test]
    fn a_reassigned_ring_starts_empty() {
        let (table, desc) = node();
        let rings = RequestRings::new(1, &desc).expect("rings");
        let first = rings.assign(1).expect("ring");
        rings
            .gate(Some(first), &table)
            .write(desc.rkey, first.va, &image(1, 1))
            .expect("write");
        rings.release(&first, 1);
        assert!(
            rings.try_turn(first.index).is_none(),
            "a free ring has no turn"
        );
        let second = rings.assign(2).expect("the ring again");
        assert_eq!(second.index, first.index);
        // The previous owner's request 1 is gone; the new owner's request 1 runs.
        assert!(take_all(&rings, &second).is_empty());
        rings
            .gate(Some(second), &table)
            .write(desc.rkey, second.va, &image(1, 2))
            .expect("write");
        assert_eq!(take_all(&rings, &second), vec![2]);
    }
}
