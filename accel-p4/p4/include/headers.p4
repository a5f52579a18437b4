// Parsed headers and per-packet metadata (the Rust model's `Packet` and `Metadata`).
#ifndef DMKV_HEADERS_P4
#define DMKV_HEADERS_P4

#include "spec.p4"

struct headers_t {
    ethernet_h ethernet;
    ipv4_h ipv4;
    udp_h udp;
    bth_h bth;
    reth_h reth;
    atomic_eth_h atomic_eth;
    aeth_h aeth;
    atomic_ack_eth_h atomic_ack_eth;
    // First 8 payload bytes (AtomicReplace's WRITE value, OptLatch's stamp word).
    payload_word_h payload_word;
    // Node bytes 8..32 of a Clover node WRITE (chain id, version: WriteSteer).
    clover_prefix_h clover_prefix;
    // The latch lease's control packet (instead of IPv4: OptLatch only).
    latch_release_h latch_release;
    // The payload is not parsed; the ICRC trailer is recomputed by the deparser's
    // checksum engine over the final headers (see README: ICRC).
}

// What SwitchAtomics decided for a request (the model's `Class`).
const bit<3> CLASS_FORWARD = 0;
const bit<3> CLASS_DUPLICATE = 1;
const bit<3> CLASS_ANSWER = 2;
const bit<3> CLASS_REPLAY = 3;
const bit<3> CLASS_DEFER = 4;
const bit<3> CLASS_HELD = 5;

// Requests other functions answer or divert (the model's `Intercept`).
const bit<2> INTERCEPT_NONE = 0;
const bit<2> INTERCEPT_DIVERT = 1;
const bit<2> INTERCEPT_LATCH = 2;
const bit<2> INTERCEPT_READ_VERSION = 3;

struct dmkv_meta_t {
    bit<1> routed;
    conn_id_t conn;
    bit<1> dir;
    bit<9> egress_port;
    bit<1> drop;
    bit<24> client_qpn;
    bit<8> pmtu_log2;
    bit<1> answered;
    bit<32> mode;
    // SwitchAtomics
    bit<1> owned;
    bit<1> aligned;
    bit<32> slot;
    bit<24> npsn;
    bit<24> acked;
    bit<3> class;
    bit<24> psn_off;
    bit<24> msn;
    bit<32> result_lo;
    bit<32> result_hi;
    bit<32> ingress_src_addr;
    bit<32> ingress_dst_addr;
    bit<16> ingress_src_port;
    bit<16> ingress_dst_port;
    // Intercepted requests (AtomicReplace, OptLatch)
    bit<2> intercept;
    bit<1> pending;
    bit<1> admitted;
    bit<1> replay;
    // AtomicReplace
    bit<32> lock_slot;
    bit<2> mux;
    bit<1> from_mux;
    bit<1> converted;
    bit<1> recirculate;
    bit<24> upsn;
    // Fillers (SwitchAtomics decides, AtomicReplace builds): the memnode still misses
    // the filler at filler_psn — send it in this packet's place, or as a mirrored copy
    // beside it; resend_filler: a sequence NAK for a filler, turned around
    bit<1> filler_instead;
    bit<1> filler_extra;
    bit<1> resend_filler;
    bit<24> filler_psn;
    // OptLatch
    bit<32> tuple;
    bit<32> rkey;
    // WriteSteer / ReadSteer
    bit<1> steer_in_order;
    bit<32> steer_slot;
    bit<1> steer_hit;
    bit<32> steer_tag;
    bit<1> steer_node_class;
    // Ingress time in µs (TNA: global timestamp >> 10; v1model: ingress_global_timestamp)
    bit<32> now_us;
    // A committing ATOMIC ACK's second pass: the node to commit, bridged from pass 1
    bit<1> steer_commit;
    bit<64> steer_node_va;
    bit<64> steer_node_hdr;
    bit<32> steer_node_ver;
    // FaultInject
    bit<32> rng;
    // MirrorWrite (bridged to egress, where each replica of a replicated WRITE becomes
    // the copy for one backup): the set, its backups, what they get (1 fresh, 2 again)
    bit<1> mirror;
    bit<5> mirror_set;
    bit<2> mirror_backups;
    bit<2> mirror_copies;
    bit<8> mirror_backup;
    // ZeroCopy multicast (bridged to egress, where each replica of a converted READ
    // response becomes the WRITE for one more target): the copy slot, the response's
    // packet index k, the replica (egress rid)
    bit<1> copy_mcast;
    bit<8> copy_slot;
    bit<24> copy_k;
    bit<8> copy_replica;
    // ReadBalance: what BalanceClassify found (LB_NONE, LB_READ, LB_ANSWER), the set,
    // its backups and serving bits, the backup chosen or answering; a lane READ's
    // filler, bridged to egress (BalanceFiller) with the primary's addressing
    bit<2> lb_kind;
    bit<5> lb_set;
    bit<2> lb_backups;
    bit<2> lb_serving;
    bit<8> lb_backup;
    bit<1> lb_filler;
    bit<24> lb_filler_psn;
    bit<24> lb_filler_qpn;
    bit<32> lb_filler_rkey;
    bit<64> lb_filler_va;
    bit<32> lb_filler_src_addr;
    bit<16> lb_filler_src_port;
    bit<32> lb_filler_dst_addr;
    bit<16> lb_filler_dst_port;
}

#endif  // DMKV_HEADERS_P4
