//! The `metadata` binary with `--tls-cert-file`/`--tls-key-file`: a key that does not
//! belong to the certificate, or a file that cannot be read, stops it at start-up with
//! an error naming the file; a good pair serves HTTPS.

#[path = "../../service/tests/support/test_pki.rs"]
mod test_pki;

use std::io::{BufRead as _, BufReader};
use std::process::{Command, Stdio};
use std::time::Duration;

use test_pki::TestPki;

const BIN: &str = env!("CARGO_BIN_EXE_metadata");

fn metadata_cmd(data_dir: &std::path::Path) -> Command {
    let mut c = Command::new(BIN);
    c.env_remove("RUST_LOG");
    for (k, _) in std::env::vars() {
        if k.starts_with("DMKV_") {
            c.env_remove(k);
        }
    }
    c.arg("--listen").arg("127.0.0.1:0");
    c.arg("--data-dir").arg(data_dir);
    c
}

#[test]
fn a_key_of_another_certificate_stops_start_up_naming_the_file() {
    let pki = TestPki::generate();
    let dir = tempfile::tempdir().unwrap();
    let out = metadata_cmd(dir.path())
        .arg("--tls-cert-file")
        .arg(&pki.cert)
        .arg("--tls-key-file")
        .arg(&pki.other_key)
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains(&pki.other_key.display().to_string()), "{err}");
    assert!(err.contains("does not match the certificate"), "{err}");
}

#[test]
fn an_unreadable_certificate_or_ca_file_stops_start_up_naming_it() {
    let pki = TestPki::generate();
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("missing.crt");
    let out = metadata_cmd(dir.path())
        .arg("--tls-cert-file")
        .arg(&missing)
        .arg("--tls-key-file")
        .arg(&pki.key)
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("missing.crt") && err.contains("cannot read"),
        "{err}"
    );

    let out = metadata_cmd(dir.path())
        .env("DMKV_TLS_CA_FILE", &missing)
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("TLS CA file") && err.contains("missing.crt"),
        "{err}"
    );

    let out = metadata_cmd(dir.path())
        .arg("--tls-cert-file")
        .arg(&pki.cert)
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("--tls-key-file"), "{err}");
}

#[test]
fn a_matching_pair_serves_https() {
    let pki = TestPki::generate();
    let dir = tempfile::tempdir().unwrap();
    let mut child = metadata_cmd(dir.path())
        .env("DMKV_TLS_CERT_FILE", &pki.cert)
        .env("DMKV_TLS_KEY_FILE", &pki.key)
        .env("DMKV_LOG_FORMAT", "json")
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let stderr = child.stderr.take().unwrap();
    let mut url = None;
    for line in BufReader::new(stderr).lines() {
        let line = line.unwrap();
        if let Some(i) = line.find("\"url\":\"") {
            let rest = &line[i + 7..];
            url = rest.split('"').next().map(str::to_owned);
            break;
        }
    }
    let url = url.expect("the serving banner names the URL");
    assert!(url.starts_with("https://"), "{url}");
    let client = dmkv_api::HttpClient::new(&url)
        .unwrap()
        .with_tls(dmkv_api::tls::ClientTls::from_ca_file(&pki.ca).unwrap())
        .with_timeouts(dmkv_api::http::Timeouts::uniform(Duration::from_secs(5)));
    assert_eq!(client.request("GET", "/healthz", None).unwrap().status, 200);
    // SIGTERM: a graceful stop.
    sigterm(child.id());
    assert!(child.wait().unwrap().success());
}

fn sigterm(pid: u32) {
    let status = Command::new("kill")
        .arg("-TERM")
        .arg(pid.to_string())
        .status()
        .unwrap();
    assert!(status.success());
}
