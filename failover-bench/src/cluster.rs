//! The embedded clusters the measurements run on (a metadata service and memory nodes
//! in this process, reached over soft RoCE on loopback) and the client options that
//! notice a crashed memory node quickly.

use std::collections::HashMap;
use std::time::Duration;

use kvstore::{Client, ClientOptions, ReconnectOptions, TransportKind};
use testbed::{Embedded, EmbeddedOptions};

/// How quickly a client gives up on a silent memory node: a work request is
/// retransmitted `retries` times, after `timeout`, 2 × `timeout`, 4 × `timeout`, …
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CrashDetection {
    /// The first retransmission timeout.
    pub timeout: Duration,
    /// Retransmissions before the queue pair fails.
    pub retries: u32,
}

impl CrashDetection {
    /// How long a queue pair waits on a silent responder before it fails:
    /// `timeout × (1 + 2 + … + 2^retries)`.
    pub fn bound(&self) -> Duration {
        let factor = (1u32 << self.retries.min(20)) * 2 - 1;
        self.timeout.saturating_mul(factor)
    }
}

impl Default for CrashDetection {
    fn default() -> Self {
        CrashDetection {
            timeout: Duration::from_millis(5),
            retries: 4,
        }
    }
}

/// Client options for soft RoCE with `detection`'s retransmission timeouts, reconnects
/// tried every 100 ms for 8 s, and a short grace period for memory handed back.
pub fn client_options(detection: CrashDetection) -> ClientOptions {
    ClientOptions::with_transport(TransportKind::Udp)
        .with_name("failover-bench")
        .with_rc(verbs::rc::RcConfig {
            retransmit_timeout: detection.timeout,
            max_retries: detection.retries,
            ..verbs::rc::RcConfig::default()
        })
        .with_reconnect(
            ReconnectOptions::default()
                .with_timeout(Duration::from_secs(8))
                .with_interval(Duration::from_millis(100)),
        )
        .with_grace(Duration::from_millis(20))
}

/// An embedded cluster of `memnodes` memory nodes of `capacity` bytes over udp whose
/// metadata service fails a memory node over after `heartbeat_timeout` without a
/// heartbeat, and a client of it with `detection`.
pub fn start(
    memnodes: usize,
    capacity: u64,
    heartbeat_timeout: Duration,
    detection: CrashDetection,
) -> Result<(Embedded, Client), String> {
    let embedded = Embedded::start_with_heartbeat_timeout(
        &EmbeddedOptions {
            memnodes,
            capacity,
            transport: TransportKind::Udp,
            ..EmbeddedOptions::default()
        },
        heartbeat_timeout,
    )
    .map_err(|e| format!("starting the embedded cluster: {e}"))?;
    let client = Client::in_process(
        &embedded.metadata_url(),
        client_options(detection),
        HashMap::new(),
        Box::new(()),
    )
    .map_err(|e| format!("connecting to the embedded cluster: {e}"))?;
    Ok((embedded, client))
}

/// The memory node each of `keys` of Clover table `table` is homed on (where its root
/// and the primary copy of its nodes live), as the metadata service records it; keys
/// without a chain are left out.
pub fn homes(
    client: &Client,
    table: &str,
    keys: &[Vec<u8>],
) -> Result<HashMap<Vec<u8>, u64>, String> {
    let mut out = HashMap::new();
    for key in keys {
        let info = client
            .metadata()
            .lookup_chain(table, key)
            .map_err(|e| format!("looking up the chain of a key of {table}: {e}"))?;
        if let Some(tail) = info.and_then(|i| i.tail) {
            out.insert(key.clone(), tail.memnode_id);
        }
    }
    Ok(out)
}

/// `len` bytes naming `key`, the writer and its sequence number, padded with dots:
/// every value a run writes is distinct.
pub fn value_for(key: &[u8], writer: usize, seq: u64, len: usize) -> Vec<u8> {
    let mut v = format!("{}:{writer}:{seq}:", String::from_utf8_lossy(key)).into_bytes();
    if v.len() < len {
        v.resize(len, b'.');
    }
    v
}

/// The name of key `i`.
pub fn key_name(i: usize) -> Vec<u8> {
    format!("key{i:06}").into_bytes()
}

/// Counter `name` (an unlabelled family of whole numbers) of the metadata
/// service's `/metrics`.
pub fn counter(meta: &dmkv_api::MetadataClient, name: &str) -> Result<u64, String> {
    Ok(metric(meta, name)? as u64)
}

/// The value of unlabelled family `name` of the metadata service's `/metrics`.
pub fn metric(meta: &dmkv_api::MetadataClient, name: &str) -> Result<f64, String> {
    let r = meta
        .request("GET", "/metrics", None)
        .map_err(|e| format!("reading the metrics: {e}"))?;
    String::from_utf8_lossy(&r.body)
        .lines()
        .find_map(|l| l.strip_prefix(name)?.strip_prefix(' '))
        .and_then(|v| v.trim().parse().ok())
        .ok_or_else(|| format!("the metadata service exports no counter {name}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn detection_bound_sums_the_doubling_timeouts() {
        let d = CrashDetection::default();
        assert_eq!(d.bound(), Duration::from_millis(5 * 31));
        let none = CrashDetection {
            timeout: Duration::from_millis(10),
            retries: 0,
        };
        assert_eq!(none.bound(), Duration::from_millis(10));
    }

    #[test]
    fn values_are_distinct_and_padded() {
        let a = value_for(b"k1", 0, 1, 32);
        let b = value_for(b"k1", 0, 2, 32);
        assert_eq!(a.len(), 32);
        assert_ne!(a, b);
        assert!(a.starts_with(b"k1:0:1:"));
        assert_eq!(
            value_for(b"a-long-key", 3, 12345, 4),
            b"a-long-key:3:12345:"
        );
        assert_eq!(key_name(7), b"key000007");
    }
}
