//! Remote-memory layout facts that the metadata service (which sizes and zeroes
//! table-owned memory) and the client library (which reads and writes it) share.

/// In-place tables: bytes before tuple 0 in the tuple area (one 64-byte header line
/// holding the layout fingerprint the first client claims).
pub const INPLACE_HEADER_BYTES: u64 = 64;

// Allocation size classes shared by both indexes (see `kvstore::size_class`): every
// power of two from 64 B to 1 MiB plus the midpoint 1.5 × 2ⁿ from 128 B up.

/// Smallest size class: one 64-byte cache line.
pub const MIN_CLASS: usize = 64;

/// Largest size class: 1 MiB.
pub const MAX_CLASS: usize = 1 << 20;

/// Number of size classes.
pub const NUM_CLASSES: usize = 28;

/// The size classes in ascending order.
pub const SIZE_CLASSES: [usize; NUM_CLASSES] = build_table();

const fn build_table() -> [usize; NUM_CLASSES] {
    let mut table = [0usize; NUM_CLASSES];
    table[0] = MIN_CLASS;
    let mut i = 1;
    let mut pow = 2 * MIN_CLASS;
    while i < NUM_CLASSES {
        table[i] = pow;
        i += 1;
        if i < NUM_CLASSES {
            table[i] = pow + pow / 2;
            i += 1;
        }
        pow *= 2;
    }
    table
}
