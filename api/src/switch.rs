//! The switch accelerator's documents that clients send (`POST /v1/qps`, `POST
//! /v1/routes/{conn}/grant`, `DELETE /v1/routes/{conn}`, `PUT /v1/latch/regions` on
//! its admin API) and the calls that use them.
//!
//! A client creates a memory node's queue pair *through* the switch: the switch
//! creates the node's responder with its own memnode-side address as the requester,
//! installs the connection's routes, and answers with the address clients send to.

use std::net::SocketAddrV4;

use serde::{Deserialize, Serialize};

use crate::error::ClientError;
use crate::http::{HttpClient, json};
use crate::memnode::CreateQpResponse;

fn default_pmtu() -> u32 {
    1024
}

/// `POST /v1/qps` on the switch: a client's QP request and the memnode it is for.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct SwitchQpRequest {
    /// The memnode's admin URL (`host:port` or `http://host:port`).
    pub memnode: String,
    /// The client's queue pair number (24-bit, non-zero).
    #[cfg_attr(feature = "openapi", schema(minimum = 1, maximum = 16777215))]
    pub qpn: u32,
    /// The client's first PSN (24-bit).
    #[cfg_attr(feature = "openapi", schema(maximum = 16777215))]
    pub psn: u32,
    /// The client's UDP address.
    #[cfg_attr(feature = "openapi", schema(value_type = crate::schemas::SocketAddrV4String))]
    pub addr: SocketAddrV4,
    /// Path MTU: 256, 512, 1024, 2048 or 4096 (default 1024).
    #[serde(default = "default_pmtu")]
    #[cfg_attr(feature = "openapi", schema(schema_with = crate::schemas::pmtu_schema))]
    pub pmtu: u32,
    /// The client's socket receives coalesced buffers (UDP GRO; on loopback only): the
    /// switch may send it runs of responses as one segmented send. Default `false`.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub coalesce: bool,
}

/// The switch's answer to `POST /v1/qps` (201): the memory node's answer with the
/// switch's client-side address, plus the connection id when the switch reports it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct SwitchQpResponse {
    /// The memory node's responder, as the client addresses it.
    #[serde(flatten)]
    pub qp: CreateQpResponse,
    /// The switch's connection id (to remove its routes when the client is done).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub conn: Option<u8>,
}

/// `PUT /v1/latch/regions` on the switch: the tuples of region `rkey` whose latches the
/// switch answers (switch-assisted optimistic latching). Tuple `i` starts at
/// `base_va + (i << stride_log2)`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct LatchRegionRequest {
    /// Remote key of the region.
    pub rkey: u32,
    /// Address of tuple 0.
    pub base_va: u64,
    /// log2 of the tuple stride in bytes, 3 to 30 (tuples of 8 B to 1 GiB).
    #[cfg_attr(feature = "openapi", schema(minimum = 3, maximum = 30))]
    pub stride_log2: u8,
    /// Number of tuples.
    pub tuples: u32,
    /// Index of tuple 0 in the switch's tuple registers.
    #[serde(default)]
    pub first_tuple: u32,
}

fn client_as(switch_admin: &str, credential: Option<&str>) -> Result<HttpClient, ClientError> {
    Ok(HttpClient::new(switch_admin)?.with_token(credential.map(str::to_owned)))
}

/// `POST /v1/qps` on the switch, presenting `credential`: the switch's admin token (a
/// connection with the switch's whole-region access) or a grant for the memory node
/// (a connection the switch confines to the grant's windows and rights).
pub fn create_qp_as(
    switch_admin: &str,
    credential: Option<&str>,
    req: &SwitchQpRequest,
) -> Result<SwitchQpResponse, ClientError> {
    client_as(switch_admin, credential)?.call("POST", "/v1/qps", Some(&json(req)?), &[201])
}

/// The body of `POST /v1/routes/{conn}/grant` on the switch: a newer grant (another
/// table's, or a fresh one of a table the connection holds) for the same client.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct SwitchGrantRequest {
    /// The signed grant (base64), as the metadata service issued it.
    pub grant: String,
}

/// `POST /v1/routes/{conn}/grant` on the switch, presenting `credential` (a grant the
/// connection was created with or was given since, or the admin token).
pub fn update_grant_as(
    switch_admin: &str,
    credential: Option<&str>,
    conn: u8,
    grant: &str,
) -> Result<(), ClientError> {
    let c = client_as(switch_admin, credential)?;
    let path = format!("/v1/routes/{conn}/grant");
    let body = json(&SwitchGrantRequest {
        grant: grant.to_owned(),
    })?;
    let r = c.request("POST", &path, Some(&body))?;
    if r.status == 200 {
        Ok(())
    } else {
        Err(crate::http::http_error("POST", &path, &r))
    }
}

/// `PUT /v1/latch/regions` on the switch, presenting `credential` (the admin token, or
/// a read-write grant whose windows cover the region's tuples).
pub fn put_latch_region_as(
    switch_admin: &str,
    credential: Option<&str>,
    req: &LatchRegionRequest,
) -> Result<(), ClientError> {
    let c = client_as(switch_admin, credential)?;
    let path = "/v1/latch/regions";
    let r = c.request("PUT", path, Some(&json(req)?))?;
    if r.status == 200 {
        Ok(())
    } else {
        Err(crate::http::http_error("PUT", path, &r))
    }
}

/// `DELETE /v1/routes/{conn}` on the switch: remove a connection's routes, presenting
/// `credential` (the admin token, or a grant of the client the connection belongs to).
pub fn remove_route_as(
    switch_admin: &str,
    credential: Option<&str>,
    conn: u8,
) -> Result<(), ClientError> {
    let c = client_as(switch_admin, credential)?;
    let path = format!("/v1/routes/{conn}");
    let r = c.request("DELETE", &path, None)?;
    if (200..300).contains(&r.status) {
        Ok(())
    } else {
        Err(crate::http::http_error("DELETE", &path, &r))
    }
}

/// `POST /v1/mirrors` on the switch (administrator): replicate WRITEs to a replica set
/// (switch replication of writes). The memory nodes by admin URL, primary first.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct MirrorRequest {
    /// The primary's admin URL.
    pub primary: String,
    /// The backups' admin URLs (one or two, distinct, not the primary).
    pub backups: Vec<String>,
    /// Also balance READs of the set's immutable data across its members: the switch
    /// creates a read lane on every backup and answers a read alias key.
    #[serde(default)]
    pub balance_reads: bool,
    /// Backups (admin URLs) that serve no balanced READ, e.g. while they are synced.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub non_serving: Vec<String>,
}

/// A member of a replica set the switch replicates to.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct MirrorMember {
    /// The memory node's admin URL.
    pub memnode: String,
    /// Its soft-RoCE address (how clients recognise it).
    #[cfg_attr(feature = "openapi", schema(value_type = crate::schemas::SocketAddrV4String))]
    pub addr: SocketAddrV4,
    /// The id the metadata service gave it, if registered.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memnode_id: Option<u64>,
    /// Its region's key and base address (copies are at the same offset from it).
    pub rkey: u32,
    /// Base VA of its region.
    pub base_va: u64,
}

/// A replica set the switch replicates WRITEs to (`GET /v1/mirrors`, and the answer to
/// `POST /v1/mirrors`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct MirrorSet {
    /// The set's index in the switch.
    pub set: u8,
    /// The key a client puts in a WRITE to the primary to have it replicated (instead of
    /// the primary's region key).
    pub alias_rkey: u32,
    /// The primary.
    pub primary: MirrorMember,
    /// The backups, in order.
    pub backups: Vec<MirrorMember>,
    /// The key a client puts in a single-packet READ to the primary to have the switch
    /// serve it from any serving member (READs are balanced only if present).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub read_alias_rkey: Option<u32>,
    /// Backups (admin URLs) that serve no balanced READ.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub non_serving: Vec<String>,
}

/// `GET /v1/mirrors`: every replica set.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct MirrorsResponse {
    /// The sets.
    pub mirrors: Vec<MirrorSet>,
}

/// `GET /v1/mirrors` on the switch, presenting `credential` (the admin token or a grant).
pub fn mirrors_as(
    switch_admin: &str,
    credential: Option<&str>,
) -> Result<Vec<MirrorSet>, ClientError> {
    client_as(switch_admin, credential)?
        .call::<MirrorsResponse>("GET", "/v1/mirrors", None, &[200])
        .map(|r| r.mirrors)
}

/// `POST /v1/mirrors` on the switch, presenting `credential` (the admin token): the
/// set (an existing one when the same members were installed before).
pub fn add_mirror_as(
    switch_admin: &str,
    credential: Option<&str>,
    req: &MirrorRequest,
) -> Result<MirrorSet, ClientError> {
    client_as(switch_admin, credential)?.call("POST", "/v1/mirrors", Some(&json(req)?), &[200, 201])
}
