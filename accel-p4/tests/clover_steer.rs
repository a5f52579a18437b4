//! Clover write and read steering end to end: kvstore sessions through the soft switch
//! with both steering functions on, hot keys tracked by chain id, the history checked
//! for linearizability — clean, with injected loss/duplication/reordering, and with the
//! switch restarted in the middle of the run (steering state is soft).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use accel_p4::control::{ControlState, FaultSettings, SteerSettings};
use accel_p4::model::FaultPolicy;
use accel_p4::spec::mode;
use accel_p4::switch::{SoftSwitch, SwitchConfig, SwitchHandle};
use kvstore::{AcceleratorUse, Client, ClientOptions, TableSpec, TransportKind};
use testbed::EmbeddedOptions;
use testbed::lincheck::{Config, check};
use testbed::workload::{Workload, run};
use verbs::rc::RcConfig;

const STEER: u32 = mode::WRITE_STEER | mode::READ_STEER;

fn steer_mode() -> u32 {
    match std::env::var("STEER_ONLY").as_deref() {
        Ok("write") => mode::WRITE_STEER,
        Ok("read") => mode::READ_STEER,
        _ => STEER,
    }
}
const KEYS: usize = 3;

fn cluster(admin: String) -> Client {
    cluster_with(admin, RcConfig::default())
}

fn cluster_with(admin: String, rc: RcConfig) -> Client {
    testbed::embedded_client(EmbeddedOptions {
        memnodes: 2,
        transport: TransportKind::Udp,
        client: ClientOptions::default()
            // Longer than the switch's read-steering age bound (10 ms).
            .with_grace(Duration::from_millis(50))
            .with_connection(
                kvstore::ConnectionOptions::default().with_accelerator(AcceleratorUse::Via(admin)),
            )
            .with_rc(rc),
        ..EmbeddedOptions::default()
    })
    .expect("cluster")
}

/// Create the table and the hot keys, and track them (by chain id) on the switch.
fn track_hot_keys(client: &Client, sw: &SwitchHandle, quiet_ms: u64) {
    client
        .create_table("hot", &TableSpec::clover(256))
        .expect("table");
    let s = client.session().expect("session");
    let t = s.table("hot").expect("table");
    // Create the chains (a put), then delete: the history starts with absent keys.
    s.block_on(async {
        for k in 0..KEYS {
            let key = format!("hot{k}");
            t.put(key.as_bytes(), b"seed").await.expect("seed");
            t.delete(key.as_bytes()).await.expect("delete");
        }
    });
    // A closing session publishes the chains it claimed in the table's chain
    // directory, so that the metadata service can name them.
    drop(t);
    drop(s);
    let keys = (0..KEYS)
        .map(|k| {
            client
                .metadata()
                .lookup_chain("hot", format!("hot{k}").as_bytes())
                .expect("lookup")
                .expect("chain exists")
                .chain_id
        })
        .collect();
    sw.control()
        .set_steering(SteerSettings {
            keys,
            classes: vec![64, 128, 256],
            quiet_ms,
        })
        .expect("steering settings");
}

fn check_history(client: &Client, w: Workload, label: &str) -> usize {
    let r = run(client, "hot", w);
    let report = check(&r.history, &Config::default()).expect("well-formed history");
    println!(
        "[{label}] {} operations, {} unresolved ({:?}): {:?}",
        r.history.len(),
        r.errors.len(),
        r.errors.iter().take(3).collect::<Vec<_>>(),
        report.verdict
    );
    assert!(report.is_linearizable(), "[{label}] {:?}", report.verdict);
    assert!(
        r.errors.len() * 10 <= r.history.len(),
        "[{label}] too many unresolved operations: {:?}",
        r.errors.iter().take(5).collect::<Vec<_>>()
    );
    r.history.len()
}

fn switch(mode: u32) -> SwitchHandle {
    let mut config = SwitchConfig::local();
    config.initial = ControlState {
        mode,
        ..ControlState::default()
    };
    SoftSwitch::start(config).expect("switch starts")
}

#[test]
fn steering_keeps_clover_linearizable() {
    let sw = switch(steer_mode());
    let client = cluster(sw.admin_url());
    track_hot_keys(&client, &sw, 2000);
    check_history(
        &client,
        Workload {
            threads: 3,
            tasks: 4,
            ops_per_task: 100,
            keys: KEYS,
            seed: 21,
        },
        "steer",
    );
    let c = sw.control().pipeline().counters();
    println!(
        "write_steer {:?}\nread_steer {:?}",
        c.write_steer, c.read_steer
    );
    assert!(c.write_steer.committed > 50, "{:?}", c.write_steer);
    assert!(
        c.write_steer.steered + c.read_steer.steered > 0,
        "contended hot keys get steered: {:?} {:?}",
        c.write_steer,
        c.read_steer
    );
    assert_eq!(c.forward.bad_icrc, 0);
    sw.shutdown();
}

#[test]
fn steering_with_loss_duplication_reordering() {
    let sw = switch(STEER | mode::FAULTS);
    let policy = FaultPolicy::from_probabilities(0.03, 0.03, 0.03, 0.0);
    // Generous retransmission budget: packets are lost on purpose on a loaded machine.
    let client = cluster_with(
        sw.admin_url(),
        RcConfig {
            max_retries: 40,
            ..RcConfig::default()
        },
    );
    track_hot_keys(&client, &sw, 2000);
    sw.control()
        .set_faults(FaultSettings {
            seed: 5,
            up: policy,
            down: policy,
        })
        .expect("faults");
    check_history(
        &client,
        Workload {
            threads: 3,
            tasks: 3,
            ops_per_task: 60,
            keys: KEYS,
            seed: 22,
        },
        "steer+faults",
    );
    let c = sw.control().pipeline().counters();
    println!(
        "write_steer {:?}\nread_steer {:?}\nfaults {:?}",
        c.write_steer, c.read_steer, c.faults
    );
    assert!(c.faults.dropped > 0 && c.faults.duplicated > 0 && c.faults.reordered > 0);
    assert!(c.write_steer.committed > 0, "{:?}", c.write_steer);
    sw.shutdown();
}

#[test]
fn switch_restart_mid_run_loses_only_speed() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut config = SwitchConfig::local();
    config.state_file = Some(dir.path().join("switch.json"));
    config.initial = ControlState {
        mode: STEER,
        ..ControlState::default()
    };
    let sw = SoftSwitch::start(config.clone()).expect("switch starts");
    config.client_side = sw.client_side();
    config.memnode_side = sw.memnode_side();
    config.admin = sw.admin_addr();
    // Generous retransmission budget: queue pairs ride out the restarts.
    let client = cluster_with(
        sw.admin_url(),
        RcConfig {
            max_retries: 40,
            ..RcConfig::default()
        },
    );
    track_hot_keys(&client, &sw, 300);
    let before = sw.control().pipeline().counters();
    let sw = Arc::new(Mutex::new(Some(sw)));
    let done = Arc::new(AtomicBool::new(false));
    let restarter = {
        let sw = sw.clone();
        let done = done.clone();
        let config = config.clone();
        std::thread::spawn(move || {
            let mut restarts = 0;
            while !done.load(Ordering::Relaxed) && restarts < 2 {
                std::thread::sleep(Duration::from_millis(400));
                let mut guard = sw.lock().unwrap();
                if let Some(old) = guard.take() {
                    old.shutdown();
                }
                std::thread::sleep(Duration::from_millis(20));
                *guard = Some(SoftSwitch::start(config.clone()).expect("switch restarts"));
                restarts += 1;
            }
            restarts
        })
    };
    check_history(
        &client,
        Workload {
            threads: 3,
            tasks: 3,
            ops_per_task: 150,
            keys: KEYS,
            seed: 23,
        },
        "steer+restart",
    );
    done.store(true, Ordering::Relaxed);
    let restarts = restarter.join().expect("restarter");
    println!(
        "{restarts} restarts; before the first: {:?}",
        before.write_steer
    );
    let guard = sw.lock().unwrap();
    let now = guard.as_ref().expect("switch").control();
    // The tracked keys came back from the state file; the registers started empty.
    assert_eq!(now.state().steer.keys.len(), KEYS);
    assert!(restarts >= 1, "the run outlasted a restart");
}
