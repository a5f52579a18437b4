//! The `memnode` binary with `--metadata`: registers, heartbeats and deregisters against
//! a stand-in metadata service, and keeps serving (retrying) when the service is down.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpListener;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use memnode::client;

const BIN: &str = env!("CARGO_BIN_EXE_memnode");

#[derive(Debug, Clone)]
struct Seen {
    method: String,
    path: String,
    auth: Option<String>,
    body: String,
}

/// A stand-in metadata service that records requests and answers like the real one.
fn fake_metadata() -> (String, Arc<Mutex<Vec<Seen>>>) {
    fake_metadata_answering_delete("204 No Content", "")
}

/// [`fake_metadata`] answering `DELETE /v1/memnodes/7` with `status` and `body`.
fn fake_metadata_answering_delete(
    delete_status: &'static str,
    delete_body: &'static str,
) -> (String, Arc<Mutex<Vec<Seen>>>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let seen = Arc::new(Mutex::new(Vec::new()));
    let log = seen.clone();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { continue };
            let mut reader = BufReader::new(stream.try_clone().unwrap());
            let mut line = String::new();
            if reader.read_line(&mut line).is_err() {
                continue;
            }
            let mut parts = line.split_whitespace();
            let method = parts.next().unwrap_or_default().to_owned();
            let path = parts.next().unwrap_or_default().to_owned();
            let (mut len, mut auth) = (0usize, None);
            loop {
                let mut h = String::new();
                if reader.read_line(&mut h).is_err() || h.trim().is_empty() {
                    break;
                }
                let (name, value) = h.split_once(':').unwrap_or((&h, ""));
                match name.trim().to_ascii_lowercase().as_str() {
                    "content-length" => len = value.trim().parse().unwrap_or(0),
                    "authorization" => auth = Some(value.trim().to_owned()),
                    _ => {}
                }
            }
            let mut body = vec![0; len];
            let _ = reader.read_exact(&mut body);
            let (status, answer) = match (method.as_str(), path.as_str()) {
                ("POST", "/v1/memnodes") => (
                    "201 Created",
                    r#"{"id":7,"created":true,"epoch":1,"revoked_leases":0,"heartbeat_interval_ms":100,"heartbeat_timeout_ms":300}"#,
                ),
                ("POST", "/v1/memnodes/7/heartbeat") => ("200 OK", r#"{"id":7,"epoch":1}"#),
                ("DELETE", "/v1/memnodes/7") => (delete_status, delete_body),
                _ => ("404 Not Found", r#"{"error":"no","code":"not_found"}"#),
            };
            log.lock().unwrap().push(Seen {
                method,
                path,
                auth,
                body: String::from_utf8_lossy(&body).into_owned(),
            });
            let _ = write!(
                stream,
                "HTTP/1.1 {status}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{answer}",
                answer.len()
            );
        }
    });
    (url, seen)
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

fn memnode(metadata: &str, admin_port: u16, extra: &[&str]) -> Child {
    let mut c = Command::new(BIN);
    c.env_remove("RUST_LOG");
    for (k, _) in std::env::vars() {
        if k.starts_with("DMKV_MEMNODE_") {
            c.env_remove(k);
        }
    }
    c.env("DMKV_MEMNODE_INSECURE_NO_AUTH", "true");
    c.args([
        "--listen",
        "127.0.0.1:0",
        "--admin",
        &format!("127.0.0.1:{admin_port}"),
        "--capacity",
        "1MiB",
        "--metadata",
        metadata,
    ])
    .args(extra)
    .stdout(Stdio::null())
    .stderr(Stdio::piped())
    .spawn()
    .unwrap()
}

fn wait_for(timeout: Duration, mut f: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + timeout;
    while Instant::now() < deadline {
        if f() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    f()
}

fn sigterm_and_wait(child: &mut Child) -> (std::process::ExitStatus, String) {
    let ok = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .unwrap()
        .success();
    assert!(ok);
    let deadline = Instant::now() + Duration::from_secs(15);
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("memnode did not stop");
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let mut err = String::new();
    child
        .stderr
        .as_mut()
        .unwrap()
        .read_to_string(&mut err)
        .unwrap();
    (status, err)
}

#[test]
fn help_lists_the_metadata_flags() {
    let out = Command::new(BIN).arg("--help").output().unwrap();
    let text = String::from_utf8(out.stdout).unwrap();
    for flag in [
        "--metadata",
        "--metadata-token-file",
        "--name",
        "DMKV_MEMNODE_METADATA",
        "DMKV_MEMNODE_METADATA_TOKEN",
    ] {
        assert!(text.contains(flag), "--help lacks {flag}:\n{text}");
    }
    assert!(
        !text.contains("--metadata-token <"),
        "no flag takes the token itself:\n{text}"
    );
}

#[test]
fn registers_heartbeats_and_deregisters_on_sigterm() {
    let (url, seen) = fake_metadata();
    let admin_port = free_port();
    let dir = tempfile::tempdir().unwrap();
    let token_file = dir.path().join("token");
    std::fs::write(&token_file, "tok\n").unwrap();
    let mut child = memnode(
        &url,
        admin_port,
        &[
            "--metadata-token-file",
            token_file.to_str().unwrap(),
            "--name",
            "node-a",
        ],
    );
    let admin = format!("127.0.0.1:{admin_port}");
    assert!(
        wait_for(Duration::from_secs(20), || {
            seen.lock()
                .unwrap()
                .iter()
                .filter(|s| s.path.ends_with("/heartbeat"))
                .count()
                >= 3
        }),
        "no heartbeats: {:?}",
        seen.lock().unwrap()
    );
    let node = client::node_info(&admin).unwrap();
    let log = seen.lock().unwrap().clone();
    let reg = &log[0];
    assert_eq!(
        (reg.method.as_str(), reg.path.as_str()),
        ("POST", "/v1/memnodes")
    );
    assert!(log.iter().all(|s| s.auth.as_deref() == Some("Bearer tok")));
    let doc: serde_json::Value = serde_json::from_str(&reg.body).unwrap();
    assert_eq!(doc["name"], "node-a");
    assert_eq!(doc["admin_url"], format!("http://{admin}"));
    assert_eq!(doc["data_addr"], node.listen.to_string());
    assert_eq!(doc["capacity"], node.capacity);
    assert_eq!(doc["regions"][0]["rkey"], node.regions[0].rkey);
    assert_eq!(doc["regions"][0]["len"], node.regions[0].len);

    let (status, err) = sigterm_and_wait(&mut child);
    assert!(status.success(), "{status}: {err}");
    let log = seen.lock().unwrap().clone();
    let last = log.last().unwrap();
    assert_eq!(
        (last.method.as_str(), last.path.as_str()),
        ("DELETE", "/v1/memnodes/7")
    );
    assert!(
        err.contains("registered with the metadata service"),
        "{err}"
    );
}

/// The region of the `n`th registration the fake saw.
fn registered_region(seen: &Mutex<Vec<Seen>>, n: usize) -> Option<serde_json::Value> {
    let log = seen.lock().unwrap();
    let reg = log
        .iter()
        .filter(|s| s.method == "POST" && s.path == "/v1/memnodes")
        .nth(n)?;
    let doc: serde_json::Value = serde_json::from_str(&reg.body).unwrap();
    Some(doc["regions"][0].clone())
}

#[test]
fn sigterm_with_table_data_keeps_the_registration_and_the_region_file_comes_back() {
    let (url, seen) = fake_metadata_answering_delete(
        "409 Conflict",
        r#"{"error":"memnode 7 (node-b) still holds data of table(s) t","code":"memnode_in_use"}"#,
    );
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("node-b.region");
    let file = file.to_str().unwrap();
    let args = ["--name", "node-b", "--region-file", file];
    let mut child = memnode(&url, free_port(), &args);
    assert!(
        wait_for(Duration::from_secs(20), || registered_region(&seen, 0)
            .is_some()),
        "no registration"
    );
    let first = registered_region(&seen, 0).unwrap();
    assert!(first["instance"].as_u64().unwrap() != 0, "{first}");

    let (status, err) = sigterm_and_wait(&mut child);
    assert!(status.success(), "{status}: {err}");
    let last = seen.lock().unwrap().last().cloned().unwrap();
    assert_eq!(
        (last.method.as_str(), last.path.as_str()),
        ("DELETE", "/v1/memnodes/7")
    );
    assert!(err.contains("rejoins under the same id"), "{err}");

    // Restarted on the same file: the same region (rkey, address, length, instance).
    let mut child = memnode(&url, free_port(), &args);
    assert!(
        wait_for(Duration::from_secs(20), || registered_region(&seen, 1)
            .is_some()),
        "no second registration"
    );
    assert_eq!(registered_region(&seen, 1).unwrap(), first);
    let (status, err) = sigterm_and_wait(&mut child);
    assert!(status.success(), "{status}: {err}");
    assert!(err.contains("region file reopened with its data"), "{err}");
}

#[test]
fn keeps_serving_while_the_metadata_service_is_unreachable() {
    let dead = format!("http://127.0.0.1:{}", free_port());
    let admin_port = free_port();
    let mut child = memnode(&dead, admin_port, &[]);
    let admin = format!("127.0.0.1:{admin_port}");
    assert!(wait_for(Duration::from_secs(20), || client::node_info(
        &admin
    )
    .is_ok()));
    std::thread::sleep(Duration::from_millis(700));
    assert!(child.try_wait().unwrap().is_none(), "memnode exited");
    assert!(client::node_info(&admin).is_ok());
    let (status, err) = sigterm_and_wait(&mut child);
    assert!(status.success(), "{status}: {err}");
    assert!(err.contains("cannot reach the metadata service"), "{err}");
}

#[test]
fn a_bad_metadata_url_is_a_clear_error() {
    let out = Command::new(BIN)
        .args(["--listen", "127.0.0.1:0", "--admin", "127.0.0.1:0"])
        .args(["--capacity", "1MiB", "--metadata", "https://nowhere"])
        .arg("--insecure-no-auth")
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("invalid metadata service URL"), "{err}");
}
