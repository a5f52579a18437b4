//! Producer/consumer flows between rings in registered memory (zero-sided RDMA): the
//! switch learns what producers put into their rings, moves items into consumer rings
//! with the READ→WRITE rule of copies, and publishes them by writing the rings' head
//! and tail words itself — no CPU of a memory node, producer or consumer takes part in
//! moving an item.
//!
//! * [`ring`] — the ring layout in memory;
//! * [`policy`] — the [`FlowKind`]s behind one trait, one file each:
//!   [`one_to_one`], [`load_balance`], [`ordered_replication`], [`key_shuffle`];
//! * [`request`] — a flow's rings and timing;
//! * [`control_qp`] — a ring's control queue pair (head/tail READs and WRITEs);
//! * [`lane`] — a producer → consumer path and its item moves;
//! * [`checkpoint`] — what survives a switch restart, and why that is exactly once;
//! * [`job`] — one flow's state machine;
//! * [`record`] — `POST /v1/flows`, the state file's record, the status;
//! * [`engine`] — the flows a switch runs.
//!
//! The data-plane rules are `functions::zero_copy` (the item moves) and
//! `functions::flow_punt` (control answers and doorbells to the CPU).

pub mod checkpoint;
pub mod control_qp;
pub mod engine;
pub mod job;
pub mod key_shuffle;
pub mod lane;
pub mod load_balance;
pub mod mcast_lane;
pub mod one_to_one;
pub mod ordered_replication;
pub mod policy;
pub mod record;
pub mod request;
pub mod ring;

pub use checkpoint::{Delivery, FlowCheckpoint};
pub use control_qp::{ControlPath, ControlQp};
pub use engine::{ActiveFlow, FlowEngine};
pub use job::{FlowJob, FlowOutput, FlowProgress, FlowState};
pub use lane::{Lane, LaneEntry, LanePath};
pub use mcast_lane::{McastEntry, McastLane};
pub use policy::{Assignment, FlowKind, FlowPolicy, FlowView};
pub use record::{FlowRecord, FlowRequest, FlowRing, FlowStatus};
pub use request::FlowShape;
pub use ring::RingLayout;
