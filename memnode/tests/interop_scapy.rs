//! Interop with scapy's independent RoCEv2 implementation against a live memory node:
//! `scapy/requests.py` builds WRITE, READ, CAS and FAA requests with scapy (which computes
//! their ICRC), sends them from a plain UDP socket to a responder queue pair created for
//! it, and reports the answers as scapy decodes them, including whether scapy's ICRC of
//! each answer matches. Requests with a wrong rkey or a broken ICRC get a NAK or silence.
//!
//! Needs python3 with scapy (Debian `python3-scapy`; `DMKV_PYTHON` picks the
//! interpreter). Without it the test is skipped loudly, or fails under
//! `DMKV_REQUIRE_INTEROP=1`.

#[path = "common/interop.rs"]
mod interop;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{Ipv4Addr, SocketAddrV4};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use memnode::api::CreateQpRequest;
use memnode::metrics::DropKind;
use memnode::{Memnode, MemnodeConfig, client};
use serde_json::Value;
use verbs::wire::{IcrcPath, NakCode, Opcode, PacketRepr, Syndrome};

const SCRIPT: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/scapy/requests.py");
const PSN_MASK: u32 = 0x00FF_FFFF;
/// The scapy client's first PSN: the run crosses the 24-bit wrap.
const FIRST_PSN: u32 = 0x00FF_FFFD;
/// The scapy client's QPN.
const CLIENT_QPN: u32 = 0x00AB_CDEF;
/// How long the script may run.
const SCRIPT_TIMEOUT: Duration = Duration::from_secs(30);

/// The script's process (killed if the test ends early), its stdout lines and its stderr.
struct Script {
    child: Child,
    lines: mpsc::Receiver<String>,
    stderr: Option<JoinHandle<String>>,
    deadline: Instant,
}

impl Script {
    fn start(python: &str) -> (Script, ChildStdin) {
        let mut child = Command::new(python)
            .arg(SCRIPT)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("run the scapy script");
        let stdin = child.stdin.take().expect("stdin is piped");
        let stdout = child.stdout.take().expect("stdout is piped");
        let mut stderr = child.stderr.take().expect("stderr is piped");
        let stderr = std::thread::spawn(move || {
            let mut s = String::new();
            let _ = stderr.read_to_string(&mut s);
            s
        });
        let (tx, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        let script = Script {
            child,
            lines,
            stderr: Some(stderr),
            deadline: Instant::now() + SCRIPT_TIMEOUT,
        };
        (script, stdin)
    }

    /// Kills the script and returns what it wrote to stderr.
    fn kill(&mut self) -> String {
        let _ = self.child.kill();
        let _ = self.child.wait();
        self.stderr
            .take()
            .map(|h| h.join().unwrap_or_default())
            .unwrap_or_default()
    }

    /// The next line of output, as JSON.
    fn json_line(&mut self, what: &str) -> Value {
        let left = self.deadline.saturating_duration_since(Instant::now());
        match self.lines.recv_timeout(left) {
            Ok(line) => serde_json::from_str(&line)
                .unwrap_or_else(|e| panic!("{what}: not JSON ({e}): {line}")),
            Err(_) => {
                let stderr = self.kill();
                panic!("the scapy script gave no {what}; its stderr:\n{stderr}");
            }
        }
    }

    /// Waits for a clean exit.
    fn finish(&mut self) {
        let status = self.child.wait().expect("wait for the script");
        let stderr = self.kill();
        assert!(status.success(), "the scapy script failed:\n{stderr}");
    }
}

impl Drop for Script {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn hex(s: &str) -> Vec<u8> {
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).expect("hex"))
        .collect()
}

fn u(v: &Value, key: &str) -> u64 {
    v.get(key)
        .and_then(Value::as_u64)
        .unwrap_or_else(|| panic!("{key} missing or not a number in {v}"))
}

/// What a step's answer must be.
struct Want {
    opcode: Opcode,
    scapy_name: &'static str,
    syndrome: Syndrome,
    msn: u32,
    original: Option<u64>,
    payload: Vec<u8>,
}

#[test]
fn scapy_requests_get_correct_answers_from_a_live_memnode() {
    let Some(python) = interop::require_python_with_scapy() else {
        return;
    };
    let started = Instant::now();
    let node = Memnode::start(MemnodeConfig::local(1 << 20)).expect("memnode starts");
    let data = node.data_addr();
    let admin = node.admin_url();
    let region = node.regions()[0].clone();
    let va = region.base_va + 4096;

    let (mut script, mut stdin) = Script::start(&python);

    // 1. The script's address; 2. a responder queue pair for it.
    let hello = script.json_line("port");
    let port = u16::try_from(u(&hello, "port")).expect("a port");
    let client = SocketAddrV4::new(Ipv4Addr::LOCALHOST, port);
    let qp = client::create_qp(
        &admin,
        &CreateQpRequest {
            qpn: CLIENT_QPN,
            psn: FIRST_PSN,
            addr: client,
            pmtu: 1024,
            server_addr: Some(data),
            coalesce: false,
        },
    )
    .expect("create the responder QP");
    let setup = serde_json::json!({
        "node": data.to_string(),
        "node_qpn": qp.qpn,
        "psn": FIRST_PSN,
        "rkey": region.rkey,
        "va": va,
    });
    writeln!(stdin, "{setup}").expect("send the setup to the script");
    drop(stdin);

    // 3. The report.
    let report = script.json_line("report");
    script.finish();

    let data_bytes = hex(report["data"].as_str().expect("data"));
    let swap = u(&report, "swap");
    let add = u(&report, "add");
    let steps = report["steps"].as_array().expect("steps");
    let names: Vec<&str> = steps.iter().map(|s| s["name"].as_str().unwrap()).collect();
    assert_eq!(
        names,
        [
            "write",
            "bad_icrc",
            "read",
            "cas",
            "cas_fails",
            "faa",
            "read_word",
            "bad_rkey",
            "read_untouched"
        ]
    );
    let ok = Syndrome::Ack { credits: 31 };
    let want = |name: &str| -> Option<Want> {
        let w = |opcode, scapy_name, syndrome, msn, original, payload| Want {
            opcode,
            scapy_name,
            syndrome,
            msn,
            original,
            payload,
        };
        Some(match name {
            "write" => w(Opcode::Acknowledge, "RC_ACKNOWLEDGE", ok, 1, None, vec![]),
            "bad_icrc" => return None,
            "read" => w(
                Opcode::ReadResponseOnly,
                "RC_RDMA_READ_RESPONSE_ONLY",
                ok,
                2,
                None,
                data_bytes.clone(),
            ),
            "cas" => w(
                Opcode::AtomicAcknowledge,
                "RC_ATOMIC_ACKNOWLEDGE",
                ok,
                3,
                Some(0),
                vec![],
            ),
            // A CAS whose compare fails still completes, returning the current value.
            "cas_fails" => w(
                Opcode::AtomicAcknowledge,
                "RC_ATOMIC_ACKNOWLEDGE",
                ok,
                4,
                Some(swap),
                vec![],
            ),
            "faa" => w(
                Opcode::AtomicAcknowledge,
                "RC_ATOMIC_ACKNOWLEDGE",
                ok,
                5,
                Some(swap),
                vec![],
            ),
            // Atomics work on little-endian words in memory, as on x86 hosts.
            "read_word" => w(
                Opcode::ReadResponseOnly,
                "RC_RDMA_READ_RESPONSE_ONLY",
                ok,
                6,
                None,
                swap.wrapping_add(add).to_le_bytes().to_vec(),
            ),
            "bad_rkey" => w(
                Opcode::Acknowledge,
                "RC_ACKNOWLEDGE",
                Syndrome::Nak(NakCode::RemoteAccessError),
                6,
                None,
                vec![],
            ),
            // The WRITE with the broken ICRC did not land.
            "read_untouched" => w(
                Opcode::ReadResponseOnly,
                "RC_RDMA_READ_RESPONSE_ONLY",
                ok,
                7,
                None,
                vec![0; 64],
            ),
            other => panic!("unexpected step {other}"),
        })
    };

    let request_path = IcrcPath::new(client, data);
    let response_path = IcrcPath::new(data, client);
    for step in steps {
        let name = step["name"].as_str().unwrap();
        let ctx = format!("step {name}: {step}");
        // scapy's requests carry an ICRC our implementation agrees with (except the one
        // broken on purpose).
        let request = hex(step["request"].as_str().unwrap());
        let verified = request_path.verify(&request);
        if name == "bad_icrc" {
            assert!(verified.is_err(), "{ctx}");
        } else {
            verified.unwrap_or_else(|e| panic!("scapy's request ICRC: {e}; {ctx}"));
        }
        let Some(w) = want(name) else {
            assert!(step["response"].is_null(), "answered a bad ICRC; {ctx}");
            continue;
        };
        // The request as we parse it: to the node's QP, at the PSN the script reports.
        let req = PacketRepr::parse(&request).unwrap_or_else(|e| panic!("{e}; {ctx}"));
        assert_eq!(req.bth.dest_qpn, qp.qpn, "{ctx}");
        assert_eq!(u64::from(req.bth.psn), u(step, "psn"), "{ctx}");
        assert_eq!(
            u64::from(req.bth.opcode.as_u8()),
            u(step, "opcode"),
            "{ctx}"
        );
        let psn = u64::from(req.bth.psn);
        assert!(step["response"].is_string(), "no answer; {ctx}");
        assert_eq!(step["from"], data.to_string(), "{ctx}");
        let d = &step["decoded"];
        // scapy's view of the answer.
        assert_eq!(d["icrc_ok"], true, "scapy rejects the answer's ICRC; {ctx}");
        assert_eq!(u(d, "scapy_icrc"), u(d, "stored_icrc"), "{ctx}");
        assert_eq!(u(d, "opcode"), u64::from(w.opcode.as_u8()), "opcode; {ctx}");
        assert_eq!(d["opcode_name"], w.scapy_name, "{ctx}");
        assert_eq!(u(d, "dqpn"), u64::from(CLIENT_QPN), "dest QPN; {ctx}");
        assert_eq!(u(d, "psn"), psn, "PSN; {ctx}");
        assert_eq!(u(d, "ackreq"), 0, "{ctx}");
        assert_eq!(u(d, "pkey"), 0xFFFF, "{ctx}");
        assert_eq!(
            u(d, "syndrome"),
            u64::from(w.syndrome.to_u8()),
            "syndrome; {ctx}"
        );
        assert_eq!(u(d, "msn"), u64::from(w.msn), "MSN; {ctx}");
        assert_eq!(
            d.get("original").and_then(Value::as_u64),
            w.original,
            "original value; {ctx}"
        );
        assert_eq!(
            hex(d["payload"].as_str().unwrap()),
            w.payload,
            "payload; {ctx}"
        );
        // Our own parser and ICRC agree with scapy on the same bytes.
        let response = hex(step["response"].as_str().unwrap());
        response_path
            .verify(&response)
            .unwrap_or_else(|e| panic!("response ICRC: {e}; {ctx}"));
        let p = PacketRepr::parse(&response).unwrap_or_else(|e| panic!("{e}; {ctx}"));
        assert_eq!(p.bth.opcode, w.opcode, "{ctx}");
        assert_eq!(p.bth.dest_qpn, CLIENT_QPN, "{ctx}");
        assert_eq!(u64::from(p.bth.psn), psn, "{ctx}");
        let aeth = p.aeth.expect("an AETH");
        assert_eq!((aeth.syndrome, aeth.msn), (w.syndrome, w.msn), "{ctx}");
        assert_eq!(p.payload, &w.payload[..], "{ctx}");
    }

    // The node's side of the story.
    let metrics = node.metrics();
    assert_eq!(metrics.dropped(DropKind::BadIcrc), 1, "{metrics:?}");
    let info = client::qp_info(&admin, qp.qpn).expect("QP info");
    assert_eq!(info.client_qpn, CLIENT_QPN);
    assert_eq!(info.expected_psn, (FIRST_PSN + 8) & PSN_MASK, "{info:?}");
    assert_eq!(info.counters.naks_access, 1, "{info:?}");
    assert_eq!(info.counters.writes, 1, "{info:?}");
    assert_eq!(info.counters.atomics, 3, "{info:?}");
    let took = started.elapsed();
    assert!(took < Duration::from_secs(30), "took {took:?}");
}
