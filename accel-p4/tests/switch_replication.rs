//! Switch replication of writes end to end: replicated Clover and RACE tables of three
//! copies whose clients go through the soft switch, with the tables' replica sets
//! installed on it (`POST /v1/mirrors`), so that each data WRITE leaves the client
//! once and the switch copies it to the backups. The tables stay linearizable (the
//! checker of `testbed`), with and without 5 % loss, duplication and reordering at
//! the switch, and after two memory nodes crash the survivor alone — a backup of two
//! of the three sets, at another position in each test — serves every acknowledged
//! write.

use std::collections::HashMap;
use std::time::Duration;

use accel_p4::control::{ControlState, FaultSettings};
use accel_p4::model::{Counters, FaultPolicy};
use accel_p4::spec;
use accel_p4::switch::{SoftSwitch, SwitchConfig, SwitchHandle};
use dmkv_api::metadata::TableDescription;
use dmkv_api::switch::{MirrorRequest, add_mirror_as, mirrors_as};
use kvstore::{AcceleratorUse, Client, ClientOptions, ReconnectOptions, TableSpec, TransportKind};
use testbed::lincheck::{Config, Verdict, check};
use testbed::table_watch::wait_for_table;
use testbed::workload::{Workload, run};
use testbed::{Embedded, EmbeddedOptions};

const HEARTBEAT_TIMEOUT: Duration = Duration::from_millis(1500);

fn options(switch: &str, replicate: bool) -> ClientOptions {
    let mut o = ClientOptions::with_transport(TransportKind::Udp)
        .with_rc(verbs::rc::RcConfig {
            retransmit_timeout: Duration::from_millis(5),
            max_retries: 8,
            ..verbs::rc::RcConfig::default()
        })
        .with_reconnect(
            ReconnectOptions::default()
                .with_timeout(Duration::from_secs(8))
                .with_interval(Duration::from_millis(100)),
        )
        .with_grace(Duration::from_millis(20));
    o.connection.accelerator = AcceleratorUse::Via(switch.to_owned());
    o.connection.switch_replication = replicate;
    o
}

fn cluster() -> Embedded {
    Embedded::start_with_heartbeat_timeout(
        &EmbeddedOptions {
            memnodes: 3,
            capacity: 16 << 20,
            transport: TransportKind::Udp,
            ..EmbeddedOptions::default()
        },
        HEARTBEAT_TIMEOUT,
    )
    .expect("cluster")
}

fn switch(faults: bool) -> SwitchHandle {
    let mut config = SwitchConfig::local();
    if faults {
        config.initial = ControlState {
            mode: spec::mode::FAULTS,
            ..ControlState::default()
        };
    }
    let sw = SoftSwitch::start(config).expect("switch");
    if faults {
        let policy = FaultPolicy::from_probabilities(0.05, 0.05, 0.05, 0.0);
        sw.control()
            .set_faults(FaultSettings {
                seed: 33,
                up: policy,
                down: policy,
            })
            .expect("faults");
    }
    sw
}

/// Installs every replica set of `t` on the switch (the operator's step).
fn install_sets(embedded: &Embedded, switch: &str, t: &TableDescription) {
    for set in &t.replica_sets {
        let urls: Vec<String> = set
            .iter()
            .map(|id| embedded.admin_url(*id).expect("admin url"))
            .collect();
        let req = MirrorRequest {
            primary: urls[0].clone(),
            backups: urls[1..].to_vec(),
            balance_reads: false,
            non_serving: Vec::new(),
        };
        let first = add_mirror_as(switch, None, &req).expect("install the set");
        let again = add_mirror_as(switch, None, &req).expect("install the set again");
        assert_eq!(first, again, "the same members give the same set");
    }
    assert_eq!(
        mirrors_as(switch, None).expect("sets").len(),
        t.replica_sets.len()
    );
}

fn lincheck(client: &Client, name: &str, seed: u64) {
    let r = run(
        client,
        name,
        Workload {
            threads: 2,
            tasks: 3,
            ops_per_task: 50,
            keys: 3,
            seed,
        },
    );
    let report = check(&r.history, &Config::default()).expect("well-formed history");
    if let Verdict::Violation(v) = &report.verdict {
        panic!("[{name}] not linearizable:\n{v}");
    }
    assert!(report.is_linearizable(), "{:?}", report.verdict);
    assert!(
        r.errors.len() * 100 <= r.history.len() * 5,
        "too many unresolved operations: {:?}",
        r.errors.iter().take(5).collect::<Vec<_>>()
    );
}

fn put_keys(client: &Client, name: &str, n: u64) {
    let s = client.session().expect("session");
    let t = s.table(name).expect("handle");
    for i in 0..n {
        let (key, value) = (format!("key{i}"), format!("value{i}-{}", "x".repeat(40)));
        let mut attempt = 0;
        while let Err(e) = s.block_on(t.put(key.as_bytes(), value.as_bytes())) {
            attempt += 1;
            assert!(attempt < 10, "put {key}: {e:?}");
        }
    }
    s.quiesce();
}

fn read_keys(client: &Client, name: &str, n: u64) {
    let s = client.session().expect("session");
    let t = s.table(name).expect("handle");
    for i in 0..n {
        let key = format!("key{i}");
        let want = format!("value{i}-{}", "x".repeat(40)).into_bytes();
        let mut got = s.block_on(t.get(key.as_bytes()));
        for _ in 0..20 {
            if got.is_ok() {
                break;
            }
            std::thread::sleep(Duration::from_millis(100));
            got = s.block_on(t.get(key.as_bytes()));
        }
        assert_eq!(got.expect("get"), Some(want), "{key}");
    }
}

/// Crash two of the three memory nodes, one after the other, keeping the `keep`-th,
/// and read every key from it alone.
fn survivor_serves(embedded: &mut Embedded, client: &Client, name: &str, n: u64, keep: usize) {
    let mut ids = embedded.memnode_ids();
    let last = ids.remove(keep);
    let mut t = None;
    for &gone in &ids[..2] {
        embedded.crash(gone).expect("crash");
        t = Some(
            wait_for_table(client, name, Duration::from_secs(20), "failed over", |t| {
                t.replica_sets.iter().all(|s| !s.contains(&gone))
            })
            .unwrap_or_else(|e| panic!("{e}")),
        );
    }
    let t = t.expect("the table after the crashes");
    assert!(
        t.replica_sets.iter().all(|s| s == &vec![last]),
        "{:?}",
        t.replica_sets
    );
    read_keys(client, name, n);
}

/// `keep`: which memory node survives (each is the primary of one set and a backup of
/// the two others, at different positions).
fn replicated_through_the_switch(
    spec: TableSpec,
    faults: bool,
    seed: u64,
    keep: usize,
) -> Counters {
    let mut embedded = cluster();
    let sw = switch(faults);
    let client = Client::in_process(
        &embedded.metadata_url(),
        options(&sw.admin_url(), true),
        HashMap::new(),
        Box::new(()),
    )
    .expect("client");
    let t = client
        .create_replicated_table("t", &spec, 3)
        .expect("replicated table");
    install_sets(&embedded, &sw.admin_url(), &t);
    lincheck(&client, "t", seed);
    put_keys(&client, "t", 60);
    let c = sw.control().pipeline().counters();
    assert!(
        c.mirror_write.replicated > 60,
        "data WRITEs went through the switch's replication: {:?}",
        c.mirror_write
    );
    assert!(c.mirror_write.copies >= 2 * c.mirror_write.replicated);
    assert!(
        c.mirror_write.released + c.mirror_write.passed >= c.mirror_write.replicated,
        "every replicated WRITE was acknowledged once its backups had it: {:?}",
        c.mirror_write
    );
    survivor_serves(&mut embedded, &client, "t", 60, keep);
    c
}

#[test]
fn a_clover_table_replicated_by_the_switch_is_linearizable_and_a_backup_alone_serves_it() {
    let c = replicated_through_the_switch(TableSpec::clover(256), false, 1, 1);
    assert_eq!(c.mirror_write.busy, 0, "{:?}", c.mirror_write);
}

#[test]
fn a_race_table_replicated_by_the_switch_is_linearizable_and_a_backup_alone_serves_it() {
    replicated_through_the_switch(TableSpec::race(256), false, 2, 2);
}

#[test]
fn replication_by_the_switch_is_exact_under_loss_duplication_and_reordering() {
    let c = replicated_through_the_switch(TableSpec::clover(256), true, 3, 0);
    assert!(c.faults.dropped > 0, "{c:?}");
    assert!(c.mirror_write.recopied > 0, "{:?}", c.mirror_write);
}

#[test]
fn writes_in_flight_when_the_switch_restarts_are_completed_on_every_copy() {
    let mut embedded = cluster();
    let dir = tempfile::tempdir().expect("tempdir");
    let mut config = SwitchConfig::local();
    config.state_file = Some(dir.path().join("switch.json"));
    let sw = SoftSwitch::start(config.clone()).expect("switch");
    // The restarted switch listens where the clients send.
    config.admin = sw.admin_addr();
    config.client_side = sw.control().client_side();
    config.memnode_side = sw.control().memnode_side();
    let client = Client::in_process(
        &embedded.metadata_url(),
        options(&sw.admin_url(), true),
        HashMap::new(),
        Box::new(()),
    )
    .expect("client");
    let t = client
        .create_replicated_table("t", &TableSpec::clover(256), 3)
        .expect("replicated table");
    install_sets(&embedded, &sw.admin_url(), &t);
    let stop = std::sync::atomic::AtomicBool::new(false);
    let (acked, restarted) = std::thread::scope(|scope| {
        let writer = scope.spawn(|| {
            let s = client.session().expect("session");
            let t = s.table("t").expect("handle");
            let mut acked = Vec::new();
            let mut i = 0u64;
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                let (key, value) = (format!("w{i}"), format!("value{i}"));
                if s.block_on(t.put(key.as_bytes(), value.as_bytes())).is_ok() {
                    acked.push(i);
                }
                i += 1;
            }
            s.quiesce();
            acked
        });
        std::thread::sleep(Duration::from_millis(500));
        let before = sw.control().pipeline().counters().mirror_write.replicated;
        sw.shutdown();
        std::thread::sleep(Duration::from_millis(200));
        let restarted = SoftSwitch::start(config).expect("switch restarts");
        std::thread::sleep(Duration::from_millis(1000));
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
        let acked = writer.join().expect("writer");
        assert!(before > 0, "the first switch replicated writes");
        (acked, restarted)
    });
    // The restarted switch has the sets back (fresh lanes) and replicated writes.
    assert_eq!(
        mirrors_as(&restarted.admin_url(), None)
            .expect("sets")
            .len(),
        t.replica_sets.len()
    );
    let c = restarted.control().pipeline().counters();
    assert!(c.mirror_write.replicated > 0, "{:?}", c.mirror_write);
    assert!(acked.len() >= 10, "{} writes acknowledged", acked.len());
    let ids = embedded.memnode_ids();
    for &gone in &ids[..2] {
        embedded.crash(gone).expect("crash");
        wait_for_table(&client, "t", Duration::from_secs(20), "failed over", |t| {
            t.replica_sets.iter().all(|s| !s.contains(&gone))
        })
        .unwrap_or_else(|e| panic!("{e}"));
    }
    let s = client.session().expect("session");
    let tab = s.table("t").expect("handle");
    for i in acked {
        let key = format!("w{i}");
        assert_eq!(
            s.block_on(tab.get(key.as_bytes())).expect("get"),
            Some(format!("value{i}").into_bytes()),
            "{key}: acknowledged, missing on the last copy"
        );
    }
}
