//! RPC at the memory node (`memnode --rpc-workers N`): two-sided requests executed by
//! worker threads next to memory.
//!
//! With `N > 0` every queue pair the node creates also gets a receive queue
//! ([`channel::RpcChannel`]) and a requester of its own, so a client's SEND lands in a
//! posted buffer instead of being refused, and the answer goes back as a SEND on the
//! same queue pair. The data plane thread only moves packets: it hands the queue pairs
//! whose receive queues hold requests to the [`pool::RpcPool`], whose workers parse each
//! request ([`dmkv_api::rpc`]), execute it ([`execute::serve`]) against the node's memory
//! seen through the queue pair's own access scope — the grants and memory windows a
//! one-sided verb on that queue pair is checked against — and post the reply.
//!
//! With `N = 0` (the default) the node stays passive: no receive queues, and a SEND is
//! answered with NAK *invalid request* as before.
//!
//! * [`execute`] — one request message in, one reply message out (no I/O);
//! * [`channel`] — the per-queue-pair receive queue and reply requester;
//! * [`pool`] — the worker threads and the queue of queue pairs with work;
//! * [`race`] — RACE index operations next to memory;
//! * [`clover`] — Clover lookup-to-tail next to memory;
//! * [`rings`] — write-based RPC: per-queue-pair request rings clients WRITE into;
//! * [`ring_serve`] — a worker's pass over the rings;
//! * [`ring_poll`] — when workers poll the rings;
//! * [`clover_link`] — Clover writes (tail search and link) next to memory;
//! * [`clover_create`] — Clover inserts of keys without a chain (directory claim,
//!   then link) next to memory;
//! * [`inplace`] — in-place reads and writes of a tuple under its latch next to memory;
//! * [`stats`] — the counters.

pub mod channel;
pub mod clover;
pub mod clover_create;
pub mod clover_link;
pub mod execute;
pub mod inplace;
pub mod pool;
pub mod race;
pub mod ring_poll;
pub mod ring_serve;
pub mod rings;
pub mod stats;

pub use channel::RpcChannel;
pub use pool::{ReadyQps, RpcPool};
pub use stats::{RpcStats, RpcStatsSnapshot};
