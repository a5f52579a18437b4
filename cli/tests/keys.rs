//! `dmkv keys` against an in-process cluster over soft RoCE: every index lists its
//! live keys, by prefix, with a limit, as text or JSON.

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
fn keys_lists_live_keys_of_every_index() {
    let client = testbed::embedded_client(EmbeddedOptions {
        transport: TransportKind::Udp,
        ..EmbeddedOptions::default()
    })
    .expect("cluster");
    let url = client.metadata_url();
    ok(&url, &["create-table", "c", "--index", "clover"]);
    ok(&url, &["create-table", "r", "--index", "race"]);
    ok(
        &url,
        &[
            "create-table",
            "i",
            "--index",
            "inplace",
            "--scheme",
            "pessimistic-x-wc-wu",
            "--capacity",
            "64",
            "--value-limit",
            "64",
        ],
    );
    for table in ["c", "r", "i"] {
        assert_eq!(ok(&url, &["keys", table]), "", "{table}: empty table");
        for key in ["bob", "alice", "al:2", "carol"] {
            ok(&url, &["put", table, key, "v"]);
        }
        ok(&url, &["del", table, "carol"]);
        assert_eq!(
            ok(&url, &["keys", table]),
            "al:2\nalice\nbob\n",
            "{table}: deleted keys are not listed"
        );
        assert_eq!(
            ok(&url, &["keys", table, "--prefix", "al"]),
            "al:2\nalice\n"
        );
        assert_eq!(ok(&url, &["keys", table, "--limit", "1"]), "al:2\n");
        assert_eq!(
            ok(&url, &["--json", "keys", table, "--prefix", "b"]),
            format!("{{\"keys\":[{{\"key\":\"bob\"}}],\"table\":\"{table}\"}}\n")
        );
    }
    // A key with a newline is printed escaped on one line.
    ok(&url, &["put", "r", "two\nlines", "v"]);
    assert_eq!(ok(&url, &["keys", "r", "--prefix", "two"]), "two\\nlines\n");

    let o = dmkv(&url, &["keys", "nope"]);
    assert_eq!(o.status.code(), Some(3));
    let o = dmkv(&url, &["keys", "c", "--limit", "0"]);
    assert_eq!(o.status.code(), Some(2), "a zero limit is a usage error");
}
