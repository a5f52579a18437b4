//! The one-sided Clover insert path's routes: chain ids leased in blocks, a
//! table's chain directory (created once, zeroed, table-owned, never for a table
//! whose keys went through `POST .../chains`), and batches of published mappings
//! that key listings and lookups then see.

mod common;

use common::{client, memnode, start_recording};
use metadata::StoreConfig;
use metadata::api::{
    CreateTableRequest, IndexKind, PublishChainsRequest, PublishedChain, TailHint,
};
use metadata::client::MetadataClient;
use metadata::store::MemStore;

fn table(name: &str, index: IndexKind, replication: Option<u32>) -> CreateTableRequest {
    CreateTableRequest {
        name: name.into(),
        index,
        value_limit: 4096,
        memnodes: None,
        replication,
        update_mode: None,
        inplace: None,
    }
}

fn hint(memnode_id: u64, va: u64) -> TailHint {
    TailHint {
        memnode_id,
        va,
        generation: 0,
    }
}

fn setup() -> (metadata::ServerHandle, MetadataClient, u64) {
    let (server, _scrubber) = start_recording(StoreConfig::Memory(MemStore::new()), |_| {});
    let c = client(&server);
    let m1 = c
        .register_memnode(&memnode("m1", 4791, 11, 64 << 20))
        .unwrap()
        .id;
    c.register_memnode(&memnode("m2", 4792, 12, 64 << 20))
        .unwrap();
    c.create_table(&table("t", IndexKind::Clover, None))
        .unwrap();
    (server, c, m1)
}

#[test]
fn chain_id_blocks_never_overlap_and_bad_counts_are_refused() {
    let (_server, c, _) = setup();
    let a = c.lease_chain_ids("t", 100).unwrap();
    let b = c.lease_chain_ids("t", 5).unwrap();
    assert!(a.first >= 1 && a.count == 100);
    assert_eq!(b.first, a.first + 100);
    // Chains opened through the service take ids after the blocks.
    let opened = c.open_chain("t", b"k").unwrap();
    assert_eq!(opened.chain_id, b.first + 5);
    for bad in [0, (1 << 20) + 1] {
        assert_eq!(
            c.lease_chain_ids("t", bad).unwrap_err().code(),
            Some("invalid_request")
        );
    }
    assert_eq!(
        c.lease_chain_ids("nope", 1).unwrap_err().code(),
        Some("table_not_found")
    );
}

#[test]
fn a_directory_is_created_once_and_owned_by_the_table() {
    let (_server, c, _) = setup();
    let first = c.chain_directory("t", true).unwrap();
    assert!(first.created);
    assert_eq!(first.directory.len, 4 << 20);
    let again = c.chain_directory("t", false).unwrap();
    assert!(
        !again.created,
        "an existing directory is handed out, even to a decliner"
    );
    assert_eq!(again.directory, first.directory);
    let mem = c.table("t").unwrap().memory;
    assert_eq!(mem.table_owned_leases, 1);
    assert_eq!(mem.table_owned_bytes, 4 << 20);
    // Dropping the table frees it; a new table of that name gets a new one.
    c.drop_table("t").unwrap();
    c.create_table(&table("t", IndexKind::Clover, None))
        .unwrap();
    assert!(c.chain_directory("t", true).unwrap().created);
}

#[test]
fn tables_that_cannot_have_a_directory_keep_the_metadata_path_for_good() {
    let (_server, c, _) = setup();
    // Chains created through the service first.
    c.open_chain("t", b"k").unwrap();
    let code = |r: Result<_, dmkv_api::ClientError>| r.unwrap_err().code().map(str::to_owned);
    let unavailable = Some("chain_directory_unavailable".to_owned());
    assert_eq!(code(c.chain_directory("t", true)), unavailable);
    assert_eq!(code(c.chain_directory("t", true)), unavailable);
    // Declined by the first client that asked.
    c.create_table(&table("declined", IndexKind::Clover, None))
        .unwrap();
    assert_eq!(code(c.chain_directory("declined", false)), unavailable);
    assert_eq!(code(c.chain_directory("declined", true)), unavailable);
    // Replicated.
    c.create_table(&table("r2", IndexKind::Clover, Some(2)))
        .unwrap();
    assert_eq!(code(c.chain_directory("r2", true)), unavailable);
    // Not a Clover table.
    c.create_table(&table("race", IndexKind::Race, None))
        .unwrap();
    assert_eq!(
        code(c.chain_directory("race", true)),
        Some("wrong_index".to_owned())
    );
}

#[test]
fn published_mappings_are_listed_and_looked_up_and_bad_ones_record_nothing() {
    let (_server, c, m1) = setup();
    let dir = c.chain_directory("t", true).unwrap();
    let block = c.lease_chain_ids("t", 10).unwrap();
    let va = dir.directory.va + (8 << 20);
    let chains: Vec<PublishedChain> = (0..3)
        .map(|i| {
            PublishedChain::new(
                format!("k{i}").as_bytes(),
                block.first + i,
                hint(m1, va + 64 * i),
            )
        })
        .collect();
    let r = c
        .publish_chains(
            "t",
            &PublishChainsRequest {
                chains: chains.clone(),
            },
        )
        .unwrap();
    assert_eq!(r.stored, 3);
    // Publishing again (a retry) records nothing new.
    let r = c
        .publish_chains("t", &PublishChainsRequest { chains })
        .unwrap();
    assert_eq!(r.stored, 0);
    let page = c.chain_keys("t", b"", None, 100).unwrap();
    assert_eq!(page.keys.len(), 3);
    let info = c.lookup_chain("t", b"k1").unwrap().unwrap();
    assert_eq!(info.chain_id, block.first + 1);
    assert_eq!(info.tail, Some(hint(m1, va + 64)));
    assert_eq!(
        c.tail("t", block.first + 2).unwrap().tail,
        hint(m1, va + 128)
    );

    // One bad mapping fails the call and records nothing of it.
    let good = PublishedChain::new(b"good", block.first + 5, hint(m1, va));
    for bad in [
        PublishedChain::new(b"bad", block.first + 1000, hint(m1, va)),
        PublishedChain::new(b"bad", 0, hint(m1, va)),
        PublishedChain::new(b"bad", block.first + 6, hint(m1, va + 1)),
        PublishedChain::new(b"bad", block.first + 6, hint(999, va)),
        PublishedChain::new(b"", block.first + 6, hint(m1, va)),
        PublishedChain {
            key: "not base64!".into(),
            chain_id: block.first + 6,
            root: hint(m1, va),
        },
    ] {
        let e = c
            .publish_chains(
                "t",
                &PublishChainsRequest {
                    chains: vec![good.clone(), bad],
                },
            )
            .unwrap_err();
        assert_eq!(e.code(), Some("invalid_request"), "{e}");
    }
    assert_eq!(c.lookup_chain("t", b"good").unwrap(), None);
    assert_eq!(c.chain_keys("t", b"", None, 100).unwrap().keys.len(), 3);
}
