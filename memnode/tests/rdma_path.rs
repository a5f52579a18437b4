//! The memory node's RDMA NIC path: without a device (or without the `rdma` feature)
//! `--transport rdma` fails naming the device and the `udp` transport, and the RDMA
//! routes answer that the node serves none; with a device (an RDMA NIC or rxe) a
//! client's RC queue pair does READ, WRITE, CAS and FAA on the node's memory through
//! the NIC, whole-region with the admin token and confined to a grant's extents with a
//! grant, and the transport conformance suite (`verbs::conformance`) passes over it.
//! Without a device those print `SKIPPED: …` (and fail with `DMKV_REQUIRE_RDMA=1`).

use std::time::{SystemTime, UNIX_EPOCH};

use dmkv_api::grant::{Grant, GrantAccess, GrantKey, GrantWindow};
use dmkv_api::memnode_admin;
use dmkv_api::memnode_rdma::{CreateRdmaQpRequest, gid_to_hex};
use memnode::auth::AdminAuth;
use memnode::rdma_serving::RdmaServeConfig;
use memnode::{Memnode, MemnodeConfig, MemnodeHandle, StartError};

const CAPACITY: u64 = 1 << 20;
const TOKEN: &str = "memnode-admin-token-for-rdma-tests";
const NODE_ID: u64 = 3;

fn secured() -> MemnodeConfig {
    MemnodeConfig {
        auth: AdminAuth::secured(TOKEN, None).unwrap(),
        ..MemnodeConfig::local(CAPACITY)
    }
}

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64
}

fn grant(windows: &[(u64, u64)], access: GrantAccess) -> String {
    Grant {
        client_id: "client-r".into(),
        memnode_id: NODE_ID,
        table: "t".into(),
        windows: windows
            .iter()
            .map(|&(offset, len)| GrantWindow { offset, len })
            .collect(),
        access,
        expires_at_ms: now_ms() + 60_000,
        nonce: [2; 16],
    }
    .sign(&GrantKey::derive_from_admin_token(TOKEN).unwrap())
    .unwrap()
}

#[test]
fn a_missing_device_is_named_with_the_udp_transport() {
    let config = MemnodeConfig {
        rdma: Some(RdmaServeConfig {
            device: "no-such-rdma-device".into(),
            gid_index: None,
            ib_port: 1,
        }),
        ..secured()
    };
    match Memnode::start(config) {
        Err(StartError::Rdma(msg)) => {
            eprintln!("{msg}");
            assert!(msg.contains("no-such-rdma-device"), "{msg}");
            assert!(msg.contains("`udp`"), "{msg}");
            if cfg!(not(feature = "rdma")) {
                assert!(msg.contains("`rdma` cargo feature"), "{msg}");
            }
        }
        Err(other) => panic!("expected an RDMA error, got {other}"),
        Ok(_) => panic!("a node started on a device that does not exist"),
    }
}

#[test]
fn a_node_without_rdma_says_so_on_its_rdma_routes() {
    let node = Memnode::start(secured()).unwrap();
    let admin = node.admin_url();
    let req = CreateRdmaQpRequest {
        qpn: 0x12,
        psn: 1,
        gid: gid_to_hex(&[1; 16]),
        lid: 0,
        mtu: 1024,
        grants: Vec::new(),
    };
    let e = memnode_admin::create_rdma_qp_as(&admin, Some(TOKEN), &req).unwrap_err();
    assert_eq!(e.status(), Some(409), "{e}");
    assert_eq!(e.code(), Some("rdma_not_served"), "{e}");
    assert!(e.to_string().contains("`udp`"), "{e}");
    // Authenticated like every other route: no credential, no answer.
    let e = memnode_admin::create_rdma_qp_as(&admin, None, &req).unwrap_err();
    assert_eq!(e.status(), Some(401), "{e}");
    let list = memnode_admin::list_rdma_qps_as(&admin, Some(TOKEN)).unwrap();
    assert_eq!((list.device, list.qps.len()), (None, 0));
    node.set_memnode_id(NODE_ID);
    let g = grant(&[(0, 4096)], GrantAccess::ReadWrite);
    let e = memnode_admin::list_rdma_qps_as(&admin, Some(&g)).unwrap_err();
    assert_eq!(e.status(), Some(403), "{e}");
    let e = memnode_admin::delete_rdma_qp_as(&admin, Some(TOKEN), 5).unwrap_err();
    assert_eq!(e.status(), Some(409), "{e}");
    let e = memnode_admin::request_as(
        &admin,
        Some(TOKEN),
        "POST",
        "/v1/rdma/qps",
        Some(b"{\"qpn\": 1}"),
    )
    .unwrap();
    assert_eq!(e.status, 422);
}

/// A node serving the device tests run on, or `None` after a printed skip.
#[cfg(feature = "rdma")]
fn rdma_node(test: &str) -> Option<MemnodeHandle> {
    let device = match verbs::transport::rdma::probe() {
        Ok(device) => device,
        Err(why) => {
            assert!(
                std::env::var("DMKV_REQUIRE_RDMA").as_deref() != Ok("1"),
                "{test}: DMKV_REQUIRE_RDMA=1 but no RDMA device can be used: {why}"
            );
            println!(
                "SKIPPED: {test}: no RDMA device ({why}); set DMKV_REQUIRE_RDMA=1 to fail instead"
            );
            return None;
        }
    };
    let config = MemnodeConfig {
        rdma: Some(RdmaServeConfig {
            device,
            gid_index: std::env::var("DMKV_RDMA_GID_INDEX")
                .ok()
                .and_then(|g| g.parse().ok()),
            ib_port: 1,
        }),
        ..secured()
    };
    let node = Memnode::start(config).unwrap();
    node.set_memnode_id(NODE_ID);
    Some(node)
}

#[cfg(not(feature = "rdma"))]
fn rdma_node(test: &str) -> Option<MemnodeHandle> {
    assert!(
        std::env::var("DMKV_REQUIRE_RDMA").as_deref() != Ok("1"),
        "{test}: DMKV_REQUIRE_RDMA=1 but this build has no `rdma` feature (cargo test -p memnode --features rdma)"
    );
    println!(
        "SKIPPED: {test}: built without the `rdma` feature (cargo test -p memnode --features rdma)"
    );
    None
}

#[test]
fn one_sided_verbs_through_the_nic_with_the_admin_token() {
    let Some(node) = rdma_node("one_sided_verbs_through_the_nic_with_the_admin_token") else {
        return;
    };
    #[cfg(feature = "rdma")]
    on_device::whole_region(&node, TOKEN);
    drop(node);
}

#[test]
fn the_verbs_conformance_suite_passes_over_rdma() {
    let Some(node) = rdma_node("the_verbs_conformance_suite_passes_over_rdma") else {
        return;
    };
    #[cfg(feature = "rdma")]
    on_device::conformance(&node, TOKEN);
    drop(node);
}

#[test]
fn a_grant_confines_an_rdma_queue_pair_to_its_extents() {
    let Some(node) = rdma_node("a_grant_confines_an_rdma_queue_pair_to_its_extents") else {
        return;
    };
    #[cfg(feature = "rdma")]
    on_device::granted(
        &node,
        &grant(&[(64 << 10, 8 << 10)], GrantAccess::ReadWrite),
    );
    drop(node);
}

#[cfg(feature = "rdma")]
mod on_device {
    use dmkv_api::memnode_admin;
    use dmkv_api::memnode_rdma::RdmaWindow;
    use dmkv_api::qp_rdma::connect_rdma_qp_as;
    use memnode::MemnodeHandle;
    use verbs::transport::rdma::{RdmaConfig, RdmaTransport};
    use verbs::worker::{VerbError, Worker, WorkerConfig};
    use verbs::wr::{CompletionError, RemoteAddr};

    fn client(
        node: &MemnodeHandle,
        credential: &str,
    ) -> (Worker, verbs::worker::Qp, Vec<RdmaWindow>, u32) {
        let device = verbs::transport::rdma::probe().unwrap();
        let mut t = RdmaTransport::open(RdmaConfig {
            device: Some(device),
            ..RdmaConfig::default()
        })
        .unwrap();
        let conn = connect_rdma_qp_as(&node.admin_url(), &mut t, Some(credential)).unwrap();
        let worker = Worker::new(Box::new(t), WorkerConfig::default());
        let qp = worker.qp(conn.handle);
        (worker, qp, conn.windows, conn.remote_qpn)
    }

    fn at(w: &RdmaWindow, offset: u64) -> RemoteAddr {
        RemoteAddr::new(w.rkey, w.nic_va + offset)
    }

    pub fn whole_region(node: &MemnodeHandle, token: &str) {
        let (worker, qp, windows, qpn) = client(node, token);
        assert_eq!(windows.len(), 1);
        let w = windows[0];
        assert_eq!(w.len, node.regions()[0].len);
        node.memory().region.write(4096, &[7u8; 64]).unwrap();
        worker.block_on(async {
            assert_eq!(qp.read(at(&w, 4096), 64).await, Ok(vec![7u8; 64]));
            qp.write(at(&w, 8192), vec![9u8; 300]).await.unwrap();
            assert_eq!(
                qp.cas(at(&w, 8192), u64::from_le_bytes([9; 8]), 5).await,
                Ok(u64::from_le_bytes([9; 8]))
            );
            assert_eq!(qp.faa(at(&w, 8192), 2).await, Ok(5));
        });
        let mut back = [0u8; 16];
        node.memory().region.read(8192, &mut back).unwrap();
        assert_eq!(u64::from_le_bytes(back[..8].try_into().unwrap()), 7);
        assert_eq!(back[8..], [9u8; 8]);
        let listed = memnode_admin::list_rdma_qps_as(&node.admin_url(), Some(token)).unwrap();
        assert_eq!(listed.qps.len(), 1);
        memnode_admin::delete_rdma_qp_as(&node.admin_url(), Some(token), qpn).unwrap();
        assert!(
            memnode_admin::list_rdma_qps_as(&node.admin_url(), Some(token))
                .unwrap()
                .qps
                .is_empty()
        );
    }

    pub fn conformance(node: &MemnodeHandle, token: &str) {
        use verbs::conformance::{self, SCRATCH_BYTES, Scratch};
        let (worker, qp, windows, _) = client(node, token);
        let w = windows[0];
        // The last SCRATCH_BYTES of the region, so the bounds checks reach its end.
        let scratch = Scratch {
            base: at(&w, w.len - SCRATCH_BYTES),
            region_end: w.nic_va + w.len,
        };
        let report = worker.block_on(async { conformance::run(&qp, scratch).await });
        assert!(report.passed(), "{}", report.failures());
    }

    pub fn granted(node: &MemnodeHandle, grant: &str) {
        let (worker, qp, windows, _) = client(node, grant);
        assert_eq!(windows.len(), 1);
        let w = windows[0];
        assert_eq!(
            (w.va - node.regions()[0].base_va, w.len),
            (64 << 10, 8 << 10)
        );
        worker.block_on(async {
            qp.write(at(&w, 0), vec![3u8; 64]).await.unwrap();
            // One byte past the extent: the NIC refuses it.
            assert_eq!(
                qp.read(at(&w, w.len), 8).await,
                Err(VerbError::Completion(CompletionError::RemoteAccess))
            );
        });
        let mut back = [0u8; 64];
        node.memory().region.read(64 << 10, &mut back).unwrap();
        assert_eq!(back, [3u8; 64]);
    }
}
