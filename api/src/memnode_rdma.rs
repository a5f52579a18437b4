//! The documents of a memory node's RDMA queue-pair setup (`POST /v1/rdma/qps`): the
//! out-of-band exchange an RC queue pair on a real NIC needs (QPN, PSN, GID, LID, MTU)
//! and the memory keys the node registered with its NIC.
//!
//! A GID travels as 32 lowercase hexadecimal digits (the 16 bytes in order); on RoCE
//! it holds the port's IP address (IPv4-mapped for IPv4).

use serde::{Deserialize, Serialize};

/// `POST /v1/rdma/qps`: the client half of an RC queue pair on an RDMA NIC asks the
/// node to create and connect its responder half.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct CreateRdmaQpRequest {
    /// The client's queue pair number (24-bit, non-zero).
    #[cfg_attr(feature = "openapi", schema(minimum = 1, maximum = 16777215))]
    pub qpn: u32,
    /// The first PSN the client will send (24-bit): the responder's expected PSN.
    #[cfg_attr(feature = "openapi", schema(maximum = 16777215))]
    pub psn: u32,
    /// The client port's GID, 32 hexadecimal digits (required on RoCE).
    #[cfg_attr(feature = "openapi", schema(pattern = "^[0-9a-fA-F]{32}$"))]
    pub gid: String,
    /// The client port's LID (InfiniBand; 0 on RoCE).
    #[serde(default)]
    pub lid: u16,
    /// The client port's active MTU: 256, 512, 1024, 2048 or 4096 (the path MTU is the
    /// smaller of it and the node's).
    #[cfg_attr(feature = "openapi", schema(schema_with = crate::schemas::pmtu_schema))]
    pub mtu: u32,
    /// More grants of the same client (other tables), when the bearer credential is a
    /// grant: the queue pair reaches the extents of all of them.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub grants: Vec<String>,
}

/// A range of the node's memory the NIC lets a queue pair reach, and the key to use.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct RdmaWindow {
    /// The NIC's remote key for this range (put it in every remote address in it).
    pub rkey: u32,
    /// Virtual address of the range's first byte, in the node's region addressing
    /// (what the node's other transports and the metadata service use).
    pub va: u64,
    /// The address the NIC knows the range's first byte by: put `addr - va + nic_va`
    /// in a work request's remote address.
    pub nic_va: u64,
    /// Bytes in the range.
    pub len: u64,
    /// Whether WRITEs and atomics are allowed (else READs only).
    pub writable: bool,
}

/// `POST /v1/rdma/qps` → 201: the responder queue pair, connected (RTR and RTS).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct CreateRdmaQpResponse {
    /// The responder's queue pair number (the client's destination QPN).
    pub qpn: u32,
    /// The first PSN the responder sends (the client's expected PSN).
    pub psn: u32,
    /// The node port's GID, 32 hexadecimal digits.
    pub gid: String,
    /// The node port's LID (InfiniBand; 0 on RoCE).
    pub lid: u16,
    /// The path MTU the responder was connected with.
    pub mtu: u32,
    /// The client's queue pair number, echoed.
    pub client_qpn: u32,
    /// The RDMA device serving it.
    pub device: String,
    /// The memory the queue pair may reach: with the admin token the whole region under
    /// one key; with a grant one range per granted extent, each under its own key that
    /// only this queue pair can use (its own protection domain).
    pub windows: Vec<RdmaWindow>,
    /// When the NIC stops serving the queue pair (its grant expires; unix ms). `None`:
    /// created with the admin token, no expiry.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expires_at_ms: Option<u64>,
}

/// `GET /v1/rdma/qps`: the RDMA queue pairs a node serves.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct RdmaQpsResponse {
    /// The device, or `None` when the node serves no RDMA transport.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub device: Option<String>,
    /// Every RDMA queue pair.
    pub qps: Vec<RdmaQpInfo>,
}

/// One RDMA responder queue pair.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct RdmaQpInfo {
    /// Its queue pair number.
    pub qpn: u32,
    /// The client's queue pair number.
    pub client_qpn: u32,
    /// The client it belongs to (created with a grant), or `None` (admin token).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client_id: Option<String>,
    /// What it may reach.
    pub windows: Vec<RdmaWindow>,
    /// When its grant expires (unix ms).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expires_at_ms: Option<u64>,
}

/// A GID as the documents carry it: 32 lowercase hexadecimal digits.
pub fn gid_to_hex(gid: &[u8; 16]) -> String {
    gid.iter().map(|b| format!("{b:02x}")).collect()
}

/// Parses a GID from 32 hexadecimal digits; `None` for anything else.
pub fn gid_from_hex(text: &str) -> Option<[u8; 16]> {
    let bytes = text.as_bytes();
    if bytes.len() != 32 || !bytes.iter().all(u8::is_ascii_hexdigit) {
        return None;
    }
    let mut gid = [0u8; 16];
    for (i, b) in gid.iter_mut().enumerate() {
        let pair = text.get(2 * i..2 * i + 2)?;
        *b = u8::from_str_radix(pair, 16).ok()?;
    }
    Some(gid)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn gids_round_trip_and_bad_text_is_refused() {
        let gid = [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 10, 0, 0, 0x2a];
        let text = gid_to_hex(&gid);
        assert_eq!(text, "00000000000000000000ffff0a00002a");
        assert_eq!(gid_from_hex(&text), Some(gid));
        assert_eq!(gid_from_hex(&text.to_uppercase()), Some(gid));
        for bad in [
            "",
            "00",
            &"0".repeat(31),
            &"0".repeat(33),
            &"g".repeat(32),
            "+0000000000000000000000000000000",
            &"é".repeat(16),
        ] {
            assert_eq!(gid_from_hex(bad), None, "{bad:?}");
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig { rng_seed: proptest::test_runner::RngSeed::Fixed(0x6769_6478), ..ProptestConfig::default() })]
        #[test]
        fn any_text_parses_without_panicking(text in ".{0,40}") {
            if let Some(gid) = gid_from_hex(&text) {
                prop_assert_eq!(gid_to_hex(&gid), text.to_lowercase());
            }
        }

        #[test]
        fn every_gid_round_trips(gid in any::<[u8; 16]>()) {
            prop_assert_eq!(gid_from_hex(&gid_to_hex(&gid)), Some(gid));
        }
    }
}
