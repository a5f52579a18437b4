//! Grants: what a client may touch on one memory node, signed by the metadata service.
//!
//! A grant names a client, a memory node, a table, the extents of that table's memory
//! on that node (offsets into the node's region), the rights (read-only or read-write)
//! and an expiry. The metadata service signs its canonical encoding with HMAC-SHA256
//! under a key it shares with the memory nodes ([`GrantKey`]); a memory node verifies a
//! grant offline and scopes the queue pair created with it to exactly those extents.
//!
//! The text form ([`Grant::sign`], [`Grant::verify`]) is URL-safe base64 (no padding)
//! of the canonical bytes followed by the 32-byte tag. The canonical bytes are, big
//! endian: the magic `DKG1`; the client id (u16 length, UTF-8); the memory node id
//! (u64); the table name (u16 length, UTF-8); the access (u8: 1 read-only, 2
//! read-write); the expiry (u64, unix milliseconds); the nonce (16 bytes); the window
//! count (u32) and each window's offset and length (u64 each). Nothing else is accepted:
//! trailing bytes, unknown access codes, empty or overflowing windows are rejected.

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use hmac::{Hmac, Mac};
use serde::{Deserialize, Serialize};
use sha2::Sha256;

type HmacSha256 = Hmac<Sha256>;

const MAGIC: &[u8; 4] = b"DKG1";
const TAG_LEN: usize = 32;
/// Most windows one grant carries.
pub const MAX_WINDOWS: usize = 65_536;
/// Longest client id or table name a grant carries, in bytes.
pub const MAX_NAME: usize = 1024;
/// The shortest secret accepted as a grant key, in bytes.
pub const MIN_KEY_LEN: usize = 16;
/// The label under which a grant key is derived from the memory node admin token.
pub const DERIVE_LABEL: &[u8] = b"dmkv grant key v1";

/// What a grant lets its holder do inside its windows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum GrantAccess {
    /// RDMA READ only.
    ReadOnly,
    /// READ, WRITE, compare-and-swap and fetch-and-add.
    ReadWrite,
}

impl GrantAccess {
    fn code(self) -> u8 {
        match self {
            GrantAccess::ReadOnly => 1,
            GrantAccess::ReadWrite => 2,
        }
    }

    fn from_code(code: u8) -> Option<GrantAccess> {
        match code {
            1 => Some(GrantAccess::ReadOnly),
            2 => Some(GrantAccess::ReadWrite),
            _ => None,
        }
    }
}

/// One extent of a table's memory on a memory node: `len` bytes from `offset` into the
/// node's region.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct GrantWindow {
    /// First byte, as an offset into the node's region.
    pub offset: u64,
    /// Length in bytes (non-zero).
    pub len: u64,
}

/// A grant: what `client_id` may do to `table`'s memory on memory node `memnode_id`
/// until `expires_at_ms`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Grant {
    /// Who the grant was issued to (the metadata service's name for the client).
    pub client_id: String,
    /// The memory node it is valid on.
    pub memnode_id: u64,
    /// The table whose memory it covers.
    pub table: String,
    /// The extents of that table's memory on that node.
    pub windows: Vec<GrantWindow>,
    /// Read-only or read-write.
    pub access: GrantAccess,
    /// When it stops being valid, unix milliseconds.
    pub expires_at_ms: u64,
    /// Random bytes making every issued grant distinct.
    pub nonce: [u8; 16],
}

/// Why a grant was not accepted.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum GrantError {
    /// The text is not base64 of a grant.
    #[error("the grant is not valid base64: {0}")]
    Encoding(String),
    /// The signature does not match: forged, modified or signed under another key.
    #[error("the grant's signature does not match (forged, modified or signed under another key)")]
    BadSignature,
    /// The signed bytes are not a well-formed grant.
    #[error("the grant is malformed: {0}")]
    Malformed(String),
    /// A field is out of range, so it cannot be encoded.
    #[error("the grant cannot be encoded: {0}")]
    Invalid(String),
    /// The secret is too short to be a grant key.
    #[error("a grant key needs at least {MIN_KEY_LEN} bytes of secret, got {0}")]
    WeakKey(usize),
}

/// The HMAC-SHA256 key grants are signed with (shared by the metadata service and the
/// memory nodes). Its `Debug` output never shows the secret.
#[derive(Clone)]
pub struct GrantKey(Vec<u8>);

impl std::fmt::Debug for GrantKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("GrantKey(..)")
    }
}

impl GrantKey {
    /// A key from a secret of at least [`MIN_KEY_LEN`] bytes (surrounding ASCII blanks,
    /// such as a file's final newline, are not part of it).
    pub fn from_secret(secret: &[u8]) -> Result<GrantKey, GrantError> {
        let trimmed = secret.trim_ascii();
        if trimmed.len() < MIN_KEY_LEN {
            return Err(GrantError::WeakKey(trimmed.len()));
        }
        Ok(GrantKey(trimmed.to_vec()))
    }

    /// The key derived from the memory node admin token: HMAC-SHA256 keyed with the
    /// token over [`DERIVE_LABEL`], so a grant key never equals the token itself.
    pub fn derive_from_admin_token(token: &str) -> Result<GrantKey, GrantError> {
        let token = token.trim();
        if token.len() < MIN_KEY_LEN {
            return Err(GrantError::WeakKey(token.len()));
        }
        let mut mac = mac_for(token.as_bytes());
        mac.update(DERIVE_LABEL);
        Ok(GrantKey(mac.finalize().into_bytes().to_vec()))
    }

    fn mac(&self) -> HmacSha256 {
        mac_for(&self.0)
    }
}

fn mac_for(key: &[u8]) -> HmacSha256 {
    // HMAC accepts keys of any length, so this cannot fail.
    match <HmacSha256 as Mac>::new_from_slice(key) {
        Ok(m) => m,
        Err(_) => unreachable!("HMAC takes keys of any length"),
    }
}

fn put_name(out: &mut Vec<u8>, what: &str, s: &str) -> Result<(), GrantError> {
    if s.len() > MAX_NAME {
        return Err(GrantError::Invalid(format!(
            "{what} is {} bytes, at most {MAX_NAME}",
            s.len()
        )));
    }
    out.extend_from_slice(&(s.len() as u16).to_be_bytes());
    out.extend_from_slice(s.as_bytes());
    Ok(())
}

impl Grant {
    /// The canonical bytes the signature covers.
    pub fn canonical_bytes(&self) -> Result<Vec<u8>, GrantError> {
        if self.windows.len() > MAX_WINDOWS {
            return Err(GrantError::Invalid(format!(
                "{} windows, at most {MAX_WINDOWS}",
                self.windows.len()
            )));
        }
        check_windows(&self.windows).map_err(GrantError::Invalid)?;
        let mut out = Vec::with_capacity(64 + self.windows.len() * 16);
        out.extend_from_slice(MAGIC);
        put_name(&mut out, "client id", &self.client_id)?;
        out.extend_from_slice(&self.memnode_id.to_be_bytes());
        put_name(&mut out, "table name", &self.table)?;
        out.push(self.access.code());
        out.extend_from_slice(&self.expires_at_ms.to_be_bytes());
        out.extend_from_slice(&self.nonce);
        out.extend_from_slice(&(self.windows.len() as u32).to_be_bytes());
        for w in &self.windows {
            out.extend_from_slice(&w.offset.to_be_bytes());
            out.extend_from_slice(&w.len.to_be_bytes());
        }
        Ok(out)
    }

    /// The signed text form under `key`.
    pub fn sign(&self, key: &GrantKey) -> Result<String, GrantError> {
        let mut bytes = self.canonical_bytes()?;
        let mut mac = key.mac();
        mac.update(&bytes);
        bytes.extend_from_slice(&mac.finalize().into_bytes());
        Ok(URL_SAFE_NO_PAD.encode(bytes))
    }

    /// The grant `text` carries, if its signature under `key` matches (checked in
    /// constant time before anything else is read) and it is well formed. Expiry is
    /// not checked here: see [`Grant::expired_at`].
    pub fn verify(text: &str, key: &GrantKey) -> Result<Grant, GrantError> {
        let bytes = URL_SAFE_NO_PAD
            .decode(text.trim())
            .map_err(|e| GrantError::Encoding(e.to_string()))?;
        let Some(body_len) = bytes.len().checked_sub(TAG_LEN) else {
            return Err(GrantError::Malformed(format!(
                "{} bytes is shorter than a signature",
                bytes.len()
            )));
        };
        let (body, tag) = bytes.split_at(body_len);
        let mut mac = key.mac();
        mac.update(body);
        mac.verify_slice(tag)
            .map_err(|_| GrantError::BadSignature)?;
        parse(body)
    }

    /// Whether the grant has expired at `now_ms` (unix milliseconds).
    pub fn expired_at(&self, now_ms: u64) -> bool {
        now_ms >= self.expires_at_ms
    }
}

/// Windows must be non-empty and must not overflow the address space.
fn check_windows(windows: &[GrantWindow]) -> Result<(), String> {
    for w in windows {
        if w.len == 0 {
            return Err(format!("the window at offset {} is empty", w.offset));
        }
        if w.offset.checked_add(w.len).is_none() {
            return Err(format!(
                "the window of {} bytes at offset {} overflows",
                w.len, w.offset
            ));
        }
    }
    Ok(())
}

/// Reads the canonical bytes front to back.
struct Reader<'a> {
    bytes: &'a [u8],
}

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize, what: &str) -> Result<&'a [u8], GrantError> {
        if self.bytes.len() < n {
            return Err(GrantError::Malformed(format!("it ends inside the {what}")));
        }
        let (head, rest) = self.bytes.split_at(n);
        self.bytes = rest;
        Ok(head)
    }

    fn array<const N: usize>(&mut self, what: &str) -> Result<[u8; N], GrantError> {
        let mut a = [0u8; N];
        a.copy_from_slice(self.take(N, what)?);
        Ok(a)
    }

    fn u64(&mut self, what: &str) -> Result<u64, GrantError> {
        Ok(u64::from_be_bytes(self.array(what)?))
    }

    fn name(&mut self, what: &str) -> Result<String, GrantError> {
        let len = u16::from_be_bytes(self.array(what)?) as usize;
        if len > MAX_NAME {
            return Err(GrantError::Malformed(format!("the {what} is too long")));
        }
        let raw = self.take(len, what)?;
        String::from_utf8(raw.to_vec())
            .map_err(|_| GrantError::Malformed(format!("the {what} is not UTF-8")))
    }
}

fn parse(body: &[u8]) -> Result<Grant, GrantError> {
    let mut r = Reader { bytes: body };
    if r.take(MAGIC.len(), "magic")? != MAGIC {
        return Err(GrantError::Malformed("unknown format (magic)".into()));
    }
    let client_id = r.name("client id")?;
    let memnode_id = r.u64("memory node id")?;
    let table = r.name("table name")?;
    let [code] = r.array::<1>("access")?;
    let access = GrantAccess::from_code(code)
        .ok_or_else(|| GrantError::Malformed(format!("unknown access code {code}")))?;
    let expires_at_ms = r.u64("expiry")?;
    let nonce = r.array::<16>("nonce")?;
    let count = u32::from_be_bytes(r.array("window count")?) as usize;
    if count > MAX_WINDOWS || count.saturating_mul(16) != r.bytes.len() {
        return Err(GrantError::Malformed(format!(
            "{count} windows do not match the {} bytes that follow",
            r.bytes.len()
        )));
    }
    let mut windows = Vec::with_capacity(count);
    for _ in 0..count {
        let offset = r.u64("window offset")?;
        let len = r.u64("window length")?;
        windows.push(GrantWindow { offset, len });
    }
    check_windows(&windows).map_err(GrantError::Malformed)?;
    Ok(Grant {
        client_id,
        memnode_id,
        table,
        windows,
        access,
        expires_at_ms,
        nonce,
    })
}

/// The body of `POST /v1/tables/{name}/grants` on the metadata service.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct GrantRequest {
    /// The memory node the grant is for.
    pub memnode_id: u64,
    /// Who asks (recorded in the grant; default `"client"`).
    #[serde(default)]
    pub client: Option<String>,
    /// The rights asked for (default read-write).
    #[serde(default)]
    pub access: Option<GrantAccess>,
}

/// The answer of `POST /v1/tables/{name}/grants`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct GrantResponse {
    /// The signed grant (base64), to present to the memory node.
    pub grant: String,
    /// The memory node it is valid on.
    pub memnode_id: u64,
    /// The table it covers.
    pub table: String,
    /// The extents it covers, offsets into the node's region.
    pub windows: Vec<GrantWindow>,
    /// Its rights.
    pub access: GrantAccess,
    /// When it expires, unix milliseconds.
    pub expires_at_ms: u64,
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn key() -> GrantKey {
        GrantKey::from_secret(b"0123456789abcdef-test-key").unwrap()
    }

    fn sample() -> Grant {
        Grant {
            client_id: "ycsb-1".into(),
            memnode_id: 3,
            table: "users".into(),
            windows: vec![
                GrantWindow {
                    offset: 0,
                    len: 4096,
                },
                GrantWindow {
                    offset: 1 << 20,
                    len: 1 << 16,
                },
            ],
            access: GrantAccess::ReadWrite,
            expires_at_ms: 1_800_000_000_000,
            nonce: [7; 16],
        }
    }

    #[test]
    fn round_trip_and_expiry() {
        let g = sample();
        let text = g.sign(&key()).unwrap();
        assert_eq!(Grant::verify(&text, &key()).unwrap(), g);
        assert!(!g.expired_at(g.expires_at_ms - 1));
        assert!(g.expired_at(g.expires_at_ms));
    }

    #[test]
    fn another_key_or_garbage_is_refused() {
        let text = sample().sign(&key()).unwrap();
        let other = GrantKey::from_secret(b"another-secret-key-of-16").unwrap();
        assert_eq!(Grant::verify(&text, &other), Err(GrantError::BadSignature));
        assert!(matches!(
            Grant::verify("not base64!", &key()),
            Err(GrantError::Encoding(_))
        ));
        assert!(matches!(
            Grant::verify("AAAA", &key()),
            Err(GrantError::Malformed(_))
        ));
    }

    #[test]
    fn weak_keys_and_bad_windows_are_refused() {
        assert_eq!(
            GrantKey::from_secret(b"short\n").unwrap_err(),
            GrantError::WeakKey(5)
        );
        assert!(GrantKey::derive_from_admin_token("tiny").is_err());
        let derived = GrantKey::derive_from_admin_token("an-admin-token-long-enough").unwrap();
        assert_ne!(derived.0, b"an-admin-token-long-enough".to_vec());
        assert_eq!(format!("{derived:?}"), "GrantKey(..)");
        let mut g = sample();
        g.windows.push(GrantWindow { offset: 5, len: 0 });
        assert!(matches!(g.sign(&key()), Err(GrantError::Invalid(_))));
        g.windows = vec![GrantWindow {
            offset: u64::MAX,
            len: 2,
        }];
        assert!(matches!(g.sign(&key()), Err(GrantError::Invalid(_))));
    }

    fn grants() -> impl Strategy<Value = Grant> {
        (
            "[a-z0-9-]{0,20}",
            any::<u64>(),
            "[a-zA-Z0-9_.]{0,20}",
            proptest::collection::vec((0u64..1 << 40, 1u64..1 << 30), 0..8),
            any::<bool>(),
            any::<u64>(),
            any::<[u8; 16]>(),
        )
            .prop_map(
                |(client_id, memnode_id, table, w, rw, expires_at_ms, nonce)| Grant {
                    client_id,
                    memnode_id,
                    table,
                    windows: w
                        .into_iter()
                        .map(|(offset, len)| GrantWindow { offset, len })
                        .collect(),
                    access: if rw {
                        GrantAccess::ReadWrite
                    } else {
                        GrantAccess::ReadOnly
                    },
                    expires_at_ms,
                    nonce,
                },
            )
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 256, rng_seed: proptest::test_runner::RngSeed::Fixed(0x6772_616e), ..ProptestConfig::default() })]

        #[test]
        fn any_grant_round_trips(g in grants()) {
            let text = g.sign(&key()).unwrap();
            prop_assert_eq!(Grant::verify(&text, &key()).unwrap(), g);
        }

        #[test]
        fn any_bit_flip_is_refused(g in grants(), bit in any::<prop::sample::Index>()) {
            let text = g.sign(&key()).unwrap();
            let mut bytes = URL_SAFE_NO_PAD.decode(&text).unwrap();
            let i = bit.index(bytes.len() * 8);
            bytes[i / 8] ^= 1 << (i % 8);
            let flipped = URL_SAFE_NO_PAD.encode(&bytes);
            prop_assert!(Grant::verify(&flipped, &key()).is_err());
        }
    }
}
