//! An embedded cluster whose memory nodes run RPC workers, and an in-process client of it
//! (the RPC tests' common start).

use std::collections::HashMap;

use kvstore::{Client, ClientOptions, TransportKind};
use testbed::{Embedded, EmbeddedOptions, Security};

/// A cluster of `memnodes` nodes with `workers` RPC workers each, and a client.
pub fn cluster(memnodes: usize, workers: usize, o: ClientOptions) -> (Embedded, Client) {
    let embedded = Embedded::start_with_rpc_workers(
        &EmbeddedOptions {
            memnodes,
            transport: TransportKind::Udp,
            client: o.clone(),
            ..EmbeddedOptions::default()
        },
        Security::Open,
        workers,
    )
    .expect("cluster");
    let client = Client::in_process(&embedded.metadata_url(), o, HashMap::new(), Box::new(()))
        .expect("client");
    (embedded, client)
}
