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

#[test]
fn move_copy_starts_a_move_and_says_why_it_cannot() {
    let client = testbed::embedded_client(EmbeddedOptions {
        memnodes: 3,
        capacity: 8 << 20,
        ..EmbeddedOptions::default()
    })
    .expect("cluster");
    let url = client.metadata_url();
    let o = dmkv(&url, &["create-table", "one"]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let o = dmkv(&url, &["move-copy", "one", "--from", "1"]);
    assert!(!o.status.success());
    assert!(
        text(&o.stderr).contains("needs replication 2 or more"),
        "{}",
        text(&o.stderr)
    );
    // One replica set, homed on memnode 1: its offsets are free on memnode 3.
    let mut req = kvstore::TableSpec::clover(256)
        .request("two")
        .expect("request");
    req.memnodes = Some(vec![1]);
    req.replication = Some(2);
    client.metadata().create_table(&req).expect("table");
    let t = client.table("two").expect("table");
    let set = &t.replica_sets[0];
    let outsider = (1..=3)
        .find(|id| !set.contains(id))
        .expect("a third memnode");
    let o = dmkv(&url, &["move-copy", "two", "--from", &outsider.to_string()]);
    assert!(!o.status.success());
    assert!(
        text(&o.stderr).contains("is not a member of replica set 0"),
        "{}",
        text(&o.stderr)
    );
    let from = set[0].to_string();
    let to = outsider.to_string();
    let o = dmkv(&url, &["move-copy", "two", "--from", &from, "--to", &to]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    assert!(
        text(&o.stdout).contains("moving memnode"),
        "{}",
        text(&o.stdout)
    );
    // The copier moves it: the set ends with the memnode named in place of `from`.
    let start = std::time::Instant::now();
    loop {
        let t = client.metadata().table("two").expect("table");
        if t.replica_sets[0].contains(&outsider) && !t.replica_sets[0].contains(&set[0]) {
            break;
        }
        assert!(
            start.elapsed() < std::time::Duration::from_secs(20),
            "not moved: {:?} {:?} {:?}",
            t.replica_sets,
            t.syncing,
            t.rereplication
        );
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
}
