//! The switch functions, one file each; each is a P4 control block of the same name.
//!
//! * [`forward`] — `Route`: connection lookup and address rewriting (always on);
//! * [`atomics`] — `SwitchAtomics`: PSN/MSN translation and switch-resident atomics
//!   (mode bit `switch_atomics`);
//! * [`faults`] — `FaultInject`: seeded drop / duplicate / reorder / delay (mode bit
//!   `faults`, tests only).
//!
//! Clover write and read steering, atomic replacement and optimistic latching have
//! mode bits in [`crate::spec::mode`] but are not implemented yet.

pub mod atomics;
pub mod faults;
pub mod forward;
