//! dmkv switch acceleration.
//!
//! * [`spec`] — opcodes, header layouts, mode bits, registers and tables shared with the
//!   P4 program (`p4/include/spec.p4` is generated from it);
//! * [`model`] — the pipeline model: parse → fixed stages → deparse;
//! * [`functions`] — the stages, one file per function;
//! * [`stf`] — test vectors in a small STF dialect, run against the model.
#![warn(missing_docs)]

pub mod functions;
pub mod model;
pub mod spec;
pub mod stf;
