//! The switch-driven copy: one `POST /v1/copies` on the soft switch, followed until
//! the switch reports it done. The switch READs the source and turns every READ
//! response into a WRITE to the target; the client only asks and polls.

use std::time::{Duration, Instant};

use dmkv_api::switch_copy::{CopyEnd, CopyRequest, CopyState, copy_status_as, start_copy_as};

use crate::cpu_driven::Place;

/// How often the copy's status is asked for.
pub const POLL: Duration = Duration::from_millis(2);
/// Longest a copy may run.
const LIMIT: Duration = Duration::from_secs(600);

/// What the switch reported at the end.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct SwitchCopyReport {
    /// READs the switch issued.
    pub reads: u64,
    /// Of which re-issued.
    pub rereads: u64,
    /// Status polls the client made.
    pub polls: u64,
}

/// Has the switch at `switch` copy `len` bytes from `source` to `target`, `item` bytes
/// per READ, `window` READs in flight.
pub fn copy(
    switch: &str,
    source: &Place,
    target: &Place,
    len: u64,
    item: u32,
    window: u32,
) -> Result<SwitchCopyReport, String> {
    let end = |p: &Place| CopyEnd {
        memnode: p.admin_url.clone(),
        va: p.va,
        rkey: p.rkey,
    };
    let req = CopyRequest {
        source: end(source),
        target: end(target),
        len,
        chunk: Some(item),
        window: Some(window),
        rto_ms: None,
    };
    let started = start_copy_as(switch, None, &req).map_err(|e| format!("starting: {e}"))?;
    let begun = Instant::now();
    let mut polls = 0u64;
    loop {
        std::thread::sleep(POLL);
        polls += 1;
        let s = copy_status_as(switch, None, started.id).map_err(|e| format!("status: {e}"))?;
        match s.state {
            CopyState::Done => {
                return Ok(SwitchCopyReport {
                    reads: s.reads,
                    rereads: s.rereads,
                    polls,
                });
            }
            CopyState::Failed(why) => return Err(format!("the switch's copy failed: {why}")),
            CopyState::Running if begun.elapsed() > LIMIT => {
                return Err(format!("the copy did not finish in {LIMIT:?}"));
            }
            CopyState::Running => {}
        }
    }
}
