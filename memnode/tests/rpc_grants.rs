//! RPCs on a queue pair created with a grant are admitted exactly as one-sided verbs
//! on it are: under the queue pair's own key, inside the grant's windows, with the
//! grant's rights; a refused request changes nothing.

#[path = "common/rpc_client.rs"]
mod rpc_client;

use std::net::Ipv4Addr;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use dmkv_api::grant::{Grant, GrantAccess, GrantKey, GrantWindow};
use dmkv_api::rpc::{Request, RpcStatus};
use memnode::auth::AdminAuth;
use memnode::{Memnode, MemnodeConfig, MemnodeHandle};
use rpc_client::RpcClient;
use verbs::rc::RcConfig;
use verbs::transport::udp::UdpTransport;
use verbs::worker::VerbError;
use verbs::wr::{CompletionError, RemoteAddr};

const CAPACITY: u64 = 1 << 20;
const TOKEN: &str = "memnode-admin-token-for-rpc-tests";
const NODE_ID: u64 = 3;
/// The table's one extent: 8 KiB at 64 KiB.
const WINDOW: (u64, u64) = (64 << 10, 8 << 10);

fn start() -> MemnodeHandle {
    let node = Memnode::start(MemnodeConfig {
        auth: AdminAuth::secured(TOKEN, None).expect("auth"),
        rpc_workers: 1,
        ..MemnodeConfig::local(CAPACITY)
    })
    .expect("start");
    node.set_memnode_id(NODE_ID);
    node
}

fn connect(node: &MemnodeHandle, access: GrantAccess) -> RpcClient {
    let now_ms = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .expect("clock")
        .as_millis() as u64;
    let grant = Grant {
        client_id: "rpc-client".into(),
        memnode_id: NODE_ID,
        table: "t".into(),
        windows: vec![GrantWindow {
            offset: WINDOW.0,
            len: WINDOW.1,
        }],
        access,
        expires_at_ms: now_ms + 60_000,
        nonce: [4; 16],
    }
    .sign(&GrantKey::derive_from_admin_token(TOKEN).expect("key"))
    .expect("sign");
    let config = RcConfig {
        retransmit_timeout: Duration::from_millis(20),
        ..RcConfig::default()
    };
    let mut transport = UdpTransport::bind(Ipv4Addr::LOCALHOST, config).expect("bind");
    let conn = dmkv_api::qp::connect_udp_qp_as(
        dmkv_api::qp::QpPath::Direct,
        &node.admin_url(),
        &mut transport,
        Some(&grant),
    )
    .expect("connect with the grant");
    assert!(conn.rkey.is_some(), "a scoped queue pair has its own key");
    RpcClient::new(transport, &conn)
}

fn snapshot(node: &MemnodeHandle) -> Vec<u8> {
    let mut all = vec![0u8; CAPACITY as usize];
    node.memory().region.read(0, &mut all).expect("read");
    all
}

#[test]
fn rpcs_are_admitted_by_the_queue_pairs_grant() {
    let node = start();
    let rw = connect(&node, GrantAccess::ReadWrite);
    let region_rkey = node.regions()[0].rkey;
    let inside = rw.base + WINDOW.0 + 128;
    let write = |rkey, va| Request::Write {
        rkey,
        va,
        data: &[0x5A; 64],
    };
    assert_eq!(rw.call(write(rw.rkey, inside), 1).0, RpcStatus::Ok);
    let before = snapshot(&node);
    // The region's own key is not this queue pair's key.
    assert_eq!(
        rw.call(write(region_rkey, inside), 2).0,
        RpcStatus::UnknownKey
    );
    // Outside the window, and straddling its end.
    assert_eq!(
        rw.call(write(rw.rkey, rw.base + WINDOW.0 - 64), 3).0,
        RpcStatus::OutOfBounds
    );
    assert_eq!(
        rw.call(write(rw.rkey, rw.base + WINDOW.0 + WINDOW.1 - 32), 4)
            .0,
        RpcStatus::OutOfBounds
    );
    let cas_outside = Request::CompareSwap {
        rkey: rw.rkey,
        va: rw.base,
        compare: 0,
        swap: 1,
    };
    assert_eq!(rw.call(cas_outside, 5).0, RpcStatus::OutOfBounds);
    assert_eq!(snapshot(&node), before, "refused RPCs change nothing");

    // A read-only grant reads the window and may not write it, by RPC as one-sided.
    let ro = connect(&node, GrantAccess::ReadOnly);
    let read = Request::Read {
        rkey: ro.rkey,
        va: inside,
        len: 64,
    };
    assert_eq!(ro.call(read, 6), (RpcStatus::Ok, vec![0x5A; 64]));
    assert_eq!(
        ro.call(write(ro.rkey, inside), 7).0,
        RpcStatus::AccessDenied
    );
    let one_sided = ro
        .worker
        .block_on(ro.qp.write(RemoteAddr::new(ro.rkey, inside), vec![1; 64]));
    assert_eq!(
        one_sided,
        Err(VerbError::Completion(CompletionError::RemoteAccess))
    );
    assert_eq!(snapshot(&node), before);
    assert_eq!(node.rpc_stats().refused, 5);
}
