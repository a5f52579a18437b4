//! One copy pass over a replica set: for every extent, read the primary's bytes and
//! the new member's, and write the difference as the index's [`CopyRule`] says.

use std::sync::atomic::{AtomicBool, Ordering};

use super::memory::ReplicaMemory;
use super::rate::RateLimit;
use super::rule::{CopyRule, Patch};
use crate::catalog::SyncPlan;

/// Bytes compared per READ.
pub const CHUNK: u64 = 16 << 10;

/// What one pass did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PassReport {
    /// Bytes compared (each extent once).
    pub compared: u64,
    /// Bytes written or CASed to the new member.
    pub written: u64,
}

/// Runs one pass of `plan` with `rule`, reporting progress through `progress`
/// (bytes compared and written so far in this pass). Stops early, with an error,
/// when `stop` is set.
pub fn run_pass(
    mem: &mut dyn ReplicaMemory,
    plan: &SyncPlan,
    rule: &dyn CopyRule,
    rate: &mut RateLimit,
    stop: &AtomicBool,
    mut progress: impl FnMut(PassReport),
) -> Result<PassReport, String> {
    let mut r = PassReport::default();
    for e in &plan.extents {
        let mut off = 0u64;
        while off < e.len {
            if stop.load(Ordering::Relaxed) {
                return Err("the service is stopping".into());
            }
            let n = (e.len - off).min(CHUNK);
            let len = u32::try_from(n).map_err(|_| "chunk too long".to_owned())?;
            let primary = mem.read(&plan.source, e.source.rkey, e.source.va + off, len)?;
            let copy = mem.read(&plan.target, e.target.rkey, e.target.va + off, len)?;
            let mut moved = 2 * n;
            let at = (e.source.va + off).wrapping_sub(plan.source_base_va);
            for p in rule.patches(at, &primary, &copy) {
                match p {
                    Patch::Write { offset, bytes } => {
                        let k = bytes.len() as u64;
                        mem.write(
                            &plan.target,
                            e.target.rkey,
                            e.target.va + off + offset,
                            bytes,
                        )?;
                        r.written += k;
                        moved += k;
                    }
                    Patch::Cas {
                        offset,
                        expect,
                        swap,
                    } => {
                        // A failed CAS means a writer changed the word meanwhile:
                        // either way the pass was not clean.
                        mem.cas(
                            &plan.target,
                            e.target.rkey,
                            e.target.va + off + offset,
                            expect,
                            swap,
                        )?;
                        r.written += 8;
                        moved += 8;
                    }
                }
            }
            r.compared += n;
            off += n;
            progress(r);
            rate.take(moved);
        }
    }
    Ok(r)
}
