// GENERATED from accel-p4/src/spec.rs by `accel-p4 gen-spec`. Do not edit:
// the test `spec_p4_matches_the_spec_module` fails when this file drifts.
#ifndef DMKV_SPEC_P4
#define DMKV_SPEC_P4

#define DMKV_SPEC_VERSION 1

// Ports and directions
const bit<9> PORT_CLIENT = 0;
const bit<9> PORT_MEMNODE = 1;
const bit<1> DIR_UP = 0;
const bit<1> DIR_DOWN = 1;

// Protocol numbers
const bit<16> ETHERTYPE_IPV4 = 0x0800;
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
#define ROUTE_TABLE_SIZE 256
#define ATOMIC_RANGE_TABLE_SIZE 4
#define FAULT_SCALE 65536
typedef bit<8> conn_id_t;
const bit<32> PSN_VALID = 0x1000000;

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
header icrc_h {  // 4 bytes
    bit<32> icrc;
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
// ConnTrack.conn_msn: lo: messages answered by the switch (MSN offset); hi: last MSN from the memnode
#define REG_CONN_MSN_SIZE 256
#define REG_CONN_MSN_WIDTH 32
#define DECLARE_REG_CONN_MSN DMKV_REGISTER_PAIR(conn_msn, 256)
// SwitchAtomics.atomic_word: switch-owned 64-bit words (lo/hi)
#define REG_ATOMIC_WORD_SIZE 1024
#define REG_ATOMIC_WORD_WIDTH 32
#define DECLARE_REG_ATOMIC_WORD DMKV_REGISTER_PAIR(atomic_word, 1024)
// SwitchAtomics.conn_result: original value returned by the last switch-answered atomic (lo/hi)
#define REG_CONN_RESULT_SIZE 256
#define REG_CONN_RESULT_WIDTH 32
#define DECLARE_REG_CONN_RESULT DMKV_REGISTER_PAIR(conn_result, 256)
// FaultInject.fault_rng: xorshift32 state per direction (seeded by the control plane)
#define REG_FAULT_RNG_SIZE 2
#define REG_FAULT_RNG_WIDTH 32
#define DECLARE_REG_FAULT_RNG DMKV_REGISTER(fault_rng, 32, 2)

// Tables (all keys exact)
// route_up: key (hdr.ipv4.src_addr, hdr.udp.src_port, hdr.bth.dest_qpn) -> to_memnode(conn, src, dst, client_qpn, pmtu_log2) | drop
#define TABLE_ROUTE_UP_SIZE 256
// route_down: key (hdr.ipv4.src_addr, hdr.udp.src_port, hdr.bth.dest_qpn) -> to_client(conn, src, dst) | drop
#define TABLE_ROUTE_DOWN_SIZE 256
// atomic_range: key (hdr.atomic_eth.rkey) -> switch_owned(base_va, slots) | not_owned
#define TABLE_ATOMIC_RANGE_SIZE 4
// fault_policy: key (meta.dir) -> faults(drop, duplicate, reorder, delay, delay_us) | no_faults
#define TABLE_FAULT_POLICY_SIZE 2

#endif  // DMKV_SPEC_P4
