//! Reliable Connection (RC) BTH opcodes used by dmkv.

/// An RC opcode (BTH byte 0, transport type 0b000).
///
/// The opcodes of SEND (two-sided) and of the one-sided verbs are represented; any
/// other byte value is rejected by the parser with [`super::WireError::UnsupportedOpcode`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[repr(u8)]
pub enum Opcode {
    /// SEND First: payload of exactly one PMTU, no extension header.
    SendFirst = 0x00,
    /// SEND Middle: payload of exactly one PMTU.
    SendMiddle = 0x01,
    /// SEND Last: final payload (1..=PMTU bytes).
    SendLast = 0x02,
    /// SEND Last with Immediate: ImmDt, then the final payload.
    SendLastImm = 0x03,
    /// SEND Only: the whole message (0..=PMTU bytes).
    SendOnly = 0x04,
    /// SEND Only with Immediate: ImmDt, then the whole message.
    SendOnlyImm = 0x05,
    /// RDMA WRITE First: RETH, payload of exactly one PMTU.
    WriteFirst = 0x06,
    /// RDMA WRITE Middle: payload of exactly one PMTU.
    WriteMiddle = 0x07,
    /// RDMA WRITE Last: final payload (1..=PMTU bytes).
    WriteLast = 0x08,
    /// RDMA WRITE Last with Immediate: final payload then ImmDt.
    WriteLastImm = 0x09,
    /// RDMA WRITE Only: RETH and the whole payload.
    WriteOnly = 0x0A,
    /// RDMA WRITE Only with Immediate: RETH, ImmDt, payload.
    WriteOnlyImm = 0x0B,
    /// RDMA READ Request: RETH, no payload.
    ReadRequest = 0x0C,
    /// RDMA READ Response First: AETH, one PMTU of payload.
    ReadResponseFirst = 0x0D,
    /// RDMA READ Response Middle: no AETH, one PMTU of payload.
    ReadResponseMiddle = 0x0E,
    /// RDMA READ Response Last: AETH, final payload.
    ReadResponseLast = 0x0F,
    /// RDMA READ Response Only: AETH, whole payload.
    ReadResponseOnly = 0x10,
    /// Acknowledge: AETH.
    Acknowledge = 0x11,
    /// ATOMIC Acknowledge: AETH and AtomicAckETH.
    AtomicAcknowledge = 0x12,
    /// CmpSwap: AtomicETH.
    CompareSwap = 0x13,
    /// FetchAdd: AtomicETH.
    FetchAdd = 0x14,
}

impl Opcode {
    /// Every opcode, in numeric order.
    pub const ALL: [Opcode; 21] = [
        Opcode::SendFirst,
        Opcode::SendMiddle,
        Opcode::SendLast,
        Opcode::SendLastImm,
        Opcode::SendOnly,
        Opcode::SendOnlyImm,
        Opcode::WriteFirst,
        Opcode::WriteMiddle,
        Opcode::WriteLast,
        Opcode::WriteLastImm,
        Opcode::WriteOnly,
        Opcode::WriteOnlyImm,
        Opcode::ReadRequest,
        Opcode::ReadResponseFirst,
        Opcode::ReadResponseMiddle,
        Opcode::ReadResponseLast,
        Opcode::ReadResponseOnly,
        Opcode::Acknowledge,
        Opcode::AtomicAcknowledge,
        Opcode::CompareSwap,
        Opcode::FetchAdd,
    ];

    /// Decode a BTH opcode byte.
    pub fn from_u8(byte: u8) -> Option<Opcode> {
        Opcode::ALL.iter().copied().find(|op| *op as u8 == byte)
    }

    /// The opcode byte.
    pub fn as_u8(self) -> u8 {
        self as u8
    }

    /// Whether this opcode carries a RETH.
    pub fn has_reth(self) -> bool {
        matches!(
            self,
            Opcode::WriteFirst | Opcode::WriteOnly | Opcode::WriteOnlyImm | Opcode::ReadRequest
        )
    }

    /// Whether this opcode carries an AtomicETH.
    pub fn has_atomic_eth(self) -> bool {
        matches!(self, Opcode::CompareSwap | Opcode::FetchAdd)
    }

    /// Whether this opcode carries an AETH.
    pub fn has_aeth(self) -> bool {
        matches!(
            self,
            Opcode::ReadResponseFirst
                | Opcode::ReadResponseLast
                | Opcode::ReadResponseOnly
                | Opcode::Acknowledge
                | Opcode::AtomicAcknowledge
        )
    }

    /// Whether this opcode carries an AtomicAckETH.
    pub fn has_atomic_ack_eth(self) -> bool {
        matches!(self, Opcode::AtomicAcknowledge)
    }

    /// Whether this opcode carries an ImmDt.
    pub fn has_immdt(self) -> bool {
        matches!(
            self,
            Opcode::SendLastImm | Opcode::SendOnlyImm | Opcode::WriteLastImm | Opcode::WriteOnlyImm
        )
    }

    /// Whether this is one of the SEND opcodes (a two-sided message, consuming a
    /// receive buffer at the responder).
    pub fn is_send(self) -> bool {
        matches!(
            self,
            Opcode::SendFirst
                | Opcode::SendMiddle
                | Opcode::SendLast
                | Opcode::SendLastImm
                | Opcode::SendOnly
                | Opcode::SendOnlyImm
        )
    }

    /// Whether this opcode opens a request message (its first or only packet).
    pub fn starts_message(self) -> bool {
        matches!(
            self,
            Opcode::SendFirst
                | Opcode::SendOnly
                | Opcode::SendOnlyImm
                | Opcode::WriteFirst
                | Opcode::WriteOnly
                | Opcode::WriteOnlyImm
                | Opcode::ReadRequest
                | Opcode::CompareSwap
                | Opcode::FetchAdd
        )
    }

    /// Whether this opcode may carry a payload.
    pub fn has_payload(self) -> bool {
        self.is_send()
            || matches!(
                self,
                Opcode::WriteFirst
                    | Opcode::WriteMiddle
                    | Opcode::WriteLast
                    | Opcode::WriteLastImm
                    | Opcode::WriteOnly
                    | Opcode::WriteOnlyImm
                    | Opcode::ReadResponseFirst
                    | Opcode::ReadResponseMiddle
                    | Opcode::ReadResponseLast
                    | Opcode::ReadResponseOnly
            )
    }

    /// Whether a requester sends this opcode (as opposed to a responder).
    pub fn is_request(self) -> bool {
        self.is_send()
            || matches!(
                self,
                Opcode::WriteFirst
                    | Opcode::WriteMiddle
                    | Opcode::WriteLast
                    | Opcode::WriteLastImm
                    | Opcode::WriteOnly
                    | Opcode::WriteOnlyImm
                    | Opcode::ReadRequest
                    | Opcode::CompareSwap
                    | Opcode::FetchAdd
            )
    }

    /// Length in bytes of the extension headers that follow the BTH.
    pub fn ext_header_len(self) -> usize {
        let mut len = 0;
        if self.has_reth() {
            len += super::RETH_LEN;
        }
        if self.has_immdt() {
            len += super::IMMDT_LEN;
        }
        if self.has_atomic_eth() {
            len += super::ATOMIC_ETH_LEN;
        }
        if self.has_aeth() {
            len += super::AETH_LEN;
        }
        if self.has_atomic_ack_eth() {
            len += super::ATOMIC_ACK_ETH_LEN;
        }
        len
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_byte_decodes_to_itself_or_nothing() {
        for byte in 0..=255u8 {
            if let Some(op) = Opcode::from_u8(byte) {
                assert_eq!(op.as_u8(), byte);
            }
        }
        assert_eq!(Opcode::from_u8(0x0A), Some(Opcode::WriteOnly));
        assert_eq!(Opcode::from_u8(0x15), None);
        assert_eq!(Opcode::from_u8(0x00), Some(Opcode::SendFirst));
        assert_eq!(Opcode::from_u8(0x05), Some(Opcode::SendOnlyImm));
        // 0x18 is RESEND (not RC): still refused.
        assert_eq!(Opcode::from_u8(0x18), None);
    }

    #[test]
    fn header_lengths_match_the_spec() {
        assert_eq!(Opcode::WriteOnly.ext_header_len(), 16);
        assert_eq!(Opcode::WriteOnlyImm.ext_header_len(), 20);
        assert_eq!(Opcode::CompareSwap.ext_header_len(), 28);
        assert_eq!(Opcode::AtomicAcknowledge.ext_header_len(), 12);
        assert_eq!(Opcode::ReadResponseMiddle.ext_header_len(), 0);
        assert_eq!(Opcode::Acknowledge.ext_header_len(), 4);
        // IBA: SEND carries no RETH; with immediate, ImmDt alone.
        assert_eq!(Opcode::SendFirst.ext_header_len(), 0);
        assert_eq!(Opcode::SendMiddle.ext_header_len(), 0);
        assert_eq!(Opcode::SendLast.ext_header_len(), 0);
        assert_eq!(Opcode::SendLastImm.ext_header_len(), 4);
        assert_eq!(Opcode::SendOnly.ext_header_len(), 0);
        assert_eq!(Opcode::SendOnlyImm.ext_header_len(), 4);
    }

    #[test]
    fn sends_are_requests_with_payload() {
        for op in Opcode::ALL {
            if op.is_send() {
                assert!(
                    op.is_request() && op.has_payload() && !op.has_reth(),
                    "{op:?}"
                );
                assert!(op.as_u8() <= 0x05, "{op:?}");
            }
        }
        assert_eq!(Opcode::ALL.iter().filter(|o| o.is_send()).count(), 6);
        assert!(Opcode::SendOnlyImm.starts_message() && !Opcode::SendLast.starts_message());
    }
}
