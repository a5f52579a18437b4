// Route: connection id, address rewrite and egress port (src/functions/forward.rs).
#ifndef DMKV_ROUTE_P4
#define DMKV_ROUTE_P4

control Route(inout headers_t hdr, inout dmkv_meta_t meta, in bit<9> ingress_port) {
    action rewrite(conn_id_t conn, bit<32> src_addr, bit<16> src_port,
                   bit<32> dst_addr, bit<16> dst_port) {
        meta.routed = 1;
        meta.conn = conn;
        meta.ingress_src_addr = hdr.ipv4.src_addr;
        meta.ingress_dst_addr = hdr.ipv4.dst_addr;
        meta.ingress_src_port = hdr.udp.src_port;
        meta.ingress_dst_port = hdr.udp.dst_port;
        hdr.ipv4.src_addr = src_addr;
        hdr.ipv4.dst_addr = dst_addr;
        hdr.udp.src_port = src_port;
        hdr.udp.dst_port = dst_port;
    }
    action to_memnode(conn_id_t conn, bit<32> src_addr, bit<16> src_port,
                      bit<32> dst_addr, bit<16> dst_port, bit<24> client_qpn,
                      bit<8> pmtu_log2) {
        rewrite(conn, src_addr, src_port, dst_addr, dst_port);
        meta.dir = DIR_UP;
        meta.egress_port = PORT_MEMNODE;
        meta.client_qpn = client_qpn;
        meta.pmtu_log2 = pmtu_log2;
    }
    action to_client(conn_id_t conn, bit<32> src_addr, bit<16> src_port,
                     bit<32> dst_addr, bit<16> dst_port) {
        rewrite(conn, src_addr, src_port, dst_addr, dst_port);
        meta.dir = DIR_DOWN;
        meta.egress_port = PORT_CLIENT;
    }
    action miss() { meta.drop = 1; }

    table route_up {
        key = {
            hdr.ipv4.src_addr: exact;
            hdr.udp.src_port: exact;
            hdr.bth.dest_qpn: exact;
        }
        actions = { to_memnode; miss; }
        default_action = miss();
        size = TABLE_ROUTE_UP_SIZE;
    }
    table route_down {
        key = {
            hdr.ipv4.src_addr: exact;
            hdr.udp.src_port: exact;
            hdr.bth.dest_qpn: exact;
        }
        actions = { to_client; miss; }
        default_action = miss();
        size = TABLE_ROUTE_DOWN_SIZE;
    }

    apply {
        if (ingress_port == PORT_CLIENT) {
            route_up.apply();
        } else {
            route_down.apply();
        }
    }
}

#endif  // DMKV_ROUTE_P4
