//! Every frame of the stored vectors — inputs and the switch's rewritten outputs —
//! decodes in tshark as RoCE (InfiniBand over UDP) without malformed packets or
//! error-level expert info, and carries an ICRC valid for its own IPv4/UDP headers.
//!
//! Needs tshark (`DMKV_TSHARK` picks the program); skipped with a message when absent,
//! failed instead under `DMKV_REQUIRE_INTEROP=1`.

use std::path::Path;
use std::process::Command;

use verbs::wire::{EthernetFrame, pcap};

/// tshark's expert severity for errors.
const SEVERITY_ERROR: &str = "8388608";

fn tshark() -> Option<String> {
    let program = std::env::var("DMKV_TSHARK").unwrap_or_else(|_| "tshark".into());
    let found = Command::new(&program)
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    if found {
        return Some(program);
    }
    if std::env::var_os("DMKV_REQUIRE_INTEROP").is_some() {
        panic!("{program} is required (DMKV_REQUIRE_INTEROP is set) but cannot be run");
    }
    eprintln!("SKIPPED: {program} not found; install tshark to run this test");
    None
}

#[test]
fn rewritten_vectors_decode_as_roce_in_tshark() {
    let Some(tshark) = tshark() else { return };
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/vectors");
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .expect("vectors")
        .filter_map(|e| Some(e.ok()?.path()))
        .filter(|p| p.to_string_lossy().ends_with(".pcap"))
        .collect();
    files.sort();
    assert!(files.len() >= 20, "{files:?}");
    let mut frames = 0;
    for file in files {
        let records = pcap::read_file(&file).expect("read pcap");
        let out = Command::new(&tshark)
            .args(["-n", "-r"])
            .arg(&file)
            .args(["-T", "fields", "-E", "separator=/t"])
            .args(["-e", "frame.protocols", "-e", "infiniband.bth.opcode"])
            .args(["-e", "_ws.malformed", "-e", "_ws.expert.severity"])
            .output()
            .expect("run tshark");
        assert!(
            out.status.success(),
            "{}: {}",
            file.display(),
            String::from_utf8_lossy(&out.stderr)
        );
        let text = String::from_utf8(out.stdout).expect("UTF-8");
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), records.len(), "{}", file.display());
        for (line, rec) in lines.iter().zip(&records) {
            // Runt frames (the malformed-input vector) are not RoCE; everything else is.
            let Ok(frame) = EthernetFrame::parse(&rec.data) else {
                continue;
            };
            let f: Vec<&str> = line.split('\t').collect();
            assert!(
                f[0].contains(":udp:infiniband"),
                "{}: not decoded as RoCE: {line}",
                file.display()
            );
            assert!(
                !f[1].is_empty(),
                "{}: no BTH opcode: {line}",
                file.display()
            );
            assert!(f[2].is_empty(), "{}: malformed: {line}", file.display());
            assert!(
                !f[3].split(',').any(|s| s == SEVERITY_ERROR),
                "{}: expert error: {line}",
                file.display()
            );
            // The drop vector deliberately carries one frame with a broken ICRC.
            if !file.to_string_lossy().contains("bad_icrc") {
                frame
                    .verify_icrc()
                    .expect("ICRC valid for the frame's headers");
            }
            frames += 1;
        }
    }
    assert!(frames > 50, "{frames}");
}
