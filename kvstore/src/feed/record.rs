//! A change-feed record: one committed write of a Clover table, as one ring slot.
//!
//! ```text
//! 0   lane_seq   u64  the record's position in its lane (the lane's head before it)
//! 8   op         u8   1 = put, 2 = delete (a tombstone)
//! 9   lane       u8   the producer lane that wrote it
//! 10  key_len    u16
//! 12  value_len  u32  (0 for a delete)
//! 16  table_id   u64  the table's catalog id
//! 24  chain_id   u64  the key's Clover chain
//! 32  version    u32  the written node's chain position (its predecessor's + 1)
//! 36  crc        u32  CRC-32 of bytes 0..40+key_len+value_len with this field zeroed
//! 40  key, then value
//! ```
//!
//! All integers little-endian. Whatever follows the value in the slot is ignored.
//! [`FeedRecord::parse`] accepts any bytes and never panics.

/// Bytes before the key.
pub const RECORD_HEADER: usize = 40;
const CRC_AT: usize = 36;

/// What a record did to its key.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum FeedOp {
    /// The key was set to the record's value (put, insert or update).
    Put,
    /// The key was deleted (its chain got a tombstone).
    Delete,
}

impl FeedOp {
    fn code(self) -> u8 {
        match self {
            FeedOp::Put => 1,
            FeedOp::Delete => 2,
        }
    }

    fn from_code(c: u8) -> Option<FeedOp> {
        match c {
            1 => Some(FeedOp::Put),
            2 => Some(FeedOp::Delete),
            _ => None,
        }
    }
}

/// One committed write, as the feed carries it.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct FeedRecord {
    /// The producer lane that wrote it.
    pub lane: u8,
    /// Its position in that lane (0, 1, 2, … without holes).
    pub lane_seq: u64,
    /// Put or delete.
    pub op: FeedOp,
    /// The table's catalog id.
    pub table_id: u64,
    /// The key's Clover chain.
    pub chain_id: u64,
    /// The written node's version: its position in the key's chain. Per key, a
    /// larger version is a later write.
    pub version: u32,
    /// The key.
    pub key: Vec<u8>,
    /// The value (empty for a delete).
    pub value: Vec<u8>,
}

/// Why bytes are not a record.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RecordError {
    /// Fewer bytes than the header or the lengths it states.
    #[error("a feed record needs {need} bytes, the slot has {have}")]
    Truncated {
        /// Bytes needed.
        need: usize,
        /// Bytes there.
        have: usize,
    },
    /// An unknown operation code.
    #[error("unknown feed record operation {0}")]
    BadOp(u8),
    /// A delete that carries a value.
    #[error("a delete record carries a {0}-byte value")]
    DeleteWithValue(u32),
    /// The checksum does not match.
    #[error("feed record checksum mismatch")]
    Checksum,
}

impl FeedRecord {
    /// Bytes the record takes in a slot.
    pub fn encoded_len(&self) -> usize {
        RECORD_HEADER + self.key.len() + self.value.len()
    }

    /// The record's bytes; `None` when the key is longer than 65535 bytes or the value
    /// longer than `u32::MAX`.
    pub fn encode(&self) -> Option<Vec<u8>> {
        let key_len = u16::try_from(self.key.len()).ok()?;
        let value_len = u32::try_from(self.value.len()).ok()?;
        let mut b = Vec::with_capacity(self.encoded_len());
        b.extend_from_slice(&self.lane_seq.to_le_bytes());
        b.push(self.op.code());
        b.push(self.lane);
        b.extend_from_slice(&key_len.to_le_bytes());
        b.extend_from_slice(&value_len.to_le_bytes());
        b.extend_from_slice(&self.table_id.to_le_bytes());
        b.extend_from_slice(&self.chain_id.to_le_bytes());
        b.extend_from_slice(&self.version.to_le_bytes());
        b.extend_from_slice(&[0; 4]);
        b.extend_from_slice(&self.key);
        b.extend_from_slice(&self.value);
        let crc = crc32fast::hash(&b);
        b[CRC_AT..CRC_AT + 4].copy_from_slice(&crc.to_le_bytes());
        Some(b)
    }

    /// The record at the start of `slot` (checked: lengths, operation, checksum).
    pub fn parse(slot: &[u8]) -> Result<FeedRecord, RecordError> {
        let truncated = |need: usize| RecordError::Truncated {
            need,
            have: slot.len(),
        };
        let header = slot.get(..RECORD_HEADER).ok_or(truncated(RECORD_HEADER))?;
        let u64_at = |at: usize| {
            let mut w = [0u8; 8];
            w.copy_from_slice(&header[at..at + 8]);
            u64::from_le_bytes(w)
        };
        let u32_at = |at: usize| {
            let mut w = [0u8; 4];
            w.copy_from_slice(&header[at..at + 4]);
            u32::from_le_bytes(w)
        };
        let key_len = usize::from(u16::from_le_bytes([header[10], header[11]]));
        let value_len = u32_at(12);
        let need = usize::try_from(value_len)
            .ok()
            .and_then(|v| (RECORD_HEADER + key_len).checked_add(v))
            .unwrap_or(usize::MAX);
        let body = slot.get(..need).ok_or(truncated(need))?;
        let mut check = body.to_vec();
        check[CRC_AT..CRC_AT + 4].copy_from_slice(&[0; 4]);
        if crc32fast::hash(&check) != u32_at(CRC_AT) {
            return Err(RecordError::Checksum);
        }
        let op = FeedOp::from_code(header[8]).ok_or(RecordError::BadOp(header[8]))?;
        if op == FeedOp::Delete && value_len != 0 {
            return Err(RecordError::DeleteWithValue(value_len));
        }
        Ok(FeedRecord {
            lane: header[9],
            lane_seq: u64_at(0),
            op,
            table_id: u64_at(16),
            chain_id: u64_at(24),
            version: u32_at(32),
            key: body[RECORD_HEADER..RECORD_HEADER + key_len].to_vec(),
            value: body[RECORD_HEADER + key_len..].to_vec(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use proptest::test_runner::{Config, RngSeed};

    fn sample() -> FeedRecord {
        FeedRecord {
            lane: 3,
            lane_seq: 41,
            op: FeedOp::Put,
            table_id: 7,
            chain_id: 0x1234_5678_9abc,
            version: 9,
            key: b"alice".to_vec(),
            value: b"admin".to_vec(),
        }
    }

    #[test]
    fn a_record_round_trips_with_slot_padding() {
        let r = sample();
        let mut slot = r.encode().expect("encode");
        assert_eq!(slot.len(), r.encoded_len());
        slot.resize(256, 0xAA);
        assert_eq!(FeedRecord::parse(&slot), Ok(r));
    }

    #[test]
    fn damaged_records_are_refused() {
        let slot = sample().encode().expect("encode");
        assert!(matches!(
            FeedRecord::parse(&slot[..20]),
            Err(RecordError::Truncated { need: 40, .. })
        ));
        assert!(matches!(
            FeedRecord::parse(&slot[..slot.len() - 1]),
            Err(RecordError::Truncated { .. })
        ));
        let mut flipped = slot.clone();
        flipped[RECORD_HEADER] ^= 1;
        assert_eq!(FeedRecord::parse(&flipped), Err(RecordError::Checksum));
        assert!(FeedRecord::parse(&[0u8; 64]).is_err(), "an empty slot");
        let mut delete = sample();
        delete.op = FeedOp::Delete;
        delete.value.clear();
        let bytes = delete.encode().expect("encode");
        assert_eq!(FeedRecord::parse(&bytes), Ok(delete));
    }

    fn config() -> Config {
        Config {
            cases: 256,
            rng_seed: RngSeed::Fixed(0x6665_6564),
            failure_persistence: None,
            ..Config::default()
        }
    }

    proptest! {
        #![proptest_config(config())]

        #[test]
        fn parse_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..300)) {
            let _ = FeedRecord::parse(&bytes);
        }

        #[test]
        fn every_record_round_trips(
            lane in any::<u8>(),
            lane_seq in any::<u64>(),
            delete in any::<bool>(),
            table_id in any::<u64>(),
            chain_id in any::<u64>(),
            version in any::<u32>(),
            key in proptest::collection::vec(any::<u8>(), 0..64),
            value in proptest::collection::vec(any::<u8>(), 0..200),
            pad in proptest::collection::vec(any::<u8>(), 0..64),
        ) {
            let r = FeedRecord {
                lane,
                lane_seq,
                op: if delete { FeedOp::Delete } else { FeedOp::Put },
                table_id,
                chain_id,
                version,
                key,
                value: if delete { Vec::new() } else { value },
            };
            let mut slot = r.encode().expect("encode");
            slot.extend_from_slice(&pad);
            prop_assert_eq!(FeedRecord::parse(&slot), Ok(r));
        }
    }
}
