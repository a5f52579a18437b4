//! The memnode's `/metrics` as a scraper sees it: the node's families, its build info and
//! the `process_*` metrics, accepted by `promtool check metrics`, in OpenMetrics for a
//! scraper that asks for it.

use std::io::{Read as _, Write as _};
use std::net::TcpStream;

use memnode::{Memnode, MemnodeConfig};
use telemetry::promtool::{Check, check_metrics};

/// `GET /metrics` with `accept`, as `(content type, body)`.
fn scrape(admin_url: &str, accept: &str) -> (String, String) {
    let host = admin_url
        .trim_start_matches("http://")
        .trim_end_matches('/');
    let mut s = TcpStream::connect(host).unwrap();
    write!(
        s,
        "GET /metrics HTTP/1.1\r\nHost: {host}\r\nAccept: {accept}\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut answer = String::new();
    s.read_to_string(&mut answer).unwrap();
    let (head, body) = answer.split_once("\r\n\r\n").unwrap();
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    let content_type = head
        .lines()
        .find_map(|l| {
            l.to_ascii_lowercase()
                .strip_prefix("content-type: ")
                .map(str::to_owned)
        })
        .unwrap();
    (content_type, body.to_owned())
}

#[test]
fn metrics_carry_build_info_and_process_metrics_and_pass_promtool() {
    let node = Memnode::start(MemnodeConfig::local(1 << 20)).unwrap();
    let (content_type, text) = scrape(&node.admin_url(), "text/plain");
    assert_eq!(content_type, "text/plain; version=0.0.4; charset=utf-8");
    let e = telemetry::prom::parse(&text).unwrap_or_else(|err| panic!("{err}\n{text}"));
    let info = e.get("dmkv_memnode_build_info").next().unwrap();
    assert_eq!(info.value, 1.0);
    assert_eq!(info.label("version"), Some(env!("CARGO_PKG_VERSION")));
    assert!(info.label("rustc").unwrap().starts_with("rustc "));
    for name in [
        "process_cpu_seconds_total",
        "process_resident_memory_bytes",
        "process_open_fds",
        "process_start_time_seconds",
    ] {
        assert!(e.scalar(name).is_some(), "{name} missing");
    }
    assert_eq!(e.scalar("dmkv_memnode_queue_pairs"), Some(0.0));
    match check_metrics(&text) {
        Ok(Check::Passed) => {}
        Ok(Check::Skipped(why)) => eprintln!("SKIPPED: {why}"),
        Err(e) => panic!("{e}\n{text}"),
    }

    let (content_type, text) = scrape(
        &node.admin_url(),
        "application/openmetrics-text;version=1.0.0,text/plain;version=0.0.4;q=0.5",
    );
    assert!(
        content_type.starts_with("application/openmetrics-text"),
        "{content_type}"
    );
    assert!(text.contains("# TYPE dmkv_memnode_build info\n"), "{text}");
    assert!(
        text.contains("# TYPE dmkv_memnode_naks counter\n"),
        "{text}"
    );
    assert!(text.ends_with("# EOF\n"));
    node.shutdown();
}
