//! Change feeds: an ordered feed of a Clover table's committed writes, replicated to
//! up to eight consumers by the switch (zero-sided: no memory-node CPU moves a record).
//!
//! * [`layout`] — where a feed's rings are ([`FeedLayout`]) and what to create
//!   ([`FeedSpec`]);
//! * [`record`] — one write as a ring slot ([`FeedRecord`]);
//! * `create` — `Session::create_feed`: table-owned memory for the rings;
//! * [`append`] — any writer of a table with a feed in its catalog entry records
//!   each committed write, taking a lane for that one append;
//! * [`writer`] — [`FeedWriter`]: holds a producer lane, records each write;
//! * [`consumer`] — [`FeedConsumer`]: takes records out of a consumer ring;
//! * [`mirror`] — [`FeedMirror`]: an in-memory copy kept in step, per key in version
//!   order;
//! * [`table_mirror`] — [`TableMirror`]: a second table kept in step the same way;
//! * [`status`] — each ring's head and tail;
//! * `ring_io` — the one-sided verbs on the rings.
//!
//! The switch's `ordered_replication` flow (producers: the lanes, consumers: the
//! consumer rings) merges the lanes into one order and copies every record to every
//! consumer ring; `docs/zero-sided.md` ("Change feed") describes how to start it.

pub mod append;
pub mod consumer;
mod create;
pub mod layout;
pub mod mirror;
pub mod record;
mod ring_io;
pub mod status;
pub mod table_mirror;
pub mod writer;

pub use consumer::FeedConsumer;
pub use layout::{FeedLayout, FeedRing, FeedSpec};
pub use mirror::{Applied, FeedMirror};
pub use record::{FeedOp, FeedRecord, RecordError};
pub use status::{FeedStatus, RingStatus, status};
pub use table_mirror::TableMirror;
pub use writer::FeedWriter;
