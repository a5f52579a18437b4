//! Both directions of one soft-RoCE queue pair: two `udp` transports connected to each
//! other, each receiving the other's SENDs, carry a request/response exchange the way
//! an RPC client and server would (the request id in the immediate data, the reply sent
//! back on the queue pair the request arrived on).

use std::net::Ipv4Addr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use verbs::rc::RcConfig;
use verbs::recv::RecvQueue;
use verbs::transport::udp::{RemoteQpParams, UdpTransport};
use verbs::worker::{VerbError, Worker, WorkerConfig};
use verbs::wr::{CompletionError, RemoteAddr};

const CALLS: u32 = 60;

fn request(i: u32) -> Vec<u8> {
    let len = [0usize, 5, 1024, 1500, 4097][i as usize % 5];
    (0..len).map(|k| (k as u32 * 7 + i) as u8).collect()
}

fn reply(req: &[u8]) -> Vec<u8> {
    req.iter().rev().map(|b| b.wrapping_add(1)).collect()
}

#[test]
fn sends_flow_both_ways_on_one_queue_pair() {
    let config = RcConfig::default();
    let mut client = UdpTransport::bind(Ipv4Addr::LOCALHOST, config.clone()).expect("bind");
    let mut server = UdpTransport::bind(Ipv4Addr::LOCALHOST, config).expect("bind");
    let c = client.prepare();
    let s = server.prepare();
    let cqp = client
        .connect(
            c,
            RemoteQpParams {
                addr: s.addr,
                qpn: s.qpn,
                coalesce: false,
            },
        )
        .expect("connect");
    let sqp = server
        .connect(
            s,
            RemoteQpParams {
                addr: c.addr,
                qpn: c.qpn,
                coalesce: false,
            },
        )
        .expect("connect");
    let client_rq = RecvQueue::new(16);
    let server_rq = RecvQueue::new(16);
    client
        .set_recv_queue(cqp, Some(client_rq.clone()), s.psn)
        .expect("client receives");
    server
        .set_recv_queue(sqp, Some(server_rq.clone()), c.psn)
        .expect("server receives");

    let done = Arc::new(AtomicBool::new(false));
    let finished = done.clone();
    let server_thread = std::thread::spawn(move || {
        let worker = Worker::new(Box::new(server), WorkerConfig::default());
        let qp = worker.qp(sqp);
        worker.block_on(async {
            for b in 0..4u64 {
                server_rq.post_recv(b, vec![0; 8192]).expect("post");
            }
            let mut served = 0;
            while served < CALLS {
                let Some(m) = server_rq.poll() else {
                    worker.sleep(Duration::from_micros(20)).await;
                    continue;
                };
                assert_eq!(m.result, Ok(()));
                let id = m.imm.expect("a request id");
                assert_eq!(m.data, request(id), "request {id}");
                assert_eq!(m.remote_qpn, c.qpn);
                qp.send_with_imm(reply(&m.data), id).await.expect("reply");
                let mut buf = m.data;
                buf.resize(8192, 0);
                server_rq.post_recv(m.wr_id, buf).expect("repost");
                served += 1;
            }
            // Keep answering (the client's last check) until the client is done.
            while !finished.load(Ordering::Acquire) {
                qp.worker().sleep(Duration::from_micros(50)).await;
            }
        });
        worker.transport_stats()
    });

    let worker = Worker::new(Box::new(client), WorkerConfig::default());
    let qp = worker.qp(cqp);
    worker.block_on(async {
        for i in 0..CALLS {
            client_rq
                .post_recv(u64::from(i), vec![0; 8192])
                .expect("post");
            qp.send_with_imm(request(i), i).await.expect("request");
            let m = loop {
                if let Some(m) = client_rq.poll() {
                    break m;
                }
                worker.sleep(Duration::from_micros(20)).await;
            };
            assert_eq!((m.wr_id, m.imm), (u64::from(i), Some(i)));
            assert_eq!(m.data, reply(&request(i)), "reply {i}");
            assert_eq!(m.qpn, c.qpn);
        }
        // A one-sided verb to the peer finds no registered memory there.
        let e = qp.read(RemoteAddr::new(1, 0x1000), 8).await;
        assert_eq!(e, Err(VerbError::Completion(CompletionError::RemoteAccess)));
    });
    done.store(true, Ordering::Release);
    let server_stats = server_thread.join().expect("server thread");
    let client_stats = worker.transport_stats();
    assert_eq!(client_rq.stats().delivered, u64::from(CALLS));
    assert!(
        server_stats.packets_sent >= u64::from(CALLS) * 2,
        "{server_stats:?}"
    );
    assert!(
        client_stats.packets_received >= u64::from(CALLS) * 2,
        "{client_stats:?}"
    );
}
