// Register abstraction shared by the control blocks in common/.
//
// The logic is written once; each architecture shim defines DMKV_TNA or DMKV_V1MODEL
// before including this file. A register action is one read-modify-write of one cell
// (or one lo/hi pair) per packet, as in the Rust model (src/model/register.rs):
//
//   DMKV_ACTION(reg, act, cell_t, ret_t, body...)       declare (in the control's locals)
//   DMKV_PAIR_ACTION(reg, act, ret_t, body...)           same for a lo/hi pair register
//   DMKV_EXEC(act, index, dst)                          run it (in apply), dst = result
//
// Inside `body`, `cell` is the cell (pairs: cell.lo, cell.hi) and `rv` the result.

#ifndef DMKV_ARCH_P4
#define DMKV_ARCH_P4

struct pair_t {
    bit<32> lo;
    bit<32> hi;
}

#if defined(DMKV_TNA)

#define DMKV_REGISTER(name, width, size) Register<bit<width>, bit<32>>(size, 0) name;
#define DMKV_REGISTER_PAIR(name, size) Register<pair_t, bit<32>>(size) name;
#define DMKV_ACTION(reg, act, cell_t, ret_t, ...) \
    RegisterAction<cell_t, bit<32>, ret_t>(reg) act = { \
        void apply(inout cell_t cell, out ret_t rv) { __VA_ARGS__ } \
    };
#define DMKV_PAIR_ACTION(reg, act, ret_t, ...) \
    RegisterAction<pair_t, bit<32>, ret_t>(reg) act = { \
        void apply(inout pair_t cell, out ret_t rv) { __VA_ARGS__ } \
    };
#define DMKV_EXEC(act, index, dst) dst = act.execute(index);

#elif defined(DMKV_V1MODEL)

// v1model has no register actions: an @atomic read-modify-write in one action, with
// the result in a control-local variable `act##_rv`. Pairs are two arrays (_lo, _hi).
#define DMKV_REGISTER(name, width, size) register<bit<width>>(size) name;
#define DMKV_REGISTER_PAIR(name, size) \
    register<bit<32>>(size) name##_lo; \
    register<bit<32>>(size) name##_hi;
#define DMKV_ACTION(reg, act, cell_t, ret_t, ...) \
    ret_t act##_rv; \
    action act(bit<32> index) { \
        @atomic { \
            cell_t cell; ret_t rv = 0; \
            reg.read(cell, index); \
            __VA_ARGS__ \
            reg.write(index, cell); \
            act##_rv = rv; \
        } \
    }
#define DMKV_PAIR_ACTION(reg, act, ret_t, ...) \
    ret_t act##_rv; \
    action act(bit<32> index) { \
        @atomic { \
            pair_t cell; ret_t rv = 0; \
            reg##_lo.read(cell.lo, index); \
            reg##_hi.read(cell.hi, index); \
            __VA_ARGS__ \
            reg##_lo.write(index, cell.lo); \
            reg##_hi.write(index, cell.hi); \
            act##_rv = rv; \
        } \
    }
#define DMKV_EXEC(act, index, dst) act(index); dst = act##_rv;

#else
#error "define DMKV_TNA or DMKV_V1MODEL before including arch.p4"
#endif

#endif  // DMKV_ARCH_P4
