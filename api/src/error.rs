//! The one error of every control-plane call: HTTP to a metadata service, a memory
//! node's or a switch's admin API, and the queue-pair setup built on them.

use verbs::transport::ConnectError;

/// Why a control-plane request (or a queue-pair setup) failed.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    /// The base URL could not be understood.
    #[error("invalid address {0:?}: expected host:port, http://host:port or https://host:port")]
    InvalidAddress(String),
    /// Connecting, sending or receiving failed (the service may be down).
    #[error("{context}: {source}")]
    Io {
        /// What was being done.
        context: String,
        /// Why.
        source: std::io::Error,
    },
    /// The service answered with an error status.
    #[error("{method} {path} failed with HTTP {status} ({code}): {message}")]
    Http {
        /// Request method.
        method: &'static str,
        /// Request path.
        path: String,
        /// HTTP status.
        status: u16,
        /// The error code of the body (`unknown` if the body was not an error document).
        code: String,
        /// The message of the body.
        message: String,
    },
    /// The answer was not HTTP or not the expected JSON.
    #[error("unexpected answer: {0}")]
    Protocol(String),
    /// The queue pair could not be set up on the client side.
    #[error("setting up the client queue pair: {0}")]
    Connect(#[from] ConnectError),
}

impl ClientError {
    /// The HTTP status, if the service answered with an error.
    pub fn status(&self) -> Option<u16> {
        match self {
            ClientError::Http { status, .. } => Some(*status),
            _ => None,
        }
    }

    /// The error code, if the service answered with an error.
    pub fn code(&self) -> Option<&str> {
        match self {
            ClientError::Http { code, .. } => Some(code),
            _ => None,
        }
    }
}
