//! A YCSB driver: YCSB's core workload, generators, measurements and text report, faithful to
//! YCSB so numbers compare with published ones; bindings run N OS threads × M concurrent
//! operations each (see [`db`]).

pub mod bindings;
pub mod cli;
pub mod client;
pub mod compare;
pub mod db;
pub mod executor;
pub mod exporter;
pub mod generator;
pub mod measure;
pub mod measurement_type;
pub mod palette;
pub mod pass_through;
pub mod plot;
pub mod props;
pub mod report;
pub mod results_md;
pub mod workload;
