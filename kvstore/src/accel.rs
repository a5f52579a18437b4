//! The switch accelerator a session's queue pairs go through, if any, and removing a
//! connection's routes from it when the session ends.
//!
//! The accelerator (the `accel-p4` soft switch, or a Tofino running the same program)
//! creates the memory node's responder itself ([`dmkv_api::qp::QpPath::ViaSwitch`]),
//! with its own memnode-side address as the requester, installs the connection's
//! routes, and answers with the address clients send to. The session then talks to
//! the switch as if it were the memory node.

use crate::client::ClientInner;
use crate::error::KvError;
use crate::options::AcceleratorUse;

/// The accelerator admin URL `client`'s `udp` queue pairs go through, if any.
pub(crate) fn resolve(client: &ClientInner) -> Result<Option<String>, KvError> {
    if client.options.connection.udp_relay.is_some() {
        return Ok(None);
    }
    match &client.options.connection.accelerator {
        AcceleratorUse::Off => Ok(None),
        AcceleratorUse::Via(url) => Ok(Some(url.clone())),
        AcceleratorUse::Auto => client
            .meta
            .accelerator()
            .map(|a| a.and_then(|a| a.admin_url))
            .map_err(|e| {
                KvError::unavailable(format!(
                    "asking the metadata service for the accelerator: {e}"
                ))
            }),
    }
}

/// Remove a connection's routes from the switch (best effort: a session ending),
/// presenting `credential` (the grant the connection was made with, if any).
pub(crate) fn remove_route(switch_admin: &str, credential: Option<&str>, conn: u8) {
    let _ = dmkv_api::switch::remove_route_as(switch_admin, credential, conn);
}
