//! The `metadata` binary: help, clear failures, graceful shutdown on SIGTERM that keeps
//! the catalog.

use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use metadata::api::{CreateTableRequest, IndexKind};
use metadata::client::MetadataClient;

const BIN: &str = env!("CARGO_BIN_EXE_metadata");

fn metadata_cmd() -> Command {
    let mut c = Command::new(BIN);
    c.env_remove("RUST_LOG");
    for (k, _) in std::env::vars() {
        if k.starts_with("DMKV_METADATA_") {
            c.env_remove(k);
        }
    }
    c
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

fn wait_exit(child: &mut Child, timeout: Duration) -> std::process::ExitStatus {
    let deadline = Instant::now() + timeout;
    loop {
        if let Some(s) = child.try_wait().unwrap() {
            return s;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("metadata did not exit within {timeout:?}");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn spawn(dir: &std::path::Path, port: u16) -> Child {
    metadata_cmd()
        .args(["--listen", &format!("127.0.0.1:{port}"), "--data-dir"])
        .arg(dir)
        .env("DMKV_METADATA_TOKEN", "tok")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

fn wait_healthy(c: &MetadataClient) {
    let deadline = Instant::now() + Duration::from_secs(20);
    while c.health().is_err() {
        assert!(Instant::now() < deadline, "service did not come up");
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn help_lists_the_flags() {
    let out = metadata_cmd().arg("--help").output().unwrap();
    assert!(out.status.success());
    let text = String::from_utf8(out.stdout).unwrap();
    for flag in [
        "--listen",
        "--data-dir",
        "--token-file",
        "--heartbeat-timeout-ms",
        "--chunk-size",
        "--stats-history",
        "DMKV_METADATA_STATS_HISTORY",
        "DMKV_METADATA_TOKEN",
        "DMKV_METADATA_DATA_DIR",
        "/v1/openapi.json",
    ] {
        assert!(text.contains(flag), "--help lacks {flag}:\n{text}");
    }
    assert!(
        !text.contains("--token <"),
        "no flag takes the token itself:\n{text}"
    );
}

#[test]
fn the_root_token_comes_from_a_file_never_from_argv() {
    let dir = tempfile::tempdir().unwrap();
    let out = metadata_cmd()
        .args(["--token", "tok", "--listen", "127.0.0.1:0", "--data-dir"])
        .arg(dir.path())
        .output()
        .unwrap();
    assert!(!out.status.success(), "--token is no flag");
    let token_file = dir.path().join("token");
    std::fs::write(&token_file, "file-tok\n").unwrap();
    let port = free_port();
    let mut child = metadata_cmd()
        .args(["--listen", &format!("127.0.0.1:{port}"), "--data-dir"])
        .arg(dir.path().join("data"))
        .arg("--token-file")
        .arg(&token_file)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let url = format!("127.0.0.1:{port}");
    let anonymous = MetadataClient::new(&url).unwrap();
    wait_healthy(&anonymous);
    assert_eq!(anonymous.tables().unwrap_err().status(), Some(401));
    let root = MetadataClient::new(&url)
        .unwrap()
        .with_token(Some("file-tok".into()));
    assert!(root.tables().unwrap().is_empty());
    child.kill().unwrap();
    let _ = child.wait();
}

#[test]
fn bad_settings_exit_non_zero_with_a_clear_message() {
    let dir = tempfile::tempdir().unwrap();
    for (args, needle) in [
        (vec!["--chunk-size", "3MiB"], "power of two"),
        (vec!["--chunk-size", "12parsecs"], "invalid size"),
        (vec!["--listen", "nowhere"], "invalid"),
        (vec!["--placement", "random"], "round_robin"),
        (vec!["--stats-history", "1h"], "expected SPAN/INTERVAL"),
        (vec!["--stats-history", "1h/100ms"], "at least 1s"),
    ] {
        let mut cmd = metadata_cmd();
        cmd.arg("--data-dir").arg(dir.path()).args(&args);
        if args[0] != "--listen" {
            cmd.args(["--listen", "127.0.0.1:0"]);
        }
        let out = cmd.output().unwrap();
        assert!(!out.status.success(), "{args:?} succeeded");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains(needle), "{args:?}: {err}");
    }
}

#[test]
fn sigterm_stops_gracefully_and_the_catalog_survives() {
    let dir = tempfile::tempdir().unwrap();
    let port = free_port();
    let mut child = spawn(dir.path(), port);
    let c = MetadataClient::new(&format!("127.0.0.1:{port}"))
        .unwrap()
        .with_token(Some("tok".into()));
    wait_healthy(&c);
    c.create_table(&CreateTableRequest {
        name: "t".into(),
        index: IndexKind::Clover,
        value_limit: 128,
        memnodes: None,
        replication: None,
        update_mode: None,
        inplace: None,
    })
    .unwrap();
    sigterm(&child);
    let status = wait_exit(&mut child, Duration::from_secs(15));
    assert!(status.success(), "exit status {status}");
    let mut err = String::new();
    std::io::Read::read_to_string(child.stderr.as_mut().unwrap(), &mut err).unwrap();
    assert!(err.contains("SIGTERM"), "{err}");

    let port = free_port();
    let mut child = spawn(dir.path(), port);
    let c = MetadataClient::new(&format!("127.0.0.1:{port}"))
        .unwrap()
        .with_token(Some("tok".into()));
    wait_healthy(&c);
    assert_eq!(c.table("t").unwrap().value_limit, 128);
    child.kill().unwrap();
    let _ = child.wait();
}

#[test]
fn warns_when_no_token_is_set() {
    let dir = tempfile::tempdir().unwrap();
    let port = free_port();
    let mut child = metadata_cmd()
        .args(["--listen", &format!("127.0.0.1:{port}"), "--data-dir"])
        .arg(dir.path())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let c = MetadataClient::new(&format!("127.0.0.1:{port}")).unwrap();
    wait_healthy(&c);
    sigterm(&child);
    wait_exit(&mut child, Duration::from_secs(15));
    let mut err = String::new();
    std::io::Read::read_to_string(child.stderr.as_mut().unwrap(), &mut err).unwrap();
    assert!(err.contains("no root token"), "{err}");
}

fn sigterm(child: &Child) {
    let ok = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .unwrap()
        .success();
    assert!(ok, "kill -TERM failed");
}
