//! Interop with Wireshark's InfiniBand dissector: the loopback traffic of a short,
//! deterministic run against a live memory node, captured with tshark, decodes as RoCE
//! with exactly the expected opcodes, QPNs, PSNs, addresses and lengths, and with no
//! malformed packets; every captured frame's ICRC verifies against the IPv4/UDP headers
//! it was actually sent with.
//!
//! Needs tshark (Debian `tshark`; `DMKV_TSHARK` picks the program) and the right to
//! capture on `lo` (root or CAP_NET_RAW). Without them the test is skipped loudly, or
//! fails under `DMKV_REQUIRE_INTEROP=1`. `DMKV_KEEP_CAPTURE=<file>` keeps the capture.

#[path = "common/interop.rs"]
mod interop;

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Read};
use std::net::UdpSocket;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex, mpsc};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use memnode::api::CreateQpRequest;
use memnode::{Memnode, MemnodeConfig, client};
use verbs::rc::RcConfig;
use verbs::transport::udp::{RemoteQpParams, UdpTransport};
use verbs::wire::{EthernetFrame, PacketRepr, Syndrome, pcap};
use verbs::worker::{VerbError, Worker, WorkerConfig};
use verbs::wr::{CompletionError, RemoteAddr};

const PSN_MASK: u32 = 0x00FF_FFFF;
/// The client's first PSN: close to the 24-bit wrap, so the capture shows it wrapping.
const FIRST_PSN: u32 = 0x00FF_FFFB;
/// PSNs the workload consumes.
const PSNS_USED: u32 = 11;
/// The small transfer: not a multiple of 4, so its packets carry pad bytes.
const SMALL: usize = 61;
/// The large transfer: three packets at PMTU 1024.
const BIG: usize = 3000;
const SWAP: u64 = 0x1111_2222_3333_4444;
const ADD: u64 = 5;

/// A running `tshark -i lo` writing a classic pcap to its stdout.
struct Capture {
    child: Option<Child>,
    pcap: Arc<Mutex<Vec<u8>>>,
    stdout: Option<JoinHandle<()>>,
    stderr: Option<JoinHandle<String>>,
}

impl Capture {
    /// Starts capturing `filter` on `lo`; `Err(stderr)` if tshark could not capture.
    fn start(tshark: &str, filter: &str) -> Result<Capture, String> {
        let mut child = Command::new(tshark)
            .args(["-n", "-i", "lo", "-f", filter, "-F", "pcap", "-w", "-"])
            // A safety net: the capture ends by itself even if nobody stops it.
            .args(["-a", "duration:60"])
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|e| format!("cannot run {tshark}: {e}"))?;
        let mut out = child.stdout.take().expect("stdout is piped");
        let err = child.stderr.take().expect("stderr is piped");
        let pcap = Arc::new(Mutex::new(Vec::new()));
        let sink = pcap.clone();
        let stdout = std::thread::spawn(move || {
            let mut buf = [0u8; 65536];
            while let Ok(n) = out.read(&mut buf) {
                if n == 0 {
                    break;
                }
                sink.lock().unwrap().extend_from_slice(&buf[..n]);
            }
        });
        let (tx, rx) = mpsc::channel();
        let stderr = std::thread::spawn(move || {
            let mut all = String::new();
            for line in BufReader::new(err).lines() {
                let Ok(line) = line else { break };
                if line.contains("Capturing on") {
                    let _ = tx.send(());
                }
                all.push_str(&line);
                all.push('\n');
            }
            all
        });
        let mut capture = Capture {
            child: Some(child),
            pcap,
            stdout: Some(stdout),
            stderr: Some(stderr),
        };
        if rx.recv_timeout(Duration::from_secs(20)).is_err() {
            return Err(capture.finish());
        }
        Ok(capture)
    }

    /// Sends `marker` from `probe` to itself until it shows up in the capture. Packets
    /// reach tshark's output in blocks, so this both waits for the capture to be live and
    /// flushes everything captured before the marker.
    fn mark(&self, probe: &UdpSocket, marker: &[u8]) {
        let to = probe.local_addr().unwrap();
        let deadline = Instant::now() + Duration::from_secs(15);
        loop {
            let seen = self
                .pcap
                .lock()
                .unwrap()
                .windows(marker.len())
                .any(|w| w == marker);
            if seen {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "tshark did not capture the marker {:?}",
                String::from_utf8_lossy(marker)
            );
            probe.send_to(marker, to).unwrap();
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Stops the capture (SIGINT, as a user would) and returns tshark's stderr.
    fn finish(&mut self) -> String {
        if let Some(mut child) = self.child.take() {
            let pid = libc::pid_t::try_from(child.id()).expect("pid");
            // SAFETY: kill(2) on the pid of our own unreaped child.
            unsafe { libc::kill(pid, libc::SIGINT) };
            let deadline = Instant::now() + Duration::from_secs(15);
            while child.try_wait().ok().flatten().is_none() {
                if Instant::now() > deadline {
                    let _ = child.kill();
                    let _ = child.wait();
                    break;
                }
                std::thread::sleep(Duration::from_millis(10));
            }
        }
        if let Some(h) = self.stdout.take() {
            let _ = h.join();
        }
        self.stderr
            .take()
            .map(|h| h.join().unwrap_or_default())
            .unwrap_or_default()
    }

    /// The pcap written so far (all of it after [`Capture::finish`]).
    fn bytes(&self) -> Vec<u8> {
        self.pcap.lock().unwrap().clone()
    }
}

impl Drop for Capture {
    fn drop(&mut self) {
        // Stop tshark the way a user would, so that it also stops its dumpcap.
        self.finish();
    }
}

/// Who sent a packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Dir {
    /// Client to memory node.
    Req,
    /// Memory node to client.
    Resp,
}

/// A packet the run must produce, in wire order.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Expected {
    dir: Dir,
    opcode: u8,
    /// Offset from [`FIRST_PSN`].
    psn: u32,
    ack_req: bool,
    /// VA and rkey (of the RETH or the AtomicETH; tshark shows both as `infiniband.reth.*`).
    va_rkey: Option<(u64, u32)>,
    /// RETH DMA length.
    dma_len: Option<u32>,
    /// AtomicETH (swap or add, compare).
    atomic: Option<(u64, u64)>,
    /// AETH (syndrome, MSN).
    aeth: Option<(u8, u32)>,
    /// AtomicAckETH original value.
    original: Option<u64>,
    payload_len: usize,
}

fn packet(dir: Dir, opcode: u8, psn: u32) -> Expected {
    Expected {
        dir,
        opcode,
        psn,
        ack_req: dir == Dir::Req,
        va_rkey: None,
        dma_len: None,
        atomic: None,
        aeth: None,
        original: None,
        payload_len: 0,
    }
}

fn request(opcode: u8, psn: u32, va: u64, rkey: u32, dma_len: u32) -> Expected {
    Expected {
        va_rkey: Some((va, rkey)),
        dma_len: Some(dma_len),
        ..packet(Dir::Req, opcode, psn)
    }
}

fn atomic(opcode: u8, psn: u32, va: u64, rkey: u32, swap_add: u64, compare: u64) -> Expected {
    Expected {
        va_rkey: Some((va, rkey)),
        atomic: Some((swap_add, compare)),
        ..packet(Dir::Req, opcode, psn)
    }
}

fn response(opcode: u8, psn: u32, syndrome: u8, msn: u32) -> Expected {
    Expected {
        aeth: Some((syndrome, msn)),
        ..packet(Dir::Resp, opcode, psn)
    }
}

/// The packets of [`run_workload`], in wire order.
fn expected(base: u64, rkey: u32, bad_rkey: u32) -> Vec<Expected> {
    let big = base + 4096;
    let word = base + 8192;
    let ok = Syndrome::Ack { credits: 31 }.to_u8();
    let nak_access = 0x60 | 2;
    let rest = BIG - 2048;
    vec![
        // WRITE 61 bytes.
        Expected {
            payload_len: SMALL,
            ..request(0x0A, 0, base, rkey, SMALL as u32)
        },
        response(0x11, 0, ok, 1),
        // READ 61 bytes.
        request(0x0C, 1, base, rkey, SMALL as u32),
        Expected {
            payload_len: SMALL,
            ..response(0x10, 1, ok, 2)
        },
        // WRITE 3000 bytes at PMTU 1024: FIRST (with the RETH), MIDDLE, LAST; one ACK.
        Expected {
            payload_len: 1024,
            ack_req: false,
            ..request(0x06, 2, big, rkey, BIG as u32)
        },
        Expected {
            payload_len: 1024,
            ack_req: false,
            ..packet(Dir::Req, 0x07, 3)
        },
        Expected {
            payload_len: rest,
            ..packet(Dir::Req, 0x08, 4)
        },
        response(0x11, 4, ok, 3),
        // READ 3000 bytes: one request, three PSNs of response; MIDDLE has no AETH.
        request(0x0C, 5, big, rkey, BIG as u32),
        Expected {
            payload_len: 1024,
            ..response(0x0D, 5, ok, 4)
        },
        Expected {
            payload_len: 1024,
            ..packet(Dir::Resp, 0x0E, 6)
        },
        Expected {
            payload_len: rest,
            ..response(0x0F, 7, ok, 4)
        },
        // CAS 0 -> SWAP succeeds.
        atomic(0x13, 8, word, rkey, SWAP, 0),
        Expected {
            original: Some(0),
            ..response(0x12, 8, ok, 5)
        },
        // FAA +ADD.
        atomic(0x14, 9, word, rkey, ADD, 0),
        Expected {
            original: Some(SWAP),
            ..response(0x12, 9, ok, 6)
        },
        // READ with a wrong rkey: NAK(remote access error), the MSN unchanged.
        request(0x0C, 10, base, bad_rkey, 8),
        response(0x11, 10, nak_access, 6),
    ]
}

fn pattern(len: usize, seed: u8) -> Vec<u8> {
    (0..len)
        .map(|i| (i as u8).wrapping_mul(13).wrapping_add(seed))
        .collect()
}

/// One queue pair, one request at a time: WRITE/READ 61 bytes, WRITE/READ 3000 bytes,
/// CAS, FAA, and a READ with a wrong rkey.
fn run_workload(worker: &Worker, handle: usize, base: RemoteAddr, bad_rkey: u32) {
    let qp = worker.qp(handle);
    worker.block_on(async {
        let small = pattern(SMALL, 1);
        qp.write(base, small.clone()).await.expect("write 61");
        assert_eq!(qp.read(base, SMALL as u32).await.expect("read 61"), small);
        let big = pattern(BIG, 7);
        let at = base.offset(4096);
        qp.write(at, big.clone()).await.expect("write 3000");
        assert_eq!(qp.read(at, BIG as u32).await.expect("read 3000"), big);
        let word = base.offset(8192);
        assert_eq!(qp.cas(word, 0, SWAP).await.expect("cas"), 0);
        assert_eq!(qp.faa(word, ADD).await.expect("faa"), SWAP);
        let bad = RemoteAddr::new(bad_rkey, base.va);
        assert_eq!(
            qp.read(bad, 8).await,
            Err(VerbError::Completion(CompletionError::RemoteAccess))
        );
    });
}

/// The fields tshark is asked for, in order.
const FIELDS: &[&str] = &[
    "frame.number",
    "frame.protocols",
    "udp.srcport",
    "udp.dstport",
    "infiniband.bth.opcode",
    "infiniband.bth.destqp",
    "infiniband.bth.psn",
    "infiniband.bth.a",
    "infiniband.bth.padcnt",
    "infiniband.bth.p_key",
    "infiniband.reth.va",
    "infiniband.reth.r_key",
    "infiniband.reth.dmalen",
    "infiniband.atomiceth.swapdt",
    "infiniband.atomiceth.cmpdt",
    "infiniband.aeth.syndrome",
    "infiniband.aeth.msn",
    "infiniband.atomicacketh.origremdt",
    "infiniband.invariant.crc",
    "_ws.malformed",
    "_ws.expert.severity",
];

/// One frame as tshark decoded it: field name → value ("" when absent).
type Decoded = BTreeMap<&'static str, String>;

/// `tshark -r FILE -d udp.port==PORT,infiniband -T fields -e ...`.
fn tshark_decode(tshark: &str, file: &std::path::Path, port: u16) -> Vec<Decoded> {
    let mut cmd = Command::new(tshark);
    cmd.args(["-n", "-r"])
        .arg(file)
        .args(["-d", &format!("udp.port=={port},infiniband")])
        .args(["-T", "fields", "-E", "separator=/t"])
        .args(["-E", "occurrence=a", "-E", "aggregator=,"]);
    for f in FIELDS {
        cmd.args(["-e", f]);
    }
    let out = cmd.output().expect("run tshark -r");
    assert!(
        out.status.success(),
        "tshark -r failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout)
        .expect("UTF-8 tshark output")
        .lines()
        .map(|line| {
            let values: Vec<&str> = line.split('\t').collect();
            assert_eq!(values.len(), FIELDS.len(), "tshark line {line:?}");
            FIELDS
                .iter()
                .zip(values)
                .map(|(f, v)| (*f, v.to_owned()))
                .collect()
        })
        .collect()
}

fn parse_num(v: &str) -> Result<u64, std::num::ParseIntError> {
    match v.strip_prefix("0x") {
        Some(hex) => u64::from_str_radix(hex, 16),
        None => v.parse(),
    }
}

/// A number as tshark prints it (decimal or 0x-hexadecimal); `None` when absent.
fn num(d: &Decoded, field: &str) -> Option<u64> {
    let v = d[field].as_str();
    (!v.is_empty()).then(|| parse_num(v).unwrap_or_else(|e| panic!("{field} = {v:?}: {e}")))
}

fn flag(d: &Decoded, field: &str) -> bool {
    match d[field].as_str() {
        "1" | "True" | "true" => true,
        "0" | "False" | "false" | "" => false,
        v => panic!("{field} = {v:?} is not a boolean"),
    }
}

/// What our own parser found in a captured RoCE frame.
struct Ours {
    number: usize,
    from_client: bool,
    /// The last 4 bytes read big-endian, as tshark shows `infiniband.invariant.crc`.
    icrc_field: u32,
    payload_len: usize,
    atomic_va_rkey: Option<(u64, u32)>,
}

#[test]
fn tshark_decodes_a_captured_run_as_roce() {
    let Some(tshark) = interop::require_tshark() else {
        return;
    };
    let started = Instant::now();
    let node = Memnode::start(MemnodeConfig::local(1 << 20)).expect("memnode starts");
    let data = node.data_addr();
    let admin = node.admin_url();
    let region = node.regions()[0].clone();

    // Marker datagrams on a probe socket show when the capture is live and flushed.
    let probe = UdpSocket::bind("127.0.0.1:0").expect("probe socket");
    let probe_port = probe.local_addr().unwrap().port();
    let filter = format!("udp port {} or udp port {probe_port}", data.port());
    let mut capture = match Capture::start(&tshark, &filter) {
        Ok(c) => c,
        Err(log) => {
            interop::tool_available(
                || false,
                &format!("a tshark capture on lo (needs root or CAP_NET_RAW); tshark said:\n{log}"),
            );
            return;
        }
    };
    capture.mark(&probe, b"dmkv-capture-start");

    // The client, with a long retransmission timeout so that the capture holds no
    // retransmissions even on a loaded machine, and a first PSN just before the wrap.
    let config = RcConfig {
        retransmit_timeout: Duration::from_secs(2),
        ..RcConfig::default()
    };
    let mut transport = UdpTransport::for_remote(data, config).expect("client transport");
    let mut local = transport.prepare();
    local.psn = FIRST_PSN;
    let resp = client::create_qp(
        &admin,
        &CreateQpRequest {
            qpn: local.qpn,
            psn: local.psn,
            addr: local.addr,
            pmtu: 1024,
            server_addr: Some(data),
            coalesce: false,
        },
    )
    .expect("create the responder QP");
    let remote = RemoteQpParams {
        addr: resp.addr,
        qpn: resp.qpn,
        coalesce: false,
    };
    let handle = transport.connect(local, remote).expect("connect");
    let worker = Worker::new(Box::new(transport), WorkerConfig::default());
    let base = RemoteAddr::new(region.rkey, region.base_va);
    let bad_rkey = region.rkey ^ 0x5A5A_5A5A;
    run_workload(&worker, handle, base, bad_rkey);
    let stats = worker.transport_stats();
    assert_eq!(stats.retransmissions, 0, "{stats:?}");
    let info = client::qp_info(&admin, resp.qpn).expect("QP info");
    assert_eq!(info.expected_psn, (FIRST_PSN + PSNS_USED) & PSN_MASK);

    capture.mark(&probe, b"dmkv-capture-end");
    let log = capture.finish();
    let bytes = capture.bytes();
    let dir = tempfile::tempdir().expect("tempdir");
    let file = dir.path().join("run.pcap");
    std::fs::write(&file, &bytes).expect("write the capture");
    if let Ok(keep) = std::env::var("DMKV_KEEP_CAPTURE") {
        std::fs::write(&keep, &bytes).expect("keep the capture");
    }

    // Our own reading of the capture: Ethernet frames with zero MACs (Linux `lo`), IPv4
    // id 0 with DF, and ICRCs that verify against the headers actually sent.
    let records = pcap::parse(&bytes).unwrap_or_else(|e| panic!("capture: {e}; tshark:\n{log}"));
    let client_addr = local.addr;
    let mut ours = Vec::new();
    for (i, r) in records.iter().enumerate() {
        let n = i + 1;
        assert_eq!(r.orig_len as usize, r.data.len(), "frame {n} truncated");
        // The probe's marker datagrams are not RoCE.
        if r.data.len() >= 38 && u16::from_be_bytes([r.data[34], r.data[35]]) == probe_port {
            continue;
        }
        let f = EthernetFrame::parse_port(&r.data, data.port())
            .unwrap_or_else(|e| panic!("frame {n}: {e}"));
        assert_eq!((f.src_mac, f.dst_mac), ([0; 6], [0; 6]), "frame {n}");
        assert!(
            (f.src == client_addr && f.dst == data) || (f.src == data && f.dst == client_addr),
            "frame {n}: {} -> {}",
            f.src,
            f.dst
        );
        assert_eq!(f.ip_id(), 0, "frame {n}: IP id");
        assert!(f.dont_fragment(), "frame {n}: DF");
        f.verify_icrc()
            .unwrap_or_else(|e| panic!("frame {n}: ICRC of the captured frame: {e}"));
        let p = PacketRepr::parse(f.roce).unwrap_or_else(|e| panic!("frame {n}: {e}"));
        let tail: [u8; 4] = f.roce[f.roce.len() - 4..].try_into().unwrap();
        ours.push(Ours {
            number: n,
            from_client: f.src == client_addr,
            icrc_field: u32::from_be_bytes(tail),
            payload_len: p.payload.len(),
            atomic_va_rkey: p.atomic_eth.map(|a| (a.va, a.rkey)),
        });
    }

    // tshark's reading.
    let decoded = tshark_decode(&tshark, &file, data.port());
    assert_eq!(
        decoded.len(),
        records.len(),
        "tshark and pcap::parse disagree on the frame count"
    );
    let probe_port = u64::from(probe_port);
    let roce: Vec<&Decoded> = decoded
        .iter()
        .filter(|d| num(d, "udp.srcport") != Some(probe_port))
        .collect();
    assert!(roce.len() + 2 <= decoded.len(), "the markers are missing");
    let want = expected(region.base_va, region.rkey, bad_rkey);
    let summary = roce
        .iter()
        .map(|d| {
            format!(
                "#{} {}->{} opcode={} qpn={} psn={}",
                d["frame.number"],
                d["udp.srcport"],
                d["udp.dstport"],
                d["infiniband.bth.opcode"],
                d["infiniband.bth.destqp"],
                d["infiniband.bth.psn"]
            )
        })
        .collect::<Vec<_>>()
        .join("\n");
    assert_eq!(
        roce.len(),
        want.len(),
        "captured RoCE packets (client {client_addr}, node {data}):\n{summary}\ntshark:\n{log}"
    );
    assert_eq!(ours.len(), roce.len());
    for ((d, w), o) in roce.iter().zip(&want).zip(&ours) {
        let n = &d["frame.number"];
        assert_eq!(n, &o.number.to_string());
        let ctx = format!("frame {n}, expected {w:?}; all:\n{summary}");
        let protocols = &d["frame.protocols"];
        assert!(
            protocols.starts_with("eth:ethertype:ip:udp:infiniband"),
            "{protocols}: not decoded as InfiniBand; {ctx}"
        );
        assert_eq!(d["_ws.malformed"], "", "malformed; {ctx}");
        // No expert info of warning severity (0x600000) or worse.
        for s in d["_ws.expert.severity"]
            .split(',')
            .filter(|s| !s.is_empty())
        {
            let sev = parse_num(s).unwrap();
            assert!(sev < 0x0060_0000, "expert info of severity {s}; {ctx}");
        }
        assert_eq!(o.from_client, w.dir == Dir::Req, "direction; {ctx}");
        let (src, dst, qpn) = match w.dir {
            Dir::Req => (client_addr.port(), data.port(), resp.qpn),
            Dir::Resp => (data.port(), client_addr.port(), local.qpn),
        };
        assert_eq!(num(d, "udp.srcport"), Some(u64::from(src)), "{ctx}");
        assert_eq!(num(d, "udp.dstport"), Some(u64::from(dst)), "{ctx}");
        assert_eq!(
            num(d, "infiniband.bth.opcode"),
            Some(u64::from(w.opcode)),
            "opcode; {ctx}"
        );
        assert_eq!(
            num(d, "infiniband.bth.destqp"),
            Some(u64::from(qpn)),
            "destination QPN; {ctx}"
        );
        let psn = (FIRST_PSN + w.psn) & PSN_MASK;
        assert_eq!(
            num(d, "infiniband.bth.psn"),
            Some(u64::from(psn)),
            "PSN; {ctx}"
        );
        assert_eq!(flag(d, "infiniband.bth.a"), w.ack_req, "AckReq; {ctx}");
        assert_eq!(num(d, "infiniband.bth.p_key"), Some(0xFFFF), "P_Key; {ctx}");
        let pad = (4 - w.payload_len % 4) % 4;
        assert_eq!(
            num(d, "infiniband.bth.padcnt"),
            Some(pad as u64),
            "pad count; {ctx}"
        );
        let va_rkey = num(d, "infiniband.reth.va")
            .map(|va| (va, num(d, "infiniband.reth.r_key").unwrap() as u32));
        assert_eq!(va_rkey, w.va_rkey, "VA and rkey; {ctx}");
        let dma_len = num(d, "infiniband.reth.dmalen").map(|l| l as u32);
        assert_eq!(dma_len, w.dma_len, "DMA length; {ctx}");
        let atomic = num(d, "infiniband.atomiceth.swapdt")
            .map(|swap| (swap, num(d, "infiniband.atomiceth.cmpdt").unwrap()));
        assert_eq!(atomic, w.atomic, "AtomicETH; {ctx}");
        let aeth = num(d, "infiniband.aeth.syndrome")
            .map(|s| (s as u8, num(d, "infiniband.aeth.msn").unwrap() as u32));
        assert_eq!(aeth, w.aeth, "AETH; {ctx}");
        assert_eq!(
            num(d, "infiniband.atomicacketh.origremdt"),
            w.original,
            "AtomicAckETH; {ctx}"
        );
        assert_eq!(
            num(d, "infiniband.invariant.crc"),
            Some(u64::from(o.icrc_field)),
            "tshark's ICRC field; {ctx}"
        );
        // Our parser agrees with tshark on the payload and the AtomicETH address.
        assert_eq!(o.payload_len, w.payload_len, "payload length; {ctx}");
        if w.atomic.is_some() {
            assert_eq!(o.atomic_va_rkey, w.va_rkey, "AtomicETH VA; {ctx}");
        }
    }
    let took = started.elapsed();
    assert!(took < Duration::from_secs(30), "took {took:?}");
}
