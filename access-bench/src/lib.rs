//! One-sided, RPC and hybrid access measured side by side (`access-bench`), the shape of
//! Storm's evaluation (Novakovic et al., SYSTOR'19): YCSB A, B and C per access mode on
//! Clover and RACE tables; throughput against contention (how many round trips the
//! one-sided path needs), against client threads and against the memory node's RPC
//! workers; with the round trips and RPCs per operation and the CPU per operation at
//! the memory node and in the rest of the process. Everything runs in one embedded
//! cluster per worker count, over soft RoCE on loopback, the modes taking turns.

pub mod cell;
pub mod charts;
pub mod plan;
pub mod repeat;
pub mod report;
pub mod run;
