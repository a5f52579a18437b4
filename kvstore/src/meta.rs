//! Calls to the metadata service from inside table operations, riding out a
//! restart of the service.
//!
//! The data path needs no metadata: a session with cached chains (Clover) or a
//! cached directory (RACE) and room in its leased chunks reads and writes with
//! verbs only. Operations that do need the service — the first touch of a Clover
//! key, leasing a new chunk — retry while it cannot be reached, for up to
//! [`METADATA_RETRY`]: chain calls pause with the session's timer (its other
//! tasks keep running), allocations block the session's thread between attempts
//! (the allocator is synchronous). Only failures to reach the service are
//! retried; an answer with an error status is returned at once.

use std::time::{Duration, Instant};

use dmkv_api::{ClientError, MetadataClient};

use crate::alloc::{Allocation, TableRef};
use crate::error::KvError;
use crate::session::SessionCore;
use crate::stats::OpStats;

/// How long an operation that needs the metadata service waits for it to answer
/// again (while it restarts, say) before failing with `Unavailable`.
pub(crate) const METADATA_RETRY: Duration = Duration::from_secs(20);

/// First pause between attempts.
const FIRST_PAUSE: Duration = Duration::from_millis(5);
/// Longest pause between attempts.
const MAX_PAUSE: Duration = Duration::from_millis(200);

/// Whether `e` means the service could not be reached (rather than that it answered).
fn unreachable(e: &ClientError) -> bool {
    matches!(e, ClientError::Io { .. })
}

/// Run an idempotent metadata call, retrying while the service cannot be reached
/// (bounded by [`METADATA_RETRY`]). Every attempt counts as a metadata call.
///
/// Each attempt runs on its own thread ([`crate::offload`]), so the session's
/// other operations go on while this one waits for the service.
pub(crate) async fn call<T, F>(
    core: &SessionCore,
    stats: &mut OpStats,
    f: F,
) -> Result<T, ClientError>
where
    T: Send + 'static,
    F: Fn(&MetadataClient) -> Result<T, ClientError> + Clone + Send + 'static,
{
    let started = Instant::now();
    let mut pause = FIRST_PAUSE;
    loop {
        stats.metadata_calls += 1;
        let meta = core.client.meta.clone();
        let attempt = f.clone();
        match crate::offload::off_thread("dmkv-metadata-call", move || attempt(&meta)).await {
            Err(e) if unreachable(&e) && started.elapsed() + pause < METADATA_RETRY => {
                core.worker.sleep(pause).await;
                pause = (pause * 2).min(MAX_PAUSE);
            }
            r => return r,
        }
    }
}

/// Allocate an object of `size` bytes on `memnode` from the session's allocator.
/// When that needs a new lease and the service cannot be reached, try again with
/// a metadata client that retries for up to [`METADATA_RETRY`] (a lease request
/// whose answer was lost is not repeated by that client; asking again may leave
/// an unused lease behind, which expires with its time to live).
pub(crate) fn alloc(
    core: &SessionCore,
    table: TableRef<'_>,
    memnode: u64,
    size: usize,
) -> Result<Allocation, KvError> {
    let first =
        core.alloc
            .borrow_mut()
            .alloc(&core.client.meta, table, memnode, size, Instant::now());
    let allocated = match first {
        Err(KvError::Unavailable(_)) if core.client.meta.retry_window() < METADATA_RETRY => {
            let meta = core.client.meta.clone().with_retry(METADATA_RETRY);
            core.alloc
                .borrow_mut()
                .alloc(&meta, table, memnode, size, Instant::now())
        }
        r => r,
    };
    // A new lease is memory the queue pairs' grants do not cover yet.
    core.grant_new_leases(false);
    allocated
}
