//! The seam for registering a memory node with the metadata service.
//!
//! Registration (and heartbeats) with the metadata service come later. The binary calls
//! [`Registrar::register`] once the node serves and [`Registrar::deregister`] before it
//! stops; until the metadata service exists, [`LogRegistrar`] only logs.

use crate::api::NodeInfo;

/// Why registering with the metadata service failed.
#[derive(Debug, thiserror::Error)]
#[error("registration with the metadata service failed: {0}")]
pub struct RegistrarError(pub String);

/// Announces a memory node to whoever hands out its memory.
pub trait Registrar: Send + Sync {
    /// The node serves and can be used (called once after startup).
    fn register(&self, node: &NodeInfo, admin_url: &str) -> Result<(), RegistrarError>;

    /// The node is about to stop (called once during a graceful shutdown).
    fn deregister(&self, node: &NodeInfo, admin_url: &str) -> Result<(), RegistrarError>;
}

/// A registrar that only logs: standalone nodes, tests and embedded clusters.
#[derive(Debug, Clone, Copy, Default)]
pub struct LogRegistrar;

impl Registrar for LogRegistrar {
    fn register(&self, node: &NodeInfo, admin_url: &str) -> Result<(), RegistrarError> {
        tracing::info!(
            admin = admin_url,
            data = %node.listen,
            capacity = node.capacity,
            "no metadata service configured; serving standalone"
        );
        Ok(())
    }

    fn deregister(&self, _node: &NodeInfo, _admin_url: &str) -> Result<(), RegistrarError> {
        Ok(())
    }
}
