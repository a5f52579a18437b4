//! A replicated table is created (its replica sets and mirrored directory are the
//! metadata service's business), but this client version does not write replicas
//! yet: opening such a table fails clearly instead of writing one copy only.

use kvstore::{KvError, TableSpec};
use testbed::EmbeddedOptions;

#[test]
fn a_table_with_replication_2_is_refused_when_opened() {
    let client = testbed::embedded_client(EmbeddedOptions {
        memnodes: 2,
        capacity: 16 << 20,
        ..EmbeddedOptions::default()
    })
    .expect("cluster");
    let t = client
        .create_replicated_table("r", &TableSpec::race(256), 2)
        .expect("replicated table");
    assert_eq!(t.replication, 2);
    assert_eq!(t.replica_sets.len(), 2);
    let s = client.session().expect("session");
    match s.table("r") {
        Err(KvError::Unsupported(m)) => assert!(
            m.contains("tables with replication 2 are not served by this client version yet"),
            "{m}"
        ),
        Err(e) => panic!("unexpected error {e}"),
        Ok(_) => panic!("a replicated table was opened"),
    }
    // Too many copies for the memory nodes: a clear refusal, not "already exists".
    match client.create_replicated_table("r3", &TableSpec::clover(256), 3) {
        Err(KvError::InvalidArgument(m)) => {
            assert!(
                m.contains("replication 3 needs 3 memnodes, 2 registered"),
                "{m}"
            )
        }
        other => panic!("unexpected {other:?}"),
    }
    // Unreplicated tables still open.
    client
        .create_table("c", &TableSpec::clover(256))
        .expect("table");
    assert!(s.table("c").is_ok());
}
