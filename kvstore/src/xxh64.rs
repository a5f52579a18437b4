//! XXH64, the 64-bit xxHash function, used for every hash that lands in remote memory.
//!
//! Every client must place a key in the same bucket, across processes, builds and
//! Rust releases, so the hash is a fixed, published algorithm (Yann Collet's
//! XXH64) rather than `std`'s unspecified `DefaultHasher`. The implementation is
//! checked against the reference library's outputs in the tests.

const P1: u64 = 0x9E37_79B1_85EB_CA87;
const P2: u64 = 0xC2B2_AE3D_27D4_EB4F;
const P3: u64 = 0x1656_67B1_9E37_79F9;
const P4: u64 = 0x85EB_CA77_C2B2_AE63;
const P5: u64 = 0x27D4_EB2F_1656_67C5;

fn read_u64(b: &[u8]) -> u64 {
    let mut w = [0u8; 8];
    for (d, s) in w.iter_mut().zip(b) {
        *d = *s;
    }
    u64::from_le_bytes(w)
}

fn read_u32(b: &[u8]) -> u64 {
    let mut w = [0u8; 4];
    for (d, s) in w.iter_mut().zip(b) {
        *d = *s;
    }
    u64::from(u32::from_le_bytes(w))
}

fn round(acc: u64, input: u64) -> u64 {
    acc.wrapping_add(input.wrapping_mul(P2))
        .rotate_left(31)
        .wrapping_mul(P1)
}

fn merge_round(acc: u64, val: u64) -> u64 {
    (acc ^ round(0, val)).wrapping_mul(P1).wrapping_add(P4)
}

/// XXH64 of `data` with `seed`.
pub(crate) fn xxh64(data: &[u8], seed: u64) -> u64 {
    let len = data.len() as u64;
    let mut stripes = data.chunks_exact(32);
    let mut h = if data.len() >= 32 {
        let mut v = [
            seed.wrapping_add(P1).wrapping_add(P2),
            seed.wrapping_add(P2),
            seed,
            seed.wrapping_sub(P1),
        ];
        for stripe in &mut stripes {
            for (lane, word) in v.iter_mut().zip(stripe.chunks_exact(8)) {
                *lane = round(*lane, read_u64(word));
            }
        }
        let mut h = v[0]
            .rotate_left(1)
            .wrapping_add(v[1].rotate_left(7))
            .wrapping_add(v[2].rotate_left(12))
            .wrapping_add(v[3].rotate_left(18));
        for lane in v {
            h = merge_round(h, lane);
        }
        h
    } else {
        seed.wrapping_add(P5)
    };
    h = h.wrapping_add(len);

    let mut rest = stripes.remainder();
    while rest.len() >= 8 {
        let (word, tail) = rest.split_at(8);
        h ^= round(0, read_u64(word));
        h = h.rotate_left(27).wrapping_mul(P1).wrapping_add(P4);
        rest = tail;
    }
    if rest.len() >= 4 {
        let (word, tail) = rest.split_at(4);
        h ^= read_u32(word).wrapping_mul(P1);
        h = h.rotate_left(23).wrapping_mul(P2).wrapping_add(P3);
        rest = tail;
    }
    for &byte in rest {
        h ^= u64::from(byte).wrapping_mul(P5);
        h = h.rotate_left(11).wrapping_mul(P1);
    }

    h ^= h >> 33;
    h = h.wrapping_mul(P2);
    h ^= h >> 29;
    h = h.wrapping_mul(P3);
    h ^= h >> 32;
    h
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Outputs of the reference libxxhash 0.8.1.
    #[test]
    fn matches_reference_vectors() {
        let hundred: Vec<u8> = (0..100).collect();
        let cases: [(&[u8], u64, u64); 8] = [
            (b"", 0, 0xef46_db37_51d8_e999),
            (b"a", 0, 0xd24e_c4f1_a98c_6e5b),
            (b"abc", 0, 0x44bc_2cf5_ad77_0999),
            (b"abc", 1, 0xbea9_ca81_9932_8908),
            (
                b"The quick brown fox jumps over the lazy dog",
                0,
                0x0b24_2d36_1fda_71bc,
            ),
            (&hundred, 0x9e37_79b9_7f4a_7c15, 0x3b97_d91e_ba03_e785),
            (&hundred, 0x1234, 0x9c53_95b5_da7d_2126),
            (b"key-42", 0x5ca1_ab1e, 0xa2d7_1365_d4f7_f072),
        ];
        for (data, seed, want) in cases {
            assert_eq!(xxh64(data, seed), want, "len {} seed {seed:#x}", data.len());
        }
    }
}
