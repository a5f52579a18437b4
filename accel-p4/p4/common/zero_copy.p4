// ZeroCopy: the data-plane half of switch-initiated copies, zero-sided RDMA
// (src/functions/zero_copy.rs). Runs before Route on packets from the memnode port.
//
// The switch owns two RC queue pairs per copy: a source QP it READs on and a target QP
// it WRITEs on. copy_src matches responses on a source QP: every READ response packet
// (FIRST / MIDDLE / LAST / ONLY) becomes a WRITE ONLY on the target QP — payload
// untouched, a RETH added, the AETH removed — at target PSN dst_psn + k and address
// dst_va + k * 1024, where k = response PSN - src_psn. copy_dst matches responses on a
// target QP: ACKs advance copy_acked (cumulative, packets from dst_psn) and, with NAKs
// from either end, go to the control plane as a digest; nothing of a copy reaches a
// client.
//
// What Tofino cannot do as the model does (stated plainly; no compiler here):
// * the model shifts k by the copy's log2 PMTU from the table; a Tofino ALU shifts by
//   a constant only, so this program fixes the copies' PMTU at 1024 (<< 10), which is
//   what the control plane uses;
// * dst_va + (k << 10) is a 64-bit add: on Tofino it is two 32-bit adds with the carry
//   taken in a second stage (bit<64> arithmetic is written here for readability);
// * dma_len is the payload length, udp.length minus the headers' fixed lengths
//   (8 UDP + 12 BTH, + 4 AETH for FIRST / LAST / ONLY, - pad) - computed below;
// * the READs themselves are issued by the copy engine on the switch CPU and injected
//   through PORT_CPU (src/copy); the seed's all-data-plane design uses the packet
//   generator and a recirculating "switch thread" packet per copy instead, which is
//   not written here.
//
// Multicast copies (ordered replication reads an item once for every consumer): the
// converted response keeps going unicast to the first target (copy_src), and ingress
// also hands it to multicast group COPY_MCAST_GROUP_BASE + slot, whose replicas
// (rid 1 up, one per further target) the control plane programs per copy slot;
// ZeroCopyReplica rewrites each in egress from copy_mcast (slot, rid) with the same
// arithmetic: PSN dst_psn + k, address dst_va + (k << 10). A slot without further
// targets has an empty group. The group's membership (node per replica, rid, port) is
// a packet-replication-engine entry the control plane writes, not a table here; the
// model stops at the first missing (slot, replica) entry instead. On Tofino the
// unicast copy and the group's replicas both leave, so the group holds rids 1 up; in
// v1model a packet with a multicast group is not also unicast, so there every copy
// slot's group holds rid 0 (the converted packet as it is) too.
#ifndef DMKV_ZERO_COPY_P4
#define DMKV_ZERO_COPY_P4

struct copy_digest_t {
    bit<8> slot;
    bit<8> kind;      // 0: target ACK, 1: target NAK, 2: source NAK
    bit<8> syndrome;
    bit<24> psn;
    bit<32> acked;
}

control ZeroCopy(inout headers_t hdr, inout dmkv_meta_t meta, in bit<9> ingress_port,
                 out bit<1> is_copy, out bit<1> digest, out copy_digest_t report) {
    DECLARE_REG_COPY_ACKED

    bit<24> k = 0;
    bit<32> packets = 0;

    DMKV_ACTION(copy_acked, ack_max, bit<32>, bit<32>,
        bit<32> prev = cell & ~PSN_VALID;
        if (packets > prev) { cell = packets | PSN_VALID; rv = packets; }
        else { rv = prev; }
    )

    action read_to_write(bit<8> slot, bit<24> src_psn, bit<24> dst_psn, bit<64> dst_va,
                         bit<32> dst_rkey, bit<32> src_addr, bit<16> src_port,
                         bit<32> dst_addr, bit<16> dst_port, bit<24> dst_qpn,
                         bit<8> pmtu_log2, bit<64> len) {
        is_copy = 1;
        k = hdr.bth.psn - src_psn;
        hdr.bth.opcode = OP_WRITE_ONLY;
        hdr.bth.dest_qpn = dst_qpn;
        hdr.bth.psn = dst_psn + k;
        hdr.bth.ack_req = 1;
        hdr.reth.setValid();
        hdr.reth.va = dst_va + ((bit<64>)k << 10);
        hdr.reth.rkey = dst_rkey;
        hdr.aeth.setInvalid();
        hdr.ipv4.src_addr = src_addr;
        hdr.udp.src_port = src_port;
        hdr.ipv4.dst_addr = dst_addr;
        hdr.udp.dst_port = dst_port;
        meta.dir = DIR_UP;
        meta.egress_port = PORT_MEMNODE;
        report.slot = slot;
        meta.copy_mcast = 1;
        meta.copy_slot = slot;
        meta.copy_k = k;
    }
    action source_miss() {}
    table copy_src {
        key = {
            hdr.ipv4.src_addr: exact;
            hdr.udp.src_port: exact;
            hdr.bth.dest_qpn: exact;
        }
        actions = { read_to_write; source_miss; }
        default_action = source_miss();
        size = TABLE_COPY_SRC_SIZE;
    }

    action write_answer(bit<8> slot, bit<24> dst_psn) {
        is_copy = 1;
        k = hdr.bth.psn - dst_psn;
        packets = (bit<32>)k + 1;
        report.slot = slot;
        meta.drop = 1;
    }
    action target_miss() {}
    table copy_dst {
        key = {
            hdr.ipv4.src_addr: exact;
            hdr.udp.src_port: exact;
            hdr.bth.dest_qpn: exact;
        }
        actions = { write_answer; target_miss; }
        default_action = target_miss();
        size = TABLE_COPY_DST_SIZE;
    }

    apply {
        is_copy = 0;
        digest = 0;
        if (ingress_port != PORT_MEMNODE) { return; }
        if (copy_src.apply().hit) {
            if (hdr.bth.opcode == OP_ACKNOWLEDGE) {
                // A source NAK (an earlier READ was lost, or the READ was refused).
                meta.drop = 1;
                digest = 1;
                report.kind = 2;
                report.syndrome = hdr.aeth.syndrome;
                report.psn = hdr.bth.psn;
            } else if (hdr.bth.opcode < OP_READ_RESPONSE_FIRST
                       || hdr.bth.opcode > OP_READ_RESPONSE_ONLY) {
                meta.drop = 1;
            } else {
                bit<16> fixed = 20;  // UDP + BTH
                if (hdr.bth.opcode != OP_READ_RESPONSE_MIDDLE) { fixed = 24; }  // + AETH
                hdr.reth.dma_len = (bit<32>)(hdr.udp.length - fixed - 4)
                                   - (bit<32>)hdr.bth.pad_count;  // - ICRC, - pad
            }
        } else if (copy_dst.apply().hit) {
            if (hdr.aeth.isValid()) {
                digest = 1;
                report.psn = (bit<24>)k;
                report.syndrome = hdr.aeth.syndrome;
                if (hdr.aeth.syndrome[7:5] == 0) {  // ACK, whatever its credits
                    report.kind = 0;
                    DMKV_EXEC(ack_max, (bit<32>)report.slot, report.acked)
                } else {
                    report.kind = 1;
                }
            }
        }
    }
}

// Egress: one replica (rid >= 1) of a multicast copy's converted response becomes
// the WRITE ONLY for that replica's target.
control ZeroCopyReplica(inout headers_t hdr, inout dmkv_meta_t meta) {
    action replica_write(bit<24> dst_psn, bit<64> dst_va, bit<32> dst_rkey,
                         bit<32> dst_addr, bit<16> dst_port, bit<24> dst_qpn) {
        hdr.bth.dest_qpn = dst_qpn;
        hdr.bth.psn = dst_psn + meta.copy_k;
        hdr.reth.va = dst_va + ((bit<64>)meta.copy_k << 10);
        hdr.reth.rkey = dst_rkey;
        hdr.ipv4.dst_addr = dst_addr;
        hdr.udp.dst_port = dst_port;
    }
    action replica_miss() { meta.drop = 1; }
    table copy_mcast {
        key = {
            meta.copy_slot: exact;
            meta.copy_replica: exact;
        }
        actions = { replica_write; replica_miss; }
        default_action = replica_miss();
        size = TABLE_COPY_MCAST_SIZE;
    }

    apply { copy_mcast.apply(); }
}

#endif  // DMKV_ZERO_COPY_P4
