//! In-place tables are a table kind of their own: the service checks the latch
//! scheme, sizes and allocates table-owned memory for the tuple area (and the
//! separate latch array), describes where it is, and frees it with the table.

mod common;

use common::{client, memnode, start_recording};
use metadata::StoreConfig;
use metadata::api::{CreateTableRequest, InPlaceRequest, IndexKind, LatchPlacement, UpdateMode};
use metadata::store::MemStore;

fn inplace(name: &str, scheme: &str, placement: Option<LatchPlacement>) -> CreateTableRequest {
    CreateTableRequest {
        name: name.into(),
        index: IndexKind::InPlace,
        value_limit: 128,
        memnodes: None,
        replication: None,
        update_mode: None,
        inplace: Some(InPlaceRequest {
            scheme: scheme.into(),
            capacity: 1000,
            tuple_bytes: 256,
            latch_placement: placement,
            unsafe_demo: false,
        }),
    }
}

#[test]
fn inplace_tables_get_sized_table_owned_memory() {
    let (server, scrubber) = start_recording(StoreConfig::Memory(MemStore::new()), |c| {
        c.catalog.heartbeat_timeout_ms = u64::MAX / 4;
    });
    let c = client(&server);
    c.register_memnode(&memnode("a", 4791, 1, 16 << 20))
        .unwrap();
    c.register_memnode(&memnode("b", 4792, 2, 16 << 20))
        .unwrap();
    let free = || -> u64 { c.memnodes().unwrap().iter().map(|m| m.free_bytes).sum() };
    let start_free = free();

    let t = c
        .create_table(&inplace(
            "t",
            "pessimistic-x-wc",
            Some(LatchPlacement::Separate),
        ))
        .unwrap();
    assert_eq!(t.index(), IndexKind::InPlace);
    let info = t.layout.in_place().cloned().unwrap();
    assert_eq!(info.scheme, "pessimistic-x-wc-separate");
    assert_eq!(
        t.layout.update_mode(),
        UpdateMode::InPlace {
            scheme: "pessimistic-x-wc-separate".into()
        }
    );
    assert_eq!((info.capacity, info.tuple_bytes), (1000, 256));
    assert_eq!(info.latch_placement, LatchPlacement::Separate);
    let area = info.area.unwrap();
    let latches = info.latches.unwrap();
    // 64-byte header + 1000 tuples of 256 bytes, in 4 KiB granules; 8000 bytes of
    // latches, on the same memnode.
    assert_eq!(area.len, (64u64 + 256_000).next_multiple_of(4096));
    assert_eq!(latches.len, 8192);
    assert_eq!(latches.memnode_id, area.memnode_id);
    assert_eq!(t.memory.table_owned_leases, 2);
    assert_eq!(t.memory.table_owned_bytes, area.len + latches.len);
    assert_eq!(free(), start_free - area.len - latches.len);
    let lease = c.get_lease(area.lease_id).unwrap();
    assert_eq!(lease.owner, "table:t");
    // Both pieces were zeroed before the table was handed out.
    let zeroed: Vec<(u64, u64)> = scrubber.requests().iter().map(|r| (r.va, r.len)).collect();
    assert_eq!(zeroed, vec![(area.va, area.len), (latches.va, latches.len)]);
    assert_eq!(c.table("t").unwrap(), t);

    // Embedded latches: one area, no array; the placement comes from the name.
    let e = c
        .create_table(&inplace("e", "pessimistic-rw-async-padded", None))
        .unwrap();
    let info = e.layout.in_place().cloned().unwrap();
    assert_eq!(info.latch_placement, LatchPlacement::Padded);
    assert!(info.latches.is_none());
    let v = c
        .create_table(&inplace("v", "farm-consistent", None))
        .unwrap();
    assert_eq!(v.layout.in_place().unwrap().scheme, "farm-consistent");

    // Refused combinations: 422 with a message that says why.
    let mut bookend = inplace("x", "bookend-unsafe-demo", None);
    let mut shared_wu = inplace("x", "pessimistic-rw-wu", None);
    let separate_wu = inplace("x", "pessimistic-x-wu", Some(LatchPlacement::Separate));
    let optimistic_separate = inplace("x", "versioning", Some(LatchPlacement::Separate));
    let mut zero = inplace("x", "crc", None);
    if let Some(p) = zero.inplace.as_mut() {
        p.capacity = 0;
    }
    let mut no_spec = inplace("x", "crc", None);
    no_spec.inplace = None;
    let mut race_with_spec = inplace("x", "crc", None);
    race_with_spec.index = IndexKind::Race;
    let mut race_in_place = inplace("x", "crc", None);
    race_in_place.index = IndexKind::Race;
    race_in_place.inplace = None;
    race_in_place.update_mode = Some(UpdateMode::InPlace {
        scheme: "crc".into(),
    });
    let mut out_of_place = inplace("x", "crc", None);
    out_of_place.update_mode = Some(UpdateMode::OutOfPlace);
    for (req, needle) in [
        (&bookend, "unsafe_demo"),
        (&shared_wu, "shared FAA readers"),
        (&separate_wu, "separate latch array"),
        (&optimistic_separate, "only the pessimistic latch"),
        (&zero, "capacity"),
        (&no_spec, "needs `inplace`"),
        (&race_with_spec, "only to index inplace"),
        (&race_in_place, "need index inplace"),
        (&out_of_place, "out_of_place"),
    ] {
        let e = c.create_table(req).unwrap_err();
        assert_eq!(e.status(), Some(422), "{req:?}");
        assert!(e.to_string().contains(needle), "{needle}: {e}");
    }
    // With the demo flag, bookend is allowed; -x makes write-unlatch allowed.
    if let Some(p) = bookend.inplace.as_mut() {
        p.unsafe_demo = true;
    }
    assert!(
        c.create_table(&bookend)
            .unwrap()
            .layout
            .in_place()
            .unwrap()
            .unsafe_demo
    );
    if let Some(p) = shared_wu.inplace.as_mut() {
        p.scheme = "pessimistic-x-wu".into();
    }
    shared_wu.name = "y".into();
    c.create_table(&shared_wu).unwrap();

    // Dropping the tables frees their memory.
    for n in ["t", "e", "v", "x", "y"] {
        c.drop_table(n).unwrap();
    }
    assert_eq!(free(), start_free);
}
