//! Switch-initiated copies (zero-sided RDMA): the switch owns a queue pair to each end
//! of a copy, READs the source and turns every READ response into a WRITE to the target
//! in flight, so bytes move memnode → memnode with no CPU at either end.
//!
//! * [`request`] — what is asked (`POST /v1/copies`) and what the state file keeps;
//! * [`job`] — one copy's sans-IO state machine: chunks, window, go-back-N on NAKs and
//!   timeouts;
//! * [`read_request`] — the READ packets the switch generates;
//! * [`engine`] — the running copies by slot, fed with the data plane's digests.
//!
//! The data-plane rule is `functions::zero_copy`; the control plane (queue pairs, tables,
//! persistence and the restart rule) is in [`crate::control`].

pub mod engine;
pub mod job;
pub mod read_request;
pub mod request;

pub use engine::{ActiveCopy, CopyEngine, CopyStatus};
pub use job::{ChunkRead, CopyJob, CopyShape, CopyState};
pub use read_request::{ReadTarget, read_request};
pub use request::{CopyEnd, CopyQp, CopyRecord, CopyRequest};
