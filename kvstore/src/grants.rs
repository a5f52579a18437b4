//! The grants a session presents to memory nodes.
//!
//! When the metadata service issues grants (it has a grant key), a session asks it for
//! one grant per table on each memory node it connects to, creates the queue pair with
//! the first (the memory node gives the queue pair its own memory key, valid only for
//! the granted extents) and hands the node the others. Grants expire, so the session
//! fetches fresh ones for every table before half their lifetime has passed and after
//! it leased new memory (the table grew), and gives them to its queue pairs; a table
//! created since is picked up then too. Without grants (`grants_disabled`), queue pairs
//! are created as before, with whole-region access. Through the switch accelerator the
//! grants go to the switch instead, which confines the connection to them in its
//! pipeline.

use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use dmkv_api::ClientError;
use dmkv_api::grant::{GrantRequest, GrantResponse};

use crate::client::ClientInner;
use crate::error::KvError;

/// The grants a queue pair was created with or last given.
#[derive(Debug, Clone)]
pub(crate) struct QpGrants {
    /// The grant presented as the credential for the queue pair's admin calls.
    pub credential: String,
    /// When to fetch fresh ones.
    pub refresh_at: Instant,
    /// The tables they cover.
    pub tables: Vec<String>,
}

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
        .unwrap_or(0)
}

/// When grants expiring at `expires_at_ms` (the earliest) should be refreshed: half
/// way to their expiry.
fn refresh_at(grants: &[GrantResponse]) -> Instant {
    let now = now_ms();
    let earliest = grants.iter().map(|g| g.expires_at_ms).min().unwrap_or(now);
    Instant::now() + Duration::from_millis(earliest.saturating_sub(now) / 2)
}

/// Whether the metadata service said it issues no grants.
fn disabled(e: &ClientError) -> bool {
    e.code() == Some("grants_disabled")
}

/// Asks the metadata service for this client's grant for `table` on `memnode_id`, with
/// the most rights its credential allows.
fn ask(client: &ClientInner, table: &str, memnode_id: u64) -> Result<GrantResponse, ClientError> {
    let req = GrantRequest {
        memnode_id,
        client: Some(client.lease_name.clone()),
        access: None,
    };
    client.meta.grant(table, &req)
}

/// Grants over every table on memory node `memnode_id`, for this client; `None` when
/// the metadata service issues none (memory nodes then run without them). Tables
/// dropped while this runs are skipped.
pub(crate) fn fetch(
    client: &ClientInner,
    memnode_id: u64,
) -> Result<Option<Vec<GrantResponse>>, KvError> {
    let tables = client.meta.tables().map_err(crate::client::meta_error)?;
    let mut out = Vec::with_capacity(tables.len());
    for t in &tables {
        match ask(client, &t.name, memnode_id) {
            Ok(g) => out.push(g),
            Err(e) if disabled(&e) => return Ok(None),
            Err(e) if e.status() == Some(404) => continue,
            Err(e) => return Err(crate::client::meta_error(e)),
        }
    }
    Ok(Some(out))
}

/// This client's grant for table `table` on memory node `memnode_id`; `None` when the
/// metadata service issues none.
pub(crate) fn fetch_table(
    client: &ClientInner,
    table: &str,
    memnode_id: u64,
) -> Result<Option<String>, KvError> {
    match ask(client, table, memnode_id) {
        Ok(g) => Ok(Some(g.grant)),
        Err(e) if disabled(&e) => Ok(None),
        Err(e) => Err(crate::client::meta_error(e)),
    }
}

/// What a queue pair created with `grants` keeps of them.
pub(crate) fn held(grants: &[GrantResponse]) -> Option<QpGrants> {
    let first = grants.first()?;
    Some(QpGrants {
        credential: first.grant.clone(),
        refresh_at: refresh_at(grants),
        tables: grants.iter().map(|g| g.table.clone()).collect(),
    })
}

/// Who holds a queue pair's grants and enforces them.
#[derive(Debug, Clone, Copy)]
pub(crate) enum GrantTarget<'a> {
    /// The memory node's responder `qpn` (a direct queue pair).
    Memnode {
        /// The node's admin URL.
        admin_url: &'a str,
        /// The responder.
        qpn: u32,
    },
    /// The switch's connection `conn` (a queue pair through the accelerator).
    Switch {
        /// The switch's admin URL.
        admin_url: &'a str,
        /// The connection id.
        conn: u8,
    },
}

/// Gives the queue pair at `target` fresh grants for every table (the first of
/// `grants` it already holds when `skip_first`).
pub(crate) fn install(
    target: GrantTarget<'_>,
    grants: &[GrantResponse],
    skip_first: bool,
) -> Result<(), KvError> {
    let Some(credential) = grants.first().map(|g| g.grant.as_str()) else {
        return Ok(());
    };
    for g in grants.iter().skip(usize::from(skip_first)) {
        let (what, result) = match target {
            GrantTarget::Memnode { admin_url, qpn } => (
                format!("queue pair {qpn}"),
                dmkv_api::memnode_admin::update_grant_as(
                    admin_url,
                    Some(credential),
                    qpn,
                    &g.grant,
                )
                .map(|_| ()),
            ),
            GrantTarget::Switch { admin_url, conn } => (
                format!("switch connection {conn}"),
                dmkv_api::switch::update_grant_as(admin_url, Some(credential), conn, &g.grant),
            ),
        };
        result.map_err(|e| {
            KvError::unavailable_because(
                format!("giving {what} its grant for table {}: {e}", g.table),
                e,
            )
        })?;
    }
    Ok(())
}

/// Fetches fresh grants for memory node `memnode_id` and gives them to its queue pair
/// at `target`; the new state to keep.
pub(crate) fn refresh(
    client: &ClientInner,
    memnode_id: u64,
    target: GrantTarget<'_>,
) -> Result<Option<QpGrants>, KvError> {
    let Some(grants) = fetch(client, memnode_id)? else {
        return Ok(None);
    };
    install(target, &grants, false)?;
    Ok(held(&grants))
}

#[cfg(test)]
mod tests {
    use super::*;
    use dmkv_api::grant::GrantAccess;

    fn response(expires_at_ms: u64) -> GrantResponse {
        GrantResponse {
            grant: format!("g{expires_at_ms}"),
            memnode_id: 1,
            table: "t".into(),
            windows: Vec::new(),
            access: GrantAccess::ReadWrite,
            expires_at_ms,
        }
    }

    #[test]
    fn refreshed_half_way_to_the_earliest_expiry() {
        let now = now_ms();
        let before = Instant::now();
        let h = held(&[response(now + 60_000), response(now + 20_000)]).unwrap();
        assert_eq!(h.credential, format!("g{}", now + 60_000));
        let wait = h.refresh_at.duration_since(before);
        assert!(
            wait >= Duration::from_millis(9_000) && wait <= Duration::from_millis(10_100),
            "{wait:?}"
        );
        assert!(held(&[]).is_none());
    }
}
