//! A switch in front of an authenticated memory node: its admin API needs the memory
//! node admin token, a client presenting a grant gets a connection the switch confines
//! to the grant's windows and rights, and the grant's expiry ends access there as it
//! does on the node itself. Without these, anyone who reached the switch got a
//! whole-region queue pair on every memory node behind it.

use std::net::Ipv4Addr;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use accel_p4::switch::{SoftSwitch, SwitchConfig, SwitchHandle};
use dmkv_api::grant::{Grant, GrantAccess, GrantKey, GrantWindow};
use dmkv_api::qp::{QpPath, connect_udp_qp_as};
use dmkv_api::switch::{SwitchQpRequest, create_qp_as, remove_route_as, update_grant_as};
use memnode::auth::AdminAuth;
use memnode::{Memnode, MemnodeConfig, MemnodeHandle};
use verbs::rc::RcConfig;
use verbs::transport::udp::UdpTransport;
use verbs::worker::{VerbError, Worker, WorkerConfig};
use verbs::wr::{CompletionError, RemoteAddr};

const CAPACITY: u64 = 1 << 20;
const TOKEN: &str = "memnode-admin-token-for-switch-tests";
const NODE_ID: u64 = 7;
/// Table `a`'s extents: 8 KiB at 64 KiB and 4 KiB at 512 KiB.
const TABLE: [(u64, u64); 2] = [(64 << 10, 8 << 10), (512 << 10, 4 << 10)];

fn key() -> GrantKey {
    GrantKey::derive_from_admin_token(TOKEN).unwrap()
}

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64
}

fn memnode() -> MemnodeHandle {
    let node = Memnode::start(MemnodeConfig {
        auth: AdminAuth::secured(TOKEN, None).unwrap(),
        ..MemnodeConfig::local(CAPACITY)
    })
    .unwrap();
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

fn switch() -> SwitchHandle {
    SoftSwitch::start(SwitchConfig {
        memnode_token: Some(TOKEN.into()),
        ..SwitchConfig::local()
    })
    .unwrap()
}

fn grant(client: &str, memnode_id: u64, access: GrantAccess, ttl_ms: u64) -> String {
    Grant {
        client_id: client.into(),
        memnode_id,
        table: "a".into(),
        windows: TABLE
            .iter()
            .map(|&(offset, len)| GrantWindow { offset, len })
            .collect(),
        access,
        expires_at_ms: now_ms() + ttl_ms,
        nonce: [3; 16],
    }
    .sign(&key())
    .unwrap()
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

/// A client connected through the switch with `grant`.
struct Scoped {
    worker: Worker,
    qp: verbs::worker::Qp,
    base: RemoteAddr,
    conn: u8,
}

fn connect(sw: &SwitchHandle, node: &MemnodeHandle, grant: &str) -> Scoped {
    let config = RcConfig {
        retransmit_timeout: Duration::from_millis(20),
        ..RcConfig::default()
    };
    let mut transport = UdpTransport::bind(Ipv4Addr::LOCALHOST, config).unwrap();
    let admin = sw.admin_url();
    let c = connect_udp_qp_as(
        QpPath::ViaSwitch(&admin),
        &node.admin_url(),
        &mut transport,
        Some(grant),
    )
    .unwrap();
    let region = &c.regions[0];
    let worker = Worker::new(Box::new(transport), WorkerConfig::default());
    let qp = worker.qp(c.handle);
    Scoped {
        worker,
        qp,
        // Through the switch the region's own key: the switch's functions match on it.
        base: RemoteAddr::new(region.rkey, region.base_va),
        conn: c.switch_conn.expect("a switch connection id"),
    }
}

const NAK: Result<Vec<u8>, VerbError> = Err(VerbError::Completion(CompletionError::RemoteAccess));

#[test]
fn a_scan_through_the_switch_reads_only_the_granted_table() {
    let node = memnode();
    let sw = switch();
    let c = connect(
        &sw,
        &node,
        &grant("client-a", NODE_ID, GrantAccess::ReadWrite, 60_000),
    );
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
        // Across the end of an extent: refused, though it starts inside.
        let end = TABLE[0].0 + TABLE[0].1;
        assert_eq!(c.qp.read(c.base.offset(end - 8), 16).await, NAK);
        // Writes and atomics inside the table land; outside they are refused.
        c.qp.write(c.base.offset(TABLE[0].0), vec![9; 16])
            .await
            .unwrap();
        assert_eq!(
            c.qp.faa(c.base.offset(TABLE[0].0 + 64), 1).await.unwrap(),
            u64::from_le_bytes([0x80 ^ 16; 8])
        );
        assert!(c.qp.write(c.base.offset(0), vec![1; 8]).await.is_err());
        assert!(c.qp.cas(c.base.offset(4096), 0, 1).await.is_err());
    });
    assert_eq!(served, 3);
    assert_eq!(refused, CAPACITY / 4096 - 3);
    // Nothing outside the table was written.
    let after = snapshot(&node);
    assert_eq!(&after[..8], &[0x80; 8]);
    assert_eq!(&after[4096..4104], &[0x81; 8]);
    let counters = sw.control().pipeline().counters();
    assert_eq!(counters.scope.denied, refused + 3, "{:?}", counters.scope);
}

#[test]
fn a_read_only_grant_cannot_write_cas_or_faa_through_the_switch() {
    let node = memnode();
    let sw = switch();
    let c = connect(
        &sw,
        &node,
        &grant("client-a", NODE_ID, GrantAccess::ReadOnly, 60_000),
    );
    let before = snapshot(&node);
    let at = c.base.offset(TABLE[0].0);
    c.worker.block_on(async {
        assert!(c.qp.write(at, vec![1; 8]).await.is_err());
        assert!(c.qp.cas(at, 0, 1).await.is_err());
        assert!(c.qp.faa(at, 1).await.is_err());
        assert_eq!(c.qp.read(at, 8).await, Ok(vec![0x80 ^ 16; 8]));
    });
    assert_eq!(snapshot(&node), before, "memory untouched");
}

#[test]
fn an_expired_grant_ends_access_through_the_switch_until_a_fresh_one_arrives() {
    let node = memnode();
    let sw = switch();
    let first = grant("client-a", NODE_ID, GrantAccess::ReadWrite, 600);
    let c = connect(&sw, &node, &first);
    let at = c.base.offset(TABLE[1].0);
    c.worker.block_on(async {
        assert!(c.qp.read(at, 8).await.is_ok());
    });
    std::thread::sleep(Duration::from_millis(1000));
    c.worker.block_on(async {
        assert_eq!(c.qp.read(at, 8).await, NAK);
    });
    let admin = sw.admin_url();
    // An expired grant is no credential; a fresh one for the same client restores access.
    assert!(update_grant_as(&admin, Some(&first), c.conn, &first).is_err());
    let fresh = grant("client-a", NODE_ID, GrantAccess::ReadWrite, 60_000);
    update_grant_as(&admin, Some(&fresh), c.conn, &fresh).unwrap();
    c.worker.block_on(async {
        assert!(c.qp.read(at, 8).await.is_ok());
    });
    // Another client can neither add its grant to the connection nor remove it.
    let other = grant("client-b", NODE_ID, GrantAccess::ReadWrite, 60_000);
    let e = update_grant_as(&admin, Some(&other), c.conn, &other).unwrap_err();
    assert_eq!(e.status(), Some(403), "{e}");
    let e = remove_route_as(&admin, Some(&other), c.conn).unwrap_err();
    assert_eq!(e.status(), Some(403), "{e}");
    // Its owner can.
    remove_route_as(&admin, Some(&fresh), c.conn).unwrap();
}

#[test]
fn the_switch_admin_api_needs_the_token_and_grants_reach_only_client_routes() {
    let node = memnode();
    let sw = switch();
    let admin = sw.admin_url();
    let req = SwitchQpRequest {
        memnode: node.admin_url(),
        qpn: 0x77,
        psn: 1,
        addr: "127.0.0.1:40000".parse().unwrap(),
        pmtu: 1024,
        coalesce: false,
    };
    // No credential, a wrong one, a forged grant: 401, and no connection made.
    for credential in [None, Some("not-the-token"), Some("Zm9yZ2Vk")] {
        let e = create_qp_as(&admin, credential, &req).unwrap_err();
        assert_eq!(e.status(), Some(401), "{credential:?}: {e}");
    }
    assert!(sw.control().state().routes.is_empty());
    // A grant for another memory node: 403.
    let elsewhere = grant("client-a", NODE_ID + 1, GrantAccess::ReadWrite, 60_000);
    let e = create_qp_as(&admin, Some(&elsewhere), &req).unwrap_err();
    assert_eq!(e.status(), Some(403), "{e}");
    assert!(sw.control().state().routes.is_empty());
    // A valid grant on an administrator's route: 403.
    let g = grant("client-a", NODE_ID, GrantAccess::ReadWrite, 60_000);
    for (method, path, body) in [
        ("PUT", "/v1/mode", Some(&br#"{"mode":0}"#[..])),
        ("PUT", "/v1/faults", Some(&b"{}"[..])),
        ("GET", "/v1/tables", None),
        ("POST", "/v1/routes", Some(&b"{}"[..])),
    ] {
        let r = dmkv_api::HttpClient::new(&admin)
            .unwrap()
            .with_token(Some(g.clone()))
            .request(method, path, body)
            .unwrap();
        assert_eq!(r.status, 403, "{method} {path}");
    }
    // The token opens everything; its connections are not scoped.
    let resp = create_qp_as(&admin, Some(TOKEN), &req).unwrap();
    let conn = resp.conn.unwrap();
    assert!(sw.control().scope(conn).is_none());
}
