//! RoCEv2 wire format: checked zero-copy views, validated representations and the ICRC.
//!
//! A RoCEv2 packet, as carried in a UDP datagram to port 4791, is
//! `BTH (12) | extension headers | payload | pad (0–3) | ICRC (4)`.
//! Parsing follows the smoltcp pattern: a view type checks lengths once
//! (`new_checked`) and then exposes fields without copying; a `*Repr` type is
//! the validated, owned meaning of those fields and can `emit` itself back.
//! No input can make the parser panic.

mod aeth;
mod atomic_ack_eth;
mod atomic_eth;
mod bth;
mod error;
mod field;
mod frame;
mod icrc;
mod immdt;
mod opcode;
mod packet;
mod path;
pub mod pcap;
mod reth;

pub use aeth::{Aeth, AethRepr, NakCode, Syndrome};
pub use atomic_ack_eth::{AtomicAckEth, AtomicAckEthRepr};
pub use atomic_eth::{AtomicEth, AtomicEthRepr};
pub use bth::{Bth, BthRepr};
pub use error::WireError;
pub use frame::{EthernetFrame, FrameRepr, ParsedFrame};
pub use icrc::{compute_icrc, icrc_for_ip_id, rewrite_icrc_for_ip_id, verify_icrc};
pub use immdt::ImmDt;
pub use opcode::Opcode;
pub use packet::{PacketRepr, RocePacket};
pub use path::{IPV4_DF, IcrcPath};
pub use reth::{Reth, RethRepr};

/// UDP destination port of RoCEv2.
pub const ROCE_UDP_PORT: u16 = 4791;
/// Base Transport Header length.
pub const BTH_LEN: usize = 12;
/// RDMA Extended Transport Header length.
pub const RETH_LEN: usize = 16;
/// Atomic Extended Transport Header length.
pub const ATOMIC_ETH_LEN: usize = 28;
/// ACK Extended Transport Header length.
pub const AETH_LEN: usize = 4;
/// Atomic ACK Extended Transport Header length.
pub const ATOMIC_ACK_ETH_LEN: usize = 8;
/// Immediate data header length.
pub const IMMDT_LEN: usize = 4;
/// Invariant CRC length.
pub const ICRC_LEN: usize = 4;
/// PSNs are 24-bit.
pub const PSN_MASK: u32 = 0x00FF_FFFF;
/// QPNs are 24-bit.
pub const QPN_MASK: u32 = 0x00FF_FFFF;
/// The default partition key.
pub const DEFAULT_PKEY: u16 = 0xFFFF;
