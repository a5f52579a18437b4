//! How the `dmkv` binding stores a YCSB record in one value.
//!
//! dmkv values are opaque byte strings, so a record (field name → bytes) is serialized into one
//! value:
//!
//! ```text
//! 0xD1                              format tag (version 1)
//! varint n                          number of fields
//! n × { varint name_len, name,      field name, UTF-8
//!       varint value_len, value }   field value, raw bytes
//! ```
//!
//! Varints are unsigned LEB128 (7 bits per byte, low bits first, at most 10 bytes). Fields keep
//! the order they were written in. YCSB's default record (10 fields `field0`…`field9` of 100
//! bytes) encodes to 1 + 1 + 10 × (1 + 6 + 1 + 100) = 1082 bytes.
//!
//! [`decode`] accepts arbitrary bytes: anything that is not exactly one well-formed record (bad
//! tag, truncated, a length beyond the end, a name that is not UTF-8, trailing bytes) is an
//! error, never a panic or an outsized allocation.

use crate::db::Record;

/// The first byte of every encoded record.
pub const TAG: u8 = 0xD1;

/// Why bytes are not a record.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CodecError {
    #[error("empty value")]
    Empty,
    #[error("unknown record format tag {0:#04x} (expected {TAG:#04x})")]
    Tag(u8),
    #[error("truncated record: {0}")]
    Truncated(&'static str),
    #[error("bad varint")]
    Varint,
    #[error("field name is not UTF-8")]
    Name,
    #[error("{0} trailing bytes after the last field")]
    Trailing(usize),
}

fn put_varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

fn varint_len(mut v: u64) -> usize {
    let mut n = 1;
    while v >= 0x80 {
        v >>= 7;
        n += 1;
    }
    n
}

/// The encoded size of a record with fields of these (name, value) lengths.
pub fn encoded_len<'a>(fields: impl IntoIterator<Item = (usize, usize)> + 'a) -> usize {
    let mut n = 0usize;
    let mut len = 1;
    for (name, value) in fields {
        n += 1;
        len += varint_len(name as u64) + name + varint_len(value as u64) + value;
    }
    len + varint_len(n as u64)
}

/// Serialize `rec`.
pub fn encode(rec: &Record) -> Vec<u8> {
    let mut out = Vec::with_capacity(encoded_len(rec.iter().map(|(f, v)| (f.len(), v.len()))));
    out.push(TAG);
    put_varint(&mut out, rec.len() as u64);
    for (f, v) in rec {
        put_varint(&mut out, f.len() as u64);
        out.extend_from_slice(f.as_bytes());
        put_varint(&mut out, v.len() as u64);
        out.extend_from_slice(v);
    }
    out
}

struct Reader<'a> {
    buf: &'a [u8],
}

impl<'a> Reader<'a> {
    fn varint(&mut self) -> Result<u64, CodecError> {
        let mut v: u64 = 0;
        for i in 0..10 {
            let (&b, rest) = self
                .buf
                .split_first()
                .ok_or(CodecError::Truncated("varint"))?;
            self.buf = rest;
            let bits = u64::from(b & 0x7F);
            if i == 9 && b > 1 {
                return Err(CodecError::Varint);
            }
            v |= bits << (7 * i);
            if b & 0x80 == 0 {
                return Ok(v);
            }
        }
        Err(CodecError::Varint)
    }

    fn bytes(&mut self, what: &'static str) -> Result<&'a [u8], CodecError> {
        let len = self.varint()?;
        if len > self.buf.len() as u64 {
            return Err(CodecError::Truncated(what));
        }
        let (b, rest) = self.buf.split_at(len as usize);
        self.buf = rest;
        Ok(b)
    }
}

/// Parse a value written by [`encode`].
pub fn decode(bytes: &[u8]) -> Result<Record, CodecError> {
    let (&tag, rest) = bytes.split_first().ok_or(CodecError::Empty)?;
    if tag != TAG {
        return Err(CodecError::Tag(tag));
    }
    let mut r = Reader { buf: rest };
    let n = r.varint()?;
    // Each field takes at least two bytes: a count beyond that is a lie, not an allocation.
    if n > (r.buf.len() / 2) as u64 {
        return Err(CodecError::Truncated("field count"));
    }
    let mut rec = Vec::with_capacity(n as usize);
    for _ in 0..n {
        let name = std::str::from_utf8(r.bytes("field name")?).map_err(|_| CodecError::Name)?;
        let value = r.bytes("field value")?;
        rec.push((name.to_string(), value.to_vec()));
    }
    if !r.buf.is_empty() {
        return Err(CodecError::Trailing(r.buf.len()));
    }
    Ok(rec)
}

/// The fields of `rec` named in `fields` (in that order; absent ones left out), or all of them.
pub fn project(rec: Record, fields: Option<&[String]>) -> Record {
    match fields {
        None => rec,
        Some(fs) => fs
            .iter()
            .filter_map(|f| rec.iter().find(|(n, _)| n == f).cloned())
            .collect(),
    }
}

/// Overwrite the fields of `rec` that `updates` names and append the others.
pub fn merge(rec: &mut Record, updates: &Record) {
    for (f, v) in updates {
        match rec.iter_mut().find(|(n, _)| n == f) {
            Some(slot) => slot.1.clone_from(v),
            None => rec.push((f.clone(), v.clone())),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rec(fields: &[(&str, &[u8])]) -> Record {
        fields
            .iter()
            .map(|(f, v)| (f.to_string(), v.to_vec()))
            .collect()
    }

    #[test]
    fn round_trip_and_size() {
        let ycsb: Record = (0..10)
            .map(|i| (format!("field{i}"), vec![b'a' + i as u8; 100]))
            .collect();
        let bytes = encode(&ycsb);
        assert_eq!(bytes.len(), 1082);
        assert_eq!(
            encoded_len(ycsb.iter().map(|(f, v)| (f.len(), v.len()))),
            1082
        );
        assert_eq!(decode(&bytes).unwrap(), ycsb);
        for r in [
            rec(&[]),
            rec(&[("", b"")]),
            rec(&[("f", &[0u8; 300]), ("ü", b"\xff\x00")]),
        ] {
            let b = encode(&r);
            assert_eq!(
                b.len(),
                encoded_len(r.iter().map(|(f, v)| (f.len(), v.len())))
            );
            assert_eq!(decode(&b).unwrap(), r);
        }
        // A 300-byte value has a two-byte length.
        assert_eq!(
            &encode(&rec(&[("f", &[0u8; 300])]))[..6],
            [TAG, 1, 1, b'f', 0xAC, 0x02]
        );
    }

    #[test]
    fn rejects_malformed_values() {
        let good = encode(&rec(&[("a", b"xyz"), ("b", b"")]));
        assert_eq!(decode(&[]), Err(CodecError::Empty));
        assert_eq!(decode(b"hello"), Err(CodecError::Tag(b'h')));
        for cut in 1..good.len() {
            assert!(decode(&good[..cut]).is_err(), "{cut}");
        }
        let mut long = good.clone();
        long.push(0);
        assert_eq!(decode(&long), Err(CodecError::Trailing(1)));
        // A huge field count or length is an error, not an allocation.
        assert!(decode(&[TAG, 0xFF, 0xFF, 0xFF, 0xFF, 0x0F]).is_err());
        assert!(
            decode(&[
                TAG, 1, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0x7F
            ])
            .is_err()
        );
        assert_eq!(decode(&[TAG, 1, 1, 0xFF, 0]), Err(CodecError::Name));
        // Arbitrary bytes never panic.
        let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
        for len in 0..2000 {
            let mut buf = vec![TAG];
            for _ in 0..len % 40 {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                buf.push(if x.is_multiple_of(3) {
                    (x >> 8) as u8 & 3
                } else {
                    (x >> 16) as u8
                });
            }
            let _ = decode(&buf);
        }
    }

    #[test]
    fn project_and_merge() {
        let mut r = rec(&[("a", b"1"), ("b", b"2"), ("c", b"3")]);
        let fields = ["c".to_string(), "x".to_string(), "a".to_string()];
        assert_eq!(
            project(r.clone(), Some(&fields)),
            rec(&[("c", b"3"), ("a", b"1")])
        );
        assert_eq!(project(r.clone(), None), r);
        merge(&mut r, &rec(&[("b", b"22"), ("d", b"4")]));
        assert_eq!(
            r,
            rec(&[("a", b"1"), ("b", b"22"), ("c", b"3"), ("d", b"4")])
        );
    }
}
