//! `dmkv create-table --replication N`: the table gets its replica sets, and too
//! many copies for the registered memnodes is refused with the service's reason.

use std::process::{Command, Output};

use testbed::EmbeddedOptions;

fn dmkv(url: &str, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_dmkv"))
        .arg("--metadata")
        .arg(url)
        .args(args)
        .env_remove("DMKV_METADATA")
        .env_remove("DMKV_TOKEN")
        .output()
        .expect("run dmkv")
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

#[test]
fn create_table_passes_the_replication() {
    let client = testbed::embedded_client(EmbeddedOptions {
        memnodes: 2,
        capacity: 8 << 20,
        ..EmbeddedOptions::default()
    })
    .expect("cluster");
    let url = client.metadata_url();
    let o = dmkv(
        &url,
        &["create-table", "r", "--index", "race", "--replication", "2"],
    );
    assert!(o.status.success(), "{}", text(&o.stderr));
    assert!(
        text(&o.stdout).contains("replication 2 replica sets"),
        "{}",
        text(&o.stdout)
    );
    let t = client.table("r").expect("table");
    assert_eq!((t.replication, t.replica_sets.len()), (2, 2));

    let o = dmkv(&url, &["create-table", "c", "--replication", "3"]);
    assert!(!o.status.success());
    assert!(
        text(&o.stderr).contains("replication 3 needs 3 memnodes, 2 registered"),
        "{}",
        text(&o.stderr)
    );
    let o = dmkv(&url, &["create-table", "c", "--replication", "4"]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o.stderr));
}
