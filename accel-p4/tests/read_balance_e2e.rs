//! Load-balanced READs end to end: a replicated RACE table of three copies whose
//! clients go through the soft switch with `balance_reads` on, its replica sets
//! installed with `balance_reads` (`POST /v1/mirrors`), so the KV block READs of GETs
//! are served by any member of the set. The table stays linearizable (the checker of
//! `testbed`) with concurrent readers and writers, with and without 5 % loss,
//! duplication and reordering at the switch; the backups serve READs, and a backup
//! marked non-serving serves none.

use std::collections::HashMap;
use std::time::Duration;

use accel_p4::control::{ControlState, FaultSettings};
use accel_p4::functions::read_balance::ReadBalanceCounters;
use accel_p4::model::{Counters, FaultPolicy};
use accel_p4::spec;
use accel_p4::switch::{SoftSwitch, SwitchConfig, SwitchHandle};
use dmkv_api::metadata::TableDescription;
use dmkv_api::switch::{MirrorRequest, add_mirror_as};
use kvstore::{AcceleratorUse, Client, ClientOptions, TableSpec, TransportKind};
use testbed::lincheck::{Config, Verdict, check};
use testbed::workload::{Workload, run};
use testbed::{Embedded, EmbeddedOptions};

fn options(switch: &str) -> ClientOptions {
    let mut o = ClientOptions::with_transport(TransportKind::Udp)
        .with_rc(verbs::rc::RcConfig {
            retransmit_timeout: Duration::from_millis(5),
            max_retries: 40,
            ..verbs::rc::RcConfig::default()
        })
        .with_grace(Duration::from_millis(20));
    o.connection.accelerator = AcceleratorUse::Via(switch.to_owned());
    o.connection.balance_reads = true;
    o
}

fn cluster() -> Embedded {
    Embedded::start(&EmbeddedOptions {
        memnodes: 3,
        capacity: 16 << 20,
        transport: TransportKind::Udp,
        ..EmbeddedOptions::default()
    })
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
                seed: 41,
                up: policy,
                down: policy,
            })
            .expect("faults");
    }
    sw
}

/// Installs every replica set of `t` with balanced READs; `mute_second`: each set's
/// second backup serves none.
fn install_sets(embedded: &Embedded, switch: &str, t: &TableDescription, mute_second: bool) {
    for set in &t.replica_sets {
        let urls: Vec<String> = set
            .iter()
            .map(|id| embedded.admin_url(*id).expect("admin url"))
            .collect();
        let req = MirrorRequest {
            primary: urls[0].clone(),
            backups: urls[1..].to_vec(),
            balance_reads: true,
            non_serving: if mute_second {
                urls[2..].to_vec()
            } else {
                Vec::new()
            },
        };
        let set = add_mirror_as(switch, None, &req).expect("install the set");
        assert!(set.read_alias_rkey.is_some(), "the set balances READs");
    }
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

/// Writes `n` keys, then reads each back (several times) with the right value.
fn put_and_read(client: &Client, name: &str, n: u64) {
    let s = client.session().expect("session");
    let t = s.table(name).expect("handle");
    let value = |i: u64| format!("value{i}-{}", "x".repeat(40)).into_bytes();
    for i in 0..n {
        let key = format!("key{i}");
        let mut attempt = 0;
        while let Err(e) = s.block_on(t.put(key.as_bytes(), &value(i))) {
            attempt += 1;
            assert!(attempt < 10, "put {key}: {e:?}");
        }
    }
    for _ in 0..3 {
        for i in 0..n {
            let key = format!("key{i}");
            let mut got = s.block_on(t.get(key.as_bytes()));
            for _ in 0..10 {
                if got.is_ok() {
                    break;
                }
                got = s.block_on(t.get(key.as_bytes()));
            }
            assert_eq!(got.expect("get"), Some(value(i)), "{key}");
        }
    }
    s.quiesce();
}

fn balanced(faults: bool, seed: u64, mute_second: bool) -> (ReadBalanceCounters, Counters) {
    let embedded = cluster();
    let sw = switch(faults);
    let client = Client::in_process(
        &embedded.metadata_url(),
        options(&sw.admin_url()),
        HashMap::new(),
        Box::new(()),
    )
    .expect("client");
    let t = client
        .create_replicated_table("t", &TableSpec::race(256), 3)
        .expect("replicated table");
    install_sets(&embedded, &sw.admin_url(), &t, mute_second);
    lincheck(&client, "t", seed);
    put_and_read(&client, "t", 40);
    let c = sw.control().read_balance_counters();
    assert!(c.per_member[0] > 0, "the primaries served READs: {c:?}");
    assert!(c.per_member[1] > 0, "first backups served READs: {c:?}");
    assert_eq!(
        c.refused, 0,
        "clients marked single-packet READs only: {c:?}"
    );
    eprintln!("balanced READs per member: {:?}", c.per_member);
    (c, sw.control().pipeline().counters())
}

#[test]
fn a_race_table_with_balanced_reads_is_linearizable_and_backups_serve_reads() {
    let (c, _) = balanced(false, 5, false);
    assert!(c.per_member[2] > 0, "second backups served READs: {c:?}");
}

#[test]
fn balanced_reads_stay_linearizable_under_loss_duplication_and_reordering() {
    let (c, all) = balanced(true, 6, false);
    assert!(c.per_member[2] > 0, "second backups served READs: {c:?}");
    assert!(all.faults.dropped > 0, "{:?}", all.faults);
    assert!(
        c.resent + c.refilled > 0,
        "retransmissions went to their member: {c:?}"
    );
}

#[test]
fn a_backup_marked_non_serving_serves_no_balanced_read() {
    let (c, _) = balanced(false, 7, true);
    assert_eq!(c.per_member[2], 0, "{c:?}");
}
