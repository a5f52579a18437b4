//! Access rights of a registered memory region (the `ibv_access_flags` a
//! memory node grants when it registers memory).

use std::fmt;
use std::ops::{BitOr, BitOrAssign};
use std::str::FromStr;

/// A set of access rights, as a small bit set.
///
/// Parsed from and displayed as a comma separated list of the names
/// `local_write`, `read`, `write`, `atomic` (or `all` / `none`), e.g.
/// `"read,write,atomic"`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct AccessFlags(u8);

/// Names used by [`Display`](fmt::Display) and [`FromStr`], in bit order.
const NAMES: [(AccessFlags, &str); 4] = [
    (AccessFlags::LOCAL_WRITE, "local_write"),
    (AccessFlags::REMOTE_READ, "read"),
    (AccessFlags::REMOTE_WRITE, "write"),
    (AccessFlags::REMOTE_ATOMIC, "atomic"),
];

impl AccessFlags {
    /// No rights at all.
    pub const NONE: AccessFlags = AccessFlags(0);
    /// The owner may write the memory locally (`IBV_ACCESS_LOCAL_WRITE`).
    pub const LOCAL_WRITE: AccessFlags = AccessFlags(1);
    /// Remote peers may RDMA READ the memory (`IBV_ACCESS_REMOTE_READ`).
    pub const REMOTE_READ: AccessFlags = AccessFlags(1 << 1);
    /// Remote peers may RDMA WRITE the memory (`IBV_ACCESS_REMOTE_WRITE`).
    pub const REMOTE_WRITE: AccessFlags = AccessFlags(1 << 2);
    /// Remote peers may issue CAS / FAA (`IBV_ACCESS_REMOTE_ATOMIC`).
    pub const REMOTE_ATOMIC: AccessFlags = AccessFlags(1 << 3);
    /// All four rights.
    pub const ALL: AccessFlags = AccessFlags(0b1111);

    /// The raw bits.
    pub const fn bits(self) -> u8 {
        self.0
    }

    /// Builds a set from raw bits; `None` if an unknown bit is set.
    pub const fn from_bits(bits: u8) -> Option<AccessFlags> {
        if bits & !Self::ALL.0 == 0 {
            Some(AccessFlags(bits))
        } else {
            None
        }
    }

    /// True if every right in `other` is also in `self`.
    pub const fn contains(self, other: AccessFlags) -> bool {
        self.0 & other.0 == other.0
    }

    /// The rights in either set.
    pub const fn union(self, other: AccessFlags) -> AccessFlags {
        AccessFlags(self.0 | other.0)
    }

    /// True if the set is empty.
    pub const fn is_empty(self) -> bool {
        self.0 == 0
    }
}

impl BitOr for AccessFlags {
    type Output = AccessFlags;

    fn bitor(self, rhs: AccessFlags) -> AccessFlags {
        self.union(rhs)
    }
}

impl BitOrAssign for AccessFlags {
    fn bitor_assign(&mut self, rhs: AccessFlags) {
        *self = self.union(rhs);
    }
}

impl fmt::Display for AccessFlags {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.is_empty() {
            return f.write_str("none");
        }
        let mut first = true;
        for (flag, name) in NAMES {
            if self.contains(flag) {
                if !first {
                    f.write_str(",")?;
                }
                f.write_str(name)?;
                first = false;
            }
        }
        Ok(())
    }
}

/// Error returned when parsing [`AccessFlags`] from a string fails.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "unknown access flag {0:?} (expected a comma list of local_write, read, write, atomic, all, none)"
)]
pub struct ParseAccessFlagsError(pub String);

impl FromStr for AccessFlags {
    type Err = ParseAccessFlagsError;

    fn from_str(s: &str) -> Result<AccessFlags, ParseAccessFlagsError> {
        let mut flags = AccessFlags::NONE;
        for part in s.split(',') {
            let name = part.trim().to_ascii_lowercase();
            flags |= match name.as_str() {
                "" | "none" => AccessFlags::NONE,
                "all" => AccessFlags::ALL,
                "local_write" | "local-write" => AccessFlags::LOCAL_WRITE,
                "read" | "remote_read" | "remote-read" => AccessFlags::REMOTE_READ,
                "write" | "remote_write" | "remote-write" => AccessFlags::REMOTE_WRITE,
                "atomic" | "remote_atomic" | "remote-atomic" => AccessFlags::REMOTE_ATOMIC,
                _ => return Err(ParseAccessFlagsError(part.trim().to_owned())),
            };
        }
        Ok(flags)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bits_roundtrip_and_contains() {
        for bits in 0..=15u8 {
            let f = AccessFlags::from_bits(bits).unwrap();
            assert_eq!(f.bits(), bits);
            assert!(AccessFlags::ALL.contains(f));
            assert!(f.contains(AccessFlags::NONE));
        }
        assert_eq!(AccessFlags::from_bits(16), None);
        let rw = AccessFlags::REMOTE_READ | AccessFlags::REMOTE_WRITE;
        assert!(rw.contains(AccessFlags::REMOTE_READ));
        assert!(!rw.contains(AccessFlags::REMOTE_ATOMIC));
        assert!(!rw.contains(AccessFlags::REMOTE_READ | AccessFlags::REMOTE_ATOMIC));
    }

    #[test]
    fn display_fromstr_roundtrip() {
        for bits in 0..=15u8 {
            let f = AccessFlags::from_bits(bits).unwrap();
            let s = f.to_string();
            assert_eq!(s.parse::<AccessFlags>().unwrap(), f, "{s}");
        }
        assert_eq!(
            "read, write,atomic".parse::<AccessFlags>().unwrap(),
            AccessFlags::REMOTE_READ | AccessFlags::REMOTE_WRITE | AccessFlags::REMOTE_ATOMIC
        );
        assert_eq!("all".parse::<AccessFlags>().unwrap(), AccessFlags::ALL);
        assert_eq!(
            AccessFlags::ALL.to_string(),
            "local_write,read,write,atomic"
        );
        assert!("read,exec".parse::<AccessFlags>().is_err());
    }
}
