// GENERATED from accel-p4/src/spec.rs by `accel-p4 gen-spec`. Do not edit:
// the test `spec_p4_matches_the_spec_module` fails when this file drifts.
#ifndef DMKV_SPEC_P4
#define DMKV_SPEC_P4

#define DMKV_SPEC_VERSION 1

// Ports and directions
const bit<9> PORT_CLIENT = 0;
const bit<9> PORT_MEMNODE = 1;
const bit<9> PORT_CPU = 2;
const bit<1> DIR_UP = 0;
const bit<1> DIR_DOWN = 1;

// Protocol numbers
const bit<16> ETHERTYPE_IPV4 = 0x0800;
const bit<16> ETHERTYPE_LATCH_RELEASE = 0x88b5;
const bit<8> IP_PROTO_UDP = 17;
const bit<16> ROCE_UDP_PORT = 4791;

// RC opcodes (BTH byte 0)
const bit<8> OP_WRITE_FIRST = 0x06;
const bit<8> OP_WRITE_MIDDLE = 0x07;
const bit<8> OP_WRITE_LAST = 0x08;
const bit<8> OP_WRITE_LAST_IMM = 0x09;
const bit<8> OP_WRITE_ONLY = 0x0a;
const bit<8> OP_WRITE_ONLY_IMM = 0x0b;
const bit<8> OP_READ_REQUEST = 0x0c;
const bit<8> OP_READ_RESPONSE_FIRST = 0x0d;
const bit<8> OP_READ_RESPONSE_MIDDLE = 0x0e;
const bit<8> OP_READ_RESPONSE_LAST = 0x0f;
const bit<8> OP_READ_RESPONSE_ONLY = 0x10;
const bit<8> OP_ACKNOWLEDGE = 0x11;
const bit<8> OP_ATOMIC_ACKNOWLEDGE = 0x12;
const bit<8> OP_COMPARE_SWAP = 0x13;
const bit<8> OP_FETCH_ADD = 0x14;

// AETH syndromes
const bit<8> SYNDROME_ACK = 0x1f;
const bit<8> SYNDROME_NAK_PSN_SEQUENCE = 0x60;
const bit<8> SYNDROME_NAK_INVALID_REQUEST = 0x61;
const bit<8> SYNDROME_NAK_REMOTE_ACCESS = 0x62;

// Mode register bits
const bit<32> MODE_WRITE_STEER = 0x1;
const bit<32> MODE_READ_STEER = 0x2;
const bit<32> MODE_ATOMIC_REPLACE = 0x4;
const bit<32> MODE_SWITCH_ATOMICS = 0x8;
const bit<32> MODE_OPT_LATCH = 0x10;
const bit<32> MODE_FAULTS = 0x20;

// Sizes
#define MAX_CONNS 256
#define ATOMIC_SLOTS 1024
#define ANSWER_RING 256
#define ROUTE_TABLE_SIZE 256
#define ATOMIC_RANGE_TABLE_SIZE 4
#define LOCK_SLOTS 256
#define MUX_QPS 4
#define COPY_SLOTS 16
#define MIRROR_SETS 32
#define MIRROR_BACKUPS 2
#define MIRROR_OWNERS 256
#define LB_MAX_LEN 1024
#define LB_MAP_SLOTS 64
#define LB_OWNER_SLOTS 256
#define LB_MAP_MEMBER_SHIFT 25
#define MUX_RING 1024
#define LATCH_TUPLES 4096
#define LATCH_PER_CONN 256
#define LATCH_PER_CONN_LOG2 8
#define WINDOW_TABLE_SIZE 4096
#define STEER_KEYS 1024
#define STEER_ADDRS 8192
#define STEER_RING 16
#define STEER_CLASSES 8
#define STEER_MAX_AGE_US 10000
#define FAULT_SCALE 65536
#define COPY_REPLICAS 7
#define COPY_MCAST_GROUP_BASE 64
typedef bit<8> conn_id_t;
const bit<32> PSN_VALID = 0x1000000;
const bit<32> CONN_PENDING = 0x2000000;
const bit<32> CONN_FILLER_LAST = 0x4000000;
const bit<32> LOCK_CACHED = 0x2000000;
const bit<32> MIRROR_ACTIVE = 0x2000000;
const bit<32> MIRROR_POISONED = 0x4000000;
const bit<32> LB_MAP_ANSWERED = 0x8000000;
const bit<32> INVALID_RKEY = 0x0;
const bit<64> STAMP_PRESENT = 0x8000000000000000;
const bit<64> STAMP_INVALID = 0x4000000000000000;
const bit<8> STAMP_BYTES_SHIFT = 32;
const bit<64> STAMP_BYTES_MASK = 0x1fff;
const bit<64> STAMP_VERSION_MASK = 0x7fffff;

// Header layouts
header ethernet_h {  // 14 bytes
    bit<48> dst_addr;
    bit<48> src_addr;
    bit<16> ether_type;
}
header ipv4_h {  // 20 bytes
    bit<4> version;
    bit<4> ihl;
    bit<8> tos;
    bit<16> total_len;
    bit<16> identification;
    bit<3> flags;
    bit<13> frag_offset;
    bit<8> ttl;
    bit<8> protocol;
    bit<16> hdr_checksum;
    bit<32> src_addr;
    bit<32> dst_addr;
}
header udp_h {  // 8 bytes
    bit<16> src_port;
    bit<16> dst_port;
    bit<16> length;
    bit<16> checksum;
}
header bth_h {  // 12 bytes
    bit<8> opcode;
    bit<1> solicited;
    bit<1> mig_req;
    bit<2> pad_count;
    bit<4> tver;
    bit<16> pkey;
    bit<1> fecn;
    bit<1> becn;
    bit<6> rsvd0;
    bit<24> dest_qpn;
    bit<1> ack_req;
    bit<7> rsvd1;
    bit<24> psn;
}
header reth_h {  // 16 bytes
    bit<64> va;
    bit<32> rkey;
    bit<32> dma_len;
}
header atomic_eth_h {  // 28 bytes
    bit<64> va;
    bit<32> rkey;
    bit<64> swap_add;
    bit<64> compare;
}
header aeth_h {  // 4 bytes
    bit<8> syndrome;
    bit<24> msn;
}
header atomic_ack_eth_h {  // 8 bytes
    bit<64> original;
}
header payload_word_h {  // 8 bytes
    bit<64> word;
}
header clover_prefix_h {  // 24 bytes
    bit<64> chain_id;
    bit<16> key_len;
    bit<8> class;
    bit<8> rsvd;
    bit<32> value_len;
    bit<32> version;
    bit<32> crc;
}
header icrc_h {  // 4 bytes
    bit<32> icrc;
}
header latch_release_h {  // 12 bytes
    bit<32> tuple;
    bit<32> cell;
    bit<32> result;
}

// Registers: DMKV_REGISTER(name, cell width, cells) / DMKV_REGISTER_PAIR(name, cells)
// are defined by the architecture shim (tna/ or v1model/) before this file is included.
// Ingress.mode: function enable bits (MODE_*)
#define REG_MODE_SIZE 1
#define REG_MODE_WIDTH 32
#define DECLARE_REG_MODE DMKV_REGISTER(mode, 32, 1)
// ConnTrack.conn_acked: next memnode-side PSN without a response | PSN_VALID
#define REG_CONN_ACKED_SIZE 256
#define REG_CONN_ACKED_WIDTH 32
#define DECLARE_REG_CONN_ACKED DMKV_REGISTER(conn_acked, 32, 256)
// ConnTrack.conn_epsn: lo: next expected client PSN | PSN_VALID; hi: PSN offset (client - memnode)
#define REG_CONN_EPSN_SIZE 256
#define REG_CONN_EPSN_WIDTH 32
#define DECLARE_REG_CONN_EPSN DMKV_REGISTER_PAIR(conn_epsn, 256)
// SwitchAtomics.conn_sw: lo: client PSN of the last switch answer | PSN_VALID; hi: next memnode PSN then | PSN_VALID
#define REG_CONN_SW_SIZE 256
#define REG_CONN_SW_WIDTH 32
#define DECLARE_REG_CONN_SW DMKV_REGISTER_PAIR(conn_sw, 256)
// SwitchAtomics.answer_psn: index conn * ANSWER_RING + client PSN mod ANSWER_RING: client PSN of a switch answer | PSN_VALID
#define REG_ANSWER_PSN_SIZE 65536
#define REG_ANSWER_PSN_WIDTH 32
#define DECLARE_REG_ANSWER_PSN DMKV_REGISTER(answer_psn, 32, 65536)
// ConnTrack.conn_msn: lo: messages answered by the switch (MSN offset); hi: last MSN from the memnode
#define REG_CONN_MSN_SIZE 256
#define REG_CONN_MSN_WIDTH 32
#define DECLARE_REG_CONN_MSN DMKV_REGISTER_PAIR(conn_msn, 256)
// SwitchAtomics.atomic_word: switch-owned 64-bit words (lo/hi)
#define REG_ATOMIC_WORD_SIZE 1024
#define REG_ATOMIC_WORD_WIDTH 32
#define DECLARE_REG_ATOMIC_WORD DMKV_REGISTER_PAIR(atomic_word, 1024)
// SwitchAtomics.answer_result: index as answer_psn: original value the switch-answered atomic returned (lo/hi)
#define REG_ANSWER_RESULT_SIZE 65536
#define REG_ANSWER_RESULT_WIDTH 32
#define DECLARE_REG_ANSWER_RESULT DMKV_REGISTER_PAIR(answer_result, 65536)
// AtomicReplace.mux_next_psn: next PSN the switch sends on the multiplexed QP | PSN_VALID
#define REG_MUX_NEXT_PSN_SIZE 4
#define REG_MUX_NEXT_PSN_WIDTH 32
#define DECLARE_REG_MUX_NEXT_PSN DMKV_REGISTER(mux_next_psn, 32, 4)
// AtomicReplace.mux_ring: index mux * MUX_RING + (upstream PSN mod MUX_RING): upstream PSN << 8 | conn
#define REG_MUX_RING_SIZE 4096
#define REG_MUX_RING_WIDTH 32
#define DECLARE_REG_MUX_RING DMKV_REGISTER(mux_ring, 32, 4096)
// AtomicReplace.mux_resend: lo: upstream PSN of the last re-sent request | PSN_VALID; hi: its connection
#define REG_MUX_RESEND_SIZE 4
#define REG_MUX_RESEND_WIDTH 32
#define DECLARE_REG_MUX_RESEND DMKV_REGISTER_PAIR(mux_resend, 4)
// AtomicReplace.repl_up: upstream PSN of the connection's diverted request | PSN_VALID | mux << 25
#define REG_REPL_UP_SIZE 256
#define REG_REPL_UP_WIDTH 32
#define DECLARE_REG_REPL_UP DMKV_REGISTER(repl_up, 32, 256)
// AtomicReplace.repl_slot: slot | 1 << 16 if sent as the original atomic (cache fill) | 1 << 17 if FAA
#define REG_REPL_SLOT_SIZE 256
#define REG_REPL_SLOT_WIDTH 32
#define DECLARE_REG_REPL_SLOT DMKV_REGISTER(repl_slot, 32, 256)
// AtomicReplace.repl_orig: original value returned by the connection's diverted request (lo/hi)
#define REG_REPL_ORIG_SIZE 256
#define REG_REPL_ORIG_WIDTH 32
#define DECLARE_REG_REPL_ORIG DMKV_REGISTER_PAIR(repl_orig, 256)
// AtomicReplace.repl_cmp: compare operand of the connection's diverted request (lo/hi)
#define REG_REPL_CMP_SIZE 256
#define REG_REPL_CMP_WIDTH 32
#define DECLARE_REG_REPL_CMP DMKV_REGISTER_PAIR(repl_cmp, 256)
// AtomicReplace.repl_swp: swap (CAS) or add (FAA) operand of the connection's diverted request (lo/hi)
#define REG_REPL_SWP_SIZE 256
#define REG_REPL_SWP_WIDTH 32
#define DECLARE_REG_REPL_SWP DMKV_REGISTER_PAIR(repl_swp, 256)
// AtomicReplace.lock_state: LOCK_CACHED | or the upstream PSN of the last unconverted atomic | PSN_VALID
#define REG_LOCK_STATE_SIZE 256
#define REG_LOCK_STATE_WIDTH 32
#define DECLARE_REG_LOCK_STATE DMKV_REGISTER(lock_state, 32, 256)
// AtomicReplace.lock_word: cached value of the tracked word, in upstream PSN order (lo/hi)
#define REG_LOCK_WORD_SIZE 256
#define REG_LOCK_WORD_WIDTH 32
#define DECLARE_REG_LOCK_WORD DMKV_REGISTER_PAIR(lock_word, 256)
// OptLatch.tuple_version: bits 0-22: version (even = free, odd = latched); bits 23-31: holder connection + 1
#define REG_TUPLE_VERSION_SIZE 4096
#define REG_TUPLE_VERSION_WIDTH 32
#define DECLARE_REG_TUPLE_VERSION DMKV_REGISTER(tuple_version, 32, 4096)
// OptLatch.client_tuple: index conn * LATCH_PER_CONN + PSN mod LATCH_PER_CONN: valid << 31 | write << 30 | (PSN >> LATCH_PER_CONN_LOG2 mod 2^14) << 16 | tuple
#define REG_CLIENT_TUPLE_SIZE 65536
#define REG_CLIENT_TUPLE_WIDTH 32
#define DECLARE_REG_CLIENT_TUPLE DMKV_REGISTER(client_tuple, 32, 65536)
// OptLatch.client_version: index as client_tuple: tuple_version cell when the READ went up
#define REG_CLIENT_VERSION_SIZE 65536
#define REG_CLIENT_VERSION_WIDTH 32
#define DECLARE_REG_CLIENT_VERSION DMKV_REGISTER(client_version, 32, 65536)
// OptLatch.read_cursor: lo: first PSN of the READ response in progress | PSN_VALID; hi: the PSN its next packet must have
#define REG_READ_CURSOR_SIZE 256
#define REG_READ_CURSOR_WIDTH 32
#define DECLARE_REG_READ_CURSOR DMKV_REGISTER_PAIR(read_cursor, 256)
// WriteSteer.steer_epsn: next expected client PSN | PSN_VALID
#define REG_STEER_EPSN_SIZE 256
#define REG_STEER_EPSN_WIDTH 32
#define DECLARE_REG_STEER_EPSN DMKV_REGISTER(steer_epsn, 32, 256)
// WriteSteer.steer_pend: lo: PSN of the following CAS | PSN_VALID; hi: key slot
#define REG_STEER_PEND_SIZE 256
#define REG_STEER_PEND_WIDTH 32
#define DECLARE_REG_STEER_PEND DMKV_REGISTER_PAIR(steer_pend, 256)
// SteerCache.steer_addr_tag: low 32 bits of (node VA >> 6) of the last node written to this hash slot
#define REG_STEER_ADDR_TAG_SIZE 8192
#define REG_STEER_ADDR_TAG_WIDTH 32
#define DECLARE_REG_STEER_ADDR_TAG DMKV_REGISTER(steer_addr_tag, 32, 8192)
// SteerCache.steer_addr_key: key slot + 1 of the node in this hash slot (0: empty or untracked)
#define REG_STEER_ADDR_KEY_SIZE 8192
#define REG_STEER_ADDR_KEY_WIDTH 32
#define DECLARE_REG_STEER_ADDR_KEY DMKV_REGISTER(steer_addr_key, 32, 8192)
// SteerCache.steer_tail_ver: version of the committed tail
#define REG_STEER_TAIL_VER_SIZE 1024
#define REG_STEER_TAIL_VER_WIDTH 32
#define DECLARE_REG_STEER_TAIL_VER DMKV_REGISTER(steer_tail_ver, 32, 1024)
// SteerCache.steer_tail_va: VA of the key's committed tail node (lo/hi; 0: unknown)
#define REG_STEER_TAIL_VA_SIZE 1024
#define REG_STEER_TAIL_VA_WIDTH 32
#define DECLARE_REG_STEER_TAIL_VA DMKV_REGISTER_PAIR(steer_tail_va, 1024)
// SteerCache.steer_tail_hdr: header word of the committed tail (lo/hi)
#define REG_STEER_TAIL_HDR_SIZE 1024
#define REG_STEER_TAIL_HDR_WIDTH 32
#define DECLARE_REG_STEER_TAIL_HDR DMKV_REGISTER_PAIR(steer_tail_hdr, 1024)
// SteerCache.steer_tail_ts: ingress time (µs) the tail was committed
#define REG_STEER_TAIL_TS_SIZE 1024
#define REG_STEER_TAIL_TS_WIDTH 32
#define DECLARE_REG_STEER_TAIL_TS DMKV_REGISTER(steer_tail_ts, 32, 1024)
// WriteSteer.steer_pend_va: VA of the node the pending WRITE wrote (lo/hi)
#define REG_STEER_PEND_VA_SIZE 256
#define REG_STEER_PEND_VA_WIDTH 32
#define DECLARE_REG_STEER_PEND_VA DMKV_REGISTER_PAIR(steer_pend_va, 256)
// WriteSteer.steer_pend_node: lo: low half of the node's header word; hi: the node's version as sent
#define REG_STEER_PEND_NODE_SIZE 256
#define REG_STEER_PEND_NODE_WIDTH 32
#define DECLARE_REG_STEER_PEND_NODE DMKV_REGISTER_PAIR(steer_pend_node, 256)
// WriteSteer.steer_pend_hdr_hi: high half of the pending node's header word
#define REG_STEER_PEND_HDR_HI_SIZE 256
#define REG_STEER_PEND_HDR_HI_WIDTH 32
#define DECLARE_REG_STEER_PEND_HDR_HI DMKV_REGISTER(steer_pend_hdr_hi, 32, 256)
// SteerCache.steer_addr_ver: version of the node in this hash slot
#define REG_STEER_ADDR_VER_SIZE 8192
#define REG_STEER_ADDR_VER_WIDTH 32
#define DECLARE_REG_STEER_ADDR_VER DMKV_REGISTER(steer_addr_ver, 32, 8192)
// WriteSteer.steer_cas: lo: CAS PSN | PSN_VALID | STEERED<<25; hi: key slot
#define REG_STEER_CAS_SIZE 4096
#define REG_STEER_CAS_WIDTH 32
#define DECLARE_REG_STEER_CAS DMKV_REGISTER_PAIR(steer_cas, 4096)
// WriteSteer.steer_cas_cmp: compare value as sent (lo/hi)
#define REG_STEER_CAS_CMP_SIZE 4096
#define REG_STEER_CAS_CMP_WIDTH 32
#define DECLARE_REG_STEER_CAS_CMP DMKV_REGISTER_PAIR(steer_cas_cmp, 4096)
// WriteSteer.steer_cas_tgt: CAS target VA as sent (lo/hi)
#define REG_STEER_CAS_TGT_SIZE 4096
#define REG_STEER_CAS_TGT_WIDTH 32
#define DECLARE_REG_STEER_CAS_TGT DMKV_REGISTER_PAIR(steer_cas_tgt, 4096)
// WriteSteer.steer_cas_node_va: VA of the node being linked (lo/hi)
#define REG_STEER_CAS_NODE_VA_SIZE 4096
#define REG_STEER_CAS_NODE_VA_WIDTH 32
#define DECLARE_REG_STEER_CAS_NODE_VA DMKV_REGISTER_PAIR(steer_cas_node_va, 4096)
// WriteSteer.steer_cas_node_hdr: header word of the node being linked (lo/hi)
#define REG_STEER_CAS_NODE_HDR_SIZE 4096
#define REG_STEER_CAS_NODE_HDR_WIDTH 32
#define DECLARE_REG_STEER_CAS_NODE_HDR DMKV_REGISTER_PAIR(steer_cas_node_hdr, 4096)
// WriteSteer.steer_cas_node_ver: version of the node being linked
#define REG_STEER_CAS_NODE_VER_SIZE 4096
#define REG_STEER_CAS_NODE_VER_WIDTH 32
#define DECLARE_REG_STEER_CAS_NODE_VER DMKV_REGISTER(steer_cas_node_ver, 32, 4096)
// ReadSteer.steer_rd: lo: READ PSN | PSN_VALID; hi: low 32 bits of (steered VA >> 6)
#define REG_STEER_RD_SIZE 4096
#define REG_STEER_RD_WIDTH 32
#define DECLARE_REG_STEER_RD DMKV_REGISTER_PAIR(steer_rd, 4096)
// ReadSteer.steer_rd_hi: high bits of (steered VA >> 6)
#define REG_STEER_RD_HI_SIZE 4096
#define REG_STEER_RD_HI_WIDTH 32
#define DECLARE_REG_STEER_RD_HI DMKV_REGISTER(steer_rd_hi, 32, 4096)
// FaultInject.fault_rng: xorshift32 state per direction (seeded by the control plane)
#define REG_FAULT_RNG_SIZE 2
#define REG_FAULT_RNG_WIDTH 32
#define DECLARE_REG_FAULT_RNG DMKV_REGISTER(fault_rng, 32, 2)
// ZeroCopy.copy_acked: packets of the copy acknowledged by the target (cumulative, from its first PSN) | PSN_VALID
#define REG_COPY_ACKED_SIZE 16
#define REG_COPY_ACKED_WIDTH 32
#define DECLARE_REG_COPY_ACKED DMKV_REGISTER(copy_acked, 32, 16)
// MirrorWrite.mirror_conn: client PSN of the last replicated WRITE | PSN_VALID | MIRROR_ACTIVE (waiting) | MIRROR_POISONED
#define REG_MIRROR_CONN_SIZE 256
#define REG_MIRROR_CONN_WIDTH 32
#define DECLARE_REG_MIRROR_CONN DMKV_REGISTER(mirror_conn, 32, 256)
// MirrorWrite.mirror_conn_set: replica set of the connection's last replicated WRITE
#define REG_MIRROR_CONN_SET_SIZE 256
#define REG_MIRROR_CONN_SET_WIDTH 8
#define DECLARE_REG_MIRROR_CONN_SET DMKV_REGISTER(mirror_conn_set, 8, 256)
// MirrorWrite.mirror_bpsn0: lane PSN of the waiting WRITE on the set's backup 0
#define REG_MIRROR_BPSN0_SIZE 256
#define REG_MIRROR_BPSN0_WIDTH 32
#define DECLARE_REG_MIRROR_BPSN0 DMKV_REGISTER(mirror_bpsn0, 32, 256)
// MirrorWrite.mirror_bpsn1: lane PSN of the waiting WRITE on the set's backup 1
#define REG_MIRROR_BPSN1_SIZE 256
#define REG_MIRROR_BPSN1_WIDTH 32
#define DECLARE_REG_MIRROR_BPSN1 DMKV_REGISTER(mirror_bpsn1, 32, 256)
// MirrorWrite.mirror_held: PSN of the latest held primary acknowledgement | PSN_VALID
#define REG_MIRROR_HELD_SIZE 256
#define REG_MIRROR_HELD_WIDTH 32
#define DECLARE_REG_MIRROR_HELD DMKV_REGISTER(mirror_held, 32, 256)
// MirrorWrite.mirror_held_aeth: AETH (syndrome << 24 | MSN) of the latest held primary acknowledgement
#define REG_MIRROR_HELD_AETH_SIZE 256
#define REG_MIRROR_HELD_AETH_WIDTH 32
#define DECLARE_REG_MIRROR_HELD_AETH DMKV_REGISTER(mirror_held_aeth, 32, 256)
// MirrorWrite.mirror_next0: next PSN of the lane to backup 0
#define REG_MIRROR_NEXT0_SIZE 32
#define REG_MIRROR_NEXT0_WIDTH 32
#define DECLARE_REG_MIRROR_NEXT0 DMKV_REGISTER(mirror_next0, 32, 32)
// MirrorWrite.mirror_next1: next PSN of the lane to backup 1
#define REG_MIRROR_NEXT1_SIZE 32
#define REG_MIRROR_NEXT1_WIDTH 32
#define DECLARE_REG_MIRROR_NEXT1 DMKV_REGISTER(mirror_next1, 32, 32)
// MirrorWrite.mirror_acked0: lane PSN backup 0 acknowledged up to | PSN_VALID
#define REG_MIRROR_ACKED0_SIZE 32
#define REG_MIRROR_ACKED0_WIDTH 32
#define DECLARE_REG_MIRROR_ACKED0 DMKV_REGISTER(mirror_acked0, 32, 32)
// MirrorWrite.mirror_acked1: lane PSN backup 1 acknowledged up to | PSN_VALID
#define REG_MIRROR_ACKED1_SIZE 32
#define REG_MIRROR_ACKED1_WIDTH 32
#define DECLARE_REG_MIRROR_ACKED1 DMKV_REGISTER(mirror_acked1, 32, 32)
// MirrorWrite.mirror_owner0: connection | 0x100 of the WRITE at this PSN of the lane to backup 0
#define REG_MIRROR_OWNER0_SIZE 8192
#define REG_MIRROR_OWNER0_WIDTH 16
#define DECLARE_REG_MIRROR_OWNER0 DMKV_REGISTER(mirror_owner0, 16, 8192)
// MirrorWrite.mirror_owner1: connection | 0x100 of the WRITE at this PSN of the lane to backup 1
#define REG_MIRROR_OWNER1_SIZE 8192
#define REG_MIRROR_OWNER1_WIDTH 16
#define DECLARE_REG_MIRROR_OWNER1 DMKV_REGISTER(mirror_owner1, 16, 8192)
// ReadBalance.lb_cursor: per set: the member after the last one chosen
#define REG_LB_CURSOR_SIZE 32
#define REG_LB_CURSOR_WIDTH 32
#define DECLARE_REG_LB_CURSOR DMKV_REGISTER(lb_cursor, 32, 32)
// ReadBalance.lb_map: per connection and PSN slot: client PSN | valid | member << 25 | answered << 27
#define REG_LB_MAP_SIZE 16384
#define REG_LB_MAP_WIDTH 32
#define DECLARE_REG_LB_MAP DMKV_REGISTER(lb_map, 32, 16384)
// ReadBalance.lb_mapq: per connection and PSN slot: the lane PSN the READ took
#define REG_LB_MAPQ_SIZE 16384
#define REG_LB_MAPQ_WIDTH 32
#define DECLARE_REG_LB_MAPQ DMKV_REGISTER(lb_mapq, 32, 16384)
// ReadBalance.lb_fill_key: per connection: lo the primary's key, hi the primary's QPN of the last balanced READ
#define REG_LB_FILL_KEY_SIZE 256
#define REG_LB_FILL_KEY_WIDTH 32
#define DECLARE_REG_LB_FILL_KEY DMKV_REGISTER_PAIR(lb_fill_key, 256)
// ReadBalance.lb_fill_va: per connection: the address of the last balanced READ (lo, hi)
#define REG_LB_FILL_VA_SIZE 256
#define REG_LB_FILL_VA_WIDTH 32
#define DECLARE_REG_LB_FILL_VA DMKV_REGISTER_PAIR(lb_fill_va, 256)
// ReadBalance.lb_next0: per set: next PSN on the read lane to backup 0
#define REG_LB_NEXT0_SIZE 32
#define REG_LB_NEXT0_WIDTH 32
#define DECLARE_REG_LB_NEXT0 DMKV_REGISTER(lb_next0, 32, 32)
// ReadBalance.lb_next1: per set: next PSN on the read lane to backup 1
#define REG_LB_NEXT1_SIZE 32
#define REG_LB_NEXT1_WIDTH 32
#define DECLARE_REG_LB_NEXT1 DMKV_REGISTER(lb_next1, 32, 32)
// ReadBalance.lb_owner0: per set and lane PSN slot (backup 0): lo conn | client PSN << 8, hi lane PSN | valid
#define REG_LB_OWNER0_SIZE 8192
#define REG_LB_OWNER0_WIDTH 32
#define DECLARE_REG_LB_OWNER0 DMKV_REGISTER_PAIR(lb_owner0, 8192)
// ReadBalance.lb_owner1: per set and lane PSN slot (backup 1): lo conn | client PSN << 8, hi lane PSN | valid
#define REG_LB_OWNER1_SIZE 8192
#define REG_LB_OWNER1_WIDTH 32
#define DECLARE_REG_LB_OWNER1 DMKV_REGISTER_PAIR(lb_owner1, 8192)

// Tables (all keys exact)
// route_up: key (hdr.ipv4.src_addr, hdr.udp.src_port, hdr.bth.dest_qpn) -> to_memnode(conn, src, dst, client_qpn, pmtu_log2) | drop
#define TABLE_ROUTE_UP_SIZE 256
// route_down: key (hdr.ipv4.src_addr, hdr.udp.src_port, hdr.bth.dest_qpn) -> to_client(conn, src, dst) | drop
#define TABLE_ROUTE_DOWN_SIZE 256
// atomic_range: key (hdr.atomic_eth.rkey) -> switch_owned(base_va, slots) | not_owned
#define TABLE_ATOMIC_RANGE_SIZE 4
// tracked_lock: key (hdr.atomic_eth.rkey, hdr.atomic_eth.va) -> tracked(slot, mux) | untracked
#define TABLE_TRACKED_LOCK_SIZE 256
// mux_up: key (meta.mux) -> to_mux(src, dst, memnode_qpn)
#define TABLE_MUX_UP_SIZE 4
// mux_down: key (hdr.ipv4.src_addr, hdr.udp.src_port, hdr.bth.dest_qpn) -> from_mux(mux) | miss
#define TABLE_MUX_DOWN_SIZE 4
// conn_client: key (meta.conn) -> to_client(src, dst, client_qpn)
#define TABLE_CONN_CLIENT_SIZE 256
// conn_filler: key (meta.conn) -> filler(rkey, va, memnode_qpn)
#define TABLE_CONN_FILLER_SIZE 256
// latch_region: key (hdr.reth.rkey / hdr.atomic_eth.rkey) -> latched_tuples(base_va, stride_log2, tuples, first_tuple) | none
#define TABLE_LATCH_REGION_SIZE 4
// steer_keys: key (meta.chain_id) -> tracked(slot) | untracked
#define TABLE_STEER_KEYS_SIZE 1024
// steer_classes: key (hdr.reth.dma_len) -> node_class | not_a_node
#define TABLE_STEER_CLASSES_SIZE 8
// fault_policy: key (meta.dir) -> faults(drop, duplicate, reorder, delay, delay_us) | no_faults
#define TABLE_FAULT_POLICY_SIZE 2
// conn_scoped: key (meta.conn) -> scoped | NoAction
#define TABLE_CONN_SCOPED_SIZE 256
// conn_window: key (meta.conn, meta.scope_first (range)) -> window(window_id, read, write) | NoAction
#define TABLE_CONN_WINDOW_SIZE 4096
// conn_window_last: key (meta.conn, meta.scope_last (range)) -> window_last(window_id) | NoAction
#define TABLE_CONN_WINDOW_LAST_SIZE 4096
// copy_src: key (hdr.ipv4.src_addr, hdr.udp.src_port, hdr.bth.dest_qpn) -> read_to_write(slot, src_psn, dst_psn, dst_va, dst_rkey, src, dst, dst_qpn, pmtu_log2, len) | miss
#define TABLE_COPY_SRC_SIZE 16
// copy_dst: key (hdr.ipv4.src_addr, hdr.udp.src_port, hdr.bth.dest_qpn) -> write_answer(slot, dst_psn) | miss
#define TABLE_COPY_DST_SIZE 16
// flow_punt: key (hdr.ipv4.src_addr, hdr.udp.src_port, hdr.bth.dest_qpn) -> punt(ring) | miss
#define TABLE_FLOW_PUNT_SIZE 64
// mirror_rkey: key (hdr.reth.rkey) -> replicate(set, rkey) | miss
#define TABLE_MIRROR_RKEY_SIZE 32
// mirror_lane: key (meta.mirror_set, meta.mirror_backup) -> lane(src, dst, qpn, rkey, va_delta) | miss
#define TABLE_MIRROR_LANE_SIZE 64
// mirror_ack: key (hdr.ipv4.src_addr, hdr.udp.src_port, hdr.bth.dest_qpn) -> lane_answer(set, backup) | miss
#define TABLE_MIRROR_ACK_SIZE 64
// copy_mcast: key (meta.copy_slot, meta.copy_replica) -> replica_write(dst_psn, dst_va, dst_rkey, dst, dst_qpn) | miss
#define TABLE_COPY_MCAST_SIZE 112
// balance_rkey: key (hdr.reth.rkey) -> balance(set, rkey, backups, serving) | miss
#define TABLE_BALANCE_RKEY_SIZE 32
// balance_lane: key (meta.lb_set, meta.lb_backup) -> read_lane(src, dst, qpn, rkey, va_delta) | miss
#define TABLE_BALANCE_LANE_SIZE 64
// balance_answer: key (hdr.ipv4.src_addr, hdr.udp.src_port, hdr.bth.dest_qpn) -> read_lane_answer(set, backup) | miss
#define TABLE_BALANCE_ANSWER_SIZE 64
// balance_client: key (meta.conn) -> to_client(src, dst, client_qpn) | miss
#define TABLE_BALANCE_CLIENT_SIZE 256

#endif  // DMKV_SPEC_P4
