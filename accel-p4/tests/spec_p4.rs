//! `p4/include/spec.p4` is generated from the spec module; fail on drift.

use std::path::Path;

#[test]
fn spec_p4_matches_the_spec_module() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("p4/include/spec.p4");
    let want = accel_p4::spec::p4_include();
    if std::env::var_os("ACCEL_P4_BLESS").is_some() {
        std::fs::write(&path, &want).expect("write spec.p4");
    }
    let got = std::fs::read_to_string(&path).expect("read p4/include/spec.p4");
    assert!(
        got == want,
        "p4/include/spec.p4 is stale: run `accel-p4 gen-spec > accel-p4/p4/include/spec.p4` \
         (or ACCEL_P4_BLESS=1 cargo test -p accel-p4 --test spec_p4)"
    );
}

#[test]
fn every_register_and_table_is_declared_in_spec_p4() {
    let text = accel_p4::spec::p4_include();
    for r in accel_p4::spec::REGISTERS {
        assert!(text.contains(&format!("DECLARE_REG_{}", r.name.to_uppercase())));
    }
    for t in accel_p4::spec::TABLES {
        assert!(text.contains(&format!("TABLE_{}_SIZE", t.name.to_uppercase())));
    }
}

#[test]
fn the_p4_sources_declare_every_register_and_table() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("p4");
    let mut text = String::new();
    for dir in ["common", "tna", "v1model"] {
        for entry in std::fs::read_dir(root.join(dir)).expect("p4 directory") {
            let path = entry.expect("entry").path();
            text.push_str(&std::fs::read_to_string(&path).expect("read p4"));
        }
    }
    for r in accel_p4::spec::REGISTERS {
        assert!(
            text.contains(&format!("DECLARE_REG_{}", r.name.to_uppercase())),
            "register {} is not declared by any control block",
            r.name
        );
    }
    for t in accel_p4::spec::TABLES {
        assert!(
            text.contains(&format!("table {} {{", t.name)),
            "table {} is not declared by any control block",
            t.name
        );
        assert!(text.contains(&format!("TABLE_{}_SIZE", t.name.to_uppercase())));
    }
    for control in [
        "control Route(",
        "control SwitchAtomics(",
        "control FaultInject(",
    ] {
        assert!(text.contains(control), "{control}");
    }
}
