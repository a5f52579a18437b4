//! What the switch-held latch tests share: a client queue pair to a memory node through
//! the soft switch, and the switch told where the latched tuples are.
#![allow(dead_code)]

use std::net::Ipv4Addr;

use accel_p4::model::LatchRegion;
use accel_p4::switch::SwitchHandle;
use memnode::MemnodeHandle;
use verbs::rc::RcConfig;
use verbs::transport::QpHandle;
use verbs::transport::udp::UdpTransport;
use verbs::worker::{Worker, WorkerConfig};

/// A worker with one queue pair (settings `config`) to the memory node whose admin URL
/// is `node`, through the switch whose admin URL is `switch`; with the rkey and base
/// address of the node's first region.
pub fn client_through_switch(
    switch: &str,
    node: &str,
    config: RcConfig,
) -> (Worker, QpHandle, u32, u64) {
    let mut t = UdpTransport::bind(Ipv4Addr::LOCALHOST, config).expect("bind");
    let conn =
        accel_p4::client::connect_udp_qp(switch, node, &mut t).expect("connect through the switch");
    let region = conn.regions[0].clone();
    (
        Worker::new(Box::new(t), WorkerConfig::default()),
        conn.handle,
        region.rkey,
        region.base_va,
    )
}

/// Tell `sw` that `tuples` tuples of `2^stride_log2` bytes, `offset` bytes into the
/// first region of `node`, are latched at the switch.
pub fn latch_tuples(
    sw: &SwitchHandle,
    node: &MemnodeHandle,
    offset: u64,
    stride_log2: u8,
    tuples: u32,
) {
    let info = memnode::client::node_info(&node.admin_url()).expect("node info");
    let region = &info.regions[0];
    sw.control()
        .set_latch_region(
            region.rkey,
            LatchRegion {
                base_va: region.base_va + offset,
                stride_log2,
                tuples,
                first_tuple: 0,
            },
            false,
        )
        .expect("latch region");
}
