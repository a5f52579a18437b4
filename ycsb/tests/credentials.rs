//! The dmkv binding against a cluster whose metadata service has a root token, holding
//! only a table credential read from a file: it loads and runs on the table an admin
//! created, and is refused a table its credential does not cover.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use dmkv_api::MetadataClient;
use dmkv_api::credentials::{Access, CreateCredentialRequest, CredentialKind};
use dmkv_api::metadata::{CreateTableRequest, IndexKind};
use kvstore::TransportKind;
use testbed::{Embedded, EmbeddedOptions};
use ycsb::bindings::dmkv::DmkvBinding;
use ycsb::client::{Phase, RunOptions, run_phase};
use ycsb::props::Properties;

const ROOT: &str = "ycsb-root-token";

fn props(table: &str, metadata: &str, credential_file: &Path) -> Properties {
    let mut p = Properties::new();
    p.merge_file(
        PathBuf::from(env!("CARGO_MANIFEST_DIR"))
            .join("workloads")
            .join("workloada"),
    )
    .unwrap();
    for (k, v) in [
        ("recordcount", "100"),
        ("operationcount", "400"),
        ("dataintegrity", "true"),
        ("dmkv.metadata", metadata),
        ("dmkv.table", table),
        ("dmkv.credential_file", credential_file.to_str().unwrap()),
    ] {
        p.set(k, v);
    }
    p
}

fn opts(phase: Phase) -> RunOptions {
    let mut o = RunOptions::new(phase);
    o.progress = false;
    o
}

#[test]
fn a_table_credential_from_a_file_loads_and_runs_its_table() {
    let cluster = Embedded::start_with_root_token(
        &EmbeddedOptions {
            transport: TransportKind::Udp,
            ..EmbeddedOptions::default()
        },
        ROOT,
    )
    .unwrap();
    let url = cluster.metadata_url();
    let admin = MetadataClient::new(&url)
        .unwrap()
        .with_token(Some(ROOT.into()));
    admin
        .create_table(&CreateTableRequest {
            name: "bench".into(),
            index: IndexKind::Clover,
            value_limit: 2048,
            memnodes: None,
            replication: None,
            update_mode: None,
            inplace: None,
        })
        .unwrap();
    let secret = admin
        .create_credential(&CreateCredentialRequest {
            kind: CredentialKind::Table,
            tables: vec!["bench".into()],
            access: Some(Access::ReadWrite),
            ..Default::default()
        })
        .unwrap()
        .secret;
    let dir = std::env::temp_dir().join(format!("ycsb-credential-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("bench.cred");
    std::fs::write(&file, format!("{secret}\n")).unwrap();

    let p = props("bench", &url, &file);
    let binding = DmkvBinding::new(&p).unwrap();
    let load = run_phase(&binding, &p, &opts(Phase::Load)).unwrap();
    let inserts: BTreeMap<String, u64> = load
        .ops
        .iter()
        .find(|o| o.name == "INSERT")
        .map(|o| o.returns.clone().into_iter().collect())
        .unwrap_or_default();
    assert_eq!(inserts, BTreeMap::from([("OK".into(), 100)]));
    let run = run_phase(&binding, &p, &opts(Phase::Run)).unwrap();
    assert_eq!(run.operations, 400);
    for o in &run.ops {
        for (status, n) in &o.returns {
            assert_eq!(status, "OK", "{} returned {status} {n} times", o.name);
        }
    }
    drop(binding);

    // A table the credential does not cover: refused, naming the reason.
    let Err(e) = DmkvBinding::new(&props("other", &url, &file)) else {
        panic!("a table out of the credential's scope was opened");
    };
    assert!(e.to_string().contains("refused the credential"), "{e}");
    std::fs::remove_dir_all(&dir).unwrap();
}
