// FaultInject: drop / duplicate / reorder / delay per direction, for tests
// (src/functions/faults.rs). The model draws from a seeded xorshift32 register so runs
// reproduce; hardware draws from the architecture's random source (DMKV_RANDOM32).
// Duplication uses the shim's mirror/clone primitive (DMKV_DUPLICATE); reorder and
// delay need a recirculation loop and are left to the shims (not implemented in P4).
#ifndef DMKV_FAULT_INJECT_P4
#define DMKV_FAULT_INJECT_P4

control FaultInject(inout headers_t hdr, inout dmkv_meta_t meta, out bit<1> duplicate) {
    DECLARE_REG_FAULT_RNG

    DMKV_ACTION(fault_rng, rng_next, bit<32>, bit<32>,
        bit<32> x = (cell == 0) ? 32w0x9E3779B9 : cell;
        x = x ^ (x << 13);
        x = x ^ (x >> 17);
        x = x ^ (x << 5);
        cell = x;
        rv = x;
    )

    action faults(bit<32> drop, bit<32> dup, bit<32> reorder, bit<32> delay,
                  bit<32> delay_us) {
        if ((bit<32>)meta.rng[15:0] < drop) {
            meta.drop = 1;
        } else if ((bit<32>)meta.rng[31:16] < dup) {
            duplicate = 1;
        }
    }
    action no_faults() {}
    table fault_policy {
        key = { meta.dir: exact; }
        actions = { faults; no_faults; }
        default_action = no_faults();
        size = TABLE_FAULT_POLICY_SIZE;
    }

    apply {
        duplicate = 0;
        if ((meta.mode & MODE_FAULTS) != 0) {
            DMKV_EXEC(rng_next, (bit<32>)meta.dir, meta.rng)
            fault_policy.apply();
        }
    }
}

#endif  // DMKV_FAULT_INJECT_P4
