//! The `metadata` binary's telemetry: JSON logs carry the `http.request` span of each
//! request (route, method, status, latency); without `OTEL_EXPORTER_OTLP_ENDPOINT` no
//! exporter is created; with it pointing at a closed port the service still starts,
//! serves and stops, and reports the failing export at most once.

use std::io::Read;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use metadata::client::MetadataClient;

const BIN: &str = env!("CARGO_BIN_EXE_metadata");

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// The service and a thread draining its standard error (so that it never blocks on a
/// full pipe).
struct Service {
    child: Child,
    stderr: std::thread::JoinHandle<String>,
}

fn spawn(dir: &std::path::Path, port: u16, env: &[(&str, String)]) -> Service {
    let mut c = Command::new(BIN);
    for (k, _) in std::env::vars() {
        if k.starts_with("DMKV_") || k.starts_with("OTEL_") || k == "RUST_LOG" {
            c.env_remove(k);
        }
    }
    let mut child = c
        .args(["--listen", &format!("127.0.0.1:{port}"), "--data-dir"])
        .arg(dir)
        .env("DMKV_LOG_FORMAT", "json")
        .env("RUST_LOG", "info,metadata=debug")
        .envs(env.iter().map(|(k, v)| (*k, v.as_str())))
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut pipe = child.stderr.take().unwrap();
    let stderr = std::thread::spawn(move || {
        let mut err = String::new();
        let _ = pipe.read_to_string(&mut err);
        err
    });
    Service { child, stderr }
}

fn wait_healthy(c: &MetadataClient) {
    let deadline = Instant::now() + Duration::from_secs(20);
    while c.health().is_err() {
        assert!(Instant::now() < deadline, "service did not come up");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// SIGTERM, then the exit status and everything written to standard error.
fn stop(service: Service, timeout: Duration) -> (std::process::ExitStatus, String) {
    let Service { mut child, stderr } = service;
    let ok = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .unwrap()
        .success();
    assert!(ok, "kill -TERM failed");
    let deadline = Instant::now() + timeout;
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("metadata did not exit within {timeout:?}");
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    (status, stderr.join().unwrap())
}

fn json_lines(err: &str) -> Vec<serde_json::Value> {
    err.lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON ({e}): {l}")))
        .collect()
}

#[test]
fn json_logs_carry_request_spans_and_no_exporter_without_an_endpoint() {
    let dir = tempfile::tempdir().unwrap();
    let port = free_port();
    let child = spawn(dir.path(), port, &[]);
    let c = MetadataClient::new(&format!("127.0.0.1:{port}")).unwrap();
    wait_healthy(&c);
    c.tables().unwrap();
    assert!(c.table("missing").is_err());
    let (status, err) = stop(child, Duration::from_secs(20));
    assert!(status.success(), "{err}");
    let lines = json_lines(&err);
    let answered: Vec<&serde_json::Value> = lines
        .iter()
        .filter(|l| l["fields"]["message"] == "request answered")
        .collect();
    let find = |route: &str, status: u64| {
        answered.iter().find(|l| {
            l["span"]["name"] == "http.request"
                && l["span"]["http.route"] == route
                && l["fields"]["status"] == status
        })
    };
    let tables =
        find("/v1/tables", 200).unwrap_or_else(|| panic!("no GET /v1/tables span in:\n{err}"));
    assert_eq!(tables["span"]["http.request.method"], "GET");
    assert!(tables["fields"]["latency_us"].is_u64());
    assert!(tables["spans"].as_array().is_some_and(|s| !s.is_empty()));
    find("/v1/tables/{name}", 404).unwrap_or_else(|| panic!("no 404 span in:\n{err}"));
    assert!(
        !err.contains("OTLP"),
        "no exporter without OTEL_EXPORTER_OTLP_ENDPOINT:\n{err}"
    );
}

#[test]
fn otlp_to_a_closed_port_serves_and_warns_at_most_once() {
    let dir = tempfile::tempdir().unwrap();
    let port = free_port();
    let closed = free_port();
    let child = spawn(
        dir.path(),
        port,
        &[
            (
                "OTEL_EXPORTER_OTLP_ENDPOINT",
                format!("http://127.0.0.1:{closed}"),
            ),
            ("OTEL_BSP_SCHEDULE_DELAY", "100".to_owned()),
            ("OTEL_EXPORTER_OTLP_TIMEOUT", "1000".to_owned()),
        ],
    );
    let c = MetadataClient::new(&format!("127.0.0.1:{port}")).unwrap();
    wait_healthy(&c);
    // Several export batches' worth of spans, over a few seconds.
    for _ in 0..15 {
        for _ in 0..10 {
            c.tables().unwrap();
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    assert!(c.health().is_ok(), "still serving");
    let (status, err) = stop(child, Duration::from_secs(30));
    assert!(status.success(), "{err}");
    let lines = json_lines(&err);
    let count = |needle: &str| {
        lines
            .iter()
            .filter(|l| {
                l["fields"]["message"]
                    .as_str()
                    .is_some_and(|m| m.contains(needle))
            })
            .count()
    };
    assert_eq!(count("exporting traces over OTLP"), 1, "{err}");
    let failed = count("OTLP trace export failed");
    // The exporter was created and tried (once reported), and did not spam.
    assert_eq!(failed, 1, "export failures were not reported once:\n{err}");
    assert_eq!(count("OTLP trace export still failing"), 0, "{err}");
    let warnings = lines.iter().filter(|l| l["level"] == "WARN").count();
    assert!(
        warnings <= 2,
        "at most the no-token warning and one export warning:\n{err}"
    );
}
