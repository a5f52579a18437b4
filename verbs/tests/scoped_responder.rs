//! A responder queue pair with an access scope serves only its windows: a scan of the
//! whole region draws data inside them and NAK(remote access error) everywhere else;
//! WRITE, CAS and FAA under read-only rights, another key and an expired window are
//! refused the same way, memory untouched, and every refusal is counted by reason.

use std::net::SocketAddrV4;
use std::sync::Arc;
use std::time::{Duration, Instant};

use verbs::mem::{
    AccessFlags, AccessScope, MemoryTable, MemoryWindow, Region, RemoteMemory, ScopeViolation,
    ScopeViolations,
};
use verbs::rc::{MAX_PACKET, Pmtu, RcConfig, Responder};
use verbs::wire::{
    AtomicEthRepr, BthRepr, IcrcPath, NakCode, Opcode, PacketRepr, RethRepr, Syndrome,
};

const BASE_VA: u64 = 0x7f00_0000_0000;
const REGION_LEN: u64 = 64 * 1024;
const SCOPE_RKEY: u32 = 0x00ab_cdef;

fn path() -> IcrcPath {
    IcrcPath::new(
        "10.0.0.1:49152".parse::<SocketAddrV4>().expect("addr"),
        "10.0.0.2:4791".parse::<SocketAddrV4>().expect("addr"),
    )
}

struct Rig {
    table: MemoryTable,
    region_rkey: u32,
    resp: Responder,
    psn: u32,
    violations: Arc<ScopeViolations>,
}

/// What the responder answered to one request.
#[derive(Debug, PartialEq, Eq)]
enum Answer {
    Data(Vec<u8>),
    Ack,
    Atomic(u64),
    Nak(NakCode),
}

impl Rig {
    fn new(windows: Vec<MemoryWindow>) -> Rig {
        let table = MemoryTable::new();
        let region = Arc::new(Region::anonymous(REGION_LEN as usize).expect("region"));
        let info = table
            .register(region, BASE_VA, AccessFlags::ALL)
            .expect("register");
        // Every byte says which 4 KiB page it is in.
        for page in 0..REGION_LEN / 4096 {
            table
                .write(info.rkey, BASE_VA + page * 4096, &[page as u8 + 1; 4096])
                .expect("fill");
        }
        let violations = Arc::new(ScopeViolations::default());
        let config = RcConfig {
            pmtu: Pmtu::new(4096).expect("pmtu"),
            ..RcConfig::default()
        };
        let mut resp = Responder::new(config, 2, 1, 0, path());
        resp.set_scope(Some(Arc::new(AccessScope::new(
            SCOPE_RKEY,
            info.rkey,
            windows,
            violations.clone(),
        ))));
        Rig {
            table,
            region_rkey: info.rkey,
            resp,
            psn: 0,
            violations,
        }
    }

    fn send(&mut self, repr: PacketRepr<'_>) -> Answer {
        let mut buf = vec![0u8; repr.buffer_len()];
        repr.emit(&mut buf, &path()).expect("emit");
        self.resp
            .handle_datagram(&buf, &self.table)
            .expect("accepted");
        let mut out = vec![0u8; MAX_PACKET];
        let mut data = Vec::new();
        let mut answer = None;
        while let Some(n) = self.resp.poll_transmit(&mut out) {
            let r = PacketRepr::parse(&out[..n]).expect("response");
            if let Some(a) = r.aeth
                && let Syndrome::Nak(code) = a.syndrome
            {
                answer = Some(Answer::Nak(code));
            } else if let Some(a) = r.atomic_ack_eth {
                answer = Some(Answer::Atomic(a.original));
            } else if r.bth.opcode == Opcode::Acknowledge {
                answer = Some(Answer::Ack);
            } else {
                data.extend_from_slice(r.payload);
                answer = Some(Answer::Data(data.clone()));
            }
        }
        answer.expect("an answer")
    }

    fn read(&mut self, rkey: u32, va: u64, len: u32) -> Answer {
        let mut repr = PacketRepr::new(BthRepr::new(Opcode::ReadRequest, 2, self.psn, true));
        repr.reth = Some(RethRepr {
            va,
            rkey,
            dma_len: len,
        });
        self.psn += 1;
        self.send(repr)
    }

    fn write(&mut self, va: u64, data: &[u8]) -> Answer {
        let mut repr = PacketRepr::new(BthRepr::new(Opcode::WriteOnly, 2, self.psn, true));
        repr.reth = Some(RethRepr {
            va,
            rkey: SCOPE_RKEY,
            dma_len: data.len() as u32,
        });
        repr.payload = data;
        self.psn += 1;
        self.send(repr)
    }

    fn atomic(&mut self, op: Opcode, va: u64) -> Answer {
        let mut repr = PacketRepr::new(BthRepr::new(op, 2, self.psn, true));
        repr.atomic_eth = Some(AtomicEthRepr {
            va,
            rkey: SCOPE_RKEY,
            swap_add: 1,
            compare: 0,
        });
        self.psn += 1;
        self.send(repr)
    }

    fn snapshot(&self) -> Vec<u8> {
        let mut all = vec![0u8; REGION_LEN as usize];
        self.table
            .read(self.region_rkey, BASE_VA, &mut all)
            .expect("snapshot");
        all
    }
}

fn window(page: u64, pages: u64, rights: AccessFlags) -> MemoryWindow {
    MemoryWindow {
        start: BASE_VA + page * 4096,
        end: BASE_VA + (page + pages) * 4096,
        rights,
        expires: None,
    }
}

#[test]
fn a_scan_of_the_region_reads_only_the_windows() {
    // Pages 2..4 and 9 are the table's.
    let mut rig = Rig::new(vec![
        window(2, 2, AccessFlags::ALL),
        window(9, 1, AccessFlags::ALL),
    ]);
    for page in 0..REGION_LEN / 4096 {
        let got = rig.read(SCOPE_RKEY, BASE_VA + page * 4096, 4096);
        if matches!(page, 2 | 3 | 9) {
            assert_eq!(got, Answer::Data(vec![page as u8 + 1; 4096]), "page {page}");
        } else {
            assert_eq!(got, Answer::Nak(NakCode::RemoteAccessError), "page {page}");
        }
    }
    // Straddling a window's end, and the region's own key, are refused too.
    assert_eq!(
        rig.read(SCOPE_RKEY, BASE_VA + 4 * 4096 - 8, 16),
        Answer::Nak(NakCode::RemoteAccessError)
    );
    assert_eq!(
        rig.read(rig.region_rkey, BASE_VA + 2 * 4096, 8),
        Answer::Nak(NakCode::RemoteAccessError)
    );
    assert_eq!(rig.violations.get(ScopeViolation::OutsideWindow), 14);
    assert_eq!(rig.violations.get(ScopeViolation::WrongRkey), 1);
    assert_eq!(rig.resp.stats().naks_access, 15);
}

#[test]
fn read_only_windows_refuse_writes_and_atomics() {
    let mut rig = Rig::new(vec![window(0, 1, AccessFlags::REMOTE_READ)]);
    let before = rig.snapshot();
    assert_eq!(
        rig.write(BASE_VA, &[0xee; 64]),
        Answer::Nak(NakCode::RemoteAccessError)
    );
    assert_eq!(
        rig.atomic(Opcode::CompareSwap, BASE_VA + 8),
        Answer::Nak(NakCode::RemoteAccessError)
    );
    assert_eq!(
        rig.atomic(Opcode::FetchAdd, BASE_VA + 16),
        Answer::Nak(NakCode::RemoteAccessError)
    );
    assert_eq!(rig.snapshot(), before, "memory untouched");
    assert_eq!(rig.violations.get(ScopeViolation::Rights), 3);
    // Reads are fine.
    assert_eq!(rig.read(SCOPE_RKEY, BASE_VA, 8), Answer::Data(vec![1; 8]));
}

#[test]
fn read_write_windows_take_writes_and_atomics() {
    let mut rig = Rig::new(vec![window(1, 1, AccessFlags::ALL)]);
    assert_eq!(rig.write(BASE_VA + 4096, &[0u8; 8]), Answer::Ack);
    assert_eq!(
        rig.atomic(Opcode::FetchAdd, BASE_VA + 4096),
        Answer::Atomic(0)
    );
    assert_eq!(
        rig.atomic(Opcode::CompareSwap, BASE_VA + 4096),
        Answer::Atomic(1)
    );
    assert_eq!(rig.violations.total(), 0);
}

#[test]
fn expired_windows_stop_access_until_a_new_scope_arrives() {
    let mut w = window(0, 1, AccessFlags::ALL);
    w.expires = Some(Instant::now() + Duration::from_millis(50));
    let mut rig = Rig::new(vec![w]);
    assert_eq!(rig.read(SCOPE_RKEY, BASE_VA, 8), Answer::Data(vec![1; 8]));
    std::thread::sleep(Duration::from_millis(60));
    assert_eq!(
        rig.read(SCOPE_RKEY, BASE_VA, 8),
        Answer::Nak(NakCode::RemoteAccessError)
    );
    assert_eq!(rig.violations.get(ScopeViolation::Expired), 1);
    // A fresh grant's scope replaces the windows; the queue pair carries on.
    let mut fresh = window(0, 1, AccessFlags::ALL);
    fresh.expires = Some(Instant::now() + Duration::from_secs(60));
    let scope = AccessScope::new(
        SCOPE_RKEY,
        rig.region_rkey,
        vec![fresh],
        rig.violations.clone(),
    );
    rig.resp.set_scope(Some(Arc::new(scope)));
    assert_eq!(rig.read(SCOPE_RKEY, BASE_VA, 8), Answer::Data(vec![1; 8]));
}
