//! Observability of an embedded cluster under load: the metadata service's `/metrics`
//! (strict Prometheus text, counters and latency histograms that move), the cluster view
//! at `/v1/cluster/stats` (two real memnodes registered through `HttpRegistrar`, scraped
//! server-side, with rates from a verbs client doing READs and WRITEs), and the dashboard
//! in headless Chromium (numbers shown and changing, and a screenshot).

mod common;

use std::path::PathBuf;
use std::process::Command;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use common::{TOKEN, client, start, wait_until};
use memnode::registrar::{HttpRegistrar, Registrar};
use memnode::{Memnode, MemnodeConfig, MemnodeHandle};
use metadata::api::{CreateTableRequest, IndexKind};
use metadata::client::MetadataClient;
use metadata::cluster::ClusterStats;
use metadata::history::HistorySample;
use metadata::store::MemStore;
use metadata::{ServerHandle, StoreConfig};
use verbs::rc::RcConfig;
use verbs::transport::udp::UdpTransport;
use verbs::worker::{Worker, WorkerConfig};
use verbs::wr::RemoteAddr;

/// Memory per memnode.
const CAPACITY: u64 = 16 << 20;
/// The load stops by itself after this long, whatever happens to the test.
const LOAD_LIMIT: Duration = Duration::from_secs(120);

/// A metadata service, two memnodes registered with it, and a client loading both.
struct Cluster {
    server: ServerHandle,
    nodes: Vec<MemnodeHandle>,
    registrars: Vec<HttpRegistrar>,
    stop: Arc<AtomicBool>,
    /// Operations done by each memnode's load.
    ops: Vec<Arc<AtomicU64>>,
    load: Vec<JoinHandle<()>>,
}

impl Cluster {
    fn start() -> Cluster {
        let server = start(StoreConfig::Memory(MemStore::new()), |c| {
            c.catalog.heartbeat_interval_ms = 200;
            c.catalog.heartbeat_timeout_ms = 5000;
            c.stats_history = "1m/1s".parse().unwrap();
        });
        let c = client(&server);
        let mut nodes = Vec::new();
        let mut registrars = Vec::new();
        for i in 0..2 {
            let node = Memnode::start(MemnodeConfig::local(CAPACITY)).expect("memnode starts");
            let registrar =
                HttpRegistrar::new(&server.url(), Some(TOKEN.into()), Some(format!("mem-{i}")))
                    .unwrap()
                    .with_interval(Duration::from_millis(200));
            registrar
                .register(&node.node_info(), &node.admin_url())
                .unwrap();
            nodes.push(node);
            registrars.push(registrar);
        }
        assert!(
            wait_until(Duration::from_secs(20), || c
                .memnodes()
                .is_ok_and(|m| m.len() == 2 && m.iter().all(|m| m.healthy))),
            "both memnodes never appeared healthy"
        );
        c.create_table(&CreateTableRequest {
            name: "users".into(),
            index: IndexKind::Clover,
            value_limit: 4096,
            memnodes: None,
            replication: None,
            update_mode: None,
            inplace: None,
        })
        .unwrap();
        c.lease("dashboard-test", 3 << 20).unwrap();
        let stop = Arc::new(AtomicBool::new(false));
        let ops: Vec<Arc<AtomicU64>> = nodes.iter().map(|_| Arc::new(AtomicU64::new(0))).collect();
        let load = nodes
            .iter()
            .zip(&ops)
            .map(|(n, ops)| load(n.admin_url(), n.data_addr(), stop.clone(), ops.clone()))
            .collect();
        Cluster {
            server,
            nodes,
            registrars,
            stop,
            ops,
            load,
        }
    }

    fn client(&self) -> MetadataClient {
        client(&self.server)
    }

    fn stats(&self) -> ClusterStats {
        let r = self
            .client()
            .request("GET", "/v1/cluster/stats", None)
            .unwrap();
        assert_eq!(r.status, 200, "{}", r.text());
        serde_json::from_slice(&r.body).expect("cluster stats are JSON")
    }

    /// Waits until the load has done `n` more operations, shared evenly: every memnode's
    /// load has made progress (one that started late would show no traffic yet).
    fn wait_ops(&self, n: u64) {
        let each = n.div_ceil(self.ops.len().max(1) as u64);
        let targets: Vec<u64> = self
            .ops
            .iter()
            .map(|o| o.load(Ordering::Relaxed) + each)
            .collect();
        assert!(
            wait_until(Duration::from_secs(30), || self
                .ops
                .iter()
                .zip(&targets)
                .all(|(o, t)| o.load(Ordering::Relaxed) >= *t)),
            "the load made no progress on every memnode"
        );
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        for t in self.load.drain(..) {
            let _ = t.join();
        }
        for r in &self.registrars {
            r.stop();
        }
        for n in self.nodes.drain(..) {
            n.shutdown();
        }
    }
}

/// A verbs client on its own queue pair writing and reading 64 bytes in a loop, gently
/// (a short pause every 32 operations), until `stop` or [`LOAD_LIMIT`].
fn load(
    admin: String,
    data: std::net::SocketAddrV4,
    stop: Arc<AtomicBool>,
    ops: Arc<AtomicU64>,
) -> JoinHandle<()> {
    std::thread::spawn(move || {
        // Patient retransmission: the machine may be busy.
        let rc = RcConfig {
            retransmit_timeout: Duration::from_millis(20),
            max_retries: 200,
            ..RcConfig::default()
        };
        let mut transport = UdpTransport::for_remote(data, rc).expect("bind a UDP transport");
        let (qp, regions) =
            memnode::client::connect_udp(&admin, &mut transport).expect("connect_udp");
        let worker = Worker::new(Box::new(transport), WorkerConfig::baseline());
        let qp = worker.qp(qp);
        let at = RemoteAddr::new(regions[0].rkey, regions[0].base_va);
        let started = Instant::now();
        worker.block_on(async {
            let mut n: u64 = 0;
            while !stop.load(Ordering::Relaxed) && started.elapsed() < LOAD_LIMIT {
                qp.write(at, vec![n as u8; 64]).await.expect("WRITE");
                let back = qp.read(at, 64).await.expect("READ");
                assert_eq!(back, vec![n as u8; 64]);
                n += 1;
                ops.fetch_add(2, Ordering::Relaxed);
                if n.is_multiple_of(16) {
                    worker.sleep(Duration::from_millis(1)).await;
                }
            }
        });
    })
}

fn metrics(c: &MetadataClient) -> telemetry::prom::Exposition {
    let r = c.request("GET", "/metrics", None).unwrap();
    assert_eq!(r.status, 200);
    telemetry::prom::parse(&r.text())
        .unwrap_or_else(|e| panic!("/metrics is not strict Prometheus text: {e}\n{}", r.text()))
}

#[test]
fn metrics_are_strict_prometheus_and_move_under_load() {
    let cluster = Cluster::start();
    let c = cluster.client();
    let before = metrics(&c);
    for _ in 0..20 {
        c.memnodes().unwrap();
        c.tables().unwrap();
    }
    cluster.wait_ops(100);
    let after = metrics(&c);
    let count = |e: &telemetry::prom::Exposition, route: &str| {
        e.get("dmkv_metadata_request_duration_seconds_count")
            .find(|s| s.label("route") == Some(route) && s.label("method") == Some("GET"))
            .map(|s| s.value)
            .unwrap_or(0.0)
    };
    assert!(count(&after, "/v1/memnodes") >= count(&before, "/v1/memnodes") + 20.0);
    assert!(count(&after, "/v1/tables") >= count(&before, "/v1/tables") + 20.0);
    assert!(after.sum("dmkv_metadata_requests_total") > before.sum("dmkv_metadata_requests_total"));
    // Heartbeats keep coming: their histogram moves by itself.
    let hb = |e: &telemetry::prom::Exposition| {
        e.get("dmkv_metadata_request_duration_seconds_count")
            .filter(|s| s.label("route") == Some("/v1/memnodes/{id}/heartbeat"))
            .map(|s| s.value)
            .sum::<f64>()
    };
    let hb0 = hb(&after);
    assert!(wait_until(Duration::from_secs(10), || hb(&metrics(&c)) > hb0));
    assert_eq!(
        after.types["dmkv_metadata_request_duration_seconds"],
        "histogram"
    );
    assert_eq!(
        after.value("dmkv_metadata_memnodes", "health", "healthy"),
        Some(2.0)
    );
    // The memnodes' own /metrics are strict too, and their message counters move.
    for n in &cluster.nodes {
        let scrape = || metadata::cluster::scrape(&n.admin_url()).expect("memnode /metrics");
        let a = scrape();
        cluster.wait_ops(100);
        let b = scrape();
        let reads = |e: &telemetry::prom::Exposition| {
            e.value("dmkv_memnode_messages_total", "verb", "read")
                .unwrap()
        };
        assert!(
            reads(&b) > reads(&a),
            "READs did not move on {}",
            n.admin_url()
        );
    }
}

#[test]
fn cluster_stats_scrape_memnodes_and_rate_their_counters() {
    let cluster = Cluster::start();
    let first = cluster.stats();
    assert_eq!(first.memnodes.len(), 2);
    cluster.wait_ops(200);
    std::thread::sleep(Duration::from_millis(600));
    let second = cluster.stats();
    assert!(second.interval_ms > 0);
    assert_eq!(second.totals.memnodes, 2);
    assert_eq!(second.totals.healthy, 2);
    assert_eq!(second.totals.capacity_bytes, 2 * CAPACITY);
    assert!(second.totals.leased_bytes >= 3 << 20, "{:?}", second.totals);
    for (a, b) in first.memnodes.iter().zip(&second.memnodes) {
        assert!(b.up && b.healthy, "{b:?}");
        assert!(b.name.starts_with("mem-"));
        assert_eq!(b.capacity_bytes, CAPACITY);
        assert_eq!(b.qps, 1);
        assert!(b.messages_total["read"] > a.messages_total["read"], "{b:?}");
        assert!(
            b.messages_total["write"] > a.messages_total["write"],
            "{b:?}"
        );
        assert!(b.messages_per_s["read"] > 0.0, "{b:?}");
        assert!(b.datagrams_in_per_s > 0.0, "{b:?}");
        assert!(b.naks_total.contains_key("remote_access"), "{b:?}");
        // Batch latency from the memnode's histogram over the interval.
        assert!(b.batch_latency_mean_us.is_some_and(|v| v > 0.0), "{b:?}");
        assert!(b.batch_latency_p99_us.is_some_and(|v| v > 0.0), "{b:?}");
        assert!(b.dropped_total.contains_key("unknown_qpn"), "{b:?}");
    }
    assert!(second.totals.messages_per_s > 0.0);
    assert!(second.metadata.requests_total > 0);
    assert!(second.accelerator.is_none());
    // A dead memnode shows as down, with its error, without holding the answer up.
    let mut cluster = cluster;
    cluster.stop.store(true, Ordering::Relaxed);
    for t in cluster.load.drain(..) {
        t.join().unwrap();
    }
    cluster.registrars.pop().unwrap().stop();
    cluster.nodes.pop().unwrap().shutdown();
    std::thread::sleep(Duration::from_millis(500));
    let started = Instant::now();
    let third = cluster.stats();
    assert!(started.elapsed() < Duration::from_secs(5));
    let dead = third.memnodes.iter().filter(|m| !m.up).count();
    assert_eq!(dead, 1, "{third:?}");
    assert!(third.memnodes.iter().any(|m| m.error.is_some()));
}

fn history(c: &MetadataClient, query: &str) -> (u16, serde_json::Value) {
    let r = c
        .request("GET", &format!("/v1/cluster/history{query}"), None)
        .unwrap();
    (r.status, serde_json::from_slice(&r.body).expect("JSON"))
}

#[test]
fn cluster_history_keeps_a_sample_every_interval() {
    let cluster = Cluster::start();
    let c = cluster.client();
    // A sample a second: a few seconds of load leave a few samples with rates.
    let samples = |q: &str| -> Vec<HistorySample> {
        let (status, body) = history(&c, q);
        assert_eq!(status, 200, "{body}");
        serde_json::from_value(body["samples"].clone()).unwrap()
    };
    assert!(
        wait_until(Duration::from_secs(20), || {
            let s = samples("");
            s.len() >= 3 && s.last().is_some_and(|s| s.ops_per_s > 0.0)
        }),
        "{:?}",
        samples("")
    );
    let all = samples("?range=1m");
    assert!(all.windows(2).all(|w| w[0].at_ms < w[1].at_ms), "{all:?}");
    let last = all.last().unwrap();
    assert_eq!((last.memnodes, last.healthy), (2, 2));
    assert_eq!(last.capacity_bytes, 2 * CAPACITY);
    assert!(last.free_bytes < last.capacity_bytes, "a lease is out");
    assert!(
        last.bytes_in_per_s > 0.0 && last.bytes_out_per_s > 0.0,
        "{last:?}"
    );
    let (_, body) = history(&c, "?range=30s");
    assert_eq!(body["interval_ms"], 1000);
    assert_eq!(body["span_ms"], 60_000);
    assert_eq!(body["range_ms"], 30_000);
    // A range of the last 2 s holds fewer samples than the whole minute.
    assert!(
        samples("?range=2s").len() < samples("?range=1m").len() || samples("?range=1m").len() <= 3
    );
    // Longer than what is kept, or not a duration: a clear 400.
    let (status, body) = history(&c, "?range=1h");
    assert_eq!(status, 400);
    assert_eq!(body["code"], "invalid_query");
    assert!(
        body["error"]
            .as_str()
            .unwrap()
            .contains("longer than the history kept (1m"),
        "{body}"
    );
    let (status, body) = history(&c, "?range=soon");
    assert_eq!(status, 400, "{body}");
    assert!(body["error"].as_str().unwrap().contains("invalid duration"));
}

#[test]
fn dashboard_is_served_from_the_binary() {
    let server = start(StoreConfig::Memory(MemStore::new()), |_| {});
    let c = client(&server);
    let r = c.request("GET", "/", None).unwrap();
    assert_eq!(r.status, 307);
    assert_eq!(r.header("location"), Some("/dashboard"));
    let r = c.request("GET", "/dashboard", None).unwrap();
    assert_eq!(r.status, 200);
    assert!(r.header("content-type").unwrap().starts_with("text/html"));
    assert!(r.text().contains("dmkv cluster"));
    for (path, kind) in [
        ("/dashboard/app.js", "text/javascript"),
        ("/dashboard/style.css", "text/css"),
    ] {
        let r = c.request("GET", path, None).unwrap();
        assert_eq!(r.status, 200, "{path}");
        assert!(
            r.header("content-type").unwrap().starts_with(kind),
            "{path}"
        );
    }
}

// ---- headless Chromium ----

fn interop_required() -> bool {
    std::env::var("DMKV_REQUIRE_INTEROP").is_ok_and(|v| v == "1")
}

/// Chromium, or `None` after a loud skip (a failure under `DMKV_REQUIRE_INTEROP=1`).
fn chromium() -> Option<PathBuf> {
    let found = ["/usr/bin/chromium", "/usr/bin/chromium-browser"]
        .into_iter()
        .map(PathBuf::from)
        .find(|p| p.exists());
    if found.is_none() {
        assert!(
            !interop_required(),
            "chromium is not available but DMKV_REQUIRE_INTEROP=1 requires it (apt-get install chromium)"
        );
        use std::io::Write;
        let _ = writeln!(
            std::io::stderr(),
            "SKIPPED: chromium is not available; the dashboard browser test did not run \
             (set DMKV_REQUIRE_INTEROP=1 to make that a failure)"
        );
    }
    found
}

fn headless(chromium: &PathBuf, profile: &std::path::Path) -> Command {
    headless_at(chromium, profile, 1500, 1000)
}

/// Headless Chromium with a window of `width` × `height` pixels.
fn headless_at(chromium: &PathBuf, profile: &std::path::Path, width: u32, height: u32) -> Command {
    let mut cmd = Command::new(chromium);
    cmd.args([
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--no-first-run",
        "--disable-dev-shm-usage",
        "--hide-scrollbars",
    ])
    .arg(format!("--window-size={width},{height}"))
    .arg(format!("--user-data-dir={}", profile.display()));
    cmd
}

/// The page's DOM after `budget_ms` of virtual time.
fn dump_dom(chromium: &PathBuf, url: &str, budget_ms: u32) -> String {
    let profile = tempfile::tempdir().unwrap();
    let out = headless(chromium, profile.path())
        .arg(format!("--virtual-time-budget={budget_ms}"))
        .arg("--dump-dom")
        .arg(url)
        .output()
        .expect("chromium runs");
    assert!(
        out.status.success(),
        "chromium failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// The text of the element with `id` (up to its first tag).
fn text_of<'a>(dom: &'a str, id: &str) -> Option<&'a str> {
    let at = dom.find(&format!("id=\"{id}\""))?;
    let rest = &dom[at..];
    let start = rest.find('>')? + 1;
    let end = rest[start..].find('<')? + start;
    Some(rest[start..end].trim())
}

/// The row of memnode `id`.
fn row(dom: &str, id: u64) -> Option<&str> {
    let at = dom.find(&format!("<tr id=\"mn-{id}\""))?;
    let rest = &dom[at..];
    Some(&rest[..rest.find("</tr>")?])
}

/// `data-v` of the row's received-datagrams cell.
fn rx_rate(row: &str) -> f64 {
    let at = row.find("class=\"rx\" data-v=\"").expect("rx cell") + "class=\"rx\" data-v=\"".len();
    let end = row[at..].find('"').unwrap() + at;
    row[at..end].parse().expect("a rate")
}

#[test]
fn dashboard_in_headless_chromium_shows_the_cluster_live() {
    let Some(chromium) = chromium() else {
        return;
    };
    let cluster = Cluster::start();
    cluster.wait_ops(200);
    let url = format!("{}/dashboard#credential={TOKEN}", cluster.server.url());
    let listed = cluster.client().memnodes().unwrap();
    let ids: Vec<u64> = listed.iter().map(|m| m.id).collect();
    // Rates need two scrapes: a page that has been open for a while has seen them.
    cluster.stats();
    std::thread::sleep(Duration::from_secs(1));
    // On a loaded machine a memnode's load thread can miss a whole rate window (a
    // page then shows 0 for it): load the page again, a bounded number of times,
    // until every memnode shows traffic.
    let live = |dom: &str| {
        ids.iter().all(|id| {
            row(dom, *id)
                .and_then(|r| r.find("class=\"rx\" data-v=\"").map(|_| rx_rate(r)))
                .is_some_and(|v| v > 0.0)
        })
    };
    let load_live = || {
        let mut dom = dump_dom(&chromium, &url, 3000);
        for _ in 0..5 {
            if live(&dom) {
                break;
            }
            std::thread::sleep(Duration::from_secs(1));
            dom = dump_dom(&chromium, &url, 3000);
        }
        dom
    };
    let first = load_live();
    std::thread::sleep(Duration::from_secs(2));
    let second = load_live();
    for dom in [&first, &second] {
        assert!(
            !dom.contains("refresh failed"),
            "the page failed to refresh:\n{dom}"
        );
        for m in &listed {
            let id = m.id;
            let r = row(dom, id).unwrap_or_else(|| panic!("no row for memnode {id}:\n{dom}"));
            assert!(r.contains(&format!(">{}<", m.name)), "{r}");
            assert!(r.contains("badge healthy"), "{r}");
            assert!(r.contains("16.0 MiB"), "{r}");
        }
        assert_eq!(text_of(dom, "t-healthy"), Some("2 / 2"), "{dom}");
        assert_eq!(text_of(dom, "t-capacity"), Some("32.0 MiB"));
        assert!(dom.contains(">users<"), "the table is listed");
        assert!(
            dom.contains("/v1/memnodes/{id}/heartbeat"),
            "routes are listed"
        );
    }
    // Live: the rates are non-zero and differ between the two loads of the page.
    let rates = |dom: &str| -> Vec<f64> {
        ids.iter()
            .map(|id| rx_rate(row(dom, *id).unwrap()))
            .collect()
    };
    // Batch latency (p99, µs) is shown for every memnode.
    for dom in [&first, &second] {
        for id in &ids {
            let r = row(dom, *id).unwrap();
            let at = r.find("class=\"lat\" data-v=\"").expect("latency cell")
                + "class=\"lat\" data-v=\"".len();
            let v: f64 = r[at..at + r[at..].find('"').unwrap()]
                .parse()
                .unwrap_or_else(|_| panic!("no batch latency in {r}"));
            assert!(v > 0.0, "{r}");
        }
    }
    let (a, b) = (rates(&first), rates(&second));
    assert!(a.iter().chain(&b).all(|r| *r > 0.0), "{a:?} {b:?}");
    assert_ne!(a, b, "the throughput did not change");
    let msgs = |dom: &str| text_of(dom, "t-msgs").unwrap().to_owned();
    assert_ne!(msgs(&first), "–");
    assert_ne!(msgs(&first), msgs(&second));

    // A screenshot for reviewers: target/dashboard.png.
    let target = PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
        .parent()
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("target"));
    let png = target.join("dashboard.png");
    let _ = std::fs::remove_file(&png);
    let profile = tempfile::tempdir().unwrap();
    let out = headless(&chromium, profile.path())
        .arg("--virtual-time-budget=3000")
        .arg(format!("--screenshot={}", png.display()))
        .arg(&url)
        .output()
        .expect("chromium runs");
    assert!(
        out.status.success(),
        "chromium failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let bytes = std::fs::read(&png).expect("a screenshot was written");
    assert!(bytes.starts_with(b"\x89PNG\r\n\x1a\n"), "not a PNG");
    assert!(bytes.len() > 10_000, "suspiciously small screenshot");
    use std::io::Write;
    let _ = writeln!(std::io::stderr(), "dashboard screenshot: {}", png.display());
}

#[test]
fn dashboard_in_headless_chromium_flags_down_memnodes_and_lost_tables() {
    let Some(chromium) = chromium() else {
        return;
    };
    let server = start(StoreConfig::Memory(MemStore::new()), |c| {
        c.catalog.heartbeat_interval_ms = 50;
        c.catalog.heartbeat_timeout_ms = 300;
    });
    let c = client(&server);
    let a = c
        .register_memnode(&common::memnode("node-a", 4791, 1, CAPACITY))
        .unwrap();
    c.create_table(&CreateTableRequest {
        name: "orders".into(),
        index: IndexKind::Race,
        value_limit: 256,
        memnodes: Some(vec![a.id]),
        replication: None,
        update_mode: None,
        inplace: None,
    })
    .unwrap();
    // node-a comes back with new memory; nobody heartbeats, so it goes down.
    c.register_memnode(&common::memnode("node-a", 4791, 2, CAPACITY))
        .unwrap();
    // node-b also comes back with new memory, but keeps heartbeating: rejoined.
    let b = c
        .register_memnode(&common::memnode("node-b", 4792, 1, CAPACITY))
        .unwrap();
    c.register_memnode(&common::memnode("node-b", 4792, 2, CAPACITY))
        .unwrap();
    std::thread::sleep(Duration::from_millis(500));
    let stop = Arc::new(AtomicBool::new(false));
    let beat = {
        let (c, stop) = (client(&server), stop.clone());
        std::thread::spawn(move || {
            while !stop.load(Ordering::Relaxed) {
                let _ = c.heartbeat(b.id);
                std::thread::sleep(Duration::from_millis(40));
            }
        })
    };
    std::thread::sleep(Duration::from_millis(100));
    let dom = dump_dom(
        &chromium,
        &format!("{}/dashboard#credential={TOKEN}", server.url()),
        3000,
    );
    stop.store(true, Ordering::Relaxed);
    beat.join().unwrap();
    assert!(!dom.contains("refresh failed"), "{dom}");
    // Without a credential, the page says how to give one.
    let anonymous = dump_dom(&chromium, &format!("{}/dashboard", server.url()), 2000);
    assert!(
        anonymous.contains("refresh failed") && anonymous.contains("#credential="),
        "{anonymous}"
    );
    let at = dom.find("id=\"alerts\"").expect("an alerts section");
    let alerts = &dom[at..at + dom[at..].find("</section>").unwrap()];
    assert!(!alerts.contains("hidden"), "{alerts}");
    assert!(alerts.contains("memnode <b>node-a</b>"), "{alerts}");
    assert!(alerts.contains("is <b>down</b>"), "{alerts}");
    assert!(
        alerts.contains("table <b>orders</b> is <b>lost</b>"),
        "{alerts}"
    );
    assert!(alerts.contains("restarted"), "{alerts}");
    assert_eq!(text_of(&dom, "t-tables"), Some("1 · 0"), "{dom}");
    let r = row(&dom, a.id).unwrap_or_else(|| panic!("no row for node-a:\n{dom}"));
    assert!(r.contains("data-state=\"down\""), "{r}");
    assert!(r.contains(">down · "), "{r}");
    assert!(
        dom.contains("<tr data-health=\"lost\"><td class=\"name\" title=\"orders\">orders</td>"),
        "{dom}"
    );
    // The failure panels: node-a down since its last heartbeat, orders lost on it.
    let at = dom.find("id=\"failures\"").expect("a failures panel");
    let failures = &dom[at..at + dom[at..].find("</table>").unwrap()];
    assert!(
        failures.contains(&format!("data-memnode=\"{}\" data-state=\"down\"", a.id)),
        "{failures}"
    );
    assert!(failures.contains("no heartbeat for"), "{failures}");
    assert!(
        failures.contains(&format!(
            "data-memnode=\"{}\" data-state=\"rejoined\"",
            b.id
        )),
        "{failures}"
    );
    assert!(
        failures.contains("registered again (region generation 2) with new memory"),
        "{failures}"
    );
    let at = dom.find("id=\"unhealthy\"").expect("a table health panel");
    let unhealthy = &dom[at..at + dom[at..].find("</table>").unwrap()];
    assert!(
        unhealthy.contains("data-table=\"orders\" data-health=\"lost\""),
        "{unhealthy}"
    );
    assert!(unhealthy.contains("node-a (1) since"), "{unhealthy}");
    // A lost table of one copy has nothing to re-replicate: no copy is listed.
    assert!(!dom.contains("<tr class=\"copy\""), "{dom}");
}

/// Where reviewers find the screenshots: the target directory.
fn artifacts() -> PathBuf {
    PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
        .parent()
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("target"))
}

/// The DOM of `url` in a window `width` pixels wide, after `budget_ms` of virtual time.
fn dump_dom_at(chromium: &PathBuf, url: &str, width: u32, budget_ms: u32) -> String {
    let profile = tempfile::tempdir().unwrap();
    let out = headless_at(chromium, profile.path(), width, 1000)
        .arg(format!("--virtual-time-budget={budget_ms}"))
        .arg("--dump-dom")
        .arg(url)
        .output()
        .expect("chromium runs");
    assert!(
        out.status.success(),
        "chromium failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// A full-page screenshot of `url` at `width` pixels, written to `png`.
fn screenshot(chromium: &PathBuf, url: &str, width: u32, png: &std::path::Path) {
    let _ = std::fs::remove_file(png);
    let profile = tempfile::tempdir().unwrap();
    let out = headless_at(chromium, profile.path(), width, 2400)
        .arg("--virtual-time-budget=3000")
        .arg(format!("--screenshot={}", png.display()))
        .arg(url)
        .output()
        .expect("chromium runs");
    assert!(
        out.status.success(),
        "chromium failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let bytes = std::fs::read(png).expect("a screenshot was written");
    assert!(bytes.starts_with(b"\x89PNG\r\n\x1a\n"), "not a PNG");
    assert!(bytes.len() > 10_000, "suspiciously small screenshot");
    use std::io::Write;
    let _ = writeln!(std::io::stderr(), "dashboard screenshot: {}", png.display());
}

/// The layout the page reports with `?layout=check` (`<body data-layout>`).
fn layout(dom: &str) -> serde_json::Value {
    let at = dom
        .find("data-layout=\"")
        .unwrap_or_else(|| panic!("no layout report:\n{dom}"))
        + "data-layout=\"".len();
    let raw = &dom[at..at + dom[at..].find('"').unwrap()];
    let json = raw
        .replace("&quot;", "\"")
        .replace("&lt;", "<")
        .replace("&gt;", ">")
        .replace("&amp;", "&");
    serde_json::from_str(&json).unwrap_or_else(|e| panic!("{e}: {json}"))
}

/// No horizontal overflow, every panel inside the window, no two panels overlapping.
fn assert_layout_fits(dom: &str, width: u32) {
    let l = layout(dom);
    let inner = l["innerWidth"].as_f64().unwrap();
    let scroll = l["scrollWidth"].as_f64().unwrap();
    assert_eq!(inner, f64::from(width), "{l}");
    assert!(scroll <= inner, "horizontal scroll at {width} px: {l}");
    let panels = l["panels"].as_array().unwrap();
    assert!(panels.len() >= 8, "{l}");
    let edge = |p: &serde_json::Value, k: &str| p[k].as_f64().unwrap();
    for p in panels {
        assert!(
            edge(p, "left") >= 0.0 && edge(p, "right") <= inner,
            "panel {} leaves the window at {width} px: {p}",
            p["id"]
        );
    }
    for (i, a) in panels.iter().enumerate() {
        for b in &panels[i + 1..] {
            let apart = edge(a, "right") <= edge(b, "left") + 0.5
                || edge(b, "right") <= edge(a, "left") + 0.5
                || edge(a, "bottom") <= edge(b, "top") + 0.5
                || edge(b, "bottom") <= edge(a, "top") + 0.5;
            assert!(apart, "panels overlap at {width} px: {a} {b}");
        }
    }
}

#[test]
fn dashboard_in_headless_chromium_fits_1280_and_1920_pixels_and_charts_history() {
    let Some(chromium) = chromium() else {
        return;
    };
    let cluster = Cluster::start();
    cluster.wait_ops(200);
    // A few samples of history (one a second) before the page looks.
    let c = cluster.client();
    assert!(wait_until(Duration::from_secs(20), || {
        history(&c, "").1["samples"]
            .as_array()
            .is_some_and(|s| s.len() >= 3)
    }));
    let url = format!(
        "{}/dashboard?layout=check#credential={TOKEN}",
        cluster.server.url()
    );
    for width in [1280, 1920] {
        let dom = dump_dom_at(&chromium, &url, width, 3000);
        assert!(!dom.contains("refresh failed"), "{dom}");
        assert_layout_fits(&dom, width);
        // The history is charted: points in every chart, the ops chart above zero.
        for chart in ["c-ops", "c-bytes", "c-naks", "c-free"] {
            let t = tag(&dom, chart).unwrap_or_else(|| panic!("no chart {chart}"));
            let points: usize = attr(t, "data-points").parse().unwrap();
            assert!(points >= 3, "{chart}: {t}");
        }
        let last: f64 = attr(tag(&dom, "c-ops").unwrap(), "data-last")
            .parse()
            .unwrap();
        assert!(last > 0.0, "ops/s charted");
        // The selector offers only what the service keeps (a minute).
        let at = dom.find("id=\"h-range\"").unwrap();
        let select = &dom[at..at + dom[at..].find("</select>").unwrap()];
        assert!(select.contains("all (60 s)"), "{select}");
        assert!(!select.contains(">5m<"), "{select}");
        screenshot(
            &chromium,
            &url,
            width,
            &artifacts().join(format!("dashboard-{width}.png")),
        );
    }
}

/// The start tag of the element with `id`.
fn tag<'a>(dom: &'a str, id: &str) -> Option<&'a str> {
    let at = dom.find(&format!("id=\"{id}\""))?;
    let start = dom[..at].rfind('<')?;
    let end = at + dom[at..].find('>')?;
    Some(&dom[start..=end])
}

/// The value of attribute `name` in start tag `tag`.
fn attr<'a>(tag: &'a str, name: &str) -> &'a str {
    let key = format!("{name}=\"");
    let at = tag
        .find(&key)
        .unwrap_or_else(|| panic!("no {name} in {tag}"))
        + key.len();
    &tag[at..at + tag[at..].find('"').unwrap()]
}

/// `GET /v1/tables/{name}/location?key=` of `key`.
fn location(c: &MetadataClient, table: &str, key: &[u8]) -> (u16, serde_json::Value) {
    use base64::Engine as _;
    let b64 = base64::engine::general_purpose::STANDARD.encode(key);
    let q = dmkv_api::http::encode_query(&b64);
    let r = c
        .request("GET", &format!("/v1/tables/{table}/location?key={q}"), None)
        .unwrap();
    (r.status, serde_json::from_slice(&r.body).expect("JSON"))
}

#[test]
fn key_lookup_finds_clover_and_race_keys_and_says_when_one_is_absent() {
    let mut cluster = Cluster::start();
    // The raw load writes at the start of both regions: stop it before tables get memory.
    cluster.stop.store(true, Ordering::Relaxed);
    for t in cluster.load.drain(..) {
        t.join().unwrap();
    }
    let kv = kvstore::Client::connect(
        &cluster.server.url(),
        kvstore::ClientOptions::default().with_token(Some(TOKEN.to_owned())),
    )
    .unwrap();
    kv.create_table("orders", &kvstore::TableSpec::race(256))
        .unwrap();
    let s = kv.session().unwrap();
    let (users, orders) = (s.table("users").unwrap(), s.table("orders").unwrap());
    s.block_on(async {
        users.put(b"alice", b"v1").await.unwrap();
        users
            .put(b"alice", b"<script>alert(1)</script>\x00")
            .await
            .unwrap();
        orders.put(b"order-1", b"pending").await.unwrap();
    });
    s.quiesce();
    let c = cluster.client();
    let names: Vec<String> = c.memnodes().unwrap().into_iter().map(|m| m.name).collect();

    let (status, clover) = location(&c, "users", b"alice");
    assert_eq!(status, 200, "{clover}");
    assert_eq!(clover["found"], true);
    assert_eq!(clover["index"], "clover");
    assert!(
        clover["version"].as_u64().is_some_and(|v| v >= 2),
        "two writes: {clover}"
    );
    assert_eq!(clover["value_len"], 26);
    assert_eq!(clover["value_preview"], "<script>alert(1)</script>\\x00");
    assert!(clover["chain_id"].is_u64());
    let on = clover["memnodes"][0]["name"].as_str().unwrap();
    assert!(names.iter().any(|n| n == on), "{clover}");
    assert!(
        clover["place"].as_str().unwrap().starts_with("chain "),
        "{clover}"
    );

    let (status, race) = location(&c, "orders", b"order-1");
    assert_eq!(status, 200, "{race}");
    assert_eq!(
        (race["found"].as_bool(), race["index"].as_str()),
        (Some(true), Some("race"))
    );
    assert_eq!(race["value_preview"], "pending");
    assert!(
        race["buckets"].is_array() && race.get("version").is_none(),
        "{race}"
    );

    for (table, key) in [("users", &b"nobody"[..]), ("orders", b"order-404")] {
        let (status, absent) = location(&c, table, key);
        assert_eq!(status, 200, "{absent}");
        assert_eq!(absent["found"], false, "{absent}");
        assert!(absent["memnodes"].as_array().unwrap().is_empty());
        assert!(absent.get("value_len").is_none());
    }
    // The lookup of an absent Clover key created no chain.
    let r = c
        .request("GET", "/v1/tables/users/chains?key=bm9ib2R5", None)
        .unwrap();
    assert_eq!(r.status, 404, "{}", r.text());
    // Clear errors.
    assert_eq!(location(&c, "missing", b"k").0, 404);
    let r = c
        .request("GET", "/v1/tables/users/location?key=%%%", None)
        .unwrap();
    assert_eq!(r.status, 422, "{}", r.text());
    let r = c.request("GET", "/v1/tables/users/location", None).unwrap();
    assert_eq!(r.status, 422, "{}", r.text());

    // In the page: the form's answer, the value escaped, absence said clearly.
    let Some(chromium) = chromium() else {
        return;
    };
    let base = format!("{}/dashboard", cluster.server.url());
    let dom = dump_dom(
        &chromium,
        &format!("{base}?table=users&key=alice#credential={TOKEN}"),
        3000,
    );
    let at = dom.find("id=\"l-result\"").expect("a lookup result");
    let result = &dom[at..at + dom[at..].find("</section>").unwrap()];
    assert!(result.contains("data-found=\"true\""), "{result}");
    assert!(
        result.contains("&lt;script&gt;alert(1)&lt;/script&gt;\\x00"),
        "{result}"
    );
    assert!(!dom.contains("<script>alert"), "the value is escaped");
    assert!(result.contains(on), "{result}");
    let dom = dump_dom(
        &chromium,
        &format!("{base}?table=orders&key=order-404#credential={TOKEN}"),
        3000,
    );
    let at = dom.find("id=\"l-result\"").expect("a lookup result");
    let result = &dom[at..at + dom[at..].find("</section>").unwrap()];
    assert!(result.contains("data-found=\"false\""), "{result}");
    assert!(
        result.contains("key <b>order-404</b> is <b>absent</b> from table <b>orders</b>"),
        "{result}"
    );
}

#[test]
fn dashboard_in_headless_chromium_shows_rereplication_when_the_service_offers_it() {
    use metadata::catalog::{Catalog, CatalogConfig};
    use metadata::clock::{Clock, SystemClock};
    use metadata::http::Shared;

    let Some(chromium) = chromium() else {
        return;
    };
    // The service's own routes, with one replica set getting a new member.
    let clock: Arc<dyn Clock> = Arc::new(SystemClock);
    let catalog = Catalog::open(
        Box::new(MemStore::new()),
        CatalogConfig::default(),
        clock.now_ms(),
    )
    .unwrap();
    let listener = dmkv_service::Listener::bind("127.0.0.1:0".parse().unwrap()).unwrap();
    let url = format!("http://{}", listener.addr());
    let progress = metadata::rereplication::Progress::default();
    progress.put(metadata::api::RereplicationStatus {
        table: "orders".into(),
        home: 1,
        source: 1,
        target: 2,
        reason: "failover".into(),
        bytes_total: 4 << 20,
        bytes_copied: 1 << 20,
        state: metadata::api::RereplicationState::Copying,
        ..Default::default()
    });
    let shared = Arc::new(Shared {
        catalog: std::sync::Mutex::new(catalog),
        clock,
        token: None,
        metrics: Default::default(),
        started: Instant::now(),
        cluster: metadata::cluster::ClusterView::new(None),
        accelerator_data: None,
        history: metadata::history::StatsHistory::new(Default::default()),
        url: url.clone(),
        key_lookup: Default::default(),
        rereplication: Arc::new(progress),
        grants: None,
        copier_fails_over: Default::default(),
        copy_engine: Default::default(),
    });
    let app = metadata::http::router(shared);
    let server =
        dmkv_service::HttpServer::spawn("rereplication-test", listener, app, Duration::ZERO)
            .unwrap();
    let c = MetadataClient::new(&url).unwrap();
    for (name, port) in [("node-a", 4791), ("node-b", 4792)] {
        c.register_memnode(&common::memnode(name, port, 1, CAPACITY))
            .unwrap();
    }
    let dom = dump_dom(&chromium, &format!("{url}/dashboard"), 3000);
    server.stop();
    assert!(!dom.contains("refresh failed"), "{dom}");
    let panel = tag(&dom, "p-rereplication").unwrap();
    assert!(!panel.contains("hidden"), "{panel}");
    let at = dom.find("<tr class=\"copy\"").expect("a running copy");
    let row = &dom[at..at + dom[at..].find("</tr>").unwrap()];
    for text in [
        "data-table=\"orders\"",
        "data-state=\"copying\"",
        "home node-a (1)",
        ">node-b (2)<",
        "1.0 MiB / 4.0 MiB",
        "copying (failover)",
    ] {
        assert!(row.contains(text), "{text}: {row}");
    }
}
