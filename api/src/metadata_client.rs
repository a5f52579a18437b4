//! The blocking client of the metadata service ([`crate::metadata`] documents), for
//! clients, memnodes and tests, over the one HTTP client.
//!
//! Connections are kept alive and reused: a client (and its clones) keeps up to
//! [`crate::http::MAX_IDLE`] idle connections. A request that could not reach the service is
//! retried within the window of [`MetadataClient::with_retry`].
//!
//! URLs are `host:port` or `http://host:port` (a trailing `/` is fine).

use std::time::Duration;

use base64::Engine as _;
use serde::de::DeserializeOwned;

use crate::credentials::{
    CreateCredentialRequest, CreatedCredential, CredentialInfo, CredentialsResponse,
};
use crate::error::ClientError;
use crate::http::{HttpClient, RawResponse, Timeouts, encode_query, http_error, json};
use crate::metadata::{
    AcceleratorInfo, AdoptLeaseRequest, ChainDirectoryRequest, ChainDirectoryResponse,
    ChainIdBlock, ChainIdsRequest, ChainInfo, ChainKeysPage, ChainRequest, ChainResponse,
    CreateLeaseRequest, CreateTableRequest, DrainResponse, Health, HeartbeatResponse, Lease,
    LeasesResponse, MemnodeInfo, MemnodesResponse, PublishChainsRequest, PublishChainsResponse,
    RegisterMemnodeRequest, RegisterMemnodeResponse, RenewLeaseRequest, RootResponse,
    TableDescription, TablesResponse, TailHint, TailResponse,
};

/// A client of one metadata service.
#[derive(Debug, Clone)]
pub struct MetadataClient {
    http: HttpClient,
}

/// Whether sending a request twice does no more than sending it once: reads, and the
/// writes whose effect does not depend on how often they arrive (PUT, insert-or-open
/// of a chain, put-if-absent of a root, renewals, heartbeats).
fn idempotent(method: &str, path: &str) -> bool {
    let path = path.split('?').next().unwrap_or_default();
    match method {
        "GET" | "PUT" => true,
        "POST" => {
            path.ends_with("/chains")
                || path.ends_with("/root")
                || path.ends_with("/chains/directory")
                || path.ends_with("/chains/published")
                || path.ends_with("/renew")
                || path.ends_with("/heartbeat")
        }
        _ => false,
    }
}

impl MetadataClient {
    /// A client of the service at `url`.
    pub fn new(url: &str) -> Result<MetadataClient, ClientError> {
        Ok(MetadataClient {
            http: HttpClient::new(url)?.with_retry(Duration::ZERO, idempotent),
        })
    }

    /// Sends `Authorization: Bearer <token>` with every request: the root token or a
    /// credential's secret (`dmkv_…`, see [`crate::credentials`]).
    pub fn with_token(mut self, token: Option<String>) -> MetadataClient {
        self.http = self.http.with_token(token);
        self
    }

    /// Connect, read and write timeout.
    pub fn with_timeout(mut self, timeout: Duration) -> MetadataClient {
        self.http = self.http.with_timeouts(Timeouts::uniform(timeout));
        self
    }

    /// Retry requests that fail because the service cannot be reached (it is
    /// restarting, say) for up to `window`, pausing 10 ms, doubling up to 250 ms,
    /// between attempts. A request that could not connect is always retried; one
    /// that failed after it was sent only when sending it twice is harmless (GET,
    /// PUT, opening a chain, publishing a root, renewing a lease, a heartbeat), since
    /// the service may have executed it. Answers with an error status are never
    /// retried. The default window is zero: fail at once.
    pub fn with_retry(mut self, window: Duration) -> MetadataClient {
        self.http = self.http.with_retry(window, idempotent);
        self
    }

    /// The retry window (see [`MetadataClient::with_retry`]).
    pub fn retry_window(&self) -> Duration {
        self.http.retry_window()
    }

    /// The service's base URL.
    pub fn url(&self) -> String {
        self.http.url()
    }

    /// Sends one request and returns the answer, whatever its status (retrying as
    /// [`MetadataClient::with_retry`] says).
    pub fn request(
        &self,
        method: &'static str,
        path: &str,
        body: Option<&[u8]>,
    ) -> Result<RawResponse, ClientError> {
        self.http.request(method, path, body)
    }

    fn call<T: DeserializeOwned>(
        &self,
        method: &'static str,
        path: &str,
        body: Option<&[u8]>,
        expect: &[u16],
    ) -> Result<T, ClientError> {
        self.http.call(method, path, body, expect)
    }

    fn no_content(&self, method: &'static str, path: &str) -> Result<(), ClientError> {
        self.http.no_content(method, path)
    }

    /// `GET /healthz`.
    pub fn health(&self) -> Result<Health, ClientError> {
        self.call("GET", "/healthz", None, &[200])
    }

    /// `POST /v1/memnodes`.
    pub fn register_memnode(
        &self,
        req: &RegisterMemnodeRequest,
    ) -> Result<RegisterMemnodeResponse, ClientError> {
        self.call("POST", "/v1/memnodes", Some(&json(req)?), &[200, 201])
    }

    /// `POST /v1/memnodes/{id}/heartbeat`.
    pub fn heartbeat(&self, id: u64) -> Result<HeartbeatResponse, ClientError> {
        self.call(
            "POST",
            &format!("/v1/memnodes/{id}/heartbeat"),
            None,
            &[200],
        )
    }

    /// `DELETE /v1/memnodes/{id}`: refused (409) while table data or leases live on
    /// the memnode.
    pub fn deregister_memnode(&self, id: u64) -> Result<(), ClientError> {
        self.no_content("DELETE", &format!("/v1/memnodes/{id}"))
    }

    /// `DELETE /v1/memnodes/{id}?force=true`: removes the memnode even though table
    /// data lives there (those tables are marked lost).
    pub fn force_deregister_memnode(&self, id: u64) -> Result<(), ClientError> {
        self.no_content("DELETE", &format!("/v1/memnodes/{id}?force=true"))
    }

    /// `POST /v1/memnodes/{id}/drain`.
    pub fn drain_memnode(&self, id: u64) -> Result<DrainResponse, ClientError> {
        self.call("POST", &format!("/v1/memnodes/{id}/drain"), None, &[202])
    }

    /// `GET /v1/accelerator`: the switch accelerator to create queue pairs through, or
    /// `None` when the service advertises none (or predates the route).
    pub fn accelerator(&self) -> Result<Option<AcceleratorInfo>, ClientError> {
        match self.call::<AcceleratorInfo>("GET", "/v1/accelerator", None, &[200]) {
            Ok(info) if info.enabled && info.admin_url.is_some() => Ok(Some(info)),
            Ok(_) => Ok(None),
            Err(e) if e.status() == Some(404) => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// `GET /v1/memnodes`.
    pub fn memnodes(&self) -> Result<Vec<MemnodeInfo>, ClientError> {
        self.call::<MemnodesResponse>("GET", "/v1/memnodes", None, &[200])
            .map(|r| r.memnodes)
    }

    /// `POST /v1/leases` with the service's default TTL and placement.
    pub fn lease(&self, client: &str, bytes: u64) -> Result<Lease, ClientError> {
        self.create_lease(&CreateLeaseRequest {
            client: client.to_owned(),
            bytes,
            ..CreateLeaseRequest::default()
        })
    }

    /// `POST /v1/tables/{name}/grants`: a grant over table `name`'s memory on the
    /// memory node `req` names, to present to that node.
    pub fn grant(
        &self,
        table: &str,
        req: &crate::grant::GrantRequest,
    ) -> Result<crate::grant::GrantResponse, ClientError> {
        self.call(
            "POST",
            &format!("/v1/tables/{table}/grants"),
            Some(&json(req)?),
            &[201],
        )
    }

    /// `POST /v1/leases`.
    pub fn create_lease(&self, req: &CreateLeaseRequest) -> Result<Lease, ClientError> {
        self.call("POST", "/v1/leases", Some(&json(req)?), &[201])
    }

    /// `POST /v1/leases/{id}/renew`.
    pub fn renew(&self, lease_id: u64, ttl_ms: Option<u64>) -> Result<Lease, ClientError> {
        let body = json(&RenewLeaseRequest { ttl_ms })?;
        self.call(
            "POST",
            &format!("/v1/leases/{lease_id}/renew"),
            Some(&body),
            &[200],
        )
    }

    /// `POST /v1/leases/{id}/adopt`: hand a data lease over to its table, keeping
    /// its first `keep_bytes` (rounded up to 64 bytes; `None`: all of it). `None` in
    /// the answer: nothing was kept and the lease was freed.
    pub fn adopt(
        &self,
        lease_id: u64,
        keep_bytes: Option<u64>,
    ) -> Result<Option<Lease>, ClientError> {
        let path = format!("/v1/leases/{lease_id}/adopt");
        let body = json(&AdoptLeaseRequest { keep_bytes })?;
        let r = self.request("POST", &path, Some(&body))?;
        match r.status {
            204 => Ok(None),
            200 => serde_json::from_slice(&r.body).map(Some).map_err(|e| {
                ClientError::Protocol(format!("POST {path}: body is not the expected JSON: {e}"))
            }),
            _ => Err(http_error("POST", &path, &r)),
        }
    }

    /// `DELETE /v1/leases/{id}`.
    pub fn free(&self, lease_id: u64) -> Result<(), ClientError> {
        self.no_content("DELETE", &format!("/v1/leases/{lease_id}"))
    }

    /// `GET /v1/leases/{id}`.
    pub fn get_lease(&self, lease_id: u64) -> Result<Lease, ClientError> {
        self.call("GET", &format!("/v1/leases/{lease_id}"), None, &[200])
    }

    /// `GET /v1/leases[?client=]`.
    pub fn leases(&self, client: Option<&str>) -> Result<Vec<Lease>, ClientError> {
        let path = match client {
            Some(c) => format!("/v1/leases?client={}", encode_query(c)),
            None => "/v1/leases".to_owned(),
        };
        self.call::<LeasesResponse>("GET", &path, None, &[200])
            .map(|r| r.leases)
    }

    /// `POST /v1/tables`.
    pub fn create_table(&self, req: &CreateTableRequest) -> Result<TableDescription, ClientError> {
        self.call("POST", "/v1/tables", Some(&json(req)?), &[201])
    }

    /// `GET /v1/tables/{name}`.
    pub fn table(&self, name: &str) -> Result<TableDescription, ClientError> {
        self.call("GET", &format!("/v1/tables/{name}"), None, &[200])
    }

    /// `PUT /v1/tables/{name}/feed`: sets (or with `None` removes) a Clover table's
    /// change feed.
    pub fn set_table_feed(
        &self,
        name: &str,
        feed: Option<&crate::feed_layout::FeedLayout>,
    ) -> Result<TableDescription, ClientError> {
        let body = json(&crate::metadata::SetFeedRequest {
            feed: feed.cloned(),
        })?;
        self.call(
            "PUT",
            &format!("/v1/tables/{name}/feed"),
            Some(&body),
            &[200],
        )
    }

    /// `GET /v1/tables`.
    pub fn tables(&self) -> Result<Vec<TableDescription>, ClientError> {
        self.call::<TablesResponse>("GET", "/v1/tables", None, &[200])
            .map(|r| r.tables)
    }

    /// `POST /v1/credentials` (admin): issues a credential; its secret is in the
    /// answer, and only there.
    pub fn create_credential(
        &self,
        req: &CreateCredentialRequest,
    ) -> Result<CreatedCredential, ClientError> {
        self.call("POST", "/v1/credentials", Some(&json(req)?), &[201])
    }

    /// `GET /v1/credentials` (admin): every credential, without secrets.
    pub fn credentials(&self) -> Result<Vec<CredentialInfo>, ClientError> {
        self.call::<CredentialsResponse>("GET", "/v1/credentials", None, &[200])
            .map(|r| r.credentials)
    }

    /// `DELETE /v1/credentials/{id}` (admin): revokes a credential at once.
    pub fn revoke_credential(&self, id: u64) -> Result<(), ClientError> {
        self.no_content("DELETE", &format!("/v1/credentials/{id}"))
    }

    /// `DELETE /v1/tables/{name}`.
    pub fn drop_table(&self, name: &str) -> Result<(), ClientError> {
        self.no_content("DELETE", &format!("/v1/tables/{name}"))
    }

    /// `POST /v1/tables/{name}/reset`: acknowledges a lost table's loss; the table
    /// is empty and healthy again.
    pub fn reset_table(&self, name: &str) -> Result<TableDescription, ClientError> {
        self.call("POST", &format!("/v1/tables/{name}/reset"), None, &[200])
    }

    /// `POST /v1/tables/{name}/moves`: move member `req.from` of replica set `req.set`
    /// to another memnode (rebalancing); the table as the move starts.
    pub fn move_copy(
        &self,
        name: &str,
        req: &crate::rereplication::MoveCopyRequest,
    ) -> Result<TableDescription, ClientError> {
        self.call(
            "POST",
            &format!("/v1/tables/{name}/moves"),
            Some(&json(req)?),
            &[202],
        )
    }

    /// `POST /v1/tables/{name}/chains`: the chain id of `key` (created if new).
    pub fn open_chain(&self, table: &str, key: &[u8]) -> Result<ChainResponse, ClientError> {
        let req = ChainRequest {
            key: base64::engine::general_purpose::STANDARD.encode(key),
        };
        self.call(
            "POST",
            &format!("/v1/tables/{table}/chains"),
            Some(&json(&req)?),
            &[200, 201],
        )
    }

    /// `PUT /v1/tables/{name}/chains/{id}/tail`.
    pub fn put_tail(
        &self,
        table: &str,
        chain_id: u64,
        hint: &TailHint,
    ) -> Result<TailResponse, ClientError> {
        self.call(
            "PUT",
            &format!("/v1/tables/{table}/chains/{chain_id}/tail"),
            Some(&json(hint)?),
            &[200],
        )
    }

    /// `GET /v1/tables/{name}/chains?key=`: the chain of `key` and its stored tail
    /// hint, or `None` when the key has no chain (nothing is created).
    pub fn lookup_chain(&self, table: &str, key: &[u8]) -> Result<Option<ChainInfo>, ClientError> {
        let key = base64::engine::general_purpose::STANDARD.encode(key);
        let path = format!("/v1/tables/{table}/chains?key={}", encode_query(&key));
        match self.call("GET", &path, None, &[200]) {
            Ok(info) => Ok(Some(info)),
            Err(e) if e.code() == Some("chain_not_found") => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// `GET /v1/tables/{name}/keys`: one page of a Clover table's keys that have a
    /// chain (ever written), those starting with `prefix`, after the key `after`,
    /// at most `limit` (the service caps it at
    /// [`MAX_KEYS_PAGE`](crate::metadata::MAX_KEYS_PAGE)).
    pub fn chain_keys(
        &self,
        table: &str,
        prefix: &[u8],
        after: Option<&[u8]>,
        limit: usize,
    ) -> Result<ChainKeysPage, ClientError> {
        let b64 = |b: &[u8]| encode_query(&base64::engine::general_purpose::STANDARD.encode(b));
        let mut path = format!("/v1/tables/{table}/keys?limit={limit}");
        if !prefix.is_empty() {
            path.push_str(&format!("&prefix={}", b64(prefix)));
        }
        if let Some(after) = after {
            path.push_str(&format!("&after={}", b64(after)));
        }
        self.call("GET", &path, None, &[200])
    }

    /// `POST /v1/tables/{name}/chains/{id}/root`: store `hint` as the chain's tail
    /// hint unless one is stored; the answer carries the hint that is stored.
    ///
    /// Safe to retry: a retry of a call whose answer was lost finds its own hint
    /// stored (with `created` false), so compare the answer's hint with `hint`.
    pub fn publish_root(
        &self,
        table: &str,
        chain_id: u64,
        hint: &TailHint,
    ) -> Result<RootResponse, ClientError> {
        self.call(
            "POST",
            &format!("/v1/tables/{table}/chains/{chain_id}/root"),
            Some(&json(hint)?),
            &[200, 201],
        )
    }

    /// `POST /v1/tables/{name}/chains/ids`: lease `count` fresh chain ids.
    pub fn lease_chain_ids(&self, table: &str, count: u64) -> Result<ChainIdBlock, ClientError> {
        self.call(
            "POST",
            &format!("/v1/tables/{table}/chains/ids"),
            Some(&json(&ChainIdsRequest { count })?),
            &[201],
        )
    }

    /// `POST /v1/tables/{name}/chains/directory`: the table's chain directory,
    /// created (zeroed) by the first call. 409 `chain_directory_unavailable` when
    /// the table has none and cannot have one (replicated, it has chains from
    /// before, or `create` is false).
    pub fn chain_directory(
        &self,
        table: &str,
        create: bool,
    ) -> Result<ChainDirectoryResponse, ClientError> {
        self.call(
            "POST",
            &format!("/v1/tables/{table}/chains/directory"),
            Some(&json(&ChainDirectoryRequest { create })?),
            &[200, 201],
        )
    }

    /// `POST /v1/tables/{name}/chains/published`: record mappings claimed in the
    /// chain directory (safe to repeat: a recorded mapping is left as it is).
    pub fn publish_chains(
        &self,
        table: &str,
        req: &PublishChainsRequest,
    ) -> Result<PublishChainsResponse, ClientError> {
        self.call(
            "POST",
            &format!("/v1/tables/{table}/chains/published"),
            Some(&json(req)?),
            &[200],
        )
    }

    /// `GET /v1/tables/{name}/chains/{id}/tail`.
    pub fn tail(&self, table: &str, chain_id: u64) -> Result<TailResponse, ClientError> {
        self.call(
            "GET",
            &format!("/v1/tables/{table}/chains/{chain_id}/tail"),
            None,
            &[200],
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls() {
        assert!(MetadataClient::new("http://127.0.0.1:9700/").is_ok());
        assert!(MetadataClient::new("localhost:1").is_ok());
        assert!(MetadataClient::new("https://x:1").is_ok());
        assert!(MetadataClient::new("ftp://x:1").is_err());
        assert!(MetadataClient::new("x").is_err());
    }

    #[test]
    fn only_harmless_requests_are_sent_twice() {
        assert!(idempotent("GET", "/v1/tables?x=1"));
        assert!(idempotent("POST", "/v1/tables/t/chains"));
        assert!(idempotent("POST", "/v1/memnodes/1/heartbeat"));
        assert!(!idempotent("POST", "/v1/leases"));
        assert!(!idempotent("DELETE", "/v1/tables/t"));
    }
}
