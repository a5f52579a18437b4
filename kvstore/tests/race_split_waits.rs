//! Waiting for a RACE split is not a failed attempt: many tasks of one session
//! insert distinct keys into a table of tiny subtables, so most inserts find their
//! subtable full or frozen while another task splits it. With a small attempt
//! limit every insert must still succeed (split waits are bounded by the split
//! timeout, not by `max_link_attempts`), and every key must read back.

use std::cell::Cell;
use std::rc::Rc;
use std::time::Duration;

use kvstore::{ClientOptions, TableSpec, TransportKind};
use testbed::EmbeddedOptions;

fn key(i: usize) -> Vec<u8> {
    format!("split-wait-{i:05}").into_bytes()
}

#[test]
fn inserts_wait_for_splits_instead_of_failing() {
    let client = testbed::embedded_client(EmbeddedOptions {
        memnodes: 1,
        capacity: 64 << 20,
        transport: TransportKind::Local,
        client: ClientOptions::default()
            .with_race(kvstore::RaceOptions::default().with_subtable_groups(1))
            .with_retry(kvstore::RetryOptions::default().with_max_link_attempts(64)),
        prefault: false,
    })
    .expect("cluster");
    client
        .create_table("waits", &TableSpec::race(128))
        .expect("table");
    let session = client.session().expect("session");
    let table = session.table("waits").expect("table");
    const TASKS: usize = 16;
    const KEYS: usize = 3000;
    let failures = Rc::new(Cell::new(0usize));
    let left = Rc::new(Cell::new(TASKS));
    for task in 0..TASKS {
        let (table, failures, left) = (table.clone(), failures.clone(), left.clone());
        session.spawn(async move {
            for i in (task..KEYS).step_by(TASKS) {
                if let Err(e) = table.insert(&key(i), &i.to_le_bytes()).await {
                    eprintln!("insert of key {i} failed: {e}");
                    failures.set(failures.get() + 1);
                }
            }
            left.set(left.get() - 1);
        });
    }
    let worker = session.worker().clone();
    let l = left.clone();
    session.block_on(async move {
        while l.get() > 0 {
            worker.sleep(Duration::from_millis(1)).await;
        }
    });
    assert_eq!(failures.get(), 0, "inserts failed while subtables split");
    for i in 0..KEYS {
        let got = session.block_on(table.get(&key(i))).expect("get");
        assert_eq!(got, Some(i.to_le_bytes().to_vec()), "key {i}");
    }
}
