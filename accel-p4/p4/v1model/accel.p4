// dmkv switch accelerator for BMv2 (v1model): a thin shim around ../common, so the STF
// vectors in ../../tests/vectors can run on simple_switch where p4c is installed.
// NOT COMPILED HERE: no P4 compiler is available in this environment.
#include <core.p4>
#include <v1model.p4>

#define DMKV_V1MODEL
#include "../include/arch.p4"
#include "../include/headers.p4"
#include "../common/parser.p4"
#include "../common/route.p4"
#include "../common/scope.p4"
#include "../common/switch_atomics.p4"
#include "../common/atomic_replace.p4"
#include "../common/opt_latch.p4"
#include "../common/clover_steer.p4"
#include "../common/fault_inject.p4"
#include "../common/zero_copy.p4"
#include "../common/flow_punt.p4"
#include "../common/mirror_write.p4"
#include "../common/read_balance.p4"

parser V1Parser(packet_in pkt, out headers_t hdr, inout dmkv_meta_t meta,
                inout standard_metadata_t std) {
    DmkvParser() dmkv;
    state start { dmkv.apply(pkt, hdr); transition accept; }
}

control V1Verify(inout headers_t hdr, inout dmkv_meta_t meta) { apply { } }

control V1Ingress(inout headers_t hdr, inout dmkv_meta_t meta,
                  inout standard_metadata_t std) {
    DECLARE_REG_MODE
    DMKV_ACTION(mode, mode_read, bit<32>, bit<32>, rv = cell;)
    Route() route;
    Scope() scope;
    SwitchAtomics() atomics;
    ReplaceClassify() replace_classify;
    LatchClassify() latch_classify;
    AtomicReplace() replace;
    OptLatch() latch;
    SteerClassify() steer_classify;
    CloverSteer() steer;
    FaultInject() faults;
    ZeroCopy() zero_copy;
    MirrorLanes() mirror_lanes;
    MirrorIngress() mirror_ingress;
    BalanceClassify() balance_classify;
    ReadBalance() read_balance;
    bit<1> is_lane;
    FlowPunt() flow_punt;
    bit<1> punted;
    bit<1> duplicate;
    bit<1> is_copy;
    bit<1> copy_digest;
    copy_digest_t copy_report;

    apply {
        DMKV_EXEC(mode_read, 0, meta.mode)
        meta.now_us = (bit<32>)std.ingress_global_timestamp;  // µs in BMv2
        if (hdr.latch_release.isValid()) {
            // The control plane's latch-lease packet: OptLatch alone, back to the CPU.
            latch.apply(hdr, meta);
            std.egress_spec = meta.egress_port;
            return;
        }
        // A copy's responses (zero-sided RDMA): converted or consumed, never routed.
        zero_copy.apply(hdr, meta, std.ingress_port, is_copy, copy_digest, copy_report);
        // A backup's answer on a lane (switch replication of writes): consumed, or the
        // last one rewritten into the client's held ACK.
        mirror_lanes.apply(hdr, meta, std.ingress_port, is_lane);
        if (is_lane == 1) { is_copy = 1; }
        // Load-balanced READs: an answer on a read lane, or a READ under a read alias
        // key (the real key from here on). Lane answers skip Route and Scope.
        if (is_copy == 0) { balance_classify.apply(hdr, meta, std.ingress_port); }
        if (is_copy == 1) {
            if (copy_digest == 1) { digest<copy_digest_t>(1, copy_report); }
            if (meta.drop == 0) { faults.apply(hdr, meta, duplicate); }
        }
        if (is_copy == 0 && meta.lb_kind != LB_ANSWER) {
            // A flow ring's control answer or a doorbell: to the CPU, unchanged.
            flow_punt.apply(hdr, meta, punted);
            if (punted == 1) {
                is_copy = 1;
                faults.apply(hdr, meta, duplicate);
            }
        }
        if (is_copy == 0 && meta.lb_kind != LB_ANSWER) {
            route.apply(hdr, meta, std.ingress_port);
            if (meta.drop == 0) { scope.apply(hdr, meta); }
        }
        // ReadBalance, once per packet: a lane answer becomes the client's READ
        // response; a tagged READ goes to the member the set's cursor picks (a backup's
        // on its read lane, meta.lb_kind = LB_DONE, the filler mirrored beside it); the
        // primary's sequence NAK for a lost filler becomes the filler (LB_DONE).
        if (meta.lb_kind == LB_ANSWER || (is_copy == 0 && meta.drop == 0)) {
            read_balance.apply(hdr, meta, std.ingress_port);
        }
        if (meta.lb_kind == LB_ANSWER || meta.lb_kind == LB_DONE) {
            is_copy = 1;
            if (meta.drop == 0) { faults.apply(hdr, meta, duplicate); }
        }
        if (is_copy == 0) {
            // Replicated WRITEs (mirror_rkey; the model swaps the alias key before Scope).
            if (meta.drop == 0) { mirror_ingress.apply(hdr, meta); }
            replace_classify.apply(hdr, meta, std.ingress_port);
            if (meta.drop == 0) { latch_classify.apply(hdr, meta); }
            if (meta.drop == 0) { atomics.apply(hdr, meta); }
            // A multiplexed QP's response: pass 1 maps it to its connection and sets
            // meta.recirculate (conn and converted bridged to pass 2, which runs
            // SwitchAtomics and the conversion). See common/atomic_replace.p4.
            if (meta.drop == 0) { replace.apply(hdr, meta); }
            if (meta.drop == 0 && meta.recirculate == 0) { latch.apply(hdr, meta); }
            if (meta.drop == 0 && meta.answered == 0) {
                steer_classify.apply(hdr, meta);
                steer.apply(hdr, meta);
            }
            if (meta.drop == 0) { faults.apply(hdr, meta, duplicate); }
        }
        if (meta.drop == 1) {
            mark_to_drop(std);
        } else {
            std.egress_spec = meta.egress_port;
            if (duplicate == 1) { clone(CloneType.I2E, (bit<32>)meta.egress_port); }
            // The missing filler beside a duplicate: a clone the egress rewrites
            // (conn_filler's egress copy, PSN meta.filler_psn).
            if (meta.filler_extra == 1) { clone(CloneType.I2E, (bit<32>)PORT_MEMNODE); }
            // The filler beside a READ that left on a read lane: a clone the egress
            // rewrites (BalanceFiller). The lb_filler_* fields must survive the clone
            // (clone_preserving_field_list on BMv2; not written).
            if (meta.lb_filler == 1) { clone(CloneType.I2E, (bit<32>)PORT_MEMNODE); }
            // A replicated WRITE with copies: multicast group 1 + set (the primary and
            // one replica per backup, rid = backup + 1).
            if (meta.mirror == 1 && meta.mirror_copies != 3) {
                std.mcast_grp = 1 + (bit<16>)meta.mirror_set;
            }
            // A multicast copy's converted response: group COPY_MCAST_GROUP_BASE + slot
            // (one replica per further target, rid = replica).
            if (meta.copy_mcast == 1) {
                std.mcast_grp = COPY_MCAST_GROUP_BASE + (bit<16>)meta.copy_slot;
            }
        }
    }
}

control V1Egress(inout headers_t hdr, inout dmkv_meta_t meta,
                 inout standard_metadata_t std) {
    MirrorCopy() mirror_copy;
    ZeroCopyReplica() zero_copy_replica;
    BalanceFiller() balance_filler;
    apply {
        // The clone of a READ that left on a read lane (instance type 1: ingress
        // clone): the filler on the primary.
        if (meta.lb_filler == 1 && std.instance_type == 1) {
            balance_filler.apply(hdr, meta);
            return;
        }
        // A replica of a replicated WRITE (rid = backup + 1): the copy for that backup.
        if (meta.mirror == 1 && std.egress_rid != 0) {
            meta.mirror_backup = (bit<8>)(std.egress_rid - 1);
            mirror_copy.apply(hdr, meta);
        }
        // A replica of a multicast copy's converted response: the WRITE for target rid.
        if (meta.copy_mcast == 1 && std.egress_rid != 0) {
            meta.copy_replica = (bit<8>)std.egress_rid;
            zero_copy_replica.apply(hdr, meta);
        }
    }
}

control V1Compute(inout headers_t hdr, inout dmkv_meta_t meta) {
    apply {
        update_checksum(hdr.ipv4.isValid(), {
            hdr.ipv4.version, hdr.ipv4.ihl, hdr.ipv4.tos, hdr.ipv4.total_len,
            hdr.ipv4.identification, hdr.ipv4.flags, hdr.ipv4.frag_offset,
            hdr.ipv4.ttl, hdr.ipv4.protocol, hdr.ipv4.src_addr, hdr.ipv4.dst_addr},
            hdr.ipv4.hdr_checksum, HashAlgorithm.csum16);
        // ICRC: see README ("ICRC on hardware").
    }
}

control V1Deparser(packet_out pkt, in headers_t hdr) {
    DmkvDeparser() dmkv;
    apply { dmkv.apply(pkt, hdr); }
}

V1Switch(V1Parser(), V1Verify(), V1Ingress(), V1Egress(), V1Compute(), V1Deparser()) main;
