//! The metadata service's cluster view (`GET /v1/cluster/stats`, behind the
//! dashboard): the catalog's view of every memnode with the counters scraped from its
//! admin `/metrics`, and the accelerator's.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// `GET /v1/cluster/stats`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct ClusterStats {
    /// When the scrape ended (Unix ms).
    pub at_ms: u64,
    /// Time since the previous scrape the rates are computed over (0 on the first).
    pub interval_ms: u64,
    /// The metadata service itself.
    pub metadata: MetadataStats,
    /// Sums over the memnodes.
    pub totals: Totals,
    /// Every registered memnode, by id.
    pub memnodes: Vec<MemnodeStats>,
    /// The accelerator (soft switch), when configured.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub accelerator: Option<AcceleratorStats>,
}

/// The metadata service's own request counters.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct MetadataStats {
    /// Requests answered since start.
    pub requests_total: u64,
    /// Requests answered with a 5xx status since start.
    pub server_errors_total: u64,
    /// Requests per second over the interval.
    pub requests_per_s: f64,
    /// Mean request latency over the interval (ms), if any request was answered.
    pub latency_mean_ms: Option<f64>,
    /// 99th percentile request latency over the interval (ms, bucket upper bound).
    pub latency_p99_ms: Option<f64>,
    /// Active leases.
    pub leases_active: u64,
    /// Tables.
    pub tables: u64,
    /// Seconds since start.
    pub uptime_seconds: u64,
}

/// Sums over every memnode that answered.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Totals {
    /// Registered memnodes.
    pub memnodes: u64,
    /// Healthy memnodes (recent heartbeat).
    pub healthy: u64,
    /// Registered bytes.
    pub capacity_bytes: u64,
    /// Leased bytes.
    pub leased_bytes: u64,
    /// Free bytes.
    pub free_bytes: u64,
    /// Datagrams received per second.
    pub datagrams_in_per_s: f64,
    /// Messages executed per second (every verb).
    pub messages_per_s: f64,
    /// NAKs per second (every reason).
    pub naks_per_s: f64,
    /// Datagrams dropped per second (every reason).
    pub dropped_per_s: f64,
    /// Bytes received per second (datagram payloads).
    #[serde(default)]
    pub bytes_in_per_s: f64,
    /// Bytes sent per second (datagram payloads).
    #[serde(default)]
    pub bytes_out_per_s: f64,
}

/// One memnode: the catalog's view and its scraped counters.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct MemnodeStats {
    /// Id.
    pub id: u64,
    /// Name.
    pub name: String,
    /// Admin URL (scraped at `/metrics`).
    pub admin_url: String,
    /// Soft-RoCE data address.
    pub data_addr: String,
    /// Recent heartbeat.
    pub healthy: bool,
    /// Milliseconds since the last heartbeat.
    pub last_heartbeat_age_ms: u64,
    /// Registered bytes.
    pub capacity_bytes: u64,
    /// Leased bytes.
    pub leased_bytes: u64,
    /// Free bytes.
    pub free_bytes: u64,
    /// Whether the scrape succeeded.
    pub up: bool,
    /// Why it did not.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// Queue pairs served.
    pub qps: u64,
    /// Datagrams received since start.
    pub datagrams_in_total: u64,
    /// Datagrams sent since start.
    pub datagrams_out_total: u64,
    /// Datagrams received per second.
    pub datagrams_in_per_s: f64,
    /// Datagrams sent per second.
    pub datagrams_out_per_s: f64,
    /// Messages executed since start, by verb.
    pub messages_total: BTreeMap<String, u64>,
    /// Messages per second, by verb.
    pub messages_per_s: BTreeMap<String, f64>,
    /// NAKs since start, by reason.
    pub naks_total: BTreeMap<String, u64>,
    /// NAKs per second (every reason).
    pub naks_per_s: f64,
    /// Drops since start, by reason.
    pub dropped_total: BTreeMap<String, u64>,
    /// Drops per second (every reason).
    pub dropped_per_s: f64,
    /// Duplicate (retransmitted) request packets since start.
    pub retransmissions_total: u64,
    /// Duplicate request packets per second.
    pub retransmissions_per_s: f64,
    /// Mean time to process a receive batch over the interval, in microseconds
    /// (`dmkv_memnode_batch_duration_seconds`); absent without batches.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub batch_latency_mean_us: Option<f64>,
    /// 99th percentile of the same (the upper bound of its histogram bucket).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub batch_latency_p99_us: Option<f64>,
    /// Bytes received per second (`dmkv_memnode_received_bytes_total`).
    #[serde(default)]
    pub bytes_in_per_s: f64,
    /// Bytes sent per second (`dmkv_memnode_sent_bytes_total`).
    #[serde(default)]
    pub bytes_out_per_s: f64,
}

/// The accelerator's counters.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct AcceleratorStats {
    /// Admin URL (scraped at `/metrics`).
    pub url: String,
    /// Whether the scrape succeeded.
    pub up: bool,
    /// Why it did not.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// Installed connections.
    pub routes: u64,
    /// Datagrams received since start.
    pub datagrams_in_total: u64,
    /// Datagrams received per second.
    pub datagrams_in_per_s: f64,
    /// Datagrams sent per second.
    pub datagrams_out_per_s: f64,
    /// Route lookups that found a connection (forwarded packets) since start.
    pub steering_hits_total: u64,
    /// Route lookups that found none (dropped packets) since start.
    pub steering_misses_total: u64,
    /// Every pipeline counter (`function.counter`) since start.
    pub counters: BTreeMap<String, u64>,
    /// Every pipeline counter per second.
    pub counters_per_s: BTreeMap<String, f64>,
    /// The functions the switch reports as enabled in its mode register (forwarding,
    /// which always runs, is not listed); empty when it could not be scraped.
    #[serde(default)]
    pub enabled_functions: Vec<String>,
}
