//! Sessions over the `rdma` transport: an RDMA NIC (cargo feature `rdma`).
//!
//! Thread-aware as SMART prescribes: a session belongs to one thread, and it opens
//! the device itself — its own device context, protection domain, completion queue,
//! staging buffer and one RC queue pair per memory node — so no queue pair, completion
//! queue or doorbell is shared between threads on the data path. On mlx5, each device
//! context gets its own UAR pages (`ibv_open_device` allocates them), and the queue
//! pairs of a context ring their doorbells through that context's blue-flame
//! registers: threads with their own sessions never write the same doorbell register
//! or take the same doorbell lock. A batch of work requests an index posts goes to
//! the NIC as one chained list with one doorbell, and WRITEs the index marks inline
//! (up to the transport's inline limit) are copied into the work queue entry.
//!
//! The memory node creates the other half on `POST /v1/rdma/qps` with the session's
//! grants (or, when the metadata service issues none, without a credential); the NIC
//! keys it answers with, one per granted extent, are fixed at creation, so the session
//! replaces the queue pair when its grants are due for refreshing and when it needs
//! memory its keys do not reach (a table granted since).

use crate::error::KvError;
use crate::fabric::Fabric;

/// Bytes of each session's registered staging buffer, and its slots: one READ or
/// non-inline WRITE carries at most `STAGING_BYTES / STAGING_SLOTS` (64 KiB).
#[cfg(feature = "rdma")]
const STAGING_BYTES: usize = 32 << 20;
#[cfg(feature = "rdma")]
const STAGING_SLOTS: u32 = 512;

/// The session's own transport on the client's RDMA device.
#[cfg(feature = "rdma")]
pub(crate) fn fabric(client: &crate::client::ClientInner) -> Result<Fabric, KvError> {
    use verbs::transport::rdma::{RdmaConfig, RdmaTransport};
    let options = &client.options.connection;
    let t = RdmaTransport::open(RdmaConfig {
        device: options.rdma_device.clone(),
        gid_index: options.rdma_gid_index,
        cq_size: STAGING_SLOTS,
        local_buffer_bytes: STAGING_BYTES,
        ..RdmaConfig::default()
    })
    .map_err(|e| KvError::unavailable_because(format!("opening the RDMA device: {e}"), e))?;
    Ok(Fabric::Rdma(Box::new(t)))
}

/// Without the `rdma` feature there is no such transport to open.
#[cfg(not(feature = "rdma"))]
pub(crate) fn fabric(_client: &crate::client::ClientInner) -> Result<Fabric, KvError> {
    Err(KvError::Unsupported(
        "the rdma transport needs the kvstore built with the `rdma` cargo feature (cargo build --features rdma); use udp, shm or local".into(),
    ))
}

/// A new RDMA queue pair to memory node `n`.
#[cfg(feature = "rdma")]
pub(crate) fn connect(
    client: &std::sync::Arc<crate::client::ClientInner>,
    t: &mut verbs::transport::rdma::RdmaTransport,
    n: &dmkv_api::metadata::MemnodeInfo,
    region: crate::connect::RegionRef,
) -> Result<crate::connect::NewQp, KvError> {
    use crate::address_map::AddressMap;
    use crate::connect::{NewQp, RemoteQp};

    let grants = crate::grants::fetch(client, n.id)?;
    let credential = grants
        .as_ref()
        .and_then(|g| g.first())
        .map(|g| g.grant.clone());
    let more: Vec<String> = grants
        .iter()
        .flatten()
        .skip(1)
        .map(|g| g.grant.clone())
        .collect();
    let c = dmkv_api::qp_rdma::connect_rdma_qp_with(&n.admin_url, t, credential.as_deref(), more)
        .map_err(|e| {
        KvError::unavailable_because(format!("memnode {} over RDMA: {e}", n.id), e)
    })?;
    let held = grants.as_deref().and_then(crate::grants::held);
    let replace_at = held.as_ref().map(|h| h.refresh_at);
    Ok(NewQp {
        handle: c.handle,
        region,
        remote: Some(RemoteQp {
            admin_url: n.admin_url.clone(),
            qpn: c.remote_qpn,
            client_qpn: c.local_qpn,
            switch: None,
            grants: held,
            rdma: true,
        }),
        idle_timeout: None,
        accelerated: false,
        address_map: Some(AddressMap::Windows {
            region: region.rkey,
            windows: c.windows,
        }),
        replace_at,
        rpc: None,
    })
}
