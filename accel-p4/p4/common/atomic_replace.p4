// AtomicReplace: atomics on tracked lock words multiplexed onto one upstream QP per
// memnode; a CAS/FAA whose outcome the cached value decides goes up as an 8-byte WRITE
// of the outcome; the WRITE's ACK comes back as an ATOMIC ACK with the original value.
// Mirrors src/functions/atomic_replace.rs (same registers, one action per register per
// packet). Each diverted request also leaves a *filler* on the client's own QP (a 0-byte
// WRITE at its PSN, `conn_filler`): on Tofino an ingress-to-egress mirror of the
// request whose egress rewrites it into the filler (meta.filler carries the PSN). Responses on a multiplexed QP take two passes on hardware: pass 1 (this
// control, `map_down`) finds the connection in mux_ring / mux_resend / repl_up and
// recirculates with meta.conn set; pass 2 runs SwitchAtomics (client PSN/MSN) and the
// conversion. The model runs both back to back.
#ifndef DMKV_ATOMIC_REPLACE_P4
#define DMKV_ATOMIC_REPLACE_P4

#define REPL_SLOT_FILL 0x10000
#define REPL_SLOT_FAA 0x20000
#define REPL_UP_FILL 0x10000000

// Before SwitchAtomics: which atomics are on tracked words (table only).
control ReplaceClassify(inout headers_t hdr, inout dmkv_meta_t meta, in bit<9> ingress_port) {
    action tracked(bit<32> slot, bit<2> mux) {
        meta.intercept = INTERCEPT_DIVERT;
        meta.lock_slot = slot;
        meta.mux = mux;
    }
    action untracked() { }
    table tracked_lock {
        key = { hdr.atomic_eth.rkey: exact; hdr.atomic_eth.va: exact; }
        actions = { tracked; untracked; }
        default_action = untracked();
        size = TABLE_TRACKED_LOCK_SIZE;
    }
    // Responses on a multiplexed QP (consulted by Route on a route_down miss).
    action from_mux(bit<2> mux) {
        meta.from_mux = 1; meta.mux = mux; meta.routed = 1; meta.drop = 0; meta.dir = DIR_DOWN;
    }
    action miss() { }
    table mux_down {
        key = { hdr.ipv4.src_addr: exact; hdr.udp.src_port: exact; hdr.bth.dest_qpn: exact; }
        actions = { from_mux; miss; }
        default_action = miss();
        size = TABLE_MUX_DOWN_SIZE;
    }
    apply {
        if (ingress_port != PORT_CLIENT && meta.routed == 0) {
            // A route_down miss: a response on a multiplexed QP?
            mux_down.apply();
        } else if ((meta.mode & MODE_ATOMIC_REPLACE) != 0 && meta.dir == DIR_UP
                && hdr.atomic_eth.isValid()) {
            tracked_lock.apply();
        }
    }
}

control AtomicReplace(inout headers_t hdr, inout dmkv_meta_t meta) {
    DECLARE_REG_MUX_NEXT_PSN
    DECLARE_REG_MUX_RING
    DECLARE_REG_MUX_RESEND
    DECLARE_REG_REPL_UP
    DECLARE_REG_REPL_SLOT
    DECLARE_REG_REPL_ORIG
    DECLARE_REG_REPL_CMP
    DECLARE_REG_REPL_SWP
    DECLARE_REG_LOCK_STATE
    DECLARE_REG_LOCK_WORD

    bit<32> tmp;
    bit<32> lo;
    bit<32> hi;
    bit<24> a;
    bit<32> ring_conn;

    // ---- stage 1: mux_next_psn (allocate) -------------------------------------------
    DMKV_ACTION(mux_next_psn, psn_alloc, bit<32>, bit<32>,
        rv = cell;
        cell = (bit<32>)(cell[23:0] + 1) | PSN_VALID;
    )
    // ---- stage 2: mux_ring (upstream PSN -> conn) -----------------------------------
    DMKV_ACTION(mux_ring, ring_write, bit<32>, bit<32>,
        cell = (bit<32>)meta.upsn << 8 | (bit<32>)meta.conn;
        rv = 0;
    )
    DMKV_ACTION(mux_ring, ring_read, bit<32>, bit<32>,
        rv = (cell[31:8] == a) ? (32w1 << 8 | (bit<32>)cell[7:0]) : 32w0;
    )
    // ---- stage 3: mux_resend ----------------------------------------------------------
    DMKV_PAIR_ACTION(mux_resend, resend_set, bit<32>,
        cell.lo = (bit<32>)meta.upsn | PSN_VALID;
        cell.hi = (bit<32>)meta.conn;
        rv = 0;
    )
    DMKV_PAIR_ACTION(mux_resend, resend_take, bit<32>,
        rv = 0;
        if (cell.lo & PSN_VALID != 0 && !PSN_LT(a, cell.lo[23:0])) {
            rv = 32w1 << 8 | cell.hi;
            cell.lo = 0;
            cell.hi = 0;
        }
    )
    // ---- stage 4: lock_state (cached, or the last unconverted atomic's PSN) ---------
    DMKV_ACTION(lock_state, state_up, bit<32>, bit<32>,
        rv = cell;
        if (cell & LOCK_CACHED == 0) { cell = (bit<32>)meta.upsn | PSN_VALID; }
    )
    DMKV_ACTION(lock_state, state_fill, bit<32>, bit<32>,
        rv = 0;
        if (cell & LOCK_CACHED == 0 && cell == ((bit<32>)a | PSN_VALID)) {
            cell = LOCK_CACHED;
            rv = 1;
        }
    )
    // ---- stage 5: repl_up -------------------------------------------------------------
    DMKV_ACTION(repl_up, up_write, bit<32>, bit<32>,
        cell = (bit<32>)meta.upsn | PSN_VALID | (bit<32>)meta.mux << 25 | tmp;
        rv = 0;
    )
    DMKV_ACTION(repl_up, up_read, bit<32>, bit<32>, rv = cell;)
    // ---- stage 6: lock_word (CAS compares both halves; FAA carries lo -> hi) -------
    DMKV_PAIR_ACTION(lock_word, word_cas, bit<32>,
        hi = cell.hi;
        rv = cell.lo;
        if (cell.lo == hdr.atomic_eth.compare[31:0] && cell.hi == hdr.atomic_eth.compare[63:32]) {
            cell.lo = hdr.atomic_eth.swap_add[31:0];
            cell.hi = hdr.atomic_eth.swap_add[63:32];
        }
    )
    DMKV_PAIR_ACTION(lock_word, word_faa, bit<32>,
        hi = cell.hi;
        rv = cell.lo;
        bit<32> carry = (cell.lo > ~hdr.atomic_eth.swap_add[31:0]) ? 32w1 : 32w0;
        cell.lo = cell.lo + hdr.atomic_eth.swap_add[31:0];
        cell.hi = cell.hi + hdr.atomic_eth.swap_add[63:32] + carry;
    )
    DMKV_PAIR_ACTION(lock_word, word_set, bit<32>,
        cell.lo = lo;
        cell.hi = hi;
        rv = 0;
    )
    // ---- stages 7-10: per-connection map state ---------------------------------------
    DMKV_ACTION(repl_slot, slot_write, bit<32>, bit<32>, cell = tmp; rv = 0;)
    DMKV_ACTION(repl_slot, slot_read, bit<32>, bit<32>, rv = cell;)
    DMKV_PAIR_ACTION(repl_orig, orig_write, bit<32>, cell.lo = lo; cell.hi = hi; rv = 0;)
    DMKV_PAIR_ACTION(repl_orig, orig_read, bit<32>, hi = cell.hi; rv = cell.lo;)
    DMKV_PAIR_ACTION(repl_cmp, cmp_write, bit<32>,
        cell.lo = hdr.atomic_eth.compare[31:0]; cell.hi = hdr.atomic_eth.compare[63:32]; rv = 0;)
    DMKV_PAIR_ACTION(repl_cmp, cmp_read, bit<32>, rv = cell.lo;)
    DMKV_PAIR_ACTION(repl_swp, swp_write, bit<32>,
        cell.lo = hdr.atomic_eth.swap_add[31:0]; cell.hi = hdr.atomic_eth.swap_add[63:32]; rv = 0;)
    DMKV_PAIR_ACTION(repl_swp, swp_read, bit<32>, rv = cell.lo;)

    // Multiplexed QPs: addressing of the memnode's responder QP.
    action to_mux(bit<32> src_addr, bit<16> src_port, bit<32> dst_addr, bit<16> dst_port,
                  bit<24> memnode_qpn) {
        hdr.ipv4.src_addr = src_addr;
        hdr.udp.src_port = src_port;
        hdr.ipv4.dst_addr = dst_addr;
        hdr.udp.dst_port = dst_port;
        hdr.bth.dest_qpn = memnode_qpn;
        meta.egress_port = PORT_MEMNODE;
    }
    table mux_up {
        key = { meta.mux: exact; }
        actions = { to_mux; NoAction; }
        size = TABLE_MUX_UP_SIZE;
    }
    action to_client(bit<32> src_addr, bit<16> src_port, bit<32> dst_addr, bit<16> dst_port,
                     bit<24> client_qpn) {
        hdr.ipv4.src_addr = src_addr;
        hdr.udp.src_port = src_port;
        hdr.ipv4.dst_addr = dst_addr;
        hdr.udp.dst_port = dst_port;
        hdr.bth.dest_qpn = client_qpn;
        meta.egress_port = PORT_CLIENT;
    }
    table conn_client {
        key = { meta.conn: exact; }
        actions = { to_client; NoAction; }
        size = TABLE_CONN_CLIENT_SIZE;
    }
    // The filler: a 0-byte WRITE at the diverted request's PSN on the client's own QP
    // (applied to the mirrored copy in egress; also to a sequence NAK for a missing
    // filler, which is turned around towards the memnode).
    action filler(bit<32> rkey, bit<64> va, bit<24> memnode_qpn) {
        hdr.bth.opcode = OP_WRITE_ONLY;
        hdr.bth.dest_qpn = memnode_qpn;
        hdr.bth.ack_req = 1;
        hdr.reth.setValid();
        hdr.reth.va = va;
        hdr.reth.rkey = rkey;
        hdr.reth.dma_len = 0;
        hdr.atomic_eth.setInvalid();
        hdr.aeth.setInvalid();
        hdr.payload_word.setInvalid();
    }
    table conn_filler {
        key = { meta.conn: exact; }
        actions = { filler; NoAction; }
        size = TABLE_CONN_FILLER_SIZE;
    }

    apply {
        bit<32> c = (bit<32>)meta.conn;
        bit<32> ring_idx;
        if (meta.filler_instead == 1) {
            // SwitchAtomics: a retransmitted or deferred request while the memnode still
            // misses the last filler: the filler goes up in the request's place.
            if (!conn_filler.apply().hit) { meta.drop = 1; return; }
            hdr.bth.psn = meta.filler_psn;
            meta.intercept = INTERCEPT_NONE;  // later stages leave the filler alone
            meta.tuple = 0xFFFFFFFF;
            // Request headers → BTH + RETH, no payload.
            hdr.ipv4.total_len = 20 + 8 + 12 + 16 + 4;
            hdr.udp.length = 8 + 12 + 16 + 4;
            meta.egress_port = PORT_MEMNODE;
            return;
        }
        if (meta.resend_filler == 1) {
            // A sequence NAK for the last filler: turned around as the filler (same PSN).
            if (!conn_filler.apply().hit) { meta.drop = 1; return; }
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
            return;
        }
        // meta.filler_extra: the shim mirrors the packet (I2E) and egress rewrites the
        // copy with the egress copy of conn_filler at meta.filler_psn, like the filler of
        // a diverted request.
        if (meta.from_mux == 1 && meta.converted == 0) {
            // Pass 1: which connection does this response answer?
            a = hdr.bth.psn;
            if (!hdr.aeth.isValid() || hdr.aeth.syndrome != SYNDROME_ACK) { meta.drop = 1; return; }
            ring_idx = (bit<32>)meta.mux * MUX_RING + (bit<32>)a[9:0];
            DMKV_EXEC(ring_read, ring_idx, ring_conn)
            DMKV_EXEC(resend_take, (bit<32>)meta.mux, tmp)
            if (tmp[8:8] == 1) { ring_conn = tmp; }
            if (ring_conn[8:8] == 0) { meta.drop = 1; return; }
            meta.conn = ring_conn[7:0];
            DMKV_EXEC(up_read, (bit<32>)meta.conn, tmp)
            if (tmp & PSN_VALID == 0 || PSN_LT(a, tmp[23:0])) { meta.drop = 1; return; }
            if (tmp & REPL_UP_FILL != 0 && hdr.bth.opcode != OP_ATOMIC_ACKNOWLEDGE) {
                meta.drop = 1; return;
            }
            meta.converted = 1;
            meta.recirculate = 1;
            return;
        }
        if (meta.dir == DIR_UP && meta.intercept == INTERCEPT_DIVERT && meta.admitted == 1) {
            if (meta.replay == 1 && meta.pending == 0) {
                DMKV_EXEC(orig_read, c, lo)
                // SwitchAtomics' to_answer turns it into the ATOMIC ACK (model: answer_atomic).
                hdr.atomic_ack_eth.setValid();
                hdr.atomic_ack_eth.original = hi ++ lo;
                meta.answered = 1;
                return;
            }
            if (meta.replay == 1) {
                DMKV_EXEC(up_read, c, tmp)
                meta.upsn = tmp[23:0];
                DMKV_EXEC(resend_set, (bit<32>)meta.mux, tmp)
                DMKV_EXEC(orig_read, c, lo)
            } else {
                DMKV_EXEC(psn_alloc, (bit<32>)meta.mux, tmp)
                meta.upsn = tmp[23:0];
                ring_idx = (bit<32>)meta.mux * MUX_RING + (bit<32>)meta.upsn[9:0];
                DMKV_EXEC(ring_write, ring_idx, tmp)
                DMKV_EXEC(state_up, meta.lock_slot, tmp)
                bit<1> cached = (tmp & LOCK_CACHED != 0) ? 1w1 : 1w0;
                tmp = (cached == 1) ? 32w0 : REPL_UP_FILL;
                DMKV_EXEC(up_write, c, tmp)
                if (cached == 1) {
                    if (hdr.bth.opcode == OP_COMPARE_SWAP) {
                        DMKV_EXEC(word_cas, meta.lock_slot, lo)
                    } else {
                        DMKV_EXEC(word_faa, meta.lock_slot, lo)
                    }
                }
                tmp = meta.lock_slot | ((cached == 1) ? 32w0 : REPL_SLOT_FILL);
                DMKV_EXEC(slot_write, c, tmp)
                DMKV_EXEC(orig_write, c, tmp)
                DMKV_EXEC(cmp_write, c, tmp)
                DMKV_EXEC(swp_write, c, tmp)
                if (cached == 0) {
                    // Unconverted: the atomic goes up as itself.
                    hdr.bth.psn = meta.upsn;
                    mux_up.apply();
                    return;
                }
            }
            // The WRITE of the outcome (CAS: swap if original == compare; FAA: sum).
            bit<64> orig = hi ++ lo;
            bit<64> value = orig;
            if (hdr.bth.opcode == OP_FETCH_ADD) {
                value = orig + hdr.atomic_eth.swap_add;
            } else if (orig == hdr.atomic_eth.compare) {
                value = hdr.atomic_eth.swap_add;
            }
            hdr.reth.setValid();
            hdr.reth.va = hdr.atomic_eth.va;
            hdr.reth.rkey = hdr.atomic_eth.rkey;
            hdr.reth.dma_len = 8;
            hdr.payload_word.setValid();
            // Little-endian in memory: byte-swapped by the deparser action (omitted).
            hdr.payload_word.word = value;
            hdr.atomic_eth.setInvalid();
            hdr.bth.opcode = OP_WRITE_ONLY;
            hdr.bth.psn = meta.upsn;
            hdr.bth.ack_req = 1;
            hdr.ipv4.total_len = hdr.ipv4.total_len - 4;
            hdr.udp.length = hdr.udp.length - 4;
            mux_up.apply();
        } else if (meta.converted == 1) {
            // Pass 2: SwitchAtomics has set the client PSN and MSN.
            DMKV_EXEC(slot_read, c, tmp)
            if (tmp & REPL_SLOT_FILL != 0) {
                a = meta.upsn;
                DMKV_EXEC(state_fill, tmp & 0xFFFF, lo)
                // On a fill the ATOMIC ACK's original (plus the stored operands) becomes
                // the cached value: word_set after cmp_read/swp_read (omitted: as model).
                DMKV_EXEC(orig_write, c, tmp)
            } else {
                DMKV_EXEC(orig_read, c, lo)
                hdr.atomic_ack_eth.setValid();
                hdr.atomic_ack_eth.original = hi ++ lo;
                hdr.bth.opcode = OP_ATOMIC_ACKNOWLEDGE;
                hdr.ipv4.total_len = hdr.ipv4.total_len + 8;
                hdr.udp.length = hdr.udp.length + 8;
            }
            conn_client.apply();
        }
    }
}

#endif  // DMKV_ATOMIC_REPLACE_P4
