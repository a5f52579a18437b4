//! Write-based RPC over soft RoCE: a queue pair created with `?rpc_ring=true` WRITEs
//! its requests into its own ring in node memory, the workers poll the rings and
//! answer with SENDs on the queue pair; no other queue pair can write that ring.

#[path = "common/rpc_client.rs"]
mod rpc_client;

use std::net::Ipv4Addr;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use dmkv_api::grant::{Grant, GrantAccess, GrantKey, GrantWindow};
use dmkv_api::memnode::RpcRingInfo;
use dmkv_api::qp::{QpPath, connect_udp_qp_with_ring_as};
use dmkv_api::rpc::{Request, RpcStatus, parse_reply};
use dmkv_api::rpc_ring::encode_slot;
use memnode::auth::AdminAuth;
use memnode::{Memnode, MemnodeConfig, MemnodeHandle, client};
use rpc_client::RpcClient;
use verbs::rc::RcConfig;
use verbs::transport::udp::UdpTransport;
use verbs::worker::VerbError;
use verbs::wr::{CompletionError, RemoteAddr};

const CAPACITY: u64 = 1 << 20;
const TOKEN: &str = "memnode-admin-token-for-ring-tests";
const NODE_ID: u64 = 5;

fn start(auth: AdminAuth, rings: usize) -> MemnodeHandle {
    let node = Memnode::start(MemnodeConfig {
        auth,
        rpc_workers: 1,
        rpc_rings: rings,
        ..MemnodeConfig::local(CAPACITY)
    })
    .expect("start the memnode");
    node.set_memnode_id(NODE_ID);
    node
}

/// A queue pair asking for a ring (with `credential`), the ring it got and the node's
/// QPN of it.
fn connect(
    node: &MemnodeHandle,
    credential: Option<&str>,
) -> (RpcClient, Option<RpcRingInfo>, u32) {
    let config = RcConfig {
        retransmit_timeout: Duration::from_millis(20),
        ..RcConfig::default()
    };
    let mut transport = UdpTransport::bind(Ipv4Addr::LOCALHOST, config).expect("bind");
    let conn = connect_udp_qp_with_ring_as(
        QpPath::Direct,
        &node.admin_url(),
        &mut transport,
        credential,
        true,
    )
    .expect("connect");
    let (ring, qpn) = (conn.rpc_ring, conn.remote_qpn);
    (RpcClient::new(transport, &conn), ring, qpn)
}

fn slot(ring: &RpcRingInfo, seq: u64) -> RemoteAddr {
    let index = (seq - 1) % u64::from(ring.slots);
    RemoteAddr::new(ring.rkey, ring.va + index * u64::from(ring.slot_bytes))
}

/// WRITEs `request` as request `seq` of `ring` and waits for the reply.
fn ring_call(
    c: &RpcClient,
    ring: &RpcRingInfo,
    seq: u64,
    request: Request<'_>,
    id: u64,
) -> (RpcStatus, Vec<u8>) {
    let mut image = Vec::new();
    encode_slot(seq, &request.encode(id), &mut image).expect("encode");
    c.replies.post_recv(id, vec![0; 8192]).expect("post");
    let reply = c.worker.block_on(async {
        c.qp.write(slot(ring, seq), image).await.expect("the WRITE");
        let deadline = Instant::now() + Duration::from_secs(5);
        while Instant::now() < deadline {
            if let Some(r) = c.replies.poll() {
                return r.data;
            }
            c.worker.sleep(Duration::from_micros(50)).await;
        }
        panic!("no reply to ring request {seq}");
    });
    let r = parse_reply(&reply).expect("the reply parses");
    assert_eq!(r.id, id);
    (r.status, r.body.to_vec())
}

#[test]
fn requests_written_into_the_ring_are_executed_in_order_and_answered() {
    let node = start(AdminAuth::open(), 4);
    let (c, ring, qpn) = connect(&node, None);
    let ring = ring.expect("a ring");
    assert_eq!(
        ring.rkey, c.rkey,
        "an admin queue pair writes under the region's key"
    );
    let info = client::qp_info(&node.admin_url(), qpn).expect("the queue pair's info");
    assert_eq!(info.rpc_ring, Some(ring));
    // Three laps of the ring: fetch-and-adds see each other in order.
    let laps = 3 * u64::from(ring.slots);
    for seq in 1..=laps {
        let faa = Request::FetchAdd {
            rkey: c.rkey,
            va: c.base + 64,
            add: 1,
        };
        let (status, body) = ring_call(&c, &ring, seq, faa, 100 + seq);
        assert_eq!(status, RpcStatus::Ok);
        assert_eq!(body, (seq - 1).to_be_bytes().to_vec());
    }
    // A large write through a slot (a multi-packet WRITE) and its read back by SEND.
    let data = vec![0x3C; 3000];
    let write = Request::Write {
        rkey: c.rkey,
        va: c.base + 4096,
        data: &data,
    };
    assert_eq!(ring_call(&c, &ring, laps + 1, write, 7).0, RpcStatus::Ok);
    let read = Request::Read {
        rkey: c.rkey,
        va: c.base + 4096,
        len: 3000,
    };
    assert_eq!(c.call(read, 8), (RpcStatus::Ok, data));
    let stats = node.rpc_stats();
    assert_eq!(stats.ring_requests, laps + 1);
    assert!(stats.ring_polls > 0);
    let r = client::request(&node.admin_url(), "GET", "/metrics", None).expect("scrape");
    let text = String::from_utf8(r.body).expect("utf-8");
    assert!(text.contains(&format!(
        "dmkv_memnode_rpc_ring_requests_total {}",
        laps + 1
    )));
}

#[test]
fn another_queue_pairs_write_to_a_ring_is_refused() {
    let node = start(AdminAuth::open(), 4);
    let (a, ring_a, _) = connect(&node, None);
    let ring_a = ring_a.expect("a ring");
    let (b, ring_b, _) = connect(&node, None);
    assert_ne!(ring_b.expect("b's ring").va, ring_a.va);
    let mut image = Vec::new();
    let faa = Request::FetchAdd {
        rkey: b.rkey,
        va: b.base,
        add: 1,
    };
    encode_slot(1, &faa.encode(1), &mut image).expect("encode");
    let e = b
        .worker
        .block_on(b.qp.write(slot(&ring_a, 1), image.clone()));
    assert_eq!(e, Err(VerbError::Completion(CompletionError::RemoteAccess)));
    // Nor may the owner read its ring.
    let e = a.worker.block_on(a.qp.read(slot(&ring_a, 1), 64));
    assert_eq!(
        e.map(|_| ()),
        Err(VerbError::Completion(CompletionError::RemoteAccess))
    );
    std::thread::sleep(Duration::from_millis(20));
    assert_eq!(node.rpc_stats().ring_requests, 0);
    let mut word = [0u8; 8];
    node.memory().region.read(0, &mut word).expect("read");
    assert_eq!(word, [0; 8], "nothing was executed");
}

#[test]
fn rings_run_out_and_come_back_when_queue_pairs_go() {
    let node = start(AdminAuth::open(), 1);
    let (_a, ring, a_qpn) = connect(&node, None);
    assert!(ring.is_some());
    let (_b, none, _) = connect(&node, None);
    assert_eq!(none, None, "the one ring is taken");
    client::delete_qp(&node.admin_url(), a_qpn).expect("delete");
    let (c, again, _) = connect(&node, None);
    let again = again.expect("the ring is free again");
    assert_eq!(ring_call(&c, &again, 1, Request::Ping, 1).0, RpcStatus::Ok);
    // A node without rings answers without one.
    let off = start(AdminAuth::open(), 0);
    assert_eq!(connect(&off, None).1, None);
}

#[test]
fn a_scoped_queue_pair_writes_its_ring_under_its_own_key_whatever_its_grant() {
    let node = start(AdminAuth::secured(TOKEN, None).expect("auth"), 4);
    let now_ms = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .expect("clock")
        .as_millis() as u64;
    let grant = |nonce| {
        Grant {
            client_id: "ring-client".into(),
            memnode_id: NODE_ID,
            table: "t".into(),
            windows: vec![GrantWindow {
                offset: 8192,
                len: 4096,
            }],
            access: GrantAccess::ReadOnly,
            expires_at_ms: now_ms + 60_000,
            nonce: [nonce; 16],
        }
        .sign(&GrantKey::derive_from_admin_token(TOKEN).expect("key"))
        .expect("sign")
    };
    let (c, ring, _) = connect(&node, Some(&grant(1)));
    let ring = ring.expect("a ring");
    assert_eq!(ring.rkey, c.rkey, "the queue pair's own key");
    assert_ne!(ring.rkey, node.regions()[0].rkey);
    // A read-only grant: the ring is writable all the same, and a read inside the
    // window by ring works.
    let read = Request::Read {
        rkey: c.rkey,
        va: c.base + 8192,
        len: 16,
    };
    assert_eq!(
        ring_call(&c, &ring, 1, read, 1),
        (RpcStatus::Ok, vec![0; 16])
    );
    // A request by ring is admitted by the grant like any: no write.
    let write = Request::Write {
        rkey: c.rkey,
        va: c.base + 8192,
        data: &[1; 8],
    };
    assert_eq!(ring_call(&c, &ring, 2, write, 2).0, RpcStatus::AccessDenied);
    // Nor can an RPC reach the rings.
    let into_ring = Request::Write {
        rkey: c.rkey,
        va: ring.va + 4 * u64::from(ring.slot_bytes),
        data: &[1; 8],
    };
    assert_ne!(ring_call(&c, &ring, 3, into_ring, 3).0, RpcStatus::Ok);
    // Another scoped queue pair cannot write this ring, under its key or this one's.
    let (other, _, _) = connect(&node, Some(&grant(2)));
    for rkey in [other.rkey, ring.rkey] {
        let e = other.worker.block_on(
            other
                .qp
                .write(RemoteAddr::new(rkey, slot(&ring, 4).va), vec![0xFF; 64]),
        );
        assert_eq!(e, Err(VerbError::Completion(CompletionError::RemoteAccess)));
    }
    assert_eq!(ring_call(&c, &ring, 4, Request::Ping, 4).0, RpcStatus::Ok);
}
