//! A test client of a memory node's RPC workers: one soft-RoCE queue pair that SENDs
//! requests and receives the replies.
#![allow(dead_code)]

use std::time::{Duration, Instant};

use dmkv_api::qp::UdpConnection;
use dmkv_api::rpc::{Request, RpcStatus, parse_reply};
use verbs::recv::RecvQueue;
use verbs::transport::udp::UdpTransport;
use verbs::worker::{Qp, VerbError, Worker, WorkerConfig};

/// One queue pair to the node, receiving its replies.
pub struct RpcClient {
    pub worker: Worker,
    pub qp: Qp,
    pub replies: RecvQueue,
    /// The key requests carry: the queue pair's own when it holds a grant, else the
    /// region's.
    pub rkey: u32,
    /// The region's first virtual address.
    pub base: u64,
}

impl RpcClient {
    /// The client of connection `conn` made on `transport`.
    pub fn new(mut transport: UdpTransport, conn: &UdpConnection) -> RpcClient {
        let replies = RecvQueue::new(8);
        if let Some(psn) = conn.rpc_psn {
            transport
                .set_recv_queue(conn.handle, Some(replies.clone()), psn)
                .expect("receive replies");
        }
        let region = conn.regions.first().expect("a region").clone();
        let worker = Worker::new(Box::new(transport), WorkerConfig::default());
        let qp = worker.qp(conn.handle);
        RpcClient {
            worker,
            qp,
            replies,
            rkey: conn.rkey.unwrap_or(region.rkey),
            base: region.base_va,
        }
    }

    /// Sends `message` and waits up to `wait` for the reply message.
    pub fn call_raw(&self, message: Vec<u8>, wait: Duration) -> Result<Option<Vec<u8>>, VerbError> {
        self.replies
            .post_recv(0, vec![0; 8192])
            .expect("post a reply buffer");
        self.worker.block_on(async {
            self.qp.send(message).await?;
            let deadline = Instant::now() + wait;
            while Instant::now() < deadline {
                if let Some(c) = self.replies.poll() {
                    assert_eq!(c.result, Ok(()));
                    return Ok(Some(c.data));
                }
                self.worker.sleep(Duration::from_micros(50)).await;
            }
            Ok(None)
        })
    }

    /// Sends `request` as `id` and returns the reply's status and body.
    pub fn call(&self, request: Request<'_>, id: u64) -> (RpcStatus, Vec<u8>) {
        let reply = self
            .call_raw(request.encode(id), Duration::from_secs(5))
            .expect("the SEND completes")
            .expect("a reply");
        let r = parse_reply(&reply).expect("the reply parses");
        assert_eq!(r.id, id);
        (r.status, r.body.to_vec())
    }
}
