//! The `memnode` binary: help, clear failures, graceful shutdown on SIGTERM.

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

const BIN: &str = env!("CARGO_BIN_EXE_memnode");

fn memnode() -> Command {
    let mut c = Command::new(BIN);
    c.env_remove("RUST_LOG");
    for (k, _) in std::env::vars() {
        if k.starts_with("DMKV_MEMNODE_") {
            c.env_remove(k);
        }
    }
    c.env("DMKV_MEMNODE_INSECURE_NO_AUTH", "true");
    c
}

fn wait_with_timeout(child: &mut Child, timeout: Duration) -> std::process::ExitStatus {
    let deadline = Instant::now() + timeout;
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            return status;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("memnode did not exit within {timeout:?}");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn help_lists_the_flags() {
    let out = memnode().arg("--help").output().unwrap();
    assert!(out.status.success());
    let text = String::from_utf8(out.stdout).unwrap();
    for flag in [
        "--listen",
        "--admin",
        "--capacity",
        "--shm",
        "--hugepages",
        "--read-order",
        "--lock-table-hold-ns",
        "--rpc-workers",
        "DMKV_MEMNODE_RPC_WORKERS",
        "--prefault",
        "DMKV_MEMNODE_PREFAULT",
        "DMKV_MEMNODE_LISTEN",
        "/v1/qps",
    ] {
        assert!(text.contains(flag), "--help lacks {flag}:\n{text}");
    }
}

#[test]
fn bad_capacity_exits_non_zero_with_a_clear_message() {
    for bad in ["12parsecs", "0", "1.5GiB", "2EiB"] {
        let out = memnode()
            .args([
                "--listen",
                "127.0.0.1:0",
                "--admin",
                "127.0.0.1:0",
                "--capacity",
                bad,
            ])
            .output()
            .unwrap();
        assert!(!out.status.success(), "--capacity {bad} was accepted");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            err.contains("capacity") || err.contains("invalid size"),
            "--capacity {bad}: unclear error:\n{err}"
        );
    }
}

#[test]
fn port_in_use_exits_non_zero_with_a_clear_message() {
    let taken = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    let addr = taken.local_addr().unwrap().to_string();
    let out = memnode()
        .args([
            "--listen",
            &addr,
            "--admin",
            "127.0.0.1:0",
            "--capacity",
            "64k",
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains(&addr) && err.contains("in use"), "{err}");
}

#[test]
fn sigterm_stops_gracefully_with_status_zero() {
    let mut child = memnode()
        .args([
            "--listen",
            "127.0.0.1:0",
            "--admin",
            "127.0.0.1:0",
            "--capacity",
            "1MiB",
        ])
        .env("RUST_LOG", "info")
        .stderr(Stdio::piped())
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    let stderr = child.stderr.take().unwrap();
    let (tx, rx) = mpsc::channel();
    let reader = std::thread::spawn(move || {
        let mut all = String::new();
        for line in BufReader::new(stderr).lines() {
            let Ok(line) = line else { break };
            if let Some(i) = line.find("admin=http://") {
                let url: String = line[i + 6..]
                    .chars()
                    .take_while(|c| !c.is_whitespace())
                    .collect();
                let _ = tx.send(url);
            }
            all.push_str(&line);
            all.push('\n');
        }
        all
    });
    let Ok(url) = rx.recv_timeout(Duration::from_secs(20)) else {
        let _ = child.kill();
        panic!("memnode did not report its admin address");
    };
    let health = memnode::client::request(&url, "GET", "/healthz", None).unwrap();
    assert_eq!(health.status, 200);
    let regions = memnode::client::regions(&url).unwrap();
    assert_eq!(regions[0].len, 1 << 20);

    // SAFETY: kill(2) on our own child's pid.
    let rc = unsafe { libc::kill(child.id() as libc::pid_t, libc::SIGTERM) };
    assert_eq!(rc, 0);
    let status = wait_with_timeout(&mut child, Duration::from_secs(20));
    let log = reader.join().unwrap();
    assert!(status.success(), "exit status {status:?}; log:\n{log}");
    assert!(log.contains("shutting down"), "{log}");
    assert!(log.contains("region registered"), "{log}");
}

/// Spawns `c` with its log on a pipe and waits until it serves: the child, its admin
/// URL and what it logged until then.
fn spawn_serving(c: &mut Command) -> (Child, String, String) {
    let mut child = c
        .env("RUST_LOG", "info")
        .stderr(Stdio::piped())
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    let stderr = child.stderr.take().unwrap();
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let mut log = String::new();
        for line in BufReader::new(stderr).lines() {
            let Ok(line) = line else { break };
            log.push_str(&line);
            log.push('\n');
            if let Some(i) = line.find("admin=http://") {
                let url: String = line[i + 6..]
                    .chars()
                    .take_while(|c| !c.is_whitespace())
                    .collect();
                let _ = tx.send((url, log.clone()));
            }
        }
    });
    let Ok((url, log)) = rx.recv_timeout(Duration::from_secs(30)) else {
        let _ = child.kill();
        panic!("memnode did not report its admin address");
    };
    (child, url, log)
}

/// Starts the binary with `args` and `env`, and returns its admin URL once it serves.
fn start_reporting(args: &[&str], env: &[(&str, &str)]) -> (Child, String) {
    let mut c = memnode();
    c.env_remove("DMKV_MEMNODE_INSECURE_NO_AUTH");
    c.env_remove("DMKV_GRANT_KEY");
    for (k, v) in env {
        c.env(k, v);
    }
    c.args(["--listen", "127.0.0.1:0", "--admin", "127.0.0.1:0"])
        .args(["--capacity", "1MiB"])
        .args(args);
    let (child, url, _) = spawn_serving(&mut c);
    (child, url)
}

#[test]
fn the_admin_api_needs_a_token_from_a_file_or_the_environment() {
    // No token and no --insecure-no-auth: refused, saying how to give one.
    let out = memnode()
        .env_remove("DMKV_MEMNODE_INSECURE_NO_AUTH")
        .args(["--listen", "127.0.0.1:0", "--admin", "127.0.0.1:0"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("--admin-token-file"), "{err}");
    assert!(err.contains("DMKV_MEMNODE_ADMIN_TOKEN"), "{err}");

    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("token");
    std::fs::write(&file, "file-token-0123456789\n").unwrap();
    let file = file.to_str().unwrap().to_owned();
    for (args, env, token) in [
        (
            vec!["--admin-token-file", file.as_str()],
            vec![],
            "file-token-0123456789",
        ),
        (
            vec![],
            vec![("DMKV_MEMNODE_ADMIN_TOKEN", "env-token-0123456789")],
            "env-token-0123456789",
        ),
    ] {
        let (mut child, url) = start_reporting(&args, &env);
        let r = memnode::client::request(&url, "GET", "/v1/regions", None).unwrap();
        assert_eq!(r.status, 401);
        assert_eq!(
            memnode::client::request(&url, "GET", "/healthz", None)
                .unwrap()
                .status,
            200
        );
        let regions = dmkv_api::memnode_admin::regions_as(&url, Some(token)).unwrap();
        assert_eq!(regions[0].len, 1 << 20);
        let _ = child.kill();
        let _ = child.wait();
    }
}

/// Starts the binary serving `capacity` with `extra` flags; returns the child, its
/// resident set in KiB once it serves, and what it logged until then.
fn resident_once_serving(capacity: &str, extra: &[&str]) -> (Child, u64, String) {
    let mut c = memnode();
    c.args(["--listen", "127.0.0.1:0", "--admin", "127.0.0.1:0"])
        .args(["--capacity", capacity])
        .args(extra);
    let (child, _, log) = spawn_serving(&mut c);
    let status = std::fs::read_to_string(format!("/proc/{}/status", child.id())).unwrap();
    let rss_kib = status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        .expect("VmRSS in /proc/PID/status");
    (child, rss_kib, log)
}

#[test]
fn prefault_makes_the_memory_resident_before_serving() {
    let (mut lazy, lazy_rss, _) = resident_once_serving("96MiB", &[]);
    let _ = lazy.kill();
    let _ = lazy.wait();
    assert!(
        lazy_rss < 64 << 10,
        "without --prefault 96 MiB should not be resident at start ({lazy_rss} KiB)"
    );
    let (mut eager, eager_rss, log) = resident_once_serving("96MiB", &["--prefault"]);
    let _ = eager.kill();
    let _ = eager.wait();
    assert!(
        eager_rss >= 96 << 10,
        "with --prefault all 96 MiB should be resident at start ({eager_rss} KiB)"
    );
    assert!(log.contains("memory made resident"), "{log}");
}
