//! Scoped credentials over HTTP: what a table credential may and may not do, read-only
//! credentials, revocation and expiry, listings filtered by scope, credentials
//! surviving a restart, and table names that are refused.

mod common;

use std::sync::Arc;

use common::{client, memnode, start};
use metadata::ServerHandle;
use metadata::StoreConfig;
use metadata::api::{CreateLeaseRequest, CreateTableRequest, ErrorBody, IndexKind};
use metadata::client::MetadataClient;
use metadata::clock::FakeClock;
use metadata::store::MemStore;

use dmkv_api::credentials::{Access, CreateCredentialRequest, CredentialKind};

fn mem() -> StoreConfig {
    StoreConfig::Memory(MemStore::new())
}

fn clover(name: &str) -> CreateTableRequest {
    CreateTableRequest {
        name: name.into(),
        index: IndexKind::Clover,
        value_limit: 64,
        memnodes: None,
        replication: None,
        update_mode: None,
        inplace: None,
    }
}

fn scoped(tables: &[&str], access: Access) -> CreateCredentialRequest {
    CreateCredentialRequest {
        kind: CredentialKind::Table,
        tables: tables.iter().map(|t| (*t).to_owned()).collect(),
        access: Some(access),
        label: "test".into(),
        ..Default::default()
    }
}

/// A client of `server` presenting `secret`.
fn as_holder(server: &ServerHandle, secret: &str) -> MetadataClient {
    MetadataClient::new(&server.url())
        .unwrap()
        .with_token(Some(secret.to_owned()))
}

fn status_code(
    c: &MetadataClient,
    method: &'static str,
    path: &str,
    body: Option<&[u8]>,
) -> (u16, ErrorBody) {
    let r = c.request(method, path, body).unwrap();
    let body = serde_json::from_slice(&r.body).unwrap_or(ErrorBody {
        error: String::new(),
        code: String::new(),
    });
    (r.status, body)
}

fn lease_for(table: &str) -> CreateLeaseRequest {
    CreateLeaseRequest {
        client: "app".into(),
        bytes: 1 << 20,
        min_bytes: None,
        memnode: None,
        ttl_ms: None,
        table: Some(table.into()),
    }
}

#[test]
fn a_table_credential_reaches_its_table_only() {
    let server = start(mem(), |_| {});
    let root = client(&server);
    root.register_memnode(&memnode("m", 4791, 1, 64 << 20))
        .unwrap();
    root.create_table(&clover("a")).unwrap();
    root.create_table(&clover("b")).unwrap();
    let made = root
        .create_credential(&scoped(&["a"], Access::ReadWrite))
        .unwrap();
    assert!(made.secret.starts_with("dmkv_"));
    let app = as_holder(&server, &made.secret);

    // Its own table: describe, open chains, publish roots, look keys up, lease memory.
    assert_eq!(app.table("a").unwrap().name, "a");
    let chain = app.open_chain("a", b"k").unwrap();
    assert!(chain.created);
    assert_eq!(
        app.lookup_chain("a", b"k").unwrap().unwrap().chain_id,
        chain.chain_id
    );
    let lease = app.create_lease(&lease_for("a")).unwrap();
    app.renew(lease.lease_id, None).unwrap();
    assert_eq!(
        app.get_lease(lease.lease_id).unwrap().lease_id,
        lease.lease_id
    );
    assert_eq!(app.chain_keys("a", b"", None, 10).unwrap().keys.len(), 1);

    // Another table's routes: 403, naming the scope needed.
    for (method, path, body) in [
        ("GET", "/v1/tables/b", None),
        (
            "POST",
            "/v1/tables/b/chains",
            Some(&br#"{"key":"aw=="}"#[..]),
        ),
        ("GET", "/v1/tables/b/chains?key=aw%3D%3D", None),
        ("GET", "/v1/tables/b/keys", None),
        ("GET", "/v1/tables/b/chains/1/tail", None),
        ("GET", "/v1/tables/b/location?key=aw%3D%3D", None),
    ] {
        let (status, e) = status_code(&app, method, path, body);
        assert_eq!(
            (status, e.code.as_str()),
            (403, "forbidden"),
            "{method} {path}"
        );
        assert!(
            e.error.contains("\"b\"") && e.error.contains("credential"),
            "{}",
            e.error
        );
    }
    let e = app.create_lease(&lease_for("b")).unwrap_err();
    assert_eq!(e.status(), Some(403));
    // A lease of table b, taken by an admin, is out of reach too.
    let other = root.create_lease(&lease_for("b")).unwrap();
    assert_eq!(
        app.renew(other.lease_id, None).unwrap_err().status(),
        Some(403)
    );
    assert_eq!(app.free(other.lease_id).unwrap_err().status(), Some(403));

    // Nothing admin: dropping tables, creating them, credentials, memnodes.
    for (method, path, body) in [
        ("DELETE", "/v1/tables/a", None),
        (
            "POST",
            "/v1/tables",
            Some(&br#"{"name":"c","index":"clover","value_limit":64}"#[..]),
        ),
        ("POST", "/v1/tables/a/reset", None),
        ("POST", "/v1/credentials", Some(&br#"{"kind":"admin"}"#[..])),
        ("GET", "/v1/credentials", None),
        ("DELETE", "/v1/credentials/1", None),
        ("POST", "/v1/memnodes/1/drain", None),
        ("POST", "/v1/memnodes/1/heartbeat", None),
    ] {
        let (status, e) = status_code(&app, method, path, body);
        assert_eq!(status, 403, "{method} {path}");
        assert!(e.error.contains("admin"), "{}", e.error);
    }
    let e = app
        .create_lease(&CreateLeaseRequest {
            table: None,
            ..lease_for("a")
        })
        .unwrap_err();
    assert_eq!(e.status(), Some(403), "plain leases are for admins");

    // Listings show what the credential may see.
    let names: Vec<_> = app.tables().unwrap().into_iter().map(|t| t.name).collect();
    assert_eq!(names, vec!["a".to_owned()]);
    assert_eq!(root.tables().unwrap().len(), 2);
    let leases = app.leases(None).unwrap();
    assert!(leases.iter().all(|l| l.table.as_deref() == Some("a")) && !leases.is_empty());
    let nodes = app.memnodes().unwrap();
    assert_eq!(nodes.len(), 1);
    assert_eq!(nodes[0].regions.len(), 1, "the region queue pairs use");
    // Still there for the root.
    root.table("a").unwrap();
    root.drop_table("b").unwrap();
}

#[test]
fn a_read_only_credential_cannot_write() {
    let server = start(mem(), |_| {});
    let root = client(&server);
    root.register_memnode(&memnode("m", 4791, 1, 64 << 20))
        .unwrap();
    root.create_table(&clover("a")).unwrap();
    let writer = root.open_chain("a", b"k").unwrap();
    let made = root
        .create_credential(&scoped(&["a"], Access::Read))
        .unwrap();
    let reader = as_holder(&server, &made.secret);
    assert_eq!(reader.table("a").unwrap().name, "a");
    assert_eq!(
        reader.lookup_chain("a", b"k").unwrap().unwrap().chain_id,
        writer.chain_id
    );
    let tail = format!("/v1/tables/a/chains/{}/tail", writer.chain_id);
    let root_path = format!("/v1/tables/a/chains/{}/root", writer.chain_id);
    let hint = br#"{"memnode_id":1,"va":64}"#;
    for (method, path, body) in [
        (
            "POST",
            "/v1/tables/a/chains",
            Some(&br#"{"key":"aw=="}"#[..]),
        ),
        ("PUT", tail.as_str(), Some(&hint[..])),
        ("POST", root_path.as_str(), Some(&hint[..])),
    ] {
        let (status, e) = status_code(&reader, method, path, body);
        assert_eq!(status, 403, "{method} {path}");
        assert!(e.error.contains("read-write"), "{}", e.error);
    }
    assert_eq!(
        reader.create_lease(&lease_for("a")).unwrap_err().status(),
        Some(403)
    );
}

#[test]
fn prefixes_cover_the_tables_they_start() {
    let server = start(mem(), |_| {});
    let root = client(&server);
    for t in ["orders-eu", "orders-us", "ordersx"] {
        root.create_table(&clover(t)).unwrap();
    }
    let made = root
        .create_credential(&scoped(&["orders-*"], Access::Read))
        .unwrap();
    let app = as_holder(&server, &made.secret);
    let names: Vec<_> = app.tables().unwrap().into_iter().map(|t| t.name).collect();
    assert_eq!(names, vec!["orders-eu".to_owned(), "orders-us".to_owned()]);
    assert_eq!(app.table("ordersx").unwrap_err().status(), Some(403));
}

#[test]
fn revoked_credentials_fail_at_once_and_expired_ones_after_expiry() {
    let clock = FakeClock::new(1_000_000);
    let c2 = clock.clone();
    let server = start(mem(), move |c| c.clock = Arc::new(c2));
    let root = client(&server);
    root.create_table(&clover("a")).unwrap();
    let made = root
        .create_credential(&scoped(&["a"], Access::Read))
        .unwrap();
    let app = as_holder(&server, &made.secret);
    app.table("a").unwrap();
    root.revoke_credential(made.credential.id).unwrap();
    let (status, e) = status_code(&app, "GET", "/v1/tables/a", None);
    assert_eq!((status, e.code.as_str()), (401, "unauthorized"));
    assert!(e.error.contains("revoked"), "{}", e.error);
    assert!(root.credentials().unwrap().is_empty());
    assert_eq!(
        root.revoke_credential(made.credential.id)
            .unwrap_err()
            .status(),
        Some(404)
    );

    let short = root
        .create_credential(&CreateCredentialRequest {
            ttl_ms: Some(60_000),
            ..scoped(&["a"], Access::Read)
        })
        .unwrap();
    let app = as_holder(&server, &short.secret);
    app.table("a").unwrap();
    clock.advance(59_999);
    app.table("a").unwrap();
    clock.advance(1);
    let (status, e) = status_code(&app, "GET", "/v1/tables/a", None);
    assert_eq!(status, 401);
    assert!(e.error.contains("expired"), "{}", e.error);
    let listed = root.credentials().unwrap();
    assert!(listed[0].expired);
    assert_eq!(listed[0].last_used_ms, Some(1_000_000));
}

#[test]
fn admin_credentials_do_what_the_root_token_does() {
    let server = start(mem(), |_| {});
    let root = client(&server);
    let made = root
        .create_credential(&CreateCredentialRequest {
            kind: CredentialKind::Admin,
            label: "ops".into(),
            ..Default::default()
        })
        .unwrap();
    let ops = as_holder(&server, &made.secret);
    ops.create_table(&clover("t")).unwrap();
    let nested = ops
        .create_credential(&scoped(&["t"], Access::Read))
        .unwrap();
    assert_eq!(ops.credentials().unwrap().len(), 2);
    ops.revoke_credential(nested.credential.id).unwrap();
    ops.drop_table("t").unwrap();
    // The listing never shows secrets.
    let text = root.request("GET", "/v1/credentials", None).unwrap().text();
    assert!(!text.contains(&made.secret[5..]), "{text}");
    assert!(text.contains("\"label\":\"ops\""), "{text}");
}

#[test]
fn requests_without_a_token_reach_only_the_public_routes() {
    let server = start(mem(), |_| {});
    let anon = MetadataClient::new(&server.url()).unwrap();
    assert!(anon.health().unwrap().auth);
    for path in [
        "/metrics",
        "/v1/openapi.json",
        "/v1/accelerator",
        "/v1/cluster/stats",
        "/v1/cluster/history",
        "/dashboard",
    ] {
        assert_eq!(
            anon.request("GET", path, None).unwrap().status,
            200,
            "{path}"
        );
    }
    for path in [
        "/v1/tables",
        "/v1/memnodes",
        "/v1/leases",
        "/v1/credentials",
        "/v1/tables/a",
    ] {
        let (status, e) = status_code(&anon, "GET", path, None);
        assert_eq!(status, 401, "{path}");
        assert!(e.error.contains("Bearer"), "{}", e.error);
    }
    let wrong = as_holder(&server, "dmkv_not-a-credential");
    assert_eq!(status_code(&wrong, "GET", "/v1/tables", None).0, 401);
    // Public routes answer whatever secret comes with the request.
    assert_eq!(status_code(&wrong, "GET", "/healthz", None).0, 200);
    assert_eq!(status_code(&wrong, "GET", "/metrics", None).0, 200);
}

#[test]
fn credentials_survive_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let store = || StoreConfig::Sled(dir.path().join("db"));
    let server = start(store(), |_| {});
    let root = client(&server);
    root.create_table(&clover("a")).unwrap();
    let kept = root
        .create_credential(&scoped(&["a"], Access::ReadWrite))
        .unwrap();
    let revoked = root
        .create_credential(&scoped(&["a"], Access::Read))
        .unwrap();
    root.revoke_credential(revoked.credential.id).unwrap();
    server.shutdown();

    let server = start(store(), |_| {});
    let app = as_holder(&server, &kept.secret);
    assert_eq!(app.table("a").unwrap().name, "a");
    assert_eq!(
        as_holder(&server, &revoked.secret)
            .table("a")
            .unwrap_err()
            .status(),
        Some(401)
    );
    let listed = client(&server).credentials().unwrap();
    assert_eq!(listed.len(), 1);
    assert_eq!(listed[0].id, kept.credential.id);
    let next = client(&server)
        .create_credential(&scoped(&["a"], Access::Read))
        .unwrap();
    assert!(
        next.credential.id > revoked.credential.id,
        "ids are not reused"
    );
    server.shutdown();
}

#[test]
fn dot_names_and_other_bad_table_names_are_a_400() {
    let server = start(mem(), |_| {});
    let root = client(&server);
    let long = "x".repeat(65);
    for name in [
        ".",
        "..",
        "",
        "/",
        "a/b",
        "a\u{1}b",
        "tab\tle",
        long.as_str(),
    ] {
        let body = serde_json::json!({"name": name, "index": "clover", "value_limit": 64});
        let (status, e) = status_code(
            &root,
            "POST",
            "/v1/tables",
            Some(body.to_string().as_bytes()),
        );
        assert_eq!(
            (status, e.code.as_str()),
            (400, "invalid_table_name"),
            "{name:?}: {}",
            e.error
        );
    }
    for path in [
        "/v1/tables/%2E",
        "/v1/tables/%2E%2E",
        "/v1/tables/%2E%2E/chains?key=aw%3D%3D",
        "/v1/tables/a%01b",
    ] {
        let (status, e) = status_code(&root, "GET", path, None);
        assert_eq!(
            (status, e.code.as_str()),
            (400, "invalid_table_name"),
            "{path}"
        );
    }
    assert!(root.tables().unwrap().is_empty());
}

#[test]
fn the_openapi_document_lists_the_credential_routes_and_their_errors() {
    let doc = serde_json::to_value(metadata::http::openapi()).unwrap();
    let paths = &doc["paths"];
    for (path, method) in [
        ("/v1/credentials", "post"),
        ("/v1/credentials", "get"),
        ("/v1/credentials/{id}", "delete"),
    ] {
        let responses = &paths[path][method]["responses"];
        for status in ["401", "403"] {
            assert!(
                responses.get(status).is_some(),
                "{method} {path} lacks {status}"
            );
        }
    }
    for status in ["400", "404"] {
        let revoke = &paths["/v1/credentials/{id}"]["delete"]["responses"];
        assert!(revoke.get(status).is_some(), "DELETE lacks {status}");
    }
    assert!(
        paths["/v1/credentials"]["post"]["responses"]
            .get("400")
            .is_some()
    );
    let get_table = &paths["/v1/tables/{name}"]["get"]["responses"];
    for status in ["400", "401", "403", "404"] {
        assert!(
            get_table.get(status).is_some(),
            "GET /v1/tables/{{name}} lacks {status}"
        );
    }
    assert!(paths["/healthz"]["get"]["responses"].get("401").is_none());
}
