//! Helpers shared by the integration tests.
#![allow(dead_code)]

use std::sync::Arc;
use std::time::{Duration, Instant};

use metadata::api::{RegionSpec, RegisterMemnodeRequest};
use metadata::client::MetadataClient;
use metadata::scrub::RecordingScrubber;
use metadata::{MetadataServer, ServerConfig, ServerHandle, StoreConfig};

pub const TOKEN: &str = "s3cret";

/// A service on an ephemeral port with `store`, token [`TOKEN`], and `tweak` applied.
pub fn start(store: StoreConfig, tweak: impl FnOnce(&mut ServerConfig)) -> ServerHandle {
    start_recording(store, tweak).0
}

/// [`start`], and the recorder that stands in for the memnodes when table memory is
/// zeroed: the memnodes of these tests are registrations (see [`memnode`]), nothing
/// listens at their admin URLs.
pub fn start_recording(
    store: StoreConfig,
    tweak: impl FnOnce(&mut ServerConfig),
) -> (ServerHandle, Arc<RecordingScrubber>) {
    let scrubber = Arc::new(RecordingScrubber::default());
    let mut cfg = ServerConfig::local(store);
    cfg.token = Some(TOKEN.to_owned());
    cfg.scrubber = scrubber.clone();
    tweak(&mut cfg);
    let server = MetadataServer::start(cfg).expect("metadata service starts");
    (server, scrubber)
}

/// A client of `server` with the right token.
pub fn client(server: &ServerHandle) -> MetadataClient {
    MetadataClient::new(&server.url())
        .unwrap()
        .with_token(Some(TOKEN.to_owned()))
}

/// A registration of a fake memnode `name` with one region of `len` bytes.
pub fn memnode(name: &str, port: u16, rkey: u32, len: u64) -> RegisterMemnodeRequest {
    RegisterMemnodeRequest {
        name: name.to_owned(),
        admin_url: format!("http://127.0.0.1:{}", port + 1000),
        data_addr: format!("127.0.0.1:{port}"),
        capacity: len,
        regions: vec![RegionSpec {
            rkey,
            base_va: 0x1000_0000_0000,
            len,
            path: None,
            instance: 0,
        }],
        zone: None,
    }
}

/// Polls `f` until it is true or `timeout` passes.
pub fn wait_until(timeout: Duration, mut f: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + timeout;
    while Instant::now() < deadline {
        if f() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    f()
}
