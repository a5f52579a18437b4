//! A memory node with an admin token and a grant key: the admin API refuses callers
//! without a credential (memory untouched, queue pairs kept), and a client with a grant
//! for one table's extents gets a queue pair with its own key that serves exactly those
//! extents with exactly those rights, until the grant expires.

use std::net::Ipv4Addr;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use dmkv_api::grant::{Grant, GrantAccess, GrantKey, GrantWindow};
use dmkv_api::memnode_admin;
use memnode::auth::AdminAuth;
use memnode::client;
use memnode::{Memnode, MemnodeConfig, MemnodeHandle};
use verbs::mem::ScopeViolation;
use verbs::rc::RcConfig;
use verbs::transport::udp::UdpTransport;
use verbs::worker::{VerbError, Worker, WorkerConfig};
use verbs::wr::{CompletionError, RemoteAddr};

const CAPACITY: u64 = 1 << 20;
const TOKEN: &str = "memnode-admin-token-for-tests";
const NODE_ID: u64 = 7;
/// The table's extents: 8 KiB at 64 KiB and 4 KiB at 512 KiB.
const TABLE: [(u64, u64); 2] = [(64 << 10, 8 << 10), (512 << 10, 4 << 10)];

fn key() -> GrantKey {
    GrantKey::derive_from_admin_token(TOKEN).unwrap()
}

fn start() -> MemnodeHandle {
    let config = MemnodeConfig {
        auth: AdminAuth::secured(TOKEN, None).unwrap(),
        ..MemnodeConfig::local(CAPACITY)
    };
    let node = Memnode::start(config).unwrap();
    node.set_memnode_id(NODE_ID);
    // Every byte says which 4 KiB page it is in.
    for page in 0..CAPACITY / 4096 {
        node.memory()
            .region
            .write(page * 4096, &[page as u8 ^ 0x80; 4096])
            .unwrap();
    }
    node
}

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64
}

fn grant(access: GrantAccess, ttl_ms: u64) -> Grant {
    Grant {
        client_id: "client-a".into(),
        memnode_id: NODE_ID,
        table: "a".into(),
        windows: TABLE
            .iter()
            .map(|&(offset, len)| GrantWindow { offset, len })
            .collect(),
        access,
        expires_at_ms: now_ms() + ttl_ms,
        nonce: [1; 16],
    }
}

fn snapshot(node: &MemnodeHandle) -> Vec<u8> {
    let mut all = vec![0u8; CAPACITY as usize];
    node.memory().region.read(0, &mut all).unwrap();
    all
}

fn in_table(offset: u64, len: u64) -> bool {
    TABLE
        .iter()
        .any(|&(o, l)| offset >= o && offset + len <= o + l)
}

#[test]
fn without_a_credential_every_admin_route_is_refused_and_nothing_changes() {
    let node = start();
    let a = node.admin_url();
    let mut transport = UdpTransport::bind(Ipv4Addr::LOCALHOST, RcConfig::default()).unwrap();
    let conn = dmkv_api::qp::connect_udp_qp_as(
        dmkv_api::qp::QpPath::Direct,
        &a,
        &mut transport,
        Some(TOKEN),
    )
    .unwrap();
    let rkey = conn.regions[0].rkey;
    let before = snapshot(&node);
    let zero = format!(r#"{{"va": {}, "len": 4096}}"#, conn.regions[0].base_va);
    let create = format!(
        r#"{{"qpn": 5, "psn": 0, "addr": "127.0.0.1:9", "server_addr": "{}"}}"#,
        node.data_addr()
    );
    let attempts: [(&'static str, String, Option<&[u8]>); 6] = [
        (
            "POST",
            format!("/v1/regions/{rkey}/zero"),
            Some(zero.as_bytes()),
        ),
        ("DELETE", format!("/v1/qps/{}", conn.remote_qpn), None),
        ("POST", "/v1/qps".into(), Some(create.as_bytes())),
        ("GET", "/v1/qps".into(), None),
        ("GET", "/v1/node".into(), None),
        ("GET", "/v1/regions".into(), None),
    ];
    for credential in [None, Some("wrong-token"), Some("AAAA")] {
        for (method, path, body) in &attempts {
            let r = memnode_admin::request_as(&a, credential, method, path, *body).unwrap();
            assert_eq!(r.status, 401, "{method} {path} with {credential:?}");
            let e: dmkv_api::ErrorBody = serde_json::from_slice(&r.body).unwrap();
            assert!(!e.error.is_empty());
            assert_eq!(r.header("www-authenticate"), Some("Bearer"));
        }
    }
    assert_eq!(snapshot(&node), before, "memory unchanged");
    assert_eq!(node.qps().len(), 1, "the queue pair is still there");
    // Liveness and metrics stay open; the token opens everything.
    assert_eq!(
        client::request(&a, "GET", "/healthz", None).unwrap().status,
        200
    );
    assert_eq!(
        client::request(&a, "GET", "/metrics", None).unwrap().status,
        200
    );
    assert_eq!(
        memnode_admin::list_qps_as(&a, Some(TOKEN)).unwrap().len(),
        1
    );
    memnode_admin::delete_qp_as(&a, Some(TOKEN), conn.remote_qpn).unwrap();
    assert_eq!(node.qps().len(), 0);
}

#[test]
fn forged_modified_or_foreign_grants_are_refused() {
    let node = start();
    let a = node.admin_url();
    let create = format!(
        r#"{{"qpn": 5, "psn": 0, "addr": "127.0.0.1:9", "server_addr": "{}"}}"#,
        node.data_addr()
    );
    let good = grant(GrantAccess::ReadWrite, 60_000).sign(&key()).unwrap();
    // Signed under another key.
    let forged = grant(GrantAccess::ReadWrite, 60_000)
        .sign(&GrantKey::from_secret(b"an attacker's own key").unwrap())
        .unwrap();
    // A character of the signed text changed (wider rights, longer windows...).
    let mut modified = good.clone().into_bytes();
    modified[20] = if modified[20] == b'A' { b'B' } else { b'A' };
    let modified = String::from_utf8(modified).unwrap();
    // Valid, but for another node, or expired.
    let other_node = Grant {
        memnode_id: NODE_ID + 1,
        ..grant(GrantAccess::ReadWrite, 60_000)
    }
    .sign(&key())
    .unwrap();
    let expired = Grant {
        expires_at_ms: now_ms() - 1,
        ..grant(GrantAccess::ReadWrite, 0)
    }
    .sign(&key())
    .unwrap();
    for (what, g) in [
        ("forged", &forged),
        ("modified", &modified),
        ("other node", &other_node),
        ("expired", &expired),
    ] {
        let r = memnode_admin::request_as(&a, Some(g), "POST", "/v1/qps", Some(create.as_bytes()))
            .unwrap();
        assert_eq!(
            r.status,
            401,
            "{what}: {}",
            String::from_utf8_lossy(&r.body)
        );
    }
    assert_eq!(node.qps().len(), 0);
    // A grant does not open the admin routes.
    for (method, path) in [("GET", "/v1/qps"), ("POST", "/v1/regions/1/zero")] {
        let r = memnode_admin::request_as(&a, Some(&good), method, path, Some(b"{}")).unwrap();
        assert_eq!(r.status, 403, "{method} {path}");
    }
    let r = memnode_admin::request_as(&a, Some(&good), "POST", "/v1/qps", Some(create.as_bytes()))
        .unwrap();
    assert_eq!(r.status, 201, "{}", String::from_utf8_lossy(&r.body));
}

/// A client connected with a grant for table `a`.
struct Scoped {
    worker: Worker,
    qp: verbs::worker::Qp,
    base: RemoteAddr,
    region_rkey: u32,
    remote_qpn: u32,
    grant: String,
}

fn connect(node: &MemnodeHandle, access: GrantAccess, ttl_ms: u64) -> Scoped {
    let grant = grant(access, ttl_ms).sign(&key()).unwrap();
    let config = RcConfig {
        retransmit_timeout: Duration::from_millis(20),
        ..RcConfig::default()
    };
    let mut transport = UdpTransport::bind(Ipv4Addr::LOCALHOST, config).unwrap();
    let conn = dmkv_api::qp::connect_udp_qp_as(
        dmkv_api::qp::QpPath::Direct,
        &node.admin_url(),
        &mut transport,
        Some(&grant),
    )
    .unwrap();
    let region = &conn.regions[0];
    let rkey = conn.rkey.expect("a queue pair of its own key");
    assert_ne!(rkey, region.rkey);
    let worker = Worker::new(Box::new(transport), WorkerConfig::default());
    let qp = worker.qp(conn.handle);
    Scoped {
        worker,
        qp,
        base: RemoteAddr::new(rkey, region.base_va),
        region_rkey: region.rkey,
        remote_qpn: conn.remote_qpn,
        grant,
    }
}

const NAK: Result<Vec<u8>, VerbError> = Err(VerbError::Completion(CompletionError::RemoteAccess));

#[test]
fn a_scan_of_the_node_reads_only_the_granted_table() {
    let node = start();
    let c = connect(&node, GrantAccess::ReadWrite, 60_000);
    let (mut served, mut refused) = (0, 0);
    c.worker.block_on(async {
        for page in 0..CAPACITY / 4096 {
            let got = c.qp.read(c.base.offset(page * 4096), 4096).await;
            if in_table(page * 4096, 4096) {
                assert_eq!(got, Ok(vec![page as u8 ^ 0x80; 4096]), "page {page}");
                served += 1;
            } else {
                assert_eq!(got, NAK, "page {page}");
                refused += 1;
            }
        }
        // The region's own key does not work on this queue pair, even inside the table.
        let region_key = RemoteAddr::new(c.region_rkey, c.base.va + TABLE[0].0);
        assert_eq!(c.qp.read(region_key, 8).await, NAK);
        // Writes inside the table land.
        c.qp.write(c.base.offset(TABLE[0].0), vec![9; 16])
            .await
            .unwrap();
        assert_eq!(
            c.qp.faa(c.base.offset(TABLE[0].0 + 64), 1).await.unwrap(),
            u64::from_le_bytes([0x80 ^ 16; 8])
        );
    });
    assert_eq!(served, 3);
    assert_eq!(refused, CAPACITY / 4096 - 3);
    let v = node.access_violations();
    assert_eq!(v.get(ScopeViolation::OutsideWindow), refused);
    assert_eq!(v.get(ScopeViolation::WrongRkey), 1);
    // The metric carries the reasons.
    let text = String::from_utf8(
        client::request(&node.admin_url(), "GET", "/metrics", None)
            .unwrap()
            .body,
    )
    .unwrap();
    assert!(
        text.contains(&format!(
            "dmkv_memnode_access_violations_total{{reason=\"outside_window\"}} {refused}"
        )),
        "{text}"
    );
    // Its owner may look at and delete its queue pair with the grant.
    let a = node.admin_url();
    let info = memnode_admin::qp_info_as(&a, Some(&c.grant), c.remote_qpn).unwrap();
    assert_eq!(info.client_id.as_deref(), Some("client-a"));
    assert_eq!(info.grants.len(), 1);
    memnode_admin::delete_qp_as(&a, Some(&c.grant), c.remote_qpn).unwrap();
}

#[test]
fn a_read_only_grant_cannot_write_cas_or_faa() {
    let node = start();
    let c = connect(&node, GrantAccess::ReadOnly, 60_000);
    let before = snapshot(&node);
    let at = c.base.offset(TABLE[0].0);
    let refused = Err(VerbError::Completion(CompletionError::RemoteAccess));
    c.worker.block_on(async {
        assert_eq!(
            c.qp.write(at, vec![1; 8]).await,
            refused.clone().map(|_: ()| ())
        );
        assert_eq!(c.qp.cas(at, 0, 1).await, refused.clone().map(|_: ()| 0));
        assert_eq!(c.qp.faa(at, 1).await, refused.clone().map(|_: ()| 0));
        assert_eq!(c.qp.read(at, 8).await, Ok(vec![0x80 ^ 16; 8]));
    });
    assert_eq!(snapshot(&node), before, "memory untouched");
    assert_eq!(node.access_violations().get(ScopeViolation::Rights), 3);
}

#[test]
fn an_expired_grant_stops_access_until_a_fresh_one_arrives() {
    let node = start();
    let c = connect(&node, GrantAccess::ReadWrite, 400);
    let at = c.base.offset(TABLE[1].0);
    c.worker.block_on(async {
        assert!(c.qp.read(at, 8).await.is_ok());
    });
    std::thread::sleep(Duration::from_millis(500));
    c.worker.block_on(async {
        assert_eq!(c.qp.read(at, 8).await, NAK);
    });
    assert!(node.access_violations().get(ScopeViolation::Expired) >= 1);
    // An expired grant cannot re-grant, a fresh one for the same client can.
    let a = node.admin_url();
    let stale = memnode_admin::update_grant_as(&a, Some(TOKEN), c.remote_qpn, &c.grant);
    assert!(stale.is_err());
    let fresh = grant(GrantAccess::ReadWrite, 60_000).sign(&key()).unwrap();
    let info = memnode_admin::update_grant_as(&a, Some(&fresh), c.remote_qpn, &fresh).unwrap();
    assert!(info.grants[0].expires_at_ms > now_ms());
    c.worker.block_on(async {
        assert!(c.qp.read(at, 8).await.is_ok());
    });
    // Another client's grant cannot take over the queue pair.
    let other = Grant {
        client_id: "client-b".into(),
        ..grant(GrantAccess::ReadWrite, 60_000)
    }
    .sign(&key())
    .unwrap();
    let r = memnode_admin::update_grant_as(&a, Some(TOKEN), c.remote_qpn, &other);
    assert!(r.is_err());
    let r = memnode_admin::delete_qp_as(&a, Some(&other), c.remote_qpn);
    assert!(r.is_err());
    assert_eq!(node.qps().len(), 1);
}

#[test]
fn unscoped_grants_give_whole_region_access_for_measurements() {
    let mut auth = AdminAuth::secured(TOKEN, None).unwrap();
    auth.scoping = false;
    let node = Memnode::start(MemnodeConfig {
        auth,
        ..MemnodeConfig::local(CAPACITY)
    })
    .unwrap();
    node.set_memnode_id(NODE_ID);
    let grant = grant(GrantAccess::ReadOnly, 60_000).sign(&key()).unwrap();
    let mut transport = UdpTransport::bind(Ipv4Addr::LOCALHOST, RcConfig::default()).unwrap();
    let conn = dmkv_api::qp::connect_udp_qp_as(
        dmkv_api::qp::QpPath::Direct,
        &node.admin_url(),
        &mut transport,
        Some(&grant),
    )
    .unwrap();
    assert_eq!(conn.rkey, None);
    let base = RemoteAddr::new(conn.regions[0].rkey, conn.regions[0].base_va);
    let worker = Worker::new(Box::new(transport), WorkerConfig::default());
    let qp = worker.qp(conn.handle);
    worker.block_on(async {
        assert!(qp.read(base, 8).await.is_ok());
    });
}
