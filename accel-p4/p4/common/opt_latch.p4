// OptLatch: switch-assisted optimistic latching (sync seed §5.5, Table 2). Tuple
// versions live in tuple_version (bits 0-22 version, even = free, odd = latched; bits
// 23-31 holder connection + 1). Every packet of a tuple READ response is stamped on its
// own (see src/functions/opt_latch.rs for why one stamp cannot speak for a multi-packet
// response and why a stamp per packet can); Middle and Last packets find their READ
// through read_cursor. Mirrors src/functions/opt_latch.rs.
#ifndef DMKV_OPT_LATCH_P4
#define DMKV_OPT_LATCH_P4

#define CT_VALID 0x80000000
#define CT_WRITE 0x40000000
#define VERSION_MASK 0x7FFFFF

// Payload words are little-endian in memory and on the wire; P4 fields are big-endian.
bit<64> latch_le64(in bit<64> x) {
    return x[7:0] ++ x[15:8] ++ x[23:16] ++ x[31:24]
        ++ x[39:32] ++ x[47:40] ++ x[55:48] ++ x[63:56];
}

// Before SwitchAtomics: latch CASes and version READs (table only).
control LatchClassify(inout headers_t hdr, inout dmkv_meta_t meta) {
    bit<64> va;
    bit<64> off;
    action latched_tuples(bit<64> base_va, bit<8> stride_log2, bit<32> tuples,
                          bit<32> first_tuple) {
        off = va - base_va;
        // Tuple base only: the low stride bits are zero; the shift is by a table
        // constant (one shifter per stride in hardware: the control plane picks it).
        meta.tuple = first_tuple + (bit<32>)(off >> stride_log2);
        if (va < base_va || (off >> stride_log2) >= (bit<64>)tuples) { meta.tuple = 0xFFFFFFFF; }
    }
    action none() { meta.tuple = 0xFFFFFFFF; }
    table latch_region {
        key = { meta.rkey: exact; }  // hdr.reth.rkey or hdr.atomic_eth.rkey
        actions = { latched_tuples; none; }
        default_action = none();
        size = TABLE_LATCH_REGION_SIZE;
    }
    apply {
        meta.tuple = 0xFFFFFFFF;
        if ((meta.mode & MODE_OPT_LATCH) == 0 || meta.intercept != INTERCEPT_NONE) { return; }
        if (hdr.atomic_eth.isValid()) {
            meta.rkey = hdr.atomic_eth.rkey; va = hdr.atomic_eth.va;
        } else if (hdr.reth.isValid()) {
            meta.rkey = hdr.reth.rkey; va = hdr.reth.va;
        } else {
            return;
        }
        latch_region.apply();
        if (meta.tuple == 0xFFFFFFFF || meta.dir != DIR_UP) { return; }
        if (hdr.bth.opcode == OP_COMPARE_SWAP) {
            meta.intercept = INTERCEPT_LATCH;
        } else if (hdr.bth.opcode == OP_READ_REQUEST && hdr.reth.dma_len == 8) {
            meta.intercept = INTERCEPT_READ_VERSION;
        }
    }
}

control OptLatch(inout headers_t hdr, inout dmkv_meta_t meta) {
    DECLARE_REG_TUPLE_VERSION
    DECLARE_REG_CLIENT_TUPLE
    DECLARE_REG_CLIENT_VERSION
    DECLARE_REG_READ_CURSOR

    bit<32> holder;
    bit<32> cell_new;
    bit<32> idx;
    bit<32> v;
    bit<32> then;
    bit<32> first;
    bit<24> psn;

    // ---- stage 0: read_cursor (lo: first PSN of the response in progress | PSN_VALID,
    // hi: the PSN its next packet must have); rv: the READ's first PSN | PSN_VALID, or 0
    DMKV_PAIR_ACTION(read_cursor, cursor_start, bit<32>,
        cell.lo = (bit<32>)psn | PSN_VALID;
        cell.hi = (bit<32>)(psn + 1);
        rv = cell.lo;
    )
    DMKV_PAIR_ACTION(read_cursor, cursor_only, bit<32>,
        cell.lo = 0;
        cell.hi = 0;
        rv = (bit<32>)psn | PSN_VALID;
    )
    // A Middle (or Last, which ends the response) must be exactly the next packet.
    DMKV_PAIR_ACTION(read_cursor, cursor_next, bit<32>,
        rv = 0;
        if (cell.lo & PSN_VALID != 0 && cell.hi[23:0] == psn) {
            rv = cell.lo;
            cell.hi = (bit<32>)(psn + 1);
            if (hdr.bth.opcode == OP_READ_RESPONSE_LAST) { cell.lo = 0; cell.hi = 0; }
        }
    )

    // ---- stage 1: tuple_version ----------------------------------------------------
    DMKV_ACTION(tuple_version, try_latch, bit<32>, bit<32>,
        rv = cell & VERSION_MASK;
        if (cell & 1 == 0) {
            cell = ((cell + 1) & VERSION_MASK) | holder;
        } else {
            rv = rv | 0x80000000;  // refused
        }
    )
    DMKV_ACTION(tuple_version, latch_replay, bit<32>, bit<32>,
        rv = cell & VERSION_MASK;
        if (cell & 1 == 1 && (cell & ~VERSION_MASK) == holder) { rv = rv - 1; } else { rv = rv | 1; }
    )
    DMKV_ACTION(tuple_version, version_read, bit<32>, bit<32>, rv = cell;)
    // The latch lease (control packet): release iff the cell is still the one the
    // control plane saw latched for the whole lease (version and holder).
    DMKV_ACTION(tuple_version, lease_release, bit<32>, bit<32>,
        rv = 0;
        if (cell == hdr.latch_release.cell && cell & 1 == 1) {
            cell = (cell + 1) & VERSION_MASK;
            rv = 1;
        }
    )
    DMKV_ACTION(tuple_version, unlatch, bit<32>, bit<32>,
        rv = 0;
        if (cell & 1 == 1 && (cell & ~VERSION_MASK) == holder) {
            cell = (cell + 1) & VERSION_MASK;
            rv = 1;
        }
    )
    // ---- stage 2: client_tuple (by connection and PSN mod LATCH_PER_CONN) ----------
    DMKV_ACTION(client_tuple, ct_record, bit<32>, bit<32>,
        rv = (cell == cell_new) ? 32w1 : 32w0;
        cell = cell_new;
    )
    DMKV_ACTION(client_tuple, ct_match_read, bit<32>, bit<32>,
        rv = ((cell & 0xFFFF0000) == cell_new) ? (32w1 << 16 | (cell & 0xFFFF)) : 32w0;
    )
    DMKV_ACTION(client_tuple, ct_take_write, bit<32>, bit<32>,
        rv = 0;
        if ((cell & 0xFFFF0000) == cell_new) { rv = 32w1 << 16 | (cell & 0xFFFF); cell = 0; }
    )
    // ---- stage 3: client_version -----------------------------------------------------
    DMKV_ACTION(client_version, cv_store, bit<32>, bit<32>, cell = v; rv = 0;)
    DMKV_ACTION(client_version, cv_read, bit<32>, bit<32>, rv = cell;)

    apply {
        if (hdr.latch_release.isValid()) {
            // From the control plane's lease sweep; answered back to it.
            if (hdr.latch_release.tuple < LATCH_TUPLES) {
                DMKV_EXEC(lease_release, hdr.latch_release.tuple, v)
                hdr.latch_release.result = v;
            } else {
                hdr.latch_release.result = 0;
            }
            meta.egress_port = PORT_CPU;
            return;
        }
        if ((meta.mode & MODE_OPT_LATCH) == 0 || meta.routed == 0) { return; }
        bit<32> c = (bit<32>)meta.conn;
        holder = (c + 1) << 23;
        psn = hdr.bth.psn;  // memnode-side PSN (after SwitchAtomics, up; as received, down)
        idx = c * LATCH_PER_CONN + (bit<32>)psn[7:0];  // LATCH_PER_CONN_LOG2 = 8
        if (meta.dir == DIR_UP && meta.intercept == INTERCEPT_LATCH && meta.admitted == 1) {
            if (meta.replay == 1) {
                DMKV_EXEC(latch_replay, meta.tuple, v)
            } else {
                DMKV_EXEC(try_latch, meta.tuple, v)
                v = v & VERSION_MASK | (v[31:31] == 1 ? 32w1 : 32w0);
            }
            hdr.atomic_ack_eth.setValid();
            hdr.atomic_ack_eth.original = (bit<64>)v;
            meta.answered = 1;  // SwitchAtomics' to_answer builds the ATOMIC ACK
        } else if (meta.dir == DIR_UP && meta.intercept == INTERCEPT_READ_VERSION
                   && meta.admitted == 1) {
            DMKV_EXEC(version_read, meta.tuple, v)
            hdr.payload_word.setValid();
            hdr.payload_word.word = latch_le64((bit<64>)(v & VERSION_MASK));
            hdr.reth.setInvalid();
            hdr.bth.opcode = OP_READ_RESPONSE_ONLY;
            meta.answered = 1;
        } else if (meta.dir == DIR_UP && meta.tuple != 0xFFFFFFFF && hdr.reth.isValid()) {
            bit<1> write = (hdr.bth.opcode == OP_READ_REQUEST) ? 1w0 : 1w1;
            // A WRITE is acknowledged with its last packet's PSN.
            bit<32> at = (bit<32>)psn;
            if (write == 1) {
                at = at + ((hdr.reth.dma_len - 1) >> (bit<8>)meta.pmtu_log2);
                idx = c * LATCH_PER_CONN + (at & (LATCH_PER_CONN - 1));
            }
            cell_new = CT_VALID | ((bit<32>)write << 30) | ((at >> LATCH_PER_CONN_LOG2) & 0x3FFF) << 16 | meta.tuple;
            DMKV_EXEC(ct_record, idx, then)
            if (write == 0) {
                DMKV_EXEC(version_read, meta.tuple, v)
                // A retransmission (same entry) keeps the version its first copy saw:
                // cv_store is then skipped (the model's rmw keeps the old cell).
                if (then == 0) { DMKV_EXEC(cv_store, idx, then) }
            }
        } else if (meta.dir == DIR_DOWN && hdr.payload_word.isValid()
                   && hdr.bth.opcode >= OP_READ_RESPONSE_FIRST
                   && hdr.bth.opcode <= OP_READ_RESPONSE_ONLY) {
            // Every packet of a READ response. Stage 0: which READ it belongs to.
            if (hdr.bth.opcode == OP_READ_RESPONSE_FIRST) {
                DMKV_EXEC(cursor_start, c, first)
            } else if (hdr.bth.opcode == OP_READ_RESPONSE_ONLY) {
                DMKV_EXEC(cursor_only, c, first)
            } else {
                DMKV_EXEC(cursor_next, c, first)
            }
            if (first & PSN_VALID == 0) { return; }  // out of sequence: passes unstamped
            idx = c * LATCH_PER_CONN + (bit<32>)first[7:0];
            cell_new = CT_VALID | (((bit<32>)first[23:0] >> LATCH_PER_CONN_LOG2) & 0x3FFF) << 16;
            DMKV_EXEC(ct_match_read, idx, v)
            if (v[16:16] == 0) { return; }
            // This packet judged on its own: the version now against the version when
            // the READ first went up.
            DMKV_EXEC(version_read, v & 0xFFFF, v)
            DMKV_EXEC(cv_read, idx, then)
            bit<1> valid = (then & 1 == 0 && (v & VERSION_MASK) == (then & VERSION_MASK)) ? 1w1 : 1w0;
            // The packet's payload bytes: UDP length - UDP 8 - BTH 12 - AETH 4 (all but
            // Middle) - ICRC 4.
            bit<16> bytes = hdr.udp.length - ((hdr.aeth.isValid()) ? 16w28 : 16w24);
            hdr.payload_word.word = latch_le64(STAMP_PRESENT
                                    | ((valid == 1) ? 64w0 : STAMP_INVALID)
                                    | (((bit<64>)bytes & STAMP_BYTES_MASK) << STAMP_BYTES_SHIFT)
                                    | (bit<64>)(then & VERSION_MASK));
        } else if (meta.dir == DIR_DOWN && hdr.aeth.isValid()) {
            if (hdr.bth.opcode == OP_ACKNOWLEDGE && hdr.aeth.syndrome == SYNDROME_ACK) {
                cell_new = CT_VALID | CT_WRITE | ((bit<32>)psn >> LATCH_PER_CONN_LOG2 & 0x3FFF) << 16;
                DMKV_EXEC(ct_take_write, idx, v)
                if (v[16:16] == 0) { return; }
                DMKV_EXEC(unlatch, v & 0xFFFF, v)
            }
        }
    }
}

#endif  // DMKV_OPT_LATCH_P4
