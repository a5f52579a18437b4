//! Remote-memory layout facts that the metadata service (which sizes and zeroes
//! table-owned memory) and the client library (which reads and writes it) share.

/// In-place tables: bytes before tuple 0 in the tuple area (one 64-byte header line
/// holding the layout fingerprint the first client claims).
pub const INPLACE_HEADER_BYTES: u64 = 64;
