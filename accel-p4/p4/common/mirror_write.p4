// MirrorWrite: switch replication of writes (src/functions/mirror_write.rs).
//
// A client WRITEs a replicated table's data block once, to the primary, under the
// replica set's alias key (table mirror_rkey). The switch sends it on to the primary
// under the real key and makes one WRITE ONLY of the same bytes per backup on a queue
// pair of its own (a lane: mirror_lane, its PSNs in mirror_next0/1), at the same offset
// of the backup's region. The primary's ACK of the WRITE is held (dropped, the latest
// one remembered in mirror_held / mirror_held_aeth) until both backups acknowledged
// (mirror_acked0/1 against the WRITE's lane PSNs mirror_bpsn0/1); the last backup ACK
// is then rewritten into the remembered ACK for the client. A client retransmission
// of the waiting WRITE (mirror_conn: its PSN | PSN_VALID | MIRROR_ACTIVE) is copied
// again at the lane PSNs the first copies took, for backups that have not acknowledged.
// One WRITE waits per connection; a second one poisons the connection (dropped, as is
// every later replicated WRITE on it).
//
// Three places: MirrorLanes runs before Route on the memnode port (lane answers),
// MirrorIngress after Scope (requests tagged by mirror_rkey, then the primary's
// answers), MirrorCopy in egress on each replica of a replicated WRITE.
//
// What Tofino cannot do as the model does (stated plainly; no compiler here):
// * the copies are replicas of the ingress packet: a multicast group per replica set
//   (one replica per backup, rid = backup, plus the primary's) set up by the control
//   plane, with the per-replica rewrite in egress (MirrorCopy). The registers the
//   egress replica touches (mirror_next*, mirror_owner*, mirror_bpsn*, mirror_acked*)
//   then live in the egress pipeline, and mirror_bpsn* and mirror_acked* are read again
//   by ingress on the primary's ACK: on Tofino a register belongs to one pipe gress, so
//   those reads need the egress values mirrored back (a recirculation, or the ACK
//   recirculated through egress). The model keeps one copy of each register; this is
//   not written.
// * a backup ACK releases the client's ACK only if the connection it finds in
//   mirror_owner (by the low 8 bits of the lane PSN) is still the owner; a cumulative
//   ACK covering several connections' copies releases the one it names, the others are
//   released by the primary's ACK of their client's retransmission.
// * va + va_delta is a 64-bit add (two 32-bit adds with a carry in a second stage).
#ifndef DMKV_MIRROR_WRITE_P4
#define DMKV_MIRROR_WRITE_P4

// Lane answers (before Route, memnode port): consumed; the last backup's ACK of a
// connection's waiting WRITE becomes the client's held ACK.
control MirrorLanes(inout headers_t hdr, inout dmkv_meta_t meta, in bit<9> ingress_port,
                    out bit<1> is_lane) {
    DECLARE_REG_MIRROR_ACKED0
    DECLARE_REG_MIRROR_ACKED1
    DECLARE_REG_MIRROR_OWNER0
    DECLARE_REG_MIRROR_OWNER1

    bit<5> set = 0;
    bit<1> backup = 0;
    bit<32> psn = 0;
    bit<32> owner = 0;

    DMKV_ACTION(mirror_acked0, acked0_max, bit<32>, bit<32>,
        if (cell & PSN_VALID == 0 || psn - (cell & 0xFFFFFF) < 0x800000) { cell = psn | PSN_VALID; }
        rv = cell;)
    DMKV_ACTION(mirror_acked1, acked1_max, bit<32>, bit<32>,
        if (cell & PSN_VALID == 0 || psn - (cell & 0xFFFFFF) < 0x800000) { cell = psn | PSN_VALID; }
        rv = cell;)
    DMKV_ACTION(mirror_owner0, owner0_read, bit<16>, bit<32>, rv = (bit<32>)cell;)
    DMKV_ACTION(mirror_owner1, owner1_read, bit<16>, bit<32>, rv = (bit<32>)cell;)

    action lane_answer(bit<5> s, bit<1> b) { set = s; backup = b; is_lane = 1; meta.drop = 1; }
    action lane_miss() {}
    table mirror_ack {
        key = {
            hdr.ipv4.src_addr: exact;
            hdr.udp.src_port: exact;
            hdr.bth.dest_qpn: exact;
        }
        actions = { lane_answer; lane_miss; }
        default_action = lane_miss();
        size = TABLE_MIRROR_ACK_SIZE;
    }

    apply {
        is_lane = 0;
        if (ingress_port != PORT_MEMNODE) { return; }
        if (!mirror_ack.apply().hit) { return; }
        if (hdr.bth.opcode != OP_ACKNOWLEDGE || hdr.aeth.syndrome[7:5] != 0) { return; }
        psn = (bit<32>)hdr.bth.psn;
        bit<32> acked = 0;
        bit<32> index = ((bit<32>)set << 8) | (psn & 0xFF);
        if (backup == 0) {
            DMKV_EXEC(acked0_max, (bit<32>)set, acked)
            DMKV_EXEC(owner0_read, index, owner)
        } else {
            DMKV_EXEC(acked1_max, (bit<32>)set, acked)
            DMKV_EXEC(owner1_read, index, owner)
        }
        if (owner & 0x100 != 0) {
            // The owner's conn_set, bpsn, held and mirror_conn checks follow as in
            // MirrorIngress (release): meta.conn = owner, then MirrorIngress.release.
            meta.conn = (conn_id_t)owner;
            meta.mirror = 1;
            meta.mirror_set = set;
        }
    }
}

// Requests tagged by mirror_rkey (after Scope), the primary's answers (after Route),
// and the release of a held ACK for MirrorLanes.
control MirrorIngress(inout headers_t hdr, inout dmkv_meta_t meta) {
    DECLARE_REG_MIRROR_CONN
    DECLARE_REG_MIRROR_CONN_SET
    DECLARE_REG_MIRROR_HELD
    DECLARE_REG_MIRROR_HELD_AETH

    bit<32> psn = 0;
    bit<2> decided = 0;  // 0 drop (busy / poisoned), 1 fresh, 2 again, 3 primary only

    DMKV_ACTION(mirror_conn, conn_upstream, bit<32>, bit<2>,
        bit<32> last = cell & 0xFFFFFF;
        if (cell & MIRROR_POISONED != 0) { rv = 0; }
        else if (cell & MIRROR_ACTIVE != 0 && last == psn) { rv = 2; }
        else if (cell & MIRROR_ACTIVE != 0 && last - psn < 0x800000 && last != psn) { rv = 3; }
        else if (cell & MIRROR_ACTIVE != 0) { cell = cell | MIRROR_POISONED; rv = 0; }
        else if (cell & PSN_VALID != 0 && last - psn < 0x800000) { rv = 3; }
        else { cell = psn | PSN_VALID | MIRROR_ACTIVE; rv = 1; })
    DMKV_ACTION(mirror_held, held_clear, bit<32>, bit<32>, cell = 0; rv = 0;)
    DMKV_ACTION(mirror_conn_set, set_write, bit<8>, bit<32>,
        cell = (bit<8>)meta.mirror_set | ((bit<8>)meta.mirror_backups << 5); rv = 0;)

    action replicate(bit<5> set, bit<32> rkey, bit<2> backups) {
        hdr.reth.rkey = rkey;
        meta.mirror = 1;
        meta.mirror_set = set;
        meta.mirror_backups = backups;
    }
    action not_replicated() {}
    table mirror_rkey {
        key = { hdr.reth.rkey: exact; }
        actions = { replicate; not_replicated; }
        default_action = not_replicated();
        size = TABLE_MIRROR_RKEY_SIZE;
    }

    // Before Scope: the alias key becomes the primary's.
    action classify_only() {}
    apply {
        if (meta.dir != DIR_UP || !hdr.reth.isValid()) { return; }
        mirror_rkey.apply();
        if (meta.mirror == 0) { return; }
        if (hdr.bth.opcode != OP_WRITE_ONLY) { meta.drop = 1; return; }
        psn = (bit<32>)hdr.bth.psn;
        DMKV_EXEC(conn_upstream, (bit<32>)meta.conn, decided)
        if (decided == 0) { meta.drop = 1; meta.mirror = 0; return; }
        if (decided == 1) {
            bit<32> unused = 0;
            DMKV_EXEC(held_clear, (bit<32>)meta.conn, unused)
            DMKV_EXEC(set_write, (bit<32>)meta.conn, unused)
        }
        meta.mirror_copies = (bit<2>)decided;
        // decided 1 or 2: the multicast group of meta.mirror_set (primary + one replica
        // per backup); 3: the primary only.
    }
}

// Egress, on the replica for backup meta.mirror_backup (rid): the lane's addressing and
// PSN. Fresh: the lane's next PSN, remembered per connection and owner; again: the PSN
// the first copy took, unless the backup has acknowledged it.
control MirrorCopy(inout headers_t hdr, inout dmkv_meta_t meta) {
    DECLARE_REG_MIRROR_BPSN0
    DECLARE_REG_MIRROR_BPSN1
    DECLARE_REG_MIRROR_NEXT0
    DECLARE_REG_MIRROR_NEXT1

    bit<32> q = 0;
    DMKV_ACTION(mirror_next0, next0_take, bit<32>, bit<32>, rv = cell; cell = (cell + 1) & 0xFFFFFF;)
    DMKV_ACTION(mirror_next1, next1_take, bit<32>, bit<32>, rv = cell; cell = (cell + 1) & 0xFFFFFF;)
    DMKV_ACTION(mirror_bpsn0, bpsn0_write, bit<32>, bit<32>, cell = q; rv = q;)
    DMKV_ACTION(mirror_bpsn1, bpsn1_write, bit<32>, bit<32>, cell = q; rv = q;)
    DMKV_ACTION(mirror_bpsn0, bpsn0_read, bit<32>, bit<32>, rv = cell;)
    DMKV_ACTION(mirror_bpsn1, bpsn1_read, bit<32>, bit<32>, rv = cell;)

    action lane(bit<32> src_addr, bit<16> src_port, bit<32> dst_addr, bit<16> dst_port,
                bit<24> qpn, bit<32> rkey, bit<64> va_delta) {
        hdr.bth.dest_qpn = qpn;
        hdr.bth.ack_req = 1;
        hdr.reth.rkey = rkey;
        hdr.reth.va = hdr.reth.va + va_delta;
        hdr.ipv4.src_addr = src_addr;
        hdr.udp.src_port = src_port;
        hdr.ipv4.dst_addr = dst_addr;
        hdr.udp.dst_port = dst_port;
    }
    action lane_miss() { meta.drop = 1; }
    table mirror_lane {
        key = {
            meta.mirror_set: exact;
            meta.mirror_backup: exact;
        }
        actions = { lane; lane_miss; }
        default_action = lane_miss();
        size = TABLE_MIRROR_LANE_SIZE;
    }

    apply {
        mirror_lane.apply();
        if (meta.mirror_copies == 1) {
            if (meta.mirror_backup == 0) {
                DMKV_EXEC(next0_take, (bit<32>)meta.mirror_set, q)
                DMKV_EXEC(bpsn0_write, (bit<32>)meta.conn, q)
            } else {
                DMKV_EXEC(next1_take, (bit<32>)meta.mirror_set, q)
                DMKV_EXEC(bpsn1_write, (bit<32>)meta.conn, q)
            }
            // mirror_owner*[set << 8 | q & 0xFF] = conn | 0x100 (the owner registers are
            // MirrorLanes'; see the note on gress above).
        } else {
            if (meta.mirror_backup == 0) { DMKV_EXEC(bpsn0_read, (bit<32>)meta.conn, q) }
            else { DMKV_EXEC(bpsn1_read, (bit<32>)meta.conn, q) }
            // Skipped when mirror_acked* of the set covers q (see the note on gress).
        }
        hdr.bth.psn = (bit<24>)q;
    }
}

#endif  // DMKV_MIRROR_WRITE_P4
