//! The transport conformance suite on the in-process transports: `local`, and `shm`
//! through a second mapping of a region file (the two-process case runs in the
//! memnode tests, against a real memory node process).

use std::sync::Arc;

use verbs::conformance::{self, SCRATCH_BYTES, Scratch};
use verbs::mem::{AccessFlags, MemoryTable, Region};
use verbs::recv::RecvQueue;
use verbs::transport::local::DirectTransport;
use verbs::transport::shm::ShmTarget;
use verbs::worker::{Worker, WorkerConfig};
use verbs::wr::{CompletionError, CompletionValue, RemoteAddr, WorkRequest};

const BASE_VA: u64 = 0x2000_0000;

fn run_suite(worker: &Worker, rkey: u32, len: u64) {
    let qp = worker.qp(0);
    let scratch = Scratch {
        base: RemoteAddr::new(rkey, BASE_VA),
        region_end: BASE_VA + len,
    };
    let report = worker.block_on(async { conformance::run(&qp, scratch).await });
    assert!(report.passed(), "{}", report.failures());
    assert_eq!(report.checks.len(), 8);
}

#[test]
fn local_transport_conforms() {
    for config in [WorkerConfig::default(), WorkerConfig::baseline()] {
        let table = MemoryTable::new();
        let region = Arc::new(Region::anonymous(SCRATCH_BYTES as usize).expect("region"));
        let info = table
            .register(region, BASE_VA, AccessFlags::ALL)
            .expect("register");
        let mut transport = DirectTransport::local();
        transport.connect(Arc::new(table));
        let worker = Worker::new(Box::new(transport), config);
        run_suite(&worker, info.rkey, info.len);
        let stats = worker.transport_stats();
        assert!(stats.doorbells > 0 && stats.work_requests >= stats.doorbells);
        assert_eq!(stats.completions, stats.work_requests);
    }
}

#[test]
fn shm_transport_conforms_through_a_second_mapping() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("region");
    let owner = Region::create_file(&path, SCRATCH_BYTES as usize).expect("create");
    let table = MemoryTable::new();
    let info = table
        .register(Arc::new(owner), BASE_VA, AccessFlags::ALL)
        .expect("register");
    let mut transport = DirectTransport::shm();
    transport
        .connect_shm(&ShmTarget {
            path: path.clone(),
            rkey: info.rkey,
            base_va: BASE_VA,
        })
        .expect("map");
    let worker = Worker::new(Box::new(transport), WorkerConfig::default());
    run_suite(&worker, info.rkey, info.len);
    // What the client wrote through its mapping is visible in the owner's.
    let mut word = [0u8; 8];
    table
        .region(info.rkey)
        .expect("region")
        .read(192, &mut word)
        .expect("read");
    assert_eq!(
        u64::from_le_bytes(word),
        400,
        "FAA total visible to the owner"
    );
}

fn run_two_sided(worker: &Worker, recv: &RecvQueue, rkey: u32, len: u64) {
    let qp = worker.qp(0);
    let scratch = Scratch {
        base: RemoteAddr::new(rkey, BASE_VA),
        region_end: BASE_VA + len,
    };
    let report = worker.block_on(async { conformance::run_two_sided(&qp, recv, scratch).await });
    assert!(report.passed(), "{}", report.failures());
    assert_eq!(report.checks.len(), conformance::TWO_SIDED_CHECKS);
}

#[test]
fn local_transport_conforms_for_send_and_recv() {
    let table = MemoryTable::new();
    let region = Arc::new(Region::anonymous(SCRATCH_BYTES as usize).expect("region"));
    let info = table
        .register(region, BASE_VA, AccessFlags::ALL)
        .expect("register");
    let recv = RecvQueue::new(64);
    let mut transport = DirectTransport::local();
    transport.connect_with_recv(Arc::new(table), recv.clone());
    let worker = Worker::new(Box::new(transport), WorkerConfig::default());
    run_two_sided(&worker, &recv, info.rkey, info.len);
    let s = recv.stats();
    assert!(
        s.delivered >= 20 && s.failed == 1 && s.not_ready > 0,
        "{s:?}"
    );
}

#[test]
fn shm_transport_conforms_for_send_and_recv_within_a_process() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("region");
    let owner = Region::create_file(&path, SCRATCH_BYTES as usize).expect("create");
    let table = MemoryTable::new();
    let info = table
        .register(Arc::new(owner), BASE_VA, AccessFlags::ALL)
        .expect("register");
    let recv = RecvQueue::new(64);
    let mut transport = DirectTransport::shm();
    let qp = transport
        .connect_shm(&ShmTarget {
            path,
            rkey: info.rkey,
            base_va: BASE_VA,
        })
        .expect("map");
    transport.set_recv_queue(qp, Some(recv.clone()));
    let worker = Worker::new(Box::new(transport), WorkerConfig::default());
    run_two_sided(&worker, &recv, info.rkey, info.len);
}

#[test]
fn a_direct_send_gives_up_after_the_rnr_retry_count() {
    let table = MemoryTable::new();
    let region = Arc::new(Region::anonymous(4096).expect("region"));
    let info = table
        .register(region, BASE_VA, AccessFlags::ALL)
        .expect("register");
    let recv = RecvQueue::new(4);
    let mut transport = DirectTransport::local();
    transport.set_rnr(3, 1);
    transport.connect_with_recv(Arc::new(table), recv.clone());
    let worker = Worker::new(Box::new(transport), WorkerConfig::default());
    let qp = worker.qp(0);
    let a = RemoteAddr::new(info.rkey, BASE_VA);
    let done = worker
        .block_on(async {
            qp.execute(vec![
                WorkRequest::send(vec![1; 10]),
                WorkRequest::write(a, vec![2; 8]),
            ])
            .await
        })
        .expect("post");
    assert_eq!(done[0].result, Err(CompletionError::RnrRetryExceeded));
    assert_eq!(done[1].result, Ok(CompletionValue::Write));
    // The first try and three retries.
    assert_eq!(recv.stats().not_ready, 4);
}

#[test]
fn completions_by_polling() {
    let table = MemoryTable::new();
    let region = Arc::new(Region::anonymous(4096).expect("region"));
    let info = table
        .register(region, BASE_VA, AccessFlags::ALL)
        .expect("register");
    let mut transport = DirectTransport::local();
    transport.connect(Arc::new(table));
    let worker = Worker::new(Box::new(transport), WorkerConfig::default());
    let qp = worker.qp(0);
    let a = RemoteAddr::new(info.rkey, BASE_VA);
    let ids = qp
        .post(vec![
            WorkRequest::write(a, vec![1, 2, 3, 4, 5, 6, 7, 8]),
            WorkRequest::faa(a, 1),
            WorkRequest::read(a, 8),
        ])
        .expect("post");
    let mut out = Vec::new();
    while out.len() < 3 {
        worker.poll_completions(&mut out);
    }
    let got: Vec<u64> = out.iter().map(|c| c.wr_id).collect();
    assert_eq!(got, ids);
    assert_eq!(
        out[1].result,
        Ok(CompletionValue::Atomic(u64::from_le_bytes([
            1, 2, 3, 4, 5, 6, 7, 8
        ])))
    );
    let expect = 1u64.wrapping_add(u64::from_le_bytes([1, 2, 3, 4, 5, 6, 7, 8]));
    assert_eq!(
        out[2].result,
        Ok(CompletionValue::Read(expect.to_le_bytes().to_vec()))
    );
}

#[test]
fn tasks_spawned_from_running_tasks_all_run() {
    use std::cell::Cell;
    use std::rc::Rc;
    let table = MemoryTable::new();
    let region = Arc::new(Region::anonymous(4096).expect("region"));
    table
        .register(region, BASE_VA, AccessFlags::ALL)
        .expect("register");
    let mut transport = DirectTransport::local();
    transport.connect(Arc::new(table));
    let worker = Worker::new(Box::new(transport), WorkerConfig::default());
    let ran = Rc::new(Cell::new(0u32));
    let w = worker.clone();
    let r = ran.clone();
    // A task that spawns children while it is being polled, then keeps waiting: the
    // children must not be lost when the parent is put back in its slot.
    worker.spawn(async move {
        for _ in 0..5 {
            let r2 = r.clone();
            w.spawn(async move { r2.set(r2.get() + 1) });
            w.sleep(std::time::Duration::from_micros(10)).await;
        }
    });
    let w = worker.clone();
    let r = ran.clone();
    worker.block_on(async move {
        let start = std::time::Instant::now();
        while r.get() < 5 && start.elapsed() < std::time::Duration::from_secs(5) {
            w.sleep(std::time::Duration::from_micros(50)).await;
        }
    });
    assert_eq!(
        ran.get(),
        5,
        "children spawned inside a running task were dropped"
    );
}

#[test]
fn tasks_waiting_for_credits_are_woken_once() {
    use std::cell::Cell;
    use std::rc::Rc;
    use verbs::throttle::CreditConfig;
    // Many tasks contending for few credits: each wait must cost one queued wake, not
    // one per poll (duplicates used to multiply in the ready queue without bound).
    let table = MemoryTable::new();
    let region = Arc::new(Region::anonymous(64 * 1024).expect("region"));
    let info = table
        .register(region, BASE_VA, AccessFlags::ALL)
        .expect("register");
    let mut transport = DirectTransport::local();
    transport.connect(Arc::new(table));
    let config = WorkerConfig {
        credits: CreditConfig::fixed(2),
        ..WorkerConfig::default()
    };
    let worker = Worker::new(Box::new(transport), config);
    let done = Rc::new(Cell::new(0u32));
    for t in 0..32u64 {
        let qp = worker.qp(0);
        let done = done.clone();
        worker.spawn(async move {
            for _ in 0..200 {
                let a = RemoteAddr::new(info.rkey, BASE_VA + t * 64);
                qp.faa(a, 1).await.expect("faa");
            }
            done.set(done.get() + 1);
        });
    }
    let w = worker.clone();
    let d = done.clone();
    let start = std::time::Instant::now();
    worker.block_on(async move {
        while d.get() < 32 && start.elapsed() < std::time::Duration::from_secs(20) {
            w.sleep(std::time::Duration::from_micros(100)).await;
        }
    });
    assert_eq!(done.get(), 32, "tasks did not finish");
    assert!(worker.stats().credit_waits > 0, "credits never ran short");
}
