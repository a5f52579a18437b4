//! Re-replication with the switch copy engine: a replicated table loses a member, the
//! metadata service has the soft switch copy the set's extents memory node to memory
//! node (READ responses turned into WRITEs, no CPU at either end), its copy passes
//! write only what changed since, and the new member alone then serves every
//! acknowledged write — with a clean switch, with 5 % loss, duplication and
//! reordering at the switch, across a switch restart, and with a switch that cannot
//! be reached (the passes copy everything).

use std::collections::HashMap;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use accel_p4::control::{ControlState, FaultSettings};
use accel_p4::model::FaultPolicy;
use accel_p4::spec;
use accel_p4::switch::{SoftSwitch, SwitchConfig};
use dmkv_api::metadata::{IndexKind, TableDescription};
use kvstore::{Client, ClientOptions, ReconnectOptions, TableSpec, TransportKind};
use metadata::rereplication::CopyEngine;
use testbed::table_watch::{is_whole, wait_for_table};
use testbed::{Embedded, EmbeddedOptions};

const HEARTBEAT_TIMEOUT: Duration = Duration::from_millis(1500);
const KEYS: u64 = 400;

fn options() -> ClientOptions {
    ClientOptions::with_transport(TransportKind::Udp)
        .with_rc(verbs::rc::RcConfig {
            retransmit_timeout: Duration::from_millis(10),
            max_retries: 6,
            ..verbs::rc::RcConfig::default()
        })
        .with_reconnect(
            ReconnectOptions::default()
                .with_timeout(Duration::from_secs(8))
                .with_interval(Duration::from_millis(100)),
        )
        .with_grace(Duration::from_millis(20))
}

fn cluster() -> (Embedded, Client) {
    let embedded = Embedded::start_with_heartbeat_timeout(
        &EmbeddedOptions {
            memnodes: 3,
            capacity: 8 << 20,
            transport: TransportKind::Udp,
            ..EmbeddedOptions::default()
        },
        HEARTBEAT_TIMEOUT,
    )
    .expect("cluster");
    let client = Client::in_process(
        &embedded.metadata_url(),
        options(),
        HashMap::new(),
        Box::new(()),
    )
    .expect("client");
    (embedded, client)
}

fn table_on(client: &Client, name: &str, home: u64, index: IndexKind) -> TableDescription {
    let spec = match index {
        IndexKind::Race => TableSpec::race(256),
        _ => TableSpec::clover(256),
    };
    let mut req = spec.request(name).expect("request");
    req.memnodes = Some(vec![home]);
    req.replication = Some(2);
    client.metadata().create_table(&req).expect("table")
}

/// Waits until `done` holds for the table's description, or panics after `limit`.
fn wait_for(
    client: &Client,
    name: &str,
    limit: Duration,
    what: &str,
    done: impl Fn(&TableDescription) -> bool,
) -> TableDescription {
    wait_for_table(client, name, limit, what, done).unwrap_or_else(|e| panic!("{e}"))
}

fn whole(t: &TableDescription) -> bool {
    is_whole(t)
}

/// Puts `key{i}` for `from..to`, repeating a put that failed (a loaded machine may
/// time a queue pair out; a put repeated with the same value changes nothing).
fn put_all(client: &Client, name: &str, from: u64, to: u64) {
    let s = client.session().expect("session");
    let t = s.table(name).expect("handle");
    for i in from..to {
        let (key, value) = (format!("key{i}"), format!("value{i}"));
        let mut attempt = 0;
        while let Err(e) = s.block_on(t.put(key.as_bytes(), value.as_bytes())) {
            attempt += 1;
            assert!(attempt < 10, "put {key}: {e:?}");
        }
    }
}

/// Writes further keys until `stop`; the acknowledged ones.
fn writer(client: &Client, name: &str, stop: &AtomicBool) -> Vec<u64> {
    let s = client.session().expect("session");
    let t = s.table(name).expect("handle");
    let mut acked = Vec::new();
    let mut i = KEYS;
    while !stop.load(Ordering::Relaxed) && i < 4 * KEYS {
        let (key, value) = (format!("key{i}"), format!("value{i}"));
        if s.block_on(t.put(key.as_bytes(), value.as_bytes())).is_ok() {
            acked.push(i);
        }
        i += 1;
    }
    acked
}

fn read_all(client: &Client, name: &str, keys: impl Iterator<Item = u64>) {
    let s = client.session().expect("session");
    let t = s.table(name).expect("handle");
    for i in keys {
        let key = format!("key{i}");
        assert_eq!(
            s.block_on(t.get(key.as_bytes())).expect("get"),
            Some(format!("value{i}").into_bytes()),
            "{key}"
        );
    }
}

/// Crashes the table's primary under a writer, waits for the set to be whole on the
/// spare, then crashes the other original member and reads every acknowledged key
/// back from the new member alone. `during` runs once the crash is made.
fn rereplicate(
    embedded: Embedded,
    client: &Client,
    index: IndexKind,
    during: impl FnOnce(),
) -> Embedded {
    let ids = embedded.memnode_ids();
    let t = table_on(client, "t", ids[0], index);
    let original = t.replica_sets[0].clone();
    let spare = *ids.iter().find(|m| !original.contains(m)).expect("spare");
    put_all(client, "t", 0, KEYS);
    let embedded = Mutex::new(embedded);
    let stop = AtomicBool::new(false);
    let acked = std::thread::scope(|scope| {
        let w = scope.spawn(|| writer(client, "t", &stop));
        std::thread::sleep(Duration::from_millis(200));
        embedded
            .lock()
            .expect("cluster")
            .crash(original[0])
            .expect("crash");
        during();
        // A bound for a loaded machine: the restart test copies 64 bytes per round
        // trip through the switch, which did not finish within 40 s beside four busy
        // processes on two CPUs (it did within 150 s).
        let t = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            wait_for(
                client,
                "t",
                Duration::from_secs(240),
                "re-replicated",
                |t| whole(t) && !t.replica_sets[0].contains(&original[0]),
            )
        }));
        stop.store(true, Ordering::Relaxed);
        let acked = w.join().expect("writer");
        let t = t.expect("re-replicated");
        assert_eq!(t.replica_sets[0], vec![original[1], spare]);
        acked
    });
    let mut embedded = embedded.into_inner().expect("cluster");
    embedded.crash(original[1]).expect("crash");
    wait_for(client, "t", Duration::from_secs(10), "failed over", |t| {
        t.replica_sets[0] == vec![spare]
    });
    read_all(client, "t", (0..KEYS).chain(acked.iter().copied()));
    embedded
}

fn switch_config(faults: bool) -> SwitchConfig {
    let mut config = SwitchConfig::local();
    if faults {
        config.initial = ControlState {
            mode: spec::mode::FAULTS,
            ..ControlState::default()
        };
    }
    config
}

fn switch_engine(embedded: &Embedded, admin_url: String) {
    embedded
        .metadata_server()
        .shared()
        .set_copy_engine(CopyEngine::Switch {
            admin_url,
            chunk: None,
            window: None,
        });
}

/// Whether the switch's state file records a copy that is still running.
fn state_file_holds_a_running_copy(path: &std::path::Path) -> bool {
    let Ok(text) = std::fs::read_to_string(path) else {
        return false;
    };
    let Ok(state) = serde_json::from_str::<serde_json::Value>(&text) else {
        return false;
    };
    state["copies"]
        .as_array()
        .is_some_and(|copies| copies.iter().any(|c| c["state"] == "running"))
}

fn copied_by_switch(embedded: &Embedded) -> (u64, u64) {
    let p = &embedded.metadata_server().shared().rereplication;
    (p.switch_bytes(), p.switch_failures())
}

fn the_switch_copies_a_lost_member_and_the_new_one_alone_serves(index: IndexKind) {
    let (embedded, client) = cluster();
    let sw = SoftSwitch::start(switch_config(false)).expect("switch");
    switch_engine(&embedded, sw.admin_url());
    let embedded = rereplicate(embedded, &client, index, || {});
    let (bytes, failures) = copied_by_switch(&embedded);
    assert_eq!(failures, 0);
    assert!(bytes > 0, "the switch copied nothing");
    let c = sw.control().pipeline().counters();
    assert!(c.zero_copy.converted >= bytes.div_ceil(1024), "{c:?}");
    let copies = sw.control().copy_statuses();
    assert!(!copies.is_empty());
    assert!(
        copies
            .iter()
            .all(|s| s.state == accel_p4::copy::CopyState::Done),
        "{copies:?}"
    );
}

#[test]
fn clover_set_is_rereplicated_by_the_switch() {
    the_switch_copies_a_lost_member_and_the_new_one_alone_serves(IndexKind::Clover);
}

#[test]
fn race_set_is_rereplicated_by_the_switch() {
    the_switch_copies_a_lost_member_and_the_new_one_alone_serves(IndexKind::Race);
}

#[test]
fn rereplication_by_the_switch_is_exact_under_loss_duplication_and_reordering() {
    let (embedded, client) = cluster();
    let sw = SoftSwitch::start(switch_config(true)).expect("switch");
    let policy = FaultPolicy::from_probabilities(0.05, 0.05, 0.05, 0.0);
    sw.control()
        .set_faults(FaultSettings {
            seed: 21,
            up: policy,
            down: policy,
        })
        .expect("faults");
    switch_engine(&embedded, sw.admin_url());
    let embedded = rereplicate(embedded, &client, IndexKind::Clover, || {});
    let (bytes, failures) = copied_by_switch(&embedded);
    assert_eq!(failures, 0);
    assert!(bytes > 0);
    let c = sw.control().pipeline().counters();
    assert!(c.faults.dropped > 0, "{c:?}");
}

#[test]
fn rereplication_by_the_switch_survives_a_switch_restart() {
    let (embedded, client) = cluster();
    let dir = tempfile::tempdir().expect("tempdir");
    let mut config = switch_config(false);
    let state_file = dir.path().join("switch.json");
    config.state_file = Some(state_file.clone());
    let sw = SoftSwitch::start(config.clone()).expect("switch");
    // The restarted switch listens where the service expects it.
    config.admin = sw.admin_addr();
    // One 64-byte READ at a time: slow enough to stop the switch in the middle.
    embedded
        .metadata_server()
        .shared()
        .set_copy_engine(CopyEngine::Switch {
            admin_url: sw.admin_url(),
            chunk: Some(64),
            window: Some(1),
        });
    let restarted = Mutex::new(None);
    let embedded = rereplicate(embedded, &client, IndexKind::Clover, || {
        // Stop the switch once a copy is under way, then start it again.
        let started = Instant::now();
        while !sw
            .control()
            .copy_statuses()
            .iter()
            .any(|c| c.state == accel_p4::copy::CopyState::Running && c.bytes_done > 0)
        {
            assert!(started.elapsed() < Duration::from_secs(20), "no copy began");
            std::thread::sleep(Duration::from_millis(1));
        }
        // Stop it as soon as the state file holds the running copy (what a restarted
        // switch resumes): a fixed wait here let a fast copy finish before the stop.
        while !state_file_holds_a_running_copy(&state_file) {
            assert!(
                started.elapsed() < Duration::from_secs(20),
                "no running copy saved"
            );
            std::thread::sleep(Duration::from_millis(1));
        }
        sw.shutdown();
        std::thread::sleep(Duration::from_millis(300));
        *restarted.lock().expect("switch") =
            Some(SoftSwitch::start(config).expect("switch restarts"));
    });
    let (bytes, _) = copied_by_switch(&embedded);
    let sw = restarted.into_inner().expect("switch").expect("restarted");
    let copies = sw.control().copy_statuses();
    eprintln!("{bytes} bytes by the switch; {copies:?}");
    assert!(bytes > 0, "the switch copied nothing");
    assert!(
        copies.iter().any(|c| c.resumed >= 1),
        "no copy was stopped and resumed: {copies:?}"
    );
}

#[test]
fn an_unreachable_switch_leaves_the_copy_to_the_passes() {
    let (embedded, client) = cluster();
    // Nothing listens there: the bulk copy fails and the passes copy everything.
    let dead = std::net::TcpListener::bind("127.0.0.1:0").expect("port");
    let url = format!("http://{}", dead.local_addr().expect("addr"));
    drop(dead);
    switch_engine(&embedded, url);
    let embedded = rereplicate(embedded, &client, IndexKind::Race, || {});
    let (bytes, failures) = copied_by_switch(&embedded);
    assert_eq!(bytes, 0);
    assert!(failures >= 1);
}

#[test]
fn a_copy_moved_for_rebalancing_is_copied_by_the_switch_under_a_writer() {
    let (embedded, client) = cluster();
    let sw = SoftSwitch::start(switch_config(false)).expect("switch");
    switch_engine(&embedded, sw.admin_url());
    let ids = embedded.memnode_ids();
    let t = table_on(&client, "t", ids[0], IndexKind::Race);
    let original = t.replica_sets[0].clone();
    let spare = *ids.iter().find(|m| !original.contains(m)).expect("spare");
    put_all(&client, "t", 0, KEYS);
    let stop = AtomicBool::new(false);
    let acked = std::thread::scope(|scope| {
        let w = scope.spawn(|| writer(&client, "t", &stop));
        std::thread::sleep(Duration::from_millis(100));
        let req = dmkv_api::rereplication::MoveCopyRequest {
            set: 0,
            from: original[0],
            to: Some(spare),
        };
        client.move_copy("t", &req).expect("move");
        let t = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            wait_for(&client, "t", Duration::from_secs(40), "moved", |t| {
                whole(t) && t.replica_sets[0] == vec![original[1], spare]
            })
        }));
        stop.store(true, Ordering::Relaxed);
        let acked = w.join().expect("writer");
        t.expect("moved");
        acked
    });
    let (bytes, failures) = copied_by_switch(&embedded);
    assert_eq!(failures, 0);
    assert!(bytes > 0, "the switch copied nothing");
    // The member that left holds nothing of the table: it can be deleted, and the
    // two members left serve every acknowledged write — the new one alone too.
    let mut embedded = embedded;
    embedded.crash(original[1]).expect("crash");
    wait_for(&client, "t", Duration::from_secs(10), "failed over", |t| {
        t.replica_sets[0] == vec![spare]
    });
    read_all(&client, "t", (0..KEYS).chain(acked.iter().copied()));
}
