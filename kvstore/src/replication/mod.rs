//! Replicated tables: every control word and every object of a table with
//! replication r lives on r memory nodes at the same offset from their region
//! bases (its replica set; the first member is the primary). This module holds
//! the protocol pieces the indexes share.

pub(crate) mod by_switch;
pub(crate) mod copies;
pub(crate) mod decide;
pub(crate) mod fanout;
pub(crate) mod mirrors;
pub(crate) mod settle;
