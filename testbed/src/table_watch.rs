//! Waiting for a table's description to reach a state (a replica set whole again, a
//! member gone), for tests and tools that crash, drain or move memory nodes.

use std::time::{Duration, Instant};

use kvstore::Client;
use kvstore::TableDescription;

/// Whether every replica set of `t` has all its copies, none is syncing, and the table
/// is healthy.
pub fn is_whole(t: &TableDescription) -> bool {
    t.syncing.iter().all(Vec::is_empty)
        && t.replica_sets
            .iter()
            .all(|s| s.len() == t.replication as usize)
        && t.health.state == dmkv_api::metadata::TableState::Healthy
}

/// Asks the metadata service for table `name` every 50 ms until `done` holds for its
/// description, and returns it; `Err` with the last description seen after `limit`
/// (`what` names the awaited state in the message).
pub fn wait_for_table(
    client: &Client,
    name: &str,
    limit: Duration,
    what: &str,
    done: impl Fn(&TableDescription) -> bool,
) -> Result<TableDescription, String> {
    let start = Instant::now();
    loop {
        let t = client
            .metadata()
            .table(name)
            .map_err(|e| format!("table {name}: {e}"))?;
        if done(&t) {
            return Ok(t);
        }
        if start.elapsed() >= limit {
            return Err(format!("{what}: not within {limit:?}: {t:?}"));
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}
