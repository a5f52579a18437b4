//! kvstore clients through the soft switch: Clover tables on `udp` with every queue
//! pair created through the switch (`POST /v1/qps`), checked for linearizability;
//! and a client that learns the switch from the metadata service.

use std::time::{Duration, Instant};

use accel_p4::control::ControlState;
use accel_p4::switch::{SoftSwitch, SwitchConfig, SwitchHandle};
use kvstore::{AcceleratorUse, Client, ClientOptions, TableSpec, TransportKind};
use memnode::registrar::{HttpRegistrar, Registrar};
use memnode::{Memnode, MemnodeConfig};
use metadata::server::{MetadataServer, ServerConfig, StoreConfig};
use metadata::store::MemStore;
use testbed::EmbeddedOptions;
use testbed::lincheck::{Config, check};
use testbed::workload::{Workload, run};

fn switch(mode: u32) -> SwitchHandle {
    let mut config = SwitchConfig::local();
    config.initial = ControlState {
        mode,
        ..ControlState::default()
    };
    SoftSwitch::start(config).expect("switch starts")
}

fn options(sw: &SwitchHandle) -> ClientOptions {
    ClientOptions::default()
        .with_grace(Duration::from_millis(20))
        .with_connection(
            kvstore::ConnectionOptions::default()
                .with_accelerator(AcceleratorUse::Via(sw.admin_url())),
        )
        // Generous retransmission budget: the machine running the tests is loaded.
        .with_rc(verbs::rc::RcConfig {
            max_retries: 40,
            ..verbs::rc::RcConfig::default()
        })
}

/// Run `w` on a fresh Clover table and check the history.
fn check_run(client: &Client, w: Workload, label: &str) -> kvstore::OpStats {
    client
        .create_table("hot", &TableSpec::clover(256))
        .expect("table");
    let r = run(client, "hot", w);
    let report = check(&r.history, &Config::default()).expect("well-formed history");
    let mut total = kvstore::OpStats::default();
    for s in &r.stats {
        total.add(&s.foreground);
    }
    println!(
        "[{label}] {} operations, {} unresolved, {} link CAS failures, {} round trips: {:?}",
        r.history.len(),
        r.errors.len(),
        total.cas_failures,
        total.round_trips,
        report.verdict
    );
    assert!(report.is_linearizable(), "[{label}] {:?}", report.verdict);
    assert!(
        r.errors.len() * 20 <= r.history.len(),
        "[{label}] too many unresolved operations: {:?}",
        r.errors.iter().take(5).collect::<Vec<_>>()
    );
    total
}

#[test]
fn clover_through_the_switch_is_linearizable() {
    let sw = switch(0);
    let client = testbed::embedded_client(EmbeddedOptions {
        memnodes: 2,
        transport: TransportKind::Udp,
        client: options(&sw),
        ..EmbeddedOptions::default()
    })
    .expect("cluster");
    check_run(
        &client,
        Workload {
            threads: 3,
            tasks: 4,
            ops_per_task: 80,
            keys: 3,
            seed: 11,
        },
        "udp via switch",
    );
    let c = sw.control().pipeline().counters();
    assert!(c.forward.forwarded > 1000, "{c:?}");
    assert_eq!(c.forward.bad_icrc, 0, "{c:?}");
    // Every session removed its routes when it ended (the client keeps none open).
    let routes = sw.control().state().routes;
    assert!(routes.len() <= 2, "{routes:?}");
    sw.shutdown();
}

#[test]
fn clients_learn_the_switch_from_the_metadata_service() {
    let sw = switch(0);
    let mut config = ServerConfig::local(StoreConfig::Memory(MemStore::new()));
    config.accelerator = Some(sw.admin_url());
    let meta = MetadataServer::start(config).expect("metadata");
    let node = Memnode::start(MemnodeConfig::local(32 << 20)).expect("memnode");
    let registrar = HttpRegistrar::new(&meta.url(), None, Some("n0".into()))
        .expect("registrar")
        .with_interval(Duration::from_millis(500));
    registrar
        .register(&node.node_info(), &node.admin_url())
        .expect("register");
    let deadline = Instant::now() + Duration::from_secs(20);
    while registrar.memnode_id().is_none() {
        assert!(Instant::now() < deadline, "the memnode did not register");
        std::thread::sleep(Duration::from_millis(10));
    }
    // Default options: `AcceleratorUse::Auto`.
    let client = Client::connect(&meta.url(), ClientOptions::default()).expect("client");
    client
        .create_table("t", &TableSpec::clover(64))
        .expect("table");
    let s = client.session().expect("session");
    let t = s.table("t").expect("table");
    s.block_on(async {
        t.put(b"k", b"v1").await.expect("put");
        assert_eq!(t.get(b"k").await.expect("get").expect("a value"), b"v1");
    });
    let forwarded = sw.control().pipeline().counters().forward.forwarded;
    assert!(
        forwarded >= 4,
        "the session's verbs went through the switch"
    );
    drop(t);
    drop(s);
    let forwarded = sw.control().pipeline().counters().forward.forwarded;
    let qps = memnode::client::list_qps(&node.admin_url()).expect("QPs");
    assert!(
        qps.iter().all(|q| q.client_addr == sw.memnode_side()),
        "{qps:?}"
    );
    // `Off` goes directly.
    let direct = Client::connect(
        &meta.url(),
        ClientOptions::default().with_connection(
            kvstore::ConnectionOptions::default().with_accelerator(AcceleratorUse::Off),
        ),
    )
    .expect("client");
    let s2 = direct.session().expect("session");
    let t2 = s2.table("t").expect("table");
    s2.block_on(async {
        assert_eq!(t2.get(b"k").await.expect("get").expect("a value"), b"v1");
    });
    assert_eq!(
        sw.control().pipeline().counters().forward.forwarded,
        forwarded,
        "AcceleratorUse::Off bypasses the switch"
    );
    drop((t2, s2, client, direct));
    registrar.stop();
    node.shutdown();
    sw.shutdown();
}
