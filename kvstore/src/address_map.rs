//! How the remote addresses an index computes (the region's key, region addresses)
//! become the ones a queue pair must carry.
//!
//! - A soft-RoCE queue pair created with a grant serves under a key of its own, which
//!   replaces the region's ([`AddressMap::Rekey`]).
//! - An RDMA queue pair reaches memory through the keys the memory node registered
//!   with its NIC, at the NIC's addresses ([`AddressMap::Windows`]): each address is
//!   moved into the window holding it and takes that window's key.

use dmkv_api::memnode_rdma::RdmaWindow;
use verbs::wr::WorkRequest;

/// The translation of one queue pair's remote addresses.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum AddressMap {
    /// The region's key `region` becomes `own`; addresses stay.
    Rekey {
        /// The region's key.
        region: u32,
        /// The queue pair's own key.
        own: u32,
    },
    /// Addresses under the region's key `region` move into `windows`.
    #[cfg_attr(not(feature = "rdma"), allow(dead_code))]
    Windows {
        /// The region's key.
        region: u32,
        /// What the queue pair reaches.
        windows: Vec<RdmaWindow>,
    },
}

/// A remote address that lies in none of the queue pair's windows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct OutsideWindows {
    /// The address, in region addressing.
    pub va: u64,
}

impl AddressMap {
    /// Translates `wr`'s remote address (work requests without one pass unchanged).
    pub(crate) fn apply(&self, wr: &mut WorkRequest) -> Result<(), OutsideWindows> {
        let len = match &*wr {
            WorkRequest::Read { len, .. } => u64::from(*len),
            WorkRequest::Write { data, .. } => data.len() as u64,
            _ => 8,
        };
        let Some(remote) = wr.remote_mut() else {
            return Ok(());
        };
        match self {
            AddressMap::Rekey { region, own } => {
                if remote.rkey == *region {
                    remote.rkey = *own;
                }
                Ok(())
            }
            AddressMap::Windows { region, windows } => {
                if remote.rkey != *region {
                    return Ok(());
                }
                let va = remote.va;
                let end = va.checked_add(len).ok_or(OutsideWindows { va })?;
                let w = windows
                    .iter()
                    .find(|w| va >= w.va && end <= w.va.saturating_add(w.len))
                    .ok_or(OutsideWindows { va })?;
                remote.rkey = w.rkey;
                remote.va = w.nic_va + (va - w.va);
                Ok(())
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use verbs::wr::RemoteAddr;

    fn read(rkey: u32, va: u64, len: u32) -> WorkRequest {
        WorkRequest::Read {
            remote: RemoteAddr::new(rkey, va),
            len,
        }
    }

    fn remote(wr: &WorkRequest) -> (u32, u64) {
        match wr {
            WorkRequest::Read { remote, .. } => (remote.rkey, remote.va),
            _ => unreachable!("a read"),
        }
    }

    #[test]
    fn rekeying_changes_only_the_region_key() {
        let map = AddressMap::Rekey { region: 5, own: 9 };
        let mut wr = read(5, 100, 8);
        map.apply(&mut wr).unwrap();
        assert_eq!(remote(&wr), (9, 100));
        let mut other = read(6, 100, 8);
        map.apply(&mut other).unwrap();
        assert_eq!(remote(&other), (6, 100));
    }

    #[test]
    fn windows_move_addresses_to_the_nic_and_refuse_what_they_do_not_hold() {
        let w = |rkey, va, nic_va, len| RdmaWindow {
            rkey,
            va,
            nic_va,
            len,
            writable: true,
        };
        let map = AddressMap::Windows {
            region: 5,
            windows: vec![
                w(11, 0x1000, 0x7f00_0000_1000, 0x1000),
                w(12, 0x4000, 0x7f00_0000_4000, 64),
            ],
        };
        let mut wr = read(5, 0x1800, 64);
        map.apply(&mut wr).unwrap();
        assert_eq!(remote(&wr), (11, 0x7f00_0000_1800));
        let mut wr = read(5, 0x4000, 64);
        map.apply(&mut wr).unwrap();
        assert_eq!(remote(&wr), (12, 0x7f00_0000_4000));
        // Straddling a window's end, between windows, or overflowing: refused.
        for (va, len) in [(0x1fc0, 128), (0x3000, 8), (0x4008, 64), (u64::MAX - 4, 8)] {
            assert_eq!(map.apply(&mut read(5, va, len)), Err(OutsideWindows { va }));
        }
        // Another key passes unchanged.
        let mut wr = read(7, 0x3000, 8);
        map.apply(&mut wr).unwrap();
        assert_eq!(remote(&wr), (7, 0x3000));
    }
}
