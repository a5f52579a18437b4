//! RPCs to a memory node through the fault-injecting relay (loss, duplication,
//! reordering in both directions), mixed with one-sided atomics on the same word:
//! every request is executed exactly once (a retransmitted SEND is acknowledged, not
//! executed again), every reply arrives, and RPC and one-sided fetch-and-adds on one
//! word sum exactly.

#[path = "../../memnode/tests/common/rpc_client.rs"]
mod rpc_client;

use std::net::Ipv4Addr;
use std::time::Duration;

use dmkv_api::qp::{QpPath, connect_udp_qp};
use dmkv_api::rpc::{Request, RpcStatus};
use memnode::{Memnode, MemnodeConfig};
use rpc_client::RpcClient;
use testbed::relay::{FaultRelay, Faults};
use verbs::rc::RcConfig;
use verbs::transport::udp::UdpTransport;
use verbs::wr::RemoteAddr;

const RPC_ADDS: u64 = 150;
const ONE_SIDED_ADDS: u64 = 150;

#[test]
fn rpcs_and_one_sided_atomics_under_loss_apply_exactly_once() {
    let node = Memnode::start(MemnodeConfig {
        rpc_workers: 2,
        ..MemnodeConfig::local(1 << 20)
    })
    .expect("start the memnode");
    let relay = FaultRelay::new(Faults {
        drop: 0.08,
        duplicate: 0.05,
        reorder: 0.05,
        seed: 0x5707,
    });
    let config = RcConfig {
        retransmit_timeout: Duration::from_millis(5),
        max_retries: 64,
        ..RcConfig::default()
    };
    let connect = || {
        let mut transport = UdpTransport::bind(Ipv4Addr::LOCALHOST, config.clone()).expect("bind");
        let conn = connect_udp_qp(
            QpPath::Relay {
                relay: relay.as_ref(),
                memnode: node.data_addr(),
            },
            &node.admin_url(),
            &mut transport,
        )
        .expect("connect through the relay");
        (transport, conn)
    };
    let (rpc_transport, rpc_conn) = connect();
    let (one_sided_transport, one_sided_conn) = connect();
    let region = node.regions()[0].clone();
    let word = region.base_va + 128;

    let one_sided = std::thread::spawn(move || {
        let client = RpcClient::new(one_sided_transport, &one_sided_conn);
        client.worker.block_on(async {
            for _ in 0..ONE_SIDED_ADDS {
                client
                    .qp
                    .faa(RemoteAddr::new(region.rkey, word), 1 << 32)
                    .await
                    .expect("one-sided FAA");
            }
        });
    });
    let client = RpcClient::new(rpc_transport, &rpc_conn);
    let mut seen = Vec::new();
    for i in 0..RPC_ADDS {
        let faa = Request::FetchAdd {
            rkey: client.rkey,
            va: word,
            add: 1,
        };
        let (status, body) = client.call(faa, i);
        assert_eq!(status, RpcStatus::Ok, "request {i}");
        let old = u64::from_be_bytes(body.try_into().expect("an 8-byte word"));
        // The RPC adds are the low half: each saw exactly the ones before it.
        assert_eq!(old & 0xFFFF_FFFF, i, "request {i} saw {old:#x}");
        seen.push(old >> 32);
    }
    one_sided.join().expect("the one-sided client");
    let mut bytes = [0u8; 8];
    node.memory().region.read(128, &mut bytes).expect("read");
    let total = u64::from_le_bytes(bytes);
    assert_eq!(total, (ONE_SIDED_ADDS << 32) | RPC_ADDS);
    // The one-sided adds the RPCs observed never go backwards.
    assert!(seen.windows(2).all(|w| w[0] <= w[1]), "{seen:?}");
    let stats = node.rpc_stats();
    assert_eq!((stats.requests, stats.replies), (RPC_ADDS, RPC_ADDS));
    let faults = relay
        .counts
        .dropped
        .load(std::sync::atomic::Ordering::Relaxed);
    assert!(faults > 0, "the relay dropped nothing");
    relay.stop();
}
