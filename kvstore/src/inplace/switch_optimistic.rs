//! Switch-assisted optimistic latching (Jasny et al., TODS 2025, §5.5, Table 2): the `accel-p4`
//! switch in `opt_latch` mode holds every tuple's version, answers latch requests
//! itself and stamps READ responses valid or invalid.
//!
//! Layout: `stamp/latch word u64 | payload | pad`, tuples a power of two of bytes
//! (the switch derives the tuple id from the address with a shift). The first word
//! is never meaningful in memory: it is the address the latch CAS goes to, and the
//! place where the switch writes the stamp of a READ response
//! (`STAMP_PRESENT | STAMP_INVALID if the version moved or was odd | version`).
//! Writers store 0 there, so a READ the switch did not stamp is recognisable.
//!
//! * read (1 round trip): `[READ tuple]`; valid if the stamp says so, else retry.
//! * write (½ + 1 + 1 round trips): `[CAS latch word]` answered by the switch (the
//!   version before; even = latched by us, odd = someone holds it), `[READ tuple]`
//!   under the latch to let the caller decide, `[WRITE 0 ‖ payload]` — the switch
//!   unlatches when the memnode acknowledges it (a decision not to write still WRITEs
//!   the first word, to unlatch).
//!
//! Requirements, checked: the table's queue pairs must go through an accelerator
//! (`ClientOptions::accelerator`) running `opt_latch`, and the table's tuples must be
//! registered there ([`register_with_switch`]). A READ that comes back unstamped
//! repeatedly means they are not: the operation fails with a message saying so.
//!
//! Leases do not apply: the latch lives in the switch, which no client can break. A
//! client that dies holding one leaves the tuple latched until an operator resets
//! its `tuple_version` cell (`PUT /v1/registers/tuple_version/{i}` with an even value)
//! or the switch restarts (after its grace period every tuple is free).

use dmkv_api::ClientError;
use dmkv_api::switch::LatchRegionRequest;
use verbs::wr::{RemoteAddr, WorkRequest};

use super::io::{atomic, read_bytes};
use super::{Decide, LatchAt, Layout, LocalFuture, SchemeSpec, SlotIo, SyncScheme, lines, word};
use crate::client::Client;
use crate::error::KvError;
use crate::stats::OpStats;

/// Stamp bit: the switch saw this READ (mirrors `accel_p4::spec::STAMP_PRESENT`).
pub const STAMP_PRESENT: u64 = 1 << 63;
/// Stamp bit: the tuple changed or was latched during the READ (mirrors
/// `accel_p4::spec::STAMP_INVALID`).
pub const STAMP_INVALID: u64 = 1 << 62;
/// Unstamped READs in a row after which an operation gives up with
/// [`KvError::Unsupported`].
const UNSTAMPED_LIMIT: u32 = 8;

/// The switch-assisted optimistic scheme.
#[derive(Debug)]
pub struct SwitchOptimistic {
    spec: SchemeSpec,
    layout: Layout,
}

impl SwitchOptimistic {
    /// The scheme for `payload`-byte payloads.
    pub fn new(spec: SchemeSpec, payload: usize) -> SwitchOptimistic {
        let tuple = lines(8 + payload as u64).next_power_of_two();
        SwitchOptimistic {
            spec,
            layout: Layout {
                payload,
                tuple,
                stride: tuple,
                latch: LatchAt::InTuple(0),
            },
        }
    }

    fn payload_of(&self, t: &[u8]) -> Vec<u8> {
        let mut p = t
            .get(8..8 + self.layout.payload)
            .unwrap_or_default()
            .to_vec();
        p.resize(self.layout.payload, 0);
        p
    }

    fn not_through_switch() -> KvError {
        KvError::Unsupported(
            "latch scheme switch-optimistic: READ responses carry no switch stamp — the \
             table's queue pairs must go through an accelerator in opt_latch mode \
             (ClientOptions::accelerator, accel-p4 --mode opt_latch) with the table's tuples \
             registered (kvstore::inplace::switch_optimistic::register_with_switch)"
                .into(),
        )
    }

    async fn do_read(
        &self,
        io: &SlotIo,
        slot: u64,
        stats: &mut OpStats,
    ) -> Result<Vec<u8>, KvError> {
        let at = io.tuple_addr(&self.layout, slot)?;
        let deadline = io.deadline();
        let (mut attempt, mut unstamped) = (0u32, 0u32);
        loop {
            let mut done = io
                .round_trip(vec![WorkRequest::read(at, self.layout.tuple as u32)], stats)
                .await?;
            let t = read_bytes(done.first_mut())?;
            let stamp = word(&t, 0);
            if stamp & STAMP_PRESENT != 0 && stamp & STAMP_INVALID == 0 {
                return Ok(self.payload_of(&t));
            }
            if stamp & STAMP_PRESENT == 0 {
                unstamped += 1;
                if unstamped >= UNSTAMPED_LIMIT {
                    return Err(Self::not_through_switch());
                }
            } else {
                unstamped = 0;
            }
            io.restart(deadline, &mut attempt, stats).await?;
        }
    }

    async fn do_write(
        &self,
        io: &SlotIo,
        slot: u64,
        decide: Decide<'_>,
        stats: &mut OpStats,
    ) -> Result<bool, KvError> {
        let at = io.tuple_addr(&self.layout, slot)?;
        let deadline = io.deadline();
        let mut attempt = 0u32;
        // Latch at the switch: an even version before means it is ours.
        loop {
            let done = io
                .round_trip(vec![WorkRequest::cas(at, 0, 1)], stats)
                .await?;
            if atomic(done.first())? & 1 == 0 {
                break;
            }
            io.restart(deadline, &mut attempt, stats).await?;
        }
        // Under the latch the tuple is stable (the stamp says "latched": ignored).
        let mut done = io
            .round_trip(vec![WorkRequest::read(at, self.layout.tuple as u32)], stats)
            .await?;
        let t = read_bytes(done.first_mut())?;
        let new = decide(&self.payload_of(&t));
        let image = match &new {
            Some(p) => {
                let mut image = vec![0u8; 8 + self.layout.payload];
                let n = p.len().min(self.layout.payload);
                image[8..8 + n].copy_from_slice(&p[..n]);
                image
            }
            None => vec![0u8; 8],
        };
        // The memnode's ACK of this WRITE unlatches the tuple at the switch.
        let done = io
            .round_trip(vec![WorkRequest::write(at, image)], stats)
            .await?;
        super::io::all_ok(&done)?;
        Ok(new.is_some())
    }
}

impl SyncScheme for SwitchOptimistic {
    fn spec(&self) -> &SchemeSpec {
        &self.spec
    }

    fn layout(&self) -> &Layout {
        &self.layout
    }

    fn read<'a>(
        &'a self,
        io: &'a SlotIo,
        slot: u64,
        stats: &'a mut OpStats,
    ) -> LocalFuture<'a, Result<Vec<u8>, KvError>> {
        Box::pin(self.do_read(io, slot, stats))
    }

    fn write<'a>(
        &'a self,
        io: &'a SlotIo,
        slot: u64,
        decide: Decide<'a>,
        stats: &'a mut OpStats,
    ) -> LocalFuture<'a, Result<bool, KvError>> {
        Box::pin(self.do_write(io, slot, decide, stats))
    }
}

/// Where a switch-optimistic table's tuples are, as the switch's `latch_region` table
/// wants them (`PUT /v1/latch/regions`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SwitchRegion {
    /// Remote key of the memory holding the tuples.
    pub rkey: u32,
    /// Address of tuple 0.
    pub base_va: u64,
    /// log2 of the tuple size.
    pub stride_log2: u8,
    /// Number of tuples.
    pub tuples: u64,
}

/// The region of table `table` (an in-place table with scheme `switch-optimistic`),
/// computed the way a session lays the table out.
pub fn switch_region(client: &Client, table: &str) -> Result<SwitchRegion, KvError> {
    let info = client.table(table)?;
    let ip = info.inplace.as_ref().ok_or_else(|| {
        KvError::InvalidArgument(format!("table {table} is not an in-place table"))
    })?;
    let spec: SchemeSpec = ip.scheme.parse()?;
    if !matches!(spec, SchemeSpec::SwitchOptimistic) {
        return Err(KvError::InvalidArgument(format!(
            "table {table} uses latch scheme {}, not switch-optimistic",
            ip.scheme
        )));
    }
    let dir = ip
        .area
        .as_ref()
        .ok_or_else(|| KvError::Unavailable(format!("the memory of table {table} is gone")))?;
    let node = client
        .memnodes()?
        .into_iter()
        .find(|m| m.id == dir.memnode_id)
        .ok_or_else(|| {
            KvError::Unavailable(format!(
                "memnode {} of table {table} is gone",
                dir.memnode_id
            ))
        })?;
    let regions = dmkv_api::memnode_admin::regions(&node.admin_url)
        .map_err(|e| KvError::Unavailable(format!("memnode {}: {e}", node.admin_url)))?;
    let region = regions
        .first()
        .ok_or_else(|| KvError::Unavailable(format!("memnode {} has no region", node.admin_url)))?;
    // As `table::InPlaceTable::open`: one header line, then the tuples.
    let header = dmkv_api::layout::INPLACE_HEADER_BYTES;
    let stride = ip.tuple_bytes.max(1);
    if !stride.is_power_of_two() {
        return Err(KvError::Corrupt(format!(
            "table {table}'s tuples are {stride} bytes apart, not a power of two"
        )));
    }
    Ok(SwitchRegion {
        rkey: region.rkey,
        base_va: RemoteAddr::new(region.rkey, dir.va).offset(header).va,
        stride_log2: stride.trailing_zeros() as u8,
        tuples: ip.capacity.min(dir.len.saturating_sub(header) / stride),
    })
}

/// Register table `table`'s tuples with the accelerator whose admin URL is
/// `switch_admin` (`PUT /v1/latch/regions`; tuple ids from `first_tuple`).
pub fn register_with_switch(
    client: &Client,
    table: &str,
    switch_admin: &str,
    first_tuple: u32,
) -> Result<SwitchRegion, KvError> {
    let r = switch_region(client, table)?;
    let req = LatchRegionRequest {
        rkey: r.rkey,
        base_va: r.base_va,
        stride_log2: r.stride_log2,
        tuples: u32::try_from(r.tuples).map_err(|_| {
            KvError::InvalidArgument(format!(
                "table {table} has {} tuples, more than a switch latch region holds",
                r.tuples
            ))
        })?,
        first_tuple,
    };
    dmkv_api::switch::put_latch_region(switch_admin, &req).map_err(|e| match e {
        ClientError::Http { .. } => KvError::InvalidArgument(format!(
            "switch {switch_admin} refused the latch region of table {table}: {e}"
        )),
        e => KvError::Unavailable(format!("switch {switch_admin}: {e}")),
    })?;
    Ok(r)
}
