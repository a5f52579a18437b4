//! The documents of `/v1/credentials`: scoped bearer credentials the metadata
//! service issues beside its root token, and the scope rules they carry.
//!
//! A credential is either an **admin** credential (everything the root token may do)
//! or a **table** credential: a list of table patterns — exact names, or prefixes
//! ending in `*` (`"orders-*"`; a lone `"*"` is every table) — and an access level,
//! `read` or `read-write`. Its secret is `dmkv_` followed by 32 random bytes in
//! unpadded base64url ([`SECRET_PREFIX`]); the service keeps only its SHA-256 and
//! shows the secret once, in the answer to `POST /v1/credentials`.

use serde::{Deserialize, Serialize};

/// What every credential secret starts with, so that scanners can find leaked ones.
pub const SECRET_PREFIX: &str = "dmkv_";

/// Most table patterns in one credential.
pub const MAX_TABLE_PATTERNS: usize = 64;

/// Longest label of a credential, in bytes.
pub const MAX_LABEL_LEN: usize = 128;

/// What a credential may do.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "lowercase")]
pub enum CredentialKind {
    /// Everything the root token may do: the catalog, memnodes, credentials.
    Admin,
    /// The data path of the tables its patterns cover.
    #[default]
    Table,
}

impl CredentialKind {
    /// `admin` or `table`.
    pub fn as_str(self) -> &'static str {
        match self {
            CredentialKind::Admin => "admin",
            CredentialKind::Table => "table",
        }
    }
}

/// How much of a table a table credential may touch.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Default, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub enum Access {
    /// Describe the table, look keys up, read chains and tails, list keys.
    #[default]
    #[serde(rename = "read")]
    Read,
    /// All of `read`, and lease memory for the table, open chains, publish roots
    /// and tails.
    #[serde(rename = "read-write")]
    ReadWrite,
}

impl Access {
    /// `read` or `read-write`.
    pub fn as_str(self) -> &'static str {
        match self {
            Access::Read => "read",
            Access::ReadWrite => "read-write",
        }
    }
}

impl std::str::FromStr for Access {
    type Err = String;

    fn from_str(s: &str) -> Result<Access, String> {
        match s {
            "read" => Ok(Access::Read),
            "read-write" | "readwrite" | "rw" => Ok(Access::ReadWrite),
            _ => Err(format!("access {s:?} is neither read nor read-write")),
        }
    }
}

/// Whether table pattern `pattern` covers table `table`: an exact name, a prefix
/// ending in `*`, or `*` (every table).
pub fn pattern_covers(pattern: &str, table: &str) -> bool {
    match pattern.strip_suffix('*') {
        Some(prefix) => table.starts_with(prefix),
        None => pattern == table,
    }
}

/// `POST /v1/credentials`: issue a credential.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct CreateCredentialRequest {
    /// `admin` or `table` (default `table`).
    #[serde(default)]
    pub kind: CredentialKind,
    /// For a table credential (at least one, at most 64): exact table names, or
    /// prefixes ending in `*` (`"orders-*"`; `"*"` is every table, also future ones).
    /// Must be empty for an admin credential.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tables: Vec<String>,
    /// For a table credential: `read` or `read-write` (default `read`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub access: Option<Access>,
    /// Lifetime in milliseconds from now (at most one of `ttl_ms` and
    /// `expires_at_ms`; neither: it never expires).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ttl_ms: Option<u64>,
    /// When it stops working (Unix ms, in the future).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expires_at_ms: Option<u64>,
    /// What it is for (up to 128 bytes, no control characters), shown in listings.
    #[serde(default)]
    pub label: String,
}

/// A credential as listed (`GET /v1/credentials`): never its secret.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct CredentialInfo {
    /// Id (`DELETE /v1/credentials/{id}` revokes it).
    pub id: u64,
    /// `admin` or `table`.
    pub kind: CredentialKind,
    /// The table patterns of a table credential (empty for an admin one).
    #[serde(default)]
    pub tables: Vec<String>,
    /// The access of a table credential (`read-write` for an admin one).
    pub access: Access,
    /// Its label.
    #[serde(default)]
    pub label: String,
    /// When it was issued (Unix ms).
    pub created_at_ms: u64,
    /// When it stops working (Unix ms), if ever.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expires_at_ms: Option<u64>,
    /// When it was last presented (Unix ms, to the minute), if ever.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_used_ms: Option<u64>,
    /// Whether it has expired (it still shows until revoked).
    #[serde(default)]
    pub expired: bool,
}

impl CredentialInfo {
    /// Whether this credential lets its holder do `access` on `table`.
    pub fn covers(&self, table: &str, access: Access) -> bool {
        match self.kind {
            CredentialKind::Admin => true,
            CredentialKind::Table => {
                self.access >= access && self.tables.iter().any(|p| pattern_covers(p, table))
            }
        }
    }

    /// The scope in words, for error messages: `admin`, or `read-write on orders, logs-*`.
    pub fn scope_text(&self) -> String {
        match self.kind {
            CredentialKind::Admin => "admin".to_owned(),
            CredentialKind::Table => {
                format!("{} on {}", self.access.as_str(), self.tables.join(", "))
            }
        }
    }
}

/// `POST /v1/credentials` → 201: the credential and its secret, shown this once.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct CreatedCredential {
    /// The credential.
    pub credential: CredentialInfo,
    /// The bearer secret (`dmkv_…`). The service keeps only its hash: store it now.
    pub secret: String,
}

/// `GET /v1/credentials`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct CredentialsResponse {
    /// Every credential not revoked, by id.
    pub credentials: Vec<CredentialInfo>,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn table(tables: &[&str], access: Access) -> CredentialInfo {
        CredentialInfo {
            id: 1,
            kind: CredentialKind::Table,
            tables: tables.iter().map(|t| (*t).to_owned()).collect(),
            access,
            label: String::new(),
            created_at_ms: 0,
            expires_at_ms: None,
            last_used_ms: None,
            expired: false,
        }
    }

    #[test]
    fn patterns_cover_exact_names_and_prefixes() {
        assert!(pattern_covers("orders", "orders"));
        assert!(!pattern_covers("orders", "orders2"));
        assert!(pattern_covers("orders-*", "orders-eu"));
        assert!(pattern_covers("orders-*", "orders-"));
        assert!(!pattern_covers("orders-*", "orders"));
        assert!(pattern_covers("*", "anything"));
    }

    #[test]
    fn access_levels_nest() {
        let ro = table(&["a"], Access::Read);
        assert!(ro.covers("a", Access::Read));
        assert!(!ro.covers("a", Access::ReadWrite));
        assert!(!ro.covers("b", Access::Read));
        let rw = table(&["a", "p.*"], Access::ReadWrite);
        assert!(rw.covers("a", Access::Read) && rw.covers("p.x", Access::ReadWrite));
        assert_eq!(rw.scope_text(), "read-write on a, p.*");
    }

    #[test]
    fn access_spelling() {
        assert_eq!(
            serde_json::to_string(&Access::ReadWrite).unwrap(),
            "\"read-write\""
        );
        assert_eq!("read".parse::<Access>(), Ok(Access::Read));
        assert!("write".parse::<Access>().is_err());
        let req: CreateCredentialRequest =
            serde_json::from_str(r#"{"kind":"table","tables":["a"],"access":"read-write"}"#)
                .unwrap();
        assert_eq!(req.access, Some(Access::ReadWrite));
    }
}
