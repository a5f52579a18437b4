//! The single error type of the wire-format module.

use thiserror::Error;

/// Why a RoCEv2 packet, frame or header could not be parsed or emitted.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Error)]
pub enum WireError {
    /// The buffer ends before a header or the ICRC that must be present.
    #[error("truncated packet: buffer ends before a required header or the ICRC")]
    Truncated,
    /// The BTH opcode is not one of the RC opcodes dmkv supports.
    #[error("unsupported BTH opcode {0:#04x}")]
    UnsupportedOpcode(u8),
    /// The BTH transport header version is not 0.
    #[error("unsupported BTH transport version {0} (only 0 is defined)")]
    UnsupportedTransportVersion(u8),
    /// The BTH pad count is larger than the payload, or non-zero on an opcode without payload.
    #[error("BTH pad count exceeds the payload or is set on an opcode without payload")]
    BadPadCount,
    /// A length field is inconsistent with the buffer or with another length field.
    #[error("inconsistent length field")]
    BadLength,
    /// Payload bytes follow the headers of an opcode that carries no payload.
    #[error("payload present on an opcode that carries none")]
    UnexpectedPayload,
    /// The stored ICRC does not match the one computed over the packet.
    #[error("bad ICRC: computed {expected:#010x}, packet carries {found:#010x}")]
    BadIcrc {
        /// The ICRC computed over the packet.
        expected: u32,
        /// The ICRC stored in the packet.
        found: u32,
    },
    /// The output buffer is too small for the packet being emitted.
    #[error("output buffer too small")]
    BufferTooSmall,
    /// A representation lacks an extension header its opcode requires.
    #[error("missing {0} header required by the opcode")]
    MissingHeader(&'static str),
    /// A representation carries an extension header its opcode does not have.
    #[error("{0} header present but the opcode does not carry one")]
    UnexpectedHeader(&'static str),
    /// The AETH syndrome byte uses a reserved encoding.
    #[error("reserved AETH syndrome {0:#04x}")]
    BadSyndrome(u8),
    /// The frame is not IPv4 (EtherType or IP version).
    #[error("not an IPv4 packet")]
    NotIpv4,
    /// The IPv4 packet does not carry UDP.
    #[error("IPv4 packet does not carry UDP")]
    NotUdp,
    /// The UDP datagram is not addressed to the RoCEv2 port 4791, or is a fragment.
    #[error("UDP datagram is not RoCEv2 (destination port is not 4791)")]
    NotRoce,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_name_the_values() {
        let msg = WireError::BadIcrc {
            expected: 0xdead_beef,
            found: 1,
        }
        .to_string();
        assert!(
            msg.contains("0xdeadbeef") && msg.contains("0x00000001"),
            "{msg}"
        );
        assert!(
            WireError::UnsupportedOpcode(0x81)
                .to_string()
                .contains("0x81")
        );
        assert!(
            WireError::MissingHeader("RETH")
                .to_string()
                .contains("RETH")
        );
    }
}
