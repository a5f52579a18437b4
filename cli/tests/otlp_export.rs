//! The `dmkv` binary exports its spans when `OTEL_EXPORTER_OTLP_ENDPOINT` is set: a
//! listener standing in for the collector receives an OTLP/gRPC request (HTTP/2) whose
//! payload holds the operation's `kv.op` span, its metadata call, and the resource's
//! `service.name`, `service.version` and `service.instance.id`. Without the variable
//! the command logs nothing (warn level).

use std::io::Read;
use std::net::TcpListener;
use std::process::{Command, Output};
use std::time::{Duration, Instant};

use kvstore::{TableSpec, TransportKind};
use testbed::EmbeddedOptions;

/// Everything sent to `listener` over its first connection within `wait`, or nothing.
fn received(listener: TcpListener, wait: Duration) -> Vec<u8> {
    listener.set_nonblocking(true).unwrap();
    let deadline = Instant::now() + wait;
    let mut conn = loop {
        match listener.accept() {
            Ok((c, _)) => break c,
            Err(_) if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(10)),
            Err(_) => return Vec::new(),
        }
    };
    conn.set_nonblocking(false).unwrap();
    conn.set_read_timeout(Some(Duration::from_millis(200)))
        .unwrap();
    let mut bytes = Vec::new();
    let mut buf = [0u8; 4096];
    while Instant::now() < deadline {
        match conn.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => bytes.extend_from_slice(&buf[..n]),
            Err(_) if contains(&bytes, b"kv.op") => break,
            Err(_) => {}
        }
    }
    bytes
}

fn contains(haystack: &[u8], needle: &[u8]) -> bool {
    haystack.windows(needle.len()).any(|w| w == needle)
}

fn dmkv(url: &str, endpoint: Option<&str>, args: &[&str]) -> Output {
    let mut c = Command::new(env!("CARGO_BIN_EXE_dmkv"));
    for (k, _) in std::env::vars() {
        if k.starts_with("DMKV_") || k.starts_with("OTEL_") || k == "RUST_LOG" {
            c.env_remove(k);
        }
    }
    if let Some(e) = endpoint {
        c.env("OTEL_EXPORTER_OTLP_ENDPOINT", e)
            .env("OTEL_EXPORTER_OTLP_TIMEOUT", "1000")
            .env("DMKV_INSTANCE_ID", "cli-under-test");
    }
    c.arg("--metadata").arg(url).args(args).output().unwrap()
}

#[test]
fn the_cli_exports_its_operation_spans_over_otlp() {
    let client = testbed::embedded_client(EmbeddedOptions {
        memnodes: 1,
        capacity: 16 << 20,
        transport: TransportKind::Local,
        ..EmbeddedOptions::default()
    })
    .unwrap();
    client.create_table("t", &TableSpec::clover(128)).unwrap();
    let url = client.metadata_url();

    let collector = TcpListener::bind("127.0.0.1:0").unwrap();
    let endpoint = format!("http://{}", collector.local_addr().unwrap());
    let reader = std::thread::spawn(move || received(collector, Duration::from_secs(10)));
    let o = dmkv(&url, Some(&endpoint), &["put", "t", "k", "v"]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let bytes = reader.join().unwrap();
    assert!(
        bytes.starts_with(b"PRI * HTTP/2.0"),
        "not HTTP/2: {bytes:?}"
    );
    for needle in [
        &b"kv.op"[..],
        b"service.name",
        b"dmkv",
        b"service.version",
        env!("CARGO_PKG_VERSION").as_bytes(),
        b"service.instance.id",
        b"cli-under-test",
        b"http.request.method",
    ] {
        assert!(
            contains(&bytes, needle),
            "{} missing from the export",
            String::from_utf8_lossy(needle)
        );
    }

    // Without the variable the command runs as before, its log lines at warn.
    let o = dmkv(&url, None, &["get", "t", "k"]);
    assert!(o.status.success());
    assert_eq!(o.stdout, b"v\n");
    assert!(
        o.stderr.is_empty(),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
}
