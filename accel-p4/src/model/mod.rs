//! The pipeline model's building blocks, written the way the P4 program is: registers of
//! at most 32-bit cells (64-bit values as lo/hi pairs), masked indices, one
//! read-modify-write per register per packet and no data-dependent loops.
//!
//! One file each: `packet` (parse, deparse, per-packet metadata), `register` (register
//! arrays), `tables` (exact-match tables and the pipeline's set of tables), `range_table`
//! (range-match tables), `stage` (the [`Stage`] trait and its
//! [`Ctx`]), `counters` (per-function [`Counters`]), `psn` (24-bit PSN arithmetic). The
//! stages are in [`crate::functions`]; the assembly — parse → a fixed list of stages →
//! deparse — is [`crate::pipeline::Pipeline`]. Building blocks import neither.

mod counters;
mod packet;
mod psn;
mod range_table;
mod register;
mod stage;
mod tables;

pub use counters::{
    AtomicCounters, Counters, FaultCounters, ForwardCounters, LatchCounters, ReadSteerCounters,
    ReplaceCounters, ScopeCounters, WriteSteerCounters, ZeroCopyCounters,
};
pub use packet::{
    AnswerSlot, Intercept, Metadata, MirrorCopies, MirrorTag, Packet, ParseError, deparse, parse,
};
pub use psn::{psn_add, psn_diff, psn_sub};
pub use range_table::{RangeEntry, RangeError, RangeTable};
pub use register::{PacketId, PairRegister, Register, RegisterAccess, join, split};
pub use stage::{Ctx, Emitted, Stage};
pub use tables::CopyReplicaAction;
pub use tables::{
    AtomicRange, CopyDstAction, CopySrcAction, ExactTable, FaultPolicy, FillerAction,
    FlowPuntAction, LatchRegion, LockKey, MuxAction, RouteAction, RouteKey, TableError, Tables,
    TrackedLock, WindowAction,
};
pub use tables::{MirrorAckAction, MirrorLaneAction, MirrorRkeyAction};
