//! The metadata service's `/metrics` as a scraper sees it: the catalog's families, the
//! build info and the `process_*` metrics, accepted by `promtool check metrics`, and
//! OpenMetrics for a scraper that asks for it.

mod common;

use common::{client, start};
use metadata::StoreConfig;
use metadata::store::MemStore;
use telemetry::promtool::{Check, check_metrics};

#[test]
fn metrics_carry_build_info_and_process_metrics_and_pass_promtool() {
    let server = start(StoreConfig::Memory(MemStore::new()), |_| {});
    let c = client(&server);
    let r = c.request("GET", "/metrics", None).unwrap();
    assert_eq!(r.status, 200);
    assert_eq!(
        r.header("content-type"),
        Some("text/plain; version=0.0.4; charset=utf-8")
    );
    let text = r.text();
    let e = telemetry::prom::parse(&text).unwrap_or_else(|err| panic!("{err}\n{text}"));
    let info = e
        .get("dmkv_metadata_build_info")
        .next()
        .expect("build info");
    assert_eq!(info.value, 1.0);
    assert_eq!(info.label("version"), Some(env!("CARGO_PKG_VERSION")));
    for name in [
        "process_cpu_seconds_total",
        "process_resident_memory_bytes",
        "process_open_fds",
        "process_start_time_seconds",
    ] {
        assert!(e.scalar(name).is_some(), "{name} missing");
    }
    assert_eq!(
        e.value("dmkv_metadata_leases", "state", "active"),
        Some(0.0)
    );
    match check_metrics(&text) {
        Ok(Check::Passed) => {}
        Ok(Check::Skipped(why)) => eprintln!("SKIPPED: {why}"),
        Err(err) => panic!("{err}\n{text}"),
    }
}

#[test]
fn openmetrics_is_served_to_a_scraper_that_prefers_it() {
    let server = start(StoreConfig::Memory(MemStore::new()), |_| {});
    let addr = server.url().trim_start_matches("http://").to_owned();
    let mut s = std::net::TcpStream::connect(&addr).unwrap();
    use std::io::{Read as _, Write as _};
    write!(
        s,
        "GET /metrics HTTP/1.1\r\nHost: {addr}\r\nAccept: application/openmetrics-text;version=1.0.0,text/plain;version=0.0.4;q=0.5,*/*;q=0.1\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut answer = String::new();
    s.read_to_string(&mut answer).unwrap();
    let lower = answer.to_ascii_lowercase();
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    assert!(
        lower.contains("content-type: application/openmetrics-text; version=1.0.0"),
        "{answer}"
    );
    assert!(
        answer.contains("# TYPE dmkv_metadata_build info\n"),
        "{answer}"
    );
    assert!(
        answer.contains("# TYPE dmkv_metadata_leases_reclaimed counter\n"),
        "{answer}"
    );
    assert!(answer.ends_with("# EOF\n"));
}
