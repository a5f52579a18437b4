//! What every stage shares: the [`Stage`] trait of a P4 control block, the [`Ctx`] it
//! runs in, and the frames a pass through the pipeline [`Emitted`].

use super::counters::Counters;
use super::packet::Packet;
use super::register::RegisterAccess;
use super::tables::Tables;

/// One frame leaving the switch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Emitted {
    /// Output port (`PORT_CLIENT` or `PORT_MEMNODE`).
    pub port: u8,
    /// The whole Ethernet frame.
    pub frame: Vec<u8>,
    /// Hold it this long before sending (fault injection), in microseconds.
    pub delay_us: u32,
}

/// What a stage sees besides the packet: the mode bits, the tables and the counters.
pub struct Ctx<'a> {
    /// The `mode` register's value for this packet.
    pub mode: u32,
    /// The match-action tables.
    pub tables: &'a Tables,
    /// Per-function counters.
    pub counters: &'a mut Counters,
}

/// A match-action stage (a P4 control block of the same name).
pub trait Stage {
    /// The P4 control's name.
    fn name(&self) -> &'static str;
    /// Process one packet.
    fn apply(&mut self, pkt: &mut Packet, ctx: &mut Ctx<'_>);
    /// The registers this stage owns.
    fn registers(&self) -> Vec<&dyn RegisterAccess>;
    /// The same, mutable (control-plane access).
    fn registers_mut(&mut self) -> Vec<&mut dyn RegisterAccess>;
}
