//! Switch-initiated copies end to end (zero-sided RDMA): two real memory nodes of an
//! embedded cluster over soft RoCE, a soft switch with their admin token; the switch
//! READs the source and turns every READ response into a WRITE to the target. The
//! target's bytes are compared with the source's byte for byte — clean, under 5 %
//! loss, duplication and reordering, and across a switch restart.

#[path = "support/secured_pair.rs"]
mod secured_pair;

use std::time::{Duration, Instant};

use accel_p4::admin::CopiesResponse;
use accel_p4::control::{ControlState, FaultSettings};
use accel_p4::copy::{CopyEnd, CopyRequest, CopyState, CopyStatus};
use accel_p4::model::FaultPolicy;
use accel_p4::spec;
use accel_p4::switch::{SoftSwitch, SwitchConfig, SwitchHandle};
use dmkv_api::http::HttpClient;
use memnode::MemnodeHandle;
use rand::{RngCore, SeedableRng};
use testbed::Embedded;

/// Where the source bytes are, and where they go, in the nodes' first regions.
const SRC_OFFSET: u64 = 4096;
const DST_OFFSET: u64 = 1 << 20;

struct Rig {
    cluster: Embedded,
    token: Option<String>,
}

impl Rig {
    fn start() -> Rig {
        let (cluster, token) = secured_pair::start(32 << 20);
        Rig { cluster, token }
    }

    fn node(&self, i: usize) -> (&MemnodeHandle, String) {
        secured_pair::node(&self.cluster, i)
    }

    fn config(&self) -> SwitchConfig {
        secured_pair::switch_config(&self.token)
    }

    fn end(&self, i: usize, offset: u64) -> CopyEnd {
        let (_, url) = self.node(i);
        let info =
            dmkv_api::memnode_admin::node_info_as(&url, self.token.as_deref()).expect("node info");
        let region = &info.regions[0];
        CopyEnd {
            memnode: url,
            va: region.base_va + offset,
            rkey: region.rkey,
        }
    }

    /// Seeded bytes at the source, zeros at the target.
    fn fill(&self, len: usize, seed: u64) -> Vec<u8> {
        let mut data = vec![0u8; len];
        rand::rngs::StdRng::seed_from_u64(seed).fill_bytes(&mut data);
        self.node(0)
            .0
            .memory()
            .region
            .write(SRC_OFFSET, &data)
            .expect("write the source");
        self.node(1)
            .0
            .memory()
            .region
            .write(DST_OFFSET, &vec![0u8; len])
            .expect("zero the target");
        data
    }

    fn target(&self, len: usize) -> Vec<u8> {
        let mut got = vec![0u8; len];
        self.node(1)
            .0
            .memory()
            .region
            .read(DST_OFFSET, &mut got)
            .expect("read the target");
        got
    }

    fn request(&self, len: u64) -> CopyRequest {
        CopyRequest {
            source: self.end(0, SRC_OFFSET),
            target: self.end(1, DST_OFFSET),
            len,
            chunk: None,
            window: None,
            rto_ms: None,
        }
    }
}

fn admin(sw: &SwitchHandle, token: Option<String>) -> HttpClient {
    HttpClient::new(&sw.admin_url())
        .expect("admin client")
        .with_token(token)
}

fn wait_done(sw: &SwitchHandle, id: u64, within: Duration) -> CopyStatus {
    let started = Instant::now();
    loop {
        let s = sw.control().copy_status(id).expect("the copy is known");
        match &s.state {
            CopyState::Running if started.elapsed() < within => {
                std::thread::sleep(Duration::from_millis(5))
            }
            _ => return s,
        }
    }
}

fn assert_same(got: &[u8], want: &[u8]) {
    if let Some(i) = got.iter().zip(want).position(|(a, b)| a != b) {
        panic!("the target differs from the source first at byte {i}");
    }
    assert_eq!(got.len(), want.len());
}

#[test]
fn a_copy_started_on_the_admin_api_moves_the_bytes_memnode_to_memnode() {
    let rig = Rig::start();
    let sw = SoftSwitch::start(rig.config()).expect("switch");
    let len = (1 << 20) + 777;
    let want = rig.fill(len, 1);
    let body = serde_json::to_vec(&rig.request(len as u64)).expect("json");

    // The copy routes are the administrator's: no credential, no copy.
    let anonymous = admin(&sw, None)
        .request("POST", "/v1/copies", Some(&body))
        .expect("request");
    assert_eq!(anonymous.status, 401, "{}", anonymous.text());

    let api = admin(&sw, rig.token.clone());
    let started: CopyStatus = api
        .call("POST", "/v1/copies", Some(&body), &[201])
        .expect("start the copy");
    let done = wait_done(&sw, started.id, Duration::from_secs(20));
    assert_eq!(done.state, CopyState::Done, "{done:?}");
    assert_eq!(done.bytes_done, len as u64);
    assert_same(&rig.target(len), &want);

    let seen: CopyStatus = api
        .call("GET", &format!("/v1/copies/{}", started.id), None, &[200])
        .expect("status");
    assert_eq!(seen.state, CopyState::Done);
    let all: CopiesResponse = api.call("GET", "/v1/copies", None, &[200]).expect("list");
    assert_eq!(all.copies.len(), 1);
    let missing = api.request("GET", "/v1/copies/99", None).expect("request");
    assert_eq!(missing.status, 404);

    // The bytes went through the switch as READ responses turned into WRITEs, with no
    // client QP involved, and the copy's queue pairs are gone from its tables.
    let c = sw.control().pipeline().counters();
    assert!(
        c.zero_copy.converted >= (len as u64).div_ceil(1024),
        "{c:?}"
    );
    assert_eq!(c.forward.forwarded, c.zero_copy.converted, "{c:?}");
    assert_eq!(c.forward.missed, 0, "{c:?}");
    let p = sw.control().pipeline();
    assert!(p.tables.copy_src.is_empty() && p.tables.copy_dst.is_empty());
}

#[test]
fn a_copy_is_exact_under_loss_duplication_and_reordering() {
    let rig = Rig::start();
    let mut config = rig.config();
    config.initial = ControlState {
        mode: spec::mode::FAULTS,
        ..ControlState::default()
    };
    let sw = SoftSwitch::start(config).expect("switch");
    let policy = FaultPolicy::from_probabilities(0.05, 0.05, 0.05, 0.0);
    sw.control()
        .set_faults(FaultSettings {
            seed: 7,
            up: policy,
            down: policy,
        })
        .expect("faults");
    let len = 512 * 1024 + 3;
    let want = rig.fill(len, 2);
    let mut req = rig.request(len as u64);
    req.chunk = Some(4096);
    req.rto_ms = Some(5);
    let started = sw.control().start_copy(&req).expect("start");
    let done = wait_done(&sw, started.id, Duration::from_secs(30));
    assert_eq!(done.state, CopyState::Done, "{done:?}");
    assert_same(&rig.target(len), &want);
    let c = sw.control().pipeline().counters();
    eprintln!("{done:?}\n{:?}\n{:?}", c.zero_copy, c.faults);
    assert!(
        c.faults.dropped > 0 && c.faults.duplicated > 0 && c.faults.reordered > 0,
        "{c:?}"
    );
    assert!(
        done.rereads > 0,
        "losses were repaired by re-reading: {done:?}"
    );
}

#[test]
fn a_copy_resumes_from_its_checkpoint_after_a_switch_restart() {
    let rig = Rig::start();
    let dir = tempfile::tempdir().expect("tempdir");
    let mut config = rig.config();
    config.state_file = Some(dir.path().join("switch.json"));
    let len = 16 << 20;
    let want = rig.fill(len, 3);
    let mut req = rig.request(len as u64);
    // One 4 KiB READ at a time: slow enough to stop the switch in the middle.
    req.chunk = Some(4096);
    req.window = Some(1);
    let sw = SoftSwitch::start(config.clone()).expect("switch");
    let id = sw.control().start_copy(&req).expect("start").id;
    let started = Instant::now();
    while sw.control().copy_status(id).expect("status").bytes_done < (1 << 20) {
        assert!(started.elapsed() < Duration::from_secs(20), "no progress");
        std::thread::sleep(Duration::from_millis(2));
    }
    // Let a checkpoint be written, then stop the switch mid-copy.
    std::thread::sleep(Duration::from_millis(150));
    sw.shutdown();
    let text = std::fs::read_to_string(dir.path().join("switch.json")).expect("state file");
    let saved: ControlState = serde_json::from_str(&text).expect("state");
    let record = saved.copies.iter().find(|c| c.id == id).expect("the copy");
    eprintln!("stopped at checkpoint {} of {len}", record.checkpoint);
    assert_eq!(record.state, CopyState::Running, "stopped mid-copy");
    assert!(
        record.checkpoint > 0 && record.checkpoint < len as u64,
        "{record:?}"
    );

    let sw = SoftSwitch::start(config).expect("switch restarts");
    let done = wait_done(&sw, id, Duration::from_secs(60));
    assert_eq!(done.state, CopyState::Done, "{done:?}");
    assert_eq!(done.resumed, 1);
    assert_eq!(done.resumed_from, record.checkpoint);
    assert_same(&rig.target(len), &want);
    sw.shutdown();
}

#[test]
fn chunks_smaller_than_the_path_mtu_copy_one_read_response_per_write() {
    let rig = Rig::start();
    let sw = SoftSwitch::start(rig.config()).expect("switch");
    for (chunk, len, seed) in [
        (64u32, 64 * 97 + 5, 11u64),
        (256, 256 * 33, 12),
        (512, 700, 13),
    ] {
        let want = rig.fill(len, seed);
        let mut req = rig.request(len as u64);
        req.chunk = Some(chunk);
        let before = sw.control().pipeline().counters().zero_copy.converted;
        let started = sw.control().start_copy(&req).expect("start");
        let done = wait_done(&sw, started.id, Duration::from_secs(20));
        assert_eq!(done.state, CopyState::Done, "chunk {chunk}: {done:?}");
        assert_eq!(done.bytes_done, len as u64);
        assert_same(&rig.target(len), &want);
        let converted = sw.control().pipeline().counters().zero_copy.converted - before;
        assert_eq!(
            converted,
            (len as u64).div_ceil(u64::from(chunk)),
            "chunk {chunk}: one WRITE per READ"
        );
    }
    let mut req = rig.request(1000);
    req.chunk = Some(96);
    assert!(
        sw.control().start_copy(&req).is_err(),
        "96 is not a power of two"
    );
}
