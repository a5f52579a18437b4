// Ethernet / IPv4 (no options) / UDP / BTH / extension headers by opcode.
// A sub-parser instantiated by each architecture's top-level parser.
#ifndef DMKV_PARSER_P4
#define DMKV_PARSER_P4

parser DmkvParser(packet_in pkt, out headers_t hdr) {
    state start {
        pkt.extract(hdr.ethernet);
        transition select(hdr.ethernet.ether_type) {
            ETHERTYPE_IPV4: parse_ipv4;
            ETHERTYPE_LATCH_RELEASE: parse_latch_release;
            default: reject;
        }
    }
    // A latch-lease control packet from the control plane (PORT_CPU).
    state parse_latch_release { pkt.extract(hdr.latch_release); transition accept; }
    state parse_ipv4 {
        pkt.extract(hdr.ipv4);
        transition select(hdr.ipv4.ihl, hdr.ipv4.frag_offset, hdr.ipv4.protocol) {
            (5, 0, IP_PROTO_UDP): parse_udp;
            default: reject;
        }
    }
    state parse_udp {
        pkt.extract(hdr.udp);
        // The soft switch routes by table, not by port 4791 alone (its client-side
        // port is configurable); on a ToR this select would match ROCE_UDP_PORT.
        transition parse_bth;
    }
    state parse_bth {
        pkt.extract(hdr.bth);
        transition select(hdr.bth.opcode) {
            OP_WRITE_FIRST: parse_reth_word;
            OP_WRITE_ONLY: parse_reth_word;
            OP_WRITE_ONLY_IMM: parse_reth;
            OP_READ_REQUEST: parse_reth;
            OP_COMPARE_SWAP: parse_atomic_eth;
            OP_FETCH_ADD: parse_atomic_eth;
            // Every READ response packet: its first payload word is where OptLatch
            // writes the packet's stamp.
            OP_READ_RESPONSE_FIRST: parse_aeth_word;
            OP_READ_RESPONSE_MIDDLE: parse_bth_word;
            OP_READ_RESPONSE_LAST: parse_aeth_word;
            OP_READ_RESPONSE_ONLY: parse_aeth_word;
            OP_ACKNOWLEDGE: parse_aeth;
            OP_ATOMIC_ACKNOWLEDGE: parse_aeth_atomic;
            default: accept;
        }
    }
    state parse_reth { pkt.extract(hdr.reth); transition accept; }
    // The first payload word, when the UDP length says there is one (8 bytes plus the
    // 4-byte ICRC beyond the headers): UDP 8 + BTH 12 + RETH 16 / AETH 4.
    state parse_reth_word {
        pkt.extract(hdr.reth);
        transition select(hdr.udp.length >= 8 + 12 + 16 + 8 + 4) {
            true: parse_payload_word;
            default: accept;
        }
    }
    state parse_aeth_word {
        pkt.extract(hdr.aeth);
        transition select(hdr.udp.length >= 8 + 12 + 4 + 8 + 4) {
            true: parse_payload_word;
            default: accept;
        }
    }
    state parse_bth_word {
        transition select(hdr.udp.length >= 8 + 12 + 8 + 4) {
            true: parse_payload_word;
            default: accept;
        }
    }
    state parse_payload_word {
        pkt.extract(hdr.payload_word);
        // A WRITE Only carrying at least a Clover node prefix (32 bytes): the steering
        // functions read its chain id and version (UDP 8 + BTH 12 + RETH 16 + 32 + ICRC 4).
        transition select(hdr.bth.opcode, hdr.udp.length >= 8 + 12 + 16 + 32 + 4) {
            (OP_WRITE_ONLY, true): parse_clover_prefix;
            default: accept;
        }
    }
    state parse_clover_prefix { pkt.extract(hdr.clover_prefix); transition accept; }
    state parse_atomic_eth { pkt.extract(hdr.atomic_eth); transition accept; }
    state parse_aeth { pkt.extract(hdr.aeth); transition accept; }
    state parse_aeth_atomic {
        pkt.extract(hdr.aeth);
        pkt.extract(hdr.atomic_ack_eth);
        transition accept;
    }
}

control DmkvDeparser(packet_out pkt, in headers_t hdr) {
    apply {
        pkt.emit(hdr.ethernet);
        pkt.emit(hdr.latch_release);
        pkt.emit(hdr.ipv4);
        pkt.emit(hdr.udp);
        pkt.emit(hdr.bth);
        pkt.emit(hdr.reth);
        pkt.emit(hdr.atomic_eth);
        pkt.emit(hdr.aeth);
        pkt.emit(hdr.atomic_ack_eth);
        pkt.emit(hdr.payload_word);
        pkt.emit(hdr.clover_prefix);
    }
}

#endif  // DMKV_PARSER_P4
