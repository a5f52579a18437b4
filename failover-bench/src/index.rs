//! The indexes the figures cover: Clover, RACE and in-place tables, each with its
//! table spec, its name in the tables and the `ycsb` dmkv binding's properties that
//! select it.

use kvstore::{SchemeSpec, TableSpec};
use ycsb::props::Properties;

/// The latch scheme of the in-place tables measured (the ycsb binding's default).
pub const INPLACE_SCHEME: &str = ycsb::bindings::dmkv::DEFAULT_LATCH;

/// Tuples of the in-place tables the failover runs use.
const FAILOVER_TUPLES: u64 = 4096;

/// One index measured.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BenchIndex {
    /// Clover chains.
    Clover,
    /// RACE hashing.
    Race,
    /// Tuples updated in place under [`INPLACE_SCHEME`].
    InPlace,
}

impl BenchIndex {
    /// Every index, in the order the tables list them.
    pub const ALL: [BenchIndex; 3] = [BenchIndex::Clover, BenchIndex::Race, BenchIndex::InPlace];

    /// The index's name (`clover`, `race`, `inplace`).
    pub fn name(self) -> &'static str {
        match self {
            BenchIndex::Clover => "clover",
            BenchIndex::Race => "race",
            BenchIndex::InPlace => "inplace",
        }
    }

    /// The spec of a table of this index holding values up to `value_limit` bytes.
    pub fn spec(self, value_limit: u64) -> Result<TableSpec, String> {
        self.spec_for(value_limit, FAILOVER_TUPLES)
    }

    /// Like [`BenchIndex::spec`], with `tuples` tuples for an in-place table.
    pub fn spec_for(self, value_limit: u64, tuples: u64) -> Result<TableSpec, String> {
        Ok(match self {
            BenchIndex::Clover => TableSpec::clover(value_limit),
            BenchIndex::Race => TableSpec::race(value_limit),
            BenchIndex::InPlace => {
                let scheme: SchemeSpec = INPLACE_SCHEME
                    .parse()
                    .map_err(|e| format!("latch scheme {INPLACE_SCHEME}: {e}"))?;
                TableSpec::in_place(scheme, value_limit, tuples)
            }
        })
    }

    /// Whether a key has a home memory node of its own (a Clover chain's): the
    /// failover runs then use keys homed on the crashed node. A RACE key's buckets
    /// and value, and an in-place table's tuples, may sit on any member, so every
    /// operation may need the crashed node and any key will do.
    pub fn keys_have_homes(self) -> bool {
        self == BenchIndex::Clover
    }

    /// Set the dmkv binding's properties that select this index.
    pub fn set_ycsb(self, p: &mut Properties) {
        p.set("dmkv.index", self.name().to_string());
        if self == BenchIndex::InPlace {
            p.set("dmkv.latch", INPLACE_SCHEME.to_string());
        }
    }
}

impl std::str::FromStr for BenchIndex {
    type Err = String;

    fn from_str(s: &str) -> Result<BenchIndex, String> {
        BenchIndex::ALL
            .into_iter()
            .find(|i| i.name() == s)
            .ok_or_else(|| format!("unknown index {s:?} (clover, race or inplace)"))
    }
}

impl std::fmt::Display for BenchIndex {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_index_has_a_spec_and_selects_itself_in_ycsb() {
        for i in BenchIndex::ALL {
            assert!(i.spec(256).is_ok(), "{i}");
            let mut p = Properties::new();
            i.set_ycsb(&mut p);
            assert_eq!(p.get("dmkv.index"), Some(i.name()));
            assert_eq!(
                p.get("dmkv.latch").is_some(),
                i == BenchIndex::InPlace,
                "{i}"
            );
        }
        assert!(BenchIndex::Clover.keys_have_homes());
        assert!(!BenchIndex::Race.keys_have_homes());
    }
}
