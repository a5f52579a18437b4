//! What the copier needs of the memnodes: one-sided READ, WRITE and CAS of a
//! region's bytes, and fencing (destroying the queue pairs clients hold to a
//! memnode, so that they reconnect and fetch the table's configuration again).

use crate::catalog::Endpoint;

/// One-sided access to the memnodes, for the copier.
pub trait ReplicaMemory: Send {
    /// READ `len` bytes at `va` of region `rkey` on `node`.
    fn read(&mut self, node: &Endpoint, rkey: u32, va: u64, len: u32) -> Result<Vec<u8>, String>;
    /// WRITE `bytes` at `va` of region `rkey` on `node`.
    fn write(&mut self, node: &Endpoint, rkey: u32, va: u64, bytes: Vec<u8>) -> Result<(), String>;
    /// CAS the word at `va` of region `rkey` on `node` from `expect` to `swap`;
    /// the word's old value.
    fn cas(
        &mut self,
        node: &Endpoint,
        rkey: u32,
        va: u64,
        expect: u64,
        swap: u64,
    ) -> Result<u64, String>;
    /// Destroy every queue pair of `node` but the copier's own; how many.
    fn fence(&mut self, node: &Endpoint) -> Result<usize, String>;
}
