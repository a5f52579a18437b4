// FlowPunt: packets for the switch CPU's flow engine, zero-sided flows
// (src/functions/flow_punt.rs). Runs before Route, after ZeroCopy missed.
//
// The flow engine keeps one RC control QP per producer/consumer ring, on which it
// READs and WRITEs the rings' head and tail words, and may give producers a doorbell
// address. flow_punt matches (source address, source port, destination QPN) and sends
// those packets - a memnode's answers on a control QP, a producer's doorbell - to the
// CPU port unchanged. Item moves themselves use ZeroCopy's copy_src / copy_dst.
//
// What Tofino cannot do as the model does (stated plainly; no compiler here):
// * the control QPs' requester (PSNs, retransmission, go-back-N) and the flows'
//   policies (free-space accounting, assignment, publishing heads and tails) run on
//   the switch CPU; the seed keeps ring pointers in registers and loops a
//   recirculating packet per flow, which is not written here;
// * a lane's copy_src entry is rewritten by the control plane for every item (its
//   PSNs and the consumer slot's address); on Tofino that is a table modify per item
//   from the CPU (thousands per second, not line rate) - the seed computes the slot
//   address from registers in the data plane instead;
// * ordered replication reads an item once per consumer; the seed's multicast of one
//   READ response to all consumers (a multicast group and per-replica rewrite in
//   egress) is not written.
// * the key shuffle's key is read by the CPU with a separate 8-byte READ before the
//   item is assigned; the seed parses the key from the item in the data plane.
#ifndef DMKV_FLOW_PUNT_P4
#define DMKV_FLOW_PUNT_P4

control FlowPunt(inout headers_t hdr, inout dmkv_meta_t meta, out bit<1> punted) {
    action punt(bit<16> ring) {
        punted = 1;
        meta.dir = DIR_DOWN;
        meta.egress_port = PORT_CPU;
    }
    action punt_miss() {}
    table flow_punt {
        key = {
            hdr.ipv4.src_addr: exact;
            hdr.udp.src_port: exact;
            hdr.bth.dest_qpn: exact;
        }
        actions = { punt; punt_miss; }
        default_action = punt_miss();
        size = TABLE_FLOW_PUNT_SIZE;
    }

    apply {
        punted = 0;
        flow_punt.apply();
    }
}

#endif  // DMKV_FLOW_PUNT_P4
