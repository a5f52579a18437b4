// SwitchAtomics: connection tracking with PSN/MSN offsets and CAS/FAA on switch-owned
// words answered in half a round trip. Mirrors src/functions/atomics.rs stage by stage
// (same register names, same order, one action per register per packet).
#ifndef DMKV_SWITCH_ATOMICS_P4
#define DMKV_SWITCH_ATOMICS_P4

// 24-bit PSN helpers: is a - b negative / positive (mod 2^24)?
#define PSN_LT(a, b) (((bit<24>)((a) - (b)))[23:23] == 1)
#define PSN_GT(a, b) (((bit<24>)((a) - (b)))[23:23] == 0 && (bit<24>)((a) - (b)) != 0)
// conn_sw.lo: the last admitted request was intercepted and a filler took its PSN on the
// client's own QP, at memnode-side PSN conn_sw.hi (the model's SW_FILLER).
#define SW_FILLER 0x2000000

control SwitchAtomics(inout headers_t hdr, inout dmkv_meta_t meta) {
    DECLARE_REG_CONN_ACKED
    DECLARE_REG_CONN_EPSN
    DECLARE_REG_CONN_SW
    DECLARE_REG_ANSWER_PSN
    DECLARE_REG_CONN_MSN
    DECLARE_REG_ATOMIC_WORD
    DECLARE_REG_ANSWER_RESULT

    bit<24> psn;          // the packet's PSN as received
    bit<24> answered_up;  // memnode-side PSN a response answers up to
    bit<32> tmp;
    bit<1> flag;
    bit<32> aidx;         // answer ring cell: conn * ANSWER_RING + client PSN mod ANSWER_RING

    // ---- stage 1: conn_acked --------------------------------------------------------
    DMKV_ACTION(conn_acked, acked_up, bit<32>, bit<32>,
        if (cell & PSN_VALID == 0) { cell = (bit<32>)psn | PSN_VALID; }
        rv = cell;
    )
    DMKV_ACTION(conn_acked, acked_down, bit<32>, bit<32>,
        if (cell & PSN_VALID == 0 || PSN_GT(answered_up, cell[23:0])) {
            cell = (bit<32>)answered_up | PSN_VALID;
        }
        rv = cell;
    )

    // ---- stage 2: conn_epsn (lo: expected client PSN | VALID, hi: PSN offset) ------
    // rv[26:24] = class, rv[23:0] = offset before this packet.
    DMKV_PAIR_ACTION(conn_epsn, epsn_up, bit<32>,
        bit<24> e = cell.lo[23:0];
        bit<24> off = cell.hi[23:0];
        bool learning = cell.lo & PSN_VALID == 0;
        if (learning) { e = psn; off = 0; }
        bit<3> cls;
        bit<32> pending = cell.lo & (CONN_PENDING | CONN_FILLER_LAST);
        // Quiet: all answered, or all but the filler just before (CONN_FILLER_LAST), or
        // (first request after a restart) a filler of the previous incarnation already
        // took this PSN: the diverted request is admitted again.
        bool quiet = psn - off == meta.acked
            || (cell.lo & CONN_FILLER_LAST != 0 && psn == e && psn - off == meta.acked + 1)
            || (learning && meta.intercept != INTERCEPT_NONE && psn + 1 == meta.acked);
        if (cell.lo & CONN_PENDING != 0 && !PSN_LT(psn, e)) {
            cls = CLASS_HELD;  // behind a diverted request (AtomicReplace): dropped
        } else if (meta.owned == 1 || meta.intercept != INTERCEPT_NONE) {
            if ((psn == e || (PSN_LT(psn, e) && meta.intercept != INTERCEPT_DIVERT)) && quiet) {
                cls = CLASS_ANSWER;
                if (psn == e) { e = psn + 1; }
                if (meta.intercept == INTERCEPT_DIVERT) {
                    // A filler keeps the PSN on the client's QP: no offset.
                    pending = CONN_PENDING | CONN_FILLER_LAST;
                } else {
                    cell.hi = (bit<32>)(off + 1);
                }
            } else if (PSN_LT(psn, e)) {
                cls = CLASS_REPLAY;
            } else {
                cls = CLASS_DEFER;
            }
        } else if (!PSN_LT(psn, e)) {
            cls = CLASS_FORWARD;
            e = psn + meta.npsn;
            pending = 0;
        } else {
            cls = CLASS_DUPLICATE;
        }
        if (cls != CLASS_HELD) { cell.lo = (bit<32>)e | PSN_VALID | pending; }
        rv = (bit<32>)cls << 24 | (bit<32>)off | ((cell.lo & CONN_PENDING) != 0 ? 32w1 << 27 : 32w0);
    )
    DMKV_PAIR_ACTION(conn_epsn, epsn_down, bit<32>,
        rv = (cell.lo & PSN_VALID == 0) ? 32w0 : cell.hi;
    )

    // ---- stage 3: conn_sw (lo: PSN of the last answer, hi: memnode PSN boundary) ----
    DMKV_PAIR_ACTION(conn_sw, sw_record, bit<32>,
        cell.lo = (bit<32>)psn | PSN_VALID;
        if (meta.intercept != INTERCEPT_NONE) { cell.lo = cell.lo | SW_FILLER; }
        cell.hi = (bit<32>)(psn - meta.psn_off) | PSN_VALID;
        rv = 0;
    )
    DMKV_PAIR_ACTION(conn_sw, sw_is_last, bit<32>,
        rv = ((cell.lo & ~SW_FILLER) == ((bit<32>)psn | PSN_VALID)) ? 32w1 : 32w0;
    )
    // A duplicate or a deferred request. rv[0]: a duplicate from before the last switch
    // answer (stale: its offset is gone); rv[1]: the memnode still misses the last
    // filler (it NAKs a gap only once, and the re-sent filler may be lost too), which
    // this request's arrival sends again.
    DMKV_PAIR_ACTION(conn_sw, sw_dup_check, bit<32>,
        bool filler = cell.lo & SW_FILLER != 0 && cell.hi & PSN_VALID != 0;
        rv = 0;
        if (meta.class == CLASS_DUPLICATE && cell.lo & PSN_VALID != 0 && !filler
            && PSN_LT(psn, cell.lo[23:0])) {
            rv = 1;
        }
        if (filler && (meta.acked == cell.hi[23:0] || meta.acked + 1 == cell.hi[23:0])) {
            rv = rv | 2;
        }
    )
    // A response. rv[0]: from before the last switch answer (stale); rv[1]: the
    // response to the last filler (or, for a sequence NAK, to the one before it, which
    // CONN_FILLER_LAST may have left unanswered).
    DMKV_PAIR_ACTION(conn_sw, sw_resp_check, bit<32>,
        bool filler = cell.lo & SW_FILLER != 0 && cell.hi & PSN_VALID != 0;
        rv = 0;
        if (cell.hi & PSN_VALID != 0 && !filler && PSN_LT(psn, cell.hi[23:0])) { rv = 1; }
        if (filler && (psn == cell.hi[23:0]
                       || (answered_up == psn && psn + 1 == cell.hi[23:0]))) {
            rv = 2;
        }
    )

    // ---- stage 3b: answer_psn (the connection's answers, a ring indexed by PSN) ------
    DMKV_ACTION(answer_psn, ans_record, bit<32>, bit<32>,
        cell = (bit<32>)psn | PSN_VALID;
        rv = 0;
    )
    DMKV_ACTION(answer_psn, ans_match, bit<32>, bit<32>,
        rv = (cell == ((bit<32>)psn | PSN_VALID)) ? 32w1 : 32w0;
    )

    // ---- stage 4: conn_msn (lo: MSN offset, hi: last memnode MSN) -------------------
    DMKV_PAIR_ACTION(conn_msn, msn_answer, bit<32>,
        cell.lo = (bit<32>)((bit<24>)cell.lo + 1);
        rv = (bit<32>)((bit<24>)cell.hi + (bit<24>)cell.lo);
    )
    DMKV_PAIR_ACTION(conn_msn, msn_replay, bit<32>,
        rv = (bit<32>)((bit<24>)cell.hi + (bit<24>)cell.lo);
    )
    DMKV_PAIR_ACTION(conn_msn, msn_response, bit<32>,
        cell.hi = (bit<32>)hdr.aeth.msn;
        rv = cell.lo;
    )

    // ---- stage 5: atomic_word (dual-width ALU: both halves compared, carry lo->hi) --
    DMKV_PAIR_ACTION(atomic_word, word_cas, bit<32>,
        meta.result_hi = cell.hi;
        rv = cell.lo;
        if (cell.lo == hdr.atomic_eth.compare[31:0] && cell.hi == hdr.atomic_eth.compare[63:32]) {
            cell.lo = hdr.atomic_eth.swap_add[31:0];
            cell.hi = hdr.atomic_eth.swap_add[63:32];
        }
    )
    DMKV_PAIR_ACTION(atomic_word, word_faa, bit<32>,
        meta.result_hi = cell.hi;
        rv = cell.lo;
        bit<32> carry = (cell.lo > ~hdr.atomic_eth.swap_add[31:0]) ? 32w1 : 32w0;
        cell.lo = cell.lo + hdr.atomic_eth.swap_add[31:0];
        cell.hi = cell.hi + hdr.atomic_eth.swap_add[63:32] + carry;
    )

    // ---- stage 6: answer_result (same cell as answer_psn) ----------------------------
    DMKV_PAIR_ACTION(answer_result, result_store, bit<32>,
        cell.lo = meta.result_lo;
        cell.hi = meta.result_hi;
        rv = 0;
    )
    DMKV_PAIR_ACTION(answer_result, result_load, bit<32>,
        meta.result_hi = cell.hi;
        rv = cell.lo;
    )

    // The switch-owned range: rkey -> base VA and word count.
    action switch_owned(bit<64> base_va, bit<32> slots, bit<32> first_slot) {
        bit<64> offset = hdr.atomic_eth.va - base_va;
        meta.owned = (hdr.atomic_eth.va >= base_va && offset < (bit<64>)slots << 3) ? 1w1 : 1w0;
        meta.aligned = (hdr.atomic_eth.va[2:0] == 0) ? 1w1 : 1w0;
        meta.slot = first_slot + (bit<32>)(offset >> 3);
    }
    action not_owned() { meta.owned = 0; }
    table atomic_range {
        key = { hdr.atomic_eth.rkey: exact; }
        actions = { switch_owned; not_owned; }
        default_action = not_owned();
        size = TABLE_ATOMIC_RANGE_SIZE;
    }

    // Turn the request into an ATOMIC ACKNOWLEDGE (or a NAK) back to the client.
    action to_answer(bit<8> opcode, bit<8> syndrome) {
        hdr.bth.opcode = opcode;
        hdr.bth.dest_qpn = meta.client_qpn;
        hdr.bth.ack_req = 0;
        hdr.bth.pad_count = 0;
        hdr.atomic_eth.setInvalid();
        hdr.aeth.setValid();
        hdr.aeth.syndrome = syndrome;
        hdr.aeth.msn = meta.msn;
        hdr.ipv4.src_addr = meta.ingress_dst_addr;
        hdr.ipv4.dst_addr = meta.ingress_src_addr;
        hdr.udp.src_port = meta.ingress_dst_port;
        hdr.udp.dst_port = meta.ingress_src_port;
        bit<48> mac = hdr.ethernet.src_addr;
        hdr.ethernet.src_addr = hdr.ethernet.dst_addr;
        hdr.ethernet.dst_addr = mac;
        meta.egress_port = PORT_CLIENT;
        meta.dir = DIR_DOWN;
        meta.answered = 1;
    }

    // A multiplexed QP's response mapped back to its connection (AtomicReplace pass 2):
    // clear the pending bit, answer the last admitted client PSN with its MSN.
    DMKV_PAIR_ACTION(conn_epsn, epsn_converted, bit<32>,
        rv = (cell.lo & CONN_PENDING != 0) ? 32w1 : 32w0;
        cell.lo = cell.lo & ~CONN_PENDING;
    )
    DMKV_PAIR_ACTION(conn_sw, sw_last_psn, bit<32>, rv = cell.lo;)

    apply {
        if (meta.routed == 0) { return; }
        if (meta.from_mux == 1 && meta.converted == 0) { return; }
        psn = hdr.bth.psn;
        if (meta.converted == 1) {
            bit<32> cidx = (bit<32>)meta.conn;
            meta.upsn = psn;
            DMKV_EXEC(epsn_converted, cidx, tmp)
            if (tmp == 0) { meta.drop = 1; return; }
            DMKV_EXEC(sw_last_psn, cidx, tmp)
            hdr.bth.psn = tmp[23:0];
            DMKV_EXEC(msn_replay, cidx, tmp)
            hdr.aeth.msn = tmp[23:0];
            return;
        }
        bit<32> idx = (bit<32>)meta.conn;
        aidx = idx * ANSWER_RING + (bit<32>)(psn & (ANSWER_RING - 1));
        bool request = hdr.bth.opcode >= OP_WRITE_FIRST && hdr.bth.opcode <= OP_READ_REQUEST
                       || hdr.bth.opcode == OP_COMPARE_SWAP || hdr.bth.opcode == OP_FETCH_ADD;
        if (meta.dir == DIR_UP && request) {
            meta.owned = 0;
            if (hdr.atomic_eth.isValid() && (meta.mode & MODE_SWITCH_ATOMICS) != 0) {
                atomic_range.apply();
            }
            meta.npsn = 1;
            if (hdr.reth.isValid() && hdr.bth.opcode == OP_READ_REQUEST) {
                // ceil(dma_len / pmtu), pmtu a power of two: a shift (no loop).
                bit<32> len = hdr.reth.dma_len + ((32w1 << (bit<8>)meta.pmtu_log2) - 1);
                meta.npsn = (bit<24>)(len >> (bit<8>)meta.pmtu_log2);
                if (meta.npsn == 0) { meta.npsn = 1; }
            }
            DMKV_EXEC(acked_up, idx, tmp)
            meta.acked = tmp[23:0];
            DMKV_EXEC(epsn_up, idx, tmp)
            meta.class = tmp[26:24];
            meta.psn_off = tmp[23:0];
            meta.pending = tmp[27:27];
            if (meta.class == CLASS_HELD) { meta.drop = 1; return; }
            if (meta.class == CLASS_ANSWER) {
                DMKV_EXEC(sw_record, idx, tmp)
            } else if (meta.class == CLASS_REPLAY) {
                // A diverted request is replayed only while it is the last answer (its
                // answer comes from per-connection state in AtomicReplace).
                DMKV_EXEC(sw_is_last, idx, tmp)
                if (tmp == 0 && meta.intercept == INTERCEPT_DIVERT) { meta.class = CLASS_DEFER; }
            } else if (meta.class == CLASS_DUPLICATE || meta.class == CLASS_DEFER) {
                DMKV_EXEC(sw_dup_check, idx, tmp)
                if (tmp[1:1] == 1) {
                    // The missing filler goes at the memnode's next PSN; AtomicReplace
                    // builds it (conn_filler) and drops the packet if it has no entry.
                    meta.filler_psn = meta.acked;
                    if (meta.class == CLASS_DEFER || tmp[0:0] == 1) {
                        meta.filler_instead = 1;  // the request itself waits
                        return;
                    }
                    meta.filler_extra = 1;        // mirrored copy beside the duplicate
                }
                if (tmp[0:0] == 1) { meta.drop = 1; return; }
            }
            // Stage 3b: a new answer takes its ring cell; a replay needs its PSN there
            // (any earlier answer, not only the last: pipelined requests whose answers
            // were lost come back behind later ones).
            if (meta.class == CLASS_ANSWER) {
                DMKV_EXEC(ans_record, aidx, tmp)
            } else if (meta.class == CLASS_REPLAY) {
                DMKV_EXEC(ans_match, aidx, tmp)
                if (tmp == 0) { meta.class = CLASS_DEFER; }
            }
            if (meta.class == CLASS_FORWARD || meta.class == CLASS_DUPLICATE) {
                hdr.bth.psn = psn - meta.psn_off;
            } else if (meta.class == CLASS_DEFER) {
                meta.drop = 1;
            } else {
                if (meta.class == CLASS_ANSWER) {
                    DMKV_EXEC(msn_answer, idx, tmp)
                } else {
                    DMKV_EXEC(msn_replay, idx, tmp)
                }
                meta.msn = tmp[23:0];
                if (meta.owned == 0) {
                    // Intercepted: AtomicReplace / OptLatch build the answer or divert.
                    meta.admitted = 1;
                    meta.replay = (meta.class == CLASS_REPLAY) ? 1w1 : 1w0;
                    return;
                }
                if (meta.class == CLASS_ANSWER && meta.aligned == 0) {
                    to_answer(OP_ACKNOWLEDGE, SYNDROME_NAK_INVALID_REQUEST);
                    hdr.atomic_ack_eth.setInvalid();
                    return;
                }
                if (meta.class == CLASS_ANSWER) {
                    if (hdr.bth.opcode == OP_COMPARE_SWAP) {
                        DMKV_EXEC(word_cas, meta.slot, meta.result_lo)
                    } else {
                        DMKV_EXEC(word_faa, meta.slot, meta.result_lo)
                    }
                    DMKV_EXEC(result_store, aidx, tmp)
                } else {
                    DMKV_EXEC(result_load, aidx, meta.result_lo)
                }
                to_answer(OP_ATOMIC_ACKNOWLEDGE, SYNDROME_ACK);
                hdr.atomic_ack_eth.setValid();
                hdr.atomic_ack_eth.original = meta.result_hi ++ meta.result_lo;
            }
        } else if (meta.dir == DIR_DOWN && !request) {
            answered_up = psn + 1;
            if (hdr.aeth.isValid() && hdr.aeth.syndrome == SYNDROME_NAK_PSN_SEQUENCE) {
                answered_up = psn;
            }
            DMKV_EXEC(acked_down, idx, tmp)
            DMKV_EXEC(epsn_down, idx, tmp)
            meta.psn_off = tmp[23:0];
            DMKV_EXEC(sw_resp_check, idx, tmp)
            if (tmp == 2) {
                // A filler's response: the client never sees it. A sequence NAK says
                // the filler never arrived: AtomicReplace turns it around as the filler.
                if (answered_up == psn) { meta.resend_filler = 1; } else { meta.drop = 1; }
                return;
            }
            if (tmp == 1) { meta.drop = 1; return; }
            if (hdr.aeth.isValid()) {
                DMKV_EXEC(msn_response, idx, tmp)
                hdr.aeth.msn = hdr.aeth.msn + tmp[23:0];
            }
            hdr.bth.psn = psn + meta.psn_off;
        }
    }
}

#endif  // DMKV_SWITCH_ATOMICS_P4
