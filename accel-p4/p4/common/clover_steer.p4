// Clover write and read steering (SwordBox §4.4.2). Mirrors src/functions/write_steer.rs
// (WriteSteer + SteerCache) and src/functions/read_steer.rs (ReadSteer); see their
// module docs for the rules and why the client stays correct. NOT COMPILED HERE.
//
// Register order per packet (each touched at most once):
//   steer_epsn → steer_pend* → steer_tail_* / steer_addr_* → steer_cas* → steer_rd*
// Node WRITEs, link CASes and READs run top to bottom in one pass. An ATOMIC ACK needs
// steer_cas* (its record) *before* steer_tail_* (the commit), the reverse of the CAS
// path, so a committing ACK takes a second pass: pass 1 reads the record, rewrites the
// original value and recirculates with the commit bridged (slot, node VA/header/
// version); pass 2 commits. The model runs both in one call (each register still
// touched once per packet).
#ifndef DMKV_CLOVER_STEER_P4
#define DMKV_CLOVER_STEER_P4

#define CAS_STEERED 0x2000000
#define CAS_ANSWERED 0x4000000
#define LINK_BITS_HI 0x80003FFF  // HAS_SUCCESSOR | successor fields (bits 32..45)
#define OWN_GEN_HI 0x3FFFC000    // own generation (bits 46..61)
#define TOMBSTONE_HI 0x40000000

// Before WriteSteer: which key (chain id) and whether the length is a node size class.
control SteerClassify(inout headers_t hdr, inout dmkv_meta_t meta) {
    action tracked(bit<32> slot) { meta.steer_slot = slot; meta.steer_hit = 1; }
    action untracked() { meta.steer_hit = 0; }
    table steer_keys {
        key = { hdr.clover_prefix.chain_id: exact; }  // little-endian as in memory
        actions = { tracked; untracked; }
        default_action = untracked();
        size = TABLE_STEER_KEYS_SIZE;
    }
    bit<1> node_class = 0;
    action is_node() { node_class = 1; }
    action not_a_node() { node_class = 0; }
    table steer_classes {
        key = { hdr.reth.dma_len: exact; }
        actions = { is_node; not_a_node; }
        default_action = not_a_node();
        size = TABLE_STEER_CLASSES_SIZE;
    }
    apply {
        meta.steer_hit = 0;
        if ((meta.mode & (MODE_WRITE_STEER | MODE_READ_STEER)) == 0 || meta.routed == 0) { return; }
        if (hdr.reth.isValid()) { steer_classes.apply(); }
        if (node_class == 1 && hdr.clover_prefix.isValid()) { steer_keys.apply(); }
        if (node_class == 0) { meta.steer_slot = 0xFFFFFFFF; }
    }
}

control CloverSteer(inout headers_t hdr, inout dmkv_meta_t meta) {
    DECLARE_REG_STEER_EPSN
    DECLARE_REG_STEER_PEND
    DECLARE_REG_STEER_PEND_VA
    DECLARE_REG_STEER_PEND_NODE
    DECLARE_REG_STEER_PEND_HDR_HI
    DECLARE_REG_STEER_TAIL_VA
    DECLARE_REG_STEER_TAIL_HDR
    DECLARE_REG_STEER_TAIL_VER
    DECLARE_REG_STEER_TAIL_TS
    DECLARE_REG_STEER_ADDR_TAG
    DECLARE_REG_STEER_ADDR_KEY
    DECLARE_REG_STEER_CAS
    DECLARE_REG_STEER_CAS_CMP
    DECLARE_REG_STEER_CAS_TGT
    DECLARE_REG_STEER_CAS_NODE_VA
    DECLARE_REG_STEER_CAS_NODE_HDR
    DECLARE_REG_STEER_CAS_NODE_VER
    DECLARE_REG_STEER_RD
    DECLARE_REG_STEER_RD_HI

    bit<32> psn_next;
    bit<32> in_order;
    bit<32> c;
    bit<32> r;
    bit<32> tail_ver;
    bit<32> tail_lo;
    bit<32> tail_hi;
    bit<32> thdr_lo;
    bit<32> thdr_hi;
    bit<32> ver;
    bit<32> key;

    // steer_epsn: act only on the next expected PSN (first transmissions).
    DMKV_ACTION(steer_epsn, epsn_step, bit<32>, bit<32>,
        rv = 0;
        if (cell & PSN_VALID != 0 && cell & 0xFFFFFF == (bit<32>)hdr.bth.psn) { rv = 1; }
        cell = psn_next;  // (the model keeps the cell on an older PSN: a second compare)
    )
    // steer_pend*: remembered by the node WRITE, taken by the CAS right after it.
    DMKV_PAIR_ACTION(steer_pend, pend_set, bit<32>,
        cell.lo = PSN_VALID | (psn_next & 0xFFFFFF); cell.hi = meta.steer_slot; rv = 0;)
    DMKV_PAIR_ACTION(steer_pend, pend_take, bit<32>,
        rv = (cell.lo == (PSN_VALID | (bit<32>)hdr.bth.psn)) ? cell.hi : 0xFFFFFFFF;
        cell.lo = 0; cell.hi = 0;)
    // steer_tail_*: the committed tail per key slot.
    DMKV_ACTION(steer_tail_ver, tail_ver_read, bit<32>, bit<32>, rv = cell;)
    DMKV_PAIR_ACTION(steer_tail_va, tail_va_lo, bit<32>, rv = cell.lo;)
    // steer_addr_*: the write cache (tag mixes the memnode's address in).
    DMKV_ACTION(steer_addr_tag, addr_set, bit<32>, bit<32>, cell = meta.steer_tag; rv = 0;)
    DMKV_ACTION(steer_addr_tag, addr_match, bit<32>, bit<32>,
        rv = (cell == meta.steer_tag) ? 32w1 : 32w0;)
    DMKV_PAIR_ACTION(steer_addr_key, addr_key_set, bit<32>,
        cell.lo = key; cell.hi = ver; rv = 0;)
    DMKV_PAIR_ACTION(steer_addr_key, addr_key_read, bit<32>, rv = cell.lo;)
    // steer_cas*: in-flight link CASes by (connection, PSN mod STEER_RING).
    DMKV_PAIR_ACTION(steer_cas, cas_record, bit<32>,
        rv = 0;
        if (cell.lo & (PSN_VALID | CAS_STEERED | CAS_ANSWERED) != (PSN_VALID | CAS_STEERED)) {
            cell.lo = in_order; cell.hi = meta.steer_slot; rv = 1;
        })
    DMKV_PAIR_ACTION(steer_cas, cas_answer, bit<32>,
        rv = 0;
        if (cell.lo & (PSN_VALID | 0xFFFFFF) == (PSN_VALID | (bit<32>)hdr.bth.psn)) {
            rv = cell.lo; cell.lo = cell.lo | CAS_ANSWERED;
        })
    // steer_rd*: steered READs, for marking their responses.
    DMKV_PAIR_ACTION(steer_rd, rd_record, bit<32>,
        cell.lo = PSN_VALID | (bit<32>)hdr.bth.psn; cell.hi = tail_lo; rv = 0;)
    DMKV_PAIR_ACTION(steer_rd, rd_match, bit<32>,
        rv = (cell.lo == (PSN_VALID | (bit<32>)hdr.bth.psn)) ? cell.hi : 0;)

    apply {
        if ((meta.mode & (MODE_WRITE_STEER | MODE_READ_STEER)) == 0 || meta.routed == 0) { return; }
        c = (bit<32>)meta.conn;
        r = c * STEER_RING + (bit<32>)hdr.bth.psn[3:0];
        if (meta.dir == DIR_UP) {
            psn_next = PSN_VALID | (bit<32>)(hdr.bth.psn + 1);  // READs: + ceil(len / pmtu)
            DMKV_EXEC(epsn_step, c, in_order)
            if (hdr.bth.opcode == OP_WRITE_ONLY && meta.steer_hit == 1 && in_order == 1) {
                // Node WRITE of a tracked key: version rewrite when the writer is behind.
                DMKV_EXEC(tail_ver_read, meta.steer_slot, tail_ver)
                ver = hdr.clover_prefix.version;  // byte-swapped: little-endian in memory
                if ((meta.mode & MODE_WRITE_STEER) != 0 && tail_ver - (ver - 1) < 0x80000000
                    && tail_ver != ver - 1) {
                    ver = tail_ver + 1;
                    hdr.clover_prefix.version = ver;
                }
                DMKV_EXEC(pend_set, c, key)
                // steer_pend_va / _node / _hdr_hi set likewise (reth.va, payload_word, ver).
                key = meta.steer_slot + 1;
                DMKV_EXEC(addr_set, meta.steer_tag, key)
                DMKV_EXEC(addr_key_set, meta.steer_tag, key)
            } else if (hdr.bth.opcode == OP_COMPARE_SWAP && in_order == 1) {
                DMKV_EXEC(pend_take, c, meta.steer_slot)
                if (meta.steer_slot != 0xFFFFFFFF) {
                    // Check: addr_match(target) names this slot; link generation tag ==
                    // the node's; tail elsewhere, version = tail + 1, same tombstone flag,
                    // tail header != compare. Then rewrite va / compare / swap (lo, hi)
                    // from steer_tail_va / steer_tail_hdr and record with CAS_STEERED.
                    DMKV_EXEC(cas_record, r, key)
                }
            } else if (hdr.bth.opcode == OP_READ_REQUEST && in_order == 1
                       && (meta.mode & MODE_READ_STEER) != 0) {
                DMKV_EXEC(addr_match, meta.steer_tag, key)
                if (key == 1) {
                    DMKV_EXEC(addr_key_read, meta.steer_tag, key)
                    // Tail later than the address's version, committed less than
                    // STEER_MAX_AGE_US ago (ingress timestamp vs steer_tail_ts): steer.
                    DMKV_EXEC(tail_va_lo, key - 1, tail_lo)
                    hdr.reth.va[31:0] = tail_lo;  // and [63:32] from the pair's hi
                    DMKV_EXEC(rd_record, r, key)
                }
            }
        } else {
            if (hdr.bth.opcode == OP_ATOMIC_ACKNOWLEDGE) {
                DMKV_EXEC(cas_answer, r, key)
                if (key & CAS_STEERED != 0) {
                    // success (original == steer_cas_cmp): OWN_GEN(tail) | tail VA >> 6,
                    // else MARK_STEER_FAILED; a success recirculates to commit the node
                    // into steer_tail_* (version only forward) with the ingress timestamp.
                    meta.recirculate = 1;
                }
            } else if ((hdr.bth.opcode == OP_READ_RESPONSE_ONLY
                        || hdr.bth.opcode == OP_READ_RESPONSE_FIRST)
                       && hdr.payload_word.isValid()) {
                DMKV_EXEC(rd_match, r, tail_lo)
                // No successor in the returned header: put the address (/ 64) in its
                // successor fields (steer_rd_hi holds the high bits).
                if (tail_lo != 0 && hdr.payload_word.word[63:63] == 0) {
                    hdr.payload_word.word[31:0] = hdr.payload_word.word[31:0] | tail_lo;
                }
            }
        }
    }
}

#endif  // DMKV_CLOVER_STEER_P4
