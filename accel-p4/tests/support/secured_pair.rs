//! What the zero-sided tests share: two memory nodes of an embedded cluster over soft
//! RoCE, secured with an admin token, and a soft switch configured with that token.
#![allow(dead_code)]

use accel_p4::switch::SwitchConfig;
use kvstore::TransportKind;
use memnode::MemnodeHandle;
use testbed::{Embedded, EmbeddedOptions};

/// Two secured memory nodes of `capacity` bytes each, and their admin token.
pub fn start(capacity: u64) -> (Embedded, Option<String>) {
    let cluster = Embedded::start_secured(&EmbeddedOptions {
        memnodes: 2,
        capacity,
        transport: TransportKind::Udp,
        ..EmbeddedOptions::default()
    })
    .expect("cluster");
    let token = cluster.admin_token().map(str::to_owned);
    (cluster, token)
}

/// Memory node `i` of `cluster` and its admin URL.
pub fn node(cluster: &Embedded, i: usize) -> (&MemnodeHandle, String) {
    let id = cluster.memnode_ids()[i];
    let node = cluster.memnode(id).expect("memnode");
    (node, cluster.admin_url(id).expect("admin url"))
}

/// A local soft switch presenting `token` to the memory nodes.
pub fn switch_config(token: &Option<String>) -> SwitchConfig {
    SwitchConfig {
        memnode_token: token.clone(),
        ..SwitchConfig::local()
    }
}
