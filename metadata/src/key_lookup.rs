//! Where a key lives, for the dashboard's key lookup (`GET
//! /v1/tables/{name}/location?key=`): the service reads the key like a client would,
//! with a kvstore client of its own (connected to itself, straight to the memnodes,
//! created on the first lookup and kept), and describes what it found
//! ([`KeyLocationResponse`]). Clover and RACE tables; nothing is written.

use std::sync::Mutex;

use axum::http::StatusCode;
use kvstore::{
    AcceleratorUse, Client, ClientOptions, ConnectionOptions, KeyLocation, KeyPlace, KvError,
};
use serde::{Deserialize, Serialize};

use crate::api::MemnodeInfo;

/// Bytes of the value shown in [`KeyLocationResponse::value_preview`].
pub const PREVIEW_BYTES: usize = 256;

/// A memnode named in an answer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct MemnodeRef {
    /// Id.
    pub id: u64,
    /// Name (empty when it is no longer registered).
    pub name: String,
}

/// `GET /v1/tables/{name}/location?key=`: where a key lives and what it holds.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct KeyLocationResponse {
    /// The table.
    pub table: String,
    /// Its index (`clover`, `race`).
    pub index: String,
    /// Whether the key has a value (false: never written, or deleted).
    pub found: bool,
    /// Where the key is (or would be), in words: the chain and tail node of a Clover
    /// key, the subtable and candidate buckets of a RACE key.
    pub place: String,
    /// Clover: the key's chain, when it has one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub chain_id: Option<u64>,
    /// RACE: the two candidate main buckets of its subtable.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub buckets: Option<[u64; 2]>,
    /// The memnodes holding the value (its copies, primary first); empty when absent.
    pub memnodes: Vec<MemnodeRef>,
    /// The value's version (Clover: its tail node's; RACE keeps none).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<u64>,
    /// The value's length in bytes, when found.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub value_len: Option<u64>,
    /// The first [`PREVIEW_BYTES`] of the value as text: UTF-8 where it is, `\xNN`
    /// for other bytes and control characters. Plain text; HTML-escape it to show it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub value_preview: Option<String>,
    /// Whether the value is longer than the preview.
    #[serde(default)]
    pub value_truncated: bool,
}

/// Why a lookup failed: status, stable code, message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LookupError {
    /// HTTP status.
    pub status: StatusCode,
    /// Stable code.
    pub code: &'static str,
    /// For humans.
    pub message: String,
}

impl LookupError {
    fn of(e: KvError) -> LookupError {
        let (status, code) = match &e {
            KvError::NoSuchTable(_) => (StatusCode::NOT_FOUND, "table_not_found"),
            KvError::KeyTooLarge { .. } | KvError::InvalidArgument(_) | KvError::Unsupported(_) => {
                (StatusCode::UNPROCESSABLE_ENTITY, "invalid_request")
            }
            KvError::Corrupt(_) => (StatusCode::INTERNAL_SERVER_ERROR, "corrupt"),
            _ => (StatusCode::SERVICE_UNAVAILABLE, "memnode_unavailable"),
        };
        LookupError {
            status,
            code,
            message: format!("key lookup failed: {e}"),
        }
    }
}

/// The service's own kvstore client, made on first use.
#[derive(Default)]
pub struct KeyLookup {
    client: Mutex<Option<Client>>,
}

impl std::fmt::Debug for KeyLookup {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KeyLookup").finish_non_exhaustive()
    }
}

impl KeyLookup {
    /// Looks `key` up in `table` through the service at `url` (blocking: it reads the
    /// memnodes); `memnodes` names the memnodes in the answer.
    pub fn locate(
        &self,
        url: &str,
        token: Option<String>,
        table: &str,
        key: &[u8],
        memnodes: &[MemnodeInfo],
    ) -> Result<KeyLocationResponse, LookupError> {
        let client = self.client(url, token).map_err(LookupError::of)?;
        let session = client.session().map_err(LookupError::of)?;
        let t = session.table(table).map_err(LookupError::of)?;
        let found = session.block_on(t.locate(key));
        session.quiesce();
        let loc = found.map_err(LookupError::of)?;
        Ok(describe(table, &loc, memnodes))
    }

    fn client(&self, url: &str, token: Option<String>) -> Result<Client, KvError> {
        let mut c = self.client.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(client) = c.as_ref() {
            return Ok(client.clone());
        }
        let options = ClientOptions::default()
            .with_token(token)
            .with_name("metadata-key-lookup")
            .with_connection(ConnectionOptions::default().with_accelerator(AcceleratorUse::Off));
        let client = Client::connect(url, options)?;
        *c = Some(client.clone());
        Ok(client)
    }
}

/// The answer for `loc`.
pub fn describe(table: &str, loc: &KeyLocation, memnodes: &[MemnodeInfo]) -> KeyLocationResponse {
    let name = |id: u64| {
        memnodes
            .iter()
            .find(|m| m.id == id)
            .map(|m| m.name.clone())
            .unwrap_or_default()
    };
    let at = |memnode: u64, offset: u64| {
        let n = name(memnode);
        if n.is_empty() {
            format!("memnode {memnode} + {offset:#x}")
        } else {
            format!("{n} ({memnode}) + {offset:#x}")
        }
    };
    let (place, chain_id, buckets) = match &loc.place {
        KeyPlace::NoChain => ("no chain: the key was never written".to_owned(), None, None),
        KeyPlace::Clover(c) => (
            format!(
                "chain {}, tail node at {}{}",
                c.chain_id,
                at(c.tail.memnode, c.tail.offset),
                if c.tombstone {
                    " (a tombstone: deleted)"
                } else {
                    ""
                }
            ),
            Some(c.chain_id),
            None,
        ),
        KeyPlace::Race(r) => (
            format!(
                "subtable at {} (directory entry {}), buckets {} and {}, fingerprint {:#04x}",
                at(r.subtable.memnode, r.subtable.offset),
                r.directory_entry,
                r.buckets[0],
                r.buckets[1],
                r.fingerprint
            ),
            None,
            Some(r.buckets),
        ),
    };
    let value = loc.value.as_deref();
    KeyLocationResponse {
        table: table.to_owned(),
        index: loc.index.to_owned(),
        found: loc.found(),
        place,
        chain_id,
        buckets,
        memnodes: loc
            .memnodes
            .iter()
            .map(|&id| MemnodeRef { id, name: name(id) })
            .collect(),
        version: loc.version,
        value_len: value.map(|v| v.len() as u64),
        value_preview: value.map(|v| preview(&v[..v.len().min(PREVIEW_BYTES)])),
        value_truncated: value.is_some_and(|v| v.len() > PREVIEW_BYTES),
    }
}

/// `bytes` as text: valid UTF-8 as is, control characters and other bytes as `\xNN`
/// (a character cut by the preview's end shows as its bytes).
pub fn preview(bytes: &[u8]) -> String {
    let mut out = String::new();
    for chunk in bytes.utf8_chunks() {
        for c in chunk.valid().chars() {
            if c.is_control() && c != '\n' && c != '\t' {
                let mut buf = [0u8; 4];
                for b in c.encode_utf8(&mut buf).bytes() {
                    out.push_str(&format!("\\x{b:02x}"));
                }
            } else {
                out.push(c);
            }
        }
        for b in chunk.invalid() {
            out.push_str(&format!("\\x{b:02x}"));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use kvstore::{CloverPlace, RemotePlace};

    #[test]
    fn previews_are_text_whatever_the_bytes() {
        assert_eq!(preview(b"<b>hello</b>"), "<b>hello</b>");
        assert_eq!(preview("héllo".as_bytes()), "héllo");
        assert_eq!(preview(b"a\x00b\xffc\x1b"), "a\\x00b\\xffc\\x1b");
        // A character cut in two by the preview's end.
        assert_eq!(preview(&"é".as_bytes()[..1]), "\\xc3");
    }

    #[test]
    fn answers_name_memnodes_and_cut_long_values() {
        let loc = KeyLocation {
            index: "clover",
            place: KeyPlace::Clover(CloverPlace {
                chain_id: 7,
                root: RemotePlace {
                    memnode: 1,
                    offset: 0x40,
                },
                tail: RemotePlace {
                    memnode: 1,
                    offset: 0x1000,
                },
                tombstone: false,
            }),
            memnodes: vec![1],
            version: Some(3),
            value: Some(vec![b'x'; PREVIEW_BYTES + 10]),
        };
        let memnodes = vec![MemnodeInfo {
            id: 1,
            name: "mem-a".into(),
            ..serde_json::from_value(serde_json::json!({
                "id": 1, "name": "", "admin_url": "", "data_addr": "", "capacity": 0,
                "epoch": 1, "healthy": true, "last_heartbeat_age_ms": 0,
                "registered_at_ms": 0, "free_bytes": 0, "leased_bytes": 0, "regions": []
            }))
            .unwrap()
        }];
        let r = describe("users", &loc, &memnodes);
        assert!(r.found);
        assert_eq!(r.place, "chain 7, tail node at mem-a (1) + 0x1000");
        assert_eq!(
            r.memnodes,
            vec![MemnodeRef {
                id: 1,
                name: "mem-a".into()
            }]
        );
        assert_eq!(r.value_len, Some(PREVIEW_BYTES as u64 + 10));
        assert_eq!(r.value_preview.unwrap().len(), PREVIEW_BYTES);
        assert!(r.value_truncated);
        let absent = KeyLocation {
            index: "clover",
            place: KeyPlace::NoChain,
            memnodes: vec![],
            version: None,
            value: None,
        };
        let r = describe("users", &absent, &memnodes);
        assert!(!r.found);
        assert!(r.place.contains("never written"));
        assert_eq!((r.value_len, r.value_preview), (None, None));
    }
}
