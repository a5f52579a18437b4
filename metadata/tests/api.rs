//! The HTTP API of an in-process service: happy paths and clear errors.

mod common;

use common::{TOKEN, client, memnode, start, start_recording};
use metadata::StoreConfig;
use metadata::api::{
    CreateLeaseRequest, CreateTableRequest, ErrorBody, IndexKind, TableState, TailHint, UpdateMode,
};
use metadata::client::MetadataClient;
use metadata::scrub::ScrubTarget;
use metadata::store::MemStore;

fn mem() -> StoreConfig {
    StoreConfig::Memory(MemStore::new())
}

fn error(r: &metadata::client::RawResponse) -> ErrorBody {
    serde_json::from_slice(&r.body)
        .unwrap_or_else(|e| panic!("not a JSON error ({e}): {}", r.text()))
}

fn table(name: &str, index: IndexKind) -> CreateTableRequest {
    CreateTableRequest {
        name: name.into(),
        index,
        value_limit: 4096,
        memnodes: None,
        replication: None,
        update_mode: None,
        inplace: None,
    }
}

#[test]
fn memnodes_leases_and_tables_happy_path() {
    // The memnodes are registrations only: table memory is "zeroed" by a recorder.
    let (server, scrubber) = start_recording(mem(), |_| {});
    let c = client(&server);
    assert_eq!(c.health().unwrap().status, "ok");

    let r1 = c
        .register_memnode(&memnode("m1", 4791, 11, 64 << 20))
        .unwrap();
    assert!(r1.created);
    let again = c
        .register_memnode(&memnode("m1", 4791, 11, 64 << 20))
        .unwrap();
    assert_eq!((again.id, again.created, again.epoch), (r1.id, false, 1));
    let r2 = c
        .register_memnode(&memnode("m2", 4792, 22, 64 << 20))
        .unwrap();
    assert_ne!(r1.id, r2.id);
    let nodes = c.memnodes().unwrap();
    assert_eq!(nodes.len(), 2);
    assert!(nodes.iter().all(|n| n.healthy && n.free_bytes == 64 << 20));
    assert_eq!(nodes[0].regions[0].chunk_size, 4 << 20);
    c.heartbeat(r1.id).unwrap();

    // Leases are rounded up to the chunk size and aligned to it.
    let l = c.lease("app", 100).unwrap();
    assert_eq!(l.len, 4 << 20);
    assert_eq!((l.va - 0x1000_0000_0000) % (4 << 20), 0);
    assert_eq!(l.state, "active");
    assert!(l.expires_at_ms.is_some());
    assert!(l.data_addr.starts_with("127.0.0.1:"));
    let l2 = c
        .create_lease(&CreateLeaseRequest {
            client: "other app".into(),
            bytes: 9 << 20,
            memnode: Some(r2.id),
            ttl_ms: Some(60_000),
            min_bytes: None,
            table: None,
        })
        .unwrap();
    assert_eq!((l2.memnode_id, l2.len, l2.rkey), (r2.id, 12 << 20, 22));
    assert_eq!(c.leases(Some("app")).unwrap().len(), 1);
    assert_eq!(
        c.leases(Some("other app")).unwrap()[0].lease_id,
        l2.lease_id
    );
    assert_eq!(c.leases(None).unwrap().len(), 2);
    let renewed = c.renew(l.lease_id, Some(120_000)).unwrap();
    assert!(renewed.expires_at_ms > l.expires_at_ms);
    // Renew without a body uses the lease's TTL.
    let r = c
        .request("POST", &format!("/v1/leases/{}/renew", l.lease_id), None)
        .unwrap();
    assert_eq!(r.status, 200, "{}", r.text());
    c.free(l2.lease_id).unwrap();
    assert_eq!(c.free(l2.lease_id).unwrap_err().status(), Some(404));

    // Tables.
    let clover = c.create_table(&table("users", IndexKind::Clover)).unwrap();
    assert_eq!(clover.memnodes, vec![r1.id, r2.id]);
    assert_eq!(clover.layout.update_mode(), UpdateMode::OutOfPlace);
    assert!(clover.layout.race().is_none());
    let mut req = table("idx.v1", IndexKind::Race);
    req.memnodes = Some(vec![r2.id]);
    let race = c.create_table(&req).unwrap();
    let dir = race.layout.race().cloned().unwrap().directory.unwrap();
    assert_eq!((dir.memnode_id, dir.rkey, dir.len), (r2.id, 22, 64 << 10));
    // The directory was zeroed on its memnode before the table was handed out; the
    // Clover table owns no memory of its own and zeroed nothing.
    assert_eq!(
        scrubber.requests(),
        vec![ScrubTarget {
            memnode_id: r2.id,
            admin_url: "http://127.0.0.1:5792".into(),
            rkey: 22,
            va: dir.va,
            len: 64 << 10,
        }]
    );
    assert_eq!(c.table("idx.v1").unwrap(), race);
    let names: Vec<String> = c.tables().unwrap().into_iter().map(|t| t.name).collect();
    assert_eq!(names, vec!["idx.v1", "users"]);
    // The directory is table-owned: listed, but not freeable by clients.
    let e = c.free(dir.lease_id).unwrap_err();
    assert_eq!(
        (e.status(), e.code()),
        (Some(409), Some("lease_owned_by_table"))
    );

    // Clover chains: insert/open is idempotent per key, ids are unique.
    let a = c.open_chain("users", b"alice").unwrap();
    let b = c.open_chain("users", b"bob").unwrap();
    let a2 = c.open_chain("users", b"alice").unwrap();
    assert!(a.created && b.created && !a2.created);
    assert_eq!(a.chain_id, a2.chain_id);
    assert_ne!(a.chain_id, b.chain_id);
    assert_ne!(a.chain_id, 0);
    let e = c.open_chain("idx.v1", b"alice").unwrap_err();
    assert_eq!(e.code(), Some("wrong_index"));
    assert_eq!(c.tail("users", a.chain_id).unwrap_err().status(), Some(404));
    let hint = TailHint {
        memnode_id: r1.id,
        va: 0x1000_0000_0040,
        generation: 3,
    };
    c.put_tail("users", a.chain_id, &hint).unwrap();
    assert_eq!(c.tail("users", a.chain_id).unwrap().tail, hint);
    assert_eq!(
        c.put_tail("users", 999_999, &hint).unwrap_err().status(),
        Some(404)
    );

    // Read-only lookup: never creates a chain; returns the stored hint.
    assert_eq!(c.lookup_chain("users", b"carol").unwrap(), None);
    assert_eq!(c.lookup_chain("users", b"carol").unwrap(), None);
    let info = c.lookup_chain("users", b"alice").unwrap().unwrap();
    assert_eq!((info.chain_id, info.tail), (a.chain_id, Some(hint.clone())));
    let info = c.lookup_chain("users", b"bob").unwrap().unwrap();
    assert_eq!((info.chain_id, info.tail), (b.chain_id, None));
    // Keys that need percent-encoding in the query (base64 '+', '/', '=').
    let odd = [0xfbu8, 0xff, 0xfe, b'?', b'&'];
    assert_eq!(c.lookup_chain("users", &odd).unwrap(), None);
    let o = c.open_chain("users", &odd).unwrap();
    assert_eq!(
        c.lookup_chain("users", &odd).unwrap().map(|i| i.chain_id),
        Some(o.chain_id)
    );
    assert_eq!(
        c.lookup_chain("idx.v1", b"alice").unwrap_err().code(),
        Some("wrong_index")
    );
    assert_eq!(
        c.lookup_chain("nope", b"alice").unwrap_err().code(),
        Some("table_not_found")
    );
    let r = c
        .request("GET", "/v1/tables/users/chains?key=%%%", None)
        .unwrap();
    assert_eq!(r.status, 422, "{}", r.text());
    let r = c.request("GET", "/v1/tables/users/chains", None).unwrap();
    assert_eq!(r.status, 422, "{}", r.text());

    // Publishing a root is put-if-absent: the first hint wins, later ones learn it.
    let first = TailHint {
        memnode_id: r1.id,
        va: 0x2000_0000_0000,
        generation: 0,
    };
    let second = TailHint {
        va: 0x3000_0000_0000,
        ..first.clone()
    };
    let p1 = c.publish_root("users", b.chain_id, &first).unwrap();
    assert!(p1.created);
    assert_eq!(p1.tail, first);
    let p2 = c.publish_root("users", b.chain_id, &second).unwrap();
    assert!(!p2.created);
    assert_eq!(
        (p2.tail, p2.updated_at_ms),
        (first.clone(), p1.updated_at_ms)
    );
    assert_eq!(c.tail("users", b.chain_id).unwrap().tail, first);
    let p3 = c.publish_root("users", b.chain_id, &first).unwrap();
    assert!(!p3.created, "a repeated publication finds its own hint");
    assert_eq!(p3.tail, first);
    let r = c
        .request(
            "POST",
            &format!("/v1/tables/users/chains/{}/root", b.chain_id),
            Some(br#"{"memnode_id": 1, "va": 3}"#),
        )
        .unwrap();
    assert_eq!(r.status, 422, "unaligned");
    assert_eq!(
        c.publish_root("users", 999_999, &first).unwrap_err().code(),
        Some("chain_not_found")
    );

    // Drop frees the directory and forgets the chains.
    c.drop_table("idx.v1").unwrap();
    assert_eq!(
        c.table("idx.v1").unwrap_err().code(),
        Some("table_not_found")
    );
    assert!(c.leases(None).unwrap().iter().all(|l| l.owner == "client"));
    c.drop_table("users").unwrap();
    c.create_table(&table("users", IndexKind::Clover)).unwrap();
    let fresh = c.open_chain("users", b"alice").unwrap();
    assert!(fresh.created && fresh.chain_id != a.chain_id);

    // Deregistration is refused while leases live on the memnode; forced, it
    // revokes them.
    let e = c.deregister_memnode(r1.id).unwrap_err();
    assert_eq!((e.status(), e.code()), (Some(409), Some("memnode_in_use")));
    c.force_deregister_memnode(r1.id).unwrap();
    assert!(c.leases(Some("app")).unwrap().is_empty());
    assert_eq!(c.memnodes().unwrap().len(), 1);
    server.shutdown();
}

#[test]
fn clear_4xx_answers() {
    let server = start(mem(), |_| {});
    let c = client(&server);
    let url = server.url();
    c.register_memnode(&memnode("m1", 4791, 1, 16 << 20))
        .unwrap();

    let post = |path: &str, body: &[u8]| c.request("POST", path, Some(body)).unwrap();
    // Malformed JSON.
    let r = post("/v1/tables", b"{\"name\": ");
    assert_eq!((r.status, error(&r).code.as_str()), (400, "invalid_json"));
    // Well-formed, wrong fields.
    let r = post(
        "/v1/tables",
        br#"{"name": "t", "index": "btree", "value_limit": 64}"#,
    );
    assert_eq!(
        (r.status, error(&r).code.as_str()),
        (422, "invalid_request")
    );
    let r = post(
        "/v1/tables",
        br#"{"name": "t", "index": "race", "value_limit": 64, "colour": 1}"#,
    );
    assert_eq!(r.status, 422, "unknown fields are refused");
    // Name rules, value limits, replication, schemes.
    for (body, needle) in [
        (
            r#"{"name": "", "index": "clover", "value_limit": 64}"#,
            "1 to 64",
        ),
        (
            r#"{"name": "a/b", "index": "clover", "value_limit": 64}"#,
            "contains '/'",
        ),
    ] {
        let r = post("/v1/tables", body.as_bytes());
        assert_eq!(r.status, 400, "{body}: {}", r.text());
        let e = error(&r);
        assert_eq!(e.code, "invalid_table_name");
        assert!(e.error.contains(needle), "{body}: {}", e.error);
    }
    for (body, needle) in [
        (
            r#"{"name": "t", "index": "clover", "value_limit": 63}"#,
            "value_limit",
        ),
        (
            r#"{"name": "t", "index": "clover", "value_limit": 2000000}"#,
            "value_limit",
        ),
        (
            r#"{"name": "t", "index": "clover", "value_limit": 64, "replication": 4}"#,
            "replication",
        ),
        (
            r#"{"name": "t", "index": "clover", "value_limit": 64, "memnodes": [77]}"#,
            "77",
        ),
        (
            r#"{"name": "t", "index": "clover", "value_limit": 64, "update_mode": {"in_place": {"scheme": "Bad Scheme"}}}"#,
            "scheme",
        ),
    ] {
        let r = post("/v1/tables", body.as_bytes());
        assert_eq!(r.status, 422, "{body}: {}", r.text());
        let e = error(&r);
        assert!(e.error.contains(needle), "{body}: {}", e.error);
    }
    let name64 = "n".repeat(64);
    c.create_table(&table(&name64, IndexKind::Clover)).unwrap();
    let r = post(
        "/v1/tables",
        format!(r#"{{"name": "{name64}", "index": "race", "value_limit": 64}}"#).as_bytes(),
    );
    assert_eq!((r.status, error(&r).code.as_str()), (409, "table_exists"));
    // Unknown tables, leases, memnodes, routes.
    for path in [
        "/v1/tables/nope",
        "/v1/leases/12345",
        "/v1/memnodes/999",
        "/v2/x",
    ] {
        let r = c.request("GET", path, None).unwrap();
        assert_eq!(r.status, 404, "{path}");
        error(&r);
    }
    let r = post("/v1/tables/nope/chains", br#"{"key": "YQ=="}"#);
    assert_eq!(
        (r.status, error(&r).code.as_str()),
        (404, "table_not_found")
    );
    let r = post(
        &format!("/v1/tables/{name64}/chains"),
        br#"{"key": "*not base64*"}"#,
    );
    assert_eq!(r.status, 422);
    let r = c.request("GET", "/v1/leases/abc", None).unwrap();
    assert_eq!((r.status, error(&r).code.as_str()), (400, "invalid_path"));
    let r = c.request("PATCH", "/v1/tables", Some(b"{}")).unwrap();
    assert_eq!(r.status, 405);
    error(&r);
    // Oversize bodies.
    let mut big = br#"{"name": ""#.to_vec();
    big.extend(std::iter::repeat_n(b'a', 2 << 20));
    big.extend_from_slice(br#"", "index": "clover", "value_limit": 64}"#);
    // The service answers 413 without reading the rest of the body and closes the
    // connection, so a client still sending it may see the connection closed instead
    // of the answer (an I/O error); one of a few attempts gets the answer.
    let r = (0..20)
        .find_map(|_| match c.request("POST", "/v1/tables", Some(&big)) {
            Ok(r) => Some(r),
            Err(metadata::client::ClientError::Io { .. }) => None,
            Err(e) => panic!("oversize body: {e}"),
        })
        .expect("an answer to the oversize body");
    assert_eq!((r.status, error(&r).code.as_str()), (413, "body_too_large"));
    // Leases: bad sizes, TTLs, out of memory, unknown memnode.
    let r = post("/v1/leases", br#"{"client": "a", "bytes": 0}"#);
    assert_eq!(r.status, 422);
    let r = post("/v1/leases", br#"{"client": "a", "bytes": 1, "ttl_ms": 1}"#);
    assert_eq!(r.status, 422);
    let r = post(
        "/v1/leases",
        br#"{"client": "a", "bytes": 1, "memnode": 42}"#,
    );
    assert_eq!(
        (r.status, error(&r).code.as_str()),
        (404, "memnode_not_found")
    );
    let r = post("/v1/leases", br#"{"client": "a", "bytes": 17000000}"#);
    assert_eq!((r.status, error(&r).code.as_str()), (507, "out_of_memory"));
    assert!(error(&r).error.contains("out of memory"));
    // Fill the memnode, then one more lease is a clear out-of-memory error.
    let mut n = 0;
    loop {
        let r = post("/v1/leases", br#"{"client": "fill", "bytes": 1048576}"#);
        if r.status == 507 {
            assert_eq!(error(&r).code, "out_of_memory");
            break;
        }
        assert_eq!(r.status, 201, "{}", r.text());
        n += 1;
        assert!(n < 16 + 1, "more leases than memory");
    }
    assert_eq!(n, 16, "a 16 MiB memnode holds exactly 16 chunks of 1 MiB");

    // Tokens: missing, wrong, right; only the public GETs are open.
    let anon = MetadataClient::new(&url).unwrap();
    let wrong = MetadataClient::new(&url)
        .unwrap()
        .with_token(Some("guess".into()));
    for who in [&anon, &wrong] {
        let r = who
            .request(
                "POST",
                "/v1/tables",
                Some(br#"{"name":"x","index":"clover","value_limit":64}"#),
            )
            .unwrap();
        assert_eq!((r.status, error(&r).code.as_str()), (401, "unauthorized"));
        assert_eq!(r.header("www-authenticate"), Some("Bearer"));
        let r = who
            .request("DELETE", &format!("/v1/tables/{name64}"), None)
            .unwrap();
        assert_eq!(r.status, 401);
        let r = who
            .request("POST", "/v1/memnodes/1/heartbeat", None)
            .unwrap();
        assert_eq!(r.status, 401);
    }
    assert!(
        error(&anon.request("POST", "/v1/leases", Some(b"{}")).unwrap())
            .error
            .contains("Bearer")
    );
    assert_eq!(anon.tables().unwrap_err().status(), Some(401));
    assert!(anon.health().unwrap().auth);
    let _ = TOKEN;
}

#[test]
fn no_memnodes_is_a_clear_503() {
    let server = start(mem(), |c| c.token = None);
    let c = MetadataClient::new(&server.url()).unwrap();
    let e = c.lease("a", 1).unwrap_err();
    assert_eq!((e.status(), e.code()), (Some(503), Some("no_memnodes")));
    let e = c.create_table(&table("r", IndexKind::Race)).unwrap_err();
    assert_eq!(e.status(), Some(503));
    // Without a token, mutations are open.
    c.create_table(&table("c", IndexKind::Clover)).unwrap();
    assert!(!c.health().unwrap().auth);
}

#[test]
fn small_regions_get_small_chunks() {
    let server = start(mem(), |_| {});
    let c = client(&server);
    let m = c
        .register_memnode(&memnode("small", 4791, 5, 1 << 20))
        .unwrap();
    let info = &c.memnodes().unwrap()[0];
    assert_eq!(info.regions[0].chunk_size, 64 << 10);
    let l = c.lease("a", 1).unwrap();
    assert_eq!((l.memnode_id, l.len), (m.id, 64 << 10));
}

#[test]
fn reregistration_with_new_regions_revokes_leases_and_marks_tables_lost() {
    let (server, scrubber) = start_recording(mem(), |_| {});
    let c = client(&server);
    let m = c
        .register_memnode(&memnode("m", 4791, 1, 16 << 20))
        .unwrap();
    let l = c.lease("a", 1).unwrap();
    let t = c.create_table(&table("r", IndexKind::Race)).unwrap();
    let old_dir = t.layout.race().cloned().unwrap();
    assert_eq!(t.health.state, TableState::Healthy);
    // Same regions: nothing changes.
    let same = c
        .register_memnode(&memnode("m", 4791, 1, 16 << 20))
        .unwrap();
    assert_eq!((same.id, same.epoch, same.revoked_leases), (m.id, 1, 0));
    assert!(c.get_lease(l.lease_id).is_ok());
    // New rkey (the memnode restarted): leases revoked, the table is lost, its
    // directory is not silently replaced by an empty one.
    let new = c
        .register_memnode(&memnode("m", 4791, 2, 16 << 20))
        .unwrap();
    assert_eq!((new.id, new.epoch, new.revoked_leases), (m.id, 2, 2));
    assert_eq!(c.get_lease(l.lease_id).unwrap_err().status(), Some(404));
    let lost = c.table("r").unwrap();
    let race = lost.layout.race().cloned().unwrap();
    assert_eq!(race.generation, old_dir.generation + 1);
    assert!(race.directory.is_none());
    assert_eq!(lost.health.state, TableState::Lost);
    assert_eq!(lost.health.lost.len(), 1);
    assert_eq!(
        (
            lost.health.lost[0].memnode_id,
            lost.health.lost[0].memnode_name.as_str()
        ),
        (m.id, "m")
    );
    assert!(lost.health.lost[0].reason.contains("restarted"));
    assert_eq!(scrubber.requests().len(), 1, "nothing was re-homed");
    // An admin resets it: a new zeroed directory, healthy again.
    let reset = c.reset_table("r").unwrap();
    assert_eq!(reset.health.state, TableState::Healthy);
    let dir = reset.layout.race().unwrap().directory.clone().unwrap();
    assert_eq!(dir.rkey, 2);
    let zeroed = scrubber.requests();
    assert_eq!((zeroed.len(), zeroed[1].rkey, zeroed[1].va), (2, 2, dir.va));
    assert_eq!(
        c.reset_table("r").unwrap_err().code(),
        Some("table_not_lost")
    );
    // Another name on the same data address is a conflict.
    let e = c
        .register_memnode(&memnode("imposter", 4791, 3, 1 << 20))
        .unwrap_err();
    assert_eq!(e.code(), Some("memnode_conflict"));
}

#[test]
fn metrics_and_openapi() {
    let server = start(mem(), |_| {});
    let c = client(&server);
    c.register_memnode(&memnode("m", 4791, 1, 16 << 20))
        .unwrap();
    c.lease("a", 1).unwrap();
    c.create_table(&table("t", IndexKind::Clover)).unwrap();
    let _ = c.table("missing");
    let r = c.request("GET", "/metrics", None).unwrap();
    assert_eq!(r.status, 200);
    assert!(r.header("content-type").unwrap().starts_with("text/plain"));
    let text = r.text();
    for needle in [
        "dmkv_metadata_memnodes{health=\"healthy\"} 1",
        "dmkv_metadata_memnodes{health=\"unhealthy\"} 0",
        "dmkv_metadata_leases{state=\"active\"} 1",
        "dmkv_metadata_memnode_leased_bytes{memnode=\"1\",name=\"m\"} 1048576",
        "dmkv_metadata_memnode_free_bytes{memnode=\"1\",name=\"m\"} 15728640",
        "dmkv_metadata_tables{index=\"clover\"} 1",
        "dmkv_metadata_tables{state=\"healthy\"} 1",
        "dmkv_metadata_tables{state=\"lost\"} 0",
        "dmkv_metadata_memnodes{state=\"up\"} 1",
        "dmkv_metadata_memnodes{state=\"down\"} 0",
        "dmkv_metadata_requests_total{route=\"/v1/leases\",method=\"POST\",status=\"201\"} 1",
        "dmkv_metadata_requests_total{route=\"/v1/tables/{name}\",method=\"GET\",status=\"404\"} 1",
        "dmkv_metadata_rereplication_bytes_total 0",
        "dmkv_metadata_rereplication_active 0",
        "dmkv_metadata_rereplication_stalled 0",
    ] {
        assert!(text.contains(needle), "metrics lack {needle}:\n{text}");
    }
    for line in text.lines().filter(|l| !l.starts_with('#')) {
        let (_, v) = line.rsplit_once(' ').unwrap();
        v.parse::<f64>()
            .unwrap_or_else(|_| panic!("bad sample {line}"));
    }

    let r = c.request("GET", "/v1/openapi.json", None).unwrap();
    assert_eq!(r.status, 200);
    let doc: serde_json::Value = serde_json::from_slice(&r.body).expect("OpenAPI is JSON");
    assert!(doc["openapi"].as_str().unwrap().starts_with("3."));
    let paths = doc["paths"].as_object().unwrap();
    for (path, methods) in [
        ("/healthz", &["get"][..]),
        ("/metrics", &["get"]),
        ("/v1/openapi.json", &["get"]),
        ("/v1/memnodes", &["get", "post"]),
        ("/v1/memnodes/{id}", &["get", "delete"]),
        ("/v1/memnodes/{id}/heartbeat", &["post"]),
        ("/v1/memnodes/{id}/drain", &["post"]),
        ("/v1/leases", &["get", "post"]),
        ("/v1/leases/{id}", &["get", "delete"]),
        ("/v1/leases/{id}/renew", &["post"]),
        ("/v1/leases/{id}/adopt", &["post"]),
        ("/v1/tables", &["get", "post"]),
        ("/v1/tables/{name}", &["get", "delete"]),
        ("/v1/tables/{name}/reset", &["post"]),
        ("/v1/tables/{name}/grants", &["post"]),
        ("/v1/tables/{name}/chains", &["get", "post"]),
        ("/v1/tables/{name}/chains/{chain_id}/root", &["post"]),
        ("/v1/tables/{name}/chains/ids", &["post"]),
        ("/v1/tables/{name}/chains/directory", &["post"]),
        ("/v1/tables/{name}/chains/published", &["post"]),
        ("/v1/tables/{name}/chains/{chain_id}/tail", &["get", "put"]),
        ("/v1/tables/{name}/keys", &["get"]),
        ("/v1/tables/{name}/location", &["get"]),
        ("/v1/cluster/stats", &["get"]),
        ("/v1/cluster/history", &["get"]),
        ("/v1/accelerator", &["get"]),
        ("/v1/credentials", &["get", "post"]),
        ("/v1/credentials/{id}", &["delete"]),
        ("/v1/rereplication", &["get"]),
        ("/v1/tables/{name}/moves", &["post"]),
        ("/v1/tables/{name}/feed", &["put"]),
    ] {
        let item = paths
            .get(path)
            .unwrap_or_else(|| panic!("OpenAPI lacks {path}"));
        for m in methods {
            assert!(item.get(*m).is_some(), "OpenAPI lacks {m} {path}");
        }
    }
    assert_eq!(paths.len(), 31, "every route is documented, no more");
    assert!(doc["components"]["schemas"]["SetFeedRequest"].is_object());
    assert!(doc["components"]["schemas"]["FeedLayout"].is_object());
    assert!(doc["components"]["schemas"]["RereplicationList"].is_object());
    assert!(doc["components"]["schemas"]["MoveCopyRequest"].is_object());
    assert!(doc["components"]["schemas"]["DrainResponse"].is_object());
    assert!(doc["components"]["schemas"]["MemnodeState"].is_object());
    assert!(doc["components"]["schemas"]["TableMemory"].is_object());
    assert!(doc["components"]["schemas"]["InPlaceRequest"].is_object());
    assert!(doc["components"]["schemas"]["InPlaceInfo"].is_object());
    assert!(doc["components"]["schemas"]["CreateTableRequest"].is_object());
    assert!(doc["components"]["securitySchemes"]["bearer"].is_object());
}

#[test]
fn accelerator_is_advertised_when_configured() {
    let none = start(mem(), |_| {});
    assert_eq!(client(&none).accelerator().unwrap(), None);
    let r = client(&none)
        .request("GET", "/v1/accelerator", None)
        .unwrap();
    assert_eq!(r.status, 200);
    let doc: serde_json::Value = serde_json::from_slice(&r.body).unwrap();
    assert_eq!(doc, serde_json::json!({ "enabled": false }));

    let some = start(mem(), |c| {
        c.accelerator = Some("http://127.0.0.1:9400".into());
        c.accelerator_data = Some("127.0.0.1:4791".into());
    });
    let info = client(&some).accelerator().unwrap().expect("advertised");
    assert!(info.enabled);
    assert_eq!(info.admin_url.as_deref(), Some("http://127.0.0.1:9400"));
    assert_eq!(info.data_addr.as_deref(), Some("127.0.0.1:4791"));
}

#[test]
fn table_memory_that_cannot_be_zeroed_fails_the_create_and_changes_nothing() {
    let (server, scrubber) = start_recording(mem(), |_| {});
    *scrubber.fail.lock().unwrap() = Some("connection refused".into());
    let c = client(&server);
    c.register_memnode(&memnode("m", 4791, 1, 16 << 20))
        .unwrap();
    let free = || c.memnodes().unwrap()[0].free_bytes;
    let before = free();
    let e = c.create_table(&table("r", IndexKind::Race)).unwrap_err();
    assert_eq!(
        (e.status(), e.code()),
        (Some(503), Some("memnode_unavailable"))
    );
    assert!(e.to_string().contains("connection refused"), "{e}");
    assert_eq!(free(), before, "the directory's memory went back");
    assert_eq!(c.table("r").unwrap_err().status(), Some(404));
    // Once the memnode answers, the same request succeeds.
    *scrubber.fail.lock().unwrap() = None;
    c.create_table(&table("r", IndexKind::Race)).unwrap();
    assert_eq!(free(), before - (64 << 10));
}
