//! `Scope`: confines a connection made with a grant to the grant's windows (always on).
//!
//! A client that creates its queue pair through the switch with a grant (not the
//! switch's admin token) gets a connection listed in `conn_scoped`, and the grant's
//! extents as windows in `conn_window` (with the rights the grant gives). Every request
//! of such a connection that names memory — READ and WRITE First/Only (RETH: address
//! and length) and CompareSwap/FetchAdd (AtomicETH: an 8-byte word) — must lie in one
//! window, whole, and the window must give its rights (READ: read; WRITE and atomics:
//! write). A request that does not has its memory key replaced by
//! [`INVALID_RKEY`](crate::spec::INVALID_RKEY) before any other function sees it:
//! functions keyed by memory key (switch-owned atomic ranges, latch regions) pass it
//! by, and the memory node refuses it with NAK(remote access error) at the request's
//! own PSN, as it refuses any wrong key — the connection's PSN and MSN stay in step,
//! the requester learns why, and no byte outside the windows is read or written.
//! WRITE Middle/Last packets carry no address: the memory node binds them to their
//! First, which was checked.
//!
//! The check runs right after `Route`, on requests going up only; responses and
//! connections made with the admin token are not touched.
//!
//! P4: the window is matched twice, on the request's first byte (`conn_window`) and
//! its last (`conn_window_last`, the same entries), and is the same window when both
//! hit with the same id; the last byte is `va + len - 1`, one 64-bit add.

use crate::model::{Ctx, Packet, RegisterAccess, Stage};
use crate::spec::{DIR_UP, INVALID_RKEY};

/// The `Scope` control.
#[derive(Debug, Default)]
pub struct Scope;

/// What a request asks of memory: `[first, last]` and whether it writes.
struct Access {
    first: u64,
    last: u64,
    write: bool,
}

fn access(pkt: &Packet) -> Option<Access> {
    if let Some(e) = &pkt.atomic_eth {
        return Some(Access {
            first: e.va,
            last: e.va.saturating_add(7),
            write: true,
        });
    }
    let r = pkt.reth.as_ref()?;
    let write = pkt.bth.opcode != verbs::wire::Opcode::ReadRequest;
    // A zero-length READ or WRITE touches no memory; it is still checked at its first
    // byte, so a scoped connection cannot probe addresses outside its windows.
    let len = u64::from(r.dma_len.max(1));
    Some(Access {
        first: r.va,
        last: r.va.saturating_add(len - 1),
        write,
    })
}

impl Scope {
    /// Whether `pkt`, a request of scoped connection `conn`, is allowed by its windows.
    fn allowed(ctx: &Ctx<'_>, conn: u8, a: &Access) -> bool {
        let Some(first) = ctx.tables.conn_window.lookup(conn, a.first) else {
            return false;
        };
        let Some(last) = ctx.tables.conn_window.lookup(conn, a.last) else {
            return false;
        };
        first.action.id == last.action.id
            && if a.write {
                first.action.write
            } else {
                first.action.read
            }
    }
}

impl Stage for Scope {
    fn name(&self) -> &'static str {
        "Scope"
    }

    fn apply(&mut self, pkt: &mut Packet, ctx: &mut Ctx<'_>) {
        if pkt.meta.dir != DIR_UP {
            return;
        }
        let Some(conn) = pkt.meta.conn else {
            return;
        };
        if ctx.tables.conn_scoped.lookup(&conn).is_none() {
            return;
        }
        let Some(a) = access(pkt) else {
            return;
        };
        ctx.counters.scope.checked += 1;
        if Self::allowed(ctx, conn, &a) {
            return;
        }
        ctx.counters.scope.denied += 1;
        if let Some(e) = pkt.atomic_eth.as_mut() {
            e.rkey = INVALID_RKEY;
        }
        if let Some(r) = pkt.reth.as_mut() {
            r.rkey = INVALID_RKEY;
        }
    }

    fn registers(&self) -> Vec<&dyn RegisterAccess> {
        Vec::new()
    }

    fn registers_mut(&mut self) -> Vec<&mut dyn RegisterAccess> {
        Vec::new()
    }
}
