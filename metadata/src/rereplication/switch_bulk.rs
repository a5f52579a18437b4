//! The switch copy engine's part of a re-replication: every extent of a replica set
//! copied primary → new member by the switch (`POST /v1/copies`), one after another,
//! each followed until the switch reports it done. What the switch copies is a
//! snapshot no older than the copy; the copy passes that follow compare every byte
//! again and write what writers changed meanwhile, so the bulk copy needs only to be
//! fast, not exact.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use dmkv_api::switch_copy::{
    CopyEnd, CopyRequest, CopyState, MAX_COPY, copy_status_as, start_copy_as,
};

use crate::catalog::SyncPlan;

/// How often a running copy's status is asked for.
const POLL: Duration = Duration::from_millis(5);
/// How long a copy may go without progress (the switch unreachable, restarting, or
/// its READs unanswered) before the bulk copy gives up.
pub const NO_PROGRESS_LIMIT: Duration = Duration::from_secs(10);

/// Copies every extent of `plan` with the switch at `admin_url`, presenting `token`
/// (the memory node admin token the switch was started with), with `(chunk, window)`
/// for its copies (`None`: the switch's defaults). `progress` is told the
/// bytes copied so far. Returns the bytes copied; an error when a copy failed, made
/// no progress for [`NO_PROGRESS_LIMIT`], or `stop` was set.
pub fn copy_plan(
    admin_url: &str,
    token: Option<&str>,
    (chunk, window): (Option<u32>, Option<u32>),
    plan: &SyncPlan,
    stop: &AtomicBool,
    mut progress: impl FnMut(u64),
) -> Result<u64, String> {
    let mut done = 0u64;
    for e in &plan.extents {
        let mut off = 0u64;
        while off < e.len {
            let len = (e.len - off).min(MAX_COPY);
            let req = CopyRequest {
                source: CopyEnd {
                    memnode: plan.source.admin_url.clone(),
                    va: e.source.va + off,
                    rkey: e.source.rkey,
                },
                target: CopyEnd {
                    memnode: plan.target.admin_url.clone(),
                    va: e.target.va + off,
                    rkey: e.target.rkey,
                },
                len,
                chunk,
                window,
                rto_ms: None,
            };
            follow(admin_url, token, &req, stop, |b| progress(done + b))?;
            done += len;
            off += len;
            progress(done);
        }
    }
    Ok(done)
}

/// Starts `req` on the switch and waits until it is done.
fn follow(
    admin_url: &str,
    token: Option<&str>,
    req: &CopyRequest,
    stop: &AtomicBool,
    mut progress: impl FnMut(u64),
) -> Result<(), String> {
    let started = start_copy_as(admin_url, token, req)
        .map_err(|e| format!("the switch did not start the copy: {e}"))?;
    let id = started.id;
    let mut seen = started.bytes_done;
    let mut moved_at = Instant::now();
    loop {
        if stop.load(Ordering::Relaxed) {
            return Err("the service is stopping".into());
        }
        let last_error = match copy_status_as(admin_url, token, id) {
            Ok(s) => {
                match s.state {
                    CopyState::Done => return Ok(()),
                    CopyState::Failed(why) => {
                        return Err(format!("the switch's copy {id} failed: {why}"));
                    }
                    CopyState::Running => {}
                }
                if s.bytes_done > seen {
                    seen = s.bytes_done;
                    moved_at = Instant::now();
                    progress(seen);
                }
                None
            }
            // A restarting switch answers nothing for a while, then resumes the copy
            // from its checkpoint under the same id.
            Err(e) => Some(e.to_string()),
        };
        if moved_at.elapsed() >= NO_PROGRESS_LIMIT {
            return Err(match last_error {
                Some(e) => format!("the switch's copy {id} made no progress: {e}"),
                None => format!("the switch's copy {id} made no progress"),
            });
        }
        std::thread::sleep(POLL);
    }
}
