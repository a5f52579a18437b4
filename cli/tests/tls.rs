//! The `dmkv` binary against an HTTPS metadata service: `--tls-ca-file` (or
//! `DMKV_TLS_CA_FILE`) names the CA it trusts; without it the server's certificate is
//! refused with an error saying so.

#[path = "../../service/tests/support/test_pki.rs"]
mod test_pki;

use std::process::{Command, Output};

use dmkv_service::ServerTls;
use metadata::server::{MetadataServer, ServerConfig, StoreConfig};
use metadata::store::MemStore;
use test_pki::TestPki;

fn dmkv(url: &str, ca: Option<&std::path::Path>, args: &[&str]) -> Output {
    let mut c = Command::new(env!("CARGO_BIN_EXE_dmkv"));
    c.arg("--metadata").arg(url).args(args);
    for k in ["DMKV_METADATA", "DMKV_TOKEN", "DMKV_TLS_CA_FILE"] {
        c.env_remove(k);
    }
    if let Some(ca) = ca {
        c.env("DMKV_TLS_CA_FILE", ca);
    }
    c.output().expect("run dmkv")
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

#[test]
fn the_cli_trusts_the_ca_it_is_given_and_refuses_other_certificates() {
    let pki = TestPki::generate();
    let mut config = ServerConfig::local(StoreConfig::Memory(MemStore::new()));
    config.tls = Some(ServerTls::load(&pki.cert, &pki.key).unwrap());
    let server = MetadataServer::start(config).unwrap();
    let url = server.url();

    let ok = dmkv(&url, Some(&pki.ca), &["--json", "tables"]);
    assert!(ok.status.success(), "{}", text(&ok.stderr));
    assert_eq!(text(&ok.stdout).trim(), "[]");
    let flag = Command::new(env!("CARGO_BIN_EXE_dmkv"))
        .args(["--metadata", &url, "--tls-ca-file"])
        .arg(&pki.ca)
        .args(["--json", "tables"])
        .env_remove("DMKV_TLS_CA_FILE")
        .output()
        .unwrap();
    assert!(flag.status.success(), "{}", text(&flag.stderr));

    let refused = dmkv(&url, None, &["tables"]);
    assert!(!refused.status.success());
    let err = text(&refused.stderr);
    assert!(err.contains("certificate is not trusted"), "{err}");
    assert!(err.contains("DMKV_TLS_CA_FILE"), "{err}");

    let missing = pki.ca.with_file_name("absent-ca.crt");
    let bad = dmkv(&url, Some(&missing), &["tables"]);
    assert!(!bad.status.success());
    let err = text(&bad.stderr);
    assert!(err.contains("absent-ca.crt"), "{err}");
    server.shutdown();
}
