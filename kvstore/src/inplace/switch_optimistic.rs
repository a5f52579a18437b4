//! Switch-assisted optimistic latching (Jasny et al., TODS 2025, §5.5, Table 2): the `accel-p4`
//! switch in `opt_latch` mode holds every tuple's version, answers latch requests
//! itself and stamps READ responses valid or invalid.
//!
//! Layout: tuples a power of two of bytes (the switch derives the tuple id from the
//! address with a shift), cut into 256-byte chunks, each `stamp word u64 | 248 payload
//! bytes` (the payload continues from chunk to chunk). The stamp words are never
//! meaningful in memory. The first is the address the latch CAS goes to; and the switch
//! stamps **every packet** of a READ response over its first 8 bytes
//! (`STAMP_PRESENT | STAMP_INVALID if the version moved or was odd | packet bytes << 32
//! | version`). Packets start at multiples of the path MTU, which is a multiple of 256,
//! so every stamp lands on a stamp word whatever the path MTU. Writers store 0 in the
//! stamp words, so a packet the switch did not stamp is recognisable.
//!
//! * read (1 round trip): `[READ tuple]`; valid if every packet's stamp is present,
//!   valid, of the same version and says the right packet length
//!   ([`verify_stamps`]), else retry. One stamp is not enough for a tuple larger than
//!   the path MTU: after a loss the requester completes the READ with packets of a
//!   later execution, so the packets may come from different executions (accel-p4's
//!   `functions::opt_latch` has the argument why a stamp per packet makes the whole
//!   READ safe under loss, duplication and reordering).
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
/// Shift of the stamp's packet-bytes field: the payload bytes of the packet that carries
/// the stamp (mirrors `accel_p4::spec::STAMP_BYTES_SHIFT`).
pub const STAMP_BYTES_SHIFT: u32 = 32;
/// Mask of the stamp's packet-bytes field after the shift (mirrors
/// `accel_p4::spec::STAMP_BYTES_MASK`).
pub const STAMP_BYTES_MASK: u64 = 0x1FFF;
/// The stamp's version bits (mirrors `accel_p4::spec::STAMP_VERSION_MASK`).
pub const STAMP_VERSION_MASK: u64 = (1 << 23) - 1;
/// A tuple has a stamp word at every multiple of this many bytes: the smallest path MTU,
/// so that every packet of a READ response begins with one.
pub const STAMP_EVERY: usize = 256;
/// Payload bytes per `STAMP_EVERY`-byte chunk.
const CHUNK_PAYLOAD: usize = STAMP_EVERY - 8;
/// Unstamped READs in a row after which an operation gives up with
/// [`KvError::Unsupported`].
const UNSTAMPED_LIMIT: u32 = 8;

/// Why a READ response's stamps do not make it a consistent read.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum StampError {
    /// The first packet carries no stamp, or one without the packet length: the switch
    /// did not see the READ (or is one that stamps only the first packet).
    #[error("the READ response is not stamped by the switch")]
    Unstamped,
    /// Some packet is stamped invalid (the tuple was latched or changed while it was
    /// read), carries no stamp, another version, or the wrong length.
    #[error("the READ response is not stamped valid in every packet with one version")]
    Invalid,
}

/// Check the stamps of a whole-tuple READ response `t`: the first packet's stamp must be
/// valid, and every further packet (at multiples of the first packet's length, which it
/// states) must carry a valid stamp of the same version stating its own length. Returns
/// the version.
pub fn verify_stamps(t: &[u8]) -> Result<u32, StampError> {
    let first = word(t, 0);
    let bytes = |w: u64| ((w >> STAMP_BYTES_SHIFT) & STAMP_BYTES_MASK) as usize;
    let packet = bytes(first);
    if first & STAMP_PRESENT == 0 || packet == 0 {
        return Err(StampError::Unstamped);
    }
    let version = first & STAMP_VERSION_MASK;
    if first & STAMP_INVALID != 0 || packet > t.len() {
        return Err(StampError::Invalid);
    }
    if packet < t.len() && (!packet.is_power_of_two() || packet % STAMP_EVERY != 0) {
        return Err(StampError::Invalid);
    }
    for at in (packet..t.len()).step_by(packet) {
        let w = word(t, at);
        let whole = w & STAMP_PRESENT != 0
            && w & STAMP_INVALID == 0
            && w & STAMP_VERSION_MASK == version
            && bytes(w) == packet.min(t.len() - at);
        if !whole {
            return Err(StampError::Invalid);
        }
    }
    Ok(version as u32)
}

/// Payload bytes a tuple of `tuple` bytes holds: all but a stamp word per 256 bytes.
fn capacity(tuple: u64) -> u64 {
    tuple - 8 * tuple.div_ceil(STAMP_EVERY as u64)
}

/// Where payload byte `i` lies in a tuple.
fn payload_at(i: usize) -> usize {
    (i / CHUNK_PAYLOAD) * STAMP_EVERY + 8 + i % CHUNK_PAYLOAD
}

/// The switch-assisted optimistic scheme.
#[derive(Debug)]
pub struct SwitchOptimistic {
    spec: SchemeSpec,
    layout: Layout,
}

impl SwitchOptimistic {
    /// The scheme for `payload`-byte payloads.
    pub fn new(spec: SchemeSpec, payload: usize) -> SwitchOptimistic {
        // Up to 248 payload bytes this is lines(8 + payload), as with one stamp word.
        let mut tuple = lines(8 + payload as u64).next_power_of_two();
        while capacity(tuple) < payload as u64 {
            tuple *= 2;
        }
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
        let mut p = Vec::with_capacity(self.layout.payload);
        let mut i = 0;
        while i < self.layout.payload {
            let n = (CHUNK_PAYLOAD - i % CHUNK_PAYLOAD).min(self.layout.payload - i);
            let at = payload_at(i);
            match t.get(at..at + n) {
                Some(b) => p.extend_from_slice(b),
                None => break,
            }
            i += n;
        }
        p.resize(self.layout.payload, 0);
        p
    }

    /// The bytes to WRITE for payload `p`: zero stamp words, `p` in the chunks, up to
    /// the last payload byte.
    fn image_of(&self, p: &[u8]) -> Vec<u8> {
        let n = p.len().min(self.layout.payload);
        let len = if self.layout.payload == 0 {
            8
        } else {
            payload_at(self.layout.payload - 1) + 1
        };
        let mut image = vec![0u8; len];
        let mut i = 0;
        while i < n {
            let k = (CHUNK_PAYLOAD - i % CHUNK_PAYLOAD).min(n - i);
            let at = payload_at(i);
            image[at..at + k].copy_from_slice(&p[i..i + k]);
            i += k;
        }
        image
    }

    fn not_through_switch() -> KvError {
        KvError::Unsupported(
            "latch scheme switch-optimistic: READ responses carry no switch stamp — the \
             table's queue pairs must go through an accelerator in opt_latch mode \
             (ClientOptions::accelerator, accel-p4 --mode opt_latch, a version that stamps \
             every packet of a response) with the table's tuples registered \
             (kvstore::inplace::switch_optimistic::register_with_switch)"
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
            match verify_stamps(&t) {
                Ok(_) => return Ok(self.payload_of(&t)),
                Err(StampError::Unstamped) => {
                    unstamped += 1;
                    if unstamped >= UNSTAMPED_LIMIT {
                        return Err(Self::not_through_switch());
                    }
                }
                Err(StampError::Invalid) => unstamped = 0,
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
            Some(p) => self.image_of(p),
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
    /// The memory node the tuples are on.
    pub memnode_id: u64,
}

/// The region of table `table` (an in-place table with scheme `switch-optimistic`),
/// computed the way a session lays the table out.
pub fn switch_region(client: &Client, table: &str) -> Result<SwitchRegion, KvError> {
    let info = client.table(table)?;
    let ip = info.layout.in_place().ok_or_else(|| {
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
        .ok_or_else(|| KvError::unavailable(format!("the memory of table {table} is gone")))?;
    let node = client
        .memnodes()?
        .into_iter()
        .find(|m| m.id == dir.memnode_id)
        .ok_or_else(|| {
            KvError::unavailable(format!(
                "memnode {} of table {table} is gone",
                dir.memnode_id
            ))
        })?;
    // The region as the metadata service lists it (the memory node's own listing needs
    // its admin token).
    let region = node
        .regions
        .first()
        .ok_or_else(|| KvError::unavailable(format!("memnode {} has no region", node.admin_url)))?;
    // As `table::InPlaceTable::open`: one header line, then the tuples.
    let header = dmkv_api::layout::INPLACE_HEADER_BYTES;
    let stride = ip.tuple_bytes.max(1);
    if !stride.is_power_of_two() {
        return Err(KvError::corrupt(format!(
            "table {table}'s tuples are {stride} bytes apart, not a power of two"
        )));
    }
    Ok(SwitchRegion {
        rkey: region.rkey,
        base_va: RemoteAddr::new(region.rkey, dir.va).offset(header).va,
        stride_log2: stride.trailing_zeros() as u8,
        tuples: ip.capacity.min(dir.len.saturating_sub(header) / stride),
        memnode_id: dir.memnode_id,
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
    // A switch that takes grants lets a client declare tuples its grant covers; one
    // open or given the admin token by the caller needs none.
    let grant = crate::grants::fetch_table(&client.inner, table, r.memnode_id)?;
    dmkv_api::switch::put_latch_region_as(switch_admin, grant.as_deref(), &req).map_err(
        |e| match e {
            ClientError::Http { .. } => KvError::InvalidArgument(format!(
                "switch {switch_admin} refused the latch region of table {table}: {e}"
            )),
            e => KvError::unavailable(format!("switch {switch_admin}: {e}")),
        },
    )?;
    Ok(r)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stamp(valid: bool, version: u64, bytes: usize) -> u64 {
        STAMP_PRESENT
            | if valid { 0 } else { STAMP_INVALID }
            | ((bytes as u64) << STAMP_BYTES_SHIFT)
            | version
    }

    fn response(tuple: usize, pmtu: usize, stamps: &[u64]) -> Vec<u8> {
        let mut t = vec![0xAB; tuple];
        for (k, s) in stamps.iter().enumerate() {
            t[k * pmtu..k * pmtu + 8].copy_from_slice(&s.to_le_bytes());
        }
        t
    }

    #[test]
    fn every_packet_must_be_stamped_valid_with_one_version() {
        let ok = response(4096, 1024, &[stamp(true, 6, 1024); 4]);
        assert_eq!(verify_stamps(&ok), Ok(6));
        // One packet from another version, stamped invalid, unstamped, or of a
        // different length: rejected.
        let mut s = [stamp(true, 6, 1024); 4];
        s[2] = stamp(true, 8, 1024);
        assert_eq!(
            verify_stamps(&response(4096, 1024, &s)),
            Err(StampError::Invalid)
        );
        s[2] = stamp(false, 6, 1024);
        assert_eq!(
            verify_stamps(&response(4096, 1024, &s)),
            Err(StampError::Invalid)
        );
        s[2] = 0;
        assert_eq!(
            verify_stamps(&response(4096, 1024, &s)),
            Err(StampError::Invalid)
        );
        s[2] = stamp(true, 6, 512);
        assert_eq!(
            verify_stamps(&response(4096, 1024, &s)),
            Err(StampError::Invalid)
        );
        // A single packet: its stamp says the whole length.
        let only = response(512, 1024, &[stamp(true, 2, 512)]);
        assert_eq!(verify_stamps(&only), Ok(2));
        assert_eq!(
            verify_stamps(&response(512, 1024, &[stamp(true, 2, 1024)])),
            Err(StampError::Invalid)
        );
        // Not stamped, or stamped by a switch that gives no packet length.
        assert_eq!(verify_stamps(&vec![0; 512]), Err(StampError::Unstamped));
        let old = response(512, 1024, &[STAMP_PRESENT | 2]);
        assert_eq!(verify_stamps(&old), Err(StampError::Unstamped));
        // A length that is not a path MTU.
        let odd = response(1024, 384, &[stamp(true, 2, 384)]);
        assert_eq!(verify_stamps(&odd), Err(StampError::Invalid));
        // Every path MTU and tuple size.
        for pmtu in [256, 512, 1024, 2048, 4096] {
            for tuple in [64usize, 256, 512, 1024, 2048, 4096, 8192, 16384] {
                let n = tuple.div_ceil(pmtu);
                let stamps: Vec<u64> = (0..n)
                    .map(|k| stamp(true, 4, pmtu.min(tuple - k * pmtu)))
                    .collect();
                assert_eq!(verify_stamps(&response(tuple, pmtu, &stamps)), Ok(4));
            }
        }
    }

    #[test]
    fn payloads_skip_the_stamp_words() {
        for payload in [0usize, 1, 56, 248, 249, 500, 1000, 2000, 4000, 16000] {
            let s = SwitchOptimistic::new(SchemeSpec::SwitchOptimistic, payload);
            let tuple = s.layout.tuple as usize;
            assert!(tuple.is_power_of_two() && capacity(tuple as u64) >= payload as u64);
            assert!(tuple == 64 || capacity(tuple as u64 / 2) < payload as u64);
            let p: Vec<u8> = (0..payload).map(|i| (i % 251) as u8 + 1).collect();
            let image = s.image_of(&p);
            assert!(image.len() <= tuple);
            for at in (0..image.len()).step_by(STAMP_EVERY) {
                assert_eq!(word(&image, at), 0, "stamp word at {at}");
            }
            let mut t = image.clone();
            t.resize(tuple, 0);
            for at in (0..tuple).step_by(STAMP_EVERY) {
                t[at..at + 8].copy_from_slice(&u64::MAX.to_le_bytes());
            }
            assert_eq!(s.payload_of(&t), p);
        }
        // Small tuples keep the single-stamp layout.
        let s = SwitchOptimistic::new(SchemeSpec::SwitchOptimistic, 200);
        assert_eq!(s.layout.tuple, 256);
    }
}
