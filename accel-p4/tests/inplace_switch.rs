//! In-place tables with the `switch-optimistic` latch scheme: every queue pair goes
//! through the soft switch in `opt_latch` mode, the table's tuples are registered
//! there, and concurrent get/put/insert/update/delete on hot keys are checked for
//! linearizability — clean and with injected loss / duplication / reordering. A table
//! whose connections bypass the switch gets a clear error.

use std::time::Duration;

use accel_p4::control::{ControlState, FaultSettings};
use accel_p4::model::FaultPolicy;
use accel_p4::spec;
use accel_p4::switch::{SoftSwitch, SwitchConfig, SwitchHandle};
use kvstore::latch_schemes::{self as switch_optimistic, register_with_switch};
use kvstore::{
    AcceleratorUse, Client, ClientOptions, KvError, SchemeSpec, TableSpec, TransportKind,
};
use testbed::EmbeddedOptions;
use testbed::lincheck::{Config, check};
use testbed::workload::{Workload, run_with_values};

const VALUE: usize = 200;

fn switch(mode: u32) -> SwitchHandle {
    let mut config = SwitchConfig::local();
    config.initial = ControlState {
        mode,
        ..ControlState::default()
    };
    SoftSwitch::start(config).expect("switch starts")
}

fn cluster(accelerator: AcceleratorUse) -> Client {
    testbed::embedded_client(EmbeddedOptions {
        memnodes: 1,
        transport: TransportKind::Udp,
        client: ClientOptions::default()
            .with_grace(Duration::from_millis(20))
            .with_connection(kvstore::ConnectionOptions::default().with_accelerator(accelerator))
            // Patient retransmission: the fault test loses packets on purpose and the
            // machine may be loaded (deferred latch requests come back as retransmissions).
            .with_rc(verbs::rc::RcConfig {
                max_retries: 60,
                ..verbs::rc::RcConfig::default()
            }),
        ..EmbeddedOptions::default()
    })
    .expect("cluster")
}

fn check_table(client: &Client, name: &str, w: Workload, label: &str) {
    let r = run_with_values(client, name, w, VALUE);
    let report = check(&r.history, &Config::default()).expect("well-formed history");
    println!(
        "[{label}] {} operations, {} unresolved: {:?}",
        r.history.len(),
        r.errors.len(),
        report.verdict
    );
    assert!(report.is_linearizable(), "[{label}] {:?}", report.verdict);
    assert!(
        r.errors.len() * 10 <= r.history.len(),
        "[{label}] too many unresolved operations: {:?}",
        r.errors.iter().take(5).collect::<Vec<_>>()
    );
}

/// One task per session: a switch answer (the latch) waits until every earlier request
/// of its queue pair is answered, so tasks pipelining on one QP make latches wait for
/// retransmissions (and, under loss, can strand a QP; see accel-p4's README).
fn workload(seed: u64) -> Workload {
    Workload {
        threads: 4,
        tasks: 1,
        ops_per_task: 80,
        keys: 3,
        seed,
    }
}

#[test]
fn switch_optimistic_tables_are_linearizable() {
    let sw = switch(spec::mode::OPT_LATCH);
    let client = cluster(AcceleratorUse::Via(sw.admin_url()));
    client
        .create_table(
            "t",
            &TableSpec::in_place(SchemeSpec::SwitchOptimistic, VALUE as u64, 64),
        )
        .expect("table");
    let region = register_with_switch(&client, "t", &sw.admin_url(), 0).expect("register");
    assert!(region.tuples > 0);
    check_table(&client, "t", workload(1), "switch-optimistic");
    let c = sw.control().pipeline().counters().opt_latch;
    println!("{c:?}");
    assert!(
        c.latched > 0 && c.unlatched > 0 && c.reads_valid > 0,
        "{c:?}"
    );
    sw.shutdown();
}

#[test]
fn switch_optimistic_tables_are_linearizable_with_faults() {
    let sw = switch(spec::mode::OPT_LATCH | spec::mode::FAULTS);
    let p = FaultPolicy::from_probabilities(0.02, 0.02, 0.02, 0.0);
    sw.control()
        .set_faults(FaultSettings {
            seed: 3,
            up: p,
            down: p,
        })
        .expect("faults");
    let client = cluster(AcceleratorUse::Via(sw.admin_url()));
    client
        .create_table(
            "t",
            &TableSpec::in_place(SchemeSpec::SwitchOptimistic, VALUE as u64, 64),
        )
        .expect("table");
    register_with_switch(&client, "t", &sw.admin_url(), 0).expect("register");
    check_table(&client, "t", workload(2), "switch-optimistic with faults");
    let c = sw.control().pipeline().counters();
    println!("{:?} {:?}", c.opt_latch, c.faults);
    assert!(c.faults.dropped > 0, "{c:?}");
    sw.shutdown();
}

#[test]
fn a_table_not_behind_the_switch_gets_a_clear_error() {
    let client = cluster(AcceleratorUse::Off);
    client
        .create_table(
            "t",
            &TableSpec::in_place(SchemeSpec::SwitchOptimistic, VALUE as u64, 64),
        )
        .expect("table");
    let s = client.session().expect("session");
    let t = s.table("t").expect("table handle");
    let r = s.block_on(async { t.get(b"k").await });
    match r {
        Err(KvError::Unsupported(m)) => {
            assert!(m.contains("opt_latch"), "{m}");
        }
        other => panic!("expected Unsupported, got {other:?}"),
    }
    // And the stamp constants are the switch's.
    assert_eq!(switch_optimistic::STAMP_PRESENT, spec::STAMP_PRESENT);
    assert_eq!(switch_optimistic::STAMP_INVALID, spec::STAMP_INVALID);
}
