// ReadBalance: READs of replicated, immutable data served by a member of the replica set
// the switch picks (src/functions/read_balance.rs, docs/zero-sided.md "Load-balanced
// READs").
//
// A client marks a READ balanceable by sending it to the primary under the set's read
// alias key (table balance_rkey). The set's cursor (lb_cursor) picks a member round
// robin among those that serve (the primary always; a backup when its serving bit is
// set — a syncing backup's is clear). The primary's READ goes on under the real key.
// A backup's READ leaves on the switch's read lane to it (balance_lane, its PSNs in
// lb_next0/1), at the same offset of the backup's region under the backup's key, and a
// filler — a 0-byte WRITE at the READ's PSN — goes to the primary on the client's QP in
// its place. The backup's READ RESPONSE ONLY comes back on the lane (balance_answer),
// finds its client by lb_owner0/1 and leaves as the response at the client's PSN.
//
// lb_map remembers, per connection and client PSN slot, which member served a READ (a
// retransmission goes to the same member: a READ a filler replaced must never reach the
// primary as a READ) and whether the lane answered its lane PSN (lb_mapq): while it has
// not, a retransmission reuses that lane PSN, which fills the gap a READ lost on the
// lane leaves; once the backup refused it (a duplicate it no longer remembers), the next
// retransmission takes a fresh one. A client PSN older than its slot's record is
// dropped. A READ longer than one response packet (LB_MAX_LEN, the client's MTU) is
// dropped. The primary's sequence NAK at a PSN a backup served means the filler was
// lost: it is turned around into the filler (lb_fill_key, lb_fill_va: the connection's
// last balanced READ).
//
// Two places: BalanceClassify before Route (balance_rkey swaps the alias key — the model
// does it after Route, before Scope, which is the same for the key; balance_answer
// recognises lane answers, which skip Route and Scope), and ReadBalance once per packet
// after Scope (lane answers, balanced READs and the primary's sequence NAKs: every
// lb_* register is touched at most once per packet, in the order lb_cursor → lb_map →
// lb_next* → lb_mapq → lb_owner* → lb_fill_key → lb_fill_va).
//
// What Tofino cannot do as the model does (stated plainly; no compiler here):
// * the filler beside a lane READ is a second packet: an ingress-to-egress mirror of
//   the READ (meta.lb_filler) that egress rewrites (BalanceFiller) with the bridged
//   key, address, QPN and the primary's addressing; the model emits it directly.
// * a lane's refusal marks lb_map answered only when lb_mapq still names the refused
//   lane PSN; lb_mapq comes after lb_map in the stage order, so on Tofino that check
//   takes a second pass (recirculation). Written here without the check.
// * a lane answer needs the client's addressing, which the model reads from
//   conn_client. A P4 table is applied in one control, so this control has a copy,
//   balance_client, into which the control plane must write every conn_client entry.
//   The soft switch's control plane does not (its model reads conn_client).
// * lb_cursor's choice and lb_map's decision have more branches than one stateful ALU
//   evaluates; a compiling version precomputes the comparisons into metadata or splits
//   the actions.
// * the model also requires a serving backup to have a balance_lane entry; here the
//   control plane sets a serving bit only with the lane installed.
// * va + va_delta is a 64-bit add (two 32-bit adds with a carry in a second stage).
#ifndef DMKV_READ_BALANCE_P4
#define DMKV_READ_BALANCE_P4

const bit<2> LB_NONE = 0;
const bit<2> LB_READ = 1;
const bit<2> LB_ANSWER = 2;
const bit<2> LB_DONE = 3;  // left on a read lane, or a NAK turned into the filler

// Before Route: a READ under a read alias key, or an answer on a read lane.
control BalanceClassify(inout headers_t hdr, inout dmkv_meta_t meta, in bit<9> ingress_port) {
    action balance(bit<5> set, bit<32> rkey, bit<2> backups, bit<2> serving) {
        hdr.reth.rkey = rkey;
        meta.lb_kind = LB_READ;
        meta.lb_set = set;
        meta.lb_backups = backups;
        meta.lb_serving = serving;
    }
    action not_balanced() {}
    table balance_rkey {
        key = { hdr.reth.rkey: exact; }
        actions = { balance; not_balanced; }
        default_action = not_balanced();
        size = TABLE_BALANCE_RKEY_SIZE;
    }

    action read_lane_answer(bit<5> set, bit<1> backup) {
        meta.lb_kind = LB_ANSWER;
        meta.lb_set = set;
        meta.lb_backup = (bit<8>)backup;
        meta.drop = 1;
    }
    action lane_miss() {}
    table balance_answer {
        key = {
            hdr.ipv4.src_addr: exact;
            hdr.udp.src_port: exact;
            hdr.bth.dest_qpn: exact;
        }
        actions = { read_lane_answer; lane_miss; }
        default_action = lane_miss();
        size = TABLE_BALANCE_ANSWER_SIZE;
    }

    apply {
        meta.lb_kind = LB_NONE;
        if (ingress_port == PORT_MEMNODE) {
            balance_answer.apply();
        } else if (hdr.bth.opcode == OP_READ_REQUEST && hdr.reth.isValid()) {
            balance_rkey.apply();
        }
    }
}

// After Scope, once per packet: a lane answer (meta.lb_kind == LB_ANSWER), a tagged READ
// (LB_READ), or the primary's sequence NAK on a client connection.
control ReadBalance(inout headers_t hdr, inout dmkv_meta_t meta, in bit<9> ingress_port) {
    DECLARE_REG_LB_CURSOR
    DECLARE_REG_LB_MAP
    DECLARE_REG_LB_MAPQ
    DECLARE_REG_LB_NEXT0
    DECLARE_REG_LB_NEXT1
    DECLARE_REG_LB_OWNER0
    DECLARE_REG_LB_OWNER1
    DECLARE_REG_LB_FILL_KEY
    DECLARE_REG_LB_FILL_VA

    bit<32> p = 0;          // the client PSN
    bit<32> q = 0;          // the lane PSN
    bit<2> chosen = 0;      // member: 0 the primary, b + 1 backup b
    bit<32> decided = 0;    // lb_map's old cell | class << 30
    bit<32> owner_lo = 0;
    bit<32> owner_hi = 0;
    bit<32> cell_index = 0;

    // Round robin from the cursor over the members that serve (the primary always).
    DMKV_ACTION(lb_cursor, cursor_take, bit<32>, bit<2>,
        if (cell == 1 && meta.lb_serving[0:0] == 1) { rv = 1; cell = 2; }
        else if (cell == 1 && meta.lb_serving[1:1] == 1) { rv = 2; cell = 0; }
        else if (cell == 2 && meta.lb_serving[1:1] == 1) { rv = 2; cell = 0; }
        else { rv = 0; cell = 1; })
    // Class 1: a first transmission (the cell now records the chosen member); 2: a
    // retransmission (answered bit cleared, the old cell returned); 3: stale.
    DMKV_ACTION(lb_map, map_decide, bit<32>, bit<32>,
        bit<24> owner = cell[23:0];
        if (cell & PSN_VALID != 0 && owner == p[23:0]) {
            rv = cell | 0x80000000;
            cell = cell & ~LB_MAP_ANSWERED;
        } else if (cell & PSN_VALID != 0 && PSN_GT(owner, p[23:0])) {
            rv = 0xC0000000;
        } else {
            cell = p | PSN_VALID | ((bit<32>)chosen << LB_MAP_MEMBER_SHIFT);
            rv = cell | 0x40000000;
        })
    DMKV_ACTION(lb_map, map_answered, bit<32>, bit<32>,
        if (cell & PSN_VALID != 0 && cell[23:0] == p[23:0]) { cell = cell | LB_MAP_ANSWERED; }
        rv = cell;)
    DMKV_ACTION(lb_map, map_read, bit<32>, bit<32>, rv = cell;)
    DMKV_ACTION(lb_next0, next0_take, bit<32>, bit<32>, rv = cell; cell = (cell + 1) & 0xFFFFFF;)
    DMKV_ACTION(lb_next1, next1_take, bit<32>, bit<32>, rv = cell; cell = (cell + 1) & 0xFFFFFF;)
    DMKV_ACTION(lb_mapq, mapq_write, bit<32>, bit<32>, cell = q; rv = q;)
    DMKV_ACTION(lb_mapq, mapq_read, bit<32>, bit<32>, rv = cell;)
    DMKV_PAIR_ACTION(lb_owner0, owner0_write, bit<32>,
        cell.lo = (bit<32>)meta.conn | (p << 8); cell.hi = q | PSN_VALID; rv = 0;)
    DMKV_PAIR_ACTION(lb_owner1, owner1_write, bit<32>,
        cell.lo = (bit<32>)meta.conn | (p << 8); cell.hi = q | PSN_VALID; rv = 0;)
    DMKV_PAIR_ACTION(lb_owner0, owner0_read, bit<32>,
        if (cell.hi == q | PSN_VALID) { rv = cell.lo; } else { rv = 0xFFFFFFFF; })
    DMKV_PAIR_ACTION(lb_owner1, owner1_read, bit<32>,
        if (cell.hi == q | PSN_VALID) { rv = cell.lo; } else { rv = 0xFFFFFFFF; })
    DMKV_PAIR_ACTION(lb_fill_key, fill_key_write, bit<32>,
        cell.lo = hdr.reth.rkey; cell.hi = (bit<32>)hdr.bth.dest_qpn; rv = 0;)
    DMKV_PAIR_ACTION(lb_fill_key, fill_key_read_lo, bit<32>, rv = cell.lo;)
    DMKV_PAIR_ACTION(lb_fill_va, fill_va_write, bit<32>,
        cell.lo = hdr.reth.va[31:0]; cell.hi = hdr.reth.va[63:32]; rv = 0;)
    DMKV_PAIR_ACTION(lb_fill_va, fill_va_read_lo, bit<32>, rv = cell.lo;)

    action read_lane(bit<32> src_addr, bit<16> src_port, bit<32> dst_addr, bit<16> dst_port,
                     bit<24> qpn, bit<32> rkey, bit<64> va_delta) {
        hdr.bth.dest_qpn = qpn;
        hdr.bth.ack_req = 1;
        hdr.reth.rkey = rkey;
        hdr.reth.va = hdr.reth.va + va_delta;
        hdr.ipv4.src_addr = src_addr;
        hdr.udp.src_port = src_port;
        hdr.ipv4.dst_addr = dst_addr;
        hdr.udp.dst_port = dst_port;
        hdr.ipv4.identification = 0;
        hdr.ipv4.flags = 2;  // DF
    }
    action read_lane_miss() { meta.drop = 1; }
    table balance_lane {
        key = {
            meta.lb_set: exact;
            meta.lb_backup: exact;
        }
        actions = { read_lane; read_lane_miss; }
        default_action = read_lane_miss();
        size = TABLE_BALANCE_LANE_SIZE;
    }

    // A copy of conn_client (see the note above): the client's addressing.
    action to_client(bit<32> src_addr, bit<16> src_port, bit<32> dst_addr, bit<16> dst_port,
                     bit<24> client_qpn) {
        hdr.ipv4.src_addr = src_addr;
        hdr.udp.src_port = src_port;
        hdr.ipv4.dst_addr = dst_addr;
        hdr.udp.dst_port = dst_port;
        hdr.bth.dest_qpn = client_qpn;
        hdr.ipv4.identification = 0;
        hdr.ipv4.flags = 2;  // DF
    }
    action client_miss() {}
    table balance_client {
        key = { meta.conn: exact; }
        actions = { to_client; client_miss; }
        default_action = client_miss();
        size = TABLE_BALANCE_CLIENT_SIZE;
    }

    apply {
        if (meta.lb_kind == LB_ANSWER) {
            // A backup's answer on a read lane (already marked dropped).
            q = (bit<32>)hdr.bth.psn;
            bool response = hdr.bth.opcode == OP_READ_RESPONSE_ONLY;
            bool refused = hdr.bth.opcode == OP_ACKNOWLEDGE && hdr.aeth.syndrome[7:5] == 3
                && hdr.aeth.syndrome != SYNDROME_NAK_PSN_SEQUENCE;
            if (!response && !refused) { return; }
            cell_index = ((bit<32>)meta.lb_set << 8) | (q & 0xFF);
            if (meta.lb_backup == 0) { DMKV_EXEC(owner0_read, cell_index, owner_lo) }
            else { DMKV_EXEC(owner1_read, cell_index, owner_lo) }
            if (owner_lo == 0xFFFFFFFF) { return; }  // no client: an orphan
            meta.conn = (conn_id_t)owner_lo[7:0];
            p = (bit<32>)owner_lo[31:8];
            if (refused) {
                // The backup refused a duplicate it no longer remembers: the READ's next
                // retransmission takes a fresh lane PSN (see the note on lb_mapq above).
                cell_index = ((bit<32>)meta.conn << 6) | (p & 0x3F);
                DMKV_EXEC(map_answered, cell_index, decided)
                return;
            }
            if (!balance_client.apply().hit) { return; }
            hdr.bth.psn = p[23:0];
            hdr.bth.ack_req = 0;
            hdr.aeth.syndrome = SYNDROME_ACK | 31;
            hdr.aeth.msn = 0;
            meta.dir = DIR_DOWN;
            meta.egress_port = PORT_CLIENT;
            meta.answered = 1;
            meta.drop = 0;
            return;
        }
        if (meta.lb_kind == LB_READ) {
            if (meta.drop == 1) { return; }  // refused by Scope
            if (hdr.reth.dma_len == 0 || hdr.reth.dma_len > LB_MAX_LEN
                || hdr.reth.dma_len > ((bit<32>)1 << meta.pmtu_log2)) {
                meta.drop = 1;  // counted `refused`
                return;
            }
            p = (bit<32>)hdr.bth.psn;
            DMKV_EXEC(cursor_take, (bit<32>)meta.lb_set, chosen)
            cell_index = ((bit<32>)meta.conn << 6) | (p & 0x3F);
            DMKV_EXEC(map_decide, cell_index, decided)
            if (decided[31:30] == 3) { meta.drop = 1; return; }  // stale
            bit<2> member = (bit<2>)(decided >> LB_MAP_MEMBER_SHIFT);
            if (member == 0) { return; }  // the primary: as any READ
            meta.lb_backup = (bit<8>)(member - 1);
            bool reuse = decided[31:30] == 2 && decided & LB_MAP_ANSWERED == 0;
            if (!reuse) {
                if (meta.lb_backup == 0) { DMKV_EXEC(next0_take, (bit<32>)meta.lb_set, q) }
                else { DMKV_EXEC(next1_take, (bit<32>)meta.lb_set, q) }
                DMKV_EXEC(mapq_write, cell_index, q)
            } else {
                DMKV_EXEC(mapq_read, cell_index, q)
            }
            bit<32> unused = 0;
            bit<32> owner_index = ((bit<32>)meta.lb_set << 8) | (q & 0xFF);
            if (meta.lb_backup == 0) { DMKV_EXEC(owner0_write, owner_index, unused) }
            else { DMKV_EXEC(owner1_write, owner_index, unused) }
            DMKV_EXEC(fill_key_write, (bit<32>)meta.conn, unused)
            DMKV_EXEC(fill_va_write, (bit<32>)meta.conn, unused)
            // The filler on the primary: the shim mirrors this packet (I2E) and
            // BalanceFiller rewrites the copy in egress.
            meta.lb_filler = 1;
            meta.lb_filler_psn = p[23:0];
            meta.lb_filler_qpn = hdr.bth.dest_qpn;
            meta.lb_filler_rkey = hdr.reth.rkey;
            meta.lb_filler_va = hdr.reth.va;
            meta.lb_filler_src_addr = hdr.ipv4.src_addr;
            meta.lb_filler_src_port = hdr.udp.src_port;
            meta.lb_filler_dst_addr = hdr.ipv4.dst_addr;
            meta.lb_filler_dst_port = hdr.udp.dst_port;
            // The READ itself leaves on the lane.
            balance_lane.apply();
            hdr.bth.psn = q[23:0];
            meta.egress_port = PORT_MEMNODE;
            meta.dir = DIR_UP;
            meta.lb_kind = LB_DONE;
            return;
        }
        // The primary's sequence NAK at a PSN whose READ a backup served: the filler
        // there was lost; it goes up again in the NAK's place.
        if (ingress_port != PORT_MEMNODE || hdr.bth.opcode != OP_ACKNOWLEDGE
            || hdr.aeth.syndrome != SYNDROME_NAK_PSN_SEQUENCE) { return; }
        p = (bit<32>)hdr.bth.psn;
        cell_index = ((bit<32>)meta.conn << 6) | (p & 0x3F);
        DMKV_EXEC(map_read, cell_index, decided)
        if (decided & PSN_VALID == 0 || decided[23:0] != p[23:0]
            || (decided >> LB_MAP_MEMBER_SHIFT) & 3 == 0) { return; }
        bit<32> rkey = 0;
        bit<32> va_lo = 0;
        DMKV_EXEC(fill_key_read_lo, (bit<32>)meta.conn, rkey)
        DMKV_EXEC(fill_va_read_lo, (bit<32>)meta.conn, va_lo)
        // (The hi halves — the QPN and the address's upper word — come from the same
        // paired cells: one dual-width read each on Tofino.)
        hdr.bth.opcode = OP_WRITE_ONLY;
        hdr.bth.ack_req = 1;
        hdr.reth.setValid();
        hdr.reth.rkey = rkey;
        hdr.reth.va[31:0] = va_lo;
        hdr.reth.dma_len = 0;
        hdr.aeth.setInvalid();
        hdr.ipv4.src_addr = meta.ingress_dst_addr;
        hdr.ipv4.dst_addr = meta.ingress_src_addr;
        hdr.udp.src_port = meta.ingress_dst_port;
        hdr.udp.dst_port = meta.ingress_src_port;
        bit<48> mac = hdr.ethernet.src_addr;
        hdr.ethernet.src_addr = hdr.ethernet.dst_addr;
        hdr.ethernet.dst_addr = mac;
        hdr.ipv4.total_len = 20 + 8 + 12 + 16 + 4;
        hdr.udp.length = 8 + 12 + 16 + 4;
        meta.egress_port = PORT_MEMNODE;
        meta.dir = DIR_UP;
        meta.answered = 1;
        meta.lb_kind = LB_DONE;
    }
}

// Egress, on the mirrored copy of a READ that left on a read lane (meta.lb_filler): the
// filler at the READ's PSN on the client's QP to the primary.
control BalanceFiller(inout headers_t hdr, inout dmkv_meta_t meta) {
    apply {
        hdr.bth.opcode = OP_WRITE_ONLY;
        hdr.bth.dest_qpn = meta.lb_filler_qpn;
        hdr.bth.psn = meta.lb_filler_psn;
        hdr.bth.ack_req = 1;
        hdr.reth.rkey = meta.lb_filler_rkey;
        hdr.reth.va = meta.lb_filler_va;
        hdr.reth.dma_len = 0;
        hdr.ipv4.identification = 0;
        hdr.ipv4.flags = 2;  // DF
        // The copy carries the lane's addressing (mirrored at the ingress deparser):
        // back to the primary's, bridged from before balance_lane.
        hdr.ipv4.src_addr = meta.lb_filler_src_addr;
        hdr.udp.src_port = meta.lb_filler_src_port;
        hdr.ipv4.dst_addr = meta.lb_filler_dst_addr;
        hdr.udp.dst_port = meta.lb_filler_dst_port;
        hdr.ipv4.total_len = 20 + 8 + 12 + 16 + 4;
        hdr.udp.length = 8 + 12 + 16 + 4;
    }
}

#endif  // DMKV_READ_BALANCE_P4
