//! Scoped credentials: issuing one (a random secret shown once, stored only as its
//! SHA-256), listing, revoking, and resolving a presented secret.
//!
//! Unlike the rest of the catalog, credentials are not held in memory: every request
//! that presents one looks its hash up in the store, so a revocation takes effect on
//! the next request. Store keys: `cred/h/<sha256 hex>` the record,
//! `cred/i/<id:016x>` the hash of credential `id` (for revoking by id), `cred/n` the
//! last id given out.

use base64::Engine as _;
use rand::TryRngCore as _;
use serde::{Deserialize, Serialize};
use sha2::{Digest as _, Sha256};

use super::error::{CatalogError, not_found};
use super::state::Catalog;
use super::tables::validate_table_name;
use crate::store::{Batch, decode, encode};
use dmkv_api::credentials::{
    Access, CreateCredentialRequest, CreatedCredential, CredentialInfo, CredentialKind,
    MAX_LABEL_LEN, MAX_TABLE_PATTERNS, SECRET_PREFIX,
};

/// Prefix of the records, by hash.
const BY_HASH: &str = "cred/h/";
/// The last credential id given out.
const LAST_ID: &[u8] = b"cred/n";

/// Random bytes in a secret.
pub const SECRET_BYTES: usize = 32;

/// How stale a stored "last used" may get before a request updates it.
pub const LAST_USED_RESOLUTION_MS: u64 = 60_000;

/// A credential as stored: what is listed, and the hash of its secret.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
struct CredentialRecord {
    info: CredentialInfo,
    /// SHA-256 of the secret, lowercase hex.
    hash: String,
}

/// What a presented secret turned out to be.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CredentialCheck {
    /// No credential has this secret (never issued, or revoked).
    Unknown,
    /// The credential, past its expiry.
    Expired(CredentialInfo),
    /// The credential, valid now.
    Valid(CredentialInfo),
}

/// SHA-256 of `secret`, lowercase hex.
pub fn secret_hash(secret: &str) -> String {
    Sha256::digest(secret.as_bytes())
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

fn hash_key(hash: &str) -> Vec<u8> {
    format!("{BY_HASH}{hash}").into_bytes()
}

fn id_key(id: u64) -> Vec<u8> {
    format!("cred/i/{id:016x}").into_bytes()
}

fn invalid(msg: impl Into<String>) -> CatalogError {
    CatalogError::Invalid(msg.into())
}

/// Checks one table pattern: a table name, or a prefix of one followed by `*`.
fn validate_pattern(pattern: &str) -> Result<(), CatalogError> {
    if pattern == "*" {
        return Ok(());
    }
    let (name, prefix) = match pattern.strip_suffix('*') {
        Some(p) => (p, true),
        None => (pattern, false),
    };
    if name.contains('*') {
        return Err(invalid(format!(
            "table pattern {pattern:?}: `*` may only end a pattern (\"orders-*\") or stand alone (\"*\")"
        )));
    }
    // A prefix need not be a valid name on its own ("." is a fine prefix), only its
    // characters and length must be.
    let probe = if prefix && name.chars().all(|c| c == '.') {
        format!("{name}x")
    } else {
        name.to_owned()
    };
    validate_table_name(&probe).map_err(|e| invalid(format!("table pattern {pattern:?}: {e}")))
}

/// Checks a request and returns the credential it describes (id and times unset).
fn validate(req: &CreateCredentialRequest, now_ms: u64) -> Result<CredentialInfo, CatalogError> {
    let (tables, access) = match req.kind {
        CredentialKind::Admin => {
            if !req.tables.is_empty() {
                return Err(invalid(
                    "an admin credential covers everything: give no `tables` (or issue a table credential)",
                ));
            }
            if req.access == Some(Access::Read) {
                return Err(invalid(
                    "an admin credential is never read-only: omit `access` (or issue a table credential)",
                ));
            }
            (Vec::new(), Access::ReadWrite)
        }
        CredentialKind::Table => {
            if req.tables.is_empty() {
                return Err(invalid(
                    "a table credential needs `tables`: table names, or prefixes ending in `*` (\"orders-*\"; \"*\" is every table)",
                ));
            }
            if req.tables.len() > MAX_TABLE_PATTERNS {
                return Err(invalid(format!(
                    "at most {MAX_TABLE_PATTERNS} table patterns per credential, not {}",
                    req.tables.len()
                )));
            }
            for p in &req.tables {
                validate_pattern(p)?;
            }
            let mut tables = req.tables.clone();
            tables.sort();
            tables.dedup();
            (tables, req.access.unwrap_or_default())
        }
    };
    if req.label.len() > MAX_LABEL_LEN || req.label.chars().any(char::is_control) {
        return Err(invalid(format!(
            "label must be at most {MAX_LABEL_LEN} bytes without control characters"
        )));
    }
    let expires_at_ms = match (req.ttl_ms, req.expires_at_ms) {
        (Some(_), Some(_)) => {
            return Err(invalid("give `ttl_ms` or `expires_at_ms`, not both"));
        }
        (Some(0), None) => return Err(invalid("ttl_ms must be positive")),
        (Some(ttl), None) => Some(now_ms.saturating_add(ttl)),
        (None, Some(at)) if at <= now_ms => {
            return Err(invalid(format!(
                "expires_at_ms {at} is not in the future (now: {now_ms})"
            )));
        }
        (None, at) => at,
    };
    Ok(CredentialInfo {
        id: 0,
        kind: req.kind,
        tables,
        access,
        label: req.label.clone(),
        created_at_ms: now_ms,
        expires_at_ms,
        last_used_ms: None,
        expired: false,
    })
}

/// A new secret: [`SECRET_PREFIX`] and [`SECRET_BYTES`] bytes from the operating
/// system's generator in unpadded base64url.
fn new_secret() -> Result<String, CatalogError> {
    let mut bytes = [0u8; SECRET_BYTES];
    rand::rngs::OsRng
        .try_fill_bytes(&mut bytes)
        .map_err(|e| invalid(format!("the system random generator failed: {e}")))?;
    Ok(format!(
        "{SECRET_PREFIX}{}",
        base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes)
    ))
}

impl Catalog {
    /// Issues a credential: stores it under the hash of a new secret and returns the
    /// secret with it (the only time it is shown).
    pub fn create_credential(
        &mut self,
        req: &CreateCredentialRequest,
        now_ms: u64,
    ) -> Result<CreatedCredential, CatalogError> {
        let mut info = validate(req, now_ms)?;
        let last: u64 = match self.store.get(LAST_ID)? {
            Some(v) => decode(LAST_ID, &v)?,
            None => 0,
        };
        info.id = last + 1;
        let secret = new_secret()?;
        let hash = secret_hash(&secret);
        let rec = CredentialRecord {
            info: info.clone(),
            hash: hash.clone(),
        };
        let mut b = Batch::new();
        b.put(LAST_ID.to_vec(), &info.id)
            .put(hash_key(&hash), &rec)
            .put_raw(id_key(info.id), hash.into_bytes());
        self.commit(&b)?;
        Ok(CreatedCredential {
            credential: info,
            secret,
        })
    }

    /// Every credential not revoked, by id, with `expired` set as of `now_ms`.
    pub fn credentials(&self, now_ms: u64) -> Result<Vec<CredentialInfo>, CatalogError> {
        let mut out = Vec::new();
        for (k, v) in self.store.scan_prefix(BY_HASH.as_bytes())? {
            let rec: CredentialRecord = decode(&k, &v)?;
            out.push(with_expiry(rec.info, now_ms));
        }
        out.sort_by_key(|c| c.id);
        Ok(out)
    }

    /// Revokes credential `id`: its secret stops working with the next request.
    pub fn revoke_credential(&mut self, id: u64) -> Result<CredentialInfo, CatalogError> {
        let missing = || {
            not_found(
                "credential_not_found",
                format!(
                    "no credential {id} (revoked already, or never issued; see GET /v1/credentials)"
                ),
            )
        };
        let hash = self.store.get(&id_key(id))?.ok_or_else(missing)?;
        let hash = String::from_utf8_lossy(&hash).into_owned();
        let key = hash_key(&hash);
        let rec: CredentialRecord = match self.store.get(&key)? {
            Some(v) => decode(&key, &v)?,
            None => return Err(missing()),
        };
        let mut b = Batch::new();
        b.delete(key).delete(id_key(id));
        self.commit(&b)?;
        Ok(rec.info)
    }

    /// What `secret` is: unknown, expired, or valid. A valid one's "last used" is
    /// updated when it is more than [`LAST_USED_RESOLUTION_MS`] old (without a
    /// flush: losing that update in a crash is harmless).
    pub fn check_credential(
        &self,
        secret: &str,
        now_ms: u64,
    ) -> Result<CredentialCheck, CatalogError> {
        if !secret.starts_with(SECRET_PREFIX) {
            return Ok(CredentialCheck::Unknown);
        }
        let key = hash_key(&secret_hash(secret));
        let Some(v) = self.store.get(&key)? else {
            return Ok(CredentialCheck::Unknown);
        };
        let mut rec: CredentialRecord = decode(&key, &v)?;
        let info = with_expiry(rec.info.clone(), now_ms);
        if info.expired {
            return Ok(CredentialCheck::Expired(info));
        }
        let stale = rec
            .info
            .last_used_ms
            .is_none_or(|t| now_ms.saturating_sub(t) >= LAST_USED_RESOLUTION_MS);
        if stale {
            rec.info.last_used_ms = Some(now_ms);
            let mut b = Batch::new();
            b.put_raw(key, encode(&rec));
            if let Err(e) = self.store.apply(&b) {
                tracing::warn!(credential = info.id, error = %e, "cannot record when a credential was last used");
            }
        }
        Ok(CredentialCheck::Valid(info))
    }
}

fn with_expiry(mut info: CredentialInfo, now_ms: u64) -> CredentialInfo {
    info.expired = info.expires_at_ms.is_some_and(|at| now_ms >= at);
    info
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::catalog::CatalogConfig;
    use crate::store::MemStore;

    fn catalog() -> Catalog {
        Catalog::open(Box::new(MemStore::new()), CatalogConfig::default(), 0).unwrap()
    }

    fn table_req(tables: &[&str], access: Access) -> CreateCredentialRequest {
        CreateCredentialRequest {
            kind: CredentialKind::Table,
            tables: tables.iter().map(|t| (*t).to_owned()).collect(),
            access: Some(access),
            ..Default::default()
        }
    }

    #[test]
    fn issue_check_revoke() {
        let mut c = catalog();
        let made = c
            .create_credential(&table_req(&["a", "b-*"], Access::Read), 1000)
            .unwrap();
        assert!(made.secret.starts_with("dmkv_"));
        assert_eq!(made.secret.len(), 5 + 43);
        assert_eq!(made.credential.id, 1);
        let CredentialCheck::Valid(info) = c.check_credential(&made.secret, 2000).unwrap() else {
            panic!("valid")
        };
        assert_eq!(info.tables, vec!["a".to_owned(), "b-*".to_owned()]);
        let listed = c.credentials(2000).unwrap();
        assert_eq!(listed.len(), 1);
        assert_eq!(listed[0].last_used_ms, Some(2000));
        // Only the hash is stored.
        let all = c.store.scan_prefix(b"").unwrap();
        assert!(all.iter().all(|(k, v)| {
            !String::from_utf8_lossy(k).contains(&made.secret[5..])
                && !String::from_utf8_lossy(v).contains(&made.secret[5..])
        }));
        assert_eq!(c.revoke_credential(1).unwrap().id, 1);
        assert_eq!(
            c.check_credential(&made.secret, 3000).unwrap(),
            CredentialCheck::Unknown
        );
        assert!(matches!(
            c.revoke_credential(1),
            Err(CatalogError::NotFound {
                code: "credential_not_found",
                ..
            })
        ));
        let next = c
            .create_credential(&table_req(&["a"], Access::Read), 4000)
            .unwrap();
        assert_eq!(next.credential.id, 2, "ids are never reused");
    }

    #[test]
    fn expiry() {
        let mut c = catalog();
        let req = CreateCredentialRequest {
            ttl_ms: Some(500),
            ..table_req(&["a"], Access::ReadWrite)
        };
        let made = c.create_credential(&req, 1000).unwrap();
        assert_eq!(made.credential.expires_at_ms, Some(1500));
        assert!(matches!(
            c.check_credential(&made.secret, 1499).unwrap(),
            CredentialCheck::Valid(_)
        ));
        assert!(matches!(
            c.check_credential(&made.secret, 1500).unwrap(),
            CredentialCheck::Expired(_)
        ));
        assert!(c.credentials(1500).unwrap()[0].expired);
    }

    #[test]
    fn bad_requests_are_refused() {
        let mut c = catalog();
        let bad = [
            table_req(&[], Access::Read),
            table_req(&["a*b"], Access::Read),
            table_req(&["**"], Access::Read),
            table_req(&[".."], Access::Read),
            table_req(&["a/b"], Access::Read),
            CreateCredentialRequest {
                kind: CredentialKind::Admin,
                tables: vec!["a".into()],
                ..Default::default()
            },
            CreateCredentialRequest {
                ttl_ms: Some(1),
                expires_at_ms: Some(5000),
                ..table_req(&["a"], Access::Read)
            },
            CreateCredentialRequest {
                expires_at_ms: Some(10),
                ..table_req(&["a"], Access::Read)
            },
            CreateCredentialRequest {
                label: "a\nb".into(),
                ..table_req(&["a"], Access::Read)
            },
        ];
        for req in bad {
            assert!(
                matches!(
                    c.create_credential(&req, 100),
                    Err(CatalogError::Invalid(_))
                ),
                "{req:?}"
            );
        }
        assert!(c.credentials(100).unwrap().is_empty());
        for good in [&["*"][..], &[".*"], &["orders-*", "x"]] {
            c.create_credential(&table_req(good, Access::Read), 100)
                .unwrap();
        }
        assert_eq!(c.credentials(100).unwrap().len(), 3);
        assert_eq!(
            c.check_credential("not-a-credential", 100).unwrap(),
            CredentialCheck::Unknown
        );
    }
}
