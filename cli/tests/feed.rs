//! `dmkv feed` against an in-process cluster over soft RoCE, without a switch: a feed
//! is created for a Clover table (refused for RACE), writes through it take effect and
//! give their lane back, a consumer ring stays empty while no flow moves records, and
//! plain `dmkv put`/`del` of the table are recorded in its lanes (`feed status`).

use std::process::{Command, Output};

use kvstore::TransportKind;
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

fn ok(url: &str, args: &[&str]) -> String {
    let o = dmkv(url, args);
    assert!(o.status.success(), "{args:?}: {}", text(&o.stderr));
    text(&o.stdout)
}

#[test]
fn a_feed_is_created_and_written_through_from_the_command_line() {
    let client = testbed::embedded_client(EmbeddedOptions {
        transport: TransportKind::Udp,
        ..EmbeddedOptions::default()
    })
    .expect("cluster");
    let url = client.metadata_url();
    ok(&url, &["create-table", "c", "--index", "clover"]);
    ok(&url, &["create-table", "r", "--index", "race"]);

    let o = dmkv(&url, &["feed", "create", "r"]);
    assert!(!o.status.success());
    assert!(text(&o.stderr).contains("Clover"), "{}", text(&o.stderr));

    let layout = ok(
        &url,
        &["feed", "create", "c", "--lanes", "1", "--slots", "8"],
    );
    let doc: serde_json::Value = serde_json::from_str(&layout).expect("JSON layout");
    assert_eq!(doc["table"], "c");
    assert_eq!(doc["lanes"].as_array().map(Vec::len), Some(1));
    assert_eq!(doc["consumers"].as_array().map(Vec::len), Some(2));
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("feed.json");
    std::fs::write(&path, &layout).expect("write layout");
    let path = path.to_str().expect("utf-8 path");

    // One lane: each command takes it and gives it back.
    ok(&url, &["feed", "put", "--layout", path, "alice", "admin"]);
    ok(&url, &["feed", "put", "--layout", path, "bob", "user"]);
    ok(&url, &["feed", "del", "--layout", path, "bob"]);
    assert_eq!(ok(&url, &["get", "c", "alice"]), "admin\n");
    assert_eq!(dmkv(&url, &["get", "c", "bob"]).status.code(), Some(1));

    // No switch flow: nothing reaches the consumer rings.
    assert_eq!(
        ok(&url, &["feed", "read", "--layout", path, "--wait-ms", "20"]),
        ""
    );
    assert_eq!(ok(&url, &["feed", "read", "--table", "c"]), "");
    // The catalog knows the feed: a plain put of the table is recorded too (the lane
    // holds it until a switch flow moves it).
    let waiting = |url: &str| -> u64 {
        let doc: serde_json::Value =
            serde_json::from_str(&ok(url, &["feed", "status", "--table", "c"])).expect("JSON");
        doc["lanes"]
            .as_array()
            .expect("lanes")
            .iter()
            .map(|l| l["waiting"].as_u64().expect("waiting"))
            .sum()
    };
    assert_eq!(waiting(&url), 3, "the three writes through the lane");
    ok(&url, &["put", "c", "carol", "ops"]);
    ok(&url, &["del", "c", "alice"]);
    assert_eq!(waiting(&url), 5, "plain writes are recorded too");
    let o = dmkv(&url, &["feed", "status", "--table", "r"]);
    assert!(!o.status.success());
    assert!(
        text(&o.stderr).contains("no change feed"),
        "{}",
        text(&o.stderr)
    );
    let o = dmkv(&url, &["feed", "read", "--layout", path, "--consumer", "2"]);
    assert!(!o.status.success());
    assert!(
        text(&o.stderr).contains("consumer rings"),
        "{}",
        text(&o.stderr)
    );
}
