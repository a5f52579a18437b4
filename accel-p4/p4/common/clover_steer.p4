// Clover write and read steering (SwordBox §4.4.2). Mirrors src/functions/write_steer.rs
// (WriteSteer), src/functions/steer_cache.rs (SteerCache) and src/functions/read_steer.rs
// (ReadSteer); see their module docs for the rules and why the client stays correct.
// NOT COMPILED HERE.
//
// Register order (spec::REGISTERS; each touched at most once per packet):
//
//   steer_epsn → steer_pend → steer_addr_tag → steer_addr_key → steer_tail_ver/_va/_hdr/_ts
//   → steer_pend_va/_node/_hdr_hi → steer_addr_ver → steer_cas* → steer_rd*
//
// A node WRITE takes the tail before it writes the pending node (its version may be
// rewritten from the tail's); a link CAS takes the pending slot before the tail it is
// steered to, and the pending node after it; a READ takes the write cache's slot
// before the tail and the node's version after it. An ATOMIC ACK needs steer_cas*
// (its record) *before* steer_tail_* (the commit), the reverse of the CAS path, so a
// committing ACK takes a second pass: pass 1 reads the record, rewrites the original
// value and recirculates with the node bridged (meta.steer_commit, steer_node_*);
// pass 2 commits. The model runs both in one call.
//
// Byte order: the node's bytes are little-endian in memory and on the wire, while P4
// header fields are big-endian: header words and versions taken from a payload are
// byte-swapped (bswap64 / bswap32); atomic operands, addresses and the ATOMIC ACK's
// original value are numbers on the wire. steer_keys is keyed by the chain id's raw
// bytes: the control plane installs byte-swapped chain ids.
//
// Known departures for hardware: see ../README.md (quiet period as mode bits, the
// write cache's hash, counters kept by the model only).
#ifndef DMKV_CLOVER_STEER_P4
#define DMKV_CLOVER_STEER_P4

#define CAS_STEERED 0x2000000
#define CAS_ANSWERED 0x4000000
#define HAS_SUCCESSOR_HI 0x80000000
#define TOMBSTONE_HI 0x40000000
#define LINK_BITS_HI 0x80003FFF  // HAS_SUCCESSOR | successor fields (bits 32..45)
#define OWN_GEN_HI 0x3FFFC000    // own generation (bits 46..61)
#define SUCCESSOR_FIELDS_64 64w0x3FFFFFFFFFFF
// MARK_STEER_FAILED: tombstone flag and successor field 1, no successor flag.
#define MARK_STEER_FAILED_64 64w0x4000000000000001

bit<64> bswap64(in bit<64> x) {
    return x[7:0] ++ x[15:8] ++ x[23:16] ++ x[31:24]
        ++ x[39:32] ++ x[47:40] ++ x[55:48] ++ x[63:56];
}

bit<32> bswap32(in bit<32> x) {
    return x[7:0] ++ x[15:8] ++ x[23:16] ++ x[31:24];
}

// Before CloverSteer: the key (chain id) of a node WRITE, whether a WRITE or READ has
// a node's length, and the write-cache tag of the address the packet goes to.
control SteerClassify(inout headers_t hdr, inout dmkv_meta_t meta) {
    action tracked(bit<32> slot) { meta.steer_slot = slot; meta.steer_hit = 1; }
    action untracked() { meta.steer_hit = 0; }
    table steer_keys {
        key = { hdr.clover_prefix.chain_id: exact; }  // little-endian as in memory
        actions = { tracked; untracked; }
        default_action = untracked();
        size = TABLE_STEER_KEYS_SIZE;
    }
    action is_node() { meta.steer_node_class = 1; }
    action not_a_node() { meta.steer_node_class = 0; }
    table steer_classes {
        key = { hdr.reth.dma_len: exact; }
        actions = { is_node; not_a_node; }
        default_action = not_a_node();
        size = TABLE_STEER_CLASSES_SIZE;
    }
    bit<64> va;
    bit<32> m;
    apply {
        if (meta.steer_commit == 1) { return; }  // pass 2 of a committing ACK
        meta.steer_hit = 0;
        meta.steer_node_class = 0;
        meta.steer_slot = 0xFFFFFFFF;
        if ((meta.mode & (MODE_WRITE_STEER | MODE_READ_STEER)) == 0 || meta.routed == 0) { return; }
        if (hdr.reth.isValid()) {
            steer_classes.apply();
            va = hdr.reth.va;
        } else if (hdr.atomic_eth.isValid()) {
            va = hdr.atomic_eth.va;
        }
        if (meta.steer_node_class == 1 && hdr.clover_prefix.isValid()) { steer_keys.apply(); }
        // addr_tag(): the memnode's address (after Route: the destination) mixed in.
        m = hdr.ipv4.dst_addr ^ (hdr.udp.dst_port ++ 16w0);
        meta.steer_tag = (bit<32>)(va >> 6) ^ ((m << 7) | (m >> 25));
    }
}

control CloverSteer(inout headers_t hdr, inout dmkv_meta_t meta) {
    DECLARE_REG_STEER_EPSN
    DECLARE_REG_STEER_PEND
    DECLARE_REG_STEER_ADDR_TAG
    DECLARE_REG_STEER_ADDR_KEY
    DECLARE_REG_STEER_TAIL_VA
    DECLARE_REG_STEER_TAIL_HDR
    DECLARE_REG_STEER_TAIL_VER
    DECLARE_REG_STEER_TAIL_TS
    DECLARE_REG_STEER_PEND_VA
    DECLARE_REG_STEER_PEND_NODE
    DECLARE_REG_STEER_PEND_HDR_HI
    DECLARE_REG_STEER_ADDR_VER
    DECLARE_REG_STEER_CAS
    DECLARE_REG_STEER_CAS_CMP
    DECLARE_REG_STEER_CAS_TGT
    DECLARE_REG_STEER_CAS_NODE_VA
    DECLARE_REG_STEER_CAS_NODE_HDR
    DECLARE_REG_STEER_CAS_NODE_VER
    DECLARE_REG_STEER_RD
    DECLARE_REG_STEER_RD_HI

    bit<32> psn;        // this packet's PSN, 32 bits
    bit<32> psn_next;   // PSN_VALID | the PSN after this request
    bit<32> cas_psn;    // PSN_VALID | this PSN + 1 (a node WRITE's CAS)
    bit<32> npsn;
    bit<32> in_order;
    bit<32> c;
    bit<32> r;          // ring cell of (conn, psn)
    bit<32> r1;         // ring cell of (conn, psn + 1)
    bit<32> cell;       // write-cache cell of meta.steer_tag
    bit<32> slot;
    bit<32> key;
    bit<32> hit;
    bit<32> ver;
    bit<32> tail_ver;
    bit<32> tail_ts;
    bit<32> node_ver;
    bit<32> flags;
    bit<32> recorded;
    bit<32> rec_lo;
    bit<32> rec_slot;
    bit<32> line_lo;
    bit<32> line_hi;
    bit<64> node_hdr;
    bit<64> node_va;
    bit<64> tail_va;
    bit<64> tail_hdr;
    bit<64> line;
    bit<64> cmp;
    bit<64> tgt;
    bit<64> word;
    bit<1> steer;
    bit<32> advance;

    // --- steer_epsn: act only on the next expected PSN (first transmissions).
    DMKV_ACTION(steer_epsn, epsn_step, bit<32>, bit<32>,
        rv = 0;
        if (cell & PSN_VALID == 0) {
            cell = psn_next;                          // first packet seen: may be a copy
        } else if ((psn - cell) & 0xFFFFFF == 0) {
            rv = 1; cell = psn_next;                  // in order
        } else if ((psn - cell) & 0xFFFFFF < 0x800000) {
            cell = psn_next;                          // a gap: resynchronise, do not act
        })                                            // older: a retransmission, keep
    // --- steer_pend: remembered by the node WRITE, taken by the CAS right after it.
    DMKV_PAIR_ACTION(steer_pend, pend_set, bit<32>,
        cell.lo = cas_psn; cell.hi = meta.steer_slot; rv = 0;)
    DMKV_PAIR_ACTION(steer_pend, pend_take, bit<32>,
        rv = (cell.lo == (PSN_VALID | psn)) ? cell.hi : 0xFFFFFFFF;
        cell.lo = 0; cell.hi = 0;)
    // A copy of the node WRITE before its CAS went by: the CAS will not be steered.
    DMKV_PAIR_ACTION(steer_pend, pend_drop, bit<32>,
        rv = 0;
        if (cell.lo == cas_psn) { cell.lo = 0; cell.hi = 0; })
    // --- steer_addr_tag / steer_addr_key / steer_addr_ver: the write cache.
    DMKV_ACTION(steer_addr_tag, addr_set, bit<32>, bit<32>, cell = meta.steer_tag; rv = 0;)
    DMKV_ACTION(steer_addr_tag, addr_match, bit<32>, bit<32>,
        rv = (cell == meta.steer_tag) ? 32w1 : 32w0;)
    DMKV_ACTION(steer_addr_key, addr_key_set, bit<32>, bit<32>, cell = key; rv = 0;)
    DMKV_ACTION(steer_addr_key, addr_key_read, bit<32>, bit<32>, rv = cell;)
    DMKV_ACTION(steer_addr_ver, addr_ver_set, bit<32>, bit<32>, cell = ver; rv = 0;)
    DMKV_ACTION(steer_addr_ver, addr_ver_read, bit<32>, bit<32>, rv = cell;)
    // --- steer_tail_*: the committed tail per key slot.
    DMKV_PAIR_ACTION(steer_tail_va, tail_va_read, bit<64>, rv = cell.hi ++ cell.lo;)
    DMKV_PAIR_ACTION(steer_tail_va, tail_va_set, bit<32>,
        cell.lo = meta.steer_node_va[31:0]; cell.hi = meta.steer_node_va[63:32]; rv = 0;)
    DMKV_PAIR_ACTION(steer_tail_hdr, tail_hdr_read, bit<64>, rv = cell.hi ++ cell.lo;)
    DMKV_PAIR_ACTION(steer_tail_hdr, tail_hdr_set, bit<32>,
        cell.lo = meta.steer_node_hdr[31:0]; cell.hi = meta.steer_node_hdr[63:32]; rv = 0;)
    DMKV_ACTION(steer_tail_ver, tail_ver_read, bit<32>, bit<32>, rv = cell;)
    // Commit: the version only moves forward (0: nothing cached yet).
    DMKV_ACTION(steer_tail_ver, tail_ver_commit, bit<32>, bit<32>,
        rv = 0;
        if (cell == 0 || (meta.steer_node_ver - cell) & 0x80000000 == 0
                         && meta.steer_node_ver != cell) {
            cell = meta.steer_node_ver; rv = 1;
        })
    DMKV_ACTION(steer_tail_ts, tail_ts_read, bit<32>, bit<32>, rv = cell;)
    DMKV_ACTION(steer_tail_ts, tail_ts_set, bit<32>, bit<32>, cell = meta.now_us; rv = 0;)
    // --- steer_pend_va / _node / _hdr_hi: the pending node (after the tail).
    DMKV_PAIR_ACTION(steer_pend_va, pend_va_set, bit<32>,
        cell.lo = hdr.reth.va[31:0]; cell.hi = hdr.reth.va[63:32]; rv = 0;)
    DMKV_PAIR_ACTION(steer_pend_va, pend_va_read, bit<64>, rv = cell.hi ++ cell.lo;)
    DMKV_PAIR_ACTION(steer_pend_node, pend_node_set, bit<32>,
        cell.lo = node_hdr[31:0]; cell.hi = ver; rv = 0;)
    // hi: the node's version, lo: its header's low half.
    DMKV_PAIR_ACTION(steer_pend_node, pend_node_read, bit<64>, rv = cell.hi ++ cell.lo;)
    DMKV_ACTION(steer_pend_hdr_hi, pend_hdr_hi_set, bit<32>, bit<32>,
        cell = node_hdr[63:32]; rv = 0;)
    DMKV_ACTION(steer_pend_hdr_hi, pend_hdr_hi_read, bit<32>, bit<32>, rv = cell;)
    // --- steer_cas*: link CASes in flight by (connection, PSN mod STEER_RING). A
    // steered record is kept until its ACK has gone by.
    DMKV_PAIR_ACTION(steer_cas, cas_record, bit<32>,
        rv = 0;
        if (cell.lo & (PSN_VALID | CAS_STEERED | CAS_ANSWERED) != (PSN_VALID | CAS_STEERED)) {
            cell.lo = flags; cell.hi = slot; rv = 1;
        })
    // hi: key slot, lo: the record's flags (0: no record of this PSN).
    DMKV_PAIR_ACTION(steer_cas, cas_answer, bit<64>,
        rv = 0;
        if (cell.lo & (PSN_VALID | 0xFFFFFF) == (PSN_VALID | psn)) {
            rv = cell.hi ++ cell.lo; cell.lo = cell.lo | CAS_ANSWERED;
        })
    // A copy of a node WRITE: was the CAS after it (PSN + 1) steered?
    DMKV_PAIR_ACTION(steer_cas, cas_peek_steered, bit<32>,
        rv = 0;
        if (cell.lo & (PSN_VALID | CAS_STEERED | 0xFFFFFF) == (cas_psn | CAS_STEERED)) { rv = 1; })
    DMKV_PAIR_ACTION(steer_cas_cmp, cas_cmp_set, bit<32>,
        cell.lo = cmp[31:0]; cell.hi = cmp[63:32]; rv = 0;)
    DMKV_PAIR_ACTION(steer_cas_cmp, cas_cmp_read, bit<64>, rv = cell.hi ++ cell.lo;)
    DMKV_PAIR_ACTION(steer_cas_tgt, cas_tgt_set, bit<32>,
        cell.lo = tgt[31:0]; cell.hi = tgt[63:32]; rv = 0;)
    DMKV_PAIR_ACTION(steer_cas_tgt, cas_tgt_read, bit<64>, rv = cell.hi ++ cell.lo;)
    DMKV_PAIR_ACTION(steer_cas_node_va, cas_node_va_set, bit<32>,
        cell.lo = node_va[31:0]; cell.hi = node_va[63:32]; rv = 0;)
    DMKV_PAIR_ACTION(steer_cas_node_va, cas_node_va_read, bit<64>, rv = cell.hi ++ cell.lo;)
    DMKV_PAIR_ACTION(steer_cas_node_hdr, cas_node_hdr_set, bit<32>,
        cell.lo = node_hdr[31:0]; cell.hi = node_hdr[63:32]; rv = 0;)
    DMKV_PAIR_ACTION(steer_cas_node_hdr, cas_node_hdr_read, bit<64>, rv = cell.hi ++ cell.lo;)
    DMKV_ACTION(steer_cas_node_ver, cas_node_ver_set, bit<32>, bit<32>, cell = node_ver; rv = 0;)
    DMKV_ACTION(steer_cas_node_ver, cas_node_ver_read, bit<32>, bit<32>, rv = cell;)
    // --- steer_rd*: steered READs, for marking their responses. Any other READ on a
    // record's PSN (a retransmission, never steered) removes the record.
    DMKV_PAIR_ACTION(steer_rd, rd_record, bit<32>,
        cell.lo = PSN_VALID | psn; cell.hi = line[31:0]; rv = 0;)
    DMKV_PAIR_ACTION(steer_rd, rd_forget, bit<32>,
        rv = 0;
        if (cell.lo == (PSN_VALID | psn)) { cell.lo = 0; cell.hi = 0; })
    DMKV_PAIR_ACTION(steer_rd, rd_match, bit<32>,
        rv = 0;
        if (cell.lo == (PSN_VALID | psn)) { rv = cell.hi; })
    DMKV_ACTION(steer_rd_hi, rd_hi_set, bit<32>, bit<32>, cell = line[63:32]; rv = 0;)
    DMKV_ACTION(steer_rd_hi, rd_hi_read, bit<32>, bit<32>, rv = cell;)

    apply {
        if ((meta.mode & (MODE_WRITE_STEER | MODE_READ_STEER)) == 0 || meta.routed == 0) { return; }
        c = (bit<32>)meta.conn;
        psn = (bit<32>)hdr.bth.psn;
        r = c * STEER_RING + (psn & (STEER_RING - 1));
        r1 = c * STEER_RING + ((psn + 1) & (STEER_RING - 1));
        cas_psn = PSN_VALID | ((psn + 1) & 0xFFFFFF);
        // addr_cell(): multiplicative hash of the tag (see ../README.md on Tofino).
        cell = ((meta.steer_tag * 0x9E3779B1) >> 16) & (STEER_ADDRS - 1);

        if (meta.steer_commit == 1) {
            // Pass 2 of a committing ATOMIC ACK: the node becomes the key's tail.
            slot = meta.steer_slot;
            DMKV_EXEC(tail_ver_commit, slot, advance)
            if (advance == 1) {
                DMKV_EXEC(tail_va_set, slot, hit)
                DMKV_EXEC(tail_hdr_set, slot, hit)
                DMKV_EXEC(tail_ts_set, slot, hit)
            }
            meta.steer_commit = 0;
            return;
        }

        if (meta.dir == DIR_UP) {
            npsn = 1;
            if (hdr.bth.opcode == OP_READ_REQUEST) {
                // ceil(len / pmtu): one constant shift per path MTU (Route sets it).
                if (meta.pmtu_log2 == 8) { npsn = (hdr.reth.dma_len + 255) >> 8; }
                else if (meta.pmtu_log2 == 9) { npsn = (hdr.reth.dma_len + 511) >> 9; }
                else if (meta.pmtu_log2 == 10) { npsn = (hdr.reth.dma_len + 1023) >> 10; }
                else if (meta.pmtu_log2 == 11) { npsn = (hdr.reth.dma_len + 2047) >> 11; }
                else { npsn = (hdr.reth.dma_len + 4095) >> 12; }
                if (npsn == 0) { npsn = 1; }
            }
            psn_next = PSN_VALID | ((psn + npsn) & 0xFFFFFF);
            DMKV_EXEC(epsn_step, c, in_order)

            if (hdr.bth.opcode == OP_WRITE_ONLY && meta.steer_node_class == 1
                && hdr.clover_prefix.isValid()) {
                if (meta.steer_hit == 0) {
                    // A node of an untracked key: the write cache forgets the address.
                    DMKV_EXEC(addr_set, cell, hit)
                    key = 0;
                    DMKV_EXEC(addr_key_set, cell, hit)
                    ver = 0;
                    DMKV_EXEC(addr_ver_set, cell, hit)
                } else if (in_order == 0) {
                    // A copy (retransmission) of a tracked node WRITE.
                    DMKV_EXEC(pend_drop, c, hit)
                    DMKV_EXEC(addr_set, cell, hit)
                    key = 0;
                    DMKV_EXEC(addr_key_set, cell, hit)
                    ver = 0;
                    DMKV_EXEC(addr_ver_set, cell, hit)
                    DMKV_EXEC(cas_peek_steered, r1, hit)
                    DMKV_EXEC(cas_node_va_read, r1, node_va)
                    DMKV_EXEC(cas_node_ver_read, r1, node_ver)
                    if (hit == 1 && node_va == hdr.reth.va) {
                        hdr.clover_prefix.version = bswap32(node_ver);
                    }
                } else {
                    slot = meta.steer_slot;
                    DMKV_EXEC(pend_set, c, hit)
                    DMKV_EXEC(addr_set, cell, hit)
                    key = slot + 1;
                    DMKV_EXEC(addr_key_set, cell, hit)
                    DMKV_EXEC(tail_ver_read, slot, tail_ver)
                    DMKV_EXEC(tail_va_read, slot, tail_va)
                    ver = bswap32(hdr.clover_prefix.version);
                    // version_after(tail_ver, ver - 1): the writer is behind the tail.
                    if ((meta.mode & MODE_WRITE_STEER) != 0 && tail_va != 0
                        && (tail_ver - (ver - 1)) & 0x80000000 == 0 && tail_ver != ver - 1) {
                        ver = tail_ver + 1;
                        hdr.clover_prefix.version = bswap32(ver);
                    }
                    node_hdr = bswap64(hdr.payload_word.word);
                    DMKV_EXEC(pend_va_set, c, hit)
                    DMKV_EXEC(pend_node_set, c, hit)
                    DMKV_EXEC(pend_hdr_hi_set, c, hit)
                    DMKV_EXEC(addr_ver_set, cell, hit)
                }
            } else if (hdr.bth.opcode == OP_COMPARE_SWAP && in_order == 1) {
                DMKV_EXEC(pend_take, c, slot)
                if (slot == 0xFFFFFFFF) { return; }
                // Shaped like a link CAS of the pending node: compare without link bits,
                // swap = compare + successor flag + fields, the link's generation tag =
                // the pending node's.
                // The tail before the pending node (register order); used below.
                DMKV_EXEC(addr_match, cell, hit)
                DMKV_EXEC(addr_key_read, cell, key)
                DMKV_EXEC(tail_ver_read, slot, tail_ver)
                DMKV_EXEC(tail_va_read, slot, tail_va)
                DMKV_EXEC(tail_hdr_read, slot, tail_hdr)
                DMKV_EXEC(pend_va_read, c, node_va)
                DMKV_EXEC(pend_node_read, c, word)
                DMKV_EXEC(pend_hdr_hi_read, c, line_hi)
                node_hdr = line_hi ++ word[31:0];
                node_ver = word[63:32];
                if (hdr.atomic_eth.compare[31:0] != 0
                    || hdr.atomic_eth.compare[63:32] & LINK_BITS_HI != 0
                    || hdr.atomic_eth.swap_add[63:63] == 0
                    || hdr.atomic_eth.swap_add[61:46] != hdr.atomic_eth.compare[61:46]
                    || hdr.atomic_eth.swap_add[62:62] != hdr.atomic_eth.compare[62:62]
                    || hdr.atomic_eth.swap_add[45:38] != node_hdr[53:46]) {
                    return;
                }
                // The CAS targets a node of the pending WRITE's key (write cache).
                if (hit == 0 || key != slot + 1) { return; }
                line = tail_va >> 6;
                steer = 0;
                if ((meta.mode & MODE_WRITE_STEER) != 0
                    && tail_va != 0 && tail_va != hdr.atomic_eth.va
                    && tail_ver + 1 == node_ver
                    && tail_hdr != hdr.atomic_eth.compare
                    && tail_hdr[63:32] & LINK_BITS_HI == 0 && tail_hdr[31:0] == 0
                    && tail_hdr[62:62] == hdr.atomic_eth.compare[62:62]
                    && line != 0 && line <= SUCCESSOR_FIELDS_64) {
                    steer = 1;
                }
                flags = PSN_VALID | psn;
                if (steer == 1) { flags = flags | CAS_STEERED; }
                DMKV_EXEC(cas_record, r, recorded)
                if (recorded == 0) { return; }
                if (steer == 1) {
                    cmp = tail_hdr;
                    tgt = tail_va;
                } else {
                    cmp = hdr.atomic_eth.compare;
                    tgt = hdr.atomic_eth.va;
                }
                DMKV_EXEC(cas_cmp_set, r, hit)
                DMKV_EXEC(cas_tgt_set, r, hit)
                DMKV_EXEC(cas_node_va_set, r, hit)
                DMKV_EXEC(cas_node_hdr_set, r, hit)
                DMKV_EXEC(cas_node_ver_set, r, hit)
                if (steer == 1) {
                    // swap = tail header | the client's link bits.
                    hdr.atomic_eth.swap_add = tail_hdr
                        | (hdr.atomic_eth.swap_add & (64w0x8000000000000000 | SUCCESSOR_FIELDS_64));
                    hdr.atomic_eth.compare = tail_hdr;
                    hdr.atomic_eth.va = tail_va;
                }
            } else if (hdr.bth.opcode == OP_READ_REQUEST && meta.steer_node_class == 1
                       && (meta.mode & MODE_READ_STEER) != 0) {
                steer = 0;
                DMKV_EXEC(addr_match, cell, hit)
                DMKV_EXEC(addr_key_read, cell, key)
                if (hit == 1 && key != 0) {
                    slot = key - 1;
                    DMKV_EXEC(tail_ver_read, slot, tail_ver)
                    DMKV_EXEC(tail_va_read, slot, tail_va)
                    DMKV_EXEC(tail_ts_read, slot, tail_ts)
                    DMKV_EXEC(addr_ver_read, cell, ver)
                    line = tail_va >> 6;
                    // The tail is another node, later than the one at this address,
                    // committed less than STEER_MAX_AGE_US ago; a first transmission.
                    if (in_order == 1 && tail_va != 0 && tail_va != hdr.reth.va
                        && (tail_ver - ver) & 0x80000000 == 0 && tail_ver != ver
                        && meta.now_us - tail_ts < STEER_MAX_AGE_US
                        && line != 0 && line <= SUCCESSOR_FIELDS_64) {
                        steer = 1;
                    }
                }
                if (steer == 1) {
                    DMKV_EXEC(rd_record, r, hit)
                    DMKV_EXEC(rd_hi_set, r, hit)
                    hdr.reth.va = tail_va;
                } else {
                    DMKV_EXEC(rd_forget, r, hit)
                }
            }
        } else {
            // ---- Downstream paths -------------------------------------------------
            if (hdr.bth.opcode == OP_ATOMIC_ACKNOWLEDGE && hdr.aeth.syndrome[6:5] == 0) {
                DMKV_EXEC(cas_answer, r, word)
                rec_lo = word[31:0];
                rec_slot = word[63:32];
                if (rec_lo == 0) { return; }
                DMKV_EXEC(cas_cmp_read, r, cmp)
                DMKV_EXEC(cas_tgt_read, r, tgt)
                DMKV_EXEC(cas_node_va_read, r, meta.steer_node_va)
                DMKV_EXEC(cas_node_hdr_read, r, meta.steer_node_hdr)
                DMKV_EXEC(cas_node_ver_read, r, meta.steer_node_ver)
                word = hdr.atomic_ack_eth.original;
                if (word == cmp) {
                    // Success: pass 2 commits the node as the key's tail.
                    meta.steer_slot = rec_slot;
                    meta.steer_commit = 1;
                    meta.recirculate = 1;
                }
                if (rec_lo & CAS_STEERED != 0) {
                    if (word == cmp) {
                        // steered_success(): the tail's own generation | tail VA / 64.
                        hdr.atomic_ack_eth.original =
                            (cmp & (64w0xFFFF << 46)) | (tgt >> 6);
                    } else {
                        hdr.atomic_ack_eth.original = MARK_STEER_FAILED_64;
                    }
                }
            } else if ((hdr.bth.opcode == OP_READ_RESPONSE_ONLY
                        || hdr.bth.opcode == OP_READ_RESPONSE_FIRST)
                       && hdr.payload_word.isValid()) {
                DMKV_EXEC(rd_match, r, line_lo)
                if (line_lo == 0) { return; }
                DMKV_EXEC(rd_hi_read, r, line_hi)
                line = line_hi ++ line_lo;
                word = bswap64(hdr.payload_word.word);
                // No successor in the returned node: its address / 64 goes in the
                // successor fields (the marker the client reads).
                if (word[63:63] == 0 && word & SUCCESSOR_FIELDS_64 == 0) {
                    hdr.payload_word.word = bswap64(word | line);
                }
            }
        }
    }
}

#endif  // DMKV_CLOVER_STEER_P4
