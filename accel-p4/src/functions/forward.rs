//! `Route`: which connection a packet belongs to and where it goes.
//!
//! The soft switch is a UDP middlebox, so every packet is re-addressed: client requests
//! arrive at the switch's client-facing socket and leave from its memnode-facing socket
//! to the memnode; responses the other way. `route_up` is keyed by the client's address
//! and the destination (memnode) QPN, `route_down` by the memnode's address and the
//! destination (client) QPN. A miss drops the packet.

use crate::model::{Ctx, Packet, RegisterAccess, RouteKey, Stage};
use crate::spec::{DIR_DOWN, DIR_UP, PORT_CLIENT, PORT_MEMNODE};

/// The `Route` control.
#[derive(Debug, Default)]
pub struct Route;

impl Stage for Route {
    fn name(&self) -> &'static str {
        "Route"
    }

    fn apply(&mut self, pkt: &mut Packet, ctx: &mut Ctx<'_>) {
        let key = RouteKey {
            src: pkt.src,
            qpn: pkt.bth.dest_qpn,
        };
        let (table, dir, egress) = if pkt.ingress_port == PORT_CLIENT {
            (&ctx.tables.route_up, DIR_UP, PORT_MEMNODE)
        } else {
            (&ctx.tables.route_down, DIR_DOWN, PORT_CLIENT)
        };
        let Some(action) = table.lookup(&key) else {
            // A response on a multiplexed QP (atomic replacement) belongs to no single
            // connection: `AtomicReplace` maps it back.
            if dir == DIR_DOWN
                && let Some(mux) = ctx.tables.mux_down.lookup(&key)
            {
                pkt.meta.mux = Some(*mux);
                pkt.meta.dir = dir;
                pkt.meta.egress_port = egress;
                return;
            }
            ctx.counters.forward.missed += 1;
            pkt.meta.drop = true;
            return;
        };
        pkt.meta.conn = Some(action.conn);
        pkt.meta.dir = dir;
        pkt.meta.egress_port = egress;
        pkt.meta.client_qpn = action.client_qpn;
        pkt.meta.pmtu_log2 = action.pmtu_log2;
        pkt.src = action.src;
        pkt.dst = action.dst;
    }

    fn registers(&self) -> Vec<&dyn RegisterAccess> {
        Vec::new()
    }

    fn registers_mut(&mut self) -> Vec<&mut dyn RegisterAccess> {
        Vec::new()
    }
}
