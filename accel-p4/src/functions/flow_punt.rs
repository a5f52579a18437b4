//! `FlowPunt`: packets for the switch CPU's flow engine (zero-sided flows).
//!
//! A flow's switch CPU keeps one control queue pair per ring, on which it READs and
//! WRITEs the rings' head and tail words, and may give producers a doorbell address.
//! Table `flow_punt`, keyed like the copy tables by (source address, destination QPN),
//! sends those packets — a memory node's answers on a control QP, a producer's
//! doorbell — to the CPU port unchanged, before `Route` could treat them as client
//! traffic. Everything else passes on untouched.
//!
//! Punted packets still go through the fault stage (direction down: towards the
//! switch's own endpoint), so tests see them lost, duplicated and reordered like any
//! other.

use crate::model::{Ctx, Packet, RouteKey};
use crate::spec::{DIR_DOWN, PORT_CPU};

/// The `FlowPunt` control.
#[derive(Debug, Default, Clone, Copy)]
pub struct FlowPunt;

impl FlowPunt {
    /// Run on every packet before `Route`. Returns whether the packet was punted
    /// (then `Route` and the other functions must not see it).
    pub fn apply(&self, pkt: &mut Packet, ctx: &mut Ctx<'_>) -> bool {
        let key = RouteKey {
            src: pkt.src,
            qpn: pkt.bth.dest_qpn,
        };
        if ctx.tables.flow_punt.lookup(&key).is_none() {
            return false;
        }
        pkt.meta.dir = DIR_DOWN;
        pkt.meta.egress_port = PORT_CPU;
        ctx.counters.flow_punt.punted += 1;
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{Counters, FlowPuntAction, Tables};
    use crate::model::{Metadata, PacketId};
    use verbs::wire::{BthRepr, Opcode};

    fn packet(src: &str, qpn: u32) -> Packet {
        let a = src.parse().expect("addr");
        Packet {
            id: PacketId(1),
            ingress_port: crate::spec::PORT_MEMNODE,
            dst_mac: [0; 6],
            src_mac: [0; 6],
            tos: 0,
            ttl: 64,
            ip_id: 0,
            ip_flags: 0,
            src: a,
            dst: a,
            ingress_src: a,
            ingress_dst: a,
            bth: BthRepr::new(Opcode::Acknowledge, qpn, 1, false),
            reth: None,
            immdt: None,
            atomic_eth: None,
            aeth: None,
            atomic_ack_eth: None,
            payload: Vec::new(),
            meta: Metadata::default(),
        }
    }

    #[test]
    fn only_listed_sources_and_qpns_are_punted() {
        let mut tables = Tables::default();
        let key = RouteKey {
            src: "10.0.0.2:4791".parse().expect("addr"),
            qpn: 0xF0_0001,
        };
        tables
            .flow_punt
            .insert(key, FlowPuntAction { ring: 3 })
            .expect("insert");
        let mut counters = Counters::default();
        let mut ctx = Ctx {
            mode: 0,
            tables: &tables,
            counters: &mut counters,
        };
        let mut hit = packet("10.0.0.2:4791", 0xF0_0001);
        assert!(FlowPunt.apply(&mut hit, &mut ctx));
        assert_eq!(hit.meta.egress_port, PORT_CPU);
        let mut other_qpn = packet("10.0.0.2:4791", 0xF0_0002);
        assert!(!FlowPunt.apply(&mut other_qpn, &mut ctx));
        let mut other_node = packet("10.0.0.3:4791", 0xF0_0001);
        assert!(!FlowPunt.apply(&mut other_node, &mut ctx));
        assert_eq!(counters.flow_punt.punted, 1);
    }
}
