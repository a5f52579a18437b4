//! `SteerCache`, the state both Clover steering functions share: the committed tail of
//! every tracked key (address, header, version, commit time) and the write cache (node
//! address → key slot and version). `WriteSteer` fills it (tails on successful link
//! CASes, nodes on node WRITEs) and owns it in the pipeline; `ReadSteer` reads it.

use crate::model::{PacketId, PairRegister, Register, RegisterAccess, join, split};
use crate::spec::{
    REG_STEER_ADDR_KEY, REG_STEER_ADDR_TAG, REG_STEER_ADDR_VER, REG_STEER_TAIL_HDR,
    REG_STEER_TAIL_TS, REG_STEER_TAIL_VA, REG_STEER_TAIL_VER, STEER_ADDRS, STEER_KEYS,
};

/// Whether `version` comes after `than` (32-bit wrapping).
pub fn version_after(version: u32, than: u32) -> bool {
    (version.wrapping_sub(than) as i32) > 0
}

/// A tracked key's committed tail as the cache holds it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Tail {
    /// Node address (0: unknown).
    pub va: u64,
    /// Header word.
    pub hdr: u64,
    /// Version.
    pub ver: u32,
}

/// `SteerCache`: the committed tail of each tracked key (address, header, version,
/// commit time). Soft state: zero after a restart, refilled by the next commit.
#[derive(Debug, Clone)]
pub struct SteerCache {
    va: PairRegister<STEER_KEYS>,
    hdr: PairRegister<STEER_KEYS>,
    ver: Register<STEER_KEYS>,
    ts: Register<STEER_KEYS>,
    addr_tag: Register<STEER_ADDRS>,
    addr_key: Register<STEER_ADDRS>,
    addr_ver: Register<STEER_ADDRS>,
}

/// The write-cache tag of a node address on the memnode whose soft-RoCE address is
/// `memnode` (memnodes may use the same addresses, so the tag mixes the memnode in).
pub fn addr_tag(va: u64, memnode: std::net::SocketAddrV4) -> u32 {
    let m = u32::from(*memnode.ip()) ^ (u32::from(memnode.port()) << 16);
    ((va >> 6) as u32) ^ m.rotate_left(7)
}

/// The hash cell of a write-cache tag (multiplicative hash).
pub fn addr_cell(tag: u32) -> u32 {
    (tag.wrapping_mul(0x9E37_79B1) >> 16) & (STEER_ADDRS as u32 - 1)
}

impl Default for SteerCache {
    fn default() -> Self {
        SteerCache {
            va: PairRegister::new(&REG_STEER_TAIL_VA),
            hdr: PairRegister::new(&REG_STEER_TAIL_HDR),
            ver: Register::new(&REG_STEER_TAIL_VER),
            ts: Register::new(&REG_STEER_TAIL_TS),
            addr_tag: Register::new(&REG_STEER_ADDR_TAG),
            addr_key: Register::new(&REG_STEER_ADDR_KEY),
            addr_ver: Register::new(&REG_STEER_ADDR_VER),
        }
    }
}

impl SteerCache {
    /// Read the tail address of `slot` (one access of `steer_tail_va`).
    pub fn read_va(&mut self, id: PacketId, slot: u32) -> u64 {
        self.va
            .rmw(id, slot, |lo, hi| (lo, hi, join(lo, hi)))
            .unwrap_or(0)
    }

    /// Read the tail header of `slot`.
    pub fn read_hdr(&mut self, id: PacketId, slot: u32) -> u64 {
        self.hdr
            .rmw(id, slot, |lo, hi| (lo, hi, join(lo, hi)))
            .unwrap_or(0)
    }

    /// Read the tail version of `slot`.
    pub fn read_ver(&mut self, id: PacketId, slot: u32) -> u32 {
        self.ver.read(id, slot).unwrap_or(0)
    }

    /// Read the commit time of `slot`.
    pub fn read_ts(&mut self, id: PacketId, slot: u32) -> u32 {
        self.ts.read(id, slot).unwrap_or(0)
    }

    /// Commit `tail` for `slot` at `now_us` unless the cache holds a later version.
    pub fn commit(&mut self, id: PacketId, slot: u32, tail: Tail, now_us: u32) -> bool {
        let advance = self
            .ver
            .rmw(id, slot, |v| {
                if v == 0 || version_after(tail.ver, v) {
                    (tail.ver, true)
                } else {
                    (v, false)
                }
            })
            .unwrap_or(false);
        if advance {
            let (lo, hi) = split(tail.va);
            let _ = self.va.rmw(id, slot, |_, _| (lo, hi, ()));
            let (lo, hi) = split(tail.hdr);
            let _ = self.hdr.rmw(id, slot, |_, _| (lo, hi, ()));
            let _ = self.ts.write(id, slot, now_us);
        }
        advance
    }

    /// Record that a node WRITE of key `slot` (`None`: an untracked key) put a node of
    /// version `ver` at write-cache tag `tag` (one access of each write-cache register).
    pub fn record_node(&mut self, id: PacketId, tag: u32, slot: Option<u32>, ver: u32) {
        let cell = addr_cell(tag);
        let _ = self.addr_tag.write(id, cell, tag);
        let _ = self.addr_key.write(id, cell, slot.map_or(0, |s| s + 1));
        let _ = self.addr_ver.write(id, cell, ver);
    }

    /// The key slot the write cache holds for the node with tag `tag`.
    pub fn slot_at(&mut self, id: PacketId, tag: u32) -> Option<u32> {
        let cell = addr_cell(tag);
        if self.addr_tag.read(id, cell)? != tag {
            return None;
        }
        let key = self.addr_key.read(id, cell)?;
        key.checked_sub(1)
    }

    /// The version the write cache holds for the node with tag `tag` (after
    /// [`SteerCache::slot_at`] found it).
    pub fn version_at(&mut self, id: PacketId, tag: u32) -> Option<u32> {
        self.addr_ver.read(id, addr_cell(tag))
    }

    /// The write cache's key registers and the tail registers, in pipeline order
    /// (before the pending node's), and `steer_addr_ver` (after them).
    pub(crate) fn registers(&self) -> (Vec<&dyn RegisterAccess>, &dyn RegisterAccess) {
        (
            vec![
                &self.addr_tag,
                &self.addr_key,
                &self.ver,
                &self.va,
                &self.hdr,
                &self.ts,
            ],
            &self.addr_ver,
        )
    }

    /// The same, mutable.
    pub(crate) fn registers_mut(
        &mut self,
    ) -> (Vec<&mut dyn RegisterAccess>, &mut dyn RegisterAccess) {
        (
            vec![
                &mut self.addr_tag,
                &mut self.addr_key,
                &mut self.ver,
                &mut self.va,
                &mut self.hdr,
                &mut self.ts,
            ],
            &mut self.addr_ver,
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_compare_with_wrapping() {
        assert!(version_after(5, 4));
        assert!(!version_after(4, 4));
        assert!(version_after(0, u32::MAX));
    }
}
