//! Load-balanced READs on the control plane: `POST /v1/mirrors` with `balance_reads`
//! against an embedded cluster of three memory nodes and the soft switch. The switch
//! creates a read lane on each backup, answers the set's read alias key and installs
//! the `balance_*` entries; a backup marked non-serving has its bit clear; turning
//! balancing off removes the entries; a restarted switch installs the set again on
//! fresh read lanes with the same read alias key.

use accel_p4::switch::{SoftSwitch, SwitchConfig, SwitchHandle};
use dmkv_api::switch::{MirrorRequest, MirrorSet, add_mirror_as, mirrors_as};
use kvstore::TransportKind;
use testbed::{Embedded, EmbeddedOptions};

fn cluster() -> Embedded {
    Embedded::start(&EmbeddedOptions {
        memnodes: 3,
        capacity: 4 << 20,
        transport: TransportKind::Udp,
        ..EmbeddedOptions::default()
    })
    .expect("cluster")
}

fn request(embedded: &Embedded, balance_reads: bool, non_serving: &[usize]) -> MirrorRequest {
    let urls: Vec<String> = embedded
        .memnode_ids()
        .iter()
        .map(|id| embedded.admin_url(*id).expect("admin url"))
        .collect();
    MirrorRequest {
        primary: urls[0].clone(),
        backups: urls[1..].to_vec(),
        balance_reads,
        non_serving: non_serving.iter().map(|i| urls[*i].clone()).collect(),
    }
}

/// The switch's `balance_rkey` entry of `set` (serving mask) and how many lanes and
/// lane answers it holds for the set.
fn installed(sw: &SwitchHandle, set: &MirrorSet) -> (Option<u8>, usize, usize) {
    let p = sw.control().pipeline();
    let lb = p.read_balance();
    let serving = set
        .read_alias_rkey
        .and_then(|k| lb.balance_rkey.get(&k))
        .map(|a| {
            assert_eq!(a.set, set.set);
            assert_eq!(a.rkey, set.primary.rkey, "the primary's real key");
            assert_eq!(usize::from(a.backups), set.backups.len());
            a.serving
        });
    let lanes = lb
        .balance_lane
        .keys()
        .filter(|(s, _)| *s == set.set)
        .count();
    let answers = lb
        .balance_answer
        .values()
        .filter(|a| a.set == set.set)
        .count();
    (serving, lanes, answers)
}

#[test]
fn a_balanced_set_gets_read_lanes_an_alias_and_its_serving_members() {
    let embedded = cluster();
    let sw = SoftSwitch::start(SwitchConfig::local()).expect("switch");
    let url = sw.admin_url();

    let set = add_mirror_as(&url, None, &request(&embedded, true, &[])).expect("install");
    let alias = set.read_alias_rkey.expect("a read alias key");
    assert_ne!(
        alias, set.alias_rkey,
        "READs and WRITEs have their own alias"
    );
    assert_eq!(installed(&sw, &set), (Some(0b11), 2, 2));
    assert_eq!(mirrors_as(&url, None).expect("sets"), vec![set.clone()]);

    // Backup 2 (the set's second backup) serves no READ; the set and its key stay.
    let marked = add_mirror_as(&url, None, &request(&embedded, true, &[2])).expect("mark");
    assert_eq!(marked.set, set.set);
    assert_eq!(marked.alias_rkey, set.alias_rkey);
    assert_eq!(marked.read_alias_rkey, Some(alias));
    assert_eq!(
        marked.non_serving,
        vec![request(&embedded, true, &[2]).backups[1].clone()]
    );
    assert_eq!(installed(&sw, &marked), (Some(0b01), 2, 2));

    // Off: no READ is balanced, nothing of the set is left in the tables.
    let off = add_mirror_as(&url, None, &request(&embedded, false, &[])).expect("off");
    assert_eq!(off.read_alias_rkey, None);
    assert_eq!(installed(&sw, &off), (None, 0, 0));
    assert!(
        sw.control()
            .pipeline()
            .read_balance()
            .balance_rkey
            .is_empty()
    );
    assert_eq!(
        off.alias_rkey, set.alias_rkey,
        "WRITEs are replicated as before"
    );
}

#[test]
fn a_non_serving_member_must_be_a_backup() {
    let embedded = cluster();
    let sw = SoftSwitch::start(SwitchConfig::local()).expect("switch");
    let err = add_mirror_as(&sw.admin_url(), None, &request(&embedded, true, &[0]))
        .expect_err("the primary always serves");
    assert!(err.to_string().contains("not a backup"), "{err}");
    assert!(mirrors_as(&sw.admin_url(), None).expect("sets").is_empty());
}

#[test]
fn a_restarted_switch_balances_the_set_again_on_fresh_read_lanes() {
    let embedded = cluster();
    let dir = tempfile::tempdir().expect("tempdir");
    let mut config = SwitchConfig::local();
    config.state_file = Some(dir.path().join("switch.json"));
    let sw = SoftSwitch::start(config.clone()).expect("switch");
    config.admin = sw.admin_addr();
    config.client_side = sw.control().client_side();
    config.memnode_side = sw.control().memnode_side();
    let set =
        add_mirror_as(&sw.admin_url(), None, &request(&embedded, true, &[1])).expect("install");
    let lanes_before = sw.control().state().mirrors[0].read_lanes.clone();
    assert_eq!(lanes_before.len(), 2);
    sw.shutdown();
    std::thread::sleep(std::time::Duration::from_millis(200));

    let restarted = SoftSwitch::start(config).expect("switch restarts");
    let sets = mirrors_as(&restarted.admin_url(), None).expect("sets");
    assert_eq!(
        sets,
        vec![set.clone()],
        "the same set, alias keys and marks"
    );
    assert_eq!(installed(&restarted, &set), (Some(0b10), 2, 2));
    let lanes_after = restarted.control().state().mirrors[0].read_lanes.clone();
    assert_eq!(lanes_after.len(), 2);
    for (a, b) in lanes_before.iter().zip(&lanes_after) {
        assert_ne!(
            a.memnode_qpn, b.memnode_qpn,
            "a fresh queue pair on the backup"
        );
    }
}
