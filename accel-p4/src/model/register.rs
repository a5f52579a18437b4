//! Register arrays as a switch has them: a fixed number of cells of at most 32 bits,
//! indices masked to the array size, and at most one read-modify-write per register per
//! packet (a packet passes each stage once and the stage's ALU runs one action).
//!
//! The one-access rule is checked at run time: a second access by the same packet panics
//! in debug builds and tests, and is counted (and refused) in release builds.

use crate::spec::{RegisterKind, RegisterSpec};

/// Identifies the packet currently in the pipeline (increments per packet).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct PacketId(pub u64);

/// What the control plane and the admin API can do with any register.
pub trait RegisterAccess {
    /// The register's name.
    fn name(&self) -> &'static str;
    /// Its spec.
    fn spec(&self) -> &'static RegisterSpec;
    /// Control-plane read of cell `index` (masked). Pairs read as `hi << 32 | lo`.
    fn cp_read(&self, index: usize) -> u64;
    /// Control-plane write of cell `index` (masked; value masked to the width).
    fn cp_write(&mut self, index: usize, value: u64);
    /// Every cell, in index order.
    fn dump(&self) -> Vec<u64>;
    /// Set every cell to zero.
    fn reset(&mut self);
    /// Accesses refused because the packet had already used this register.
    fn violations(&self) -> u64;
}

fn width_mask(width: u32) -> u32 {
    if width >= 32 {
        u32::MAX
    } else {
        (1u32 << width) - 1
    }
}

#[derive(Debug, Clone)]
struct Guard {
    last: Option<PacketId>,
    violations: u64,
}

impl Guard {
    fn enter(&mut self, name: &str, pkt: PacketId) -> bool {
        if self.last == Some(pkt) {
            self.violations += 1;
            if cfg!(debug_assertions) {
                panic!("register {name}: second access by packet {}", pkt.0);
            }
            return false;
        }
        self.last = Some(pkt);
        true
    }
}

/// The 64-bit value held as a [`PairRegister`] cell's `lo` and `hi` halves.
pub fn join(lo: u32, hi: u32) -> u64 {
    (u64::from(hi) << 32) | u64::from(lo)
}

/// A 64-bit value split into the `lo` and `hi` halves of a [`PairRegister`] cell.
pub fn split(v: u64) -> (u32, u32) {
    (v as u32, (v >> 32) as u32)
}

/// A register array of `N` cells (`N` a power of two) of `spec.width` bits.
#[derive(Debug, Clone)]
pub struct Register<const N: usize> {
    spec: &'static RegisterSpec,
    mask: u32,
    cells: Box<[u32]>,
    guard: Guard,
}

impl<const N: usize> Register<N> {
    const INDEX_MASK: usize = {
        assert!(N.is_power_of_two(), "register sizes are powers of two");
        N - 1
    };

    /// A zeroed register described by `spec` (whose size must be `N`).
    pub fn new(spec: &'static RegisterSpec) -> Register<N> {
        assert_eq!(spec.size, N, "register {} size", spec.name);
        assert_eq!(spec.kind, RegisterKind::Single, "register {}", spec.name);
        assert!(spec.width <= 32 && spec.width > 0);
        Register {
            spec,
            mask: width_mask(spec.width),
            cells: vec![0u32; N].into_boxed_slice(),
            guard: Guard {
                last: None,
                violations: 0,
            },
        }
    }

    /// The one action of this register for packet `pkt`: `f(old) -> (new, result)`.
    /// The index is masked; the new value is masked to the cell width. Returns `None`
    /// (after panicking in debug builds) if `pkt` already used this register.
    pub fn rmw<R>(
        &mut self,
        pkt: PacketId,
        index: u32,
        f: impl FnOnce(u32) -> (u32, R),
    ) -> Option<R> {
        if !self.guard.enter(self.spec.name, pkt) {
            return None;
        }
        let i = index as usize & Self::INDEX_MASK;
        let (new, out) = f(self.cells[i]);
        self.cells[i] = new & self.mask;
        Some(out)
    }

    /// A read-only action.
    pub fn read(&mut self, pkt: PacketId, index: u32) -> Option<u32> {
        self.rmw(pkt, index, |v| (v, v))
    }

    /// A write-only action.
    pub fn write(&mut self, pkt: PacketId, index: u32, value: u32) -> Option<()> {
        self.rmw(pkt, index, |_| (value, ()))
    }
}

impl<const N: usize> RegisterAccess for Register<N> {
    fn name(&self) -> &'static str {
        self.spec.name
    }
    fn spec(&self) -> &'static RegisterSpec {
        self.spec
    }
    fn cp_read(&self, index: usize) -> u64 {
        u64::from(self.cells[index & Self::INDEX_MASK])
    }
    fn cp_write(&mut self, index: usize, value: u64) {
        self.cells[index & Self::INDEX_MASK] = (value as u32) & self.mask;
    }
    fn dump(&self) -> Vec<u64> {
        self.cells.iter().map(|&c| u64::from(c)).collect()
    }
    fn reset(&mut self) {
        self.cells.fill(0);
    }
    fn violations(&self) -> u64 {
        self.guard.violations
    }
}

/// A register array of `N` lo/hi pairs of 32-bit cells, updated together by one
/// dual-width action (a 64-bit value split in two halves).
#[derive(Debug, Clone)]
pub struct PairRegister<const N: usize> {
    spec: &'static RegisterSpec,
    lo: Box<[u32]>,
    hi: Box<[u32]>,
    guard: Guard,
}

impl<const N: usize> PairRegister<N> {
    const INDEX_MASK: usize = {
        assert!(N.is_power_of_two(), "register sizes are powers of two");
        N - 1
    };

    /// A zeroed pair register described by `spec`.
    pub fn new(spec: &'static RegisterSpec) -> PairRegister<N> {
        assert_eq!(spec.size, N, "register {} size", spec.name);
        assert_eq!(spec.kind, RegisterKind::Pair, "register {}", spec.name);
        PairRegister {
            spec,
            lo: vec![0u32; N].into_boxed_slice(),
            hi: vec![0u32; N].into_boxed_slice(),
            guard: Guard {
                last: None,
                violations: 0,
            },
        }
    }

    /// The one action of this register for `pkt`: `f(lo, hi) -> (lo', hi', result)`.
    pub fn rmw<R>(
        &mut self,
        pkt: PacketId,
        index: u32,
        f: impl FnOnce(u32, u32) -> (u32, u32, R),
    ) -> Option<R> {
        if !self.guard.enter(self.spec.name, pkt) {
            return None;
        }
        let i = index as usize & Self::INDEX_MASK;
        let (lo, hi, out) = f(self.lo[i], self.hi[i]);
        self.lo[i] = lo;
        self.hi[i] = hi;
        Some(out)
    }
}

impl<const N: usize> RegisterAccess for PairRegister<N> {
    fn name(&self) -> &'static str {
        self.spec.name
    }
    fn spec(&self) -> &'static RegisterSpec {
        self.spec
    }
    fn cp_read(&self, index: usize) -> u64 {
        let i = index & Self::INDEX_MASK;
        (u64::from(self.hi[i]) << 32) | u64::from(self.lo[i])
    }
    fn cp_write(&mut self, index: usize, value: u64) {
        let i = index & Self::INDEX_MASK;
        self.lo[i] = value as u32;
        self.hi[i] = (value >> 32) as u32;
    }
    fn dump(&self) -> Vec<u64> {
        (0..N).map(|i| self.cp_read(i)).collect()
    }
    fn reset(&mut self) {
        self.lo.fill(0);
        self.hi.fill(0);
    }
    fn violations(&self) -> u64 {
        self.guard.violations
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::spec::{REG_ATOMIC_WORD, REG_CONN_ACKED, REG_MODE};

    #[test]
    fn indices_are_masked_and_values_fit_the_width() {
        let mut r: Register<256> = Register::new(&REG_CONN_ACKED);
        r.write(PacketId(1), 256 + 3, 0xFFFF_FFFF).unwrap();
        assert_eq!(r.cp_read(3), 0xFFFF_FFFF);
        assert_eq!(r.read(PacketId(2), 3), Some(0xFFFF_FFFF));
        let mut p: PairRegister<1024> = PairRegister::new(&REG_ATOMIC_WORD);
        p.cp_write(1024 + 5, 0x1122_3344_5566_7788);
        assert_eq!(
            p.rmw(PacketId(1), 5, |lo, hi| (lo, hi, (lo, hi))),
            Some((0x5566_7788, 0x1122_3344))
        );
        assert_eq!(p.dump().len(), 1024);
    }

    #[test]
    #[cfg(debug_assertions)]
    #[should_panic(expected = "second access")]
    fn a_second_access_by_one_packet_panics_in_tests() {
        let mut r: Register<1> = Register::new(&REG_MODE);
        let _ = r.read(PacketId(7), 0);
        let _ = r.read(PacketId(7), 0);
    }

    #[test]
    #[cfg(not(debug_assertions))]
    fn a_second_access_by_one_packet_is_refused_and_counted_in_release_builds() {
        let mut r: Register<1> = Register::new(&REG_MODE);
        r.cp_write(0, 9);
        assert_eq!(r.read(PacketId(7), 0), Some(9));
        assert_eq!(r.read(PacketId(7), 0), None);
        assert_eq!(r.violations(), 1);
        assert_eq!(
            r.read(PacketId(8), 0),
            Some(9),
            "the next packet may access it"
        );
    }
}
