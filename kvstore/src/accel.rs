//! Queue pairs through the switch accelerator: which accelerator (if any) a session
//! uses, and creating a memory node's queue pair through it.
//!
//! The accelerator (the `accel-p4` soft switch, or a Tofino running the same program)
//! creates the memory node's responder itself, with its own memnode-side address as the
//! requester, installs the connection's routes, and answers with the address clients
//! send to. The session then talks to the switch as if it were the memory node.

use memnode::api::CreateQpResponse;
use memnode::client::request;
use serde::Deserialize;
use verbs::transport::QpHandle;
use verbs::transport::udp::{RemoteQpParams, UdpTransport};

use crate::client::ClientInner;
use crate::error::KvError;
use crate::options::AcceleratorUse;

/// The accelerator admin URL `client`'s `udp` queue pairs go through, if any.
pub(crate) fn resolve(client: &ClientInner) -> Result<Option<String>, KvError> {
    if client.options.udp_relay.is_some() {
        return Ok(None);
    }
    match &client.options.accelerator {
        AcceleratorUse::Off => Ok(None),
        AcceleratorUse::Via(url) => Ok(Some(url.clone())),
        AcceleratorUse::Auto => client
            .meta
            .accelerator()
            .map(|a| a.and_then(|a| a.admin_url))
            .map_err(|e| {
                KvError::Unavailable(format!(
                    "asking the metadata service for the accelerator: {e}"
                ))
            }),
    }
}

/// The switch's answer to `POST /v1/qps`: the memory node's answer with the switch's
/// client-side address, plus the connection id when the switch reports it.
#[derive(Debug, Deserialize)]
struct SwitchQpResponse {
    #[serde(flatten)]
    qp: CreateQpResponse,
    #[serde(default)]
    conn: Option<u8>,
}

/// A queue pair created through a switch.
pub(crate) struct SwitchQp {
    /// The session's handle.
    pub handle: QpHandle,
    /// The memory node's responder QPN.
    pub remote_qpn: u32,
    /// The switch's connection id (to remove its routes when the session ends).
    pub conn: Option<u8>,
}

/// Create a queue pair to the memory node whose admin URL is `memnode_admin` through
/// the switch whose admin URL is `switch_admin`.
pub(crate) fn connect_qp(
    switch_admin: &str,
    memnode_admin: &str,
    transport: &mut UdpTransport,
) -> Result<SwitchQp, String> {
    let local = transport.prepare();
    if local.addr.ip().is_unspecified() {
        return Err(format!(
            "the session's socket is bound to {}, which the switch cannot route to",
            local.addr
        ));
    }
    let body = serde_json::json!({
        "memnode": memnode_admin,
        "qpn": local.qpn,
        "psn": local.psn,
        "addr": local.addr,
        "pmtu": transport.config().pmtu.bytes(),
    });
    let r = request(
        switch_admin,
        "POST",
        "/v1/qps",
        Some(body.to_string().as_bytes()),
    )
    .map_err(|e| format!("POST /v1/qps on the switch {switch_admin}: {e}"))?;
    if r.status != 201 {
        return Err(format!(
            "POST /v1/qps on the switch {switch_admin}: {} {}",
            r.status,
            String::from_utf8_lossy(&r.body)
        ));
    }
    let resp: SwitchQpResponse = serde_json::from_slice(&r.body)
        .map_err(|e| format!("the switch's answer to POST /v1/qps: {e}"))?;
    let handle = transport
        .connect(
            local,
            RemoteQpParams {
                addr: resp.qp.addr,
                qpn: resp.qp.qpn,
            },
        )
        .map_err(|e| e.to_string())?;
    Ok(SwitchQp {
        handle,
        remote_qpn: resp.qp.qpn,
        conn: resp.conn,
    })
}

/// Remove a connection's routes from the switch (best effort: a session ending).
pub(crate) fn remove_route(switch_admin: &str, conn: u8) {
    let _ = request(switch_admin, "DELETE", &format!("/v1/routes/{conn}"), None);
}
