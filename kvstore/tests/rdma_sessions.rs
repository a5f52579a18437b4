//! Sessions over the `rdma` transport. Where an RDMA device can be used (a NIC, or
//! rxe: `rdma link add rxe0 type rxe netdev eth0`; `$DMKV_RDMA_DEVICE` picks one,
//! else the first), an embedded cluster whose memory nodes serve through the device
//! runs a linearizability check (`testbed::lincheck`) of hot keys for each index —
//! Clover, RACE, an in-place table — with sessions of their own on several threads.
//! Without a device they print `SKIPPED: …` (with `DMKV_REQUIRE_RDMA=1` they fail).
//! Without the device or without the `rdma` feature, opening a client on `rdma`
//! fails with an error naming what is missing and the other transports.

use kvstore::{ClientOptions, KvError, SchemeSpec, TableSpec, TransportKind};
use testbed::EmbeddedOptions;
use testbed::lincheck::{Config, check};
use testbed::workload::{Workload, run};

/// Whether this process can run sessions over RDMA; prints the skip otherwise.
fn rdma_ready(test: &str) -> bool {
    #[cfg(feature = "rdma")]
    let why = match verbs::transport::rdma::probe() {
        Ok(_) => return true,
        Err(why) => format!("no RDMA device ({why})"),
    };
    #[cfg(not(feature = "rdma"))]
    let why = "built without the `rdma` feature (cargo test -p kvstore --features rdma)".to_owned();
    assert!(
        std::env::var("DMKV_REQUIRE_RDMA").as_deref() != Ok("1"),
        "{test}: DMKV_REQUIRE_RDMA=1 but {why}"
    );
    println!("SKIPPED: {test}: {why}; set DMKV_REQUIRE_RDMA=1 to fail instead");
    false
}

fn cluster() -> kvstore::Client {
    testbed::embedded_client(EmbeddedOptions {
        memnodes: 2,
        capacity: 32 << 20,
        transport: TransportKind::Rdma,
        client: ClientOptions::default(),
        prefault: false,
    })
    .expect("an embedded cluster over RDMA")
}

fn hot_keys(spec: TableSpec, label: &str) {
    if !rdma_ready(label) {
        return;
    }
    let client = cluster();
    client.create_table("hot", &spec).expect("table");
    let r = run(
        &client,
        "hot",
        Workload {
            threads: 3,
            tasks: 4,
            ops_per_task: 100,
            keys: 3,
            seed: 7,
        },
    );
    let report = check(&r.history, &Config::default()).expect("well-formed history");
    assert!(report.is_linearizable(), "[{label}] {:?}", report.verdict);
    assert!(
        r.errors.len() * 20 <= r.history.len(),
        "[{label}] too many unresolved operations: {:?}",
        r.errors.iter().take(5).collect::<Vec<_>>()
    );
}

#[test]
fn clover_hot_keys_are_linearizable_over_rdma() {
    hot_keys(
        TableSpec::clover(256),
        "clover_hot_keys_are_linearizable_over_rdma",
    );
}

#[test]
fn race_hot_keys_are_linearizable_over_rdma() {
    hot_keys(
        TableSpec::race(256),
        "race_hot_keys_are_linearizable_over_rdma",
    );
}

#[test]
fn in_place_hot_keys_are_linearizable_over_rdma() {
    let scheme: SchemeSpec = "pessimistic-rw-async-embedded".parse().expect("scheme");
    hot_keys(
        TableSpec::in_place(scheme, 128, 256),
        "in_place_hot_keys_are_linearizable_over_rdma",
    );
}

/// A client on `rdma` against a cluster served over `udp`: without the feature the
/// error names the feature; with it but without a device, the device error names the
/// other transports. (With a device this connects, and is not checked here.)
#[test]
fn without_the_feature_or_a_device_rdma_sessions_say_what_is_missing() {
    let embedded = testbed::Embedded::start(&EmbeddedOptions {
        transport: TransportKind::Udp,
        ..EmbeddedOptions::default()
    })
    .expect("cluster");
    let client = kvstore::Client::connect(
        &embedded.metadata_url(),
        ClientOptions::with_transport(TransportKind::Rdma),
    )
    .expect("client");
    let built = cfg!(feature = "rdma");
    match client.session() {
        Err(KvError::Unsupported(m)) => {
            assert!(!built, "{m}");
            assert!(
                m.contains("`rdma` cargo feature") && m.contains("udp"),
                "{m}"
            );
        }
        Err(e) => {
            let m = e.to_string();
            assert!(built, "{m}");
            assert!(m.contains("RDMA") && m.contains("udp"), "{m}");
        }
        Ok(_) => assert!(
            built,
            "an rdma session opened in a build without the feature"
        ),
    }
}
