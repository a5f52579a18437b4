//! Access scopes: per-queue-pair memory windows over a registered region.
//!
//! A responder queue pair with an [`AccessScope`] serves only what the scope allows,
//! as an RDMA NIC's type-2 memory window bound to a queue pair does: requests must
//! carry the scope's own memory key, and every READ, WRITE, CAS and FAA must fall
//! entirely inside one of its windows, with that window's rights, before the window
//! expires. Anything else is refused (NAK *remote access error*) without touching
//! memory, and counted by reason in the node-wide [`ScopeViolations`].
//!
//! [`ScopedMemory`] is the [`RemoteMemory`] a scoped responder executes against: it
//! checks the scope and forwards to the region under the region's own key.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

use super::{AccessError, AccessFlags, RemoteMemory};

/// Why a scoped access was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ScopeViolation {
    /// The request carried another memory key than the queue pair's.
    WrongRkey,
    /// The range is not entirely inside one window.
    OutsideWindow,
    /// The window does not grant the access (a WRITE or atomic under read-only rights).
    Rights,
    /// The window's grant has expired.
    Expired,
}

impl ScopeViolation {
    /// Every reason, in label order.
    pub const ALL: [ScopeViolation; 4] = [
        ScopeViolation::WrongRkey,
        ScopeViolation::OutsideWindow,
        ScopeViolation::Rights,
        ScopeViolation::Expired,
    ];

    /// A short label for metrics.
    pub fn label(self) -> &'static str {
        match self {
            ScopeViolation::WrongRkey => "wrong_rkey",
            ScopeViolation::OutsideWindow => "outside_window",
            ScopeViolation::Rights => "rights",
            ScopeViolation::Expired => "expired",
        }
    }

    fn index(self) -> usize {
        match self {
            ScopeViolation::WrongRkey => 0,
            ScopeViolation::OutsideWindow => 1,
            ScopeViolation::Rights => 2,
            ScopeViolation::Expired => 3,
        }
    }
}

/// Refused scoped accesses by reason, shared by every scope of a node.
#[derive(Debug, Default)]
pub struct ScopeViolations([AtomicU64; 4]);

impl ScopeViolations {
    /// Accesses refused for `why`.
    pub fn get(&self, why: ScopeViolation) -> u64 {
        self.0[why.index()].load(Ordering::Relaxed)
    }

    /// Accesses refused for any reason.
    pub fn total(&self) -> u64 {
        ScopeViolation::ALL.iter().map(|&w| self.get(w)).sum()
    }

    fn count(&self, why: ScopeViolation) {
        self.0[why.index()].fetch_add(1, Ordering::Relaxed);
    }
}

/// One window: `[start, end)` of the region's virtual addresses with `rights`, valid
/// until `expires` (`None`: no expiry).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MemoryWindow {
    /// First virtual address.
    pub start: u64,
    /// One past the last virtual address.
    pub end: u64,
    /// What may be done inside it.
    pub rights: AccessFlags,
    /// When it stops being valid.
    pub expires: Option<Instant>,
}

/// The memory one queue pair may touch: its key, the region behind it and its windows.
#[derive(Debug, Clone)]
pub struct AccessScope {
    rkey: u32,
    region_rkey: u32,
    /// Sorted by start.
    windows: Vec<MemoryWindow>,
    /// `reach[i]`: the largest `end` among `windows[..=i]`, so a lookup stops as soon
    /// as no earlier window can contain the range.
    reach: Vec<u64>,
    violations: Arc<ScopeViolations>,
}

impl AccessScope {
    /// A scope presenting key `rkey` over the region registered as `region_rkey`,
    /// allowing `windows` (in any order, empty ones dropped) and counting refusals in
    /// `violations`.
    pub fn new(
        rkey: u32,
        region_rkey: u32,
        mut windows: Vec<MemoryWindow>,
        violations: Arc<ScopeViolations>,
    ) -> AccessScope {
        windows.retain(|w| w.end > w.start);
        windows.sort_by_key(|w| (w.start, w.end));
        let mut reach = Vec::with_capacity(windows.len());
        let mut max = 0;
        for w in &windows {
            max = max.max(w.end);
            reach.push(max);
        }
        AccessScope {
            rkey,
            region_rkey,
            windows,
            reach,
            violations,
        }
    }

    /// The key requests on this queue pair must carry.
    pub fn rkey(&self) -> u32 {
        self.rkey
    }

    /// The key of the region behind it.
    pub fn region_rkey(&self) -> u32 {
        self.region_rkey
    }

    /// The windows, sorted by start.
    pub fn windows(&self) -> &[MemoryWindow] {
        &self.windows
    }

    /// The node-wide refusal counters.
    pub fn violations(&self) -> &Arc<ScopeViolations> {
        &self.violations
    }

    /// Whether `len` bytes at `va` under key `rkey` may be accessed with `needed`
    /// rights at `now`; the reason if not (not counted: see [`AccessScope::admit`]).
    pub fn decide(
        &self,
        rkey: u32,
        va: u64,
        len: u64,
        needed: AccessFlags,
        now: impl Fn() -> Instant,
    ) -> Result<(), ScopeViolation> {
        if rkey != self.rkey {
            return Err(ScopeViolation::WrongRkey);
        }
        let end = va
            .checked_add(len.max(1))
            .ok_or(ScopeViolation::OutsideWindow)?;
        let after = self.windows.partition_point(|w| w.start <= va);
        let mut best = Err(ScopeViolation::OutsideWindow);
        for i in (0..after).rev() {
            if self.reach[i] < end {
                break;
            }
            let w = &self.windows[i];
            if w.end < end {
                continue;
            }
            if !w.rights.contains(needed) {
                best = Err(ScopeViolation::Rights);
                continue;
            }
            if w.expires.is_some_and(|t| now() >= t) {
                if best != Err(ScopeViolation::Rights) {
                    best = Err(ScopeViolation::Expired);
                }
                continue;
            }
            return Ok(());
        }
        best
    }

    /// [`AccessScope::decide`] at the current time, counting a refusal; the error is
    /// what the responder answers (remote access error).
    pub fn admit(
        &self,
        rkey: u32,
        va: u64,
        len: u64,
        needed: AccessFlags,
    ) -> Result<u32, AccessError> {
        self.admit_at(rkey, va, len, needed, Instant::now())
    }

    /// [`AccessScope::admit`] at `now` (a time the caller read once for many
    /// requests); returns the region's key to execute the access under.
    pub fn admit_at(
        &self,
        rkey: u32,
        va: u64,
        len: u64,
        needed: AccessFlags,
        now: Instant,
    ) -> Result<u32, AccessError> {
        match self.decide(rkey, va, len, needed, || now) {
            Ok(()) => Ok(self.region_rkey),
            Err(why) => {
                self.violations.count(why);
                Err(match why {
                    ScopeViolation::WrongRkey => AccessError::UnknownRkey(rkey),
                    ScopeViolation::OutsideWindow => AccessError::OutOfBounds { va, len },
                    ScopeViolation::Rights | ScopeViolation::Expired => {
                        AccessError::AccessDenied { needed }
                    }
                })
            }
        }
    }
}

/// Registered memory as seen through a scope, at one point in time (windows that
/// expire are judged as of `now`).
pub struct ScopedMemory<'a> {
    scope: &'a AccessScope,
    inner: &'a dyn RemoteMemory,
    now: Instant,
}

impl<'a> ScopedMemory<'a> {
    /// `inner` restricted to `scope`, as of `now`.
    pub fn new(
        scope: &'a AccessScope,
        inner: &'a dyn RemoteMemory,
        now: Instant,
    ) -> ScopedMemory<'a> {
        ScopedMemory { scope, inner, now }
    }
}

impl RemoteMemory for ScopedMemory<'_> {
    fn read(&self, rkey: u32, va: u64, buf: &mut [u8]) -> Result<(), AccessError> {
        let key = self.scope.admit_at(
            rkey,
            va,
            buf.len() as u64,
            AccessFlags::REMOTE_READ,
            self.now,
        )?;
        self.inner.read(key, va, buf)
    }

    fn write(&self, rkey: u32, va: u64, data: &[u8]) -> Result<(), AccessError> {
        let key = self.scope.admit_at(
            rkey,
            va,
            data.len() as u64,
            AccessFlags::REMOTE_WRITE,
            self.now,
        )?;
        self.inner.write(key, va, data)
    }

    fn compare_swap(
        &self,
        rkey: u32,
        va: u64,
        compare: u64,
        swap: u64,
    ) -> Result<u64, AccessError> {
        let key = self
            .scope
            .admit_at(rkey, va, 8, AccessFlags::REMOTE_ATOMIC, self.now)?;
        self.inner.compare_swap(key, va, compare, swap)
    }

    fn fetch_add(&self, rkey: u32, va: u64, add: u64) -> Result<u64, AccessError> {
        let key = self
            .scope
            .admit_at(rkey, va, 8, AccessFlags::REMOTE_ATOMIC, self.now)?;
        self.inner.fetch_add(key, va, add)
    }

    fn check(&self, rkey: u32, va: u64, len: u64, needed: AccessFlags) -> Result<(), AccessError> {
        let key = self.scope.admit_at(rkey, va, len, needed, self.now)?;
        self.inner.check(key, va, len, needed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    const RW: AccessFlags = AccessFlags::REMOTE_READ
        .union(AccessFlags::REMOTE_WRITE)
        .union(AccessFlags::REMOTE_ATOMIC);

    fn window(start: u64, end: u64, rights: AccessFlags) -> MemoryWindow {
        MemoryWindow {
            start,
            end,
            rights,
            expires: None,
        }
    }

    fn scope(windows: Vec<MemoryWindow>) -> AccessScope {
        AccessScope::new(7, 1, windows, Arc::default())
    }

    #[test]
    fn inside_a_window_with_its_rights_only() {
        let s = scope(vec![
            window(0x2000, 0x3000, AccessFlags::REMOTE_READ),
            window(0x1000, 0x2000, RW),
        ]);
        let now = Instant::now;
        assert_eq!(s.decide(7, 0x1000, 0x1000, RW, now), Ok(()));
        assert_eq!(
            s.decide(7, 0x2000, 8, AccessFlags::REMOTE_READ, now),
            Ok(())
        );
        // Straddling two windows is outside both, even though both are granted.
        assert_eq!(
            s.decide(7, 0x1ff8, 16, AccessFlags::REMOTE_READ, now),
            Err(ScopeViolation::OutsideWindow)
        );
        assert_eq!(
            s.decide(7, 0x2000, 8, AccessFlags::REMOTE_WRITE, now),
            Err(ScopeViolation::Rights)
        );
        assert_eq!(
            s.decide(7, 0x3000, 1, AccessFlags::REMOTE_READ, now),
            Err(ScopeViolation::OutsideWindow)
        );
        assert_eq!(
            s.decide(7, 0xfff, 1, AccessFlags::REMOTE_READ, now),
            Err(ScopeViolation::OutsideWindow)
        );
        assert_eq!(
            s.decide(1, 0x1000, 8, AccessFlags::REMOTE_READ, now),
            Err(ScopeViolation::WrongRkey)
        );
        assert_eq!(
            s.decide(7, u64::MAX - 2, 8, AccessFlags::REMOTE_READ, now),
            Err(ScopeViolation::OutsideWindow)
        );
    }

    #[test]
    fn nested_windows_are_found_behind_a_short_one() {
        let s = scope(vec![
            window(0, 0x10000, AccessFlags::REMOTE_READ),
            window(0x100, 0x200, RW),
        ]);
        assert_eq!(
            s.decide(7, 0x300, 8, AccessFlags::REMOTE_READ, Instant::now),
            Ok(())
        );
        assert_eq!(s.decide(7, 0x100, 8, RW, Instant::now), Ok(()));
    }

    #[test]
    fn expired_windows_refuse_and_refusals_are_counted() {
        let t0 = Instant::now();
        let mut w = window(0, 4096, RW);
        w.expires = Some(t0 + Duration::from_secs(1));
        let s = scope(vec![w]);
        assert_eq!(s.decide(7, 0, 8, RW, || t0), Ok(()));
        assert_eq!(
            s.decide(7, 0, 8, RW, || t0 + Duration::from_secs(2)),
            Err(ScopeViolation::Expired)
        );
        let counts = s.violations().clone();
        assert!(s.admit(7, 0, 8, AccessFlags::REMOTE_READ).is_ok());
        assert!(s.admit(9, 0, 8, AccessFlags::REMOTE_READ).is_err());
        assert!(s.admit(7, 4096, 8, AccessFlags::REMOTE_READ).is_err());
        assert_eq!(counts.get(ScopeViolation::WrongRkey), 1);
        assert_eq!(counts.get(ScopeViolation::OutsideWindow), 1);
        assert_eq!(counts.total(), 2);
    }
}
