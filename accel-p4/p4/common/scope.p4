// Scope: requests of connections made with a grant confined to the grant's windows
// (src/functions/scope.rs). Runs right after Route, on requests going up.
//
// A request naming memory (RETH: READ, WRITE First/Only; AtomicETH: CAS, FAA) of a
// connection in conn_scoped must lie in one window, whole: its first byte is matched
// in conn_window, its last byte in conn_window_last (the control plane writes every
// window into both; a table is applied once per packet), and both must hit the same
// window id, whose rights allow the request. Otherwise its memory key becomes
// INVALID_RKEY: the functions keyed by key pass it by, and the memory node answers
// NAK(remote access error) at the request's own PSN.
#ifndef DMKV_SCOPE_P4
#define DMKV_SCOPE_P4

control Scope(inout headers_t hdr, inout dmkv_meta_t meta) {
    bit<1> scoped = 0;
    bit<1> first_hit = 0;
    bit<1> last_hit = 0;
    bit<16> first_id = 0;
    bit<16> last_id = 0;
    bit<1> may_read = 0;
    bit<1> may_write = 0;
    bit<1> writes = 0;
    bit<64> scope_first = 0;
    bit<64> scope_last = 0;

    action mark_scoped() { scoped = 1; }
    table conn_scoped {
        key = { meta.conn: exact; }
        actions = { mark_scoped; NoAction; }
        default_action = NoAction();
        size = TABLE_CONN_SCOPED_SIZE;
    }

    action window(bit<16> window_id, bit<1> read, bit<1> write) {
        first_hit = 1;
        first_id = window_id;
        may_read = read;
        may_write = write;
    }
    table conn_window {
        key = { meta.conn: exact; scope_first: range; }
        actions = { window; NoAction; }
        default_action = NoAction();
        size = TABLE_CONN_WINDOW_SIZE;
    }

    action window_last(bit<16> window_id) {
        last_hit = 1;
        last_id = window_id;
    }
    table conn_window_last {
        key = { meta.conn: exact; scope_last: range; }
        actions = { window_last; NoAction; }
        default_action = NoAction();
        size = TABLE_CONN_WINDOW_LAST_SIZE;
    }

    action deny() {
        hdr.reth.rkey = INVALID_RKEY;
        hdr.atomic_eth.rkey = INVALID_RKEY;
    }

    apply {
        if (meta.dir == DIR_UP && (hdr.reth.isValid() || hdr.atomic_eth.isValid())) {
            conn_scoped.apply();
            if (scoped == 1) {
                if (hdr.atomic_eth.isValid()) {
                    scope_first = hdr.atomic_eth.va;
                    scope_last = hdr.atomic_eth.va + 7;
                    writes = 1;
                } else {
                    scope_first = hdr.reth.va;
                    // A zero-length request is checked at its first byte.
                    if (hdr.reth.dma_len == 0) {
                        scope_last = hdr.reth.va;
                    } else {
                        scope_last = hdr.reth.va + (bit<64>)(hdr.reth.dma_len - 1);
                    }
                    if (hdr.bth.opcode != OP_READ_REQUEST) { writes = 1; }
                }
                conn_window.apply();
                conn_window_last.apply();
                bit<1> ok = 0;
                if (first_hit == 1 && last_hit == 1 && first_id == last_id) {
                    if (writes == 1) { ok = may_write; } else { ok = may_read; }
                }
                if (ok == 0) { deny(); }
            }
        }
    }
}

#endif  // DMKV_SCOPE_P4
