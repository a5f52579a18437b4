//! In-place tables as the catalog sees them, sans IO: checking a table's latch
//! scheme against the combinations the memory semantics forbid, and sizing its
//! table-owned memory.
//!
//! The protocols live in the client (`kvstore/src/inplace/`); the service knows what it
//! needs to refuse bad tables and to allocate their memory: the scheme name's
//! family and options (`-`-separated tokens, e.g. `pessimistic-x-wc-wu`), the latch
//! placement, the tuple stride and the capacity. Rules:
//!
//! * write-unlatch (`-wu`, the unlatch carried by the last bytes of the data
//!   WRITE) only with the exclusive-only pessimistic latch (`-x`): a reader's FAA
//!   may be applied to a stale copy of the latch word and written back over the
//!   unlatching WRITE (sync seed §3.3); nor with a separate latch array (the latch
//!   must be the tuple's last word);
//! * bookend versioning only with `unsafe_demo: true` (it returns torn values), and
//!   `unsafe_demo` only with it;
//! * padded or separate latches only for the pessimistic latch (optimistic schemes
//!   keep their latch word in the tuple).
//!
//! Memory: the tuple area is one 64-byte header line (the layout fingerprint the
//! first client claims) followed by `capacity` tuples `tuple_bytes` apart; a
//! separate latch array holds one 8-byte latch per tuple (rounded up to a line) on
//! the same memnode.

use crate::api::{InPlaceRequest, LatchPlacement};

/// Bytes before tuple 0 in the tuple area.
pub use dmkv_api::layout::INPLACE_HEADER_BYTES as HEADER_BYTES;
/// Most tuples a table may have.
pub const MAX_CAPACITY: u64 = 1 << 24;
/// Largest tuple area.
pub const MAX_AREA_BYTES: u64 = 1 << 30;

/// A checked in-place request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Checked {
    /// The scheme name, with the latch placement token added to a pessimistic
    /// scheme whose name had none (so the name alone gives the layout).
    pub scheme: String,
    /// Latch placement.
    pub placement: LatchPlacement,
    /// Bytes of the tuple area.
    pub area_bytes: u64,
    /// Bytes of the separate latch array, if any.
    pub latch_bytes: Option<u64>,
}

fn placement_token(p: LatchPlacement) -> &'static str {
    match p {
        LatchPlacement::Embedded => "embedded",
        LatchPlacement::Padded => "padded",
        LatchPlacement::Separate => "separate",
    }
}

/// Checks `req` for a table of values up to `value_limit` bytes.
pub fn check(req: &InPlaceRequest, value_limit: u64) -> Result<Checked, String> {
    let scheme = req.scheme.trim().to_ascii_lowercase();
    if scheme.is_empty()
        || scheme.len() > 64
        || !scheme
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_' || c == '-')
    {
        return Err(format!(
            "latch scheme {:?} must be 1 to 64 characters from a-z, 0-9, '_' and '-'",
            req.scheme
        ));
    }
    let tokens: Vec<&str> = scheme.split('-').collect();
    let family = tokens[0];
    let has = |t: &str| tokens[1..].contains(&t);
    if family == "bookend" && !req.unsafe_demo {
        return Err(
            "bookend versioning is unsafe: one READ may see the head and tail versions of one \
             write and the lines between of another, so torn values pass its check (sync seed \
             §1, §4.2); create it only as a demonstration, with unsafe_demo: true"
                .into(),
        );
    }
    if family != "bookend" && req.unsafe_demo {
        return Err(format!(
            "unsafe_demo acknowledges torn reads and applies only to the bookend scheme, not {family:?}"
        ));
    }
    let named: Vec<LatchPlacement> = [
        LatchPlacement::Embedded,
        LatchPlacement::Padded,
        LatchPlacement::Separate,
    ]
    .into_iter()
    .filter(|p| has(placement_token(*p)))
    .collect();
    if named.len() > 1 {
        return Err(format!(
            "latch scheme {scheme:?} names more than one latch placement"
        ));
    }
    let placement = match (req.latch_placement, named.first()) {
        (Some(a), Some(b)) if a != *b => {
            return Err(format!(
                "latch_placement {} contradicts the scheme name {scheme:?}",
                placement_token(a)
            ));
        }
        (Some(a), _) => a,
        (None, Some(b)) => *b,
        (None, None) => LatchPlacement::Embedded,
    };
    let write_unlatch = family == "pessimistic" && has("wu");
    if write_unlatch && !has("x") {
        return Err(
            "write-unlatch cannot be combined with shared FAA readers: the NIC may apply a \
             reader's FAA to a stale copy of the latch word that still shows the writer's \
             exclusive bit and store it back over the unlatching WRITE, losing the unlatch \
             (sync seed §3.3); use the exclusive-only latch (-x) with write-unlatch"
                .into(),
        );
    }
    if write_unlatch && placement == LatchPlacement::Separate {
        return Err(
            "write-unlatch needs the latch at the end of its tuple: it cannot be combined with \
             a separate latch array"
                .into(),
        );
    }
    if family != "pessimistic" && placement != LatchPlacement::Embedded {
        return Err(format!(
            "only the pessimistic latch can be padded or kept in a separate latch array; \
             {family:?} keeps its latch word in the tuple"
        ));
    }
    if !(1..=MAX_CAPACITY).contains(&req.capacity) {
        return Err(format!(
            "capacity {} must be from 1 to {MAX_CAPACITY} tuples",
            req.capacity
        ));
    }
    if req.tuple_bytes < value_limit
        || !req.tuple_bytes.is_multiple_of(8)
        || req.tuple_bytes > 2 * value_limit + (64 << 10)
    {
        return Err(format!(
            "tuple_bytes {} must be a multiple of 8 from the value limit ({value_limit}) to \
             twice it plus 64 KiB (the distance from one tuple to the next, with the scheme's \
             latch, versions and padding)",
            req.tuple_bytes
        ));
    }
    let area_bytes = req
        .capacity
        .checked_mul(req.tuple_bytes)
        .and_then(|b| b.checked_add(HEADER_BYTES))
        .filter(|b| *b <= MAX_AREA_BYTES)
        .ok_or_else(|| {
            format!(
                "{} tuples of {} bytes exceed the largest tuple area ({MAX_AREA_BYTES} bytes)",
                req.capacity, req.tuple_bytes
            )
        })?;
    let latch_bytes =
        (placement == LatchPlacement::Separate).then(|| (8 * req.capacity).next_multiple_of(64));
    let scheme = if family == "pessimistic" && named.is_empty() {
        format!("{scheme}-{}", placement_token(placement))
    } else {
        scheme
    };
    Ok(Checked {
        scheme,
        placement,
        area_bytes,
        latch_bytes,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn req(scheme: &str) -> InPlaceRequest {
        InPlaceRequest {
            scheme: scheme.into(),
            capacity: 100,
            tuple_bytes: 256,
            latch_placement: None,
            unsafe_demo: false,
        }
    }

    #[test]
    fn sizes_and_placements() {
        let c = check(&req("pessimistic-rw-async"), 128).unwrap();
        assert_eq!(c.scheme, "pessimistic-rw-async-embedded");
        assert_eq!((c.area_bytes, c.latch_bytes), (64 + 100 * 256, None));
        let mut r = req("pessimistic");
        r.latch_placement = Some(LatchPlacement::Separate);
        let c = check(&r, 128).unwrap();
        assert_eq!(c.scheme, "pessimistic-separate");
        assert_eq!(c.latch_bytes, Some(832));
        let c = check(&req("farm-consistent"), 128).unwrap();
        assert_eq!(c.scheme, "farm-consistent");
    }

    #[test]
    fn forbidden_combinations() {
        for (r, needle) in [
            (req("pessimistic-rw-wu"), "shared FAA readers"),
            (req("pessimistic-wu"), "shared FAA readers"),
            (req("pessimistic-x-wu-separate"), "separate latch array"),
            (req("bookend-unsafe-demo"), "unsafe_demo: true"),
            (req("crc-separate"), "only the pessimistic latch"),
            (req("pessimistic-padded-separate"), "more than one"),
            (req("Bad Name"), "must be 1 to 64"),
        ] {
            let e = check(&r, 128).unwrap_err();
            assert!(e.contains(needle), "{}: {e}", r.scheme);
        }
        let mut r = req("versioning");
        r.unsafe_demo = true;
        assert!(check(&r, 128).unwrap_err().contains("only to the bookend"));
        let mut r = req("bookend-unsafe-demo");
        r.unsafe_demo = true;
        assert!(check(&r, 128).is_ok());
        let mut r = req("pessimistic-embedded");
        r.latch_placement = Some(LatchPlacement::Padded);
        assert!(check(&r, 128).unwrap_err().contains("contradicts"));
        let mut r = req("versioning");
        r.capacity = 0;
        assert!(check(&r, 128).unwrap_err().contains("capacity"));
        let mut r = req("versioning");
        r.tuple_bytes = 100;
        assert!(check(&r, 128).unwrap_err().contains("tuple_bytes"));
        let mut r = req("versioning");
        r.capacity = MAX_CAPACITY;
        r.tuple_bytes = 1 << 16;
        assert!(check(&r, 128).unwrap_err().contains("largest tuple area"));
    }
}
