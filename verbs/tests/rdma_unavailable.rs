//! The `rdma` transport on a machine without an RDMA device: a clear error, no panic, no hang.
#![cfg(feature = "rdma")]

use std::sync::mpsc;
use std::time::Duration;

use verbs::transport::ConnectError;
use verbs::transport::rdma::{RdmaConfig, RdmaTransport};

/// Open with `config` on another thread, failing the test if it takes too long.
fn open_within(config: RdmaConfig, limit: Duration) -> Result<String, ConnectError> {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let r = RdmaTransport::open(config).map(|t| t.device_name().to_owned());
        let _ = tx.send(r);
    });
    match rx.recv_timeout(limit) {
        Ok(r) => r,
        Err(mpsc::RecvTimeoutError::Timeout) => panic!("RdmaTransport::open hung"),
        Err(mpsc::RecvTimeoutError::Disconnected) => panic!("RdmaTransport::open panicked"),
    }
}

fn assert_names_alternatives(msg: &str) {
    for name in ["udp", "shm", "local"] {
        assert!(
            msg.contains(name),
            "message does not mention `{name}`: {msg}"
        );
    }
}

#[test]
fn open_without_a_device_names_the_other_transports() {
    match open_within(RdmaConfig::default(), Duration::from_secs(30)) {
        Err(ConnectError::Unavailable(msg)) => {
            eprintln!("rdma unavailable: {msg}");
            assert!(msg.contains("RDMA"), "{msg}");
            assert_names_alternatives(&msg);
        }
        Err(other) => panic!("expected Unavailable, got {other:?}"),
        Ok(device) => {
            eprintln!("note: RDMA device {device} present; skipping the no-device assertion");
        }
    }
}

#[test]
fn a_missing_named_device_is_unavailable_too() {
    let config = RdmaConfig {
        device: Some("no-such-rdma-device".into()),
        ..RdmaConfig::default()
    };
    match open_within(config, Duration::from_secs(30)) {
        Err(ConnectError::Unavailable(msg)) => assert_names_alternatives(&msg),
        Err(other) => panic!("expected Unavailable, got {other:?}"),
        Ok(device) => panic!("opened {device} when asked for a device that does not exist"),
    }
}

#[test]
fn invalid_settings_are_rejected() {
    let config = RdmaConfig {
        cq_size: 0,
        ..RdmaConfig::default()
    };
    assert!(matches!(
        open_within(config, Duration::from_secs(30)),
        Err(ConnectError::Invalid(_))
    ));
}
