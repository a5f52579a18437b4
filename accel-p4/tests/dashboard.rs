//! The cluster dashboard's accelerator panel, end to end: a metadata service configured
//! with the soft switch's admin URL (what `metadata --accelerator URL` sets), a memnode
//! registered with it, a kvstore client that learns the switch from the service and
//! puts and gets Clover keys through it, a few datagrams the switch has no route for,
//! and the page in headless Chromium: the
//! switch's connections, steering hits and misses, datagram rate and per-function
//! counters are shown and move between two loads of the page. A screenshot goes to
//! `target/dashboard-accelerator.png`.
//!
//! The test lives here because accel-p4 may depend on metadata (for tests) while the
//! metadata service knows the switch only by URL.

use std::net::{Ipv4Addr, SocketAddrV4, UdpSocket};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use accel_p4::switch::{SoftSwitch, SwitchConfig, SwitchHandle};
use kvstore::{Client, ClientOptions, TableSpec};
use memnode::registrar::{HttpRegistrar, Registrar};
use memnode::{Memnode, MemnodeConfig, MemnodeHandle};
use metadata::client::MetadataClient;
use metadata::cluster::ClusterStats;
use metadata::store::MemStore;
use metadata::{MetadataServer, ServerConfig, ServerHandle, StoreConfig};
use verbs::rc::RcConfig;
use verbs::wire::{BthRepr, IcrcPath, Opcode, PacketRepr, RethRepr};

const TOKEN: &str = "s3cret";
/// Memory of the memnode.
const CAPACITY: u64 = 16 << 20;
/// The load stops by itself after this long, whatever happens to the test.
const LOAD_LIMIT: Duration = Duration::from_secs(120);
/// The switch functions the test enables.
const ENABLED: [&str; 2] = ["switch_atomics", "opt_latch"];
/// Their mode bits.
const ENABLED_MODE: u32 = accel_p4::spec::mode::SWITCH_ATOMICS | accel_p4::spec::mode::OPT_LATCH;
/// Datagrams sent to the switch from an address it has no route for.
const STRAYS: u64 = 3;

fn wait_until(timeout: Duration, mut f: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + timeout;
    while Instant::now() < deadline {
        if f() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    f()
}

/// Switch, metadata service, memnode, and a kvstore client loading it through the switch.
struct Cluster {
    switch: Option<SwitchHandle>,
    server: ServerHandle,
    node: Option<MemnodeHandle>,
    registrar: HttpRegistrar,
    stop: Arc<AtomicBool>,
    ops: Arc<AtomicU64>,
    load: Option<JoinHandle<()>>,
}

impl Cluster {
    fn start() -> Cluster {
        let switch = SoftSwitch::start(SwitchConfig::local()).expect("switch starts");
        // Two functions that leave a Clover put and get alone (they act on configured
        // address ranges and tracked tuples only): the page lists these and no others.
        switch.control().set_mode(ENABLED_MODE).expect("mode set");
        let mut cfg = ServerConfig::local(StoreConfig::Memory(MemStore::new()));
        cfg.token = Some(TOKEN.to_owned());
        cfg.accelerator = Some(switch.admin_url());
        cfg.catalog.heartbeat_interval_ms = 200;
        cfg.catalog.heartbeat_timeout_ms = 5000;
        let server = MetadataServer::start(cfg).expect("metadata service starts");
        let node = Memnode::start(MemnodeConfig::local(CAPACITY)).expect("memnode starts");
        let registrar = HttpRegistrar::new(&server.url(), Some(TOKEN.into()), Some("mem-0".into()))
            .unwrap()
            .with_interval(Duration::from_millis(200));
        registrar
            .register(&node.node_info(), &node.admin_url())
            .unwrap();
        let c = client(&server);
        assert!(
            wait_until(Duration::from_secs(20), || c
                .memnodes()
                .is_ok_and(|m| m.len() == 1 && m[0].healthy)),
            "the memnode never appeared healthy"
        );
        let stop = Arc::new(AtomicBool::new(false));
        let ops = Arc::new(AtomicU64::new(0));
        let load = load(server.url(), stop.clone(), ops.clone());
        Cluster {
            switch: Some(switch),
            server,
            node: Some(node),
            registrar,
            stop,
            ops,
            load: Some(load),
        }
    }

    fn stats(&self) -> ClusterStats {
        let r = client(&self.server)
            .request("GET", "/v1/cluster/stats", None)
            .unwrap();
        assert_eq!(r.status, 200, "{}", r.text());
        serde_json::from_slice(&r.body).expect("cluster stats are JSON")
    }

    /// Waits until the load has done `n` more operations.
    fn wait_ops(&self, n: u64) {
        let target = self.ops.load(Ordering::Relaxed) + n;
        assert!(
            wait_until(Duration::from_secs(30), || self.ops.load(Ordering::Relaxed)
                >= target),
            "the load made no progress"
        );
    }

    /// Sends [`STRAYS`] well-formed READ requests to the switch from a socket it has no
    /// route for: each is a steering miss.
    fn send_strays(&self) {
        let front = self.switch.as_ref().unwrap().client_side();
        let sock = UdpSocket::bind((Ipv4Addr::LOCALHOST, 0)).unwrap();
        let std::net::SocketAddr::V4(me) = sock.local_addr().unwrap() else {
            unreachable!()
        };
        for psn in 0..STRAYS as u32 {
            sock.send_to(&stray_read(me, front, psn), front).unwrap();
        }
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.load.take() {
            let _ = t.join();
        }
        self.registrar.stop();
        if let Some(n) = self.node.take() {
            n.shutdown();
        }
        if let Some(s) = self.switch.take() {
            s.shutdown();
        }
    }
}

fn client(server: &ServerHandle) -> MetadataClient {
    MetadataClient::new(&server.url())
        .unwrap()
        .with_token(Some(TOKEN.to_owned()))
}

/// The RoCE payload of a READ request from `from` to `to` (ICRC over that path).
fn stray_read(from: SocketAddrV4, to: SocketAddrV4, psn: u32) -> Vec<u8> {
    let mut r = PacketRepr::new(BthRepr::new(Opcode::ReadRequest, 0x77, psn, true));
    r.reth = Some(RethRepr {
        va: 0x1000,
        rkey: 0x1234,
        dma_len: 8,
    });
    let mut roce = vec![0u8; r.buffer_len()];
    r.emit(&mut roce, &IcrcPath::new(from, to)).unwrap();
    roce
}

/// A kvstore client of the metadata service at `metadata_url` with default accelerator
/// use (it learns the switch from the service, so its queue pairs go through it),
/// putting and getting keys of a Clover table in a loop, gently (a short pause every 16
/// pairs), until `stop` or [`LOAD_LIMIT`].
fn load(metadata_url: String, stop: Arc<AtomicBool>, ops: Arc<AtomicU64>) -> JoinHandle<()> {
    std::thread::spawn(move || {
        let options = ClientOptions::default()
            .with_token(Some(TOKEN.to_owned()))
            // Patient retransmission: the machine may be busy, and the switch is one
            // more hop.
            .with_rc(RcConfig {
                retransmit_timeout: Duration::from_millis(20),
                max_retries: 200,
                ..RcConfig::default()
            });
        let client = Client::connect(&metadata_url, options).expect("kvstore client");
        client
            .create_table("users", &TableSpec::clover(256))
            .expect("table");
        let s = client.session().expect("session");
        let t = s.table("users").expect("table");
        let started = Instant::now();
        s.block_on(async {
            let mut n: u64 = 0;
            while !stop.load(Ordering::Relaxed) && started.elapsed() < LOAD_LIMIT {
                let key = format!("user{}", n % 64);
                let value = n.to_le_bytes();
                t.put(key.as_bytes(), &value).await.expect("put");
                assert_eq!(
                    t.get(key.as_bytes()).await.expect("get").expect("a value"),
                    value
                );
                n += 1;
                ops.fetch_add(2, Ordering::Relaxed);
                if n.is_multiple_of(16) {
                    s.sleep(Duration::from_millis(1)).await;
                }
            }
        });
        s.quiesce();
    })
}

// ---- headless Chromium ----

/// Chromium, or `None` after a loud skip (a failure under `DMKV_REQUIRE_INTEROP=1`).
fn chromium() -> Option<PathBuf> {
    let found = ["/usr/bin/chromium", "/usr/bin/chromium-browser"]
        .into_iter()
        .map(PathBuf::from)
        .find(|p| p.exists());
    if found.is_none() {
        assert!(
            !std::env::var("DMKV_REQUIRE_INTEROP").is_ok_and(|v| v == "1"),
            "chromium is not available but DMKV_REQUIRE_INTEROP=1 requires it (apt-get install chromium)"
        );
        use std::io::Write;
        let _ = writeln!(
            std::io::stderr(),
            "SKIPPED: chromium is not available; the accelerator dashboard test did not run \
             (set DMKV_REQUIRE_INTEROP=1 to make that a failure)"
        );
    }
    found
}

/// Runs headless Chromium on `url` in a window of `width` × `height` pixels with `extra` arguments
/// after `budget_ms` of virtual time; returns its standard output.
fn chromium_run(
    chromium: &Path,
    url: &str,
    width: u32,
    height: u32,
    budget_ms: u32,
    extra: &str,
) -> String {
    let profile = tempfile::tempdir().unwrap();
    let out = Command::new(chromium)
        .args([
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
        .arg(format!("--user-data-dir={}", profile.path().display()))
        .arg(format!("--virtual-time-budget={budget_ms}"))
        .arg(extra)
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

/// The start tag of the element with `id`.
fn tag<'a>(dom: &'a str, id: &str) -> Option<&'a str> {
    let at = dom.find(&format!("id=\"{id}\""))?;
    let start = dom[..at].rfind('<')?;
    let end = at + dom[at..].find('>')?;
    Some(&dom[start..=end])
}

/// `data-v` of the element with `id`.
fn value(dom: &str, id: &str) -> f64 {
    let t = tag(dom, id).unwrap_or_else(|| panic!("no element {id}:\n{dom}"));
    let at = t.find("data-v=\"").expect("data-v") + "data-v=\"".len();
    let end = t[at..].find('"').unwrap() + at;
    t[at..end].parse().expect("a number")
}

/// `data-v` of the `class` cell in the counter row `ac-{counter}`.
fn counter(dom: &str, name: &str, class: &str) -> f64 {
    let at = dom
        .find(&format!("<tr id=\"ac-{name}\""))
        .unwrap_or_else(|| panic!("no row for counter {name}:\n{dom}"));
    let row = &dom[at..at + dom[at..].find("</tr>").unwrap()];
    let key = format!("class=\"{class}\" data-v=\"");
    let v = row.find(&key).expect("cell") + key.len();
    row[v..v + row[v..].find('"').unwrap()]
        .parse()
        .expect("a number")
}

#[test]
fn dashboard_shows_the_accelerator_live() {
    let Some(chromium) = chromium() else {
        return;
    };
    let cluster = Cluster::start();
    cluster.wait_ops(200);
    cluster.send_strays();
    // The switch counted the strays before the page looks.
    let stats_have = |f: &dyn Fn(&ClusterStats) -> bool| {
        wait_until(Duration::from_secs(20), || f(&cluster.stats()))
    };
    assert!(
        stats_have(&|s| s.accelerator.as_ref().is_some_and(|a| a.up
            && a.steering_misses_total == STRAYS
            && a.enabled_functions == ENABLED)),
        "{:?}",
        cluster.stats().accelerator
    );
    std::thread::sleep(Duration::from_secs(1));
    let page = format!("{}/dashboard", cluster.server.url());
    let url = format!("{page}#credential={TOKEN}");
    let first = chromium_run(&chromium, &url, 1500, 1000, 3000, "--dump-dom");
    cluster.wait_ops(200);
    std::thread::sleep(Duration::from_secs(1));
    let second = chromium_run(&chromium, &url, 1500, 1000, 3000, "--dump-dom");
    let admin = cluster.switch.as_ref().unwrap().admin_url();
    for dom in [&first, &second] {
        assert!(!dom.contains("refresh failed"), "the page failed:\n{dom}");
        assert!(
            !dom.contains(&format!("accelerator {admin} unreachable")),
            "the switch was not scraped:\n{dom}"
        );
        assert!(tag(dom, "a-url").is_some() && dom.contains(&admin), "{dom}");
        assert_eq!(value(dom, "a-routes"), 1.0, "one connection");
        assert_eq!(value(dom, "a-misses"), STRAYS as f64);
        assert_eq!(counter(dom, "forward.missed", "tot"), STRAYS as f64);
        assert!(value(dom, "a-rx") > 0.0, "datagram rate");
        assert!(value(dom, "a-tx") > 0.0, "datagram rate");
        assert!(counter(dom, "forward.forwarded", "rate") > 0.0);
        // The counters of forwarding and of the enabled functions are listed, those of
        // the disabled ones are not.
        for (function, names) in accel_p4::spec::COUNTERS {
            let shown = *function == "forward" || ENABLED.contains(function);
            for name in *names {
                let row = format!("<tr id=\"ac-{function}.{name}\"");
                assert_eq!(dom.contains(&row), shown, "{function}.{name}:\n{dom}");
            }
            if shown {
                counter(
                    dom,
                    &format!("{function}.{names0}", names0 = names[0]),
                    "tot",
                );
            }
        }
        let functions = tag(dom, "a-functions").expect("the enabled functions");
        let at = dom.find(functions).unwrap() + functions.len();
        assert!(
            dom[at..].starts_with("enabled functions: switch_atomics, opt_latch<"),
            "{}",
            &dom[at..at + 80]
        );
        // The memnode behind the switch is there too.
        assert!(dom.contains(">mem-0<"), "{dom}");
        assert!(dom.contains(">users<"), "the client's table is listed");
    }
    // Live: the hits and forwarded counts grew between the two loads of the page.
    let hits = |dom: &str| value(dom, "a-hits");
    assert!(hits(&first) > 0.0);
    assert!(
        hits(&second) > hits(&first),
        "{} {}",
        hits(&first),
        hits(&second)
    );
    assert!(
        counter(&second, "forward.forwarded", "tot") > counter(&first, "forward.forwarded", "tot")
    );
    assert_eq!(
        counter(&second, "forward.forwarded", "tot"),
        hits(&second),
        "hits are forwarded packets"
    );

    // At 1280 px the page, accelerator panel included, needs no horizontal scrolling (it
    // reports its own layout with ?layout=check).
    let narrow = chromium_run(
        &chromium,
        &format!("{page}?layout=check#credential={TOKEN}"),
        1280,
        1000,
        3000,
        "--dump-dom",
    );
    let at = narrow.find("data-layout=\"").expect("a layout report") + "data-layout=\"".len();
    let report = narrow[at..at + narrow[at..].find('"').unwrap()].replace("&quot;", "\"");
    let report: serde_json::Value = serde_json::from_str(&report).unwrap();
    assert_eq!(report["innerWidth"], 1280, "{report}");
    assert!(
        report["scrollWidth"].as_f64().unwrap() <= 1280.0,
        "horizontal scroll at 1280 px: {report}"
    );
    assert!(
        report["panels"]
            .as_array()
            .unwrap()
            .iter()
            .any(|p| p["id"] == "p-accel")
    );

    // A screenshot for reviewers.
    let target = PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
        .parent()
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("target"));
    let png = target.join("dashboard-accelerator.png");
    let _ = std::fs::remove_file(&png);
    // Tall enough for every counter of the accelerator panel.
    chromium_run(
        &chromium,
        &url,
        1500,
        1800,
        3000,
        &format!("--screenshot={}", png.display()),
    );
    let bytes = std::fs::read(&png).expect("a screenshot was written");
    assert!(bytes.starts_with(b"\x89PNG\r\n\x1a\n"), "not a PNG");
    assert!(bytes.len() > 10_000, "suspiciously small screenshot");
    use std::io::Write;
    let _ = writeln!(
        std::io::stderr(),
        "accelerator dashboard screenshot: {}",
        png.display()
    );
}
